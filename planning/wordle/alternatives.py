"""Ranked alternative guesses: what :class:`planning.wordle.solver.WordleSolver` computes at a position and what the
second-move book (:mod:`planning.wordle.book`) stores, kept apart so that neither of the two imports the other's
module for it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BOOK_ALTERNATIVES", "Alternative"]

#: Alternatives stored per second-move reply in :mod:`planning.wordle.book`.
BOOK_ALTERNATIVES = 10


@dataclass
class Alternative:
    """A guess the assistant could suggest, with its exact expected guesses (this one included) under the policy."""

    word: str
    expected: float
    could_win: bool
    overruns: int = 0
