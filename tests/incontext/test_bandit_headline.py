"""The pre-registered bandit 2x100 headline: the rule that picks the env-step budget from the side seeds' learning
curves, the plan's guards (fresh seeds, side seeds of the same runs, seeds outside the plan, an uncommitted plan), the
verdict on the mean over the seeds, and the run loop's units."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import experiments.incontext.headline as headline
from experiments.incontext.headline import (
    BANDIT,
    RESULTS,
    Args,
    bandit_preregistration,
    headline_line,
    headline_summary,
    main,
    pick_budget,
    planned_config,
    unit_path,
)
from experiments.incontext.matched_protocol import agent_config, partial_path
from rolloutlab.config import to_dict

BAYES_OPTIMAL = 64.0


def _side_seeds(results: Path, curves: dict[int, list[float]], setting: str = "whole_trial") -> None:
    """Fake matched.py pieces under ``results/matched_partial``: seed -> greedy returns at 200k, 400k, ... env steps,
    each run with the config matched.py gives it at 1M env steps; and the matched references."""
    partial = results / "matched_partial"
    partial.mkdir(parents=True)
    for seed, returns in curves.items():
        history = [{"env_steps": 200_000 * (i + 1), "eval_return": r} for i, r in enumerate(returns)]
        config = to_dict(agent_config("whole_trial", "bandit_2x100", seed, 1_000_000, 60.0))
        run = {"setting": setting, "history": history, "config": config}
        partial_path(partial, "bandit_2x100", "agent", seed).write_text(json.dumps(run))
    refs = {"n_tasks": 1000, "references": {"bayes_optimal": {"mean": BAYES_OPTIMAL}, "random": {"mean": 49.0}}}
    partial_path(partial, "bandit_2x100", "references").write_text(json.dumps(refs))


def test_rule_picks_the_budget_with_the_highest_mean_over_the_side_seeds(tmp_path: Path) -> None:
    # Means 62.0, 63.0, 62.5: no single seed's best budget, the mean's.
    _side_seeds(tmp_path, {0: [61.0, 63.0, 64.0], 1: [62.0, 63.0, 62.0], 2: [63.0, 63.0, 61.5]})
    plan = bandit_preregistration(tmp_path)
    assert [c["mean_return"] for c in plan["side_seeds"]["candidates"]] == [62.0, 63.0, 62.5]
    assert plan["picked"] == {"setting": "whole_trial", "env_steps": 400_000} and plan["env_steps"] == 400_000
    assert plan["seeds"] == [100, 101, 102, 103, 104] and plan["side_seeds_used_before"] == [0, 1, 2]
    assert plan["target"]["mean_return_at_least"] == pytest.approx(0.98 * BAYES_OPTIMAL)
    assert plan["eval_tasks"] == 1000
    # The planned runs are the side seeds' runs but for the budget and the evaluation interval it sets.
    assert plan["side_seed_config_differences"] == ["eval_every_steps", "total_env_steps"]


def test_ties_go_to_the_smaller_budget(tmp_path: Path) -> None:
    _side_seeds(tmp_path, {0: [62.0, 63.0, 63.0], 1: [62.0, 62.0, 62.0], 2: [62.0, 64.0, 64.0]})
    assert bandit_preregistration(tmp_path)["env_steps"] == 400_000
    candidates = [{"env_steps": 600_000, "mean_return": 63.0}, {"env_steps": 200_000, "mean_return": 63.0}]
    assert pick_budget(candidates) == 200_000
    assert pick_budget([{"env_steps": 200_000, "mean_return": 62.9}, *candidates[:1]]) == 600_000


def test_the_plan_refuses_overlapping_seeds_other_settings_and_other_runs(tmp_path: Path) -> None:
    _side_seeds(tmp_path / "a", {0: [63.0], 1: [63.0], 2: [63.0]})
    with pytest.raises(ValueError, match=r"fresh seeds \[2\] were already used"):
        bandit_preregistration(tmp_path / "a", seeds=[2, 100])
    _side_seeds(tmp_path / "b", {0: [63.0], 1: [63.0], 2: [63.0]}, setting="amago")
    with pytest.raises(ValueError, match="another setting"):
        bandit_preregistration(tmp_path / "b")
    _side_seeds(tmp_path / "c", {0: [63.0], 1: [63.0], 2: [63.0]})
    piece = partial_path(tmp_path / "c" / "matched_partial", "bandit_2x100", "agent", 1)
    run = json.loads(piece.read_text())
    run["config"]["agent"]["lr"] = 1e-3
    piece.write_text(json.dumps(run))
    with pytest.raises(ValueError, match=r"differ from the planned runs in \['agent.lr'\]"):
        bandit_preregistration(tmp_path / "c")


def test_the_side_seeds_on_disk_give_a_plan() -> None:
    """The benchmark's own runs (setting whole_trial, 1M env steps) and its matched references on disk."""
    plan = bandit_preregistration(RESULTS)
    means = {c["env_steps"]: c["mean_return"] for c in plan["side_seeds"]["candidates"]}
    assert means[plan["env_steps"]] == max(means.values())
    refs = json.loads((RESULTS / "matched_partial" / "bandit_2x100__references.json").read_text())
    assert plan["target"]["mean_return_at_least"] == 0.98 * refs["references"]["bayes_optimal"]["mean"]
    cfg = planned_config(plan, 100)
    assert (cfg.seed, cfg.total_env_steps, cfg.eval_tasks) == (100, plan["env_steps"], 1000)
    with pytest.raises(SystemExit, match="seed 7 is not in the pre-registered plan"):
        planned_config(plan, 7)


