"""Epsilon-greedy exploration with one annealed epsilon per parallel actor (Ape-X style spread, AMAGO App. B)."""

from __future__ import annotations

import numpy as np


class PerActorEpsilon:
    """Epsilon of actor ``i`` after ``t`` env steps: linear from ``start`` to its own final value over ``anneal_steps``.

    Final values are spaced geometrically from ``end_low`` (actor 0) to ``end_high`` (last actor), so some actors keep
    exploring while others act almost greedily.

    Args:
        n_actors: Parallel actors (vector-env copies).
        start: Epsilon of every actor at step 0.
        end_low: Final epsilon of the least exploratory actor.
        end_high: Final epsilon of the most exploratory actor.
        anneal_steps: Env steps (all actors together) of the linear anneal.
    """

    def __init__(self, n_actors: int, start: float, end_low: float, end_high: float, anneal_steps: int) -> None:
        if not 0.0 < end_low <= end_high <= 1.0 or not 0.0 <= start <= 1.0:
            raise ValueError("need 0 < end_low <= end_high <= 1 and 0 <= start <= 1")
        self.start = start
        self.ends = np.geomspace(end_low, end_high, n_actors) if n_actors > 1 else np.array([end_low])
        self.anneal_steps = max(int(anneal_steps), 1)

    def __call__(self, env_steps: int) -> np.ndarray:
        """Epsilons ``(n_actors,)`` after ``env_steps`` collected steps."""
        frac = min(env_steps / self.anneal_steps, 1.0)
        return self.start + (self.ends - self.start) * frac
