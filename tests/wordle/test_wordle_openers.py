"""The Wordle benchmarks' bookkeeping (``experiments.wordle.solver_studies``) and their committed results: the openers
against the proven optima (``experiments/wordle/openers.py``) and the benchmark table (``benchmark.py``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from script_modules import load_script

from experiments.wordle.solver_studies import (
    RUNS,
    command_for,
    opener_config,
    openers_table,
    read_optima,
    summarize_openers,
    summary_rows,
)

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "wordle" / "openers.py"
RESULTS = ROOT / "experiments" / "wordle" / "results"


def test_optima_tables_are_selbys_and_summaries_count_right() -> None:
    openers = load_script(SCRIPT)
    easy, hard = read_optima(openers.OPTIMA["easy"]), read_optima(openers.OPTIMA["hard"])
    assert len(easy) == 105 and len(hard) == 101
    assert easy[0] == ("salet", 7920) and hard[0] == ("salet", 8122)
    rows = [
        {"opener": "a", "optimum": 1, "total": 1, "excess": 0, "max": 5, "failures": 0, "seconds": 2.0},
        {"opener": "b", "optimum": 1, "total": 4, "excess": 3, "max": 5, "failures": 0, "seconds": 40.0},
    ]
    entry = summarize_openers("easy", rows)
    assert entry["matched_fraction"] == 0.5 and entry["max_excess"] == 3 and entry["max_seconds"] == 40.0
    assert entry["met"] == {"matched_fraction": False, "max_excess": False, "max_seconds": False}
    assert "| easy | 2 | 0.500" in openers_table({"easy": entry}) and "b +3" in openers_table({"easy": entry})


@pytest.mark.skipif(not (RESULTS / "openers.json").exists(), reason="the opener benchmark has not been run")
def test_committed_opener_table_is_generated_from_its_json_and_quoted() -> None:
    openers = load_script(SCRIPT)
    summary = json.loads((RESULTS / "openers.json").read_text())
    table = (RESULTS / "openers.md").read_text()
    assert table == openers_table(summary)
    assert table in (ROOT / "docs" / "results" / "wordle.md").read_text()
    for mode in ("easy", "hard"):
        rows = summary[mode]["rows"]
        assert all(r["total"] - r["optimum"] == r["excess"] for r in rows)
        assert [r["opener"] for r in rows] == [w for w, _ in read_optima(openers.OPTIMA[mode])[: len(rows)]]
        # Every row is its saved record, made under the mode's documented configuration (so a rerun reuses it).
        for row in rows:
            saved = json.loads((RESULTS / "openers_partial" / mode / f"{row['opener']}.json").read_text())
            assert saved["config"] == dataclasses.asdict(opener_config(mode, row["opener"]))
            assert {k: saved[k] for k in row} == row


def test_committed_table_summary_is_its_records_and_each_records_its_command() -> None:
    summary = json.loads((RESULTS / "summary.json").read_text())
    assert summary == {"runs": summary_rows(RESULTS)}
    assert [r["name"] for r in summary["runs"]] == [n for n in RUNS if (RESULTS / f"{n}.json").exists()]
    for row in summary["runs"]:
        assert row["command"] == command_for(RUNS[row["name"]], row["name"])


def test_table_script_refuses_unknown_runs_and_takes_tyro_flags(tmp_path: Path) -> None:
    script = load_script(SCRIPT.parent / "benchmark.py")
    import tyro

    args = tyro.cli(script.Args, args=["--out-dir", str(tmp_path), "--only", "a", "b", "--force"])
    assert args == script.Args(out_dir=tmp_path, only=["a", "b"], force=True)
    with pytest.raises(SystemExit, match="unknown runs"):
        script.main(args)


@pytest.mark.slow
def test_latency_record(tmp_path: Path) -> None:
    """experiments/wordle/latency.py's measurement at two games (the table build and both books: about a minute)."""
    from experiments.wordle.solver_studies import measure_latency

    record = measure_latency(2, 0, args={"n_games": "2"}, log=lambda line: None)
    committed = json.loads((RESULTS / "table_and_latency.json").read_text())
    assert list(record) == list(committed) and record["table_shape"] == committed["table_shape"]
    for mode in ("easy", "hard"):
        assert record[mode]["config"] == committed[mode]["config"] and record[mode]["moves"] > 0
        assert record[mode]["book_entries"] == committed[mode]["book_entries"]
