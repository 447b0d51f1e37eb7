"""The coach: each typed move rated against the suggestion with how lucky its colours were; `why`, `list`, `new`."""

from __future__ import annotations

import re

import numpy as np
from typer.testing import CliRunner

from envs.wordle_rules import WordLists, feedback
from planning.wordle.assistant import Assistant
from planning.wordle.cli import app
from planning.wordle.solver import SolverConfig, WordleSolver
from planning.wordle.table import TableLoad

ANSWER = "cigar"


def _colours(guess: str, answer: str = ANSWER) -> str:
    return "".join("byg"[c] for c in feedback(guess, answer))


def _assistant(original: WordLists, original_table: TableLoad) -> tuple[Assistant, list[str]]:
    out: list[str] = []
    solver = WordleSolver(SolverConfig(policy="greedy"), original, original_table)
    return Assistant(solver, out.append), out


def _coach_line(out: list[str]) -> str:
    lines = [line for line in out if line.startswith("Coach:")]
    assert lines, out
    return lines[-1]


def test_coach_counts_the_answers_left_against_the_expectation(original: WordLists, original_table: TableLoad) -> None:
    assistant, out = _assistant(original, original_table)
    assistant.handle(f"salet {_colours('salet')}")
    line = _coach_line(out)
    left = len([w for w in original.answers if feedback("salet", w) == feedback("salet", ANSWER)])
    classes = np.unique([feedback("salet", w) for w in original.answers], axis=0, return_counts=True)[1]
    expected = (classes.astype(float) ** 2).sum() / len(original.answers)
    assert f"The colours left {left} answers, against {expected:.1f} expected" in line
    assert "SALET as an opener" in line
    luck = "lucky" if left / expected < 0.75 else "unlucky" if left / expected > 1.33 else "about as expected"
    assert line.endswith(f"{luck}.")


def test_coach_rates_a_move_against_the_suggestion(original: WordLists, original_table: TableLoad) -> None:
    assistant, out = _assistant(original, original_table)
    assistant.handle(f"salet {_colours('salet')}")
    solver, belief = assistant.solver, assistant.state.belief
    best = solver.lists.allowed[solver.act(belief, 1)]
    worse = "fuzzy"
    mine = solver.value_of(belief, 1, solver.lists.allowed.index(worse))
    top = solver.value_of(belief, 1, solver.lists.allowed.index(best))
    assert mine is not None and top is not None and mine.expected > top.expected
    assistant.handle(f"{worse} {_colours(worse)}")
    line = _coach_line(out)
    assert f"FUZZY: {1 + mine.expected:.3f} expected guesses in all" in line
    assert f"my suggestion {best.upper()}: {1 + top.expected:.3f} ({mine.expected - top.expected:.3f} more)" in line
    assistant.handle("undo")
    assistant.handle(f"{best} {_colours(best)}")
    assert f"{best.upper()} is my suggestion" in _coach_line(out)


def test_why_list_and_new(original: WordLists, original_table: TableLoad) -> None:
    assistant, out = _assistant(original, original_table)
    assistant.handle(f"salet {_colours('salet')}")
    assistant.handle("why crane")
    assert re.search(r"CRANE(: | is my suggestion)[\s\S]*it would leave \d+\.\d answers on average\.", out[-1])
    assistant.handle("why qwert")
    assert "QWERT is not in the allowed word list" in out[-1]
    assistant.handle("why")
    assert "Usage: why WORD" in out[-1]
    assistant.handle("list")
    remaining = sorted(original.answers[i] for i in assistant.state.belief.candidates)
    assert out[-1] == f"{len(remaining)} possible answers: " + ", ".join(w.upper() for w in remaining)
    assistant.handle("abuzz ggggg")  # ruled out: go on over the extended list, then start afresh
    assistant.handle("new")
    assert assistant.depth == 0 and assistant.solver is assistant.first_solver and "Suggested opener" in out[-1]


def test_alternatives_option(original_table: TableLoad) -> None:
    result = CliRunner().invoke(
        app, ["play", "--no-book", "--policy", "greedy", "--alternatives", "3"], input="salet bbbbb\nquit\n"
    )
    assert result.exit_code == 0, result.output
    table = result.output.split("expected guesses in all")[1].split("possible answer")[0]
    assert len(re.findall(r"^\s+[A-Z]{5}\s+\d+\.\d{3}", table, flags=re.M)) == 3
    bad = CliRunner().invoke(app, ["play", "--alternatives", "0"], input="quit\n")
    assert bad.exit_code == 2


def test_a_word_that_starts_like_a_command_is_a_guess(original: WordLists, original_table: TableLoad) -> None:
    assistant, out = _assistant(original, original_table)
    assert "whyda" in original.allowed
    assistant.handle(f"whyda {_colours('whyda')}")  # not `why DA ...`
    assert assistant.state.history == [("whyda", feedback("whyda", ANSWER))], out[-3:]
    assistant.handle("WHY   crane")  # the command itself, however it is cased and spaced
    assert "CRANE" in out[-1] and "answers on average" in out[-1]


def test_letters_outside_a_to_z_are_refused_before_any_case_mapping(
    original: WordLists, original_table: TableLoad
) -> None:
    # Unicode case mapping turns the long s into S and the Kelvin sign into k: neither may pass for SALET or KAYAK.
    assistant, out = _assistant(original, original_table)
    assistant.handle("why \u017falet")
    assert "other than the letters A-Z (\u017f)" in out[-1] and "SALET" not in out[-1], out[-1]
    assistant.handle("\u017falet bbbbb")
    assert "other than the letters A-Z" in out[-1] and assistant.depth == 0, out[-1]
    assistant.handle("\u212aayak bbbbb")
    assert "other than the letters A-Z (\u212a)" in out[-1] and assistant.depth == 0, out[-1]
    assistant.handle("\u212aayak")
    assert "also type the colours" not in out[-1] and assistant.depth == 0, out[-1]


def test_the_cli_refuses_letters_outside_a_to_z() -> None:
    solved = CliRunner().invoke(app, ["solve", "cig\u212ar"])
    assert solved.exit_code == 2 and "WORD: 'cig\u212ar'" in solved.output and "letters A-Z" in solved.output
    opener = CliRunner().invoke(app, ["solve", "cigar", "--opener", "\u017falet"])
    assert opener.exit_code == 2 and "--opener: '\u017falet'" in opener.output, opener.output
