"""``experiments/meta/rollout_length.py``: its test runs split into slices of runs, and the committed results agree with
themselves (each ``table.md`` is the table its ``summary.json`` gives, and the README quotes the scaled table verbatim:
issue 5 asks for the README table to be generated from the experiments JSON)."""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from meta.rollout_length.env import MetaEnvConfig
from meta.rollout_length.evaluate import merge_run_slices, run_arms

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "meta" / "results"


@functools.cache
def _experiment_script() -> ModuleType:
    script = RESULTS.parent / "rollout_length.py"
    spec = importlib.util.spec_from_file_location("meta_rollout_length_experiment", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("summary_path", "table_path"),
    [
        (RESULTS / "summary_small.json", RESULTS / "table_small.md"),
        (RESULTS / "scaled" / "summary.json", RESULTS / "scaled" / "table.md"),
    ],
    ids=["small", "scaled"],
)
def test_table_md_is_generated_from_summary_json(summary_path: Path, table_path: Path) -> None:
    summary = json.loads(summary_path.read_text())
    assert table_path.read_text() == _experiment_script().table(summary)


def test_issue_summary_is_the_scaled_protocol() -> None:
    # The issue checks results/summary.json; it must be the scaled run's summary (whose table is tested above), not a
    # stale copy of it or the small run's.
    for name in ("summary.json", "table.md"):
        assert (RESULTS / name).read_bytes() == (RESULTS / "scaled" / name).read_bytes()
    summary = json.loads((RESULTS / "summary.json").read_text())
    assert summary["protocol"]["budget"] == 50_000 and summary["protocol"]["test_runs"] >= 30
    for env in ("MountainCar-v0", "Acrobot-v1"):
        arms = summary["envs"][env]["arms"]
        assert all(len(arms[arm]["finals"]) >= 30 for arm in arms) and len(arms) == 11
        assert {"mean", "se"} <= set(summary["envs"][env]["meta_minus_best_heuristic"])


def test_readme_quotes_the_scaled_table() -> None:
    table = (RESULTS / "scaled" / "table.md").read_text()
    assert table in (ROOT / "README.md").read_text()


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


def test_units_cover_every_run_once_and_finished_slices_are_skipped(tmp_path: Path) -> None:
    script = _experiment_script()
    args = script.Args(test_runs=7, runs_per_unit=3, arms_per_group=1, run_root=str(tmp_path))
    assert script.run_slices(args) == [(0, 3), (3, 3), (6, 1)]
    units = script.eval_units(args, "Acrobot-v1", ["meta", "fixed:0"], {})
    assert [(u.arms, u.first_run, u.runs) for u in units] == [
        (["meta"], 0, 3), (["meta"], 3, 3), (["meta"], 6, 1), (["fixed:0"], 0, 3), (["fixed:0"], 3, 3),
        (["fixed:0"], 6, 1),
    ]  # fmt: skip
    assert len({u.checkpoint for u in units}) == 6  # a slice's phase checkpoint is its own

    def fake(unit: object, first: int, runs: int) -> dict[str, object]:
        finals = [float(first + i) for i in range(runs)]
        return {"mean": 0.0, "se": 0.0, "finals": finals, "k_schedules": [[0]] * runs, "seconds": 1.0}

    done: dict[str, object] = {}
    slices: dict[str, dict[str, object]] = {}
    # A slice saved under another --runs-per-unit is neither skipped nor merged.
    slices["meta"] = {"0": fake(None, 0, 2)}
    assert [u.first_run for u in script.eval_units(args, "Acrobot-v1", ["meta"], slices)] == [0, 3, 6]
    for unit in units[:5]:
        assert script.record(args, unit, {unit.arms[0]: fake(unit, unit.first_run, unit.runs)}, done, slices) == (
            ["meta"] if unit.first_run == 6 else []
        )
    assert done["meta"]["finals"] == [float(i) for i in range(7)] and done["meta"]["seconds"] == 3.0
    assert "meta" not in slices
    assert [u.first_run for u in script.eval_units(args, "Acrobot-v1", ["fixed:0"], slices)] == [6]
    # Without --runs-per-unit an arm is one unit and its result is filed whole.
    whole = script.Args(test_runs=7, run_root=str(tmp_path))
    (unit,) = script.eval_units(whole, "Acrobot-v1", ["fixed:16"], {})
    assert (unit.first_run, unit.runs) == (0, 7) and unit.checkpoint.endswith("arms_Acrobot-v1.pt")
    assert script.record(whole, unit, {"fixed:16": fake(unit, 0, 7)}, done, slices) == ["fixed:16"]
    assert "fixed:16" not in slices


def test_table_rows_of_new_results_are_specs() -> None:
    # Results written by a run after arms became specs are filed and shown under the spec.
    script = _experiment_script()
    arm = {"mean": -100.0, "se": 1.0, "finals": [-100.0]}
    summary = {"envs": {"Acrobot-v1": {"arms": {"fixed:16": arm, "random:0,32": arm, "meta": arm}}}}
    table = script.table(summary)
    assert "| fixed:16 | -100.0 ± 1.0 |" in table and "| random:0,32 | -100.0 ± 1.0 |" in table
    assert "| k16 |" not in table and "| fixed:0 | — |" in table
    assert script.split_specs("fixed:0,linear:0,5,1,32,meta") == ["fixed:0", "linear:0,5,1,32", "meta"]
