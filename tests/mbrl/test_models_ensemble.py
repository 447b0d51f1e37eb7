"""Unit tests of the world model: NLL by hand, log-variance bounds, elites, vectorization, bootstrap, persistence."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mbrl.models import DynamicsModel, GaussianEnsemble, ModelConfig, Normalizer, gaussian_nll
from mbrl.models.gaussian_ensemble import LOGVAR_BOUND_PENALTY, MAX_LOGVAR_INIT, MIN_LOGVAR_INIT
from rolloutlab.checkpoint import load_checkpoint, save_checkpoint

SMALL = ModelConfig(ensemble_size=4, num_elites=2, hidden_size=32, num_layers=2, max_epochs=15, batch_size=64)


def _linear_data(n: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """A 2-d linear system with 3 discrete actions; reward = -|s|^2; terminal when s0 > 1.5."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, 2))
    actions = rng.integers(0, 3, size=n)
    push = np.array([-0.1, 0.0, 0.1])[actions]
    next_obs = obs + np.stack([0.1 * obs[:, 1], push], axis=1)
    rewards = -(obs**2).sum(axis=1)
    terminated = next_obs[:, 0] > 1.5
    return obs, actions, rewards, next_obs, terminated


def test_gaussian_nll_matches_hand_computation() -> None:
    mean = torch.tensor([[[0.0, 1.0], [2.0, -1.0]]])
    logvar = torch.tensor([[[0.0, math.log(4.0)], [math.log(0.25), 0.0]]])
    target = torch.tensor([[[1.0, 1.0], [1.0, 1.0]]])
    # Entries: (x-mu)^2/var + log var + log 2pi, halved: [1 + 0, 0 + log 4], [1/0.25 + log 0.25, 4 + 0].
    by_hand = 0.5 * (1.0 + (math.log(4.0)) + (4.0 + math.log(0.25)) + 4.0 + 4 * math.log(2 * math.pi)) / 4
    assert gaussian_nll(mean, logvar, target).item() == pytest.approx(by_hand, rel=1e-6)
    # Against torch's own Gaussian NLL (which omits the log 2pi constant).
    torch_nll = F.gaussian_nll_loss(mean, target, logvar.exp(), full=True, reduction="mean")
    assert gaussian_nll(mean, logvar, target).item() == pytest.approx(torch_nll.item(), rel=1e-6)


def test_logvar_soft_bounds_and_penalty() -> None:
    model = GaussianEnsemble(3, 2, ensemble_size=3, hidden_size=8, num_layers=1, num_elites=1, seed=0)
    assert torch.all(model.max_logvar == MAX_LOGVAR_INIT) and torch.all(model.min_logvar == MIN_LOGVAR_INIT)
    with torch.no_grad():
        model.output.bias[..., 2:] = 1e4  # raw log-variance far above the upper bound
    _, high = model(torch.zeros(5, 3))
    with torch.no_grad():
        model.output.bias[..., 2:] = -1e4
    _, low = model(torch.zeros(5, 3))
    assert torch.all(high <= MAX_LOGVAR_INIT + 1e-3) and torch.all(high > MAX_LOGVAR_INIT - 1e-3)
    assert torch.all(low >= MIN_LOGVAR_INIT) and torch.all(low < MIN_LOGVAR_INIT + 1e-3)
    # The loss adds 0.01 * (sum max_logvar - sum min_logvar) to the summed member NLLs (no weight decay here).
    x, y = torch.randn(3, 4, 3), torch.randn(3, 4, 2)
    mean, logvar = model(x)
    expected = gaussian_nll(mean, logvar, y).sum() + LOGVAR_BOUND_PENALTY * 2 * (MAX_LOGVAR_INIT - MIN_LOGVAR_INIT)
    assert model.loss(x, y).item() == pytest.approx(expected.item(), rel=1e-6)


