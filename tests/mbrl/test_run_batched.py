"""World models of many runs as one batched network: fits and lookahead equal the per-run path, and a run's results
do not depend on the other runs of its batch."""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Sequence

import gymnasium as gym
import numpy as np
import pytest
import torch

from mbrl.algorithms.dyna import BatchedDynaDQN, DynaConfig
from mbrl.model_env import ModelEnv
from mbrl.models import DynamicsModel, ModelConfig
from mbrl.models.run_batched import can_fit_run_batched, fit_run_batched
from mbrl.run_batched_env import RunBatchedModelEnv
from mbrl.termination import termination_fn

Dataset = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]

#: Small enough for the suite, with three hidden layers as Dyna's ensemble, and early stopping that binds.
CFG = ModelConfig(
    ensemble_size=4,
    num_elites=2,
    hidden_size=16,
    num_layers=3,
    batch_size=32,
    min_train_steps=20,
    patience=2,
    patience_steps=10,
    max_epochs=40,
)


def _pendulum(n: int, seed: int) -> Dataset:
    """``n`` transitions of Pendulum-v1 under uniformly random actions."""
    env = gym.make("Pendulum-v1")
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    rows = []
    for _ in range(n):
        action = env.action_space.sample()
        nxt, reward, terminated, truncated, _ = env.step(action)
        rows.append((obs, action, float(reward), nxt, bool(terminated)))
        obs = nxt if not (terminated or truncated) else env.reset()[0]
    o, a, r, nx, t = (np.array(x) for x in zip(*rows, strict=True))
    return o, a, r, nx, t


def _weights(model: DynamicsModel) -> dict[str, torch.Tensor]:
    return {name: value.clone() for name, value in model.ensemble.state_dict().items()}


def _assert_same_model(a: DynamicsModel, b: DynamicsModel, exact: bool = False) -> None:
    """The same model: the same normalizers, elites and generator state (the same draws, in the same number), and
    weights equal to float32 rounding (``exact``: bit for bit)."""
    for (name, x), y in zip(_weights(a).items(), _weights(b).values(), strict=True):
        if exact or name == "elite_idx":
            assert torch.equal(x, y), name
        else:
            torch.testing.assert_close(y, x, rtol=1e-4, atol=1e-6, msg=name)
    np.testing.assert_array_equal(a.input_normalizer.mean, b.input_normalizer.mean)
    np.testing.assert_array_equal(a.output_normalizer.std, b.output_normalizer.std)
    assert a._rng.bit_generator.state == b._rng.bit_generator.state


