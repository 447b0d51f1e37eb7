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
guess whose bound cannot beat the best found; each child is solved only up to what it may cost before its guess loses
(a limit passed down, with failed searches remembered as lower bounds), which keeps losing guesses shallow
(memoization and bounds are the usual ingredients of exact Wordle solvers; this code is ours).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from planning.wordle.heuristics import HeuristicPolicy
from planning.wordle.model import WordleBelief, WordleModel

_INFEASIBLE = 1 << 30


def _buckets(codes: np.ndarray) -> np.ndarray:
    """Distinct colour patterns per column of ``codes`` (candidates x guesses)."""
    ordered = np.sort(codes, axis=0)
    return 1 + (ordered[1:] != ordered[:-1]).sum(axis=0)


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
        #: Lower bounds on the cost of (belief, guesses left) states whose bounded search found nothing under them.
        self._at_least: dict[Hashable, int] = {}

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

    def solve(self, belief: WordleBelief, left: int, limit: int = _INFEASIBLE) -> tuple[int, int]:
        """Least total guesses to finish every candidate of ``belief`` within ``left`` guesses, and a guess attaining
        it; ``(2**30, -1)`` if impossible.

        With a ``limit`` below that, only costs under it are of interest: if the optimum is at least ``limit`` the
        answer is a lower bound ``>= limit`` with guess ``-1`` (and the belief is remembered as costing at least
        that). Inside the search each child gets as its limit what it may cost before its guess loses to the best
        found, so a losing guess is never solved to the end (the usual bounded depth-first search of exact solvers).
        """
        model = self.model
        n = int(belief.candidates.size)
        if n == 1:
            return 1, int(model.answer_rows[belief.candidates[0]])
        if left <= 1:
            return _INFEASIBLE, -1
        limit = min(limit, _INFEASIBLE)
        if limit <= 2 * n - 1:  # no belief of n candidates costs less than 2n - 1
            return 2 * n - 1, -1
        key = (model.key(belief), left)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        known = self._at_least.get(key, 0)
        if known >= limit:
            return known, -1
        legal = model.legal_guesses(belief)
        is_cand = np.zeros(model.table.shape[0], dtype=bool)
        is_cand[model.answer_rows[belief.candidates]] = True
        # Candidates first, on an (n, n) slice instead of (n, all guesses): a guess that is not a candidate finishes
        # nothing now, so its bound is 3n - m >= 2n. If a candidate already costs <= 2n, no other guess can beat it,
        # and the candidates' own order is the full order restricted to them, so the answer is the same guess.
        cost, guess, bound = self._search_candidates(belief, left, legal[is_cand[legal]], n, limit)
        if cost > 2 * n:
            cost, guess = self._search_others(belief, left, legal[~is_cand[legal]], n, (cost, guess, bound))
        if guess < 0 and limit < _INFEASIBLE:  # nothing under the limit: a lower bound, not the optimum
            self._at_least[key] = limit
            return limit, -1
        self._memo[key] = (cost, guess)
        self._at_least.pop(key, None)
        return cost, guess

    def _search_candidates(
        self, belief: WordleBelief, left: int, guesses: np.ndarray, n: int, limit: int
    ) -> tuple[int, int, int]:
        """Branch and bound over candidate ``guesses``: the least cost under ``limit``, the first guess (in
        increasing bound, then list order) attaining it and that guess's bound (``(limit, -1, -1)`` if none)."""
        model = self.model
        codes = model.table_t[belief.candidates][:, guesses]  # (n, G)
        solved = (codes == model.solved).sum(axis=0)
        buckets = _buckets(codes) - (solved > 0)
        bound = 3 * n - 2 * solved - buckets
        # Useless guesses (one bucket, nothing finished) would repeat forever; with two guesses left the next one
        # must leave only singletons (and then the bound is exact).
        keep = (solved > 0) | (buckets > 1)
        if left == 2:
            keep &= buckets == n - solved
        guesses, bound = guesses[keep], bound[keep]
        order = np.lexsort((guesses, bound))
        best_cost, best_guess, best_bound = limit, -1, -1
        for i in order.tolist():
            if bound[i] >= best_cost:
                break
            guess = int(guesses[i])
            cost = self._guess_cost(belief, guess, left, best_cost, int(bound[i]))
            if cost < best_cost:
                best_cost, best_guess, best_bound = cost, guess, int(bound[i])
        return best_cost, best_guess, best_bound

    def _search_others(
        self, belief: WordleBelief, left: int, guesses: np.ndarray, n: int, best: tuple[int, int, int]
    ) -> tuple[int, int]:
        """Branch and bound over the non-candidate ``guesses`` against the candidates' ``best`` (cost, guess, bound).

        The result is the one a single search over all guesses in increasing bound, candidates first among equal
        bounds, then list order, would return: a non-candidate replaces the best on a lower cost, or on an equal
        cost with a lower bound. A non-candidate's bound is 3n - m (it finishes nothing), so only guesses that split
        the candidates into more than 3n - cost buckets can win; most guesses fail that already on a few
        disjoint pairs of candidates coloured alike, which spares sorting n colours for every allowed word (the
        bulk of the time on beliefs of ~20 answers in easy mode).
        """
        model = self.model
        best_cost, best_guess, best_bound = best
        need = max(2, n if left == 2 else 3 * n - best_cost + 1)  # buckets for a bound below the best cost
        rows = model.table_t[belief.candidates]  # (n, all guesses), a contiguous gather
        slack = n - need  # a guess with m buckets leaves n - m candidates sharing one; disjoint colliding pairs <= that
        if slack < n // 2:
            half = n // 2
            # Two pairings of disjoint candidate pairs (neighbours, and i with i + n/2); a guess colouring more than
            # `slack` pairs of either alike cannot reach `need` buckets. Comparisons only, no sort, over every guess.
            alike = np.maximum(
                (rows[0 : 2 * half : 2] == rows[1 : 2 * half : 2]).sum(axis=0),
                (rows[:half] == rows[half : 2 * half]).sum(axis=0),
            )
            guesses = guesses[alike[guesses] <= slack]
        buckets = _buckets(rows[:, guesses])
        keep = buckets >= need
        guesses, bound = guesses[keep], 3 * n - buckets[keep]
        order = np.lexsort((guesses, bound))
        for i in order.tolist():
            b = int(bound[i])
            if b >= best_cost:
                break
            # An equal cost wins only with a lower bound: then the exact cost is needed, not just ">= cutoff".
            cutoff = best_cost + 1 if b < best_bound else best_cost
            guess = int(guesses[i])
            cost = self._guess_cost(belief, guess, left, cutoff, b)
            if cost < best_cost or (cost == best_cost and b < best_bound):
                best_cost, best_guess, best_bound = cost, guess, b
        return best_cost, best_guess

    def _guess_cost(self, belief: WordleBelief, guess: int, left: int, cutoff: int, bound: int) -> int:
        """Exact cost of ``guess`` then optimal play, or any value >= ``cutoff`` once it cannot beat it.

        Only the children of three or more candidates are solved: a singleton costs 1 and a pair 3 (guess one, then
        the other; with at least two guesses left, which the search guarantees: with two left it keeps only guesses
        that leave singletons), both their lower bound 2m - 1. The largest children go first, where the cost most
        often exceeds its bound, so a losing guess is cut off early; the sum does not depend on the order.
        """
        model = self.model
        candidates = belief.candidates
        groups: dict[int, list[int]] = {}
        for i, code in enumerate(model.table[guess, candidates].tolist()):  # plain Python: n <= a few dozen
            groups.setdefault(code, []).append(i)
        big = [(code, members) for code, members in groups.items() if len(members) >= 3]
        if not big:
            return bound
        big.sort(key=lambda item: -len(item[1]))  # stable: equal sizes keep their first-seen order
        cost = bound
        for code, members in big:
            child = model.child(belief, guess, code, candidates[members])  # members ascending: stays sorted
            lower = 2 * len(members) - 1
            # Past this the guess loses to the cutoff whatever the other children cost.
            sub, _ = self.solve(child, left - 1, cutoff - cost + lower)
            if sub >= _INFEASIBLE:
                return _INFEASIBLE
            cost += sub - lower  # replace the child's lower bound by its exact value
            if cost >= cutoff:
                return cost
        return cost
