"""``AdaptiveRolloutConfig``: TRL's ``GRPOConfig`` plus the fields that switch on rolloutlab's adaptive rollouts.

The documented way to use the adapter: the rollout settings live in the config beside TRL's own, as TRL's trainers
expect, and :class:`meta.rlvr.trl.AllocatingGRPOTrainer` reads them::

    config = AdaptiveRolloutConfig(output_dir="runs/grpo", allocator="ar3po:2,4", correctness_reward="exact_match",
                                   per_device_train_batch_size=64, num_generations=8)
    trainer = AllocatingGRPOTrainer(model=model, reward_funcs=[exact_match], args=config, train_dataset=dataset,
                                    processing_class=tokenizer)

The trainer's keyword arguments of the same names remain for objects a string cannot name (a custom
:class:`~meta.rlvr.allocators.Allocator`); setting one in both places is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from meta.rlvr.allocators import Allocator, make_allocator
from meta.rlvr.trl_internals import GRPOConfig

#: Responses kept per prompt for AR3PO's reuse when neither the config nor the trainer sets it.
DEFAULT_REUSE_CAPACITY = 4


@dataclass
class AdaptiveRolloutConfig(GRPOConfig):
    """``GRPOConfig`` with rolloutlab's rollout allocation (every TRL field keeps its meaning and default, except
    ``steps_per_generation``, which defaults to 1).

    Args:
        allocator: Allocator spec (:func:`meta.rlvr.allocators.make_allocator`): ``uniform:8`` is plain GRPO,
            ``ar3po:2,4``, ``dars:4,16``, ``knapsack:8,32``, ``e3:4,12``, ``dapo:8,3``. A uniform G must equal
            ``num_generations``.
        correctness_reward: Name of the reward function (its ``__name__``) whose value says right or wrong; it drives
            the prompt statistics, the allocator's stages and response reuse. Default: the first reward function.
        reuse_capacity: Correct responses kept per prompt for reuse (allocators with ``reuse``, e.g. AR3PO).
        max_rows_per_step: Opt-in ceiling on the rows one step generates per stage call and trains, above
            ``per_device_train_batch_size``; ``None`` keeps the rows the user configured
            (``per_device_train_batch_size``), and an allocator that asks for more is cut to it.
        steps_per_generation: As in ``GRPOConfig``, but 1 by default: gradient accumulation then samples a fresh batch
            for every micro-batch, which works with every ``loss_type`` (slicing one generation into several
            micro-batches, TRL's default, works with ``dapo`` and ``cispo`` only).
    """

    allocator: str | None = field(default=None, metadata={"help": "rolloutlab allocator spec, e.g. ar3po:2,4"})
    correctness_reward: str | None = field(
        default=None, metadata={"help": "reward function that says right or wrong (default: the first)"}
    )
    reuse_capacity: int = field(
        default=DEFAULT_REUSE_CAPACITY, metadata={"help": "correct responses kept per prompt for reuse"}
    )
    max_rows_per_step: int | None = field(
        default=None, metadata={"help": "opt-in row ceiling per step above per_device_train_batch_size"}
    )

    def __post_init__(self) -> None:
        if self.steps_per_generation is None and self.generation_batch_size is None:
            self.steps_per_generation = 1
        super().__post_init__()
        if self.allocator is not None:
            make_allocator(self.allocator)  # a malformed spec fails here, with the known names
        if self.reuse_capacity < 1:
            raise ValueError(f"reuse_capacity must be >= 1, got reuse_capacity={self.reuse_capacity}")


@dataclass
class RolloutSettings:
    """The adapter's rollout settings, resolved from the trainer's keyword arguments and the config."""

    allocator: Allocator
    correctness_reward: str | None
    reuse_capacity: int
    max_rows_per_step: int | None


def resolve_rollout_settings(
    args: Any,
    allocator: Allocator | None,
    correctness_reward: str | None,
    reuse_capacity: int | None,
    max_rows_per_step: int | None,
) -> RolloutSettings:
    """Merge the trainer's keyword arguments with an :class:`AdaptiveRolloutConfig`'s fields (plain ``GRPOConfig``:
    the keyword arguments alone).

    Raises:
        ValueError: no allocator anywhere, or one setting given in both places with different values.
    """
    from_config: dict[str, Any] = {}
    if isinstance(args, AdaptiveRolloutConfig):
        from_config = {
            "allocator": args.allocator,
            "correctness_reward": args.correctness_reward,
            "reuse_capacity": args.reuse_capacity,
            "max_rows_per_step": args.max_rows_per_step,
        }
    given = {
        "allocator": allocator,
        "correctness_reward": correctness_reward,
        "reuse_capacity": reuse_capacity,
        "max_rows_per_step": max_rows_per_step,
    }
    resolved: dict[str, Any] = {}
    for name, value in given.items():
        configured = from_config.get(name)
        if name == "reuse_capacity" and configured == DEFAULT_REUSE_CAPACITY:
            configured = None  # the config's default, not a choice that can conflict
        if value is not None and configured is not None and (name == "allocator" or value != configured):
            raise ValueError(
                f"{name} is set twice, AdaptiveRolloutConfig({name}={configured!r}) and the trainer's {name}="
                f"{value!r}; set it in one place"
            )
        resolved[name] = value if value is not None else configured
    if resolved["allocator"] is None:
        raise ValueError(
            "AllocatingGRPOTrainer needs an allocator: args=AdaptiveRolloutConfig(allocator='ar3po:2,4', ...) or the "
            "trainer's allocator=make_allocator('ar3po:2,4')"
        )
    if isinstance(resolved["allocator"], str):
        resolved["allocator"] = make_allocator(resolved["allocator"])
    if resolved["reuse_capacity"] is None:
        resolved["reuse_capacity"] = DEFAULT_REUSE_CAPACITY
    return RolloutSettings(**resolved)
