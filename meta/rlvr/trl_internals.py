"""The one place the TRL adapter touches TRL's private surface, for every release in the supported range.

Importing this module first checks the installed TRL against :data:`meta.rlvr.trl_limits.SUPPORTED_TRL` from its
package metadata, *before* anything of TRL is imported, so an unsupported TRL is refused with the supported range
instead of an ``ImportError`` on a private name. Every other adapter module imports TRL through here.

What is private, and why each is needed:

* ``GRPOTrainer._generate_and_score_completions``: the one method the adapter overrides
  (:class:`meta.rlvr.trl.AllocatingGRPOTrainer`). It is the narrowest hook TRL offers that both receives the
  step's prompts and returns the training batch; the public ``rollout_func`` returns a fixed ``num_generations``
  completions per prompt and cannot vary the group sizes or drop groups.
* ``GRPOTrainer._generate`` (:func:`generate_rows`): TRL's generation path (tokenising, the generation backend, the
  completion-length metrics and ``num_tokens``). It returns a tuple whose length TRL has changed between releases;
  only :func:`generate_rows` unpacks it, and checks its length.
* ``GRPOTrainer._calculate_rewards`` (:func:`calculate_rewards`): TRL's reward-function dispatch (sync, async and
  model rewards, the ``trainer_state`` and dataset-column keyword arguments).
* ``trl.trainer.utils.add_fused_lm_head`` (TRL >= 1.15, :func:`set_loss_temperature`): re-patched when the temperature
  changes, because these releases bake the temperature of the loss's log-probabilities into a fused head at
  construction; earlier releases divide the logits by ``trainer.temperature`` at every call, so nothing is patched.
* ``GRPOTrainer._prepare_inputs``'s convention (not overridden): the batch ``_generate_and_score_completions``
  returns is shuffled and cut into ``steps_per_generation`` equal slices, rows beyond a multiple dropped;
  :func:`pad_to_slices` makes the adapter's variable-size batch a multiple.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any

import torch
from packaging.version import Version

from meta.rlvr.trl_limits import require_supported_trl

TRL_VERSION = require_supported_trl()

# The version check above must run before TRL is imported: an unsupported TRL fails on these names.
from trl import GRPOConfig, GRPOTrainer  # noqa: E402
from trl.data_utils import is_conversational  # noqa: E402
from trl.trainer import utils as _trl_utils  # noqa: E402
from trl.trainer.utils import nanmax, nanmin, nanstd, pad  # noqa: E402

__all__ = [
    "EOS_TOKEN_IDS_SINCE",
    "FUSED_LM_HEAD_SINCE",
    "TRL_VERSION",
    "GRPOConfig",
    "GRPOTrainer",
    "GeneratedRows",
    "calculate_rewards",
    "completion_end_ids",
    "generate_rows",
    "is_conversational",
    "nanmax",
    "nanmin",
    "nanstd",
    "pad",
    "pad_to_slices",
    "set_loss_temperature",
]

#: Length of the tuple ``GRPOTrainer._generate`` returns in every supported release (and from 1.9 on; 1.0 returned
#: 7, 1.1 to 1.8 returned 9): prompt_ids, completion_ids, tool_mask, completions, logprobs, extra_fields, images,
#: tool_images.
_GENERATE_ARITY = 8
#: The first release that bakes the loss temperature into a fused LM head (``trl.trainer.utils.add_fused_lm_head``).
FUSED_LM_HEAD_SINCE = Version("1.15")
#: The first release whose trainer holds every eos id the model declares (``eos_token_ids``); earlier ones end a
#: completion at the tokenizer's eos only.
EOS_TOKEN_IDS_SINCE = Version("1.14")


@dataclass
class GeneratedRows:
    """One response per prompt row, as TRL's generation path returned them.

    Attributes:
        prompt_ids: Token ids of each row's prompt.
        completion_ids: Token ids of each row's completion.
        completions: Each completion as TRL's reward functions see it (text, or a message list for chat prompts).
        logprobs: The generation backend's per-token log-probabilities of the sampled tokens (``None`` when the
            backend gives none, as transformers' ``generate`` does).
    """

    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]
    completions: list[Any]
    logprobs: list[list[float]] | None


def generate_rows(trainer: GRPOTrainer, prompts: list[Any]) -> GeneratedRows:
    """Sample exactly one completion for each entry of ``prompts`` through TRL's own generation path.

    TRL's backends read ``num_generations`` to decide how many samples a prompt gets; the adapter's rows are already
    one per response, so it is 1 for the call.

    Raises:
        RuntimeError: ``_generate`` returned a tuple of another length (a TRL outside the supported range).
    """
    group_size = trainer.num_generations
    trainer.num_generations = 1
    try:
        out = trainer._generate(prompts)
    finally:
        trainer.num_generations = group_size
    if len(out) != _GENERATE_ARITY:
        raise RuntimeError(
            f"GRPOTrainer._generate returned {len(out)} values, not the {_GENERATE_ARITY} of the supported TRL "
            f"releases; found trl {TRL_VERSION}"
        )
    prompt_ids, completion_ids, _, completions, logprobs, _, _, _ = out
    return GeneratedRows([list(p) for p in prompt_ids], [list(c) for c in completion_ids], list(completions), logprobs)


def calculate_rewards(
    trainer: GRPOTrainer, rows: list[dict[str, Any]], prompts: list[Any], completions: list[Any], ids: list[list[int]]
) -> list[list[float]]:
    """Every reward function's value for each row (NaN where a function returned ``None``), shape rows x functions."""
    rewards = trainer._calculate_rewards(rows, prompts, completions, ids)
    return rewards.detach().cpu().tolist()


