"""What the TRL adapter accepts, checked before TRL is imported and before any model is loaded.

Three kinds of limit, each refused with one sentence that names the user's own setting and its value:

* the TRL release (:data:`SUPPORTED_TRL`), read from the installed package's metadata so that an unsupported TRL is
  refused before ``import trl`` can fail on a private name the adapter uses (:mod:`meta.rlvr.trl_internals`);
* the ``GRPOConfig`` settings and trainer arguments the adapter cannot honour (:func:`config_refusals`; one
  generation sliced into ``steps_per_generation`` micro-batches only with the losses in :data:`SLICEABLE_LOSSES`),
  checked in the adapter's ``__init__`` before ``GRPOTrainer.__init__`` loads a model or starts a vLLM backend, and a
  uniform allocator whose G disagrees with ``num_generations`` (:func:`check_group_size`);
* the rows a step may train and generate (:func:`row_budget`, :func:`fit_to_budget`): by default the rows TRL's
  loader hands over, ``per_device_train_batch_size`` (times ``steps_per_generation``), so an allocator that asks for
  more per prompt than ``num_generations`` cannot raise memory above what the user configured unless they opt in
  with a larger ``max_rows_per_step``.

This module imports neither TRL nor torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import metadata
from typing import Any

from packaging.version import Version

from meta.rlvr.allocators.base import Allocator, Uniform

#: The TRL releases the adapter is tested with, ``[low, high)`` (pyproject's ``llm`` extra pins the same range, and
#: ``make test-trl-matrix`` runs the adapter's tests on the oldest and the newest of them): the adapter overrides one
#: private ``GRPOTrainer`` method and calls a few others (all in :mod:`meta.rlvr.trl_internals`), which TRL may change
#: in any minor release. The low end is the first release whose vLLM server mode talks to vLLM's own OpenAI-style
#: server (``/v1/completions``), the protocol the adapter's one-request-per-stage generation is built and tested on;
#: 1.9 and 1.10 speak ``trl vllm-serve``'s own protocol.
SUPPORTED_TRL = (Version("1.11"), Version("1.17"))


def check_trl_version(version: str) -> None:
    """Refuse a TRL outside :data:`SUPPORTED_TRL` (``[low, high)``) with the reason and the range.

    Raises:
        ImportError: ``version`` is outside the range.
    """
    low, high = SUPPORTED_TRL
    if not low <= Version(version) < high:
        raise ImportError(
            f"meta.rlvr.trl supports TRL >={low},<{high} (it overrides private GRPOTrainer methods, tested on those "
            f"releases); found trl {version}. Install the tested range: pip install 'trl>={low},<{high}'"
        )


def require_supported_trl() -> str:
    """The installed TRL's version, read from its package metadata without importing it.

    Raises:
        ImportError: TRL is not installed, or its version is outside :data:`SUPPORTED_TRL`.
    """
    low, high = SUPPORTED_TRL
    try:
        version = metadata.version("trl")
    except metadata.PackageNotFoundError:
        raise ImportError(
            f"meta.rlvr.trl needs TRL, which is not installed: pip install 'trl>={low},<{high}' (or rolloutlab's llm "
            "extra)"
        ) from None
    check_trl_version(version)
    return version


#: Loss types whose normaliser is the generation batch's token count (``num_items_in_batch``), so TRL's slicing of one
#: generation into ``steps_per_generation`` micro-batches sums to the unsliced loss whatever the slices hold.
SLICEABLE_LOSSES = ("dapo", "cispo")


def _accumulation_refusal(args: Any) -> str | None:
    """Why ``steps_per_generation > 1`` is refused for this loss, named by the setting the user most likely wrote."""
    steps = int(args.steps_per_generation)
    if steps == 1 or args.loss_type in SLICEABLE_LOSSES:
        return None
    accumulation = int(args.gradient_accumulation_steps)
    # GRPOConfig fills steps_per_generation from gradient_accumulation_steps when neither it nor
    # generation_batch_size is set, so equal values almost always mean the user set only the accumulation.
    if steps == accumulation:
        setting = f"gradient_accumulation_steps={accumulation} (which makes TRL's steps_per_generation {steps})"
    else:
        setting = f"steps_per_generation={steps} (generation_batch_size={args.generation_batch_size})"
    return (
        f"{setting} with loss_type={args.loss_type!r}: TRL then slices one generation into {steps} equal micro-batches "
        "and this loss normalises each slice by its own rows, which the adapter's variable group sizes would skew; "
        f"use loss_type='dapo' or 'cispo', or set steps_per_generation=1, which keeps gradient accumulation but "
        "samples a fresh batch for every micro-batch (AdaptiveRolloutConfig does this by default)"
    )


def config_refusals(
    args: Any,
    *,
    peft_config: Any = None,
    tools: Sequence[Any] | None = None,
    rollout_func: Any = None,
    environment_factory: Any = None,
    max_rows_per_step: int | None = None,
) -> list[str]:
    """Every setting of ``args`` (a ``GRPOConfig``) and of the trainer's arguments the adapter cannot honour.

    Read from the config alone, so the adapter can refuse before ``GRPOTrainer.__init__`` loads the model or starts
    vLLM.

    Returns:
        One clause per refused setting, each naming the setting, its value and what to set instead; empty if all are
        supported.
    """
    reasons = []
    accumulation = _accumulation_refusal(args)
    if accumulation is not None:
        reasons.append(accumulation)
    if args.multi_objective_aggregation != "sum_then_normalize":
        reasons.append(
            f"multi_objective_aggregation={args.multi_objective_aggregation!r}: the adapter computes advantages from "
            "the weighted reward sum; set multi_objective_aggregation='sum_then_normalize'"
        )
    if args.beta != 0.0 and peft_config is not None:
        reasons.append(
            f"beta={args.beta} with a peft_config: the KL term needs a separate reference model; set beta=0.0 or "
            "train without PEFT"
        )
    if tools:
        reasons.append(f"tools ({len(tools)} given): the adapter generates single-turn completions only")
    if environment_factory is not None:
        reasons.append("an environment_factory: the adapter generates single-turn completions only")
    if rollout_func is not None:
        reasons.append("a custom rollout_func: the adapter owns generation")
    if max_rows_per_step is not None and max_rows_per_step < 1:
        reasons.append(f"max_rows_per_step={max_rows_per_step}: a step needs at least one row")
    return reasons


def check_group_size(allocator: Allocator, num_generations: int) -> None:
    """Refuse a uniform allocator (``uniform:G``, ``dapo:G,R``) whose G is not ``num_generations``.

    TRL sizes its batch, its loader and its logged metrics by ``num_generations``; a different G would either train
    more rows than the batch the user set or silently train fewer.

    Raises:
        ValueError: the two disagree (the message holds both values).
    """
    if isinstance(allocator, Uniform) and allocator.group_size != int(num_generations):
        g = allocator.group_size
        raise ValueError(
            f"allocator {allocator.name}:{g} samples G={g} responses per prompt but num_generations={num_generations}; "
            f"set num_generations={g} (per_device_train_batch_size is then prompts x {g} rows) or use "
            f"{allocator.name}:{num_generations}"
        )


def row_budget(args: Any, max_rows_per_step: int | None) -> int:
    """Rows a step may generate in one stage call and train: ``max_rows_per_step`` if the user set it, otherwise the
    rows TRL's loader hands the step (``per_device_train_batch_size * steps_per_generation``)."""
    if max_rows_per_step is not None:
        return int(max_rows_per_step)
    return int(args.per_device_train_batch_size) * int(args.steps_per_generation)


