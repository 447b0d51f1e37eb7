"""The TRL adapter's own metrics, logged beside TRL's where TRL's count nominal rows.

TRL sizes its speed metrics by the rows its loader hands over (``train_samples_per_second`` counts
``max_steps x per_device_train_batch_size``) and averages ``reward`` over the batch's rows. Under an adaptive allocator
neither is what happened: fewer (or more) rows are generated and trained, and a prompt with more responses weighs more
in a row average. The adapter therefore logs, per step (beside its ``ledger/step_*`` counts of rows and tokens
generated and trained):

* ``rlvr/reward_per_prompt``: the mean over the batch's groups of each group's mean reward (the rows TRL's
  ``reward`` averages, each prompt counted once);
* ``rlvr/stages``: the generation calls the step made (stages, over every refill round);
* ``rlvr/rollout_seconds`` and ``rlvr/stage_seconds``: wall time of the step's generation and scoring, in all and per
  stage call;
* ``rlvr/rows_cut``: responses the allocator asked for beyond the step's row budget and did not get;

and at the end of ``train()``, beside TRL's ``train_samples_per_second``: ``train_rows_per_second`` (rows trained),
``train_responses_per_second`` (responses generated) and ``train_generated_tokens_per_second``, all over
``train_runtime`` and counted in this ``train()`` call only (a resumed run counts from its resume).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field


def per_prompt_mean(rewards: Sequence[float], group_sizes: Sequence[int]) -> float:
    """Mean over groups of each group's mean reward; NaN rewards (unscorable rows) are skipped.

    Args:
        rewards: One reward per row, groups contiguous in batch order.
        group_sizes: Rows per group (summing to ``len(rewards)``).

    Returns:
        The unweighted per-prompt mean (NaN if no group has a scored row).

    Raises:
        ValueError: the group sizes do not cover the rewards.
    """
    if sum(group_sizes) != len(rewards):
        raise ValueError(f"group sizes sum to {sum(group_sizes)}, not the {len(rewards)} rewards")
    means = []
    start = 0
    for size in group_sizes:
        scored = [r for r in rewards[start : start + size] if not math.isnan(r)]
        start += size
        if scored:
            means.append(sum(scored) / len(scored))
    return sum(means) / len(means) if means else float("nan")


@dataclass
class StepClock:
    """The stage calls of one training step: how many, how long, and how many responses the row budget cut."""

    stage_seconds: list[float] = field(default_factory=list)
    rows_cut: int = 0

    def metrics(self) -> dict[str, float]:
        """``rlvr/stages``, ``rlvr/rollout_seconds``, ``rlvr/stage_seconds`` (mean per stage) and ``rlvr/rows_cut``."""
        total = float(sum(self.stage_seconds))
        stages = len(self.stage_seconds)
        return {
            "rlvr/stages": float(stages),
            "rlvr/rollout_seconds": total,
            "rlvr/stage_seconds": total / stages if stages else 0.0,
            "rlvr/rows_cut": float(self.rows_cut),
        }


@dataclass
class SessionCount:
    """Rows and tokens of one ``train()`` call (not checkpointed: speeds are per session)."""

    rows_trained: int = 0
    responses: int = 0
    completion_tokens: int = 0

    def add(self, step: dict[str, int]) -> None:
        """Add one step's ledger increase (:meth:`CostLedger.since`)."""
        self.rows_trained += int(step["rows_trained"])
        self.responses += int(step["responses"])
        self.completion_tokens += int(step["completion_tokens"])

    def speeds(self, runtime: float) -> dict[str, float]:
        """Real throughput over ``runtime`` seconds, named beside TRL's ``train_samples_per_second``."""
        seconds = max(float(runtime), 1e-9)
        return {
            "train_rows_per_second": round(self.rows_trained / seconds, 3),
            "train_responses_per_second": round(self.responses / seconds, 3),
            "train_generated_tokens_per_second": round(self.completion_tokens / seconds, 3),
        }