def _assert_same_metrics(a: dict[str, float], b: dict[str, float]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if math.isnan(a[key]):
            assert math.isnan(b[key]), key
        elif key.startswith("model/holdout") or key == "model/train_loss":
            assert b[key] == pytest.approx(a[key], rel=1e-3, abs=1e-6), key
        else:  # steps, epochs, sizes, fallbacks
            assert a[key] == b[key], key


@pytest.mark.parametrize("sizes", [(300, 300, 300), (300, 450, 120)])
def test_a_batched_fit_leaves_every_model_as_its_own_fit_would(sizes: tuple[int, ...]) -> None:
    """Equal buffers, and buffers of different sizes (other epoch lengths, last minibatches and holdouts, so runs
    score and stop at different steps and leave the batch one by one); two fits in a row (a warm refit under a new
    normalizer). The same draws, steps, stops and elites; weights equal to float32 rounding (CPU batched matmul and
    reduction kernels may round a run's slice of a larger batch differently in the last bit)."""
    seeds = [3, 4, 5]
    alone = [DynamicsModel(3, 1, False, CFG, seed=s) for s in seeds]
    together = [DynamicsModel(3, 1, False, CFG, seed=s) for s in seeds]
    for round_ in range(2):
        data = [_pendulum(n + 100 * round_, seed=10 * s + round_) for n, s in zip(sizes, seeds, strict=True)]
        expected = [m.fit(*d) for m, d in zip(alone, data, strict=True)]
        got = fit_run_batched(together, data)
        steps = {m["model/train_steps"] for m in expected}
        for a, b, ma, mb in zip(alone, together, expected, got, strict=True):
            _assert_same_model(a, b)
            _assert_same_metrics(ma, mb)
            assert b.fitted
    if len(set(sizes)) > 1:
        assert len(steps) > 1  # the runs did stop at different steps


def test_a_run_fitted_in_a_batch_does_not_depend_on_the_other_runs() -> None:
    """Run 7 beside one other run and between two others (other data, other stopping steps): the same fit, to float32
    rounding (the batch's size and the run's place in it may change the last bit of a matmul, nothing else)."""
    data = _pendulum(300, seed=1)
    first = DynamicsModel(3, 1, False, CFG, seed=7)
    m_first = fit_run_batched([first, DynamicsModel(3, 1, False, CFG, seed=8)], [data, _pendulum(200, seed=2)])
    second = DynamicsModel(3, 1, False, CFG, seed=7)
    others = [DynamicsModel(3, 1, False, CFG, seed=s) for s in (9, 10)]
    m_second = fit_run_batched([others[0], second, others[1]], [_pendulum(500, seed=3), data, _pendulum(90, seed=4)])
    _assert_same_model(first, second)
    _assert_same_metrics(m_first[0], m_second[1])


def test_a_capped_fit_and_the_fused_optimizer_agree_with_the_per_run_path() -> None:
    capped = dataclasses.replace(CFG, max_train_steps=25, min_train_steps=0, score_every_steps=4)
    data = [_pendulum(200, seed=s) for s in (1, 2)]
    for cfg in (capped, dataclasses.replace(capped, fused_optimizer=True)):
        alone = [DynamicsModel(3, 1, False, cfg, seed=s) for s in (1, 2)]
        together = [DynamicsModel(3, 1, False, cfg, seed=s) for s in (1, 2)]
        expected = [m.fit(*d) for m, d in zip(alone, data, strict=True)]
        for a, b, ma, mb in zip(alone, together, expected, fit_run_batched(together, data), strict=True):
            _assert_same_model(a, b)
            _assert_same_metrics(ma, mb)
            assert mb["model/train_steps"] == 25


def test_a_run_whose_loss_is_not_finite_falls_back_alone() -> None:
    models = [DynamicsModel(3, 1, False, CFG, seed=s) for s in (1, 2)]
    fit_run_batched(models, [_pendulum(200, seed=s) for s in (1, 2)])
    alone = copy.deepcopy(models)
    for model in (models[0], alone[0]):
        with torch.no_grad():
            model.ensemble.hidden[1].weight.mul_(1e30)  # diverged weights: the first loss is not finite
    data = [_pendulum(300, seed=s) for s in (3, 4)]
    expected = [m.fit(*d) for m, d in zip(alone, data, strict=True)]
    got = fit_run_batched(models, data)
    assert got[0]["model/restored_after_nan"] == 1.0 and got[1]["model/restored_after_nan"] == 0.0
    _assert_same_model(alone[0], models[0], exact=True)  # the last good model, as it was
    _assert_same_model(alone[1], models[1])
    _assert_same_metrics(expected[0], got[0])
    _assert_same_metrics(expected[1], got[1])


def test_only_learned_models_of_one_kind_are_fitted_together() -> None:
    plain = DynamicsModel(3, 1, False, CFG, seed=0)
    assert can_fit_run_batched([plain, DynamicsModel(3, 1, False, CFG, seed=1)])
    assert not can_fit_run_batched([plain, DynamicsModel(3, 1, False, dataclasses.replace(CFG, hidden_size=8))])
    assert not can_fit_run_batched([DynamicsModel(3, 1, False, dataclasses.replace(CFG, learned_termination=True))])
    with pytest.raises(ValueError, match="one by one"):
        fit_run_batched([plain, object()], [_pendulum(10, 0)] * 2)  # type: ignore[list-item]


def _acrobot(n: int, seed: int) -> Dataset:
    env = gym.make("Acrobot-v1")
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        action = int(rng.integers(3))
        nxt, reward, terminated, truncated, _ = env.step(action)
        rows.append((obs, action, float(reward), nxt, bool(terminated)))
        obs = nxt if not (terminated or truncated) else env.reset()[0]
    o, a, r, nx, t = (np.array(x) for x in zip(*rows, strict=True))
    return o, a, r, nx, t


@pytest.mark.parametrize("expectation", [True, False])
def test_batched_lookahead_equals_each_runs_own_lookahead(expectation: bool) -> None:
    """Three runs with their own models, Q-functions, generators and horizons (so runs leave the batch as their
    horizons end). With the elites' average (what the meta-training presets use) the values and disagreements are bit
    for bit those of each run's own ModelEnv; with one random elite per row (the same draws) they agree to float32
    rounding: a row's matmul is then part of a differently shaped product than in the per-run grouping."""
    cfg = dataclasses.replace(CFG, ensemble_size=4, num_elites=3, max_epochs=5)
    models = [DynamicsModel(6, 3, True, cfg, seed=s) for s in range(3)]
    data = [_acrobot(200, seed=s) for s in range(3)]
    for model, d in zip(models, data, strict=True):
        model.fit(*d)
    term = termination_fn("Acrobot-v1")
    weights = [torch.randn(6, 3, generator=torch.Generator().manual_seed(s)) for s in range(3)]

    def q_fn(run: int) -> Callable[[np.ndarray], np.ndarray]:
        return lambda obs: (torch.as_tensor(obs) @ weights[run]).numpy()

    def run_q(runs: Sequence[int], obs: np.ndarray) -> np.ndarray:
        return np.stack([q_fn(i)(o) for i, o in zip(runs, obs, strict=True)])

    obs = np.stack([d[0][:2] for d in data]).astype(np.float32)
    horizons = [3, 1, 5]
    spread = np.zeros((3, 2, 3))
    expected = np.stack(
        [
            ModelEnv(m, term, 6, (), np.int64).lookahead_values(
                obs[i], 3, q_fn(i), horizons[i], 0.99, np.random.default_rng(i), expectation, spread[i]
            )
            for i, m in enumerate(models)
        ]
    )
    batched = RunBatchedModelEnv(models, term)
    got_spread = np.zeros((3, 2, 3))
    rngs = [np.random.default_rng(i) for i in range(3)]
    got = batched.lookahead_values([0, 1, 2], obs, run_q, horizons, 0.99, rngs, expectation, got_spread)
    if expectation:
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(got_spread, spread)
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got_spread, spread, rtol=1e-5, atol=1e-7)
    # A refit changes the weights, elites and normalizers the batched environment stacked: it sees the new ones.
    models[1].fit(*_acrobot(300, seed=9))
    refit = ModelEnv(models[1], term, 6, (), np.int64).lookahead_values(obs[1], 3, q_fn(1), 2, 0.99, None, True)  # type: ignore[arg-type]
    got_refit = batched.lookahead_values([1], obs[1:2], run_q, [2], 0.99, [np.random.default_rng(0)], True)
    np.testing.assert_array_equal(got_refit[0], refit)
    # Run 2 alone (a batch of one) and beside run 0 only: the same values, bit for bit.
    for subset in ([2], [0, 2]):
        rngs = [np.random.default_rng(i) for i in subset]
        part = batched.lookahead_values(
            subset, obs[subset], run_q, [horizons[i] for i in subset], 0.99, rngs, expectation
        )
        np.testing.assert_array_equal(part[-1], got[2])