def test_per_layer_weight_decay() -> None:
    model = GaussianEnsemble(
        3, 2, ensemble_size=2, hidden_size=4, num_layers=2, weight_decays=[1.0, 0.0, 2.0], num_elites=1
    )
    layers = [*model.hidden, model.output]
    expected = 0.5 * layers[0].weight.pow(2).sum() + 2.0 * 0.5 * layers[2].weight.pow(2).sum()
    assert model.decay_penalty().item() == pytest.approx(expected.item(), rel=1e-6)
    with pytest.raises(ValueError, match="weight_decays"):
        GaussianEnsemble(3, 2, num_layers=2, weight_decays=[1.0])


def test_vectorized_forward_equals_member_loop() -> None:
    model = GaussianEnsemble(5, 3, ensemble_size=4, hidden_size=16, num_layers=3, num_elites=2, seed=1)
    x = torch.randn(4, 7, 5)
    mean, logvar = model(x)
    for m in range(4):
        h = x[m]
        for layer in model.hidden:
            h = F.silu(h @ layer.weight[m] + layer.bias[m])
        out = h @ model.output.weight[m] + model.output.bias[m]
        raw = out[:, 3:]
        lv = model.max_logvar[0] - F.softplus(model.max_logvar[0] - raw)
        lv = model.min_logvar[0] + F.softplus(lv - model.min_logvar[0])
        torch.testing.assert_close(mean[m], out[:, :3])
        torch.testing.assert_close(logvar[m], lv)


def test_normalizer_running_stats_equal_batch_stats() -> None:
    data = np.random.default_rng(0).normal(3.0, 2.0, size=(500, 4))
    data[:, 3] = 7.0  # constant feature: std falls back to 1
    norm = Normalizer(4)
    for chunk in np.array_split(data, 7):
        norm.update(chunk)
    np.testing.assert_allclose(norm.mean, data.mean(axis=0))
    np.testing.assert_allclose(norm.std[:3], data.std(axis=0)[:3])
    assert norm.std[3] == 1.0
    restored = Normalizer(4)
    restored.load_state_dict(norm.state_dict())
    x = torch.as_tensor(data)
    torch.testing.assert_close(restored.normalize(x), norm.normalize(x))
    torch.testing.assert_close(norm.denormalize(norm.normalize(x)), x)


def test_fit_learns_and_members_differ_after_bootstrap() -> None:
    cfg = ModelConfig(ensemble_size=4, num_elites=2, hidden_size=64, num_layers=2, max_epochs=60, batch_size=64)
    model = DynamicsModel(2, 3, True, cfg, seed=0)
    data = _linear_data(1500)
    metrics = model.fit(*data)
    assert set(metrics) >= {"model/holdout_nll", "model/holdout_mse", "model/train_epochs", "model/restored_after_nan"}
    assert metrics["model/holdout_mse"] < 0.05  # standardized units: a linear system is learned to < 5% variance
    assert metrics["model/restored_after_nan"] == 0.0
    x = model.input_normalizer.normalize(torch.as_tensor(model._inputs(data[0][:200], data[1][:200]))).float()
    mean, _ = model.ensemble(x)
    for a in range(cfg.ensemble_size):
        for b in range(a + 1, cfg.ensemble_size):
            assert not torch.allclose(mean[a], mean[b], atol=1e-4)
    step = model.predict(data[0][:50], data[1][:50], np.random.default_rng(0), deterministic=True)
    assert step.next_obs.shape == (50, 2) and step.reward.shape == (50,) and step.disagreement.shape == (50,)
    assert step.terminated_prob is None and step.finite.all()
    np.testing.assert_allclose(step.next_obs, data[3][:50], atol=0.15)


def test_max_train_steps_caps_gradient_steps_per_fit() -> None:
    data = _linear_data(1000)  # 800 train rows at batch 64: 13 steps per epoch
    cfg = ModelConfig(ensemble_size=3, num_elites=2, hidden_size=16, num_layers=2, max_epochs=50, batch_size=64,
                      patience=50, max_train_steps=20)  # fmt: skip
    metrics = DynamicsModel(2, 3, True, cfg, seed=0).fit(*data)
    assert metrics["model/train_steps"] == 20.0 and metrics["model/train_epochs"] == 2.0  # one full epoch + 7 steps
    uncapped = DynamicsModel(2, 3, True, dataclasses.replace(cfg, max_train_steps=None), seed=0).fit(*data)
    assert uncapped["model/train_steps"] == 13.0 * uncapped["model/train_epochs"] > 20.0
    with pytest.raises(ValueError, match="max_train_steps"):
        DynamicsModel(2, 3, True, dataclasses.replace(cfg, max_train_steps=0))


