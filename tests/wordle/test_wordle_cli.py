"""``rolloutlab wordle play|solve|bench`` driven through the real CLI, stdin included."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

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
    assert "No answer in the original list gives 🟩🟩🟩🟩🟩 for SALET" in out
    assert "Nothing to undo." in out
    assert "102 possible answers" in out and "Suggested: BROND" in out
    assert "expected guesses in all" in out
    assert "Took back the last guess." in out
    assert "1 possible answer: CIGAR" in out or "It must be CIGAR" in out
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
    from experiments.wordle.quick import quick_bench

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


# Issue 19 (second round): the assistant's messages, exit status and the cache command.

_ROW = re.compile(r"^  ([A-Z]+)\s+(\d+\.\d+)\s+(?:yes|no)(?:\s+\((\d+) answers? would need)?")


def _colours(guess: str, answer: str) -> str:
    return "".join(str(c) for c in feedback(guess, answer))


def _rows(output: str) -> list[tuple[float, int, str]]:
    """The alternatives' table rows as printed: (expected guesses, answers past the limit, word)."""
    rows = []
    for line in output.splitlines():
        match = _ROW.match(line)
        if match:
            rows.append((float(match[2]), int(match[3] or 0), match[1]))
    return rows


# The hard-mode game SALET, BATCH, CATCH, ... , WATCH: eight guesses, each legal under the NYT rule.
_WATCH = [
    f"{w} {_colours(w, 'watch')}" for w in ("salet", "batch", "catch", "hatch", "latch", "match", "patch", "watch")
]
_HARD_GREEDY = ["wordle", "play", "--hard", "--policy", "greedy", "--exact-up-to", "0", "--no-book"]


