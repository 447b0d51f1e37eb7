"""Issue 18: training histories equal acting histories (measured), references on the agent's own tasks, AMAGO's
exploration and learning-rate schedules by hand, the EMA copy, RecurrentPPO at equal wall-clock, the benchmark
script."""

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

from experiments.incontext.benchmark_parts import config_changed
from experiments.incontext.matched_protocol import (
    BUDGETS,
    SETTING_BUDGETS,
    agent_config,
    amago_config,
    budget,
    issue7_config,
    one_row_per_step,
    partial_path,
    summarize,
    summary_table,
    whole_trial_config,
)
from meta.incontext.agent import InContextAgent, polyak_
from meta.incontext.config import AgentConfig, TrainConfig
from meta.incontext.exploration import BilevelEpsilon
from meta.incontext.history_match import history_match
from meta.incontext.references import (
    bandit_eval_tasks,
    bandit_references,
    keydoor_references,
    tmaze_references,
)
from meta.incontext.replay import Trajectory, TrajectoryReplay
from meta.incontext.tasks import critic_bins, eval_task_seeds, make_task_env
from meta.incontext.trainer import InContextTrainer, learning_rate, task_kwargs


def _replay(length: int, dim: int, n: int = 6) -> TrajectoryReplay:
    rng = np.random.default_rng(0)
    replay = TrajectoryReplay(100)
    for _ in range(n):
        replay.add(
            Trajectory(
                obs=rng.standard_normal((length + 1, dim)).astype(np.float32),
                actions=rng.integers(0, 4, length),
                rewards=rng.random(length).astype(np.float32),
                dones=np.zeros(length, dtype=np.float32),
            )
        )
    return replay


def _match(cfg: TrainConfig, length: int, rows: int) -> float:
    torch.manual_seed(0)
    agent = InContextAgent(8, 4, cfg.agent)
    rng = np.random.default_rng(1)
    return history_match(agent, _replay(length, 8), rows, cfg.window, cfg.full_trials, rng)["fraction"]


# --- 1. the history match, measured ------------------------------------------------------------------------------


def test_issue7_bandit_windows_see_their_acting_history_on_four_per_cent_of_tokens() -> None:
    """Windows of 50 cut at a random start of a 100-step trial, context 50: only the window that starts at step 0
    (1 start in 51) and the last token of every other window see their acting history: 2 / 51 = 3.9 %."""
    fraction = _match(issue7_config("bandit_5x100", 0, 10_000, None), 100, 24)
    assert 0.02 <= fraction <= 0.07


def test_issue7_keydoor_windows_almost_never_see_their_acting_history() -> None:
    fraction = _match(issue7_config("keydoor", 0, 10_000, None), 500, 3)
    assert fraction < 0.03


@pytest.mark.parametrize(("name", "length", "rows"), [("bandit_5x100", 100, 6), ("keydoor", 500, 2)])
def test_whole_trial_training_sees_exactly_the_acting_history(name: str, length: int, rows: int) -> None:
    cfg = amago_config(name, 0, 10_000, None)
    assert cfg.full_trials and cfg.agent.context_len == length + 1
    assert _match(cfg, length, rows) == 1.0


def test_full_trial_batches_start_at_zero_and_cover_the_trial() -> None:
    replay = _replay(30, 2)
    batch = replay.sample(5, window=8, rng=np.random.default_rng(0), full_trials=True)
    assert batch.obs.shape == (5, 31, 2) and torch.all(batch.start == 0) and torch.all(batch.mask == 1.0)


def test_full_trials_refuse_a_context_shorter_than_the_trial() -> None:
    cfg = TrainConfig(task="bandit", n_arms=2, horizon=10, full_trials=True, agent=AgentConfig(context_len=10))
    with pytest.raises(ValueError, match="context_len"):
        InContextTrainer(cfg)


# --- 2. references on the agent's own evaluation tasks ----------------------------------------------------------


