"""Exact evaluation of a configured solver over every answer, as a JSON-ready record (``rolloutlab wordle bench``)."""

from __future__ import annotations

import time
from typing import Any

from planning.wordle.solver import SolverConfig, WordleSolver

#: Keys every evaluation record has; ``run_benchmark`` adds more.
REQUIRED_KEYS: tuple[str, ...] = (
    "mode",
    "policy",
    "heuristic",
    "top_k",
    "opener",
    "answers",
    "total",
    "mean",
    "max",
    "failures",
    "distribution",
    "seconds",
)


def run_benchmark(config: SolverConfig, show_progress: bool = False) -> dict[str, Any]:
    """Evaluate ``config`` over every answer (``show_progress``: a progress bar over the openers of ``auto``).

    Returns:
        A record with at least ``mode, policy, heuristic, top_k, opener, answers, total, mean, max, failures,
        distribution, seconds`` (``seconds``: wall clock including list and table loading), plus the resolved config,
        table timing and the opener search when ``opener="auto"``.
    """
    start = time.perf_counter()
    solver = WordleSolver(config)
    solver.show_progress = show_progress
    result = solver.evaluate()
    seconds = time.perf_counter() - start
    return {
        "mode": config.mode,
        "policy": config.policy,
        "heuristic": config.heuristic,
        "top_k": config.top_k if config.policy == "rollout" else None,
        "opener": result.opener,
        "opener_requested": config.opener,
        "answers": result.answers,
        "total": result.total,
        "mean": round(result.mean, 6),
        "max": result.max,
        "failures": result.failures,
        "distribution": {str(k): v for k, v in sorted(result.distribution.items())},
        "seconds": round(seconds, 3),
        "eval_seconds": round(result.seconds, 3),
        "table_seconds": round(solver.table_load.seconds, 3),
        "table_built": solver.table_load.built,
        "lists": solver.lists.name,
        "guesses": config.guesses,
        "candidate_tiebreak": config.candidate_tiebreak,
        "max_guesses": config.max_guesses,
        "widen_k": config.widen_k if config.policy == "rollout" else None,
        "exact_up_to": config.exact_up_to,
        "beliefs_evaluated": len(solver.evaluator) + (len(solver.base_evaluator) if solver.rollout is not None else 0),
        "opener_search": result.opener_search,
        "config": solver.describe(),
    }
