"""The defects the key-door diagnosis found (the reward scale reaching the actor term, an EMA anchored to the initial
weights, a value check comparing scaled Q-values with unscaled returns) and the diagnosis script itself."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from script_modules import REPO, load_script

from experiments.incontext.matched_protocol import agent_config, amago_config
from meta.incontext.agent import Batch, InContextAgent
from meta.incontext.config import AgentConfig, TrainConfig
from meta.incontext.replay import Trajectory
from meta.incontext.tasks import task_env_fns
from meta.incontext.trainer import InContextTrainer, ema_rate, run_rollouts
from meta.incontext.value_scale import symexp, symlog

# --- the reward scale stays out of the actor term -----------------------------------------------------------------


def _pinned_critics(agent: InContextAgent, bins_per_action: list[int]) -> None:
    """Put (almost) all of every critic's mass on bin ``bins_per_action[a]`` for action ``a``, whatever the input."""
    n_gammas, n_actions, n_bins = agent.n_gammas, agent.n_actions, agent.config.n_bins
    logits = torch.full((n_gammas, n_actions, n_bins), -50.0)
    for action, index in enumerate(bins_per_action):
        logits[:, action, index] = 50.0
    with torch.no_grad():
        agent.critics.w2.zero_()
        agent.critics.b2.copy_(logits.flatten().expand_as(agent.critics.b2))


def _actor_gradient(scale: float, batch: Batch, entropy_coef: float) -> tuple[torch.Tensor, dict[str, float]]:
    """Gradient of the actor term alone on the actor head, for a critic pinned to values that grow with ``scale``."""
    torch.manual_seed(0)  # the same weights for every call
    config = AgentConfig(
        d_model=8, head_hidden=8, context_len=8, n_bins=15, bin_low=0.0, bin_range=4.0, reward_scale=scale,
        entropy_coef=entropy_coef, critic_coef=0.0, bc_coef=0.0,
    )  # fmt: skip
    agent = InContextAgent(3, 4, config)
    with torch.no_grad():  # the scale-100 critic's bins hold 100x the values of the scale-1 critic's
        agent.bins.copy_(symlog(scale * symexp(torch.linspace(0.0, 4.0, 15))))
    _pinned_critics(agent, [2, 9, 5, 12])
    loss, info = agent.loss(batch, torch.Generator().manual_seed(0))
    loss.backward()
    return torch.cat([p.grad.flatten() for p in agent.actor.parameters()]), info  # type: ignore[union-attr]


def test_the_actor_term_is_the_same_whatever_the_reward_scale() -> None:
    """A critic with scale 100 that values every action 100x what a scale-1 critic does gives the same actor gradient
    (advantages against the entropy bonus), entropy and filtered BC: the scale is a numerical knob of the critic
    (AMAGO's PopArt keeps its multiplier out of its actor loss)."""
    g = torch.Generator().manual_seed(0)
    batch = Batch(
        obs=torch.randn(2, 7, 3, generator=g),
        actions=torch.randint(0, 4, (2, 6), generator=g),
        rewards=torch.zeros(2, 6),
        dones=torch.zeros(2, 6),
        mask=torch.ones(2, 6),
        start=torch.zeros(2, dtype=torch.long),
    )
    plain_grad, plain = _actor_gradient(1.0, batch, 0.05)
    scaled_grad, scaled = _actor_gradient(100.0, batch, 0.05)
    torch.testing.assert_close(scaled_grad, plain_grad, rtol=1e-3, atol=1e-7)
    for key in ("train/actor_loss", "train/entropy", "train/bc_kept", "train/q_mean"):
        assert math.isclose(plain[key], scaled[key], rel_tol=1e-4, abs_tol=1e-6), key
    # Not vacuous: the pinned critic's advantages move the actor (its gradient is not the entropy bonus's alone).
    without_entropy, _ = _actor_gradient(1.0, batch, 0.0)
    assert float(without_entropy.norm()) > 0.1 * float(plain_grad.norm()) > 0.0


# --- the evaluated moving average never keeps the untrained weights -----------------------------------------------