def test_bandit_references_play_the_tasks_the_agent_plays() -> None:
    """The arm means and the per-pull coin of the reference draws are the env's own at the evaluation seeds, and the
    deterministic references score the same per task when played through the env the agent acts in."""
    seeds = eval_task_seeds(5)
    means, coins = bandit_eval_tasks(2, 100, seeds)
    refs = bandit_references(2, 100, 5)
    for row, seed in enumerate(seeds):
        env = make_task_env("bandit", n_arms=2, horizon=100, time_input=True)
        env.reset(seed=seed)
        np.testing.assert_array_equal(env.unwrapped.means, means[row])  # type: ignore[attr-defined]
        total = 0.0
        for t in range(100):
            arm = int(np.argmax(means[row]))
            _, reward, *_ = env.step(arm)
            assert reward == float(coins[row, t] < means[row, arm])
            total += reward
        assert total == refs["oracle"][row]


def test_bayes_optimal_reference_is_the_dp_policy_on_the_tasks() -> None:
    from envs.metarl.references import bayes_optimal_two_arm_value

    refs = bandit_references(2, 10, 4000, seeds=list(range(4000)))
    # Played on 4000 tasks, the DP policy's mean is its exact value within Monte-Carlo error, and above Thompson.
    assert abs(refs["bayes_optimal"].mean() - bayes_optimal_two_arm_value(10)) < 4 * refs["bayes_optimal"].std() / 63
    assert refs["bayes_optimal"].mean() > refs["thompson"].mean()


def test_the_agent_and_the_references_use_the_same_evaluation_seeds(monkeypatch: pytest.MonkeyPatch) -> None:
    from meta.incontext import trainer

    seen: list[int] = []

    def fake(agent: object, venv: gym.vector.VectorEnv, seeds: list[int], *rest: object) -> list[Trajectory]:
        seen.extend(seeds)
        return [Trajectory(np.zeros((2, 1)), np.zeros(1, np.int64), np.ones(1, np.float32), np.ones(1))] * len(seeds)

    monkeypatch.setattr(trainer, "run_rollouts", fake)
    cfg = TrainConfig(task="bandit", n_arms=2, horizon=10)
    returns = trainer.evaluate_agent(None, cfg, 120, max_parallel=50)  # type: ignore[arg-type]
    assert len(returns) == 120 and seen[:120] == eval_task_seeds(120)
    cues = tmaze_references(4, 6)["memory_free"]
    for seed, up in zip(eval_task_seeds(6), cues, strict=True):
        obs, _ = make_task_env("tmaze", corridor_length=4).reset(seed=seed)
        assert (obs[0] == 1.0) == bool(up)


def test_keydoor_references_on_the_evaluation_tasks() -> None:
    refs = keydoor_references(6)
    assert set(refs) == {"random", "explorer", "oracle"} and all(len(v) == 6 for v in refs.values())
    # The explorer only remembers what it saw and still comes near the oracle that knows the cells.
    assert refs["explorer"].mean() >= 0.8 * refs["oracle"].mean() > 10 * refs["random"].mean()
    assert np.all(refs["explorer"] <= refs["oracle"] + 2)


def test_a_smaller_key_door_reaches_the_agent_and_its_references() -> None:
    cfg = dataclasses.replace(amago_config("keydoor", 0, 1000, None), keydoor_size=4)
    assert make_task_env(cfg.task, **task_kwargs(cfg)).unwrapped.size == 4  # type: ignore[attr-defined]
    small, large = keydoor_references(6, size=4), keydoor_references(6)
    # On 4x4 the oracle walks at most 6 cells between key and door; on 8x8 up to 14: more rewards per trial.
    assert small["oracle"].mean() > large["oracle"].mean()
    # The oracle's tasks are the agent's: the cells drawn at reset with the evaluation seeds on the 4x4 grid.
    probe = make_task_env("keydoor", keydoor_size=4).unwrapped
    probe.reset(seed=eval_task_seeds(1)[0])
    assert probe.size == 4 and max(*probe.key, *probe.door) <= 3  # type: ignore[attr-defined]


