"""vLLM generation for the TRL adapter: settings refused up front, and TRL's importance-sampling correction kept.

With ``use_vllm=True`` :class:`~meta.rlvr.trl.AllocatingGRPOTrainer` generates every allocation stage through TRL's
own vLLM backend (``VLLMGeneration``), in both modes:

* **server** (``vllm_mode="server"``, a ``vllm serve`` process reached through TRL's ``VLLMClient``): TRL gathers the
  stage's rows of every rank on the main process and sends them as *one* ``/v1/completions`` request. The adapter
  hands TRL one row per requested response with ``num_generations=1`` (:func:`meta.rlvr.trl_distributed.
  generate_and_score`), so a prompt that the allocator gives ``k`` responses appears ``k`` times in the request with
  ``n=1``: per-prompt counts in one batched request per stage (the OpenAI-style endpoint takes a single ``n`` per
  request; vLLM's prefix cache shares the repeated prompt). Weights are pushed once per optimizer step, before the
  step's first stage (TRL's ``_last_loaded_step``), and never between the stages of one step, which all sample from
  the same policy.
* **colocate** (``vllm_mode="colocate"``, an in-process ``vllm.LLM`` on every rank): each rank generates its own
  balanced share of the stage's rows in one ``LLM.generate`` call with ``n=1``. With ``vllm_enable_sleep_mode`` TRL
  discards vLLM's weights after every generate call and pushes them again before the next, so every stage after a
  step's first one costs one extra weight push.

TRL's ``_generate`` returns vLLM's log-probability of each sampled token; the adapter keeps it per row and builds the
batch keys TRL's loss reads: ``sampling_per_token_logps`` always, and with ``vllm_importance_sampling_correction``
(TRL's default) ``old_per_token_logps`` and ``importance_sampling_ratio`` (:func:`importance_sampling_ratio`, TRL's
truncated or masked token / sequence ratio), with TRL's ``sampling/*`` metrics. A reused response (AR3PO) was sampled
at an earlier step and its sampling log-probabilities are not stored: its row carries ``nan``, which TRL's ratio and
off-policy mask treat as "no correction" (ratio 1), the convention TRL uses for tokens vLLM could not score.

Refused before ``GRPOTrainer.__init__`` starts a backend (:func:`vllm_refusals`): ``generation_kwargs`` that set
``n`` or ``best_of`` (they would override the one-response-per-row request and mispair rows) or ``seed`` (with a
fixed seed every copy of a repeated prompt samples the same response, so a group would hold identical rows).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from meta.rlvr.trl_internals import nanmax, nanmin

#: ``generation_kwargs`` keys the adapter's one-row-per-response requests cannot honour under vLLM, and why.
_REFUSED_GENERATION_KWARGS = {
    "n": "it overrides the adapter's one response per request row, which mispairs responses and prompts",
    "best_of": "it overrides the adapter's one response per request row, which mispairs responses and prompts",
    "seed": (
        "a request-level seed makes every copy of a repeated prompt sample the same response, so a prompt's group "
        "would hold identical rows"
    ),
}


def vllm_refusals(args: Any) -> list[str]:
    """The vLLM settings of ``args`` (a ``GRPOConfig``) the adapter cannot honour; empty unless ``use_vllm``.

    Read from the config alone, so the adapter refuses before ``GRPOTrainer.__init__`` starts vLLM (loads the model
    into it, in colocate mode, or connects to the server).

    Returns:
        One clause per refused setting, naming the setting and its value.
    """
    if not args.use_vllm:
        return []
    kwargs = dict(args.generation_kwargs or {})
    return [
        f"generation_kwargs[{key!r}]={kwargs[key]!r} with use_vllm=True (vllm_mode={args.vllm_mode!r}): {why}; "
        f"remove {key!r} from generation_kwargs"
        for key, why in _REFUSED_GENERATION_KWARGS.items()
        if key in kwargs
    ]


def set_sampling_temperature(trainer: Any, temperature: float) -> None:
    """Make the vLLM backend sample with ``temperature`` (TRL copies the temperature into it at construction)."""
    backend = getattr(trainer, "vllm_generation", None)
    if backend is not None:
        backend.temperature = float(temperature)


def sampling_logps_rows(logps: list[float | None] | None, length: int) -> list[float]:
    """One row's sampling log-probabilities as floats: vLLM's ``None`` (unscored token) and a missing row (a reused
    response) become ``nan``, TRL's "no correction" value; ``length`` is the row's completion length in tokens."""
    if logps is None:
        return [math.nan] * length
    if len(logps) != length:
        raise ValueError(f"vLLM returned {len(logps)} log-probabilities for a completion of {length} tokens")
    return [math.nan if x is None else float(x) for x in logps]


def importance_sampling_ratio(
    trainer: Any, old_logps: torch.Tensor, sampling_logps: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """TRL's vLLM importance-sampling correction for a batch, and its ``sampling/*`` metrics.

    The ratio ``exp(old - sampling)`` per token (``token_*`` modes) or per sequence (summed over tokens,
    ``sequence_*`` modes), truncated to ``[vllm_importance_sampling_clip_min, _max]`` (``*_truncate``) or zeroed
    outside it (``*_mask``), exactly as ``GRPOTrainer._generate_and_score_completions`` computes it; ``nan``
    sampling log-probabilities give ratio 1.

    Args:
        trainer: The ``GRPOTrainer`` (reads its ``vllm_importance_sampling_*`` settings, logs to ``_metrics``).
        old_logps: The training policy's per-token log-probabilities, shape ``(B, T)``.
        sampling_logps: vLLM's per-token log-probabilities of the sampled tokens, shape ``(B, T)``.
        mask: Completion mask, shape ``(B, T)``, 1 for trained tokens.

    Returns:
        The ratio, shape ``(B, T)`` (token modes) or ``(B, 1)`` (sequence modes).
    """
    mode = trainer.vllm_importance_sampling_mode
    diff = torch.nan_to_num((old_logps - sampling_logps) * mask, nan=0.0)
    sequence_level = mode in ("sequence_mask", "sequence_truncate")
    ratio = torch.exp(diff.sum(dim=-1, keepdim=True) if sequence_level else diff)
    low, high = trainer.vllm_importance_sampling_clip_min, trainer.vllm_importance_sampling_clip_max
    if mode in ("sequence_truncate", "token_truncate"):
        ratio = torch.clamp(ratio, min=low, max=high)
    elif mode in ("sequence_mask", "token_mask"):
        low = -math.inf if low is None else low
        high = math.inf if high is None else high
        ratio = ratio.masked_fill((ratio < low) | (ratio > high), 0.0)
    else:
        raise ValueError(
            f"vllm_importance_sampling_mode={mode!r} is not one of 'token_truncate', 'token_mask', "
            "'sequence_truncate', 'sequence_mask'"
        )
    _log_sampling_metrics(trainer, old_logps, sampling_logps, mask.bool(), ratio, sequence_level)
    return ratio


def _log_sampling_metrics(
    trainer: Any, old: torch.Tensor, sampling: torch.Tensor, mask: torch.Tensor, ratio: torch.Tensor, sequence: bool
) -> None:
    # TRL's own keys and reductions, so a run with the adapter logs what a plain GRPOTrainer run logs.
    device = old.device
    zero = torch.tensor(0.0, device=device)
    delta = torch.abs(old - sampling)
    delta = delta[mask & ~torch.isnan(delta)]
    gather = trainer.accelerator.gather
    metrics = trainer._metrics["train"]
    metrics["sampling/sampling_logp_difference/mean"].append(
        gather(delta.mean() if delta.numel() else zero).mean().item()
    )
    metrics["sampling/sampling_logp_difference/max"].append(gather(delta.max() if delta.numel() else zero).max().item())
    flat = ratio.flatten() if sequence else ratio[mask]
    metrics["sampling/importance_sampling_ratio/min"].append(
        nanmin(gather(flat.min() if flat.numel() else zero)).item()
    )
    metrics["sampling/importance_sampling_ratio/mean"].append(
        gather(flat.mean() if flat.numel() else zero).nanmean().item()
    )
    metrics["sampling/importance_sampling_ratio/max"].append(
        nanmax(gather(flat.max() if flat.numel() else zero)).item()
    )
