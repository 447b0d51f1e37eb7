"""Meta-training's worker pool: a round's runs, and so meta-training, do not depend on the worker count.

Every worker draws the whole round from ``default_rng([seed, round])`` and builds only its share of the runs, with the
seeds those runs have in the whole round; these tests hold one process (W = 1) against shares and worker pools.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from meta.control.mdp import MetaVecEnv
from meta.control.parallel import ProcessMetaVecEnv, available_cores, resolve_workers, split_runs
from meta.control.training import HISTORY_NAME, MetaAgentConfig, MetaTrainConfig, MetaTrainer
from meta.rollout_length.env import MetaEnvConfig, RolloutLengthProblem
from rolloutlab.checkpoint import load_checkpoint

#: A real Dyna-DQN inner learner at a size that runs a round in about a second.
TINY_DYNA: dict[str, Any] = {
    "net_arch": [16],
    "learning_starts": 20,
    "num_model_rollouts": 20,
    "model_train_freq": 50,
    "rollout_freq": 25,
    "eval_episodes": 1,
    "buffer_size": 200,
    "train_model_when_k0": True,
    "model": {"hidden_size": 16, "max_epochs": 2, "ensemble_size": 3, "num_elites": 2},
}
#: Wall-clock measurements: the only feedback that differs between two runs of the same inner run.
TIMING_KEYS = ("seconds", "rollout_seconds")


def _dyna_env(**dyna: Any) -> MetaEnvConfig:
    return MetaEnvConfig(env_id="MountainCar-v0", budget=100, phase_length=50, k_cap=4, dyna={**TINY_DYNA, **dyna})


def _plain(value: Any) -> Any:
    """``value`` as comparable plain data: arrays as lists, NaN as a string, wall-clock timings dropped."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, float | np.floating) and math.isnan(value):
        return "nan"
    return value.item() if isinstance(value, np.generic) else value


def _rounds(venv: Any, actions: list[list[int]], rounds: int) -> list[Any]:
    """Everything ``venv`` shows over ``rounds`` whole rounds under fixed per-run actions (one list per phase)."""
    seen: list[Any] = [venv.reset(), _plain(venv.reset_infos)]
    for _ in range(rounds):
        for phase_actions in actions:
            venv.step_async(np.asarray(phase_actions))
            obs, rewards, dones, infos = venv.step_wait()
            seen += [obs, rewards, dones, _plain(infos), _plain(venv.reset_infos)]
    return seen


def _assert_same(a: list[Any], b: list[Any], exact: bool = True) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        if isinstance(x, np.ndarray):
            if exact:
                np.testing.assert_array_equal(x, y)
            else:
                np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-4)
        elif exact:
            assert x == y
        else:
            _assert_close_plain(x, y)


def _assert_close_plain(x: Any, y: Any) -> None:
    if isinstance(x, dict):
        assert x.keys() == y.keys()
        for k in x:
            _assert_close_plain(x[k], y[k])
    elif isinstance(x, list):
        assert len(x) == len(y)
        for u, v in zip(x, y, strict=True):
            _assert_close_plain(u, v)
    elif isinstance(x, float):
        assert x == pytest.approx(y, rel=1e-4, abs=1e-4)
    else:
        assert x == y


def test_a_share_of_a_round_holds_the_runs_of_the_whole_round() -> None:
    cfg = MetaEnvConfig(budget=300, phase_length=100, inner="toy", k_init=0)
    actions = [[2, 0, 1, 2, 0], [0, 2, 2, 1, 1], [1, 1, 0, 0, 2]]
    whole = _rounds(MetaVecEnv(cfg, num_runs=5, seed=3), actions, rounds=2)
    shares = split_runs(5, 2)
    parts = [
        _rounds(MetaVecEnv(cfg, num_runs=5, seed=3, runs=share), [a[share.start : share.stop] for a in actions], 2)
        for share in shares
    ]
    for i, item in enumerate(whole):
        if isinstance(item, np.ndarray):
            np.testing.assert_array_equal(item, np.concatenate([part[i] for part in parts]))
        else:
            assert item == [x for part in parts for x in part[i]]
    with pytest.raises(ValueError, match=r"runs must be a non-empty range inside range\(5\)"):
        MetaVecEnv(cfg, num_runs=5, runs=range(4, 6))


def test_a_share_of_the_dyna_learner_trains_the_same_runs_as_the_whole_learner() -> None:
    """Run i of a share is run i of the one learner W = 1 builds: its physics, its seed, its Q-network after a phase
    and its feedback, bit for bit (batched Dyna-DQN's runs do not depend on the other runs of their batch)."""
    cfg = _dyna_env()
    whole, share = RolloutLengthProblem(cfg), RolloutLengthProblem(cfg)
    whole.start(4, np.random.default_rng([0, 0]))
    share.start(4, np.random.default_rng([0, 0]), range(1, 3))
    assert share.physics == whole.physics[1:3]
    assert share.learner.run_seeds == whole.learner.run_seeds[1:3]  # type: ignore[union-attr]
    fb_whole, _ = whole.run_phase(np.asarray([2, 2, 2, 2]), 0)
    fb_share, _ = share.run_phase(np.asarray([2, 2]), 0)
    assert _plain(fb_share) == _plain(fb_whole[1:3])
    q_whole, q_share = whole.learner.q.state_dict(), share.learner.q.state_dict()  # type: ignore[union-attr]
    assert all(torch.equal(q_whole[k][1:3], q_share[k]) for k in q_whole)