# --- 3. AMAGO's schedules by hand, the EMA copy, the critic range -----------------------------------------------


def test_bilevel_epsilon_by_hand() -> None:
    schedule = BilevelEpsilon(horizon=100, anneal_steps=1000, randomize=False)
    assert schedule.ends(0) == (1.0, 0.8)
    np.testing.assert_allclose(schedule.ends(500), (1.0 - 0.95 * 0.5, 0.8 - 0.79 * 0.5))
    np.testing.assert_allclose(schedule.ends(5000), (0.05, 0.01))  # floors after the anneal
    # Halfway through training, halfway through a trial, multipliers 1 and 0.5: 0.525 - 0.12 * 0.5 = 0.465.
    np.testing.assert_allclose(schedule(500, 50, np.array([1.0, 0.5])), [0.465, 0.2325])
    np.testing.assert_allclose(schedule(0, 0, np.ones(2)), [1.0, 1.0])
    np.testing.assert_allclose(schedule(0, 100, np.ones(1)), [0.8])
    assert np.all(schedule.multipliers(3, np.random.default_rng(0)) == 1.0)
    drawn = BilevelEpsilon(100, 1000).multipliers(1000, np.random.default_rng(0))
    assert drawn.min() >= 0.0 and drawn.max() < 1.0 and abs(drawn.mean() - 0.5) < 0.05


def test_learning_rate_warms_up_then_decays_by_cosine() -> None:
    agent = AgentConfig(lr=1e-3, lr_warmup_updates=10, lr_final_fraction=0.1)
    assert math.isclose(learning_rate(0, agent, 110), 1e-4)
    assert math.isclose(learning_rate(9, agent, 110), 1e-3)
    assert math.isclose(learning_rate(10, agent, 110), 1e-3)
    assert math.isclose(learning_rate(60, agent, 110), 1e-3 * (0.1 + 0.9 * 0.5))
    assert math.isclose(learning_rate(110, agent, 110), 1e-4) and math.isclose(learning_rate(500, agent, 110), 1e-4)
    assert learning_rate(7, AgentConfig(lr=3e-4), 100) == 3e-4  # the default: constant


def test_polyak_average_of_parameters_copies_buffers() -> None:
    online, target = torch.nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    with torch.no_grad():
        online.weight.fill_(3.0)
        online.running_mean.fill_(7.0)
    polyak_(target, online, 0.25)
    torch.testing.assert_close(target.weight, torch.full((3,), 1.5))  # 0.75 * 1 + 0.25 * 3
    torch.testing.assert_close(target.running_mean, torch.full((3,), 7.0))


def test_critic_is_sized_to_the_return_range() -> None:
    low, high = critic_bins("bandit", [0.8, 0.95], horizon=100)
    assert low == 0.0 and math.isclose(high, 1.05 * math.log(21.0))  # values <= 1 / (1 - 0.95) = 20
    assert math.isclose(critic_bins("tmaze", [0.999], corridor_length=100)[1], 1.05 * math.log(2.0))
    agent = InContextAgent(4, 2, AgentConfig(n_bins=9, bin_low=low, bin_range=high))
    assert agent.bins[0] == 0.0 and len(agent.bins) == 9


def _new_tiny(steps: int) -> TrainConfig:
    cfg = amago_config("bandit_2x100", 0, steps, None, eval_tasks=4)
    agent = dataclasses.replace(cfg.agent, d_model=16, head_hidden=16, lr_warmup_updates=3, ema_decay=0.9)
    return dataclasses.replace(
        cfg, horizon=10, n_envs=2, batch_size=2, window=10, learning_starts=0, eval_every_steps=10**9,
        checkpoint_every=1, eps_anneal_steps=60, agent=dataclasses.replace(agent, context_len=11),
    )  # fmt: skip


