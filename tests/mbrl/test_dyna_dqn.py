"""Dyna-DQN batched over runs: smoke run, run independence, batched-vs-single, resume, batched Adam and clipping."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from mbrl.algorithms.batched_q import BatchedAdam, BatchedQNetwork, clip_grad_norm_per_run
from mbrl.algorithms.dyna import BatchedDynaDQN, DynaConfig
from mbrl.buffers import Transitions
from mbrl.models import ModelConfig
from mbrl.phases import FEEDBACK_KEYS, RolloutLengthDriver
from meta.control import UncertaintyTruncation, make_controller
from rolloutlab.checkpoint import load_checkpoint, save_checkpoint


def _tiny_cfg(**overrides: object) -> DynaConfig:
    values: dict[str, object] = {
        "budget": 600,
        "phase_length": 300,
        "learning_starts": 100,
        "buffer_size": 1000,
        "net_arch": [32, 32],
        "model_train_freq": 100,
        "rollout_freq": 50,
        "num_model_rollouts": 40,
        "eval_episodes": 1,
        "model": ModelConfig(ensemble_size=3, num_elites=2, hidden_size=16, num_layers=2, max_epochs=3),
    }
    values.update(overrides)
    return DynaConfig.for_env("MountainCar-v0", **values)


def _envs(n: int) -> list:
    return [lambda: gym.make("MountainCar-v0")] * n


def _q_run(algo: BatchedDynaDQN, run: int) -> list[torch.Tensor]:
    return [p.detach()[run].clone() for p in algo.q.parameters()]


def _drive(algo: BatchedDynaDQN, specs: list[str]) -> list[dict[str, float]]:
    driver = RolloutLengthDriver([make_controller(s) for s in specs], k_cap=algo.cfg.k_cap)
    return driver.run(algo)


def test_smoke_two_phases_and_feedback() -> None:
    algo = BatchedDynaDQN(_envs(2), _tiny_cfg(), seed=0)
    first = algo.run_phase([0, 4])
    assert len(first) == 2 and all(set(fb) >= set(FEEDBACK_KEYS) for fb in first)
    assert first[0]["budget_fraction"] == pytest.approx(0.5) and algo.steps_done == 300
    assert first[0]["model_transitions"] == 0 and first[1]["model_transitions"] > 0
    assert all(math.isfinite(first[1][key]) for key in FEEDBACK_KEYS)
    assert -200.0 <= first[1]["mean_return"] <= 0.0
    # Run 1 mixes imagined data into its minibatches and makes the extra updates; run 0 is plain DQN.
    assert algo.model_updates[0] == 0 and algo.model_updates[1] > 0
    assert algo.updates[1] > algo.updates[0]
    algo.run_phase([2, 2])
    assert algo.done and algo.steps_done == algo.budget == 600
    with pytest.raises(RuntimeError, match="budget"):
        algo.run_phase([0, 0])
    returns = algo.evaluate(1)
    assert returns.shape == (2,) and np.all(returns >= -200)


def test_paired_runs_are_bit_identical_where_their_decisions_coincide() -> None:
    """Run 0 follows K = 0 in both batches; only run 1's decisions differ (K = 0 vs model use with masked extra
    updates). Run 0's weights, optimizer state and every feedback value must be bit-identical over several phases."""
    cfg = _tiny_cfg(budget=900)
    plain = BatchedDynaDQN(_envs(2), cfg, seed=1, run_seeds=[5, 6])
    mixed = BatchedDynaDQN(_envs(2), cfg, seed=1, run_seeds=[5, 6])
    fb_plain = _drive(plain, ["fixed:0", "fixed:0"])
    fb_mixed = _drive(mixed, ["fixed:0", "incdec:6"])
    for a, b in zip(_q_run(plain, 0), _q_run(mixed, 0), strict=True):
        assert torch.equal(a, b)
    for a, b in zip(plain.optimizer.exp_avg_sq, mixed.optimizer.exp_avg_sq, strict=True):
        assert torch.equal(a[0], b[0])
    assert fb_plain[0]["mean_return"] == fb_mixed[0]["mean_return"]
    assert any(not torch.equal(a, b) for a, b in zip(_q_run(plain, 1), _q_run(mixed, 1), strict=True))


