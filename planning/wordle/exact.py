"""Exact minimum-guess play on small Wordle beliefs: a stronger base policy near the leaves of the rollout.

Rollout (Bertsekas 2020, ch. 2) is only as good as its cost-to-go estimate. Near the end of a game the beliefs are
small, and there the optimal cost can be computed exactly: depth-first search over the legal guesses with memoization
of belief states and a branch-and-bound cut on a lower bound. :class:`ExactSmallPolicy` plays that optimum on beliefs
of at most ``max_size`` candidates and the heuristic elsewhere; the rollout then scores its contenders with exact
values wherever the game has narrowed to a few answers.

Cost of a belief of n candidates with r guesses left = total guesses over its candidates (sum, not mean):

    J(b, r) = min over legal g of  n + sum_{child c of g} J(c, r - 1),   J({a}, r >= 1) = 1,

infeasible (no way to finish every candidate within r guesses) when r = 0, or r = 1 and n > 1. The lower bound of a
guess uses J(c, .) >= 2|c| - 1 (at most one candidate of c is finished by its next guess, the others need a second
one): LB(g) = n + sum_c (2|c| - 1) = 3n - 2 s(g) - m(g), with s(g) the candidates g finishes now and m(g) its other
buckets. Guesses are tried in increasing LB order, candidates first among equals, and the search stops at the first
guess whose bound cannot beat the best found (memoization and bounds are the usual ingredients of exact Wordle
solvers; this code is ours).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from planning.wordle.heuristics import HeuristicPolicy
from planning.wordle.model import WordleBelief, WordleModel

_INFEASIBLE = 1 << 30


class ExactSmallPolicy:
    """Optimal play (least total guesses, none past the limit) on beliefs of at most ``max_size`` candidates.

    On larger beliefs, and where no guess finishes every candidate within the limit, it plays ``fallback``. It is a
    :class:`planning.rollout.RankingPolicy`: its ranking is the fallback's with its own choice moved first, so the
    rollout's contenders still come from the heuristic.

    Args:
        model: The Wordle model (easy or hard; the legal guesses follow its hard-mode hints).
        fallback: The heuristic played on larger beliefs (and used to rank contenders).
        max_size: Largest belief (candidates) solved exactly.
        max_guesses: Guesses per game (6).
    """

    depth_dependent = True

    def __init__(self, model: WordleModel, fallback: HeuristicPolicy, max_size: int, max_guesses: int = 6) -> None:
        if max_size < 1:
            raise ValueError(f"max_size must be >= 1, got {max_size}")
        self.model = model
        self.fallback = fallback
        self.max_size = max_size
        self.max_guesses = max_guesses
        self._memo: dict[Hashable, tuple[int, int]] = {}

    def __len__(self) -> int:
        """Number of (belief, guesses left) states solved so far."""
        return len(self._memo)

    def act(self, belief: WordleBelief, depth: int = 0) -> int:
        """The optimal guess (allowed-list index) on small beliefs, else the fallback's, ``depth`` guesses in."""
        if belief.candidates.size <= self.max_size:
            cost, guess = self.solve(belief, self.max_guesses - depth)
            if cost < _INFEASIBLE:
                return guess
        return self.fallback.act(belief, depth)

    def ranked(self, belief: WordleBelief, k: int, depth: int = 0) -> Sequence[int]:
        """The fallback's ``k`` best guesses with this policy's own choice first."""
        choice = self.act(belief, depth)
        rest = [g for g in self.fallback.ranked(belief, k, depth) if g != choice]
        return [choice, *rest][:k]

    def solve(self, belief: WordleBelief, left: int) -> tuple[int, int]:
        """Least total guesses to finish every candidate of ``belief`` within ``left`` guesses, and a guess attaining
        it; ``(2**30, -1)`` if impossible."""
        model = self.model
        n = int(belief.candidates.size)
        if n == 1:
            return 1, int(model.answer_rows[belief.candidates[0]])
        if left <= 1:
            return _INFEASIBLE, -1
        key = (model.key(belief), left)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        legal = model.legal_guesses(belief)
        is_cand = np.zeros(model.table.shape[0], dtype=bool)
        is_cand[model.answer_rows[belief.candidates]] = True
        # Candidates first, on an (n, n) slice instead of (n, all guesses): a guess that is not a candidate finishes
        # nothing now, so its bound is 3n - m >= 2n. If a candidate already costs <= 2n, no other guess can beat it,
        # and the candidates' own order is the full order restricted to them, so the answer is the same guess.
        best = self._search(belief, left, legal[is_cand[legal]], is_cand, n)
        if best[0] > 2 * n:
            best = self._search(belief, left, legal, is_cand, n)
        self._memo[key] = best
        return best

    def _search(
        self, belief: WordleBelief, left: int, guesses: np.ndarray, is_cand: np.ndarray, n: int
    ) -> tuple[int, int]:
        """Branch and bound over ``guesses``: the least cost and the first guess (in increasing bound, candidates
        first, then list order) attaining it."""
        model = self.model
        codes = model.table_t[belief.candidates][:, guesses]  # (n, G)
        solved = (codes == model.solved).sum(axis=0)
        ordered = np.sort(codes, axis=0)
        buckets = 1 + (ordered[1:] != ordered[:-1]).sum(axis=0) - (solved > 0)
        bound = 3 * n - 2 * solved - buckets
        # Useless guesses (one bucket, nothing finished) would repeat forever; with two guesses left the next one
        # must leave only singletons (and then the bound is exact).
        keep = (solved > 0) | (buckets > 1)
        if left == 2:
            keep &= buckets == n - solved
        guesses, bound = guesses[keep], bound[keep]
        cand = is_cand[guesses]
        order = np.lexsort((guesses, ~cand, bound))
        best: tuple[int, int] = (_INFEASIBLE, -1)
        for i in order.tolist():
            if bound[i] >= best[0]:
                break
            guess = int(guesses[i])
            cost = self._guess_cost(belief, guess, left, best[0], int(bound[i]))
            if cost < best[0]:
                best = (cost, guess)
        return best

    def _guess_cost(self, belief: WordleBelief, guess: int, left: int, cutoff: int, bound: int) -> int:
        """Exact cost of ``guess`` then optimal play, or any value >= ``cutoff`` once it cannot beat it."""
        _, children = self.model.split(belief, guess)
        cost = bound
        for _, child in children:
            m = int(child.candidates.size)
            sub, _ = self.solve(child, left - 1)
            if sub >= _INFEASIBLE:
                return _INFEASIBLE
            cost += sub - (2 * m - 1)  # replace the child's lower bound by its exact value
            if cost >= cutoff:
                return cost
        return cost