def test_new_training_resumes_exactly_with_its_ema_copy(tmp_path: Path) -> None:
    straight = InContextTrainer(_new_tiny(80), None)
    straight.learn()
    InContextTrainer(_new_tiny(40), tmp_path).learn()
    resumed = InContextTrainer(_new_tiny(80), tmp_path, resume=True)
    resumed.learn()
    assert resumed.updates == straight.updates == 8 and straight.ema_agent is not None
    assert straight.eval_agent is straight.ema_agent
    for one, two in ((straight.agent, resumed.agent), (straight.ema_agent, resumed.ema_agent)):
        for a, b in zip(one.state_dict().values(), two.state_dict().values(), strict=True):  # type: ignore[union-attr]
            torch.testing.assert_close(a, b)
    # The EMA weights trail the online ones.
    online = dict(straight.agent.named_parameters())
    assert any(not torch.equal(p, online[n]) for n, p in straight.ema_agent.named_parameters())


def test_learning_curve_has_one_row_per_env_step(tmp_path: Path) -> None:
    # An evaluation falls due at the last step (every 20 steps of 80), and a finished run resumed evaluates again:
    # neither may repeat the last row.
    cfg = dataclasses.replace(_new_tiny(80), eval_every_steps=20)
    first = InContextTrainer(cfg, tmp_path).learn()
    again = InContextTrainer(cfg, tmp_path, resume=True).learn()
    for result in (first, again):
        assert [row["env_steps"] for row in result["history"]] == [20, 40, 60, 80]
    repeated = [{"env_steps": 40, "eval_return": 1.0}, {"env_steps": 80, "eval_return": 2.0}] * 2
    assert [r["env_steps"] for r in one_row_per_step(sorted(repeated, key=lambda r: r["env_steps"]))] == [40, 80]


def test_time_in_trial_input() -> None:
    env = make_task_env("keydoor", time_input=True)
    obs, _ = env.reset(seed=0)
    assert obs[-1] == 0.0 and env.observation_space.contains(obs)
    for _ in range(250):
        obs, *_ = env.step(0)
    assert math.isclose(float(obs[-1]), 0.5)


# --- 4. RecurrentPPO at equal wall-clock ------------------------------------------------------------------------


def test_recurrent_ppo_stops_at_the_wall_clock_and_the_grid_is_stated() -> None:
    from meta.incontext.baseline import RECURRENT_PPO_GRID, RecurrentPPOConfig, recurrent_ppo_grid, train_recurrent_ppo

    config = RecurrentPPOConfig(n_envs=2, n_steps=16, batch_size=32, n_epochs=1, lstm_hidden_size=8)
    result = train_recurrent_ppo("tmaze", None, 0, 4, config, max_seconds=0.5, corridor_length=3, time_input=True)
    assert result["stopped_by"] == "wall_clock" and result["train_seconds"] < 5.0 and result["env_steps"] > 0
    grid = recurrent_ppo_grid()
    assert len(grid) == 8 == math.prod(len(v) for v in RECURRENT_PPO_GRID.values())
    assert len({(c.lstm_hidden_size, c.n_epochs, c.gamma) for c in grid}) == 8


# --- 5. the benchmark script ------------------------------------------------------------------------------------


def test_a_setting_keeps_its_own_budget_on_a_task_and_the_shared_one_elsewhere() -> None:
    assert (
        budget("keydoor_qlearning", "keydoor") == SETTING_BUDGETS["keydoor_qlearning"]["keydoor"] != BUDGETS["keydoor"]
    )
    assert budget("amago", "keydoor") == BUDGETS["keydoor"]
    assert budget("keydoor_qlearning", "tmaze_100") == BUDGETS["tmaze_100"]
    with pytest.raises(KeyError):
        budget("amago", "keydoor_5x5")  # a gate task has no benchmark budget


