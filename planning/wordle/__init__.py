"""Wordle as a POMDP: cached pattern table, base heuristics, rollout, exact evaluation, assistant and CLI.

Modules: ``table`` (feedback codes of every guess against every answer, cached on disk), ``model`` (beliefs as
candidate sets), ``heuristics`` (MIG, MRD, GEP, minimax), ``exact`` (optimal play on small beliefs), ``solver``
(greedy / rollout policies, exact evaluation), ``alternatives`` (the ranked guesses the solver offers), ``book`` (the
cached second-move replies), ``cache`` (listing and clearing the cached files), ``assistant`` (the interactive
helper), ``bench`` and ``cli``. The game rules and the word lists are the ground floor, :mod:`envs.wordle_rules`
(lists in ``envs/wordle_data/``); the gymnasium env is :mod:`envs.wordle`.

The names below load on first use (PEP 562), so ``import planning.wordle`` reads no word list or pattern table::

    from planning.wordle import SolverConfig, WordleSolver, feedback

    solver = WordleSolver(SolverConfig(mode="easy"))  # builds or loads the cached pattern table
    feedback("salet", "crane")  # (0, 1, 0, 1, 0): 0 grey, 1 yellow, 2 green
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rolloutlab.lazy import lazy_getattr

if TYPE_CHECKING:
    from envs.wordle_rules import feedback, load_word_lists
    from planning.wordle.alternatives import Alternative
    from planning.wordle.assistant import Assistant, parse_colours
    from planning.wordle.solver import SolverConfig, WordleSolver

_HOMES = {
    "Alternative": "planning.wordle.alternatives",
    "Assistant": "planning.wordle.assistant",
    "SolverConfig": "planning.wordle.solver",
    "WordleSolver": "planning.wordle.solver",
    "feedback": "envs.wordle_rules",
    "load_word_lists": "envs.wordle_rules",
    "parse_colours": "planning.wordle.assistant",
}

__all__ = ["Alternative", "Assistant", "SolverConfig", "WordleSolver", "feedback", "load_word_lists", "parse_colours"]


__getattr__ = lazy_getattr(__name__, _HOMES)