def fit_to_budget(counts: Sequence[int], room: int) -> list[int]:
    """Cut an allocation to at most ``room`` responses in all, taking from the largest counts first.

    A water level ``t`` caps every count at ``t`` (the largest level whose capped total fits); what is left of
    ``room`` goes one response each to the prompts above the level, in batch order. So every prompt that asked keeps as
    many responses as the budget allows an equal share, and the order of the batch decides ties deterministically.

    Args:
        counts: Responses asked per prompt (>= 0).
        room: Responses the budget still allows (<= 0 gives all zeros).

    Returns:
        The cut counts, each ``<=`` its request, summing to ``min(sum(counts), max(room, 0))``.
    """
    asked = [int(c) for c in counts]
    room = max(int(room), 0)
    if sum(asked) <= room:
        return asked
    level = 0
    while sum(min(c, level + 1) for c in asked) <= room:
        level += 1
    out = [min(c, level) for c in asked]
    left = room - sum(out)
    for i, c in enumerate(asked):
        if left == 0:
            break
        if c > level:
            out[i] += 1
            left -= 1
    return out


def groups_within_budget(group_sizes: Sequence[int], budget: int) -> int:
    """How many leading groups fit in ``budget`` rows together (at least one, so a batch is never empty).

    Args:
        group_sizes: Rows per group, in batch order.
        budget: Rows the step may train.
    """
    total = 0
    for n, size in enumerate(group_sizes):
        total += int(size)
        if total > budget:
            return max(n, 1)
    return len(group_sizes)
