"""``rolloutlab wordle play|solve|bench`` driven through the real CLI, stdin included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planning.wordle.table import TableLoad
from rolloutlab.cli import app

runner = CliRunner()

SESSION = [
    "help",
    "",
    "salet",  # a word without colours
    "salet bxbbb",  # unknown symbol
    "salet 0100",  # too few symbols
    "qwert bbbbb",  # not an allowed word
    "sal3t bbbbb",  # not a word at all
    "salet ggggg",  # feedback no answer fits (SALET is not an answer)
    "undo",  # nothing to undo yet
    "salet 01000",  # answer is CIGAR
    "bybbb",  # colours only: the suggestion (BROND) was played
    "undo",
    "brond ⬛🟨⬛⬛⬛",
    "chair 20112",
    "cigar 🟩🟩🟩🟩🟩",
    "crane bbbbb",  # after the win
    "quit",
]


def test_whole_interactive_session(original_table: TableLoad) -> None:
    result = runner.invoke(app, ["wordle", "play"], input="\n".join(SESSION) + "\n")
    out = result.output
    assert result.exit_code == 0, out
    assert "Suggested opener: SALET" in out
    assert "Commands: undo" in out
    assert "Type your guess and its colours" in out
    assert "also type the colours you got for SALET" in out
    assert "unknown symbol(s) x" in out
    assert "4 symbols for 5 letters" in out
    assert "QWERT is not in the allowed word list" in out
    assert "'sal3t' is not a 5-letter word" in out
    assert "No answer in the list gives 🟩🟩🟩🟩🟩 for SALET" in out
    assert "Nothing to undo." in out
    assert "102 possible answers" in out and "Suggested: BROND" in out
    assert "expected guesses in all" in out
    assert "Took back the last guess." in out
    assert "possible answer(s): CIGAR" in out or "It must be CIGAR" in out
    assert "Solved in 4 guesses!" in out
    assert "This game is solved" in out
    assert out.rstrip().endswith("Bye.")
    assert "Sorry, something went wrong" not in out


def test_hard_mode_session_and_end_of_input(original_table: TableLoad) -> None:
    lines = ["salet 01000", "crony bbbbb", "agora 🟨⬛⬛🟨🟨"]
    result = runner.invoke(app, ["wordle", "play", "--hard"], input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    assert "hard mode: CRONY is not allowed here (guess must contain A)" in result.output
    assert result.output.rstrip().endswith("Bye.")  # end of input ends the session cleanly


def test_solve_prints_the_board(original_table: TableLoad) -> None:
    result = runner.invoke(app, ["wordle", "solve", "cigar"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "SALET ⬛🟨⬛⬛⬛",
        "BROND ⬛🟨⬛⬛⬛",
        "CHAIR 🟩⬛🟨🟨🟩",
        "CIGAR 🟩🟩🟩🟩🟩",
        "solved in 4",
    ]
    bad = runner.invoke(app, ["wordle", "solve", "zzzzz"])
    assert bad.exit_code == 2 and "not in the answer list" in bad.output


def test_bench_writes_json(small_files: tuple[Path, Path], tmp_path: Path) -> None:
    answers, allowed = small_files
    out = tmp_path / "r.json"
    args = ["wordle", "bench", "--policy", "greedy", "--heuristic", "mrd", "--opener", "none"]
    result = runner.invoke(app, [*args, "--lists", f"{answers},{allowed}", "--json", str(out)])
    assert result.exit_code == 0, result.output
    record = json.loads(out.read_text())
    required = "mode policy heuristic top_k opener answers total mean max failures distribution seconds".split()  # noqa: SIM905
    assert set(required) <= set(record)
    assert record["answers"] == 120 and sum(record["distribution"].values()) == 120
    assert record["total"] == sum(int(k) * v for k, v in record["distribution"].items())


def test_bad_lists_are_reported(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("crane\nCRANE\n")
    (tmp_path / "b.txt").write_text("crane\n")
    result = runner.invoke(app, ["wordle", "bench", "--lists", f"{tmp_path / 'a.txt'},{tmp_path / 'b.txt'}"])
    assert result.exit_code == 2
    assert "line 2: 'CRANE' must be lowercase letters a-z only" in result.output


@pytest.mark.slow
def test_quick_bench_headline(tmp_path: Path) -> None:
    from planning.wordle.bench import quick_bench

    (line,) = quick_bench(tmp_path)
    assert line.value == 7920 and line.passed


def test_play_with_custom_lists_and_unknown_opener(small_files: tuple[Path, Path]) -> None:
    answers, allowed = small_files
    lists = f"{answers},{allowed}"
    bad = runner.invoke(app, ["wordle", "play", "--lists", lists], input="quit\n")
    assert bad.exit_code == 2 and "pass --opener none" in bad.output
    good = runner.invoke(app, ["wordle", "play", "--lists", lists, "--opener", "none"], input="help\nquit\n")
    assert good.exit_code == 0 and "120 possible answers" in good.output and good.output.rstrip().endswith("Bye.")
