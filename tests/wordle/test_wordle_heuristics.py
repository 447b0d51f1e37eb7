"""Bucket statistics, the four heuristics, tie-breaking and the small-belief rules."""

from __future__ import annotations

import numpy as np
import pytest

from envs.wordle_rules import WordLists
from planning.wordle.heuristics import HEURISTICS, HeuristicPolicy, bucket_sizes, heuristic_scores
from planning.wordle.model import WordleModel
from planning.wordle.table import build_pattern_table


def test_bucket_sizes_both_paths_agree_with_a_reference() -> None:
    rng = np.random.default_rng(1)
    for n in (1, 3, 20, 24, 25, 200):
        codes = rng.integers(0, 30, size=(n, 40)).astype(np.uint8)
        got = bucket_sizes(codes, 243)
        for g in range(40):
            column = codes[:, g].tolist()
            assert got[:, g].tolist() == [column.count(c) for c in column]


def test_scores_by_hand() -> None:
    # Six candidates; guess 0 splits them 3/3, guess 1 splits them 4/1/1, guess 2 into singletons.
    sizes = np.array([[3, 4, 1], [3, 4, 1], [3, 4, 1], [3, 4, 1], [3, 1, 1], [3, 1, 1]])
    assert heuristic_scores(sizes, "gep").tolist() == [2, 3, 6]
    assert heuristic_scores(sizes, "mrd").tolist() == [-18, -18, -6]
    assert heuristic_scores(sizes, "minimax").tolist() == [-3, -4, -1]
    mig = heuristic_scores(sizes, "mig")
    assert mig[2] == 0.0 and mig[0] == pytest.approx(-6 * np.log(3)) and mig[1] == pytest.approx(-4 * np.log(4))
    with pytest.raises(ValueError, match="unknown heuristic"):
        heuristic_scores(sizes, "nope")


@pytest.fixture(scope="module")
def model(small: WordLists) -> WordleModel:
    return WordleModel(small, build_pattern_table(small.allowed, small.answers))


@pytest.mark.parametrize("kind", HEURISTICS)
def test_shortcut_agrees_with_full_ranking(model: WordleModel, kind: str) -> None:
    policy = HeuristicPolicy(model, kind)
    rng = np.random.default_rng(2)
    for _ in range(40):
        n = int(rng.integers(3, 30))
        belief = model.root(rng.choice(len(model.lists.answers), n, replace=False))
        assert policy.act(belief) == policy.ranked(belief, 1)[0]


def test_ties_prefer_possible_answers_and_small_beliefs_guess_a_candidate(model: WordleModel) -> None:
    policy = HeuristicPolicy(model, "gep")
    rng = np.random.default_rng(3)
    for _ in range(30):
        belief = model.root(rng.choice(len(model.lists.answers), int(rng.integers(3, 60)), replace=False))
        _guesses, scores, is_cand = policy.scored(belief)
        best = scores[0]
        tied = scores == best
        # Among the guesses with the best score, candidates come first.
        assert not (is_cand[tied][1:] & ~is_cand[tied][:-1]).any()
    for n in (1, 2):
        belief = model.root(np.arange(n) * 7)
        guess = policy.act(belief)
        assert model.answer_of[guess] in belief.candidates.tolist()


def test_last_guess_is_always_a_candidate(model: WordleModel) -> None:
    policy = HeuristicPolicy(model, "mig", last_guess=6)
    belief = model.root(np.arange(0, 40, 4))
    assert model.answer_of[policy.act(belief, depth=5)] in belief.candidates.tolist()


def test_hard_mode_guesses_respect_hints(small: WordLists) -> None:
    model = WordleModel(small, build_pattern_table(small.allowed, small.answers), hard=True)
    policy = HeuristicPolicy(model, "gep")
    belief = model.root()
    guess = policy.act(belief)
    for code in np.unique(model.table[guess, belief.candidates])[:10]:
        child = model.observe(belief, guess, int(code))
        assert child.hints is not None
        nxt = policy.act(child, 1)
        assert child.hints.violation(small.allowed[nxt]) is None
