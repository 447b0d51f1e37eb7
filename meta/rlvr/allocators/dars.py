"""DARS: difficulty-adaptive rollout sampling (Yang et al. 2025, "Depth-Breadth Synergy in RLVR", §4).

Stage 1 samples ``N`` responses per prompt and measures accuracy ``a``. Hard prompts (``a < 0.5``; ``a = 0`` is read as
``0.5/N``, one half-success) get a second stage of ``ΔN`` extra responses, chosen so that the prompt's *cumulative
advantage magnitude* reaches a target. For binary rewards a group of ``n`` responses at accuracy ``a`` has

* ``Σ|A| = n · 2√(a(1−a))`` with GRPO's std normalisation, and
* ``Σ|A| = n · 2a(1−a)`` without it (Dr. GRPO).

Schedules (``c(a)`` is the per-response factor above; ``C* = N·c(0.5)`` is a medium prompt's total):

* equal-treatment (``"et"``): reach ``C*``: ``n = N·c(0.5)/c(a)``;
* hardness-weighted (``"hw"``): reach ``2(1−a)·C*`` (equal to ``C*`` at ``a = 0.5``, twice that at ``a = 0``), so
  harder prompts get proportionally more: ``n = 2(1−a)·N·c(0.5)/c(a)``. (This weighting is rolloutlab's reading of
  the paper's hardness-weighted rule.)

Then ``ΔN = min(⌈n⌉, N_max) − N`` (never negative).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from meta.rlvr.allocators.base import Allocator
from meta.rlvr.allocators.stats import StatsTable


def cumulative_advantage_factor(accuracy: float, std_normalized: bool = True) -> float:
    """Per-response ``|A|`` of a binary-reward group at ``accuracy``: ``2√(a(1−a))`` or ``2a(1−a)``."""
    var = accuracy * (1.0 - accuracy)
    return 2.0 * math.sqrt(var) if std_normalized else 2.0 * var


class DARS(Allocator):
    """Two-stage DARS allocator.

    Args:
        base: ``N``, stage-1 responses per prompt.
        max_total: ``N_max``, the cap on a prompt's total responses (>= ``N``).
        schedule: ``"et"`` (equal treatment) or ``"hw"`` (hardness weighted).
        std_normalized: Whether the trainer divides advantages by the group std (GRPO) or not (Dr. GRPO).
    """

    name = "dars"
    max_stages = 2

    def __init__(self, base: int = 4, max_total: int = 16, schedule: str = "et", std_normalized: bool = True) -> None:
        if base < 1 or max_total < base:
            raise ValueError(f"need 1 <= N <= N_max, got N={base}, N_max={max_total}")
        if schedule not in ("et", "hw"):
            raise ValueError(f"schedule must be 'et' or 'hw', got {schedule!r}")
        self.base = int(base)
        self.max_total = int(max_total)
        self.schedule = schedule
        self.std_normalized = bool(std_normalized)

    def initial(self, keys: Sequence[str], stats: StatsTable) -> list[int]:
        return [self.base] * len(keys)

    def extra_for(self, accuracy: float) -> int:
        """``ΔN`` for a prompt whose stage-1 accuracy over ``N`` responses was ``accuracy``."""
        if accuracy >= 0.5:
            return 0
        a = accuracy if accuracy > 0 else 0.5 / self.base
        target = self.base * cumulative_advantage_factor(0.5, self.std_normalized)
        if self.schedule == "hw":
            target *= 2.0 * (1.0 - a)
        total = target / cumulative_advantage_factor(a, self.std_normalized)
        # Round before ceil so float noise (e.g. 4.000000001) does not add a response.
        return max(0, min(math.ceil(round(total, 9)), self.max_total) - self.base)

    def extra(self, keys: Sequence[str], rewards: Sequence[Sequence[float]], stage: int) -> list[int]:
        if stage != 1:
            return [0] * len(keys)
        return [self.extra_for(sum(g) / len(g)) if g else 0 for g in rewards]