def _plan(root: Path, seeds: list[int], threshold: float = 62.72) -> None:
    plan = {
        "task": "bandit_2x100",
        "picked": {"setting": "whole_trial", "env_steps": 200_000},
        "env_steps": 200_000,
        "eval_tasks": 1000,
        "seeds": seeds,
        "target": {"mean_return_at_least": threshold, "rule": "agent >= 0.98 * bayes_optimal", "bayes_optimal": 64.0},
        "interval": {"level": 0.95, "method": "percentile bootstrap over seeds", "n_resamples": 999, "rng": 0},
    }
    (root / "preregistration.json").write_text(json.dumps(plan))


def _agent_run(greedy: float, train_seconds: float = 300.0) -> dict[str, Any]:
    return {
        "eval": {"mean": greedy},
        "eval_sampled": {"mean": greedy - 1.0},
        "env_steps": 200_000,
        "stopped_by_time_cap": False,
        "train_seconds": train_seconds,
        "history": [{"env_steps": 200_000, "eval_return": greedy}],
    }


def _unit(root: Path, seed: int, greedy: float) -> None:
    unit_path(root, "agent", seed).write_text(json.dumps(_agent_run(greedy)))


def test_verdict_met_only_when_every_planned_seed_is_done_and_the_mean_reaches_the_target(tmp_path: Path) -> None:
    _plan(tmp_path, [100, 101, 102])
    _unit(tmp_path, 100, 64.0)
    _unit(tmp_path, 101, 63.0)
    summary = headline_summary(tmp_path)
    assert summary is not None and summary["verdict"] == "incomplete" and summary["seeds_done"] == 2
    assert summary["per_seed"][2]["status"] == "not run" and "seed 102 not run" in headline_line(summary)
    _unit(tmp_path, 102, 61.3)  # below the target on its own; the mean (62.77) is above
    summary = headline_summary(tmp_path)
    assert summary is not None and summary["verdict"] == "met"
    assert summary["mean_return"] == pytest.approx(62.7666, abs=1e-3)
    low, high = summary["mean_return_interval"]
    assert low <= summary["mean_return"] <= high and low < high
    assert summary["fraction_of_bayes_optimal"] == pytest.approx(summary["mean_return"] / 64.0)
    assert "mean 62.77" in headline_line(summary) and ": met" in headline_line(summary)


def test_verdict_missed_when_every_seed_is_done_below_the_target_incomplete_before(tmp_path: Path) -> None:
    _plan(tmp_path, [100, 101])
    _unit(tmp_path, 100, 62.0)
    summary = headline_summary(tmp_path)
    assert summary is not None and summary["verdict"] == "incomplete"  # below, but a seed is still to run
    _unit(tmp_path, 101, 63.0)
    summary = headline_summary(tmp_path)
    assert summary is not None and summary["verdict"] == "missed" and summary["mean_return"] == 62.5


