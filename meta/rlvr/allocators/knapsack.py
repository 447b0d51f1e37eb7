"""Knapsack-style rollout budget (after Li et al. 2025, "Knapsack RL: Unlocking Exploration of LLMs via Optimizing
Budget Allocation", §3).

Each prompt is an item whose value is the probability that its group is *mixed* (has a non-zero GRPO advantage):

``P_mixed(n; p) = 1 − pⁿ − (1 − p)ⁿ``,

with ``p`` the prompt's Beta-posterior solve rate. Counts maximise ``Σ_i P_mixed(n_i; p_i)`` subject to
``Σ_i n_i = B`` and ``n_min ≤ n_i ≤ n_max``. ``P_mixed`` is zero at ``n = 0`` and ``n = 1`` and concave from there,
so greedy marginal allocation is not exact; the solver here is an exact dynamic programme over the budget
(``O(batch · B · n_max)``, milliseconds at GRPO batch sizes).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from meta.rlvr.allocators.base import Allocator
from meta.rlvr.allocators.stats import StatsTable


def p_mixed(n: int | np.ndarray, p: float) -> np.ndarray:
    """``1 − pⁿ − (1−p)ⁿ`` (0 for ``n < 2``), elementwise over ``n``."""
    n_arr = np.asarray(n, dtype=float)
    value = 1.0 - p**n_arr - (1.0 - p) ** n_arr
    return np.where(n_arr < 2, 0.0, value)


def solve_knapsack(probs: Sequence[float], budget: int, n_max: int, n_min: int = 0) -> list[int]:
    """Exact maximiser of ``Σ P_mixed(n_i; p_i)`` with ``Σ n_i = budget`` (or the most the caps allow).

    Ties go to the smallest count for the earliest prompt, so the answer is deterministic.

    Args:
        probs: Solve-rate estimate per prompt, in [0, 1].
        budget: Total responses ``B >= 0``.
        n_max: Cap per prompt.
        n_min: Floor per prompt (lowered to what the budget allows).

    Returns:
        One count per prompt.
    """
    batch = len(probs)
    if batch == 0:
        return []
    if budget < 0 or n_max < 0:
        raise ValueError("budget and n_max must be >= 0")
    n_min = min(n_min, n_max, budget // batch)
    total = min(budget, n_max * batch)
    spare = total - n_min * batch  # what the DP distributes on top of the floors
    width = n_max - n_min
    neg = -np.inf
    dp = np.full(spare + 1, neg)
    dp[0] = 0.0
    choices = np.zeros((batch, spare + 1), dtype=np.int64)
    extra = np.arange(width + 1)
    for i, p in enumerate(probs):
        values = p_mixed(n_min + extra, float(p))
        # cand[b, x] = dp[b − x] + value(x): the best total for budget b if this prompt takes x extra responses.
        b_idx = np.arange(spare + 1)[:, None] - extra[None, :]
        cand = np.where(b_idx >= 0, dp[np.clip(b_idx, 0, None)] + values[None, :], neg)
        # Round before argmax so float noise cannot break ties unpredictably.
        choices[i] = np.argmax(np.round(cand, 12), axis=1)
        dp = cand.max(axis=1)
    counts = [0] * batch
    b = spare
    for i in range(batch - 1, -1, -1):
        x = int(choices[i, b])
        counts[i] = n_min + x
        b -= x
    return counts


class Knapsack(Allocator):
    """Allocate ``budget_per_prompt · batch`` responses to maximise the expected number of mixed groups.

    Args:
        budget_per_prompt: ``B / batch`` (the uniform G to match in total).
        n_max: Cap per prompt.
        n_min: Floor per prompt (2 keeps every prompt minimally explored).
    """

    name = "knapsack"

    def __init__(self, budget_per_prompt: int = 8, n_max: int = 32, n_min: int = 0) -> None:
        if budget_per_prompt < 0 or n_max < 1 or not 0 <= n_min <= n_max:
            raise ValueError(f"invalid knapsack bounds: budget {budget_per_prompt}, n_min {n_min}, n_max {n_max}")
        self.budget_per_prompt = int(budget_per_prompt)
        self.n_max = int(n_max)
        self.n_min = int(n_min)

    def initial(self, keys: Sequence[str], stats: StatsTable) -> list[int]:
        probs = [stats.posterior_mean(k) for k in keys]
        return solve_knapsack(probs, self.budget_per_prompt * len(keys), self.n_max, self.n_min)
