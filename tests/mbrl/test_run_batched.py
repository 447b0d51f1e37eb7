"""World models of many runs as one batched network: fits and lookahead equal the per-run path, and a run's results
do not depend on the other runs of its batch."""

from __future__ import annotations

import copy
import dataclasses
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from mbrl.models import DynamicsModel, ModelConfig
from mbrl.models.run_batched import can_fit_run_batched, fit_run_batched

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


def _assert_same_model(a: DynamicsModel, b: DynamicsModel) -> None:
    for (name, x), y in zip(_weights(a).items(), _weights(b).values(), strict=True):
        assert torch.equal(x, y), name
    np.testing.assert_array_equal(a.input_normalizer.mean, b.input_normalizer.mean)
    assert a._rng.bit_generator.state == b._rng.bit_generator.state  # the same draws, in the same number


def _assert_same_metrics(a: dict[str, float], b: dict[str, float]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if key == "model/train_loss" and not math.isnan(a[key]):  # a mean of the same losses, in another order
            assert b[key] == pytest.approx(a[key], rel=1e-5), key
        else:
            assert a[key] == b[key] or (math.isnan(a[key]) and math.isnan(b[key])), key


@pytest.mark.parametrize("sizes", [(300, 300, 300), (300, 450, 120)])
def test_a_batched_fit_leaves_every_model_as_its_own_fit_would_bit_for_bit(sizes: tuple[int, ...]) -> None:
    """Equal buffers, and buffers of different sizes (other epoch lengths, last minibatches and holdouts, so runs
    score and stop at different steps); two fits in a row (a warm refit under a new normalizer)."""
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
            assert torch.equal(a.ensemble.elite_idx, b.ensemble.elite_idx) and b.fitted
    if len(set(sizes)) > 1:
        assert len(steps) > 1  # the runs did stop at different steps


def test_a_run_fitted_in_a_batch_does_not_depend_on_the_other_runs() -> None:
    data = _pendulum(300, seed=1)
    first = DynamicsModel(3, 1, False, CFG, seed=7)
    fit_run_batched([first, DynamicsModel(3, 1, False, CFG, seed=8)], [data, _pendulum(200, seed=2)])
    second = DynamicsModel(3, 1, False, CFG, seed=7)
    others = [DynamicsModel(3, 1, False, CFG, seed=s) for s in (9, 10)]
    fit_run_batched([others[0], second, others[1]], [_pendulum(500, seed=3), data, _pendulum(90, seed=4)])
    _assert_same_model(first, second)


def test_a_capped_fit_and_the_fused_optimizer_agree_with_the_per_run_path() -> None:
    capped = dataclasses.replace(CFG, max_train_steps=25, min_train_steps=0, score_every_steps=4)
    data = [_pendulum(200, seed=s) for s in (1, 2)]
    alone = [DynamicsModel(3, 1, False, capped, seed=s) for s in (1, 2)]
    together = [DynamicsModel(3, 1, False, capped, seed=s) for s in (1, 2)]
    expected = [m.fit(*d) for m, d in zip(alone, data, strict=True)]
    for a, b, ma, mb in zip(alone, together, expected, fit_run_batched(together, data), strict=True):
        _assert_same_model(a, b)
        _assert_same_metrics(ma, mb)
        assert mb["model/train_steps"] == 25
    # Fused Adam's kernel splits a tensor into vectorized and scalar parts by its size, so a run's slice of the
    # stacked tensor may round differently: equal to float32 rounding over a capped fit, not bit for bit.
    fused = dataclasses.replace(capped, fused_optimizer=True)
    alone = [DynamicsModel(3, 1, False, fused, seed=s) for s in (1, 2)]
    together = [DynamicsModel(3, 1, False, fused, seed=s) for s in (1, 2)]
    for model, d in zip(alone, data, strict=True):
        model.fit(*d)
    fit_run_batched(together, data)
    for a, b in zip(alone, together, strict=True):
        for x, y in zip(_weights(a).values(), _weights(b).values(), strict=True):
            torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-5)


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
    for a, b, ma, mb in zip(alone, models, expected, got, strict=True):
        _assert_same_model(a, b)
        _assert_same_metrics(ma, mb)


def test_only_learned_models_of_one_kind_are_fitted_together() -> None:
    plain = DynamicsModel(3, 1, False, CFG, seed=0)
    assert can_fit_run_batched([plain, DynamicsModel(3, 1, False, CFG, seed=1)])
    assert not can_fit_run_batched([plain, DynamicsModel(3, 1, False, dataclasses.replace(CFG, hidden_size=8))])
    assert not can_fit_run_batched([DynamicsModel(3, 1, False, dataclasses.replace(CFG, learned_termination=True))])
    with pytest.raises(ValueError, match="one by one"):
        fit_run_batched([plain, object()], [_pendulum(10, 0)] * 2)  # type: ignore[list-item]
