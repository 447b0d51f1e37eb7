"""Wordle as a :class:`planning.rollout.BeliefModel`: beliefs are candidate-answer sets (plus hard-mode hints).

A belief holds the indices (into the answer list) of the answers still consistent with every feedback seen, sorted,
and, in hard mode, the :class:`envs.wordle_rules.HardHints` that restrict the next guess. In hard mode two histories
with the same candidates can allow different guesses, so the hints are part of the belief's identity.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from envs.wordle_rules import HardHints, WordLists, decode_pattern, letter_counts, solved_code, words_to_array


@dataclass(frozen=True, eq=False)
class WordleBelief:
    """Candidates (answer indices, sorted int32 array) and, in hard mode, the hints every guess must respect."""

    candidates: np.ndarray
    hints: HardHints | None = None


class WordleModel:
    """The deterministic Wordle POMDP over a pattern table.

    Args:
        lists: The word lists.
        table: Pattern codes, shape ``(len(allowed), len(answers))`` (see :mod:`planning.wordle.table`).
        hard: Apply the NYT hard-mode rule.
        guess_pool: Allowed-list indices the planner may guess (default: every allowed word). Restricting it to the
            answers (``lists.answer_rows()``) is the "candidate guess set" variant of the rollout literature.
    """

    def __init__(
        self, lists: WordLists, table: np.ndarray, hard: bool = False, guess_pool: np.ndarray | None = None
    ) -> None:
        self.lists = lists
        self.table = table
        # Candidate-major copy: gathering a belief's rows is a contiguous copy, ~10x faster than gathering columns.
        self.table_t = np.ascontiguousarray(table.T)
        self.hard = hard
        self.answer_rows = lists.answer_rows()
        self.guess_pool = np.arange(len(lists.allowed)) if guess_pool is None else np.asarray(guess_pool, np.int64)
        self.solved = solved_code(lists.length)
        self.n_codes = 3**lists.length
        letters = words_to_array(lists.allowed)
        self._pool_letters = letters[self.guess_pool]
        self._pool_counts = letter_counts(letters)[self.guess_pool]
        self._legal: dict[HardHints, np.ndarray] = {}
        self._hints_memo: dict[tuple[HardHints, str, int], HardHints] = {}
        # The answer index of each allowed word, or -1.
        self.answer_of = np.full(len(lists.allowed), -1, dtype=np.int64)
        self.answer_of[self.answer_rows] = np.arange(len(lists.answers))

    def root(self, candidates: np.ndarray | None = None) -> WordleBelief:
        """The belief before any guess: every answer (or the given answer indices)."""
        cands = np.arange(len(self.lists.answers)) if candidates is None else np.sort(np.asarray(candidates))
        return WordleBelief(cands.astype(np.int32), HardHints.empty(self.lists.length) if self.hard else None)

    def key(self, belief: WordleBelief) -> Hashable:
        return (belief.candidates.tobytes(), belief.hints)

    def size(self, belief: WordleBelief) -> int:
        return int(belief.candidates.size)

    def legal_guesses(self, belief: WordleBelief) -> np.ndarray:
        """Allowed-list indices the planner may guess at ``belief`` (the pool, filtered by hard-mode hints)."""
        if belief.hints is None:
            return self.guess_pool
        legal = self._legal.get(belief.hints)
        if legal is None:  # many beliefs share their hints (same guesses, same colours): filter once per hints
            legal = self.guess_pool[belief.hints.mask(self._pool_letters, self._pool_counts)]
            self._legal[belief.hints] = legal
        return legal

    def split(self, belief: WordleBelief, guess: int) -> tuple[int, list[tuple[int, WordleBelief]]]:
        """Candidates finished by ``guess`` and the (pattern code, child belief) of every other observed pattern."""
        codes = self.table[guess, belief.candidates]
        order = np.argsort(codes, kind="stable")  # stable: children stay sorted by answer index
        sorted_codes = codes[order]
        starts = (np.flatnonzero(sorted_codes[1:] != sorted_codes[:-1]) + 1).tolist()
        finished = 0
        children = []
        for s, e in zip([0, *starts], [*starts, len(codes)], strict=True):
            code = int(sorted_codes[s])
            if code == self.solved:
                finished = e - s
                continue
            children.append((code, self.child(belief, guess, code, belief.candidates[order[s:e]])))
        return int(finished), children

    def child(self, belief: WordleBelief, guess: int, code: int, candidates: np.ndarray) -> WordleBelief:
        """The child of ``belief`` after ``guess`` showed ``code``, given its ``candidates`` (sorted answer indices)."""
        hints = None if belief.hints is None else self._next_hints(belief.hints, self.lists.allowed[guess], code)
        return WordleBelief(candidates, hints)

    def _next_hints(self, hints: HardHints, guess: str, code: int) -> HardHints:
        key = (hints, guess, code)
        out = self._hints_memo.get(key)
        if out is None:
            out = self._hints_memo[key] = hints.update(guess, decode_pattern(code, self.lists.length))
        return out

    def step(self, belief: WordleBelief, action: int) -> tuple[int, list[WordleBelief]]:
        finished, children = self.split(belief, action)
        return finished, [child for _, child in children]

    def observe(self, belief: WordleBelief, guess: int, code: int) -> WordleBelief:
        """The belief after ``guess`` was answered with pattern ``code`` (possibly with no candidates left)."""
        return self.child(belief, guess, code, belief.candidates[self.table[guess, belief.candidates] == code])
