"""Per-prompt rollout allocators: how many responses each prompt of a GRPO step gets, possibly in stages.

The problem they address: with binary verifiable rewards a group whose responses are all right or all wrong has zero
group-normalised advantage (Shao et al. 2024, GRPO, eq. 3), so its rollouts cost tokens and teach nothing.

An allocator is a :class:`meta.control.protocol.Controller`. A trainer drives it through three calls per step:

1. :meth:`Allocator.initial` — first-stage counts ``n_i`` for the batch's prompts, from the :class:`StatsTable`;
2. :meth:`Allocator.extra` — after each stage, more responses per prompt given the rewards seen so far this step
   (all zeros ends the step; at most :attr:`Allocator.max_stages` stages);
3. :meth:`Allocator.keep` — which groups enter the loss (DAPO drops zero-variance groups; the rest keep all).

``refill`` (DAPO dynamic sampling) asks the trainer to draw fresh prompts until the batch is full of kept groups.
``decide(feedback)`` wraps the first two for the generic controller protocol. Everything is plain Python; no torch.

The staged / budgeted methods live beside this file (:mod:`.ar3po`, :mod:`.dars`, :mod:`.dars_breadth`, :mod:`.e3`,
:mod:`.knapsack`); :func:`meta.rlvr.allocators.make_allocator` (:mod:`.specs`) builds any of them from a spec string.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from meta.control.protocol import Controller, Feedback
from meta.rlvr.allocators.stats import StatsTable


def is_mixed(rewards: Sequence[float]) -> bool:
    """Whether a group has a non-zero reward spread (at least two distinct rewards), i.e. a GRPO signal."""
    return len(rewards) > 1 and max(rewards) > min(rewards)


class Allocator(Controller):
    """Base allocator: uniform ``group_size`` responses per prompt, one stage, keep every group.

    Attributes:
        name: Short name used in logs and results.
        max_stages: Upper bound on stages per step (the trainer stops after this many even if ``extra`` asks more).
        refill: If true the trainer replaces dropped groups by fresh prompts (DAPO dynamic sampling).
    """

    name = "base"
    max_stages = 1
    refill = False

    def initial(self, keys: Sequence[str], stats: StatsTable) -> list[int]:
        """First-stage response counts, one per prompt (each ``>= 0``)."""
        raise NotImplementedError

    def extra(self, keys: Sequence[str], rewards: Sequence[Sequence[float]], stage: int) -> list[int]:
        """Additional responses per prompt after ``stage`` completed stages (1-based); zeros end the step.

        Args:
            keys: Prompt keys of the step, in batch order.
            rewards: Rewards collected so far this step, one list per prompt.
            stage: Number of stages already run (1 after the first).
        """
        return [0] * len(keys)

    def keep(self, rewards: Sequence[Sequence[float]]) -> list[bool]:
        """Which groups enter the loss; default: every group with at least one response."""
        return [len(r) > 0 for r in rewards]

    def end_epoch(self) -> None:
        """Hook called by the trainer after each pass over its prompt pool (E3 widens its bounds here)."""

    def decide(self, feedback: Feedback) -> list[int]:
        """Controller protocol: ``feedback`` has ``keys`` and either ``stats`` (first stage) or ``rewards`` and
        ``stage`` (later stages); returns the counts."""
        keys = list(feedback["keys"])
        if "rewards" in feedback:
            return self.extra(keys, feedback["rewards"], int(feedback.get("stage", 1)))
        stats = feedback.get("stats")
        return self.initial(keys, stats if stats is not None else StatsTable())

    def describe(self) -> dict[str, Any]:
        """The allocator's name and settings, for result files."""
        return {"name": self.name, **{k: v for k, v in vars(self).items() if not k.startswith("_")}}


class Uniform(Allocator):
    """GRPO baseline: every prompt gets the same ``group_size`` G responses (Shao et al. 2024)."""

    name = "uniform"

    def __init__(self, group_size: int = 8) -> None:
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        self.group_size = int(group_size)

    def initial(self, keys: Sequence[str], stats: StatsTable) -> list[int]:
        return [self.group_size] * len(keys)


class DynamicSampling(Uniform):
    """DAPO dynamic sampling (Yu et al. 2025, DAPO, eq. 11 constraint ``0 < |{o_i correct}| < G``).

    Sample G per prompt, drop groups whose accuracy is 0 or 1, and let the trainer draw fresh prompts (``refill``) until
    the batch holds the wanted number of mixed groups or ``max_rounds`` refills were made. The dropped groups' tokens
    are still paid for; that is the cost this baseline makes visible.
    """

    name = "dapo"
    refill = True

    def __init__(self, group_size: int = 8, max_rounds: int = 3) -> None:
        super().__init__(group_size)
        if max_rounds < 0:
            raise ValueError(f"max_rounds must be >= 0, got {max_rounds}")
        self.max_rounds = int(max_rounds)

    def keep(self, rewards: Sequence[Sequence[float]]) -> list[bool]:
        return [is_mixed(r) for r in rewards]
