"""Base heuristics for Wordle: score every legal guess by the bucket sizes it splits the candidates into.

A guess partitions the n candidates by the pattern each would produce; with bucket sizes ``b_1..b_m`` (sum n):

* ``mig`` -- maximum information gain: maximize the entropy ``-sum (b/n) log(b/n)``, i.e. minimize ``sum b log b``
  (3Blue1Brown's and Bhambri et al.'s greedy base policy);
* ``mrd`` -- most rapid decrease: minimize the expected remaining candidates ``sum b^2 / n``;
* ``gep`` -- greatest number of patterns: maximize ``m`` (the best base policy for rollout in Bhambri et al.);
* ``minimax`` -- minimize the largest bucket ``max b``.

Ties are broken toward guesses that can still be the answer (a guess that might win now dominates an equal split
that cannot), then by allowed-list order; with one or two candidates left the policy guesses a candidate, which is
optimal there. ``candidate_tiebreak=False`` drops both rules (ties by list order only, except the forced last guess),
to reproduce the plain greedy policy of the paper. Bucket statistics are vectorized over all guesses at once:
``np.bincount`` over (pattern, guess) codes for large beliefs, n vectorized comparisons for small ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from planning.wordle.model import WordleBelief, WordleModel

HEURISTICS: tuple[str, ...] = ("mig", "mrd", "gep", "minimax")

# Up to this many candidates, n vectorized comparisons beat bincount's (3**L x guesses) histogram.
_PAIRWISE_UP_TO = 24
# The perfect-split shortcut in ``act`` checks an n x n sub-table; beyond this size a full ranking is as cheap.
_SHORTCUT_UP_TO = 48


def bucket_sizes(codes: np.ndarray, n_codes: int) -> np.ndarray:
    """For every (candidate, guess), the size of the bucket the candidate lands in.

    Every heuristic is a sum or max over buckets, and a sum over buckets of ``f(b)`` equals a sum over candidates of
    ``f(b)/b``, so per-candidate bucket sizes are all the heuristics need, and they keep the candidate-major layout
    of the transposed pattern table (contiguous rows, fast to gather).

    Args:
        codes: Pattern codes, shape ``(n, G)``: n candidates against G guesses.
        n_codes: Number of possible codes (3**L).

    Returns:
        Integer array ``(n, G)``.
    """
    n, g = codes.shape
    if n <= _PAIRWISE_UP_TO:
        sizes = np.ones((n, g), dtype=np.int32)
        for i in range(n):
            for j in range(i + 1, n):
                same = codes[i] == codes[j]
                sizes[i] += same
                sizes[j] += same
        return sizes
    flat = codes.astype(np.intp)
    flat *= g
    flat += np.arange(g, dtype=np.intp)
    return np.bincount(flat.ravel(), minlength=n_codes * g)[flat]


def heuristic_scores(sizes: np.ndarray, kind: str) -> np.ndarray:
    """Score per guess (higher is better) from per-candidate bucket sizes ``(n, G)``; float64 of shape ``(G,)``.

    With b the bucket sizes: GEP = number of buckets = sum_j 1/s_j; MRD = -sum_b b^2 = -sum_j s_j; minimax =
    -max_b b = -max_j s_j; MIG = -sum_b b log b = -sum_j log s_j. Float scores are rounded to 9 decimals so that
    equal splits tie exactly whatever order their sums ran in.
    """
    if kind == "gep":
        return np.round((1.0 / sizes).sum(axis=0), 9)
    if kind == "mrd":
        return -sizes.sum(axis=0, dtype=np.int64).astype(np.float64)
    if kind == "minimax":
        return -sizes.max(axis=0).astype(np.float64)
    if kind == "mig":
        return np.round(-np.log(sizes).sum(axis=0), 9)
    raise ValueError(f"unknown heuristic {kind!r}; choose from {HEURISTICS}")


class HeuristicPolicy:
    """Greedy one-step policy: the legal guess with the best heuristic score (a :class:`RankingPolicy`).

    Args:
        model: The Wordle model.
        kind: ``mig``, ``mrd``, ``gep`` or ``minimax``.
        candidate_tiebreak: Prefer possible answers among equal scores and guess a candidate when <= 2 remain.
        last_guess: Number of guesses allowed (6); on the last one only a candidate can still win, so only candidates
            are ranked there. ``None`` ignores the limit.
    """

    def __init__(
        self, model: WordleModel, kind: str, candidate_tiebreak: bool = True, last_guess: int | None = None
    ) -> None:
        if kind not in HEURISTICS:
            raise ValueError(f"unknown heuristic {kind!r}; choose from {HEURISTICS}")
        self.model = model
        self.kind = kind
        self.candidate_tiebreak = candidate_tiebreak
        self.last_guess = last_guess
        self.depth_dependent = last_guess is not None

    def scored(self, belief: WordleBelief, only_candidates: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every legal guess (or only the candidates) with its score and whether it is a candidate, best first.

        Returns:
            ``(guesses, scores, is_candidate)``: allowed-list indices, scores and flags, each of shape ``(G,)``.
        """
        model = self.model
        pool = np.sort(model.answer_rows[belief.candidates]) if only_candidates else model.legal_guesses(belief)
        codes = model.table_t[belief.candidates]  # (n, all guesses): contiguous rows
        if pool.size < codes.shape[1]:
            codes = codes[:, pool]
        scores = heuristic_scores(bucket_sizes(codes, model.n_codes), self.kind)
        is_cand = np.zeros(len(pool), dtype=bool)
        if self.candidate_tiebreak or only_candidates:
            mask = np.zeros(model.table.shape[0], dtype=bool)
            mask[model.answer_rows[belief.candidates]] = True
            is_cand = mask[pool]
        order = np.lexsort((pool, ~is_cand, -scores))
        return pool[order], scores[order], is_cand[order]

    def ranked(self, belief: WordleBelief, k: int, depth: int = 0) -> Sequence[int]:
        """The ``k`` best legal guesses (allowed-list indices), best first, ``depth`` guesses into the game."""
        n = belief.candidates.size
        if n == 1 or (self.candidate_tiebreak and n == 2):
            rows = np.sort(self.model.answer_rows[belief.candidates])
            return [int(r) for r in rows[:k]]
        last = self.last_guess is not None and depth + 1 >= self.last_guess
        guesses, _, _ = self.scored(belief, only_candidates=last)
        return [int(g) for g in guesses[:k]]

    def act(self, belief: WordleBelief, depth: int = 0) -> int:
        """The heuristic's guess (allowed-list index) at ``belief``, ``depth`` guesses into the game."""
        n = belief.candidates.size
        if self.candidate_tiebreak and 2 < n <= _SHORTCUT_UP_TO:
            # A candidate that splits the others into singletons attains the best score any guess can (n buckets of
            # one) and wins the tie-break, so it is the answer of the full ranking, found from the n x n sub-table.
            rows = np.sort(self.model.answer_rows[belief.candidates])
            sub = np.sort(self.model.table[rows][:, belief.candidates], axis=1)
            perfect = np.all(sub[:, 1:] != sub[:, :-1], axis=1)
            if perfect.any():
                return int(rows[np.argmax(perfect)])
        return self.ranked(belief, 1, depth)[0]