def test_a_lookahead_run_is_bit_identical_whatever_the_other_runs_of_its_batch() -> None:
    """Run 0 looks ahead at K = 2 in both batches; run 1 differs (seed and K), so its evaluation episodes last longer
    or shorter. Evaluations in lockstep must neither draw from run 0's training stream for the other runs' steps nor
    let run 0 look ahead once its own episodes are over (CartPole: greedy episode lengths vary)."""
    cfg = _tiny_cfg(budget=900, model_use="lookahead")
    cartpole = [lambda: gym.make("CartPole-v1")] * 2
    alone = BatchedDynaDQN(cartpole, cfg, seed=1, run_seeds=[5, 6])
    beside = BatchedDynaDQN(cartpole, cfg, seed=1, run_seeds=[5, 7])
    fb_alone = _drive(alone, ["fixed:2", "fixed:0"])
    fb_beside = _drive(beside, ["fixed:2", "fixed:2"])
    for a, b in zip(_q_run(alone, 0), _q_run(beside, 0), strict=True):
        assert torch.equal(a, b)
    assert fb_alone[0]["mean_return"] == fb_beside[0]["mean_return"]
    assert alone.evaluate(2)[0] == beside.evaluate(2)[0]


def test_imagined_data_is_mixed_into_every_minibatch_at_the_real_ratio() -> None:
    algo = BatchedDynaDQN(_envs(2), _tiny_cfg(real_ratio=0.25), seed=2)
    algo.run_phase([0, 3])
    assert len(algo.model_buffers[1]) > 0 and len(algo.model_buffers[0]) == 0
    batch = algo._minibatch(np.ones(2, bool))
    n = algo.cfg.batch_size
    n_real = round(0.25 * n)
    imagined = algo.model_buffers[1].all()
    real = algo.real.run(1)

    def rows_in(rows: np.ndarray, pool: np.ndarray) -> bool:
        return bool(all((np.abs(pool - row).sum(axis=1) == 0).any() for row in rows))

    assert rows_in(batch.obs[1, :n_real], real.obs) and rows_in(batch.next_obs[1, n_real:], imagined.next_obs)
    assert rows_in(batch.next_obs[0], algo.real.run(0).next_obs)  # K = 0: real data only
    # Horizon cuts of imagined rollouts bootstrap: they are `truncated`, never `terminated`.
    assert imagined.truncated.any() and not (imagined.truncated & imagined.terminated).any()


def test_dropping_to_k0_discards_the_imagined_data() -> None:
    algo = BatchedDynaDQN(_envs(1), _tiny_cfg(), seed=0)
    algo.run_phase([3])
    assert len(algo.model_buffers[0]) > 0
    updates_before = int(algo.model_updates[0])
    algo.run_phase([0])
    assert len(algo.model_buffers[0]) == 0 and int(algo.model_updates[0]) == updates_before


def test_target_network_syncs_on_the_gradient_step_clock() -> None:
    """Each run syncs its target after every ``target_update_interval`` of *its own* updates, so a run making extra
    updates syncs sooner in env steps (an env-step clock would sync both runs at the same steps)."""
    cfg = _tiny_cfg(budget=300, target_update_interval=64)
    algo = BatchedDynaDQN(_envs(2), cfg, seed=3, compute_matched=[False, True])
    algo.run_phase([0, 0])
    # MountainCar's zoo DQN trains every 16 steps with 8 updates: 12 rounds, 96 updates for run 0; compute-matched
    # run 1 makes 8 more per round, 192 = 3 x 64, so its last update was followed by a sync; run 0 last synced at 64.
    assert (int(algo.updates[0]), int(algo.updates[1])) == (96, 192)
    online, target = list(algo.q.parameters()), list(algo.q_target.parameters())
    assert all(torch.equal(p[1], t[1]) for p, t in zip(online, target, strict=True))
    assert not all(torch.equal(p[0], t[0]) for p, t in zip(online, target, strict=True))