def test_benchmark_script_writes_partials_at_once_resumes_and_summarizes(tmp_path: Path) -> None:
    script = load_script(REPO / "experiments" / "incontext" / "matched.py")
    args = script.Args(
        tasks=["bandit_2x100"], seeds=[0], budget_scale=0.005, eval_tasks=20, skip_ppo=True,
        partial_dir=str(tmp_path / "partial"), runs_root=str(tmp_path / "runs"), out=str(tmp_path),
        tmaze_headline_dir=str(tmp_path / "no_headline"), bandit_headline_dir=str(tmp_path / "no_headline"),
    )  # fmt: skip
    script.main(args)
    agent_file = partial_path(tmp_path / "partial", "bandit_2x100", "agent", 0)
    run = json.loads(agent_file.read_text())
    assert run["history_match"]["fraction"] == 1.0 and "eval_sampled" in run and "eval_online" in run
    stamp = agent_file.stat().st_mtime_ns
    script.main(args)  # everything on disk: nothing rerun
    assert agent_file.stat().st_mtime_ns == stamp
    summary = json.loads((tmp_path / "summary.json").read_text())
    entry = summary["tasks"]["bandit_2x100"]
    assert entry["agent"]["mean"] == run["eval"]["mean"] and "bayes_optimal" in entry["references"]
    assert entry["target_met"] == (run["eval"]["mean"] >= 0.98 * entry["references"]["bayes_optimal"])
    assert summary["tasks"]["keydoor"]["status"] == "incomplete" and "target_met" not in summary["tasks"]["keydoor"]
    # What is still to run is named, piece by piece: here RecurrentPPO's (skipped), and all of the key-door's.
    assert entry["missing_pieces"] == [
        "bandit_2x100__ppo_grid.json",
        "bandit_2x100__ppo_equal_steps__seed0.json",
        "bandit_2x100__ppo_equal_time__seed0.json",
    ]
    assert len(summary["tasks"]["keydoor"]["missing_pieces"]) == 5
    assert "(3 pieces to run)" in (tmp_path / "summary.md").read_text()
    assert (tmp_path / "summary.md").read_text() == summary_table(summarize(tmp_path / "partial", [0]))
    assert entry["agent"]["settings"] == ["amago"]
    # A piece run with another setting is not mixed in: the script stops and names the file.
    with pytest.raises(SystemExit, match="other settings"):
        script.main(dataclasses.replace(args, setting="whole_trial"))
    with pytest.raises(SystemExit, match="unknown RecurrentPPO piece 'ppo_equal_step'"):
        script.main(dataclasses.replace(args, ppo_pieces=["ppo_equal_step"]))
    assert agent_file.stat().st_mtime_ns == stamp


def test_the_recurrent_ppo_grid_splits_over_processes_and_the_choice_waits_for_all(tmp_path: Path) -> None:
    script = load_script(REPO / "experiments" / "incontext" / "matched.py")
    args = script.Args(
        tasks=["bandit_2x100"], seeds=[0], budget_scale=0.002, eval_tasks=10, grid_eval_tasks=10, grid_fraction=0.02,
        grid_settings=[6, 1], partial_dir=str(tmp_path / "partial"), runs_root=str(tmp_path / "runs"),
        out=str(tmp_path), tmaze_headline_dir=str(tmp_path / "no"), bandit_headline_dir=str(tmp_path / "no"),
    )  # fmt: skip
    script.main(args)
    partial = tmp_path / "partial"
    assert sorted(p.name for p in partial.glob("bandit_2x100__ppo_*")) == [
        "bandit_2x100__ppo_grid1.json", "bandit_2x100__ppo_grid6.json",
    ]  # fmt: skip
    script.main(dataclasses.replace(args, grid_settings=[0, 2, 3, 4, 5, 7], ppo_pieces=["ppo_equal_steps"]))
    grid = json.loads((partial / "bandit_2x100__ppo_grid.json").read_text())
    assert len(grid["scores"]) == 8
    assert (partial / "bandit_2x100__ppo_equal_steps__seed0.json").exists()
    assert not (partial / "bandit_2x100__ppo_equal_time__seed0.json").exists()  # another process's piece
    script.main(dataclasses.replace(args, ppo_pieces=["ppo_equal_time"]))
    assert (partial / "bandit_2x100__ppo_equal_time__seed0.json").exists()


