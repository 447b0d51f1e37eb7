"""Solver: exact tree evaluation equals game-by-game play; the headline optimum; hard-mode legality."""

from __future__ import annotations

import numpy as np
import pytest

from envs.wordle_rules import HardHints, WordLists, feedback
from planning.wordle.solver import SolverConfig, WordleSolver
from planning.wordle.table import TableLoad, load_pattern_table


@pytest.fixture(scope="module")
def small_table(small: WordLists, cache_path) -> TableLoad:  # type: ignore[no-untyped-def]
    return load_pattern_table(small, cache_path)


@pytest.mark.parametrize(
    "config",
    [
        SolverConfig(policy="greedy", heuristic="mig", opener=None),
        SolverConfig(policy="greedy", heuristic="minimax", opener=None, candidate_tiebreak=False),
        SolverConfig(policy="rollout", heuristic="gep", top_k=5, opener=None),
        SolverConfig(mode="hard", policy="rollout", heuristic="mrd", top_k=3, opener=None),
        SolverConfig(mode="hard", policy="rollout", heuristic="gep", top_k=3, opener=None, exact_up_to=8),
        SolverConfig(policy="rollout", heuristic="gep", top_k=4, opener="auto", guesses="answers"),
    ],
    ids=[
        "greedy-mig",
        "greedy-minimax-paper",
        "rollout-gep",
        "hard-rollout-mrd",
        "hard-rollout-gep-exact8",
        "auto-opener-answers-only",
    ],
)
def test_tree_total_equals_one_by_one_play(config: SolverConfig, small: WordLists, small_table: TableLoad) -> None:
    solver = WordleSolver(config, small, small_table)
    result = solver.evaluate()
    lengths = []
    for answer in small.answers:
        moves = solver.play(answer)
        assert moves[-1] == (answer, (2,) * 5)
        hints = HardHints.empty(5)
        for guess, colours in moves:
            assert colours == feedback(guess, answer)
            if config.mode == "hard":
                assert hints.violation(guess) is None
            hints = hints.update(guess, colours)
        lengths.append(len(moves))
    assert result.total == sum(lengths)
    assert result.distribution == {k: int(v) for k, v in zip(*np.unique(lengths, return_counts=True), strict=True)}
    assert result.failures == sum(n > 6 for n in lengths)
    if config.opener == "auto":
        assert len(result.opener_search) == 4
        assert result.opener in {row["word"] for row in result.opener_search}


def test_headline_easy_rollout_gep_k10_salet_is_optimal(original: WordLists, original_table: TableLoad) -> None:
    solver = WordleSolver(SolverConfig(), original, original_table)
    result = solver.evaluate()
    assert (result.total, result.max, result.failures, result.answers) == (7920, 5, 0, 2315)
    # Spot-check tree against play on a few answers.
    assert len(solver.play("cigar")) <= 5


def test_alternatives_and_bad_words(small: WordLists, small_table: TableLoad) -> None:
    solver = WordleSolver(SolverConfig(top_k=4, opener=None), small, small_table)
    root = solver.root()
    guess = solver.opener()
    child = solver.model.observe(root, guess, int(solver.model.table[guess, 0]))
    alts = solver.alternatives(child, 1)
    assert alts and all(a.expected >= 1.0 for a in alts)
    # The suggestion is always among the alternatives shown, even when the widened search found it.
    assert solver.lists.allowed[solver.act(child, 1)] in {a.word for a in solver.alternatives(child, 1, n=20)}
    assert [a.expected for a in alts] == sorted(a.expected for a in alts) or alts[0].overruns == 0
    with pytest.raises(ValueError, match="not in the answer list"):
        solver.play("zzzzz")
    with pytest.raises(ValueError, match="not in the allowed list"):
        WordleSolver(SolverConfig(opener="qqqqq"), small, small_table)
    with pytest.raises(ValueError, match="heuristic must be"):
        WordleSolver(SolverConfig(heuristic="bogus"), small, small_table)


def test_widened_choice_is_listed_among_alternatives(original: WordLists, original_table: TableLoad) -> None:
    # Hard mode after an all-grey SALET: all of GEP's top 5 would lose answers past guess 6, so the rollout widens
    # its search; the guess it finds there must be shown with the alternatives.
    solver = WordleSolver(SolverConfig(mode="hard", top_k=5), original, original_table)
    root = solver.root()
    child = solver.model.observe(root, solver.opener(), 0)
    assert solver.rollout is not None
    assert all(s.overruns > 0 for s in solver.rollout.scores(child, 1))
    choice = solver.lists.allowed[solver.act(child, 1)]
    alts = solver.alternatives(child, 1)
    assert alts[0].word == choice and alts[0].overruns == 0
