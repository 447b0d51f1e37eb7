"""The opener benchmark's bookkeeping and its committed results (experiments/wordle/openers.py)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "wordle" / "openers.py"
RESULTS = ROOT / "experiments" / "wordle" / "results"


def _openers() -> ModuleType:
    spec = importlib.util.spec_from_file_location("wordle_openers_experiment", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_optima_tables_are_selbys_and_summaries_count_right() -> None:
    openers = _openers()
    easy, hard = openers.read_optima(openers.OPTIMA["easy"]), openers.read_optima(openers.OPTIMA["hard"])
    assert len(easy) == 105 and len(hard) == 101
    assert easy[0] == ("salet", 7920) and hard[0] == ("salet", 8122)
    rows = [
        {"opener": "a", "optimum": 1, "total": 1, "excess": 0, "max": 5, "failures": 0, "seconds": 2.0},
        {"opener": "b", "optimum": 1, "total": 4, "excess": 3, "max": 5, "failures": 0, "seconds": 40.0},
    ]
    entry = openers.summarize("easy", rows)
    assert entry["matched_fraction"] == 0.5 and entry["max_excess"] == 3 and entry["max_seconds"] == 40.0
    assert entry["met"] == {"matched_fraction": False, "max_excess": False, "max_seconds": False}
    assert "| easy | 2 | 0.500" in openers.table({"easy": entry}) and "b +3" in openers.table({"easy": entry})


@pytest.mark.skipif(not (RESULTS / "openers.json").exists(), reason="the opener benchmark has not been run")
def test_committed_opener_table_is_generated_from_its_json_and_quoted() -> None:
    openers = _openers()
    summary = json.loads((RESULTS / "openers.json").read_text())
    table = (RESULTS / "openers.md").read_text()
    assert table == openers.table(summary)
    assert table in (ROOT / "docs" / "wordle.md").read_text()
    for mode in ("easy", "hard"):
        rows = summary[mode]["rows"]
        assert all(r["total"] - r["optimum"] == r["excess"] for r in rows)
        assert [r["opener"] for r in rows] == [w for w, _ in openers.read_optima(openers.OPTIMA[mode])[: len(rows)]]