@pytest.mark.parametrize("batched_models", [False, True])
def test_dyna_rounds_do_not_depend_on_the_worker_count(batched_models: bool) -> None:
    """Two whole rounds of three real Dyna-DQN runs (split 2 + 1 over two processes) against one process: the same
    observations, rewards and infos, bit for bit with per-run world models; with the run-axis world model
    (``batched_models``) its arithmetic may differ with the number of runs it holds, so to float32 rounding."""
    cfg = _dyna_env(batched_models=batched_models)
    actions = [[2, 1, 0], [0, 2, 2]]
    one = _rounds(MetaVecEnv(cfg, num_runs=3, seed=5), actions, rounds=2)
    pool = ProcessMetaVecEnv(cfg, num_runs=3, workers=2, seed=5)
    try:
        two = _rounds(pool, actions, rounds=2)
    finally:
        pool.close()
    _assert_same(one, two, exact=not batched_models)


def _toy_config(**kwargs: Any) -> MetaTrainConfig:
    env = MetaEnvConfig(budget=300, phase_length=100, inner="toy")
    return MetaTrainConfig(env=env, agent=MetaAgentConfig(learning_starts=8, net_arch=[16]), **kwargs)


def test_meta_training_with_two_workers_is_meta_training_with_one(tmp_path: Path) -> None:
    one = MetaTrainer(_toy_config(episodes=12, runs_per_round=3, workers=1), tmp_path / "one", show_progress=False)
    two = MetaTrainer(_toy_config(episodes=12, runs_per_round=3, workers=2), tmp_path / "two", show_progress=False)
    a, b = one.train(), two.train()
    assert (a["workers"], b["workers"]) == (1, 2)
    assert a["history"] == b["history"]
    policies = [load_checkpoint(d / "meta_checkpoint.pt")["state"]["policy"] for d in (one.run_dir, two.run_dir)]
    assert all(torch.equal(policies[0][k], policies[1][k]) for k in policies[0])


def test_workers_default_to_one_per_core_and_are_recorded(tmp_path: Path) -> None:
    cfg = _toy_config(episodes=2, runs_per_round=2)
    assert cfg.workers == 0 and cfg.resolved_workers == min(available_cores(), 2)
    summary = MetaTrainer(cfg, tmp_path, show_progress=False).train()
    assert summary["workers"] == cfg.resolved_workers
    assert load_checkpoint(tmp_path / "meta_checkpoint.pt")["state"]["workers"] == cfg.resolved_workers
    # A resumed run takes a new worker count (its results do not depend on it) and reports it.
    resumed = MetaTrainer.resume(tmp_path, show_progress=False, episodes=4, workers=1)
    assert resumed.train()["workers"] == 1
    assert (tmp_path / HISTORY_NAME).is_file()
    assert resolve_workers(0, 1) == 1 and resolve_workers(3, 8) == 3


def test_bad_worker_counts_are_refused_with_the_setting_named() -> None:
    with pytest.raises(ValueError, match=r"workers must be between 0 .* and runs_per_round=2 .*got 3"):
        _toy_config(runs_per_round=2, workers=3)
    with pytest.raises(ValueError, match="got -1"):
        _toy_config(workers=-1)
    with pytest.raises(ValueError, match="runs_per_round must be >= 1, got 0"):
        _toy_config(runs_per_round=0)


def test_available_cores_reads_the_affinity_mask(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    assert available_cores() == 3
    assert resolve_workers(0, 8) == 3 and resolve_workers(0, 2) == 2
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert available_cores() == 6


def test_the_speed_script_times_whole_rounds_on_two_workers() -> None:
    """``experiments/speed.py``'s ``two_workers`` measurement, on the toy learner so that it takes seconds: rounds
    through the meta vector env on one process and on two workers, per meta-episode, against the target."""
    from script_modules import REPO, load_script

    speed = load_script(REPO / "experiments" / "speed.py")
    env = MetaEnvConfig(budget=400, phase_length=100, inner="toy", toy={"delay": 0.01})
    result = speed.time_meta_rounds_on_workers(env, runs=3, budget=400, schedule=[0, 2, 4, 8], repeats=2)
    assert len(result["a_all_s"]) == len(result["b_all_s"]) == 2
    assert result["a_s_per_meta_episode"] == pytest.approx(float(np.median(result["a_all_s"])) / 3)
    assert result["speedup"] == pytest.approx(result["a_s_per_meta_episode"] / result["b_s_per_meta_episode"])
    assert result["met"] == (result["speedup"] >= speed.TARGETS["meta_round"]["speedup"])
    assert "2 worker processes" in result["settings"]
