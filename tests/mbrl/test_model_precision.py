"""The world model's bf16 opt-in (``ModelConfig.precision``): the default untouched, bf16 close to it, fits converge."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mbrl.models import DynamicsModel, GaussianEnsemble, ModelConfig
from mbrl.models.run_batched import can_fit_run_batched

SMALL = ModelConfig(ensemble_size=4, num_elites=3, hidden_size=32, num_layers=2, min_train_steps=0, max_epochs=400)


def _smooth_data(n: int, seed: int) -> tuple[np.ndarray, ...]:
    """A smooth 3-d system with a 1-d action (continuous), reward ``-|s'|^2``, nothing terminal."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, 3))
    act = rng.uniform(-1, 1, size=(n, 1))
    w = np.random.default_rng(99).normal(size=(3, 3)) / 2
    nxt = obs + 0.2 * np.tanh(obs @ w) + 0.1 * act
    return obs, act, -(nxt**2).sum(axis=1), nxt, np.zeros(n, bool)


def test_float32_is_the_default_and_an_unknown_precision_is_refused() -> None:
    assert ModelConfig().precision == "float32"
    with pytest.raises(ValueError, match=r"ModelConfig\.precision must be one of float32, bf16, got 'fp16'"):
        DynamicsModel(3, 1, False, dataclasses.replace(SMALL, precision="fp16"))
    with pytest.raises(ValueError, match="precision must be one of"):
        GaussianEnsemble(4, 4, precision="float16")


def test_float32_forward_is_the_plain_float32_network_and_bf16_is_close_to_it() -> None:
    ens = GaussianEnsemble(4, 3, ensemble_size=3, hidden_size=64, num_layers=3, num_elites=2, seed=0)
    x = torch.randn(3, 50, 4, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        mean, logvar = ens(x)
        # The default path, written out: every op in float32, no autocast.
        h = x
        for layer in ens.hidden:
            h = F.silu(torch.baddbmm(layer.bias, h, layer.weight))
        ref_mean, raw = torch.baddbmm(ens.output.bias, h, ens.output.weight).chunk(2, dim=-1)
        ref_logvar = ens.max_logvar - F.softplus(ens.max_logvar - raw)
        ref_logvar = ens.min_logvar + F.softplus(ref_logvar - ens.min_logvar)
        assert mean.dtype == torch.float32 and torch.equal(mean, ref_mean) and torch.equal(logvar, ref_logvar)

        ens.precision = "bf16"
        mean16, logvar16 = ens(x)
    # bf16's 8-bit mantissa in the hidden layers: outputs in float32, a few parts in a thousand off, not equal.
    assert mean16.dtype == torch.float32 and logvar16.dtype == torch.float32
    assert not torch.equal(mean16, mean)
    torch.testing.assert_close(mean16, mean, rtol=0.0, atol=0.03)
    torch.testing.assert_close(logvar16, logvar, rtol=0.0, atol=0.03)


def test_bf16_fit_converges_and_predicts_close_to_float32() -> None:
    train, unseen = _smooth_data(1500, seed=0), _smooth_data(500, seed=1)
    models = {}
    for precision in ("float32", "bf16"):
        model = DynamicsModel(3, 1, False, dataclasses.replace(SMALL, precision=precision), seed=0)
        metrics = model.fit(*train)
        models[precision] = (model, metrics)
    nmse32, nmse16 = (models[p][1]["model/holdout_nmse"] for p in ("float32", "bf16"))
    # Both learn the system (holdout error a small fraction of the target variance), bf16 about as well as float32.
    assert nmse32 < 0.02 and nmse16 < 0.02 and nmse16 < 3.0 * nmse32, (nmse32, nmse16)
    obs, act, _, nxt, _ = unseen
    steps = {p: models[p][0].predict(obs, act, np.random.default_rng(0), deterministic=True) for p in models}
    err = {p: float(np.mean((steps[p].next_obs - nxt) ** 2) / np.var(nxt - obs)) for p in steps}
    assert err["bf16"] < 0.05 and err["float32"] < 0.05, err
    # The planner's propagator runs the bf16 model as autocast does (to float32 rounding; float32 hidden layers would
    # be some 1e-3 off).
    bf16 = models["bf16"][0]
    members = np.array([0, 1, 2])
    state = torch.as_tensor(obs[:60], dtype=torch.float32).reshape(3, 20, 3)
    action = torch.as_tensor(act[:60], dtype=torch.float32).reshape(3, 20, 1)
    next_state, reward = bf16.propagator(members).step(state, action)
    expected = bf16.predict_members(obs[:60], act[:60], np.repeat(members, 20), deterministic=True)
    np.testing.assert_allclose(next_state.reshape(60, 3).numpy(), expected.next_obs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(reward.reshape(60).numpy(), expected.reward, rtol=1e-5, atol=1e-5)
    # Runs fitted as one batched network stay float32: a bf16 model is fitted on its own.
    assert can_fit_run_batched([models["float32"][0]]) and not can_fit_run_batched([bf16])