def test_elites_are_lowest_holdout_error_and_only_elites_predict() -> None:
    cfg = ModelConfig(ensemble_size=4, num_elites=2, hidden_size=16, num_layers=2, max_epochs=1, lr=0.0)
    model = DynamicsModel(2, 3, True, cfg, seed=0)
    with torch.no_grad():  # sabotage members 0 and 3: huge outputs, hence the worst holdout error
        model.ensemble.output.weight[[0, 3]] *= 1e3
    model.fit(*_linear_data(400))
    assert sorted(model.ensemble.elite_idx.tolist()) == [1, 2]
    with torch.no_grad():  # a non-elite member turned to NaN must not reach predictions
        model.ensemble.output.weight[0] = float("nan")
    step = model.predict(*_linear_data(30)[:2], rng=np.random.default_rng(0))
    assert step.finite.all() and np.isfinite(step.disagreement).all()


def test_nan_loss_restores_last_good_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    model = DynamicsModel(2, 3, True, SMALL, seed=0)
    data = _linear_data(300)
    model.fit(*data)
    good = {k: v.clone() for k, v in model.ensemble.state_dict().items()}
    monkeypatch.setattr(model.ensemble, "loss", lambda x, y, **kw: torch.tensor(float("nan"), requires_grad=True))
    metrics = model.fit(*data)
    assert metrics["model/restored_after_nan"] == 1.0
    for key, value in model.ensemble.state_dict().items():
        torch.testing.assert_close(value, good[key])


def test_learned_termination_head() -> None:
    cfg = ModelConfig(
        ensemble_size=3, num_elites=2, hidden_size=32, num_layers=2, max_epochs=40, learned_termination=True
    )
    model = DynamicsModel(2, 3, True, cfg, seed=0)
    data = _linear_data(2000)
    metrics = model.fit(*data)
    assert "model/holdout_termination_bce" in metrics
    obs = np.array([[2.5, 0.0], [-1.0, 0.0]])
    prob = model.predict(obs, np.array([1, 1]), np.random.default_rng(0)).terminated_prob
    assert prob is not None and prob[0] > 0.8 and prob[1] < 0.2


def test_state_dict_round_trip_keeps_normalizer_and_elites(tmp_path: Path) -> None:
    model = DynamicsModel(2, 3, True, SMALL, seed=3)
    data = _linear_data(600)
    model.fit(*data)
    save_checkpoint(tmp_path / "model.pt", model.state_dict(), kind="world-model")
    state = load_checkpoint(tmp_path / "model.pt", kind="world-model")["state"]
    fresh = DynamicsModel(2, 3, True, SMALL, seed=99)
    fresh.load_state_dict(state)
    np.testing.assert_allclose(fresh.input_normalizer.mean, model.input_normalizer.mean)
    assert fresh.ensemble.elite_idx.tolist() == model.ensemble.elite_idx.tolist()
    a = model.predict(data[0][:20], data[1][:20], np.random.default_rng(5))
    b = fresh.predict(data[0][:20], data[1][:20], np.random.default_rng(5))
    np.testing.assert_array_equal(a.next_obs, b.next_obs)
    np.testing.assert_array_equal(a.reward, b.reward)
    # The model's own generator resumes too: the next fit is identical.
    assert model.fit(*data) == fresh.fit(*data)


