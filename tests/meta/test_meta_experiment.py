"""The meta-controller benchmark (``experiments/meta/rollout_length_protocol.py``, which
``experiments/meta/rollout_length.py`` drives): test runs split into units that cover every run once, the paired
summary's statistics, and the committed first-protocol results as docs/history.md quotes them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
from script_modules import load_script

from experiments.meta.rollout_length_protocol import (
    EvalUnit,
    machines_by_run,
    mixed_machine_runs,
    pending_units,
    record_unit,
    run_slices,
    schedule_table,
    summarize_arms,
    target_met,
)
from meta.control.training import MetaTrainConfig
from meta.rollout_length.env import MetaEnvConfig
from meta.rollout_length.evaluate import merge_run_slices, run_arms
from rolloutlab.config import load_yaml

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "meta" / "results"


def test_history_page_quotes_the_scaled_table() -> None:
    table = (RESULTS / "scaled" / "table.md").read_text()
    assert table in (ROOT / "docs" / "history.md").read_text()


def test_slices_of_runs_merge_into_the_whole_arm() -> None:
    cfg = MetaEnvConfig(budget=500, phase_length=100, inner="toy")
    whole = run_arms(["inc:32", "random:0,32"], cfg, runs=5, seed=5, physics={})
    parts = [
        run_arms(["inc:32", "random:0,32"], cfg, runs=n, seed=5, physics={}, first_run=i) for i, n in ((0, 2), (2, 3))
    ]
    for arm in ("inc:32", "random:0,32"):  # run i keeps its seed (and the random meta-policy its stream) in any slice
        merged = merge_run_slices([part[arm] for part in parts])
        assert merged["finals"] == whole[arm]["finals"] and merged["k_schedules"] == whole[arm]["k_schedules"]
        assert merged["mean"] == pytest.approx(whole[arm]["mean"]) and merged["se"] == pytest.approx(whole[arm]["se"])
    with pytest.raises(ValueError):
        merge_run_slices([])


def _fake(first: int, runs: int) -> dict[str, object]:
    finals = [float(first + i) for i in range(runs)]
    return {"mean": 0.0, "se": 0.0, "finals": finals, "k_schedules": [[0]] * runs, "seconds": 1.0}


def test_units_cover_every_run_once_and_finished_slices_are_skipped() -> None:
    arms = {"meta_step": "learned:x.pt", "fixed:0": "fixed:0"}
    assert run_slices(7, 3) == [(0, 3), (3, 3), (6, 1)] and run_slices(7, 0) == [(0, 7)]
    units = pending_units(arms, 7, 3, {})
    # Slice-major: runs 0-2 of every arm (in the arms' order) before runs 3-5 of any.
    assert [(u.arm, u.spec, u.first_run, u.runs) for u in units] == [
        ("meta_step", "learned:x.pt", 0, 3), ("fixed:0", "fixed:0", 0, 3),
        ("meta_step", "learned:x.pt", 3, 3), ("fixed:0", "fixed:0", 3, 3),
        ("meta_step", "learned:x.pt", 6, 1), ("fixed:0", "fixed:0", 6, 1),
    ]  # fmt: skip
    assert len({u.name for u in units}) == 6  # each unit's phase checkpoint is its own
    saved: dict[str, object] = {}
    # Out of order: the arm is complete only when its slices cover runs 0..6 contiguously.
    order = [units[4], units[0], units[2]]
    assert [record_unit(u, _fake(u.first_run, u.runs), saved, 7) for u in order] == [False, False, True]
    assert saved["arms"]["meta_step"]["finals"] == [float(i) for i in range(7)]  # type: ignore[index]
    assert saved["arms"]["meta_step"]["seconds"] == 3.0 and "slices" not in saved  # type: ignore[index]
    assert [(u.arm, u.first_run) for u in pending_units(arms, 7, 3, saved)] == [
        ("fixed:0", 0),
        ("fixed:0", 3),
        ("fixed:0", 6),
    ]
    record_unit(units[1], _fake(0, 3), saved, 7)
    assert [u.first_run for u in pending_units(arms, 7, 3, saved)] == [3, 6]
    # A slice of another size (e.g. saved under another runs_per_unit) is not taken as the slice asked for.
    saved["slices"]["fixed:0"]["3"] = _fake(3, 2)  # type: ignore[index]
    assert [u.first_run for u in pending_units(arms, 7, 3, saved)] == [3, 6]
    with pytest.raises(ValueError, match="test_runs"):
        run_slices(0, 1)


def test_runs_scored_on_different_machines_are_found() -> None:
    def part(first: int, runs: int, machine: str | None) -> dict[str, object]:
        out = _fake(first, runs)
        return out if machine is None else {**out, "arithmetic": machine}

    saved: dict[str, object] = {}
    # fixed:0 finishes (its slices keep their machines, by first run); meta_step has loose slices, one unrecorded.
    record_unit(EvalUnit("fixed:0", "fixed:0", 0, 3), part(0, 3, "A"), saved, 5)
    assert record_unit(EvalUnit("fixed:0", "fixed:0", 3, 2), part(3, 2, "B"), saved, 5)
    assert saved["arms"]["fixed:0"]["arithmetic"] == {"0": "A", "3": "B"}  # type: ignore[index]
    record_unit(EvalUnit("meta_step", "learned:x.pt", 0, 3), part(0, 3, "A"), saved, 5)
    record_unit(EvalUnit("meta_step", "learned:x.pt", 3, 2), part(3, 2, None), saved, 5)
    assert machines_by_run(saved) == {
        "fixed:0": {0: "A", 1: "A", 2: "A", 3: "B", 4: "B"},
        "meta_step": {0: "A", 1: "A", 2: "A", 3: None, 4: None},
    }
    assert mixed_machine_runs(saved) == {}  # an unrecorded machine is not taken for a mismatch
    record_unit(EvalUnit("random:1,8", "random:1,8", 0, 3), part(0, 3, "B"), saved, 5)
    assert mixed_machine_runs(saved) == {0: ["A", "B"], 1: ["A", "B"], 2: ["A", "B"]}
    # A finished arm from before machines were recorded counts as unrecorded throughout.
    assert machines_by_run({"arms": {"fixed:1": _fake(0, 2)}}) == {"fixed:1": {0: None, 1: None}}


def test_summary_statistics_and_target() -> None:
    rng = np.random.default_rng(0)
    base = rng.normal(-200.0, 50.0, size=40)
    arms = {
        "fixed:0": {"finals": list(base)},
        "fixed:2": {"finals": list(base + 30.0)},
        "random:1,8": {"finals": list(base + 500.0)},  # not a schedule: never "the best"
        "meta_step": {"finals": list(base + 90.0)},
        "meta_direct": {"finals": list(base - 10.0)},
    }
    summary = summarize_arms(arms, seed=3, reps=500)
    assert summary["best_schedule"] == "fixed:2"
    r = summary["arms"]["fixed:2"]
    assert r["mean"] == pytest.approx(np.mean(base + 30.0)) and r["median"] == pytest.approx(np.median(base + 30.0))
    assert r["iqm"] == pytest.approx(scipy.stats.trim_mean(base + 30.0, 0.25)) and r["runs"] == 40
    assert all(low <= r[name] <= high for name, (low, high) in r["ci"].items())
    # META shifted up by 60 over the best schedule on every seed: the paired difference is exactly 30, and a META run
    # beats a best-schedule run most of the time.
    diff = summary["paired_minus_best"]["meta_step"]
    assert diff["mean"] == pytest.approx(60.0) and diff["se"] == pytest.approx(0.0, abs=1e-9)
    assert summary["prob_improvement_vs_best"]["meta_step"]["value"] > 0.7
    assert target_met(summary, "meta_step") and not target_met(summary, "meta_direct")
    assert summarize_arms(arms, seed=3, reps=500) == summary  # seeded: the same numbers on a rerun
    table = schedule_table(summary, ["fixed:0", "fixed:2", "meta_step"])
    assert "| fixed:2 | 40 |" in table and "target met: yes" in table and "random" not in table.split("\n\n")[0]


def test_experiment_config_is_the_gate_preset_with_ten_decisions() -> None:
    script = load_script(RESULTS.parent / "rollout_length.py")
    cfg = script.train_config(script.Args())
    preset = load_yaml(MetaTrainConfig, script.PRESET)
    assert cfg.env.dyna == preset.env.dyna and cfg.env.budget == preset.env.budget == 8_000
    assert cfg.env.horizon == 10 and cfg.env.k_cap == 8 and cfg.env.k_grid == [0, 1, 2, 4, 8]
    assert cfg.total_timesteps >= 5_000 and cfg.agent.buffer_size == cfg.total_timesteps
    assert all(script.arm_specs(script.Args(), "Acrobot-v1", set())[a] == a for a in script.SCHEDULE_ARMS)
    specs = script.arm_specs(script.Args(), "Acrobot-v1", {"step"})
    assert specs["meta_step"].startswith("learned:") and "meta_direct" not in specs


def test_summary_updates_keep_what_another_process_wrote_meanwhile(tmp_path: Path) -> None:
    # The step and direct meta-trainings run as two processes; each must add its record without dropping the other's.
    script = load_script(RESULTS.parent / "rollout_length.py")
    path = tmp_path / "summary.json"
    script.update_summary(path, {("meta_training", "Acrobot-v1", "step"): {"rounds": 3}})
    script.update_summary(path, {("meta_training", "Acrobot-v1", "direct"): {"rounds": 1}})
    summary = script.update_summary(path, {("envs", "Acrobot-v1"): {"arms": {}}, ("args",): {"x": 1}})
    assert summary["meta_training"]["Acrobot-v1"] == {"step": {"rounds": 3}, "direct": {"rounds": 1}}
    assert json.loads(path.read_text()) == summary and summary["args"] == {"x": 1}


def test_round2_progress_counts_rounds_trends_and_test_runs(tmp_path: Path) -> None:
    script = load_script(ROOT / "experiments" / "meta" / "round2_progress.py")
    # Two rounds of two meta-episodes: K means 1 and 3 in round 0, 5 and 7 in round 1.
    history = [
        {"round": r, "k_schedule": [k, k], "final_j": j}
        for r, k, j in [(0, 1, -500.0), (0, 3, -300.0), (1, 5, -200.0), (1, 7, -100.0)]
    ]
    folder = tmp_path / "Acrobot-v1_step"
    folder.mkdir()
    record = {"config": {"episodes": 8, "runs_per_round": 2}, "rounds_done": 2, "wall_seconds": 9.0, "history": history}
    (folder / "meta_training.json").write_text(json.dumps(record))
    arms = {
        "arms": {"fixed:0": {"finals": [-500.0] * 4, "k_schedules": [[0, 0]] * 4}},
        "slices": {"fixed:2": {"0": {"finals": [-100.0, -120.0], "k_schedules": [[1, 2], [2, 4]], "seconds": 30.0}}},
    }
    (tmp_path / "arms_Acrobot-v1.json").write_text(json.dumps(arms))
    out = script.main(script.Args(results=str(tmp_path), window=1))
    step = out["meta_training"]["step"]
    assert (step["rounds_done"], step["rounds_total"], step["meta_episodes"]) == (2, 4, 4)
    assert (step["mean_k_first"], step["mean_k_last"]) == (2.0, 6.0)
    assert (step["final_j_first"], step["final_j_last"]) == (-400.0, -150.0)
    assert out["test_runs"] == {"per_arm": {"fixed:0": 4, "fixed:2": 2}, "total": 6, "slice_seconds": [30.0]}
    # Paired look: both arms over runs 0-1 only (fixed:2 has two runs so far).
    assert out["paired_so_far"] == {"runs": 2, "mean": {"fixed:0": -500.0, "fixed:2": -110.0}}
    assert out["k_on_test_physics"] == {
        "fixed:0": {"runs": 4, "mean_k_by_decision": [0.0, 0.0], "share_of_decisions": {"0": 1.0}},
        "fixed:2": {
            "runs": 2,
            "mean_k_by_decision": [1.5, 3.0],
            "share_of_decisions": {"1": 0.25, "2": 0.5, "4": 0.25},
        },
    }
    # A slice of runs 5-6 with runs 0-4 missing pairs with nothing yet.
    arms["slices"]["fixed:4"] = {"5": {"finals": [-150.0, -160.0], "k_schedules": [[4, 4], [4, 4]]}}
    assert script.paired_so_far(arms) == {"runs": 0, "mean": {}}
    assert "fixed:4" not in script.k_on_test_physics(arms)
    # Run for run against a reference: fixed:2 wins both; a copy of fixed:2's run 0 ties it bit for bit.
    arms["slices"]["copy"] = {"0": {"finals": [-100.0, -130.0], "k_schedules": [[1, 2], [2, 2]]}}
    against = script.against_schedule(arms, "fixed:0")
    assert against["fixed:2"] == {
        "runs": 2, "wins": 2, "ties": 0, "losses": 0,
        "same_schedule_runs": 0, "same_schedule_equal_finals": 0, "last_half_at_reference_k": 0,
    }  # fmt: skip
    against = script.against_schedule(arms, "fixed:2")
    assert against["copy"] == {
        "runs": 2, "wins": 0, "ties": 1, "losses": 1,
        "same_schedule_runs": 1, "same_schedule_equal_finals": 1, "last_half_at_reference_k": 1,
    }  # fmt: skip
    assert json.loads((tmp_path / "progress.json").read_text()) == out


def test_results_page_quotes_the_round2_table() -> None:
    heading, body = (RESULTS / "round2" / "table.md").read_text().split("\n\n", 1)
    assert heading == "## Acrobot-v1, perturbed test physics"
    assert "| meta_step | 40 |" in body and "| meta_direct | 40 |" in body  # the finished run, not a partial one
    assert body in (ROOT / "docs" / "results" / "meta.md").read_text()  # the rows and the META lines


def test_round_two_summary_is_kept_as_history() -> None:
    """Round two's summary stays in ``results/round2/``; ``results/summary.json`` is the model-error study's."""
    entry = json.loads((RESULTS / "round2" / "summary.json").read_text())["envs"]["Acrobot-v1"]
    assert set(entry["prob_improvement_vs_best"]) == {"meta_step", "meta_direct"}
    for arm in entry["arms"].values():
        assert {"mean", "median", "iqm", "ci"} <= set(arm) and arm["runs"] == 40
    assert entry["machines"]["mixed_runs"] == {}  # every run paired on one kind of CPU
    current = json.loads((RESULTS / "summary.json").read_text())
    assert current["command"] == "python experiments/meta/model_error_study.py summary"
    assert {"versus_best_schedule", "best_schedule", "target_met", "runs_per_arm"} <= set(current)
