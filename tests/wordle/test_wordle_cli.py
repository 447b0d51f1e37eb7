"""``rolloutlab wordle play|solve|bench`` driven through the real CLI, stdin included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envs.wordle_rules import WordLists, feedback
from planning.wordle.solver import SolverConfig, WordleSolver
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
    # --no-book: the second move is computed on the spot (the book is tested on small lists below).
    result = runner.invoke(app, ["wordle", "play", "--no-book"], input="\n".join(SESSION) + "\n")
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
    result = runner.invoke(app, ["wordle", "play", "--hard", "--no-book"], input="\n".join(lines) + "\n")
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

    easy, hard = quick_bench(tmp_path)
    assert easy.value == 7920 and easy.passed
    assert hard.value <= 8124 and hard.passed


def test_play_with_custom_lists_and_unknown_opener(small_files: tuple[Path, Path]) -> None:
    answers, allowed = small_files
    lists = f"{answers},{allowed}"
    bad = runner.invoke(app, ["wordle", "play", "--lists", lists], input="quit\n")
    assert bad.exit_code == 2 and "pass --opener none" in bad.output
    good = runner.invoke(app, ["wordle", "play", "--lists", lists, "--opener", "none"], input="help\nquit\n")
    assert good.exit_code == 0 and "120 possible answers" in good.output and good.output.rstrip().endswith("Bye.")


def test_play_answers_the_second_move_from_the_cached_book(
    small: WordLists, small_files: tuple[Path, Path], cache_path: Path
) -> None:
    answers, allowed = small_files
    solver = WordleSolver(SolverConfig(mode="hard", top_k=5, opener=None, exact_up_to=40), small)
    opener = small.allowed[solver.opener()]
    colours = "".join(str(c) for c in feedback(opener, small.answers[0]))
    args = ["wordle", "play", "--hard", "--lists", f"{answers},{allowed}", "--opener", "none"]
    first = runner.invoke(app, args, input=f"{opener} {colours}\nquit\n")
    assert first.exit_code == 0, first.output
    assert "Computing the replies" in first.output and "cached in" in first.output and "Suggested:" in first.output
    assert list(cache_path.glob("wordle-book-*.json"))
    second = runner.invoke(app, args, input=f"{opener} {colours}\nquit\n")
    assert second.exit_code == 0 and "cached in" not in second.output and "Computing" not in second.output
    suggestion = [line for line in first.output.splitlines() if line.startswith("Suggested:")]
    assert suggestion == [line for line in second.output.splitlines() if line.startswith("Suggested:")]