def test_ema_rate_ramps_up_to_the_decay() -> None:
    assert math.isclose(ema_rate(0, 0.999), 0.9)  # the first average is mostly the first trained weights
    assert math.isclose(ema_rate(10, 0.999), 1.0 - 11 / 20)
    assert math.isclose(ema_rate(100_000, 0.999), 0.001)
    # What remains of the initial weights after 800 updates: the product of (1 - rate).
    remains = math.prod(1.0 - ema_rate(n, 0.999) for n in range(800))
    assert remains < 1e-3 < 0.4 < 0.999**800


def _tiny_bandit(steps: int, ema_decay: float) -> TrainConfig:
    cfg = amago_config("bandit_2x100", 0, steps, None, eval_tasks=2)
    agent = dataclasses.replace(
        cfg.agent, d_model=16, head_hidden=16, lr_warmup_updates=1, ema_decay=ema_decay, context_len=11
    )
    return dataclasses.replace(
        cfg, horizon=10, n_envs=2, batch_size=2, window=10, learning_starts=0, eval_every_steps=10**9, agent=agent
    )


def test_the_evaluated_weights_follow_training_from_the_first_updates() -> None:
    trainer = InContextTrainer(_tiny_bandit(100, 0.999), None)
    assert trainer.ema_agent is not None
    initial = torch.cat([p.detach().flatten().clone() for p in trainer.ema_agent.parameters()])
    trainer.learn()
    assert trainer.updates == 10
    online = torch.cat([p.detach().flatten() for p in trainer.agent.parameters()])
    averaged = torch.cat([p.detach().flatten() for p in trainer.ema_agent.parameters()])
    # A fixed rate of 0.001 would leave 99 % of the initial weights after 10 updates; the ramp leaves next to none.
    assert float((averaged - online).norm()) < 0.5 * float((averaged - initial).norm())


# --- the value check compares like with like ----------------------------------------------------------------------


def test_value_check_reads_q_values_in_env_reward_units(monkeypatch: pytest.MonkeyPatch) -> None:
    script = load_script(REPO / "experiments" / "incontext" / "value_check.py")
    cfg = _tiny_bandit(20, 0.0)
    cfg = dataclasses.replace(cfg, agent=dataclasses.replace(cfg.agent, reward_scale=100.0))
    trainer = InContextTrainer(cfg, None)
    trainer.collect()

    def scaled_q(features: torch.Tensor, *rest: object) -> torch.Tensor:
        return torch.full((*features.shape[:-1], 4, 2, 2), 250.0)  # the critics' units: 2.5 env rewards times 100

    monkeypatch.setattr(trainer.agent, "q_values", scaled_q)
    out = script.value_check(trainer, 2, np.random.default_rng(0))
    assert out["reward_scale"] == 100.0
    assert all(math.isclose(d["q_taken_mean"], 2.5, rel_tol=1e-6) for d in out["per_discount"].values())


def test_value_check_also_compares_with_the_returns_a_bonus_critic_learns() -> None:
    script = load_script(REPO / "experiments" / "incontext" / "value_check.py")
    trainer = InContextTrainer(dataclasses.replace(_tiny_bandit(20, 0.0), novelty_bonus=0.5), None)
    trainer.collect()
    out = script.value_check(trainer, 2, np.random.default_rng(0))
    assert out["novelty_coef"] == 0.5
    for gamma, d in out["per_discount"].items():
        # Every trial starts on a new observation, so the bonus adds at least 0.5 to the first step's return.
        assert d["mc_return_mean_with_bonus"] > d["mc_return_mean"], gamma
        assert {"size_ratio_with_bonus", "correlation_with_bonus"} <= set(d)
    plain = InContextTrainer(_tiny_bandit(20, 0.0), None)
    plain.collect()
    assert not any("mc_return_mean_with_bonus" in d for d in script.value_check(
        plain, 2, np.random.default_rng(0))["per_discount"].values())  # fmt: skip


# --- the diagnosis script ---------------------------------------------------------------------------------------


def _trajectory(cells: list[tuple[int, int]], actions: list[int], rewards: list[float], holding: list[int],
                resets: list[int]) -> Trajectory:  # fmt: skip
    """A 3x3 key-door trajectory in RL^2 inputs (positions scaled by 2); the other input slots are zero."""
    obs = np.zeros((len(cells), 10), dtype=np.float32)
    obs[:, :2] = np.asarray(cells) / 2.0
    obs[:, 2] = holding
    obs[:, 8] = resets
    return Trajectory(obs, np.asarray(actions), np.asarray(rewards, np.float32), np.zeros(len(actions), np.float32))


