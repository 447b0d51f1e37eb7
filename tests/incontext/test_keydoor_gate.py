"""AMAGO's key-door run details (reward scale, actors, anneal, update ratio), the smaller key-door the gate plays, and
the gate script's units and verdict."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from script_modules import REPO, load_script

import meta.incontext.agent as agent_module
from experiments.incontext.matched_protocol import (
    AMAGO_KEYDOOR,
    KEYDOOR_SHORT,
    agent_config,
    amago_config,
    amago_keydoor_config,
    compressed_schedules,
)
from meta.incontext.agent import Batch, InContextAgent
from meta.incontext.config import AgentConfig, TrainConfig
from meta.incontext.references import keydoor_references
from meta.incontext.tasks import critic_bins, make_task_env
from meta.incontext.trainer import InContextTrainer, task_kwargs

# --- the reward scale -------------------------------------------------------------------------------------------


def test_reward_scale_multiplies_the_rewards_of_the_td_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[torch.Tensor] = []
    real = agent_module.multi_gamma_targets

    def spy(rewards: torch.Tensor, *rest: torch.Tensor) -> torch.Tensor:
        seen.append(rewards.clone())
        return real(rewards, *rest)

    monkeypatch.setattr(agent_module, "multi_gamma_targets", spy)
    g = torch.Generator().manual_seed(0)
    batch = Batch(
        obs=torch.randn(2, 6, 3, generator=g),
        actions=torch.randint(0, 4, (2, 5), generator=g),
        rewards=torch.rand(2, 5, generator=g),
        dones=torch.zeros(2, 5),
        mask=torch.ones(2, 5),
        start=torch.zeros(2, dtype=torch.long),
    )
    for scale in (1.0, 100.0):
        agent = InContextAgent(3, 4, AgentConfig(d_model=8, head_hidden=8, context_len=8, reward_scale=scale))
        agent.loss(batch, torch.Generator().manual_seed(0))
        torch.testing.assert_close(seen[-1], batch.rewards * scale)
    # The inputs keep the env's rewards: the batch itself is untouched.
    assert float(batch.rewards.max()) <= 1.0


def test_critic_bins_cover_the_scaled_returns() -> None:
    _, plain = critic_bins("keydoor", [0.999], keydoor_trial_steps=100)
    _, scaled = critic_bins("keydoor", [0.999], reward_scale=100.0, keydoor_trial_steps=100)
    assert math.isclose(plain, 1.05 * math.log1p(100.0))  # a 100-step trial pays at most 100
    assert math.isclose(scaled, 1.05 * math.log1p(100.0 * 100.0))


def test_a_reward_scale_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ValueError, match=r"agent.reward_scale > 0, got 0.0"):
        TrainConfig(agent=AgentConfig(reward_scale=0.0))


# --- the smaller key-door ---------------------------------------------------------------------------------------


def test_keydoor_episode_and_trial_lengths_reach_the_env_the_trainer_and_the_references() -> None:
    cfg = TrainConfig(task="keydoor", keydoor_size=5, keydoor_episode_steps=7, keydoor_trial_steps=30, time_input=True)
    env = make_task_env(cfg.task, **task_kwargs(cfg))
    raw = env.unwrapped
    assert (raw.size, raw.episode_steps, raw.rollout_steps) == (5, 7, 30)  # type: ignore[attr-defined]
    env.reset(seed=0)
    steps, inner_ends, terminated = 0, 0, False
    while not terminated:
        obs, _, terminated, _, info = env.step(3)
        steps += 1
        inner_ends += info["inner_reset"]
    # 30 steps in all, an inner episode at least every 7; the time input counts the 30-step trial.
    assert steps == 30 and inner_ends >= 30 // 7 and math.isclose(float(obs[-1]), 1.0)
    trainer = InContextTrainer(
        TrainConfig(
            task="keydoor", keydoor_trial_steps=30, n_envs=2, agent=AgentConfig(d_model=8, head_hidden=8, context_len=8)
        )
    )
    trainer.collect()
    assert trainer.trial_length == 30 and [len(t) for t in trainer.replay.trajectories] == [30, 30]
    refs = keydoor_references(4, size=5, episode_steps=7, trial_steps=30)
    # No policy collects more than one reward per step; the oracle beats random on these short trials too.
    assert np.all(refs["oracle"] <= 30) and refs["oracle"].mean() > refs["random"].mean()
    assert refs["oracle"].mean() < keydoor_references(4, size=5)["oracle"].mean()


def test_keydoor_lengths_below_one_are_refused() -> None:
    with pytest.raises(ValueError, match=r"keydoor_episode_steps >= 1 and keydoor_trial_steps >= 1, got 0, 500"):
        TrainConfig(keydoor_episode_steps=0)


# --- the named setting ------------------------------------------------------------------------------------------


def test_amago_keydoor_setting_has_amagos_run_details() -> None:
    base = amago_config("keydoor_5x5", 0, 80_000, None)
    cfg = agent_config("amago_keydoor", "keydoor_5x5", 0, 80_000, None)
    assert cfg == amago_keydoor_config("keydoor_5x5", 0, 80_000, None)
    assert (cfg.keydoor_size, cfg.keydoor_episode_steps, cfg.keydoor_trial_steps) == (5, 20, 100)
    assert cfg.agent.reward_scale == 100.0 and base.agent.reward_scale == 1.0
    assert cfg.n_envs == 12 != base.n_envs
    assert math.isclose(cfg.updates_per_step, 1 / 12)
    # AMAGO's 500k-step anneal, capped at half of a shorter run.
    assert cfg.eps_anneal_steps == 40_000
    assert amago_keydoor_config("keydoor", 0, 12_000_000, None).eps_anneal_steps == AMAGO_KEYDOOR["anneal_steps"]
    # The critic spans the scaled returns; the whole 100-step trial is the context; batches of ~2,000 tokens.
    assert math.isclose(cfg.agent.bin_range, 1.05 * math.log1p(100.0 * 100.0)) and cfg.agent.bin_low == 0.0
    assert cfg.agent.context_len == 101 and cfg.batch_size == 20


def test_compressed_schedules_fit_warmup_and_ema_to_a_short_run_and_leave_a_long_one() -> None:
    old = amago_keydoor_config("keydoor_5x5", 0, 9_600, None)
    assert old.agent.lr_warmup_updates == 500  # of the 800 updates the 9,600-step gate planned
    short = compressed_schedules(old, 0.05)
    assert short.agent.lr_warmup_updates == 40  # 5 % of 800
    assert math.isclose(short.agent.ema_decay, 1 - 1 / 40)
    assert dataclasses.replace(short, agent=old.agent) == old  # nothing else changes
    long = amago_keydoor_config("keydoor", 0, 12_000_000, None)
    assert compressed_schedules(long, 0.05) == long  # AMAGO's own scale: 500 updates of warm-up, decay 0.999
    no_ema = dataclasses.replace(old, agent=dataclasses.replace(old.agent, ema_decay=0.0))
    assert compressed_schedules(no_ema, 0.05).agent.ema_decay == 0.0


def test_short_keydoor_setting_updates_more_per_step_on_smaller_batches() -> None:
    cfg = agent_config("amago_keydoor_short", "keydoor_5x5", 0, 32_000, None)
    base = amago_keydoor_config("keydoor_5x5", 0, 32_000, None)
    assert cfg.updates_per_step == KEYDOOR_SHORT["updates_per_step"] == 3 * base.updates_per_step
    assert cfg.batch_size == 8 and base.batch_size == 20
    assert cfg.agent.lr_warmup_updates == 400 and cfg.agent.reward_scale == 100.0 and cfg.n_envs == 12


# --- the gate script --------------------------------------------------------------------------------------------


def _unit(setting: str, seed: int, greedy: float) -> dict[str, object]:
    return {
        "task": "keydoor_5x5",
        "setting": setting,
        "seed": seed,
        "greedy": {"mean": greedy, "stderr": 0.1},
        "sampled": {"mean": greedy},
        "learning_curve": [{"env_steps": 10, "eval_return": greedy / 2}, {"env_steps": 20, "eval_return": greedy}],
        "env_steps": 20,
        "updates": 2,
        "train_seconds": 1.0,
        "stopped_by_time_cap": False,
        "config": {"total_env_steps": 20},
    }


def test_gate_verdict_needs_every_seed_above_half_the_oracle(tmp_path: Path) -> None:
    script = load_script(REPO / "experiments" / "incontext" / "keydoor_gate.py")
    args = script.Args(unit_dir=str(tmp_path), required_seeds=3)
    refs = {"n_tasks": 4, "references": {"random": {"mean": 1.0}, "explorer": {"mean": 18.0}, "oracle": {"mean": 20.0}}}

    def write(setting: str, seed: int, greedy: float) -> None:
        path = script.unit_path(tmp_path, "keydoor_5x5", setting, 20, seed)
        path.write_text(json.dumps(_unit(setting, seed, greedy)))

    write("a", 0, 15.0)
    write("a", 1, 11.0)
    assert script.collect(args, refs)["verdict"] == "incomplete"
    write("a", 2, 10.0)  # exactly half of the oracle does not exceed it
    result = script.collect(args, refs)
    assert result["threshold"] == 10.0 and result["verdict"] == "fail"
    a = result["settings"]["a_20"]
    assert a["setting"] == "a" and a["env_step_budget"] == 20 and a["seeds_passed"] == 2 and a["seeds"]["0"]["passed"]
    assert a["seeds"]["0"]["learning_curve"][0] == {"env_steps": 10, "eval_return": 7.5}
    # One failed seed settles a setting under "3 of 3", however few of its seeds have run.
    write("c", 0, 9.0)
    result = script.collect(args, refs)
    assert result["verdict"] == "fail" and result["settings"]["c_20"]["decided"]
    for seed in range(3):
        write("b", seed, 12.0)
    result = script.collect(args, refs)
    assert (
        result["verdict"] == "pass"
        and result["settings"]["b_20"]["passed"]
        and not result["settings"]["a_20"]["passed"]
    )
    table = script.gate_table(result)
    row = "| `a` | 0 | 15.00 ± 0.10 | 15.00 | 0.750 | 10: 7.50, 20: 15.00 | 20 | 2 | 1 | — | — | — | — | yes |"
    assert row in table
    assert "oracle 20.00" in table and "Verdict: **pass**" in table


def test_gate_script_runs_a_unit_skips_it_when_done_and_refuses_unknown_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = load_script(REPO / "experiments" / "incontext" / "keydoor_gate.py")

    def tiny(*a: object, **k: object) -> TrainConfig:
        cfg = agent_config(*a, **k)  # type: ignore[arg-type]
        agent = dataclasses.replace(cfg.agent, d_model=8, head_hidden=8, lr_warmup_updates=1)
        return dataclasses.replace(cfg, n_envs=2, batch_size=2, learning_starts=0, agent=agent)

    monkeypatch.setattr(script, "agent_config", tiny)
    args = script.Args(
        env_steps=400, curve_points=2, eval_tasks=3, seeds=[0], required_seeds=1, unit_dir=str(tmp_path / "units"),
        runs_root=str(tmp_path / "runs"), out=str(tmp_path / "gate.json"), settings=["amago_keydoor"],
    )  # fmt: skip
    script.main(args)
    path = tmp_path / "units" / "keydoor_5x5__amago_keydoor__400steps__seed0.json"
    unit = json.loads(path.read_text())
    assert [row["env_steps"] for row in unit["learning_curve"]] == [200, 400] and unit["updates"] == 33
    assert unit["config"]["agent"]["reward_scale"] == 100.0 and unit["config"]["keydoor_trial_steps"] == 100
    # The critic is checked at the unit's end, on the run's own replay, for every discount.
    assert set(unit["value_check"]["per_discount"]) == {"0.9", "0.99", "0.999"}
    assert unit["value_check"]["updates"] == 33
    # ... and probed: its own greedy play and its heading for remembered targets, on the first evaluation tasks.
    probe = unit["critic_probe"]
    assert probe["n_tasks"] == 3 and probe["q_greedy"] >= 0.0
    assert set(probe["memory_use"]) == {"steps", "actor_toward", "critic_toward", "chance"}
    result = json.loads((tmp_path / "gate.json").read_text())
    assert set(result["references"]) == {"random", "explorer", "oracle"} and result["verdict"] in {"pass", "fail"}
    assert result["settings"]["amago_keydoor_400"]["seeds"]["0"]["greedy"] == unit["greedy"]["mean"]
    assert (tmp_path / "gate.md").read_text() == script.gate_table(result)
    before = path.stat().st_mtime_ns
    script.main(args)  # a done unit is skipped, not rerun
    (tmp_path / "gate.json").unlink()
    script.main(dataclasses.replace(args, collect_only=True, seeds=[1]))  # seed 1 is not run, only collected
    assert path.stat().st_mtime_ns == before and json.loads((tmp_path / "gate.json").read_text()) == result
    assert not (tmp_path / "units" / "keydoor_5x5__amago_keydoor__400steps__seed1.json").exists()
    # Another budget is another unit: run, not skipped.
    script.main(dataclasses.replace(args, env_steps=200, curve_points=1))
    assert set(json.loads((tmp_path / "gate.json").read_text())["settings"]) == {
        "amago_keydoor_400",
        "amago_keydoor_200",
    }
    # A variant: one knob changed, its own unit and row, the override recorded.
    variant = dataclasses.replace(args, variant="tau02", agent_override=["tau=0.02"], train_override=["n_envs=3"])
    script.main(variant)
    unit = json.loads((tmp_path / "units" / "keydoor_5x5__amago_keydoor+tau02__400steps__seed0.json").read_text())
    assert unit["config"]["agent"]["tau"] == 0.02 and unit["config"]["n_envs"] == 3
    assert unit["overrides"] == {"train": {"n_envs": 3}, "agent": {"tau": 0.02}}
    result = json.loads((tmp_path / "gate.json").read_text())
    assert result["settings"]["amago_keydoor+tau02_400"]["overrides"]["agent"] == {"tau": 0.02}
    assert "amago_keydoor_400" in result["settings"]
    row = result["settings"]["amago_keydoor+tau02_400"]["seeds"]["0"]
    assert len(row["critic_size_ratio"]) == 3 and set(row["critic_correlation"]) == {"0.9", "0.99", "0.999"}
    with pytest.raises(SystemExit, match="name the variant"):
        script.main(dataclasses.replace(args, agent_override=["tau=0.02"]))
    with pytest.raises(SystemExit, match="unknown setting"):
        script.main(script.Args(settings=["nope"], unit_dir=str(tmp_path / "u2")))
    with pytest.raises(SystemExit, match="unknown gate task"):
        script.main(script.Args(task="tmaze_100", unit_dir=str(tmp_path / "u2")))


def test_gate_script_plays_the_references_of_the_benchmark_key_door_on_its_8x8_grid(tmp_path: Path) -> None:
    """``--task keydoor`` (the benchmark's own key-door, for a first look at a setting there) names no grid or
    lengths: its references play TrainConfig's 8x8 grid, 50-step episodes and 500-step trials."""
    script = load_script(REPO / "experiments" / "incontext" / "keydoor_gate.py")
    refs = script.references(script.Args(task="keydoor", eval_tasks=2, unit_dir=str(tmp_path)))
    direct = keydoor_references(2, size=8, episode_steps=50, trial_steps=500)
    assert refs["references"]["oracle"]["mean"] == pytest.approx(float(np.mean(direct["oracle"])))


# --- normalized advantages ----------------------------------------------------------------------------------------


def test_normalized_advantages_have_unit_scale_per_discount_and_ignore_padding() -> None:
    from meta.incontext.agent import ADVANTAGE_FLOOR, normalize_advantages

    g = torch.Generator().manual_seed(0)
    adv = torch.randn(3, 5, 2, 4, generator=g) * torch.tensor([0.01, 2.0])[:, None]
    mask = torch.ones(3, 5)
    mask[:, -1] = 0.0
    adv[:, -1] = 1e6  # padding: must not enter the scale
    out = normalize_advantages(adv, mask)
    rms = (out[:, :-1] ** 2).mean(dim=(0, 1, 3)).sqrt()
    torch.testing.assert_close(rms, torch.ones(2))
    # Differences below the floor stay below one: noise of a critic that has learned nothing is not blown up.
    tiny = torch.full((1, 2, 1, 4), ADVANTAGE_FLOOR / 10)
    torch.testing.assert_close(normalize_advantages(tiny, torch.ones(1, 2)), tiny / ADVANTAGE_FLOOR)


def test_advantage_norm_changes_the_actor_term_only() -> None:
    g = torch.Generator().manual_seed(0)
    batch = Batch(
        obs=torch.randn(2, 6, 3, generator=g),
        actions=torch.randint(0, 4, (2, 5), generator=g),
        rewards=(torch.rand(2, 5, generator=g) > 0.8).float(),
        dones=torch.zeros(2, 5),
        mask=torch.ones(2, 5),
        start=torch.zeros(2, dtype=torch.long),
    )
    infos, grads = [], []
    for norm in (False, True):
        torch.manual_seed(0)
        cfg = AgentConfig(d_model=8, head_hidden=8, context_len=8, advantage_norm=norm, bc_coef=0.0, entropy_coef=0.0)
        agent = InContextAgent(3, 4, cfg)
        loss, info = agent.loss(batch, torch.Generator().manual_seed(0))
        loss.backward()
        infos.append(info)
        # The actor head gets gradient from the actor term alone here (no BC, no entropy bonus).
        grads.append(float(torch.cat([p.grad.flatten() for p in agent.actor.parameters()]).norm()))
    plain, normed = infos
    assert (
        plain["train/critic_loss"] == normed["train/critic_loss"] and plain["train/bc_kept"] == normed["train/bc_kept"]
    )
    # The untrained critics' Q differences are tiny in env units; normalized, they push the policy far harder.
    assert grads[1] > 10 * grads[0] > 0


# --- the critic's read-out of sparse targets ---------------------------------------------------------------------


def _critic_trained_to(agent: InContextAgent, targets: torch.Tensor) -> torch.Tensor:
    """The read-out of the bin distribution that minimizes the two-hot cross-entropy to ``targets`` (their average
    encoding, the optimum of a critic that cannot tell the samples apart)."""
    probs = agent.encode_targets(targets).mean(0)
    return agent.read_values(probs.clamp_min(1e-12).log())


def test_real_value_mean_reads_a_sparse_targets_mean_and_the_symlog_one_does_not() -> None:
    # A key-door step under the x100 reward scale: 100 with probability 0.02, else 0.
    targets = torch.zeros(50)
    targets[0] = 100.0
    low, high = critic_bins("keydoor", [0.999], reward_scale=100.0, keydoor_trial_steps=100)
    cfg = AgentConfig(d_model=8, head_hidden=8, context_len=8, n_bins=15, bin_low=low, bin_range=high)
    real = InContextAgent(3, 4, dataclasses.replace(cfg, value_mean="real"))
    symlog_mean = InContextAgent(3, 4, cfg)
    torch.testing.assert_close(_critic_trained_to(real, targets), torch.tensor(2.0))
    # symexp of the mean symlog: symexp(0.02 * log(101)) = 0.097, a twentieth of the mean.
    assert float(_critic_trained_to(symlog_mean, targets)) < 0.1
    # A sure target reads back exactly either way.
    for agent in (real, symlog_mean):
        torch.testing.assert_close(_critic_trained_to(agent, torch.full((4,), 37.0)), torch.tensor(37.0))


def test_saved_configs_without_value_mean_read_as_the_symlog_mean() -> None:
    from meta.incontext.config import with_saved_defaults
    from rolloutlab.config import from_dict, to_dict

    saved = to_dict(amago_keydoor_config("keydoor_5x5", 0, 16_000, None))
    del saved["agent"]["value_mean"]
    assert from_dict(TrainConfig, with_saved_defaults(saved)).agent.value_mean == "symlog"


def test_lowest_critic_init_starts_the_real_mean_near_zero_instead_of_the_bins_mean() -> None:
    low, high = critic_bins("keydoor", [0.9, 0.99, 0.999], reward_scale=100.0, keydoor_trial_steps=100)
    cfg = AgentConfig(
        d_model=8, head_hidden=8, context_len=8, n_bins=15, bin_low=low, bin_range=high, reward_scale=100.0,
        value_mean="real",
    )  # fmt: skip
    features = torch.randn(5, 8, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    uniform = InContextAgent(3, 4, cfg).q_values(features).detach() / 100.0
    torch.manual_seed(0)
    lowest = InContextAgent(3, 4, dataclasses.replace(cfg, critic_init="lowest"))
    start = lowest.q_values(features).detach() / 100.0
    assert float(uniform.min()) > 10.0  # the bins' real mean: 20 env units against key-door returns below 1
    assert float(start.max()) < 0.02
    torch.testing.assert_close(lowest.target_critics.b2, lowest.critics.b2)  # the targets start there too


# --- AMAGO's actor term --------------------------------------------------------------------------------------------


def test_target_spread_is_the_masked_standard_deviation_per_discount() -> None:
    from meta.incontext.agent import ADVANTAGE_FLOOR, target_spread

    targets = torch.tensor([[[0.0, 5.0], [2.0, 5.0], [1e6, 1e6]]])  # (1, 3, 2): the last step is padding
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    torch.testing.assert_close(target_spread(targets, mask), torch.tensor([1.0, ADVANTAGE_FLOOR]))


def test_amago_actor_term_follows_the_pessimistic_critic_and_ignores_the_reward_scale() -> None:
    """Four critics, the same for every input: three value action 0 at 1 and action 1 at 2 (env units), one values
    action 0 at 9. The ensemble mean ranks action 0 first, the minimum action 1: the default actor term pushes the
    policy toward action 0, AMAGO's toward action 1; and AMAGO's gradient is the same at reward scales 1 and 100."""
    g = torch.Generator().manual_seed(0)
    batch = Batch(
        obs=torch.randn(2, 6, 3, generator=g),
        actions=torch.randint(0, 4, (2, 5), generator=g),
        rewards=(torch.rand(2, 5, generator=g) > 0.5).float(),
        dones=torch.zeros(2, 5),
        mask=torch.ones(2, 5),
        start=torch.zeros(2, dtype=torch.long),
    )

    def logit_gradient(actor_loss: str, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
        torch.manual_seed(0)
        cfg = AgentConfig(
            d_model=8, head_hidden=8, context_len=8, n_bins=41, bin_low=0.0, bin_range=float(np.log1p(10 * scale)),
            gammas=[0.9], reward_scale=scale, actor_loss=actor_loss,  # type: ignore[arg-type]
            critic_coef=0.0, bc_coef=0.0, entropy_coef=0.0, value_mean="real",
        )  # fmt: skip
        agent = InContextAgent(3, 4, cfg)
        values = torch.tensor([[1.0, 2.0, 0.0, 0.0]] * 3 + [[9.0, 2.0, 0.0, 0.0]]) * scale  # (K, A), critic units
        with torch.no_grad():
            agent.critics.w2.zero_()
            probs = agent.encode_targets(values).clamp_min(1e-9)  # (K, A, N)
            agent.critics.b2.copy_(probs.log().flatten(1))
            agent.actor[-1].weight.zero_()
            agent.actor[-1].bias.zero_()
        loss, _ = agent.loss(batch, torch.Generator().manual_seed(0))
        loss.backward()
        assert agent.actor[-1].bias.grad is not None
        return -agent.actor[-1].bias.grad, loss.detach()  # ascent direction of the logits

    mean_up, _ = logit_gradient("advantage", 1.0)
    low_up, _ = logit_gradient("amago", 1.0)
    assert int(mean_up.argmax()) == 0 and int(low_up.argmax()) == 1
    torch.testing.assert_close(logit_gradient("amago", 100.0)[0], low_up, rtol=1e-2, atol=1e-5)


def test_keydoor_qlearning_setting_is_the_configuration_the_gate_measured() -> None:
    """The named setting rebuilds the committed gate unit's config (its variant of ``amago_keydoor_short``) field for
    field, but for the unit's wall-clock cap (``keydoor_gate.py`` sets it per unit)."""
    from experiments.incontext.benchmark_parts import config_differences

    unit = json.loads(
        (
            REPO / "experiments/incontext/results/keydoor_gate_short"
            / "keydoor_5x5__amago_keydoor_short+scalarq_cell_48actors_temp001_d64_prevobs__1600000steps__seed0.json"
        ).read_text()
    )  # fmt: skip
    cfg = agent_config("keydoor_qlearning", "keydoor_5x5", 0, 1_600_000, None, 200)
    assert config_differences(unit["config"], cfg) == ["max_minutes"]
    # On the 8x8 key-door's 500-step trials the replay holds the same env steps in fewer trials, and each trial is
    # replayed as often as on the gate (10 times: updates x trials per batch = 10 x trials collected).
    big = agent_config("keydoor_qlearning", "keydoor", 0, 1_600_000, None, 200)
    assert big.buffer_trajectories == 1_600_000 // 500 and big.agent.policy == "critic" and big.previous_obs_input
    for c, trial in ((cfg, 100), (big, 500)):
        assert c.updates_per_step * c.batch_size * trial == pytest.approx(10.0)
    assert big.updates_per_step == pytest.approx(cfg.updates_per_step / 5)


def test_keydoor_novelty_setting_is_keydoor_qlearning_with_the_first_visit_bonus() -> None:
    from experiments.incontext.benchmark_parts import config_differences
    from experiments.incontext.matched_protocol import budget
    from rolloutlab.config import to_dict

    plain = agent_config("keydoor_qlearning", "keydoor", 0, 7_200_000, 60.0, 200)
    novelty = agent_config("keydoor_novelty", "keydoor", 0, 7_200_000, 60.0, 200)
    assert sorted(config_differences(to_dict(plain), novelty)) == ["checkpoint_every", "novelty_bonus"]
    assert novelty.novelty_bonus == 0.1 and novelty.novelty_anneal_steps is None
    assert plain.novelty_bonus == 0.0 and budget("keydoor_novelty", "keydoor") == budget("keydoor_qlearning", "keydoor")
