"""Adapter applying a rolloutlab allocator inside TRL's ``GRPOTrainer`` (TRL ≥ 1.16).

TRL samples a fixed ``num_generations`` G per prompt. :class:`AllocatingGRPOTrainer` lets an allocator choose
``n_i ≤ G`` per prompt: rows ``n_i..G−1`` of each group become *dummy* rows — they are not generated (a single EOS
stands in), every reward function returns ``None`` for them (TRL then leaves them out of the group mean/std and sets
their advantage to 0), and their tokens are masked out of the loss and out of ``num_items_in_batch``. That is exact
for the token-level losses whose normaliser counts unmasked tokens (``dapo``, ``bnpo``); ``grpo``/``dr_grpo``/``sapo``
etc. divide by the number of rows or by ``G·max_len``, which dummy rows would silently change, so they are refused.

Only the allocator's first stage is applied (one generation call per TRL step): staged allocators (AR3PO, DARS) need
the compact trainer (:mod:`meta.rlvr.grpo`). Statistics (:class:`StatsTable`) are updated from the real rows' rewards.

Controllers through callbacks: :class:`TemperatureCallback` (E3 entropy-targeting temperature) and
:class:`LengthPenaltyReward` (ALP, an extra reward function reading the statistics' solve rate). Single process only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch
import trl
from packaging.version import Version
from transformers import TrainerCallback
from trl import GRPOTrainer

from meta.rlvr.allocators import Allocator
from meta.rlvr.length_penalty import AdaptiveLengthPenalty
from meta.rlvr.stats import StatsTable
from meta.rlvr.temperature import EntropyTemperature

EXACT_LOSSES = ("dapo", "bnpo")
#: The TRL releases the adapter is tested with (pyproject's ``llm`` extra pins the same range): it overrides private
#: ``GRPOTrainer`` methods, which TRL may change in any minor release.
SUPPORTED_TRL = (Version("1.16"), Version("1.17"))


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


check_trl_version(trl.__version__)


def _default_key(row: dict[str, Any]) -> str:
    return str(row["prompt"])


class AllocatingGRPOTrainer(GRPOTrainer):
    """``trl.GRPOTrainer`` with per-prompt response counts from a rolloutlab allocator.

    Args:
        *args: Passed to ``GRPOTrainer``.
        allocator: Decides ``n_i`` per prompt (first stage only); counts above ``num_generations`` are clipped.
        stats: Per-prompt statistics (a fresh table if ``None``); updated after every scored batch.
        prompt_key: Maps a dataset row to the statistics key (default: the ``prompt`` field as a string).
        **kwargs: Passed to ``GRPOTrainer``; ``reward_funcs`` must be callables.

    Raises:
        ValueError: ``args.loss_type`` not in ``("dapo", "bnpo")``, or a reward function that is not a plain callable.

    Attributes:
        last_allocation: The counts applied to the most recent training batch, one per prompt.
        last_batch: ``{"dummy": bool tensor, "advantages": tensor}`` of the most recent training batch.
    """

    def __init__(
        self,
        *args: Any,
        allocator: Allocator,
        stats: StatsTable | None = None,
        prompt_key: Callable[[dict[str, Any]], str] = _default_key,
        **kwargs: Any,
    ) -> None:
        train_args = kwargs.get("args", args[2] if len(args) > 2 else None)
        loss_type = getattr(train_args, "loss_type", None)
        if loss_type not in EXACT_LOSSES:
            raise ValueError(
                f"AllocatingGRPOTrainer needs loss_type in {EXACT_LOSSES} (got {loss_type!r}): dummy rows are only "
                "exactly neutral for losses normalised by the count of unmasked tokens; "
                "set GRPOConfig(loss_type='dapo')"
            )
        funcs = kwargs.get("reward_funcs", args[1] if len(args) > 1 else None)
        funcs_list = funcs if isinstance(funcs, list) else [funcs]
        if any(not callable(f) or isinstance(f, torch.nn.Module | str) for f in funcs_list):
            raise ValueError("AllocatingGRPOTrainer supports callable reward functions only")
        wrapped = [self._wrap_reward(f) for f in funcs_list if f is not None]
        if "reward_funcs" in kwargs:
            kwargs["reward_funcs"] = wrapped
        else:
            args = (args[0], wrapped, *args[2:])
        self.allocator = allocator
        self.rlvr_stats = stats if stats is not None else StatsTable()
        self.prompt_key = prompt_key
        self._dummy: list[bool] = []
        self.last_allocation: list[int] = []
        self.last_batch: dict[str, torch.Tensor] = {}
        super().__init__(*args, **kwargs)

    def _wrap_reward(self, func: Callable[..., Sequence[float | None]]) -> Callable[..., list[float | None]]:
        @functools.wraps(func)
        def reward(*args: Any, **kwargs: Any) -> list[float | None]:
            out = list(func(*args, **kwargs))
            dummy = self._dummy if len(self._dummy) == len(out) else [False] * len(out)
            return [None if d else r for r, d in zip(out, dummy, strict=True)]

        return reward

    # --- generation: skip dummy rows ------------------------------------------------------------------------------
    def _generate_single_turn(
        self, prompt_ids: list[list[int]], images: Any, multimodal_fields: Any, num_generations: int, *a: Any, **k: Any
    ) -> tuple[list[list[int]], Any]:
        dummy = self._dummy if len(self._dummy) == len(prompt_ids) else [False] * len(prompt_ids)
        if not any(dummy) or images is not None or multimodal_fields:
            return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations, *a, **k)
        real = [i for i, d in enumerate(dummy) if not d]
        completions: list[list[int]] = [[self.eos_token_ids[0]] for _ in prompt_ids]
        logprobs: list[list[float]] | None = None
        if real:
            got, got_logprobs = super()._generate_single_turn(
                [prompt_ids[i] for i in real], None, multimodal_fields, num_generations, *a, **k
            )
            for i, c in zip(real, got, strict=True):
                completions[i] = list(c)
            if got_logprobs is not None:
                logprobs = [[0.0] for _ in prompt_ids]
                for i, lp in zip(real, got_logprobs, strict=True):
                    logprobs[i] = list(lp)
        return completions, logprobs

    # --- allocation, masking and statistics ------------------------------------------------------------------------
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        group = int(self.num_generations or 1)
        if self.model is None or not self.model.training or len(inputs) % group != 0:
            self._dummy = []
            return super()._generate_and_score_completions(inputs)
        keys = [self.prompt_key(inputs[i]) for i in range(0, len(inputs), group)]
        counts = [min(max(int(n), 0), group) for n in self.allocator.initial(keys, self.rlvr_stats)]
        self.last_allocation = counts
        self._dummy = [j >= n for n in counts for j in range(group)]
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            dummy = torch.tensor(self._dummy, dtype=torch.bool)
            self._dummy = []
        device = output["completion_mask"].device
        dummy = dummy.to(device)
        keep = (~dummy).unsqueeze(1).to(output["completion_mask"].dtype)
        output["completion_mask"] = output["completion_mask"] * keep
        loss_mask = output["completion_mask"]
        if "tool_mask" in output:
            loss_mask = loss_mask * output["tool_mask"]
        output["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        self.last_batch = {"dummy": dummy.cpu(), "advantages": output["advantages"].detach().cpu()}
        return output

    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> torch.Tensor:
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if self._dummy and len(self._dummy) == len(inputs):
            total = (rewards_per_func * self.reward_weights.to(rewards_per_func.device)).nansum(dim=1).tolist()
            group = int(self.num_generations or 1)
            for start in range(0, len(inputs), group):
                real = [total[j] for j in range(start, start + group) if not self._dummy[j]]
                lengths = [len(completion_ids_list[j]) for j in range(start, start + group) if not self._dummy[j]]
                self.rlvr_stats.update(self.prompt_key(inputs[start]), real, lengths)
        return rewards_per_func


class TemperatureCallback(TrainerCallback):
    """Applies an :class:`EntropyTemperature` controller after every optimizer step.

    Reads the trainer's logged mean token entropy (``entropy`` metric) and sets the sampling temperature used by the
    next generation (``trainer.temperature`` and its generation config).

    Args:
        controller: The E3 temperature controller.
    """

    def __init__(self, controller: EntropyTemperature) -> None:
        self.controller = controller
        self.trainer: GRPOTrainer | None = None
        self.history: list[float] = []

    def attach(self, trainer: GRPOTrainer) -> TemperatureCallback:
        """Register with ``trainer`` (adds itself to its callbacks) and return ``self``."""
        self.trainer = trainer
        trainer.add_callback(self)
        return self

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        trainer = self.trainer
        if trainer is None:
            return
        entropies = trainer._metrics["train"].get("entropy", [])
        if not entropies:
            return
        temperature = self.controller.decide({"entropy": float(entropies[-1])})
        trainer.temperature = temperature
        if getattr(trainer, "generation_config", None) is not None:
            trainer.generation_config.temperature = temperature
        self.history.append(temperature)


class LengthPenaltyReward:
    """ALP as an extra TRL reward function: ``−β/N · max(p̂, 1/K) · |y|`` per completion.

    ``p̂`` is the prompt's online solve rate from the adapter's statistics (EMA over previous steps; the prior mean
    for an unseen prompt), ``K`` the group size and ``|y|`` the completion length in tokens.

    Args:
        controller: The ALP settings (β, N).
        stats: The statistics table the :class:`AllocatingGRPOTrainer` updates.
        group_size: ``K``.
        prompt_key: Same key function as the trainer's.
    """

    def __init__(
        self,
        controller: AdaptiveLengthPenalty,
        stats: StatsTable,
        group_size: int,
        prompt_key: Callable[[dict[str, Any]], str] = _default_key,
    ) -> None:
        self.controller = controller
        self.stats = stats
        self.group_size = group_size
        self.prompt_key = prompt_key
        self.__name__ = "alp_length_penalty"

    def __call__(self, prompts: Sequence[Any], completion_ids: Sequence[Sequence[int]], **kwargs: Any) -> list[float]:
        out = []
        for prompt, ids in zip(prompts, completion_ids, strict=True):
            p_hat = self.stats.solve_rate(self.prompt_key({"prompt": prompt}))
            out.append(-self.controller.weight(p_hat, self.group_size) * len(ids))
        return out
