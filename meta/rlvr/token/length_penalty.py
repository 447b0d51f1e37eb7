"""ALP: adaptive length penalty (Xiang et al. 2025, "Just Enough Thinking: Efficient Reasoning with Adaptive Length
Penalties", eq. 2).

The reward of response ``y`` to a prompt whose online solve rate is ``p̂`` (estimated from the ``K`` rollouts of the
step) becomes

``r' = r − β/N · max(p̂, 1/K) · |y|``,

with ``|y|`` the response length in tokens and ``N`` a length normaliser (the maximum completion length). Prompts the
model already solves pay the full penalty for verbosity; prompts it rarely solves pay almost none, so hard prompts
keep their budget to think.
"""

from __future__ import annotations

from collections.abc import Sequence

from meta.control import Controller, Feedback


class AdaptiveLengthPenalty(Controller):
    """Per-prompt length-penalty weight and reward shaping.

    Args:
        beta: ``β >= 0``.
        max_length: ``N > 0``, the normaliser (tokens).
        success_threshold: A reward ``>=`` this counts as solved when estimating ``p̂`` from rewards.
    """

    def __init__(self, beta: float = 0.05, max_length: int = 16, success_threshold: float = 0.5) -> None:
        if beta < 0 or max_length <= 0:
            raise ValueError(f"need beta >= 0 and max_length > 0, got {beta}, {max_length}")
        self.beta = float(beta)
        self.max_length = int(max_length)
        self.success_threshold = float(success_threshold)

    def weight(self, solve_rate: float, group_size: int) -> float:
        """Penalty per token: ``β/N · max(p̂, 1/K)``."""
        return self.beta / self.max_length * max(solve_rate, 1.0 / max(group_size, 1))

    def shape(self, rewards: Sequence[float], lengths: Sequence[int], solve_rate: float | None = None) -> list[float]:
        """Penalised rewards of one group; ``p̂`` defaults to the group's own success fraction."""
        if len(rewards) != len(lengths):
            raise ValueError("rewards and lengths must have the same length")
        if not rewards:
            return []
        if solve_rate is None:
            solve_rate = sum(r >= self.success_threshold for r in rewards) / len(rewards)
        w = self.weight(solve_rate, len(rewards))
        return [float(r) - w * float(n) for r, n in zip(rewards, lengths, strict=True)]

    def decide(self, feedback: Feedback) -> list[float]:
        """Controller protocol: ``feedback`` has ``rewards``, ``lengths`` and optionally ``solve_rate``."""
        return self.shape(feedback["rewards"], feedback["lengths"], feedback.get("solve_rate"))
