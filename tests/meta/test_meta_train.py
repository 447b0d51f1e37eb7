"""Meta-training: a short run, kill-with-SIGKILL-and-resume equality, a 2-worker process pool, PPO option.

Runs here are in-process (``workers=1``) unless a test is about the worker pool (``tests/meta/test_meta_workers.py``
holds the default, one worker per core): a pool's processes take seconds to start."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from meta.control import StepAction
from meta.control.parallel import ProcessMetaVecEnv, split_runs
from meta.control.training import (
    CHECKPOINT_NAME,
    HISTORY_NAME,
    POLICY_NAME,
    MetaAgentConfig,
    MetaTrainConfig,
    MetaTrainer,
)
from meta.rollout_length.env import MetaEnvConfig
from meta.rollout_length.features import FEATURE_NAMES
from rolloutlab.checkpoint import load_checkpoint
from rolloutlab.config import to_dict


def _config(delay: float = 0.0, **kwargs: object) -> MetaTrainConfig:
    env = MetaEnvConfig(budget=500, phase_length=100, inner="toy", toy={"delay": delay})
    agent = MetaAgentConfig(learning_starts=20, net_arch=[16])
    kwargs.setdefault("workers", 1)
    return MetaTrainConfig(env=env, agent=agent, **kwargs)  # type: ignore[arg-type]


def test_short_meta_training_writes_everything(tmp_path: Path) -> None:
    cfg = _config(episodes=10, runs_per_round=4)
    summary = MetaTrainer(cfg, tmp_path, show_progress=False).train()
    assert cfg.rounds == 3 and summary["episodes_done"] == 12  # rounded up to whole rounds
    assert summary["inner_env_steps"] == 12 * 500
    for name in (CHECKPOINT_NAME, POLICY_NAME, HISTORY_NAME, "config.yaml", "meta_training.png"):
        assert (tmp_path / name).is_file(), name
    history = json.loads((tmp_path / HISTORY_NAME).read_text())["history"]
    assert [h["round"] for h in history] == [0] * 4 + [1] * 4 + [2] * 4
    assert all(len(h["k_schedule"]) == 5 for h in history)
    # The meta-return telescopes: episode return = (final J - J_0) / 200 with J_0 = -200 on MountainCar.
    assert all(h["return"] == pytest.approx((h["final_j"] + 200.0) / 200.0) for h in history)
    policy = load_checkpoint(tmp_path / POLICY_NAME, kind="meta-policy")
    assert policy["config"]["env"]["budget"] == 500


def test_resuming_a_finished_run_changes_nothing(tmp_path: Path) -> None:
    cfg = _config(episodes=4, runs_per_round=4)
    first = MetaTrainer(cfg, tmp_path, show_progress=False).train()
    saved = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    logs = sorted(p.name for p in tmp_path.glob("sb3*"))
    again = MetaTrainer.resume(tmp_path, show_progress=False).train()
    timing = ("wall_seconds", "inner_steps_per_second")
    assert {k: v for k, v in again.items() if k not in timing} == {k: v for k, v in first.items() if k not in timing}
    assert again["sessions"] == 1
    assert again["wall_seconds"] == load_checkpoint(tmp_path / CHECKPOINT_NAME)["state"]["wall_seconds"]
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == saved
    assert sorted(p.name for p in tmp_path.glob("sb3*")) == logs == ["sb3"]


def test_a_finished_run_is_extended_by_a_larger_size_and_never_shortened(tmp_path: Path) -> None:
    cfg = _config(episodes=4, runs_per_round=4)
    MetaTrainer(cfg, tmp_path, show_progress=False).train()
    first = json.loads((tmp_path / HISTORY_NAME).read_text())["history"]
    with pytest.raises(ValueError, match="extended, not shortened"):
        MetaTrainer.resume(tmp_path, show_progress=False, episodes=2)
    summary = MetaTrainer.resume(tmp_path, show_progress=False, episodes=8).train()
    assert summary["episodes_done"] == 8 and summary["sessions"] == 2
    assert summary["history"][:4] == first and [h["round"] for h in summary["history"][4:]] == [1] * 4
    saved = load_checkpoint(tmp_path / CHECKPOINT_NAME)
    assert saved["config"]["episodes"] == 8 and saved["state"]["rounds_done"] == 2
    # The extension's inner runs are new ones (the next round's seeds), not a replay of the first round.
    assert [h["final_j"] for h in summary["history"][4:]] != [h["final_j"] for h in first]


def _policy(path: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(path / CHECKPOINT_NAME)["state"]["policy"]


def test_resume_after_sigkill_matches_uninterrupted_run(tmp_path: Path) -> None:
    """Killed and resumed with two worker processes, against an uninterrupted run in one process: the same policy
    and history (a round's runs do not depend on the worker count, and resume restarts at a round boundary)."""
    cfg = _config(delay=0.05, episodes=20, runs_per_round=4, workers=2)
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    MetaTrainer(dataclasses.replace(cfg, workers=1), straight, show_progress=False).train()

    code = (
        "import json, sys\n"
        "from meta.control.training import MetaTrainConfig, MetaTrainer\n"
        "from rolloutlab.config import from_dict\n"
        "cfg = from_dict(MetaTrainConfig, json.loads(sys.argv[1]))\n"
        "MetaTrainer(cfg, sys.argv[2], show_progress=False).train()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, json.dumps(to_dict(cfg)), str(killed)])
    deadline = time.monotonic() + 120
    while not (killed / CHECKPOINT_NAME).exists():
        assert proc.poll() is None, "training exited before its first checkpoint"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.2)  # let it get into the next round
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    rounds_at_kill = load_checkpoint(killed / CHECKPOINT_NAME)["state"]["rounds_done"]
    assert 1 <= rounds_at_kill < cfg.rounds

    summary = MetaTrainer.resume(killed, show_progress=False).train()
    assert summary["episodes_done"] == 20 and summary["sessions"] == 2 and summary["workers"] == 2
    a, b = _policy(straight), _policy(killed)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (
        json.loads((straight / HISTORY_NAME).read_text())["history"]
        == json.loads((killed / HISTORY_NAME).read_text())["history"]
    )


def test_split_runs() -> None:
    assert split_runs(5, 2) == [range(0, 3), range(3, 5)]
    assert split_runs(4, 4) == [range(i, i + 1) for i in range(4)]
    with pytest.raises(ValueError):
        split_runs(2, 3)


def test_two_worker_process_pool(tmp_path: Path) -> None:
    env_cfg = MetaEnvConfig(budget=300, phase_length=100, inner="toy", k_init=0)
    venv = ProcessMetaVecEnv(env_cfg, num_runs=4, workers=2, seed=1)
    try:
        obs = venv.reset()
        assert obs.shape == (4, len(FEATURE_NAMES))
        gravities = [info["physics"]["gravity"] for info in venv.reset_infos]
        assert len(set(gravities)) == 4  # every run of the round has its own physics
        for _ in range(3):
            venv.step_async(np.array([StepAction.UP, StepAction.UP, StepAction.DOWN, StepAction.NOOP]))
            obs, _rewards, dones, infos = venv.step_wait()
        assert dones.all()
        assert [info["k_schedule"] for info in infos] == [[1, 2, 3], [1, 2, 3], [0, 0, 0], [0, 0, 0]]
    finally:
        venv.close()
    assert not any(p.is_alive() for p in venv.processes)

    cfg = _config(episodes=8, runs_per_round=4, workers=2)
    summary = MetaTrainer(cfg, tmp_path, show_progress=False).train()
    assert summary["episodes_done"] == 8


def test_ppo_meta_agent_trains(tmp_path: Path) -> None:
    cfg = _config(episodes=8, runs_per_round=4)
    cfg.agent.algo = "ppo"
    summary = MetaTrainer(cfg, tmp_path, show_progress=False).train()
    assert summary["episodes_done"] == 8
    assert load_checkpoint(tmp_path / POLICY_NAME)["state"]["algo"] == "ppo"


def test_short_meta_training_on_the_real_dyna_learner(tmp_path: Path) -> None:
    tiny = {
        "net_arch": [16],
        "num_model_rollouts": 20,
        "model_train_freq": 50,
        "rollout_freq": 50,
        "eval_episodes": 1,
        "buffer_size": 100,
        "model": {"hidden_size": 16, "max_epochs": 2, "ensemble_size": 3, "num_elites": 2},
    }
    env = MetaEnvConfig(env_id="MountainCar-v0", budget=100, phase_length=50, dyna=tiny)
    cfg = MetaTrainConfig(
        env=env, agent=MetaAgentConfig(learning_starts=2, net_arch=[16]), episodes=2, runs_per_round=2
    )
    summary = MetaTrainer(cfg, tmp_path, show_progress=False).train()
    assert summary["episodes_done"] == 2 and summary["inner_env_steps"] == 200
    assert all(len(h["k_schedule"]) == 2 for h in summary["history"])


def test_ray_local_cluster_matches_the_process_pool(tmp_path: Path) -> None:
    ray = pytest.importorskip(
        "ray", reason="the distributed extra (make test installs it): pip install -e .[distributed]"
    )
    pool = MetaTrainer(_config(episodes=8, runs_per_round=4, workers=2), tmp_path / "pool", show_progress=False).train()
    cfg = _config(episodes=8, runs_per_round=4, workers=2, ray_address="local")
    try:
        on_ray = MetaTrainer(cfg, tmp_path / "ray", show_progress=False).train()
        assert ray.cluster_resources().get("CPU") == 2  # ray.init(num_cpus=2): the local cluster is the two workers
    finally:
        ray.shutdown()
    assert on_ray["episodes_done"] == pool["episodes_done"] == 8
    # Same seeds, same chunks, same streams: the same inner runs, meta-rewards and learned schedules.
    assert on_ray["history"] == pool["history"]
    policies = [load_checkpoint(tmp_path / d / POLICY_NAME)["state"]["policy"] for d in ("pool", "ray")]
    assert all(torch.equal(policies[0][k], policies[1][k]) for k in policies[0])
