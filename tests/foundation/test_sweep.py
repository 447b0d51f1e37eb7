"""The shared resumable sweep (``experiments/sweep.py``): a rerun skips finished units, each unit's JSON is written
atomically, a failing unit loses none of the others, and worker processes write the same files."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import rolloutlab.checkpoint
from experiments import sweep
from experiments.sweep import SweepError, Unit, grid, run_sweep, unit_file


def _record(unit: Unit, scale: float = 1.0) -> dict[str, Any]:
    """A picklable unit runner (module level) for the worker test."""
    return {"arm": unit.arm, "seed": unit.seed, "value": scale * unit.seed}


def _units(root: Path) -> list[Unit]:
    return grid(["a", "b"], [0, 1, 2], lambda arm, seed: root / f"{arm}__{seed}.json")


def test_grid_is_seed_major_and_names_the_callers_files(tmp_path: Path) -> None:
    units = _units(tmp_path)
    assert [(u.arm, u.seed) for u in units] == [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    assert units[3].path == tmp_path / "b__1.json" and units[3].label == "b seed 1"
    assert Unit("x", 4, tmp_path, group="calc").label == "calc x seed 4"
    # A folder instead of a naming function: the benchmarks' usual [group__]arm__seed.json.
    assert [u.path.name for u in grid(["a"], [3], tmp_path, group="calc")] == ["calc__a__3.json"]
    assert grid(["a"], [3], tmp_path)[0].path == unit_file(tmp_path, "a", 3) == tmp_path / "a__3.json"


def test_rerun_skips_the_units_whose_json_exists(tmp_path: Path) -> None:
    calls: list[tuple[str, int]] = []

    def run(unit: Unit) -> dict[str, Any]:
        calls.append((unit.arm, unit.seed))
        return _record(unit)

    units = _units(tmp_path)
    first = run_sweep(units[:3], run, show_progress=False)
    assert calls == [("a", 0), ("b", 0), ("a", 1)]
    assert json.loads((tmp_path / "a__1.json").read_text()) == first[units[2]]
    calls.clear()
    seen: list[int] = []
    records = run_sweep(units, run, on_record=lambda u, r, so_far: seen.append(len(so_far)), show_progress=False)
    assert calls == [("b", 1), ("a", 2), ("b", 2)]  # the three finished units are read back, not run
    assert seen == [4, 5, 6]
    assert list(records) == units and [r["value"] for r in records.values()] == [0, 0, 1, 1, 2, 2]


def test_reuse_can_rerun_or_refuse_a_kept_record(tmp_path: Path) -> None:
    units = _units(tmp_path)[:2]
    run_sweep(units, _record, show_progress=False)
    rerun: list[str] = []

    def run(unit: Unit) -> dict[str, Any]:
        rerun.append(unit.arm)
        return _record(unit, scale=2.0)

    run_sweep(units, run, reuse=lambda u, r: u.arm != "b", show_progress=False)
    assert rerun == ["b"]

    def refuse(unit: Unit, record: dict[str, Any]) -> bool:
        raise ValueError(f"{unit.path} was made under other settings")

    with pytest.raises(ValueError, match="other settings"):
        run_sweep(units, run, reuse=refuse, show_progress=False)
    assert rerun == ["b"]  # refused before anything ran


def test_a_failing_unit_loses_none_of_the_others(tmp_path: Path) -> None:
    def run(unit: Unit) -> dict[str, Any]:
        if (unit.arm, unit.seed) == ("b", 0):
            raise RuntimeError("diverged")
        return _record(unit)

    units = _units(tmp_path)
    with pytest.raises(SweepError, match="diverged") as info:
        run_sweep(units, run, show_progress=False)
    assert [u.label for u in info.value.failures] == ["b seed 0"]
    assert sorted(p.name for p in tmp_path.glob("*.json")) == sorted(
        u.path.name for u in units if (u.arm, u.seed) != ("b", 0)
    )
    again = run_sweep(units, _record, show_progress=False)  # a rerun runs only the failed unit
    assert again[units[1]] == _record(units[1])


def test_each_record_is_written_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[Path] = []
    real = rolloutlab.checkpoint.atomic_write_json

    def spy(path: Path, obj: Any, **kwargs: Any) -> Path:
        written.append(Path(path))
        return real(path, obj, **kwargs)

    monkeypatch.setattr(sweep, "atomic_write_json", spy)
    units = _units(tmp_path)[:2]

    def run(unit: Unit) -> dict[str, Any]:
        if unit.arm == "b":
            raise KeyboardInterrupt  # killed mid-unit: no file, not even a partial one
        return _record(unit)

    with pytest.raises(KeyboardInterrupt):
        run_sweep(units, run, show_progress=False)
    assert written == [units[0].path]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a__0.json"]  # no temporary file left behind


def test_workers_write_every_unit(tmp_path: Path) -> None:
    units = _units(tmp_path / "nested")
    records = run_sweep(units, partial(_record, scale=3.0), workers=2, show_progress=False)
    assert list(records) == units
    for unit in units:
        assert json.loads(unit.path.read_text()) == {"arm": unit.arm, "seed": unit.seed, "value": 3.0 * unit.seed}