def _dyna_cfg(**overrides: object) -> DynaConfig:
    values: dict[str, object] = {
        "budget": 400,
        "phase_length": 200,
        "learning_starts": 50,
        "buffer_size": 1000,
        "net_arch": [16, 16],
        "model_train_freq": 100,
        "rollout_freq": 50,
        "num_model_rollouts": 30,
        "eval_episodes": 1,
        "model": dataclasses.replace(CFG, ensemble_size=3, num_elites=2, max_epochs=10),
        "model_use": "lookahead",
        "lookahead_expectation": True,
        "lookahead_trust": 2.0,
    }
    values.update(overrides)
    return DynaConfig.for_env("Acrobot-v1", **values)


def _run(cfg: DynaConfig, seeds: list[int], ks: list[list[int]]) -> tuple[BatchedDynaDQN, list[list[dict[str, float]]]]:
    # Episodes of at most 100 steps keep the greedy evaluations and the model episodes of the feedback short.
    env_fns = [lambda: gym.make("Acrobot-v1", max_episode_steps=100)] * len(seeds)
    algo = BatchedDynaDQN(env_fns, cfg, seed=0, run_seeds=seeds)
    return algo, [algo.run_phase(phase_ks) for phase_ks in ks]


def _same_feedback(a: dict[str, float], b: dict[str, float]) -> None:
    """Equal feedback to float32 rounding (the models are equal to rounding, and so is imagined data), but for the
    model-episode errors: whole greedy episodes in the model (up to 500 steps of Acrobot's chaotic dynamics under a
    Q-function trained on imagined data) amplify last-bit differences into visibly different returns."""
    assert a.keys() == b.keys()
    for key in a:
        if key in ("seconds", "rollout_seconds", "model_return_error", "model_length_error"):
            continue
        if math.isnan(a[key]):
            assert math.isnan(b[key]), key
        else:
            assert b[key] == pytest.approx(a[key], rel=1e-3, abs=1e-6), key


