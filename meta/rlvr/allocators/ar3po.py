"""AR3PO adaptive rollout (Zhang et al. 2025, "Improving Sampling Efficiency in RLVR through Adaptive Rollout and
Response Reuse", §3.1-3.2).

Rollout proceeds in stages: every still-active prompt receives ``k`` responses per stage; a prompt leaves the active
set as soon as one of its responses is verified correct; after at most ``S`` stages the step ends. Easy prompts thus
cost ``k`` responses, hard ones up to ``k·S``. Prompts that end all-wrong can be rescued by **response reuse**
(:mod:`meta.rlvr.allocators.reuse`): an earlier verified-correct response to the same prompt is injected into the group
so it has a non-zero advantage; the trainer counts injected responses apart from generated ones.
"""

from __future__ import annotations

from collections.abc import Sequence

from meta.rlvr.allocators.base import Allocator
from meta.rlvr.allocators.stats import StatsTable


class AR3PO(Allocator):
    """Staged adaptive rollout.

    Args:
        stage_size: ``k``, responses per active prompt per stage (>= 1).
        max_stages: ``S``, the most stages per step (>= 1).
        reuse: Whether the trainer should inject buffered correct responses into all-wrong groups.
        success_threshold: A response with reward ``>=`` this is "correct".
    """

    name = "ar3po"

    def __init__(self, stage_size: int = 2, max_stages: int = 4, reuse: bool = True, success_threshold: float = 0.5):
        if stage_size < 1 or max_stages < 1:
            raise ValueError(f"need stage_size >= 1 and max_stages >= 1, got {stage_size}, {max_stages}")
        self.stage_size = int(stage_size)
        self.max_stages = int(max_stages)
        self.reuse = bool(reuse)
        self.success_threshold = float(success_threshold)

    def initial(self, keys: Sequence[str], stats: StatsTable) -> list[int]:
        return [self.stage_size] * len(keys)

    def extra(self, keys: Sequence[str], rewards: Sequence[Sequence[float]], stage: int) -> list[int]:
        if stage >= self.max_stages:
            return [0] * len(keys)
        return [0 if any(r >= self.success_threshold for r in group) else self.stage_size for group in rewards]