def completion_end_ids(trainer: GRPOTrainer) -> set[int]:
    """The token ids that end a completion as TRL's truncation rule and length metrics see it: the eos ids (every one
    the model declares from TRL 1.14 on, the tokenizer's before) and the padding id."""
    tokenizer: Any = trainer._tokenizer
    declared = Version(TRL_VERSION) >= EOS_TOKEN_IDS_SINCE
    eos = list(trainer.eos_token_ids) if declared else [tokenizer.eos_token_id]
    return {*eos, tokenizer.pad_token_id}


def set_loss_temperature(
    model: torch.nn.Module, temperature: float, cast_lm_head_to_fp32: bool, outputs: tuple[str, ...]
) -> bool:
    """Make the loss's log-probabilities of ``model`` use ``temperature``.

    From TRL 1.15 on, ``GRPOTrainer`` wraps the model's ``forward`` in a fused LM head with the temperature of its
    construction baked in; this restores the class's own ``forward`` (so the new head does not wrap the old one) and
    adds the head again. Earlier releases divide the logits by ``trainer.temperature`` at every call, so there is
    nothing to patch.

    Args:
        model: The unwrapped policy (or reference) model.
        temperature: The new temperature (> 0).
        cast_lm_head_to_fp32: ``GRPOConfig.cast_lm_head_to_fp32``.
        outputs: The fused head's per-token outputs (``"log_probs"``, and ``"entropy"`` for the policy).

    Returns:
        Whether a fused head was re-patched (False before TRL 1.15).
    """
    if Version(TRL_VERSION) < FUSED_LM_HEAD_SINCE:
        return False
    model.forward = types.MethodType(type(model).forward, model)  # type: ignore[method-assign]
    _trl_utils.add_fused_lm_head(  # type: ignore[attr-defined]
        model,  # type: ignore[arg-type]
        temperature=temperature,
        cast_lm_head_to_fp32=cast_lm_head_to_fp32,
        outputs=outputs,
    )
    return True


def pad_to_slices(batch: dict[str, Any], slices: int) -> dict[str, Any]:
    """Pad a training batch with inert rows to a multiple of ``slices`` rows, so TRL's equal slicing drops nothing.

    A filler row copies the batch's first row (its prompt keeps the attention finite) with an all-zero completion
    mask and zero advantage, so it adds nothing to a masked token sum: with a loss normalised by
    ``num_items_in_batch`` (``dapo``, ``cispo``: the generation batch's real tokens) the summed slice losses equal the
    unsliced batch's loss exactly.

    Args:
        batch: The adapter's batch (row tensors of shape ``(rows, ...)`` and the 0-d ``num_items_in_batch``).
        slices: ``steps_per_generation``.

    Returns:
        The batch with ``(-rows) % slices`` filler rows appended (the same dict if none are needed).
    """
    rows = int(batch["completion_ids"].size(0))
    extra = (-rows) % int(slices)
    if extra == 0:
        return batch
    out: dict[str, Any] = {}
    for key, value in batch.items():
        if isinstance(value, torch.Tensor) and value.ndim > 0 and value.size(0) == rows:
            filler = value[:1].expand(extra, *value.shape[1:]).clone()
            if key in ("completion_mask", "advantages"):
                filler = torch.zeros_like(filler)
            out[key] = torch.cat([value, filler])
        else:
            out[key] = value
    return out
