"""The pre-registered T-maze headline: the rule that picks the setting, the plan's guards (seeds outside the plan,
an uncommitted plan), and the summary's per-seed verdict."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from experiments.incontext.headline import (
    RESULTS,
    TMAZE,
    Args,
    check_plan,
    committed_unchanged,
    headline_line,
    headline_summary,
    main,
    pick_setting,
    planned_config,
    tmaze_preregistration,
    unit_path,
)

HEADLINE_DIR = TMAZE.folder


def _evidence(at_target: int, mean: float, wall: float) -> dict[str, float]:
    return {"seeds_at_target": at_target, "mean_success": mean, "mean_wall_seconds": wall}


def test_rule_prefers_more_seeds_at_target_over_a_higher_mean() -> None:
    evidence = {"a": _evidence(2, 0.99, 100.0), "b": _evidence(3, 0.96, 900.0)}
    assert pick_setting(evidence) == "b"


def test_rule_breaks_ties_by_mean_success_then_by_lower_wall_time() -> None:
    assert pick_setting({"a": _evidence(3, 0.97, 100.0), "b": _evidence(3, 0.99, 900.0)}) == "b"
    assert pick_setting({"a": _evidence(3, 1.0, 100.0), "b": _evidence(3, 1.0, 900.0)}) == "a"
    assert pick_setting({"b": _evidence(3, 1.0, 100.0), "a": _evidence(3, 1.0, 100.0)}) == "a"


def test_the_side_seeds_pick_whole_trial_and_fresh_seeds_must_be_new() -> None:
    plan = tmaze_preregistration(RESULTS)
    assert plan["picked"]["name"] == "whole_trial"
    assert plan["candidates"]["whole_trial"]["success_per_seed"] == [1.0, 1.0, 1.0]
    assert not set(plan["seeds"]) & set(plan["side_seeds_used_before"])
    with pytest.raises(ValueError, match="already used"):
        tmaze_preregistration(RESULTS, seeds=[1, 100])


def test_the_committed_plan_is_what_the_rule_gives() -> None:
    plan = json.loads((HEADLINE_DIR / "preregistration.json").read_text())
    check_plan(plan, RESULTS)
    fresh = tmaze_preregistration(RESULTS)
    for key in ("picked", "env_steps", "seeds", "target", "candidates"):
        assert plan[key] == fresh[key]


def test_a_seed_outside_the_plan_is_refused() -> None:
    plan = json.loads((HEADLINE_DIR / "preregistration.json").read_text())
    assert planned_config(plan, 100).seed == 100
    assert planned_config(plan, 100).time_input is False  # whole_trial's
    with pytest.raises(SystemExit, match="seed 7 is not in the pre-registered plan"):
        planned_config(plan, 7)


def test_main_refuses_seeds_outside_the_plan_before_training(tmp_path: Path) -> None:
    plan = json.loads((HEADLINE_DIR / "preregistration.json").read_text())
    (tmp_path / "preregistration.json").write_text(json.dumps(plan))
    with pytest.raises(SystemExit, match="not in the pre-registered plan"):
        runs = str(tmp_path / "runs")
        main(Args("tmaze_100", seeds=[100, 7], dir=str(tmp_path), runs_root=runs, allow_uncommitted=True))
    assert not (tmp_path / "runs").exists()


def test_main_refuses_an_uncommitted_plan(tmp_path: Path) -> None:
    plan = json.loads((HEADLINE_DIR / "preregistration.json").read_text())
    (tmp_path / "preregistration.json").write_text(json.dumps(plan))
    with pytest.raises(SystemExit, match="not committed"):
        main(Args(task="tmaze_100", dir=str(tmp_path), runs_root=str(tmp_path / "runs")))


def test_preregister_never_overwrites_a_plan(tmp_path: Path) -> None:
    (tmp_path / "preregistration.json").write_text("{}")
    with pytest.raises(SystemExit, match="exists"):
        main(Args(task="tmaze_100", preregister=True, dir=str(tmp_path)))


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_committed_unchanged_sees_untracked_committed_and_edited(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    assert not committed_unchanged(plan)
    _git(tmp_path, "add", "plan.json")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "plan")
    assert committed_unchanged(plan)
    plan.write_text('{"seeds": [1]}')
    assert not committed_unchanged(plan)


def _plan(root: Path, seeds: list[int]) -> None:
    plan = {
        "task": "tmaze_100",
        "picked": {"name": "whole_trial", "setting": "whole_trial", "train_override": {}},
        "env_steps": 300_000,
        "seeds": seeds,
        "target": {"success_at_least": 0.95, "on": "every seed"},
    }
    (root / "preregistration.json").write_text(json.dumps(plan))


def _unit(root: Path, seed: int, success: float, env_steps: int = 120_000) -> None:
    run = {
        "eval": {"mean": success},
        "eval_sampled": {"mean": success},
        "env_steps": env_steps,
        "train_seconds": 100.0,
        "history": [{"env_steps": env_steps, "eval_return": success}],
    }
    unit_path(root, "agent", seed).write_text(json.dumps(run))


def test_summary_verdict_met_only_when_every_planned_seed_meets_the_target(tmp_path: Path) -> None:
    assert headline_summary(tmp_path) is None
    _plan(tmp_path, [100, 101])
    _unit(tmp_path, 100, 1.0)
    summary = headline_summary(tmp_path)
    assert summary is not None and summary["verdict"] == "incomplete" and summary["seeds_done"] == 1
    _unit(tmp_path, 101, 0.95, env_steps=300_576)
    summary = headline_summary(tmp_path)
    assert summary is not None and summary["verdict"] == "met" and summary["seeds_met"] == 2
    assert [r["solved_before_budget"] for r in summary["per_seed"]] == [True, False]
    assert "met" in headline_line(summary)


def test_summary_verdict_missed_as_soon_as_one_seed_misses(tmp_path: Path) -> None:
    _plan(tmp_path, [100, 101, 102])
    _unit(tmp_path, 101, 0.945)
    unit_path(tmp_path, "ppo_equal_steps", 101).write_text(
        json.dumps({"eval": {"mean": 0.5}, "env_steps": 120_000, "train_seconds": 50.0})
    )
    summary = headline_summary(tmp_path)
    assert summary is not None
    assert summary["verdict"] == "missed"
    assert summary["per_seed"][0]["status"] == "not run"
    assert summary["per_seed"][1]["met"] is False
    assert summary["ppo_equal_steps_mean_success"] == 0.5
