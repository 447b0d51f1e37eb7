"""Exact small-belief solver: branch and bound equals a plain exhaustive search; it plays legal, finished games."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from envs.wordle_rules import WordLists, make_word_lists
from planning.wordle.exact import ExactSmallPolicy
from planning.wordle.heuristics import HeuristicPolicy
from planning.wordle.model import WordleBelief, WordleModel
from planning.wordle.table import TableLoad, build_pattern_table

# Words that differ in one or two letters: the hard cases where one guess cannot split everything.
_ANSWERS = ["fight", "light", "might", "night", "right", "sight", "tight", "wight", "eight", "bight", "hatch", "match"]
_OTHERS = ["flams", "thorn", "wrens", "bumph", "gable", "nymph", "mould", "crwth", "sweet", "harem", "trial", "beach"]


@pytest.fixture(scope="module")
def tiny() -> tuple[WordLists, np.ndarray]:
    lists = make_word_lists("\n".join(_ANSWERS), "\n".join(sorted(_ANSWERS + _OTHERS)), "tiny")
    return lists, build_pattern_table(lists.allowed, lists.answers)


def _exhaustive(model: WordleModel, belief: WordleBelief, left: int) -> float:
    """Least total guesses by trying every legal guess at every node (no bounds), inf if impossible in ``left``."""

    @cache
    def value(cands: tuple[int, ...], hints: object, left: int) -> float:
        if len(cands) == 1:
            return 1.0
        if left <= 1:
            return float("inf")
        node = WordleBelief(np.array(cands, dtype=np.int32), hints)  # type: ignore[arg-type]
        best = float("inf")
        for guess in model.legal_guesses(node).tolist():
            finished, children = model.step(node, guess)
            if finished == 0 and len(children) == 1:
                continue
            cost = len(cands) + sum(value(tuple(c.candidates.tolist()), c.hints, left - 1) for c in children)
            best = min(best, cost)
        return best

    return value(tuple(belief.candidates.tolist()), belief.hints, left)


@pytest.mark.parametrize("hard", [False, True], ids=["easy", "hard"])
@pytest.mark.parametrize("left", [2, 3, 6])
def test_branch_and_bound_matches_exhaustive_search(tiny: tuple[WordLists, np.ndarray], hard: bool, left: int) -> None:
    lists, table = tiny
    model = WordleModel(lists, table, hard=hard)
    policy = ExactSmallPolicy(model, HeuristicPolicy(model, "gep", last_guess=6), max_size=len(_ANSWERS))
    rng = np.random.default_rng(0)
    beliefs = [model.root()]
    # Beliefs reached after one guess (with its hard-mode hints), and random subsets of the answers.
    for guess in (lists.allowed.index("thorn"), lists.allowed.index("match")):
        beliefs += [child for _, child in model.split(model.root(), guess)[1]]
    beliefs += [model.root(rng.choice(len(_ANSWERS), size=s, replace=False)) for s in (2, 3, 4, 5, 7)]
    for belief in beliefs:
        expected = _exhaustive(model, belief, left)
        cost, guess = policy.solve(belief, left)
        if expected == float("inf"):
            assert guess == -1
            continue
        assert cost == expected
        # The guess it returns attains the optimum, and it is the first one that does in the documented order
        # (lower bound 3n - 2s - m, candidates first, then list order), whichever shortcut found it.
        _, children = model.step(belief, guess)
        assert model.size(belief) + sum(_exhaustive(model, c, left - 1) for c in children) == expected
        assert guess == _first_optimal(model, belief, left, expected)


def _first_optimal(model: WordleModel, belief: WordleBelief, left: int, optimum: float) -> int:
    """The first legal guess attaining ``optimum`` in increasing lower bound, candidates first, then list order."""
    n = model.size(belief)
    candidates = set(model.answer_rows[belief.candidates].tolist())
    keyed = []
    for guess in model.legal_guesses(belief).tolist():
        finished, children = model.step(belief, guess)
        if finished == 0 and len(children) == 1:
            continue
        cost = n + sum(_exhaustive(model, c, left - 1) for c in children)
        keyed.append(((3 * n - 2 * finished - len(children), guess not in candidates, guess), cost))
    return min(key for key, cost in keyed if cost == optimum)[2]


def test_falls_back_to_the_heuristic_above_its_size(tiny: tuple[WordLists, np.ndarray]) -> None:
    lists, table = tiny
    model = WordleModel(lists, table)
    heuristic = HeuristicPolicy(model, "gep", last_guess=6)
    policy = ExactSmallPolicy(model, heuristic, max_size=3)
    root = model.root()
    assert policy.act(root, 0) == heuristic.act(root, 0)
    assert len(policy) == 0
    assert policy.ranked(root, 3, 0)[0] == policy.act(root, 0)
    with pytest.raises(ValueError, match="max_size"):
        ExactSmallPolicy(model, heuristic, max_size=0)


class _PlainBranchAndBound:
    """The solver without its shortcuts: one search over every legal guess in the documented order (bound, candidates
    first, list order), every child solved exactly, no limits passed down, no pre-filters."""

    def __init__(self, model: WordleModel) -> None:
        self.model = model
        self.memo: dict[object, tuple[int, int]] = {}

    def solve(self, belief: WordleBelief, left: int) -> tuple[int, int]:
        model, n = self.model, int(belief.candidates.size)
        if n == 1:
            return 1, int(model.answer_rows[belief.candidates[0]])
        if left <= 1:
            return 1 << 30, -1
        key = (model.key(belief), left)
        if key in self.memo:
            return self.memo[key]
        legal = model.legal_guesses(belief)
        is_cand = np.isin(legal, model.answer_rows[belief.candidates])
        codes = model.table_t[belief.candidates][:, legal]
        solved = (codes == model.solved).sum(axis=0)
        ordered = np.sort(codes, axis=0)
        buckets = 1 + (ordered[1:] != ordered[:-1]).sum(axis=0) - (solved > 0)
        bound = 3 * n - 2 * solved - buckets
        keep = (solved > 0) | (buckets > 1)
        if left == 2:
            keep &= buckets == n - solved
        legal, is_cand, bound = legal[keep], is_cand[keep], bound[keep]
        best = (1 << 30, -1)
        for i in np.lexsort((legal, ~is_cand, bound)).tolist():
            if bound[i] >= best[0]:
                break
            _, children = model.split(belief, int(legal[i]))
            cost = n
            for _, child in children:
                cost += self.solve(child, left - 1)[0]
            if cost < best[0]:
                best = (min(cost, 1 << 30), int(legal[i]))
        self.memo[key] = best
        return best


@pytest.mark.parametrize("hard", [False, True], ids=["easy", "hard"])
def test_shortcuts_give_the_plain_search_result_on_real_beliefs(
    original: WordLists, original_table: TableLoad, hard: bool
) -> None:
    """Candidates first, the pair pre-filter, skipped small children and limits passed down (with their lower-bound
    memo) change neither the optimum nor the guess chosen, on beliefs of 3-25 answers after two guesses."""
    model = WordleModel(original, original_table.table, hard=hard)
    policy = ExactSmallPolicy(model, HeuristicPolicy(model, "gep", last_guess=6), max_size=25)
    plain = _PlainBranchAndBound(model)
    rng = np.random.default_rng(3)
    root, checked = model.root(), 0
    while checked < 12:
        answer = int(rng.integers(len(original.answers)))
        belief = root
        for _ in range(2):
            legal = model.legal_guesses(belief)
            guess = int(legal[rng.integers(len(legal))])
            belief = model.observe(belief, guess, int(model.table[guess, answer]))
        if not 3 <= belief.candidates.size <= 25:
            continue
        checked += 1
        for left in (2, 3, 4):
            assert policy.solve(belief, left) == plain.solve(belief, left), (belief.candidates.size, left)
    assert policy.solve(belief, 4, limit=2 * int(belief.candidates.size) - 1) == (2 * belief.candidates.size - 1, -1)