def test_book_that_cannot_be_cached_is_not_reported_as_cached(
    small: WordLists, small_files: tuple[Path, Path], cache_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("ROLLOUTLAB_CACHE", str(blocker / "cache"))  # a directory under a file: every write fails
    answers, allowed = small_files
    opener = small.allowed[WordleSolver(SolverConfig(opener=None), small).opener()]
    args = ["wordle", "play", "--lists", f"{answers},{allowed}", "--opener", "none"]
    result = runner.invoke(app, args, input=f"{opener} {_colours(opener, small.answers[0])}\nquit\n")
    assert result.exit_code == 0, result.output
    assert "Suggested:" in result.output
    assert "cached in" not in result.output
    assert "could not be cached" in result.output and "Not a directory" in result.output
    assert "Traceback" not in result.output


def test_a_table_that_cannot_be_cached_is_reported(
    small: WordLists, small_files: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("ROLLOUTLAB_CACHE", str(blocker / "cache"))  # a directory under a file: every write fails
    answers, allowed = small_files
    result = runner.invoke(
        app, ["wordle", "solve", small.answers[3], "--lists", f"{answers},{allowed}", "--opener", "none"]
    )
    assert result.exit_code == 0, result.output
    assert "could not cache it at" in result.output and "Not a directory" in result.output
    assert "built again next time" in result.output and "solved in" in result.output


def test_list_error_does_not_blame_the_opener(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("crane\nslate\n")
    (tmp_path / "b.txt").write_text("crane\n")
    result = runner.invoke(app, ["wordle", "play", "--lists", f"{tmp_path / 'a.txt'},{tmp_path / 'b.txt'}"])
    assert result.exit_code == 2
    assert "line 2: 'slate' is not in the allowed list" in result.output
    assert "--opener" not in result.output


def test_opener_error_in_bench_suggests_the_option(small_files: tuple[Path, Path], cache_path: Path) -> None:
    answers, allowed = small_files
    result = runner.invoke(app, ["wordle", "bench", "--lists", f"{answers},{allowed}", "--opener", "zzzzz"])
    assert result.exit_code == 2 and "'zzzzz'" in result.output and "pass --opener none" in result.output


def test_a_win_past_the_limit_is_not_called_solved(original_table: TableLoad) -> None:
    result = runner.invoke(app, _HARD_GREEDY, input="\n".join([*_WATCH, "quit"]) + "\n")
    assert result.exit_code == 0, result.output
    assert "Solved in" not in result.output
    assert "WATCH on guess 8, past the 6-guess limit" in result.output


def test_a_move_that_fails_midway_is_not_counted(
    original: WordLists, original_table: TableLoad, monkeypatch: pytest.MonkeyPatch
) -> None:
    from planning.wordle.assistant import Assistant

    solver = WordleSolver(SolverConfig(policy="greedy"), original, original_table)
    real = solver.alternatives
    failures = [RuntimeError("boom")]

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return real(*args, **kwargs)

    monkeypatch.setattr(solver, "alternatives", flaky)
    out: list[str] = []
    assistant = Assistant(solver, out.append)
    # "nothing changed" must be true, or the retyped guess counts twice and a six-guess win reads "Solved in 7".
    lines = iter(["salet 01000", "salet 01000", "cigar ggggg", "quit"])
    assistant.run(lambda _: next(lines))
    assert any("something went wrong" in line for line in out)
    assert assistant.depth == 2
    assert "Solved in 2 guesses!" in "\n".join(out)


@pytest.mark.parametrize("where", ["prompt", "move"])
def test_ctrl_c_exits_130_without_a_traceback(
    where: str, small_files: tuple[Path, Path], cache_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from planning.wordle.assistant import Assistant

    def interrupt(*args: Any) -> Any:
        raise KeyboardInterrupt

    if where == "prompt":
        monkeypatch.setattr("builtins.input", interrupt)
    else:  # Ctrl-C while a move is being computed
        monkeypatch.setattr(Assistant, "handle", interrupt)
    answers, allowed = small_files
    args = ["wordle", "play", "--lists", f"{answers},{allowed}", "--opener", "none", "--no-book"]
    result = runner.invoke(app, args, input="help\n")
    assert result.exit_code == 130, result.output
    assert "Interrupted." in result.output
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output


def test_counts_of_one_are_singular(original_table: TableLoad) -> None:
    won = runner.invoke(app, ["wordle", "play", "--no-book"], input="cigar ggggg\nquit\n")
    assert won.exit_code == 0, won.output
    assert "Solved in 1 guess!" in won.output and "1 possible answer: CIGAR" in won.output
    late = runner.invoke(app, _HARD_GREEDY, input="\n".join([*_WATCH[:3], "quit"]) + "\n")
    assert "(1 answer would need > 6)" in late.output
    for output in (won.output, late.output):
        assert not re.search(r"\b1 (guesses|answers)\b", output) and "answer(s)" not in output


def test_hard_mode_alternatives_are_shown_in_order(original_table: TableLoad) -> None:
    # After SALET ⬛⬛⬛🟩⬛ hard mode's five contenders (--second-top-k 0: k = 5 at the second guess too) come back as
    # DINER 3.972, RIDER 4.047, CIDER 4.056, DICER 4.056, DONER 4.047 (ranked by answers past the limit first): shown
    # by expected guesses, then safety, then A-Z.
    args = ["wordle", "play", "--hard", "--no-book", "--second-top-k", "0"]
    result = runner.invoke(app, args, input="salet bbbgb\nquit\n")
    assert result.exit_code == 0, result.output
    rows = _rows(result.output)
    assert len(rows) == 5 and rows == sorted(rows)
    assert [word for *_, word in rows] == ["DINER", "RIDER", "DONER", "CIDER", "DICER"]


def test_alternatives_ties_are_alphabetical(original: WordLists, original_table: TableLoad) -> None:
    from planning.wordle.alternatives import Alternative
    from planning.wordle.assistant import Assistant

    solver = WordleSolver(SolverConfig(policy="greedy"), original, original_table)
    given = [Alternative("zonal", 2.5, False), Alternative("mango", 2.0, True), Alternative("banjo", 2.5, False)]
    solver.alternatives = lambda *args, **kwargs: given  # type: ignore[method-assign]
    out: list[str] = []
    assistant = Assistant(solver, out.append)
    assistant.handle("salet 01000")
    assert [word for *_, word in _rows("\n".join(out))] == ["MANGO", "BANJO", "ZONAL"]


def test_opener_auto_shows_its_progress(small_files: tuple[Path, Path]) -> None:
    answers, allowed = small_files
    args = ["wordle", "bench", "--lists", f"{answers},{allowed}", "--opener", "auto", "--top-k", "3"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "openers: 100%" in result.stderr and "3/3" in result.stderr and "best=" in result.stderr
    record = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(record["opener_search"]) == 3 and record["opener"] in {r["word"] for r in record["opener_search"]}


def test_the_suggestion_leads_the_guesses_tied_with_it(original: WordLists, original_table: TableLoad) -> None:
    from planning.wordle.assistant import Assistant
    from planning.wordle.solver import Alternative

    solver = WordleSolver(SolverConfig(policy="greedy"), original, original_table)
    given = [Alternative("zonal", 2.5, False), Alternative("mango", 2.5, True), Alternative("banjo", 2.5, False)]
    solver.alternatives = lambda *args, **kwargs: given  # type: ignore[method-assign]
    solver.act = lambda *args, **kwargs: original.allowed.index("mango")  # type: ignore[method-assign]
    out: list[str] = []
    assistant = Assistant(solver, out.append)
    assistant.handle("salet 01000")
    assert "Suggested: MANGO" in out[-2], out[-2:]
    assert [word for *_, word in _rows("\n".join(out))] == ["MANGO", "BANJO", "ZONAL"]


@pytest.mark.parametrize("mode", ["easy", "hard"])
def test_every_command_defaults_to_the_best_measured_configuration(
    mode: str, small_files: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``play``, ``serve``, ``solve`` and ``bench`` without options: DEFAULT_TOP_K, DEFAULT_SECOND_TOP_K and
    DEFAULT_EXACT_UP_TO of the mode (the openers benchmark's configuration, at the proven optimum from salet)."""
    from planning.wordle import solver as solver_module
    from planning.wordle.solver import DEFAULT_EXACT_UP_TO, DEFAULT_SECOND_TOP_K, DEFAULT_TOP_K

    best = {"top_k": DEFAULT_TOP_K[mode], "second_top_k": DEFAULT_SECOND_TOP_K[mode]}
    best["exact_up_to"] = DEFAULT_EXACT_UP_TO[mode]
    assert best["second_top_k"] > 0 and best["exact_up_to"] > 0
    answers, allowed = small_files
    lists = f"{answers},{allowed}"
    hard = ["--hard"] if mode == "hard" else []
    out = tmp_path / "r.json"
    bench = ["wordle", "bench", "--mode", mode, "--lists", lists, "--opener", "none", "--json", str(out)]
    result = runner.invoke(app, bench)
    assert result.exit_code == 0, result.output
    config = json.loads(out.read_text())["config"]
    assert {key: config[key] for key in best} == best

    seen: list[SolverConfig] = []

    def record(self: WordleSolver, config: SolverConfig, *args: Any, **kwargs: Any) -> None:
        seen.append(config)
        raise ValueError("configuration recorded")

    monkeypatch.setattr(solver_module.WordleSolver, "__init__", record)
    for command in (["play", "--no-book"], ["serve", "--no-book"], ["solve", answers.read_text().split()[0]]):
        result = runner.invoke(app, ["wordle", *command, *hard, "--lists", lists], input="quit\n")
        assert result.exit_code == 2 and "configuration recorded" in result.output, result.output
        assert {key: getattr(seen[-1], key) for key in best} == best, command
    assert len(seen) == 3


def test_the_help_states_the_defaults_in_force() -> None:
    from planning.wordle import cli
    from planning.wordle.solver import DEFAULT_EXACT_UP_TO, DEFAULT_SECOND_TOP_K, DEFAULT_TOP_K

    assert f"default: {DEFAULT_TOP_K['easy']} easy, {DEFAULT_TOP_K['hard']} hard" in cli._TOP_K_HELP
    assert len(set(DEFAULT_SECOND_TOP_K.values())) == 1
    assert f"default: {DEFAULT_SECOND_TOP_K['easy']};" in cli._SECOND_TOP_K_HELP
    assert f"default: {DEFAULT_EXACT_UP_TO['easy']} easy, {DEFAULT_EXACT_UP_TO['hard']} hard" in cli._EXACT_HELP