@pytest.mark.parametrize("model_use", ["lookahead", "dyna"])
def test_batched_models_change_nothing_in_a_dyna_run(model_use: str) -> None:
    """A short Dyna-DQN run (refits, lookahead or imagined rollouts, feedback) with ``batched_models`` on and off, and
    run 1 beside other runs: the same actions, Q-networks and returns, the model's errors equal to rounding."""
    ks = [[0, 2, 3], [2, 1, 0]]
    per_run, fb_per_run = _run(_dyna_cfg(model_use=model_use), [5, 6, 7], ks)
    batched, fb_batched = _run(_dyna_cfg(model_use=model_use, batched_models=True), [5, 6, 7], ks)
    for x, y in zip(per_run.q.parameters(), batched.q.parameters(), strict=True):
        torch.testing.assert_close(y, x, rtol=1e-4, atol=1e-6)
    for phase_a, phase_b in zip(fb_per_run, fb_batched, strict=True):
        for a, b in zip(phase_a, phase_b, strict=True):
            _same_feedback(a, b)
    assert batched._batched_env is not None and per_run._batched_env is None
    if model_use == "lookahead":
        assert batched._batched_env._cache  # it looked ahead through the batched environment
    else:
        assert fb_batched[0][1]["model_transitions"] > 0
    beside, fb_beside = _run(_dyna_cfg(model_use=model_use, batched_models=True), [9, 6], [[1, 2], [3, 1]])
    for x, y in zip(batched.q.parameters(), beside.q.parameters(), strict=True):
        torch.testing.assert_close(y[1], x[1], rtol=1e-4, atol=1e-6)
    for phase_a, phase_b in zip(fb_batched, fb_beside, strict=True):
        _same_feedback(phase_a[1], phase_b[1])


@pytest.mark.parametrize("deterministic", [False, True])
def test_batched_imagined_rollouts_equal_each_runs_own(deterministic: bool) -> None:
    """Three runs' rollouts (their own starts, horizons, epsilon-greedy policies and generators; a termination rule
    that ends samples at different steps, so the runs' row counts differ) stepped together: the same stored
    transitions and statistics as each run's own ModelEnv.rollout, to float32 rounding, and the generators left in the
    same state."""
    cfg = dataclasses.replace(CFG, ensemble_size=4, num_elites=3, max_epochs=5)
    models = [DynamicsModel(6, 3, True, cfg, seed=s) for s in range(3)]
    data = [_acrobot(200, seed=s) for s in range(3)]
    for model, d in zip(models, data, strict=True):
        model.fit(*d)

    def ends(obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
        return np.abs(next_obs[:, 4]) > 0.3  # the first link turning fast

    envs = [ModelEnv(m, ends, 6, (), np.int64) for m in models]
    horizons = [4, 2, 6]

    def policy(rng: np.random.Generator) -> Callable[[np.ndarray], np.ndarray]:
        return lambda obs: np.where(rng.random(obs.shape[0]) < 0.5, rng.integers(0, 3, obs.shape[0]), 1)

    starts = [d[0][: 40 + 10 * i].astype(np.float32) for i, d in enumerate(data)]
    rngs = [np.random.default_rng(i) for i in range(3)]
    expected = [
        env.rollout(s, policy(rng), h, rng, deterministic=deterministic)
        for env, s, h, rng in zip(envs, starts, horizons, rngs, strict=True)
    ]
    batched_rngs = [np.random.default_rng(i) for i in range(3)]
    progress = [env.start_rollout(s, h) for env, s, h in zip(envs, starts, horizons, strict=True)]
    got = RunBatchedModelEnv(models, ends).rollouts(
        [0, 1, 2], progress, [policy(rng) for rng in batched_rngs], batched_rngs, deterministic
    )
    for a, b, ra, rb in zip(expected, got, rngs, batched_rngs, strict=True):
        assert len(a.transitions) == len(b.transitions) and a.alive_by_step == b.alive_by_step
        np.testing.assert_array_equal(a.sample_id, b.sample_id)
        np.testing.assert_array_equal(a.transitions.action, b.transitions.action)
        np.testing.assert_array_equal(a.transitions.terminated, b.transitions.terminated)
        np.testing.assert_allclose(b.transitions.next_obs, a.transitions.next_obs, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(b.transitions.reward, a.transitions.reward, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(b.disagreement_by_step, a.disagreement_by_step, rtol=1e-5)
        assert ra.bit_generator.state == rb.bit_generator.state
    assert len({len(r.alive_by_step) for r in got}) > 1 and any(r.num_terminated for r in got)


def test_a_batched_run_resumes_exactly_from_a_snapshot() -> None:
    """The batched environment's stacked elites are rebuilt from the loaded models (not kept from before the load)."""
    cfg = _dyna_cfg(batched_models=True, budget=300, phase_length=150)
    original, _ = _run(cfg, [5, 6], [[2, 1]])
    resumed, _ = _run(cfg, [5, 6], [[3, 3]])  # other decisions: other models, stacked and cached by its lookahead
    resumed.load_state_dict(original.state_dict())
    a, b = original.run_phase([2, 1]), resumed.run_phase([2, 1])
    for fa, fb in zip(a, b, strict=True):
        for key in fa:
            if key not in ("seconds", "rollout_seconds"):
                assert fa[key] == fb[key] or (math.isnan(fa[key]) and math.isnan(fb[key])), key
    for pa, pb in zip(original.q.parameters(), resumed.q.parameters(), strict=True):
        assert torch.equal(pa, pb)