def test_last_good_snapshot_holds_normalizers_and_old_states_still_load(tmp_path: Path) -> None:
    model = DynamicsModel(2, 3, True, SMALL, seed=3)
    data = _linear_data(600)
    model.fit(*data)
    state = model.state_dict()
    assert set(state["last_good"]) >= {"ensemble", "input_normalizer", "output_normalizer"}
    save_checkpoint(tmp_path / "model.pt", state, kind="world-model")  # normalizer stats are weights_only-safe
    expected = model.predict(data[0][:20], data[1][:20], np.random.default_rng(5)).next_obs
    # A state saved before snapshots carried normalizers: the loaded (current) normalizers pair with its weights.
    old = load_checkpoint(tmp_path / "model.pt", kind="world-model")["state"]
    old["last_good"] = {"ensemble": old["last_good"]["ensemble"], "termination": None}
    fresh = DynamicsModel(2, 3, True, SMALL, seed=99)
    fresh.load_state_dict(old)
    with torch.no_grad():
        fresh.ensemble.output.weight.fill_(float("nan"))
    fresh.input_normalizer.reset()
    fresh.restore_last_good()
    got = fresh.predict(data[0][:20], data[1][:20], np.random.default_rng(5)).next_obs
    np.testing.assert_array_equal(got, expected)