def test_benchmark_summary_carries_the_pre_registered_tmaze_headline(tmp_path: Path) -> None:
    script = load_script(REPO / "experiments" / "incontext" / "matched.py")
    headline = tmp_path / "headline"
    headline.mkdir()
    plan = {
        "task": "tmaze_100",
        "picked": {"name": "whole_trial", "setting": "whole_trial", "train_override": {}},
        "env_steps": 300_000,
        "seeds": [100, 101],
        "target": {"success_at_least": 0.95, "on": "every seed"},
    }
    (headline / "preregistration.json").write_text(json.dumps(plan))
    run = {"eval": {"mean": 1.0}, "eval_sampled": {"mean": 1.0}, "env_steps": 60_600, "train_seconds": 1.0,
           "history": [{"env_steps": 60_600, "eval_return": 1.0}]}  # fmt: skip
    (headline / "agent_seed100.json").write_text(json.dumps(run))
    args = script.Args(
        summarize_only=True, seeds=[0], partial_dir=str(tmp_path / "partial"), out=str(tmp_path),
        tmaze_headline_dir=str(headline), bandit_headline_dir=str(tmp_path / "no_headline"),
    )  # fmt: skip
    script.main(args)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["tmaze_headline"]["verdict"] == "incomplete"
    assert summary["tmaze_headline"]["per_seed"][0]["success"] == 1.0
    assert "seed 100 1.000; seed 101 not run: incomplete" in (tmp_path / "summary.md").read_text()


def test_whole_trial_setting_is_the_gate_run_it_names() -> None:
    # The named setting must be exactly the 400k-step gate run whose score docs/results/incontext.md quotes for it.
    result = json.loads(
        (REPO / "experiments/incontext/results/gate400k_oldknobs_peractor_notime_bins33.json").read_text()
    )
    stored = next(iter(result["runs"].values()))["config"]
    cfg = dataclasses.replace(whole_trial_config("bandit_5x100", 0, 400_000, None, 1000), eval_every_steps=10**9)
    # Fields added since the run get the defaults of the code that ran it (config_changed reads it that way).
    assert not config_changed(stored, cfg)
    assert agent_config("whole_trial", "keydoor", 0, 1000, None).eps_anneal_steps == 60_000
    with pytest.raises(ValueError, match="unknown setting"):
        agent_config("amgo", "keydoor", 0, 1000, None)


def test_value_check_script_compares_q_with_discounted_returns(tmp_path: Path) -> None:
    script = load_script(REPO / "experiments" / "incontext" / "value_check.py")
    rewards = np.array([[0.0, 1.0, 0.0, 1.0]])
    dones = np.array([[0.0, 0.0, 1.0, 0.0]])
    # Step 2 ends the task: no bootstrapping across it.
    np.testing.assert_allclose(script.discounted_returns(rewards, dones, 0.5), [[0.5, 1.0, 0.0, 1.0]])
    InContextTrainer(_new_tiny(40), tmp_path).learn()
    out = tmp_path / "check.json"
    script.main(script.Args(run_dir=str(tmp_path), trials=2, out=str(out)))
    result = json.loads(out.read_text())
    assert set(result["per_discount"]) == {str(g) for g in _new_tiny(40).agent.gammas}
    assert abs(sum(result["policy_mean_probs"]) - 1.0) < 1e-5