def test_env_step_target_clock_syncs_every_run_at_the_same_env_steps() -> None:
    """SB3's clock: every run syncs every ``target_update_interval`` env steps whatever its number of updates, so a
    compute-matched run makes no more target syncs than plain DQN."""
    cfg = _tiny_cfg(budget=300, target_update_interval=100, target_clock="env_steps")
    algo = BatchedDynaDQN(_envs(2), cfg, seed=3, compute_matched=[False, True])
    algo.run_phase([0, 0])  # syncs at env steps 100, 200 and 300: after the last training round, for both runs
    assert algo.updates[1] == 2 * algo.updates[0]
    online, target = list(algo.q.parameters()), list(algo.q_target.parameters())
    assert all(torch.equal(p, t) for p, t in zip(online, target, strict=True))
    # Between syncs the target stays put: one more training round moves the online net only.
    algo._train_round()
    assert not all(torch.equal(p, t) for p, t in zip(online, target, strict=True))
    with pytest.raises(ValueError, match="target_clock"):
        _tiny_cfg(target_clock="wall")


def test_multi_step_targets_store_rollout_returns_and_bootstrap_with_gamma_to_the_n() -> None:
    algo = BatchedDynaDQN(_envs(2), _tiny_cfg(multi_step_targets=True), seed=2)
    algo.run_phase([0, 3])
    imagined = algo.model_buffers[1].all()
    assert set(np.unique(imagined.steps)) <= {1, 2, 3} and (imagined.steps == 3).any()
    # Every rollout stores steps 3, 2, 1 from its start unless it terminated early (the sums themselves are
    # checked in tests/mbrl/test_model_env.py).
    # Each stored rollout has exactly one transition of each length up to its own: counts fall with the length.
    counts = [int((imagined.steps == n).sum()) for n in (1, 2, 3)]
    assert counts[0] >= counts[1] >= counts[2] > 0
    g = algo.cfg.gamma
    # The value target bootstraps with gamma ** steps: check one update's targets against a hand computation.
    batch = algo._minibatch(np.ones(2, bool))
    assert (batch.steps[0] == 1).all() and (batch.steps[1] > 1).any()
    with torch.no_grad():
        next_q = algo.q_target(torch.as_tensor(batch.next_obs)).max(dim=-1).values.numpy()
    expected = batch.reward + (1.0 - batch.terminated) * g ** batch.steps.astype(np.float64) * next_q
    captured: list[torch.Tensor] = []
    original = torch.nn.functional.smooth_l1_loss

    def spy(q: torch.Tensor, target: torch.Tensor, **kw: object) -> torch.Tensor:
        captured.append(target.detach().clone())
        return original(q, target, **kw)  # type: ignore[arg-type]

    torch.nn.functional.smooth_l1_loss = spy  # type: ignore[assignment]
    try:
        import mbrl.algorithms.dyna.batched as dyna_module

        dyna_module.F.smooth_l1_loss = spy  # type: ignore[assignment]
        algo._dqn_update(batch)
    finally:
        torch.nn.functional.smooth_l1_loss = original
        dyna_module.F.smooth_l1_loss = original
    np.testing.assert_allclose(captured[0].numpy(), expected, rtol=1e-5, atol=1e-5)


def test_lookahead_runs_act_by_model_rollouts_and_match_compute_matched_updates() -> None:
    """model_use="lookahead": no imagined training data; K > 0 makes the extra updates on real data (as many as a
    compute-matched K = 0 run); the greedy action is the argmax of the rollout values; K = 0 stays plain DQN."""
    cfg = _tiny_cfg(model_use="lookahead")
    algo = BatchedDynaDQN(_envs(3), cfg, seed=5, run_seeds=[1, 1, 1], compute_matched=[False, True, False])
    algo.run_phase([0, 0, 3])
    assert all(len(b) == 0 for b in algo.model_buffers) and algo.model_updates.sum() == 0
    assert algo.updates[2] == algo.updates[1] == 2 * algo.updates[0]
    assert algo._lookahead_runs() == [2]
    obs = np.stack([algo.obs[2]] * 3)
    state = algo.rngs[2].bit_generator.state
    values = algo.model_envs[2].lookahead_values(
        obs[2:3], algo.num_actions, algo._q_values(2), 3, algo.cfg.gamma, algo.rngs[2]
    )
    algo.rngs[2].bit_generator.state = state
    assert algo._greedy(obs)[2] == int(values[0].argmax())
    plain = BatchedDynaDQN(_envs(1), _tiny_cfg(), seed=5, run_seeds=[1])
    plain.run_phase([0])
    assert all(torch.equal(a, b) for a, b in zip(_q_run(plain, 0), _q_run(algo, 0), strict=True))
    with pytest.raises(ValueError, match="model_use"):
        _tiny_cfg(model_use="mpc")