def test_running_a_subset_of_members_equals_slicing_the_full_ensemble() -> None:
    # The PETS planner runs one member per row (DynamicsModel.predict_members); it must see the numbers the whole
    # ensemble gives, up to float32 rounding (a batched matmul over fewer members may round differently).
    ens = GaussianEnsemble(5, 4, ensemble_size=7, hidden_size=16, num_layers=2, seed=0)
    x = torch.randn(33, 5, generator=torch.Generator().manual_seed(1))
    members = torch.tensor([6, 2, 3])
    with torch.no_grad():
        full_mean, full_logvar = ens(x)
        mean, logvar = ens(x, members)
        per_slot, _ = ens(x[:11].reshape(1, 11, 5).expand(3, -1, -1).contiguous(), members)
    assert mean.shape == (3, 33, 4)
    torch.testing.assert_close(mean, full_mean[members], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(logvar, full_logvar[members], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(per_slot, full_mean[members, :11], rtol=1e-6, atol=1e-6)


def test_decay_groups_give_adam_the_gradient_of_the_decay_penalty() -> None:
    # The fit leaves the L2 penalty out of its loss and lets Adam's per-group weight_decay add wd * W to each layer's
    # gradient instead: one step must land where the penalized loss's step lands, to float32 rounding.
    def make() -> GaussianEnsemble:
        return GaussianEnsemble(
            3, 2, ensemble_size=2, hidden_size=8, num_layers=2, weight_decays=[0.5, 0.0, 2.0], num_elites=1, seed=3
        )

    x = torch.randn(2, 16, 3, generator=torch.Generator().manual_seed(0))
    y = torch.randn(2, 16, 2, generator=torch.Generator().manual_seed(1))
    penalized, grouped = make(), make()
    opt_a = torch.optim.Adam(penalized.parameters(), lr=1e-2)
    opt_b = torch.optim.Adam(grouped.decay_groups(), lr=1e-2, fused=True)
    for model, opt, decay in ((penalized, opt_a, True), (grouped, opt_b, False)):
        for _ in range(3):
            opt.zero_grad()
            model.loss(x, y, weight_decay=decay).backward()
            opt.step()
    for (name, a), b in zip(penalized.named_parameters(), grouped.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    assert sum(len(g["params"]) for g in grouped.decay_groups()) == len(list(grouped.parameters()))


def _fitted_with_head() -> tuple[DynamicsModel, tuple[np.ndarray, ...]]:
    cfg = ModelConfig(
        ensemble_size=4, num_elites=3, hidden_size=16, num_layers=2, max_epochs=3, learned_termination=True
    )
    data = _linear_data(300)
    model = DynamicsModel(2, 3, True, cfg, seed=0)
    model.fit(*data)
    return model, data


def test_predict_through_one_elite_per_row_equals_the_whole_ensembles_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    model, data = _fitted_with_head()
    obs, act = data[0][:37], data[1][:37]
    step = model.predict(obs, act, np.random.default_rng(4))
    # By hand from the whole ensemble: the same draws (elite per row, then noise), every member on every row.
    rng = np.random.default_rng(4)
    choice = rng.integers(0, model.num_elites, size=37)
    noise = torch.as_tensor(rng.standard_normal((37, 3)))
    x = model.input_normalizer.normalize(torch.as_tensor(model._inputs(obs, act))).float()
    with torch.no_grad():
        mean, logvar = model.ensemble(x)
        logits = model.termination(x.unsqueeze(0).expand(4, -1, -1))  # type: ignore[misc]
    member = model.ensemble.elite_idx[torch.as_tensor(choice)]
    rows = torch.arange(37)
    y = mean[member, rows].double() + torch.exp(0.5 * logvar[member, rows].double()) * noise
    y = model.output_normalizer.denormalize(y).numpy()
    np.testing.assert_allclose(step.next_obs, obs + y[:, 1:], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(step.reward, y[:, 0], rtol=1e-5, atol=1e-5)
    assert step.terminated_prob is not None
    np.testing.assert_allclose(step.terminated_prob, torch.sigmoid(logits[member, rows]).numpy(), rtol=1e-5)
    elite_mean = mean[model.ensemble.elite_idx]
    np.testing.assert_allclose(step.disagreement, elite_mean.std(dim=0, unbiased=False).mean(dim=-1), rtol=1e-5)
    # Chunks change nothing but the batching (the draws come first); a disagreement subsample leaves NaN behind it.
    monkeypatch.setattr("mbrl.models.dynamics.PREDICT_CHUNK", 5)
    chunked = model.predict(obs, act, np.random.default_rng(4), disagreement_rows=10)
    np.testing.assert_allclose(chunked.next_obs, step.next_obs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(chunked.disagreement[:10], step.disagreement[:10], rtol=1e-5)
    assert np.isnan(chunked.disagreement[10:]).all()


def test_propagator_steps_as_predict_members_in_float32() -> None:
    cfg = ModelConfig(
        ensemble_size=4, num_elites=3, hidden_size=16, num_layers=2, max_epochs=3, learned_termination=True
    )
    rng = np.random.default_rng(0)
    obs, act = rng.normal(size=(300, 2)), rng.uniform(-1, 1, size=(300, 1))
    model = DynamicsModel(2, 1, False, cfg, seed=0)
    model.fit(obs, act, -(obs**2).sum(axis=1), obs + 0.1 * act, obs[:, 0] > 1.5)
    members = np.array([2, 0, 0, 1])
    prop = model.propagator(members)
    state = torch.as_tensor(obs[:40], dtype=torch.float32).reshape(4, 10, 2)
    action = torch.as_tensor(act[:40], dtype=torch.float32).reshape(4, 10, 1)
    next_state, reward = prop.step(state, action)
    expected = model.predict_members(obs[:40], act[:40], np.repeat(members, 10), deterministic=True)
    np.testing.assert_allclose(next_state.reshape(40, 2).numpy(), expected.next_obs, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(reward.reshape(40).numpy(), expected.reward, rtol=1e-4, atol=1e-5)
    prob = prop.terminated_prob(state, action)
    assert prob is not None and expected.terminated_prob is not None
    np.testing.assert_allclose(prob.reshape(40).numpy(), expected.terminated_prob, rtol=1e-4, atol=1e-6)
    # Sampling adds std * noise, std in environment units.
    mean, std = prop.forward(state, action)
    assert std is not None and bool((std > 0).all())
    noise = torch.randn(4, 10, 3, generator=torch.Generator().manual_seed(0))
    sampled, sampled_reward = prop.step(state, action, noise)
    torch.testing.assert_close(sampled, state + mean[..., 1:] + std[..., 1:] * noise[..., 1:])
    torch.testing.assert_close(sampled_reward, mean[..., 0] + std[..., 0] * noise[..., 0])
    # The weights are copies: a later fit does not move a propagator already built.
    model.fit(obs, act, -(obs**2).sum(axis=1), obs + 0.1 * act, obs[:, 0] > 1.5)
    torch.testing.assert_close(prop.step(state, action)[0], next_state)
    with pytest.raises(ValueError, match="member indices"):
        model.propagator(np.array([3]))
