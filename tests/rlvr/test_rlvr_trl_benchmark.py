"""The TRL allocation benchmark (``experiments/rlvr/trl_benchmark.py``, summarized by ``trl_summary``): the
unseen task family, and the committed summary agreeing with its runs and its table."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from script_modules import load_script

from experiments.rlvr.trl_summary import summarize_trl, trl_table

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "rlvr" / "trl_benchmark.py"
SUMMARY = ROOT / "experiments" / "rlvr" / "results" / "trl_summary.json"


def _bench() -> ModuleType:
    pytest.importorskip("trl")
    return load_script(SCRIPT)


def test_sort_tasks_are_sorted_digit_strings() -> None:
    from envs.reasoning import verify

    tasks = _bench().sort_tasks(50, np.random.default_rng(0))
    for t in tasks:
        digits = t.prompt[:-1]
        assert t.prompt.endswith("=") and digits.isdigit() and 4 <= len(digits) <= 7
        assert t.answer == "".join(sorted(digits)) and t.difficulty == len(digits)
        assert verify(t, t.answer + "$") == 1.0
    again = _bench().sort_tasks(50, np.random.default_rng(0))
    assert again == tasks


def test_committed_summary_has_the_issues_keys_and_its_table_is_quoted() -> None:
    bench = _bench()
    summary = json.loads(SUMMARY.read_text())
    assert set(summary["families"]) == {"arith", "sort"}
    for family in summary["families"].values():
        assert family["seeds"] == [0, 1, 2, 3, 4]
        assert set(family["arms"]) == set(bench.TRL_ARMS)
        assert "ratio_tokens_vs_uniform_g8" in family["best_adaptive"]
    table = SUMMARY.with_suffix(".md").read_text()
    assert table == trl_table(summary)
    assert table.strip() in (ROOT / "docs" / "results" / "rlvr.md").read_text()


def test_committed_summary_is_what_its_per_run_records_give() -> None:
    """trl_summary recomputes the committed TRL summary from the committed runs, number for number."""
    summary = json.loads(SUMMARY.read_text())
    args = summary["args"]
    runs = [json.loads(p.read_text()) for p in sorted((SUMMARY.parent / "trl" / "per_run").glob("*.json"))]
    again = summarize_trl(runs, args["families"], args["arms"], args["seeds"])
    assert json.dumps(again) == json.dumps({k: summary[k] for k in again})