def test_deterministic_rollouts_step_with_the_elite_mean() -> None:
    calls: list[bool] = []
    algo = BatchedDynaDQN(_envs(1), _tiny_cfg(deterministic_rollouts=True), seed=0)
    predict = algo.models[0].predict

    def recording(
        obs: np.ndarray,
        actions: np.ndarray,
        rng: np.random.Generator,
        deterministic: bool = False,
        disagreement_rows: int | None = None,
    ):
        calls.append(deterministic)
        return predict(obs, actions, rng, deterministic=deterministic, disagreement_rows=disagreement_rows)

    algo.models[0].predict = recording  # type: ignore[method-assign]
    algo.run_phase([2])
    assert calls and all(calls)


def test_compute_matched_k0_makes_the_extra_updates_on_real_data_only() -> None:
    algo = BatchedDynaDQN(_envs(2), _tiny_cfg(budget=300), seed=4, run_seeds=[7, 7], compute_matched=[False, True])
    algo.run_phase([0, 0])
    assert algo.updates[1] == 2 * algo.updates[0] and algo.model_updates.sum() == 0
    assert len(algo.model_buffers[1]) == 0


def test_batched_runs_match_single_runs() -> None:
    cfg = _tiny_cfg(budget=300)
    batched = BatchedDynaDQN(_envs(2), cfg, seed=0, run_seeds=[11, 12])
    single = BatchedDynaDQN(_envs(1), cfg, seed=0, run_seeds=[12])
    fb_batched = batched.run_phase([3, 3])
    fb_single = single.run_phase([3])
    for a, b in zip(_q_run(batched, 1), _q_run(single, 0), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert fb_batched[1]["model_transitions"] == fb_single[0]["model_transitions"]


def test_state_dict_round_trip_resumes_exactly(tmp_path: Path) -> None:
    cfg = _tiny_cfg()
    original = BatchedDynaDQN(_envs(2), cfg, seed=3)
    original.run_phase([2, 0])
    save_checkpoint(tmp_path / "dyna.pt", original.state_dict(), kind="dyna")
    resumed = BatchedDynaDQN(_envs(2), cfg, seed=3)
    resumed.load_state_dict(load_checkpoint(tmp_path / "dyna.pt", kind="dyna")["state"])
    a, b = original.run_phase([2, 0]), resumed.run_phase([2, 0])
    for fa, fb in zip(a, b, strict=True):
        for timing in ("seconds", "rollout_seconds"):
            fa.pop(timing, None), fb.pop(timing, None)
        assert fa.keys() == fb.keys()
        for key in fa:
            assert fa[key] == fb[key] or (math.isnan(fa[key]) and math.isnan(fb[key])), key
    for pa, pb in zip(original.q.parameters(), resumed.q.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, rtol=0, atol=0)
    # A snapshot from before episodes were recorded for replay cannot put the envs back: refused, not half-loaded.
    old = original.state_dict()
    del old["episodes_in_progress"]
    with pytest.raises(ValueError, match="predates exact resume"):
        resumed.load_state_dict(old)


def test_uncertainty_truncation_cuts_rollouts() -> None:
    algo = BatchedDynaDQN(_envs(1), _tiny_cfg(budget=300), seed=0)
    truncator = UncertaintyTruncation(50, k_max=8)
    fb = algo.run_phase([truncator.decide({})], truncators=[truncator])[0]
    assert truncator.threshold is not None
    rounds = 4  # rollout rounds at steps 150, 200, 250, 300 (the model is first fit at step 100... 200 starts)
    assert fb["rollout_uncertainty_cut"] >= 20 * rounds - 20
    assert 0 < fb["model_transitions"] < 40 * 8 * 5


def test_batched_adam_matches_torch_adam_and_respects_mask() -> None:
    p = torch.randn(3, 4, 5)
    ours = p.clone()
    refs = [p[i].clone().requires_grad_(True) for i in range(3)]
    optimizer = BatchedAdam([ours], lr=1e-2)
    torch_opts = [torch.optim.Adam([r], lr=1e-2) for r in refs]
    masks = [None, torch.tensor([True, False, True]), None, torch.tensor([False, True, True])]
    for mask in masks * 3:
        grad = torch.randn(3, 4, 5)
        ours.grad = grad.clone()
        optimizer.step(mask)
        for i, (ref, opt) in enumerate(zip(refs, torch_opts, strict=True)):
            if mask is None or bool(mask[i]):
                ref.grad = grad[i].clone()
                opt.step()
    for i, ref in enumerate(refs):
        torch.testing.assert_close(ours[i], ref.detach(), rtol=1e-5, atol=1e-6)


def test_clip_grad_norm_per_run_matches_torch() -> None:
    net = BatchedQNetwork(2, 3, 2, [8], seeds=[0, 1])
    net(torch.randn(2, 5, 3)).pow(2).sum().mul(100).backward()
    grads = [p.grad.clone() for p in net.parameters()]  # type: ignore[union-attr]
    clip_grad_norm_per_run(list(net.parameters()), 1.0)
    for run in range(2):
        ref = [torch.nn.Parameter(torch.zeros_like(g[run])) for g in grads]
        for r, g in zip(ref, grads, strict=True):
            r.grad = g[run].clone()
        torch.nn.utils.clip_grad_norm_(ref, 1.0)
        for r, p in zip(ref, net.parameters(), strict=True):
            torch.testing.assert_close(p.grad[run], r.grad)  # type: ignore[index]


def test_forward_run_matches_batched_forward() -> None:
    net = BatchedQNetwork(3, 4, 2, [16, 16], seeds=[5, 6, 7])
    obs = torch.randn(3, 9, 4)
    q = net(obs)
    for run in range(3):
        torch.testing.assert_close(net.forward_run(run, obs[run]), q[run])
    # Run 1's initialization depends on its own seed only.
    alone = BatchedQNetwork(1, 4, 2, [16, 16], seeds=[6])
    torch.testing.assert_close(alone(obs[1:2])[0], q[1])


def test_zoo_config_and_errors() -> None:
    cfg = DynaConfig.for_env("MountainCar-v0")
    assert (cfg.learning_rate, cfg.gamma, cfg.train_freq, cfg.gradient_steps) == (4e-3, 0.98, 16, 8)
    assert DynaConfig.for_env("Acrobot-v1").target_update_interval == 250
    assert DynaConfig.for_env("MountainCar-v0").target_update_interval == 300  # 600 env steps x 8 / 16 updates
    with pytest.raises(ValueError, match="rl-zoo"):
        DynaConfig.for_env("Pendulum-v1")
    with pytest.raises(TypeError, match="Discrete"):
        BatchedDynaDQN([lambda: gym.make("Pendulum-v1")], _tiny_cfg(), seed=0)


def test_dqn_update_matches_sb3_dqn_train_step() -> None:
    """One real-data update equals SB3 DQN's ``train`` step from the same weights and minibatch (dyna_k0 == DQN)."""
    from stable_baselines3 import DQN
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.type_aliases import ReplayBufferSamples

    cfg = DynaConfig.for_env("Acrobot-v1", net_arch=[32, 32], max_grad_norm=0.5)
    algo = BatchedDynaDQN([lambda: gym.make("Acrobot-v1")], cfg, seed=0)
    sb3 = DQN(
        "MlpPolicy",
        gym.make("Acrobot-v1"),
        learning_rate=cfg.learning_rate,
        gamma=cfg.gamma,
        max_grad_norm=0.5,
        policy_kwargs={"net_arch": [32, 32]},
        seed=0,
        device="cpu",
    )
    linears = [m for m in sb3.q_net.q_net if isinstance(m, torch.nn.Linear)]
    target_linears = [m for m in sb3.q_net_target.q_net if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for ours, theirs in zip(algo.q.linears(), linears, strict=True):
            ours.weight[0].copy_(theirs.weight.T)
            ours.bias[0, 0].copy_(theirs.bias)
        for ours, theirs in zip(algo.q_target.linears(), target_linears, strict=True):
            ours.weight[0].copy_(theirs.weight.T)
            ours.bias[0, 0].copy_(theirs.bias)
    rng = np.random.default_rng(0)
    n = 64
    obs = rng.normal(size=(n, 6)).astype(np.float32)
    next_obs = rng.normal(size=(n, 6)).astype(np.float32)
    actions = rng.integers(0, 3, size=n)
    rewards = -np.ones(n, np.float32)
    dones = (rng.random(n) < 0.2).astype(np.float32)
    samples = ReplayBufferSamples(
        observations=torch.as_tensor(obs),
        actions=torch.as_tensor(actions).reshape(-1, 1),
        next_observations=torch.as_tensor(next_obs),
        dones=torch.as_tensor(dones).reshape(-1, 1),
        rewards=torch.as_tensor(rewards).reshape(-1, 1),
    )
    sb3.set_logger(configure(None, []))
    sb3.replay_buffer.sample = lambda *args, **kwargs: samples  # type: ignore[method-assign]
    for _ in range(3):
        sb3.train(gradient_steps=1, batch_size=n)
        batch = Transitions(obs[None], actions[None], rewards[None], next_obs[None], dones[None] > 0, dones[None] < 0)
        algo._dqn_update(batch)
    for ours, theirs in zip(algo.q.linears(), linears, strict=True):
        torch.testing.assert_close(ours.weight[0], theirs.weight.T, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(ours.bias[0, 0], theirs.bias, rtol=1e-5, atol=1e-6)


def test_lookahead_trust_keeps_the_q_choice_where_the_model_is_unsure() -> None:
    """With an impossible trust bar every lookahead decision is overruled (and counted, and checkpointed); with no
    bar none is."""
    cfg = _tiny_cfg(budget=600, model_use="lookahead")
    strict = dataclasses.replace(cfg, lookahead_trust=1e-12)
    overruled = BatchedDynaDQN(_envs(1), strict, seed=3, run_seeds=[9])
    _drive(overruled, ["fixed:2"])
    assert overruled.untrusted_decisions[0] > 0 and np.isfinite(overruled.trust_reference[0])
    assert overruled.state_dict()["untrusted_decisions"].tolist() == overruled.untrusted_decisions.tolist()
    trusting = BatchedDynaDQN(_envs(1), cfg, seed=3, run_seeds=[9])
    _drive(trusting, ["fixed:2"])
    assert trusting.untrusted_decisions[0] == 0


def test_training_feedback_never_reads_the_evaluation_episodes() -> None:
    """With controller_feedback="training" the controller's feedback is the same whatever the evaluations see."""
    import envs  # noqa: F401  (registers the env)
    from envs.pendulum import DiscretePendulumEnv
    from mbrl.models.true_dynamics import TruePendulumModel

    cfg = DynaConfig(
        budget=400,
        phase_length=200,
        rollout_freq=100,
        num_model_rollouts=16,
        learning_starts=100,
        batch_size=16,
        net_arch=[16],
        eval_episodes=1,
        controller_feedback="training",
    )
    env_id = "rolloutlab/DiscretePendulum-v0"
    model = TruePendulumModel().perturbed({"g": 0.7})

    def run(eval_g: float) -> tuple[list[list[dict[str, float]]], np.ndarray]:
        learner = BatchedDynaDQN(
            [lambda: gym.make(env_id)] * 2,
            cfg,
            seed=3,
            models=[model, model],
            eval_env_fns=[lambda: gym.wrappers.TimeLimit(DiscretePendulumEnv(g=eval_g), 200)] * 2,
        )
        driver = RolloutLengthDriver([make_controller("fixed:0"), make_controller("fixed:4")], k_cap=cfg.k_cap)
        feedback = [driver.run_phase(learner) for _ in range(2)]
        return feedback, learner.last_evaluation.copy()

    first, evaluation_a = run(10.0)
    second, evaluation_b = run(4.0)
    assert not np.allclose(evaluation_a, evaluation_b)  # the evaluations differ ...
    for fa, fb in zip(first, second, strict=True):  # ... and the feedback does not
        for a, b in zip(fa, fb, strict=True):
            assert a.keys() == b.keys()
            same = [k for k in a if not k.endswith("seconds")]  # wall-clock timings aside
            np.testing.assert_array_equal([a[k] for k in same], [b[k] for k in same])
            assert a["mean_return"] == a["train_return"] or (np.isnan(a["mean_return"]) and np.isnan(a["train_return"]))
            assert np.isnan(a["model_return_error"])
            assert a["model_one_step_rmse"] > 0.01  # the model's wrong gravity, seen on real transitions
    with pytest.raises(ValueError, match="controller_feedback"):
        DynaConfig(controller_feedback="evaluations")