def test_main_refuses_an_uncommitted_plan_seeds_outside_it_and_another_task(tmp_path: Path) -> None:
    plan = bandit_preregistration(RESULTS)
    (tmp_path / "preregistration.json").write_text(json.dumps(plan))
    runs = tmp_path / "runs"
    with pytest.raises(SystemExit, match="not committed"):
        main(Args("bandit_2x100", dir=str(tmp_path), runs_root=str(runs)))
    with pytest.raises(SystemExit, match="not in the pre-registered plan"):
        main(Args("bandit_2x100", seeds=[100, 7], dir=str(tmp_path), runs_root=str(runs), allow_uncommitted=True))
    assert not runs.exists()
    with pytest.raises(SystemExit, match="is for bandit_2x100, not tmaze_100"):
        main(Args("tmaze_100", dir=str(tmp_path), runs_root=str(runs), allow_uncommitted=True))
    with pytest.raises(SystemExit, match="exists"):
        main(Args("bandit_2x100", preregister=True, dir=str(tmp_path)))


def test_main_runs_each_unit_once_with_ppo_at_equal_steps_and_equal_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, int, Any, Any]] = []

    def run_agent(cfg: Any, run_dir: Path) -> dict[str, Any]:
        calls.append(("agent", cfg.seed, cfg.total_env_steps, run_dir.name))
        return _agent_run(63.0, train_seconds=float(cfg.seed))

    def run_ppo(cfg: Any, env_steps: int | None, max_seconds: float | None, ppo_config: Any) -> dict[str, Any]:
        calls.append(("ppo", cfg.seed, env_steps, max_seconds))
        return {"eval": {"mean": 50.0}, "env_steps": env_steps or 1, "train_seconds": max_seconds or 1.0}

    monkeypatch.setattr(headline, "run_agent", run_agent)
    monkeypatch.setattr(headline, "run_ppo", run_ppo)
    plan = bandit_preregistration(RESULTS)
    (tmp_path / "preregistration.json").write_text(json.dumps(plan))
    args = Args("bandit_2x100", seeds=[101], dir=str(tmp_path), runs_root=str(tmp_path / "runs"),
                allow_uncommitted=True)  # fmt: skip
    main(args)
    steps = plan["env_steps"]
    assert calls == [("agent", 101, steps, "seed101"), ("ppo", 101, steps, None), ("ppo", 101, None, 101.0)]
    main(args)  # every unit on disk: nothing rerun
    assert len(calls) == 3
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["verdict"] == "incomplete" and summary["seeds_done"] == 1
    assert summary["ppo_equal_steps_mean_return"] == summary["ppo_equal_time_mean_return"] == 50.0
    assert "RecurrentPPO at equal env steps 50.00 (mean of 1), at equal wall time 50.00" in headline_line(summary)
    assert BANDIT.ppo_units == ("ppo_equal_steps", "ppo_equal_time")


def test_under_whole_trial_a_budget_sets_only_the_length_and_evaluations_leave_training_alone() -> None:
    """Why the side seeds' curves are evidence for a shorter run: the learning rate after the warm-up is the same
    whatever the planned updates, and an evaluation draws nothing from the training streams nor changes the agent."""
    import torch

    from meta.incontext.trainer import InContextTrainer, learning_rate

    cfg = agent_config("whole_trial", "bandit_2x100", 0, 1_600, None, eval_tasks=4)
    assert cfg.eps_anneal_steps == agent_config("whole_trial", "bandit_2x100", 0, 10**6, None).eps_anneal_steps
    assert cfg.agent.ema_decay == 0.0
    for update in (0, 499, 500, 5_000, 19_999):
        assert learning_rate(update, cfg.agent, 20_000) == learning_rate(update, cfg.agent, 100_000)
    trainer = InContextTrainer(cfg)
    trainer.collect()
    rng, generator = trainer.rng.bit_generator.state, trainer.generator.get_state()
    weights = {k: v.clone() for k, v in trainer.agent.state_dict().items()}
    trainer.evaluate()
    assert trainer.rng.bit_generator.state == rng and torch.equal(trainer.generator.get_state(), generator)
    assert all(torch.equal(v, weights[k]) for k, v in trainer.agent.state_dict().items())