def _key_then_door() -> Trajectory:
    """Start (0, 0): up to (0, 1), left into the wall, up to (0, 2) = the key, right to (1, 2) = the door (the episode
    ends: the next input is the start again, with the reset flag), then left into the wall twice."""
    return _trajectory(
        cells=[(0, 0), (0, 1), (0, 1), (0, 2), (0, 0), (0, 0), (0, 0)],
        actions=[0, 2, 0, 3, 2, 2],
        rewards=[0, 0, 1, 1, 0, 0],
        holding=[0, 0, 0, 1, 0, 0, 0],
        resets=[1, 0, 0, 0, 1, 0, 0],
    )


def test_behaviour_counts_walls_cells_keys_and_doors() -> None:
    script = load_script(REPO / "experiments" / "incontext" / "keydoor_diagnose.py")
    traj = _key_then_door()
    out = script.behaviour([traj], size=3)
    assert out["return_mean"] == 2.0 and out["inner_episodes"] == 2
    assert out["wall_step_share"] == pytest.approx(3 / 6)
    assert out["key_episode_share"] == 0.5 and out["door_episode_share"] == 0.5
    assert out["distinct_cells_per_episode"] == pytest.approx((3 + 1) / 2)
    assert out["action_shares"] == pytest.approx([2 / 6, 0.0, 3 / 6, 1 / 6])


def test_diagnosis_script_reports_epsilons_values_behaviour_and_the_acting_gap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = load_script(REPO / "experiments" / "incontext" / "keydoor_diagnose.py")

    def tiny(*a: object, **k: object) -> TrainConfig:
        cfg = agent_config(*a, **k)  # type: ignore[arg-type]
        agent = dataclasses.replace(cfg.agent, d_model=8, head_hidden=8, lr_warmup_updates=1)
        return dataclasses.replace(cfg, n_envs=2, batch_size=2, learning_starts=0, agent=agent)

    monkeypatch.setattr(script, "agent_config", tiny)
    out_path = tmp_path / "d.json"
    script.main(script.Args(env_steps=400, eval_tasks=2, value_trials=2, out=str(out_path)))
    out = json.loads(out_path.read_text())
    # Two collections of two 100-step trials; the bilevel epsilon falls along each trial.
    assert [row["env_steps"] for row in out["epsilons"]] == [0, 200] and len(out["epsilons"][0]["mean"]) == 2
    first = out["epsilons"][0]
    assert all(f >= last for f, last in zip(first["first_step"], first["last_step"], strict=True))
    assert out["updates"] > 0 and "train/entropy" in out["updates_log"][-1]
    gammas = out["config"]["agent"]["gammas"]
    assert set(out["behaviour"]) == {"online_greedy", "online_sampled", "eval_weights_greedy",
                                     "eval_weights_sampled", "random", "explorer",
                                     *(f"q_greedy_gamma{g}" for g in gammas)}  # fmt: skip
    # The critic plays the same tasks by argmax-Q under each discount, beside the actor's greedy play.
    assert set(out["q_greedy"]) == {"actor_greedy", *(f"gamma{g}" for g in gammas)}
    assert out["q_greedy"]["actor_greedy"] == out["behaviour"]["eval_weights_greedy"]["return_mean"]
    against = out["actor_against_critic"]["actor_greedy_steps"]
    assert 0.0 <= against["actor_agrees_with_q"] <= 1.0 and sum(against["q_argmax_shares"]) == pytest.approx(1.0)
    assert sum(against["q_offset_per_action"]) == pytest.approx(0.0, abs=1e-5)
    assert set(out["memory_use"]) == {"steps", "actor_toward", "critic_toward", "chance"}
    assert out["replay_only"] == []
    # The replay-only probe trains on after the run; the run's own numbers are taken before it.
    probed = script.main(script.Args(env_steps=400, eval_tasks=2, value_trials=2, replay_only_updates=2, probe_every=1))
    assert [row["extra_updates"] for row in probed["replay_only"]] == [0, 1, 2]
    assert probed["updates"] == out["updates"] and probed["value_check"]["updates"] == out["updates"]
    assert out["behaviour"]["explorer"]["return_mean"] > out["behaviour"]["random"]["return_mean"]
    # Acting one step at a time sees exactly what the training pass sees.
    assert max(out["acting_matches_training"].values()) < 1e-4


