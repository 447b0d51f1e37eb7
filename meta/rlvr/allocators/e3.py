"""E3 rollout budget (Liao et al. 2025, "Enhancing Efficiency and Exploration in RL for LLMs", §3.2).

Prompts of a batch are ranked by mean reward, easiest first (``rank = 1``) to hardest (``rank = batch``), and the
step's budget ``B`` (the uniform total ``G·batch``) is shared as

``n_i = n_min + ⌊(B − n_min·batch) · rank_i / Σ_j rank_j⌋``, capped at ``n_max``,

with the remainder handed out one response at a time from the hardest prompt down (skipping prompts at ``n_max``).
The total therefore equals the uniform total by construction, unless every prompt hits ``n_max``. After each epoch
``n_min ← max(n_low, n_min − Δ)`` and ``n_max ← min(n_high, n_max + Δ)``: the allocation widens as estimates firm up.
"""

from __future__ import annotations

from collections.abc import Sequence

from meta.rlvr.allocators.base import Allocator
from meta.rlvr.allocators.stats import StatsTable


class E3Budget(Allocator):
    """Rank-proportional budget allocation.

    Args:
        n_min: Smallest count per prompt (initial).
        n_max: Largest count per prompt (initial).
        budget_per_prompt: ``B / batch``; the uniform G this allocator must match in total.
        delta: ``Δ``, widening per epoch.
        n_low: Floor for ``n_min``.
        n_high: Ceiling for ``n_max``.
    """

    name = "e3"

    def __init__(
        self,
        n_min: int = 4,
        n_max: int = 12,
        budget_per_prompt: int = 8,
        delta: int = 2,
        n_low: int = 2,
        n_high: int = 16,
    ) -> None:
        if not 0 <= n_low <= n_min <= n_max <= n_high:
            raise ValueError(f"need 0 <= n_low <= n_min <= n_max <= n_high, got {n_low}, {n_min}, {n_max}, {n_high}")
        if budget_per_prompt < 0 or delta < 0:
            raise ValueError("budget_per_prompt and delta must be >= 0")
        self.n_min = int(n_min)
        self.n_max = int(n_max)
        self.budget_per_prompt = int(budget_per_prompt)
        self.delta = int(delta)
        self.n_low = int(n_low)
        self.n_high = int(n_high)

    def allocate(self, mean_rewards: Sequence[float], budget: int) -> list[int]:
        """Counts for prompts with the given mean rewards sharing ``budget`` responses (hand-checkable core)."""
        batch = len(mean_rewards)
        if batch == 0:
            return []
        # Easiest (highest mean reward) first; ties keep batch order, so the later prompt counts as harder.
        order = sorted(range(batch), key=lambda i: (-mean_rewards[i], i))
        rank = [0] * batch
        for position, i in enumerate(order):
            rank[i] = position + 1
        n_min = min(self.n_min, budget // batch)  # a budget below n_min·batch lowers the floor
        spare = budget - n_min * batch
        rank_sum = batch * (batch + 1) // 2
        counts = [min(self.n_max, n_min + (spare * rank[i]) // rank_sum) for i in range(batch)]
        remainder = budget - sum(counts)
        hardest_first = order[::-1]
        while remainder > 0:
            given = False
            for i in hardest_first:
                if remainder == 0:
                    break
                if counts[i] < self.n_max:
                    counts[i] += 1
                    remainder -= 1
                    given = True
            if not given:
                break
        return counts

    def initial(self, keys: Sequence[str], stats: StatsTable) -> list[int]:
        return self.allocate([stats.solve_rate(k) for k in keys], self.budget_per_prompt * len(keys))

    def end_epoch(self) -> None:
        self.n_min = max(self.n_low, self.n_min - self.delta)
        self.n_max = min(self.n_high, self.n_max + self.delta)

    def state_dict(self) -> dict[str, int]:
        return {"n_min": self.n_min, "n_max": self.n_max}
