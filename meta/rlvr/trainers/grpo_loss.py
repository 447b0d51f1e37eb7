"""The loss and advantage math of the compact GRPO trainer: group advantages of any group size, the batch loss
normalisers of GRPO, DAPO and Dr. GRPO, and the reduction of a per-token loss to the scalar an optimizer step takes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from meta.rlvr.trainers.grpo_config import LOSS_KINDS


def group_advantages(rewards: Sequence[float], kind: str, eps: float = 1e-6) -> list[float]:
    """Advantages of one group of any size.

    ``grpo``: ``(r − mean)/(std + eps)`` with the population std; ``dr_grpo``: ``r − mean``. A group of one response
    (or with all-equal rewards) gets zeros.
    """
    if kind not in ("grpo", "dr_grpo"):
        raise ValueError(f"advantage must be 'grpo' or 'dr_grpo', got {kind!r}")
    r = np.asarray(rewards, dtype=float)
    if r.size < 2:
        return [0.0] * int(r.size)
    centred = r - r.mean()
    if kind == "grpo":
        centred = centred / (r.std() + eps)
    return [float(x) for x in centred]


def loss_normaliser(kind: str, lengths: Sequence[int], max_new_tokens: int) -> float:
    """The denominator of a batch's policy loss, given every response's completion length (tokens, EOS included).

    * ``"sequence"`` (GRPO, Shao et al. 2024, eq. 3): each response's token sum is first divided by its own length
      (done in :func:`aggregate_loss`); the batch then divides by the number of responses ``N``.
    * ``"dapo"`` (DAPO, Yu et al. 2025, eq. 12): the batch's token sum over the number of tokens ``Σ|o_i|``.
    * ``"dr_grpo"`` (Dr. GRPO, Liu et al. 2025, "Understanding R1-Zero-Like Training", §3.2 and its eq. for the
      Dr. GRPO objective): the token sum over a constant, ``max_new_tokens × N`` — the largest completion length times
      the number of responses, as in the authors' code (``MAX_TOKENS``) and TRL's ``loss_type="dr_grpo"``. Neither
      ``1/|o_i|`` nor the batch's token count enters, so a long wrong answer is not penalised less per token than a
      short one (the length bias the paper removes).

    Responses with zero advantage count here even though they add nothing to the gradient: they are part of the batch.
    """
    if kind == "sequence":
        return float(len(lengths))
    if kind == "dapo":
        return float(sum(lengths))
    if kind == "dr_grpo":
        return float(max_new_tokens * len(lengths))
    raise ValueError(f"loss must be one of {list(LOSS_KINDS)}, got {kind!r}")


def aggregate_loss(per_token: torch.Tensor, mask: torch.Tensor, kind: str, normaliser: float) -> torch.Tensor:
    """Reduce a ``(rows, width)`` per-token loss with its 0/1 ``mask`` to a scalar (see :func:`loss_normaliser`)."""
    if kind == "sequence":
        per_sequence = (per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        return per_sequence.sum() / normaliser
    if kind in ("dapo", "dr_grpo"):
        return (per_token * mask).sum() / normaliser
    raise ValueError(f"loss must be one of {list(LOSS_KINDS)}, got {kind!r}")