def test_q_greedy_actor_plays_the_critics_argmax_and_the_comparison_reads_it() -> None:
    """Critics pinned to rank action 1 first whatever the state: the critic's greedy play takes action 1 on every
    step, and the actor-against-critic comparison sees the critic's argmax and its per-action offsets."""
    script = load_script(REPO / "experiments" / "incontext" / "keydoor_diagnose.py")
    torch.manual_seed(0)
    config = AgentConfig(d_model=8, head_hidden=8, context_len=16, n_bins=15, bin_low=0.0, bin_range=4.0)
    agent = InContextAgent(3 + 4 + 2, 4, config)
    _pinned_critics(agent, [2, 9, 5, 4])
    view = script.QGreedyActor(agent, gamma_index=0)
    venv = gym.vector.SyncVectorEnv(
        task_env_fns("keydoor", 2, keydoor_size=3, keydoor_episode_steps=5, keydoor_trial_steps=10)
    )
    trajectories = run_rollouts(view, venv, [1, 2], None, np.random.default_rng(0))
    venv.close()
    assert all((t.actions == 1).all() for t in trajectories)
    out = script.actor_against_critic(agent, trajectories)
    assert out["q_argmax_shares"] == pytest.approx([0.0, 1.0, 0.0, 0.0])
    offsets = out["q_offset_per_action"]
    assert offsets[1] == max(offsets) and out["q_state_spread"] == pytest.approx(0.0, abs=1e-4)
    assert out["q_action_spread"] > 0


def test_played_toward_targets_splits_the_key_from_the_door() -> None:
    """In the first trial the key at (0, 2) is known after the door (step 3), and steps 4 and 5 go left into the wall
    (not closer). The second trial finds the key and the door, then goes up twice onto the key and right onto the
    door it remembers."""
    script = load_script(REPO / "experiments" / "incontext" / "keydoor_diagnose.py")
    first = _key_then_door()
    second = _trajectory(
        cells=[(0, 0), (0, 1), (0, 2), (0, 0), (0, 1), (0, 2), (0, 0)],
        actions=[0, 0, 3, 0, 0, 3],
        rewards=[0, 1, 1, 0, 1, 1],
        holding=[0, 0, 1, 0, 0, 1, 0],
        resets=[1, 0, 0, 1, 0, 0, 1],
    )
    out = script.played_toward_targets([first, second], size=3)
    # first: steps 4, 5 toward the key, both into the wall; second: steps 3, 4 toward the key (up, up), step 5 toward
    # the door (right).
    assert out["key_steps"] == 4 and out["toward_key"] == 0.5
    assert out["door_steps"] == 1 and out["toward_door"] == 1.0
    assert out["trials_key_found"] == 1.0 and out["trials_door_found"] == 1.0


def test_memory_use_finds_revealed_targets_and_scores_moves_toward_them() -> None:
    """The key is revealed at step 2 and the door at step 3, so only the two steps after the door (back at the start,
    without the key) have a remembered target, the key at (0, 2): "up" is the one move toward it (chance 1/4). A
    critic that ranks "up" first heads for it on both; an actor that prefers "down" never does."""
    script = load_script(REPO / "experiments" / "incontext" / "keydoor_diagnose.py")
    traj = _key_then_door()
    pos, targets, known = script.remembered_targets(traj, size=3)
    assert known.tolist() == [False, False, False, False, True, True]
    assert targets[4].tolist() == [0, 2] and targets[5].tolist() == [0, 2] and pos[4].tolist() == [0, 0]
    torch.manual_seed(0)
    config = AgentConfig(d_model=8, head_hidden=8, context_len=16, n_bins=15, bin_low=0.0, bin_range=4.0)
    agent = InContextAgent(10, 4, config)
    _pinned_critics(agent, [9, 2, 5, 4])
    with torch.no_grad():
        agent.actor[-1].weight.zero_()
        agent.actor[-1].bias.copy_(torch.tensor([0.0, 1.0, 0.0, 0.0]).repeat(agent.n_gammas))
    out = script.memory_use(agent, [traj], size=3)
    assert out == {"steps": 2, "actor_toward": 0.0, "critic_toward": 1.0, "chance": 0.25}
