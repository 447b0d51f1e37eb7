"""rolloutlab's adaptive-rollout allocators inside TRL's ``GRPOTrainer`` (TRL >=1.11,<1.17).

The documented path is a config: :class:`~meta.rlvr.trl_config.AdaptiveRolloutConfig` (``GRPOConfig`` plus
``allocator``, ``correctness_reward``, ``reuse_capacity``, ``max_rows_per_step``) passed as ``args`` to
:class:`AllocatingGRPOTrainer`.

TRL's data loader hands each training step ``B`` prompts, each repeated ``num_generations`` (``G``) times.
:class:`AllocatingGRPOTrainer` replaces TRL's "sample ``G`` per prompt" with rolloutlab's staged protocol
(:mod:`meta.rlvr.allocators.staging`), the same one the compact trainer follows:

1. the allocator sets each prompt's first-stage count, then after each stage how many more it gets given the
   correctness rewards seen so far this step (AR3PO, DARS); counts may exceed ``G``;
2. every stage samples only the responses asked for, through TRL's own generation path, and scores them with TRL's
   reward functions (the private TRL names the adapter uses are all in :mod:`meta.rlvr.trl_internals`); a step's
   rows never exceed ``per_device_train_batch_size`` (the allocator's requests are cut to it, largest counts first)
   unless ``max_rows_per_step`` opts into more;
3. AR3PO response reuse injects a stored correct response into an all-wrong group; the allocator's ``keep`` drops
   groups (DAPO's zero-variance filter) and DAPO's ``refill`` draws fresh prompts from the training set;
4. the training batch holds only the kept groups' real rows, with GRPO advantages computed per group of any size
   (TRL's ``scale_rewards`` rule), so every ``loss_type`` TRL offers is exact: no padding rows, no masking tricks.

Prompt statistics, the allocator's stage decisions and response reuse read one reward function only, the correctness
reward named by ``correctness_reward`` (default: the first one); advantages use TRL's weighted sum of all of them
(``reward_weights``), optionally shaped by ALP (``length_penalty``, with each group's own solve rate).

A :class:`~meta.rlvr.allocators.staging.CostLedger` (:attr:`AllocatingGRPOTrainer.ledger`) counts generated responses
and tokens, prompt tokens read, rows and tokens trained, reuse and drops; it is logged as ``ledger/*`` (cumulative) and
``ledger/step_*`` (per step). TRL's own ``num_tokens`` and ``completions/*`` metrics count the generated rows only.
Per-prompt reward, stage count and latency, and real throughput are logged beside TRL's metrics
(:mod:`meta.rlvr.trl_metrics`).

:func:`set_temperature` changes the temperature of both sampling and the log-probabilities of the loss (TRL fixes the
latter in a fused LM head at construction); :class:`TemperatureCallback` drives it from E3's entropy controller and
works from ``callbacks=[...]``. vLLM generation (server and colocate) goes through TRL's own backend, with TRL's
importance-sampling correction kept in the batch (:mod:`meta.rlvr.trl_vllm`). Refused with the user's setting named,
before the parent constructor loads a model or starts a backend (:mod:`meta.rlvr.trl_limits`,
:func:`meta.rlvr.trl_vllm.vllm_refusals`): ``generation_kwargs`` with ``n``, ``best_of`` or ``seed`` under vLLM,
tools/environments, a custom ``rollout_func``, ``steps_per_generation > 1`` with a loss other than ``dapo`` /
``cispo`` (gradient accumulation works with ``steps_per_generation=1`` for every loss), ``normalize_then_sum``, a KL
term with PEFT, a uniform G other than ``num_generations``; after it: a batch that is not whole groups.

Several processes (``torchrun`` / ``accelerate launch``, data parallel) run one global allocation: every rank holds the
whole step, generates a balanced share of each stage's rows and trains on a balanced share of the kept rows
(:mod:`meta.rlvr.trl_distributed`). The row budget is then global: ``max_rows_per_step`` (or the batch the user set) is
per process, and a step's global rows stay within it times the number of processes, so every rank takes the same
decisions.
"""

from __future__ import annotations

import inspect
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from transformers import TrainerCallback

from meta.rlvr.allocators import Allocator, is_mixed
from meta.rlvr.allocators.reuse import ResponseBuffer
from meta.rlvr.allocators.staging import CostLedger, reuse_or_store, run_stages
from meta.rlvr.allocators.stats import StatsTable
from meta.rlvr.token.length_penalty import AdaptiveLengthPenalty
from meta.rlvr.token.temperature import EntropyTemperature
from meta.rlvr.trl_config import AdaptiveRolloutConfig, resolve_rollout_settings
from meta.rlvr.trl_distributed import generate_and_score, global_rows, rank_rows
from meta.rlvr.trl_internals import (
    GRPOTrainer,
    calculate_rewards,
    completion_end_ids,
    is_conversational,
    nanstd,
    pad,
    pad_to_slices,
    set_loss_temperature,
)
from meta.rlvr.trl_limits import (
    SUPPORTED_TRL,
    check_group_size,
    check_trl_version,
    config_refusals,
    fit_to_budget,
    groups_within_budget,
    row_budget,
)
from meta.rlvr.trl_metrics import SessionCount, StepClock, per_prompt_mean
from meta.rlvr.trl_vllm import (
    importance_sampling_ratio,
    sampling_logps_rows,
    set_sampling_temperature,
    vllm_refusals,
)
from rolloutlab.run_state import generator_state, set_generator_state

__all__ = [
    "STATE_FILE",
    "SUPPORTED_TRL",
    "AdaptiveRolloutConfig",
    "AllocatingGRPOTrainer",
    "TemperatureCallback",
    "check_trl_version",
    "set_temperature",
]

#: File the adapter's own state is saved to inside each TRL checkpoint directory.
STATE_FILE = "rolloutlab_rlvr_state.json"
#: The generation metrics TRL appends once per ``_generate`` call; the adapter pools them over a step's stages.
_GENERATION_METRICS = (
    "completions/mean_length",
    "completions/min_length",
    "completions/max_length",
    "completions/clipped_ratio",
    "completions/mean_terminated_length",
    "completions/min_terminated_length",
    "completions/max_terminated_length",
)


def _default_key(row: dict[str, Any]) -> str:
    return str(row["prompt"])


def set_temperature(trainer: GRPOTrainer, temperature: float) -> None:
    """Set the temperature TRL samples with *and* divides the logits by in the loss's log-probabilities.

    From TRL 1.15 on, ``GRPOTrainer`` builds a fused LM head at construction with the temperature of that moment baked
    in; setting ``trainer.temperature`` alone changes sampling but leaves the loss at the old temperature. This
    re-patches the policy's (and the reference model's) fused head
    (:func:`~meta.rlvr.trl_internals.set_loss_temperature`).

    Raises:
        ValueError: ``temperature <= 0``.
    """
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    trainer.temperature = float(temperature)
    if getattr(trainer, "generation_config", None) is not None:
        trainer.generation_config.temperature = float(temperature)
    set_sampling_temperature(trainer, temperature)
    config: Any = trainer.args
    model = trainer.accelerator.unwrap_model(trainer.model)
    if hasattr(model, "get_base_model"):
        model = model.get_base_model()
    set_loss_temperature(model, float(temperature), config.cast_lm_head_to_fp32, ("log_probs", "entropy"))
    if trainer.ref_model is not None:
        set_loss_temperature(trainer.ref_model, float(temperature), config.cast_lm_head_to_fp32, ("log_probs",))


@dataclass
class _Group:
    """One prompt's responses this step (generated and reused), with TRL's per-function rewards."""

    row: dict[str, Any]
    key: str
    prompt_ids: list[int] | None = None
    completion_ids: list[list[int]] = field(default_factory=list)
    completions: list[Any] = field(default_factory=list)
    rewards_per_func: list[list[float]] = field(default_factory=list)
    correct: list[float] = field(default_factory=list)
    reused: list[bool] = field(default_factory=list)
    #: vLLM's per-token log-probabilities of each response (``None``: not known, e.g. a reused response).
    sampling_logps: list[list[float | None] | None] = field(default_factory=list)

    def generated_correct(self) -> list[float]:
        return [c for c, r in zip(self.correct, self.reused, strict=True) if not r]

    def generated_ids(self) -> list[list[int]]:
        return [c for c, r in zip(self.completion_ids, self.reused, strict=True) if not r]


class AllocatingGRPOTrainer(GRPOTrainer):
    """``trl.GRPOTrainer`` with rolloutlab's staged per-prompt allocation, response reuse and dynamic sampling.

    Args:
        *args: Passed to ``GRPOTrainer``.
        allocator: Decides the responses per prompt, stage by stage (:func:`meta.rlvr.allocators.make_allocator`);
            ``None``: built from ``args.allocator`` (an :class:`~meta.rlvr.trl_config.AdaptiveRolloutConfig`).
        stats: Per-prompt statistics (a fresh table if ``None``); updated with the correctness reward after every
            step.
        prompt_key: Maps a dataset row to the statistics / reuse key (default: the ``prompt`` field as a string).
        correctness_reward: Name of the reward function (its ``__name__``, as TRL logs it) whose value is the
            verifier's correctness; default: the first reward function.
        length_penalty: Optional ALP: the summed reward of each response is shaped with its group's own solve rate
            (Xiang et al. 2025, eq. 2) before advantages are computed.
        reuse_capacity: Correct responses kept per prompt for reuse (allocators with ``reuse``, e.g. AR3PO); ``None``:
            the config's, or 4.
        max_rows_per_step: Opt-in ceiling on a step's rows (per stage call and trained) above
            ``per_device_train_batch_size``; ``None``: the config's, or the batch the user set.
        **kwargs: Passed to ``GRPOTrainer``.

    The rollout settings may come from the keyword arguments or from an ``AdaptiveRolloutConfig``, not both.

    Raises:
        ValueError: an unsupported TRL setting (see the module docstring), no allocator, a setting given twice, or an
            unknown ``correctness_reward``.

    Attributes:
        ledger: Cumulative :class:`~meta.rlvr.allocators.staging.CostLedger`.
        last_allocation: Responses generated per prompt of the most recent step's first batch (all stages).
        last_batch: ``{"group_sizes", "reused", "advantages"}`` of the most recent training batch, and
            ``"rank_rows"``, the ``(start, stop)`` rows of it this process trained.
        last_step: The most recent step's ledger increase and group counts.
        max_rows_per_step: The row budget of one process in a step (:func:`meta.rlvr.trl_limits.row_budget`).
        step_row_budget: The row budget of the whole step, ``max_rows_per_step`` times the number of processes.

    With several processes every one of these covers the global batch and is the same on every process.
    """

    def __init__(
        self,
        *args: Any,
        allocator: Allocator | None = None,
        stats: StatsTable | None = None,
        prompt_key: Callable[[dict[str, Any]], str] = _default_key,
        correctness_reward: str | None = None,
        length_penalty: AdaptiveLengthPenalty | None = None,
        reuse_capacity: int | None = None,
        max_rows_per_step: int | None = None,
        **kwargs: Any,
    ) -> None:
        # Everything the config alone decides is checked before GRPOTrainer.__init__ loads a model or starts vLLM.
        call = inspect.signature(GRPOTrainer.__init__).bind_partial(self, *args, **kwargs).arguments
        config = call.get("args")
        if config is None:
            raise ValueError(
                "AllocatingGRPOTrainer needs args: an AdaptiveRolloutConfig (or a GRPOConfig) with the batch it trains"
            )
        settings = resolve_rollout_settings(config, allocator, correctness_reward, reuse_capacity, max_rows_per_step)
        allocator = settings.allocator
        reasons = config_refusals(
            config,
            peft_config=call.get("peft_config"),
            tools=call.get("tools"),
            rollout_func=call.get("rollout_func"),
            environment_factory=call.get("environment_factory"),
            max_rows_per_step=settings.max_rows_per_step,
        ) + vllm_refusals(config)
        if reasons:
            raise ValueError("AllocatingGRPOTrainer does not support " + "; ".join(reasons))
        check_group_size(allocator, config.num_generations)
        super().__init__(*args, **kwargs)
        self._refuse_unsupported()
        names = list(self.reward_func_names)
        correctness_reward = settings.correctness_reward
        if correctness_reward is None:
            self.correctness_index = 0
        elif correctness_reward in names:
            self.correctness_index = names.index(correctness_reward)
        else:
            raise ValueError(f"correctness_reward {correctness_reward!r} is not one of the reward functions {names}")
        reuse_capacity = settings.reuse_capacity
        # Rows one stage call may generate and one step may train (max_rows_per_step, else the configured batch), per
        # process. The allocation is global (meta.rlvr.trl_distributed), so its budget is the per-process one times the
        # processes, applied to the global batch: every rank takes the same cuts.
        self.max_rows_per_step = row_budget(config, settings.max_rows_per_step)
        self.step_row_budget = self.max_rows_per_step * self.accelerator.num_processes
        self.allocator = allocator
        self.rlvr_stats = stats if stats is not None else StatsTable()
        self.prompt_key = prompt_key
        self.length_penalty = length_penalty
        self.success_threshold = float(getattr(allocator, "success_threshold", 0.5))
        self.response_buffer = (
            ResponseBuffer(reuse_capacity, self.success_threshold) if getattr(allocator, "reuse", False) else None
        )
        self.ledger = CostLedger()
        self.last_allocation: list[int] = []
        self.last_batch: dict[str, Any] = {}
        self.last_step: dict[str, Any] = {}
        self._refill_rng = np.random.default_rng(self.args.seed)
        self._prompts_drawn = 0
        self._epochs_ended = 0
        self._stage_padding = 0
        self._clock = StepClock()
        self._session = SessionCount()
        for callback in self.callback_handler.callbacks:
            if isinstance(callback, TemperatureCallback):
                callback.trainer = self

    def _refuse_unsupported(self) -> None:
        """What only the built trainer shows (the config's settings were checked before it was built)."""
        reasons = []
        if self.beta != 0.0 and self.ref_model is None:
            reasons.append(f"beta={self.beta} without a separate reference model (a PEFT model): set beta=0.0")
        if reasons:
            raise ValueError("AllocatingGRPOTrainer does not support " + "; ".join(reasons))

    # --- one training step's rollout ---------------------------------------------------------------------------
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if self.model is None or not self.model.training:
            return super()._generate_and_score_completions(inputs)
        # Every rank holds the whole step (meta.rlvr.trl_distributed): the same heads, stages and decisions.
        heads = self._group_heads(global_rows(self, inputs))
        before = self.ledger.as_dict()
        self._clock = StepClock()
        marks = {k: len(self._metrics["train"][k]) for k in _GENERATION_METRICS}
        self._stage_padding = 0
        groups = self._rollout(heads)
        self.last_allocation = [sum(not r for r in g.reused) for g in groups]
        every = list(groups)
        kept, dropped = self._split_kept(groups)
        rounds = 0
        max_rounds = int(getattr(self.allocator, "max_rounds", 0))
        while self.allocator.refill and len(kept) < len(heads) and rounds < max_rounds:
            more = self._rollout(self._draw_rows(len(heads) - len(kept)))
            every += more
            more_kept, more_dropped = self._split_kept(more)
            kept += more_kept
            dropped += more_dropped
            rounds += 1
        dropped += kept[len(heads) :]
        kept = kept[: len(heads)]
        # Refill rounds can bring more rows than one round's budget; the trained batch keeps to it.
        fits = groups_within_budget([len(g.completion_ids) for g in kept], self.step_row_budget)
        dropped += kept[fits:]
        kept = kept[:fits]
        for g in dropped:
            ids = g.generated_ids()
            self.ledger.dropped_responses += len(ids)
            self.ledger.dropped_tokens += sum(len(c) for c in ids)
        learn = True
        if not any(g.completion_ids for g in kept):
            # Nothing survived the filter: train on every generated row with zero advantage, a step that moves the
            # policy only through the KL term (if any), instead of a batch TRL cannot build.
            kept = [g for g in every if g.completion_ids]
            kept = kept[: groups_within_budget([len(g.completion_ids) for g in kept], self.step_row_budget)]
            learn = False
            if not kept:
                raise ValueError(
                    f"allocator {self.allocator.name!r} gave every prompt of the batch 0 responses; a step needs at "
                    "least one"
                )
        self._pool_generation_metrics(marks, every)
        output = self._build_batch(kept, learn)
        step = self.ledger.since(before)
        self.last_step = {
            **step,
            "groups_generated": sum(bool(g.completion_ids) for g in every),
            "groups_kept": len(kept) if learn else 0,
            "refill_rounds": rounds,
            # Per-prompt solve rate of the generated responses (the RLVR meta-MDP's histogram, GroupSizeCallback).
            "solve_rates": [float(np.mean(g.generated_correct())) for g in every if g.generated_correct()],
        }
        metrics = self._metrics["train"]
        for name, value in self.ledger.as_dict().items():
            metrics[f"ledger/{name}"] = [float(value)]
        for name, value in step.items():
            metrics[f"ledger/step_{name}"].append(float(value))
        metrics["rlvr/groups_kept"].append(float(self.last_step["groups_kept"]))
        metrics["rlvr/refill_rounds"].append(float(rounds))
        if self.accelerator.num_processes > 1:
            metrics["rlvr/stage_padding_rows"].append(float(self._stage_padding))
        for key, seconds_or_count in self._clock.metrics().items():
            metrics[key].append(seconds_or_count)
        self._session.add(step)
        return output

    def _group_heads(self, inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        group = int(self.num_generations or 1)
        if len(inputs) % group != 0:
            raise ValueError(
                f"a training batch of {len(inputs)} rows is not whole groups of num_generations={group}; make "
                "per_device_train_batch_size a multiple of num_generations"
            )
        heads = [inputs[i] for i in range(0, len(inputs), group)]
        for start in range(0, len(inputs), group):
            keys = {self.prompt_key(inputs[j]) for j in range(start, start + group)}
            if len(keys) != 1:
                raise ValueError(f"rows {start}..{start + group - 1} of the batch are not one prompt's group: {keys}")
        return [dict(h) for h in heads]

    def _draw_rows(self, n: int) -> list[dict[str, Any]]:
        """DAPO refill: ``n`` fresh prompts drawn from the training set with the adapter's seeded generator."""
        dataset = self.train_dataset
        idx = self._refill_rng.integers(0, len(dataset), size=n)  # type: ignore[arg-type]
        return [dict(dataset[int(i)]) for i in idx]  # type: ignore[index]

    def _rollout(self, rows: list[dict[str, Any]]) -> list[_Group]:
        groups = [_Group(row, self.prompt_key(row)) for row in rows]
        self._count_prompts(len(rows))

        def generate(counts: list[int], stage: int) -> None:
            # The step's rows stay within the budget the user configured (max_rows_per_step opts into more).
            fitted = fit_to_budget(counts, self.step_row_budget - sum(len(g.completion_ids) for g in groups))
            self._clock.rows_cut += sum(counts) - sum(fitted)
            start = time.perf_counter()
            self._sample_stage(groups, fitted, stage)
            if sum(fitted):
                self._clock.stage_seconds.append(time.perf_counter() - start)

        run_stages(
            self.allocator, [g.key for g in groups], self.rlvr_stats, generate, lambda: [g.correct for g in groups]
        )
        for g in groups:
            if g.completion_ids:
                self.rlvr_stats.update(g.key, g.correct, [len(c) for c in g.completion_ids])
                self.ledger.groups += 1
                self.ledger.zero_variance_groups += int(not is_mixed(g.correct))
        if self.response_buffer is not None:
            for g in groups:
                stored = reuse_or_store(self.response_buffer, g.key, g.generated_ids(), g.generated_correct())
                if stored is not None and sum(len(h.completion_ids) for h in groups) < self.step_row_budget:
                    self._inject(g, stored.tokens, stored.reward)
        return groups

    def _sample_stage(self, groups: list[_Group], counts: list[int], stage: int) -> None:
        request = [i for i, c in enumerate(counts) for _ in range(int(c))]
        if not request:
            return
        prompts = [groups[i].row["prompt"] for i in request]
        out = generate_and_score(self, prompts, [dict(groups[i].row) for i in request])
        self._stage_padding += out.padding
        for j, i in enumerate(request):
            ids = out.completion_ids[j]
            logps = None if out.sampling_logps is None else out.sampling_logps[j]
            self._append(groups[i], out.prompt_ids[j], ids, out.completions[j], out.rewards[j], False, logps)
            self.ledger.responses += 1
            self.ledger.completion_tokens += len(ids)
        for i, c in enumerate(counts):
            if c > 0 and groups[i].prompt_ids is not None:
                self.ledger.prompt_tokens += len(groups[i].prompt_ids)  # type: ignore[arg-type]
                if stage > 0:
                    self.ledger.prompt_tokens_extra_stages += len(groups[i].prompt_ids)  # type: ignore[arg-type]

    def _append(
        self,
        g: _Group,
        prompt_ids: list[int],
        ids: list[int],
        completion: Any,
        rewards: list[float],
        reused: bool,
        sampling_logps: list[float | None] | None = None,
    ) -> None:
        g.prompt_ids = prompt_ids
        g.sampling_logps.append(sampling_logps)
        g.completion_ids.append(ids)
        g.completions.append(completion)
        g.rewards_per_func.append(rewards)
        value = rewards[self.correctness_index]
        g.correct.append(0.0 if value != value else float(value))  # an unscorable (None) correctness reads as wrong
        g.reused.append(reused)

    def _inject(self, g: _Group, tokens: list[int], reward: float) -> None:
        """AR3PO reuse: score the stored response with every reward function, keep its stored correctness."""
        text = self.processing_class.batch_decode([tokens], skip_special_tokens=True)[0]  # type: ignore[union-attr]
        completion: Any = [{"role": "assistant", "content": text}] if is_conversational(g.row) else text
        row = calculate_rewards(self, [dict(g.row)], [g.row["prompt"]], [completion], [list(tokens)])[0]
        row[self.correctness_index] = float(reward)
        assert g.prompt_ids is not None  # reuse needs a generated response, hence its prompt ids
        self._append(g, g.prompt_ids, list(tokens), completion, row, True)
        self.ledger.reused_responses += 1
        self.ledger.reused_tokens += len(tokens)

    def _split_kept(self, groups: list[_Group]) -> tuple[list[_Group], list[_Group]]:
        keep = self.allocator.keep([g.correct for g in groups])
        return [g for g, k in zip(groups, keep, strict=True) if k], [
            g for g, k in zip(groups, keep, strict=True) if not k
        ]

    def _count_prompts(self, n: int) -> None:
        # E3 widens its bounds after each pass over the prompt pool (the compact trainer's epoch).
        self._prompts_drawn += n
        pool = len(self.train_dataset)  # type: ignore[arg-type]
        while self._prompts_drawn >= pool * (self._epochs_ended + 1):
            self.allocator.end_epoch()
            self._epochs_ended += 1

    def _pool_generation_metrics(self, marks: dict[str, int], groups: list[_Group]) -> None:
        """Replace the per-stage generation metrics TRL appended this step by one value over all generated rows."""
        metrics = self._metrics["train"]
        for k, n in marks.items():
            del metrics[k][n:]
        ids = [c for g in groups for c in g.generated_ids()]
        if not ids:
            return
        lengths = np.array([len(c) for c in ids], dtype=float)
        ends = completion_end_ids(self)
        truncated = np.array([not c or c[-1] not in ends for c in ids])
        done = lengths[~truncated] if (~truncated).any() else np.zeros(1)
        for key, value in (
            ("mean_length", lengths.mean()),
            ("min_length", lengths.min()),
            ("max_length", lengths.max()),
            ("clipped_ratio", truncated.mean()),
            ("mean_terminated_length", done.mean()),
            ("min_terminated_length", done.min()),
            ("max_terminated_length", done.max()),
        ):
            metrics[f"completions/{key}"].append(float(value))

    # --- the training batch ------------------------------------------------------------------------------------
    def _advantages(self, groups: list[_Group], learn: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-row summed reward and GRPO advantage, group by group (TRL's ``scale_rewards`` rule, any group size)."""
        weights = self.reward_weights.detach().cpu()
        totals: list[torch.Tensor] = []
        for g in groups:
            per_func = torch.tensor(g.rewards_per_func, dtype=torch.float32)
            total = (per_func * weights.unsqueeze(0)).nansum(dim=1)
            total[torch.isnan(per_func).all(dim=1)] = torch.nan
            if self.length_penalty is not None:
                solve_rate = sum(c >= self.success_threshold for c in g.correct) / len(g.correct)
                w = self.length_penalty.weight(solve_rate, len(g.correct))
                total = total - w * torch.tensor([len(c) for c in g.completion_ids], dtype=torch.float32)
            totals.append(total)
        rewards = torch.cat(totals)
        if not learn:
            return rewards, torch.zeros_like(rewards)
        batch_std = nanstd(rewards) if rewards.numel() > 1 else torch.tensor(0.0)
        advantages = []
        for total in totals:
            centred = total - torch.nanmean(total)
            if self.scale_rewards == "group":
                std = nanstd(total) if total.numel() > 1 else torch.tensor(0.0)
                centred = centred / (std + 1e-4)
            elif self.scale_rewards == "batch":
                centred = centred / (batch_std + 1e-4)
            advantages.append(centred)
        # Unscorable rows (every reward None) and one-response groups carry no signal.
        return rewards, torch.nan_to_num(torch.cat(advantages), nan=0.0)

    def _build_batch(self, groups: list[_Group], learn: bool) -> dict[str, Any]:
        """This rank's share of the training batch (all kept rows on one process; ``meta.rlvr.trl_distributed``)."""
        device = self.accelerator.device
        every_row = [(g, j) for g in groups for j in range(len(g.completion_ids))]
        rewards, every_advantage = self._advantages(groups, learn)
        self.ledger.rows_trained += len(every_row)
        self.ledger.tokens_trained += sum(len(g.completion_ids[j]) for g, j in every_row)
        start, stop, width = rank_rows(len(every_row), self.accelerator)
        # Every rank trains on `width` rows (TRL's loss metrics gather per-row tensors, which need equal shapes); a
        # short share is filled with copies of a row under an empty completion mask, which add nothing to the loss.
        real = [True] * (stop - start) + [False] * (width - (stop - start))
        rows = every_row[start:stop] + [every_row[min(start, len(every_row) - 1)]] * (width - (stop - start))
        advantages = torch.cat([every_advantage[start:stop], torch.zeros(width - (stop - start))])
        ids_list = [g.completion_ids[j] for g, j in rows]
        pad_id = self._tokenizer.pad_token_id
        prompt_ids = [torch.tensor(g.prompt_ids) for g, _ in rows]
        prompt_mask = [torch.ones_like(t, dtype=torch.long) for t in prompt_ids]
        completion_ids = [torch.tensor(c) for c in ids_list]
        completion_mask = [
            torch.full_like(t, int(r), dtype=torch.long) for t, r in zip(completion_ids, real, strict=True)
        ]
        multiple: Any = self.pad_to_multiple_of
        p_ids = pad(prompt_ids, padding_value=pad_id, padding_side="left", pad_to_multiple_of=multiple).to(device)
        p_mask = pad(prompt_mask, padding_value=0, padding_side="left", pad_to_multiple_of=multiple).to(device)
        c_ids = pad(completion_ids, padding_value=pad_id, padding_side="right", pad_to_multiple_of=multiple).to(device)
        c_mask = pad(completion_mask, padding_value=0, padding_side="right", pad_to_multiple_of=multiple).to(device)
        if self.mask_truncated_completions:
            ends = completion_end_ids(self)
            truncated = torch.tensor([not c or c[-1] not in ends for c in ids_list], device=device)
            c_mask = c_mask * (~truncated).unsqueeze(1).int()
        num_items = self.accelerator.gather(c_mask.sum()).sum()
        input_ids = torch.cat([p_ids, c_ids], dim=1)
        attention = torch.cat([p_mask, c_mask], dim=1)
        keep = c_ids.size(1)
        config: Any = self.args
        batch_size = config.per_device_train_batch_size
        old_logps = ref_logps = None
        with torch.no_grad():
            # As TRL: the sampling policy's log-probs are needed only when the batch is trained on after the policy
            # moved (num_iterations > 1 or accumulation across generations); otherwise the ratio is 1 by construction.
            # With vLLM's importance-sampling correction they are always needed (TRL's rule).
            generate_every = config.steps_per_generation * self.num_iterations
            correct_vllm = self.use_vllm and self.vllm_importance_sampling_correction
            if config.gradient_accumulation_steps % generate_every != 0 or correct_vllm:
                old_logps, _, _ = self._get_per_token_logps_and_entropies(
                    self.model, input_ids, attention, keep, batch_size=batch_size
                )
            if self.beta != 0.0:
                ref_logps, _, _ = self._get_per_token_logps_and_entropies(
                    self.ref_model, input_ids, attention, keep, batch_size=batch_size
                )
        sampling_logps = ratio = None
        if self.use_vllm:
            sampled = [
                torch.tensor(sampling_logps_rows(g.sampling_logps[j], len(g.completion_ids[j]))) for g, j in rows
            ]
            # Padding positions are masked out of the loss; 0 is TRL's padding value for these log-probabilities.
            sampling_logps = pad(sampled, padding_value=0, padding_side="right", pad_to_multiple_of=multiple).to(device)
            if correct_vllm:
                assert old_logps is not None
                ratio = importance_sampling_ratio(self, old_logps, sampling_logps, c_mask)
        advantages = advantages.to(device)
        self._log_rewards(groups, every_row, rewards, every_advantage)
        self.last_batch = {
            "group_sizes": [len(g.completion_ids) for g in groups],
            "reused": [g.reused[j] for g, j in every_row],
            "advantages": every_advantage.detach().cpu(),
            "rank_rows": (start, stop),
        }
        output: dict[str, Any] = {
            "prompt_ids": p_ids,
            "prompt_mask": p_mask,
            "completion_ids": c_ids,
            "completion_mask": c_mask,
            "advantages": advantages,
            "num_items_in_batch": num_items,
        }
        if old_logps is not None:
            output["old_per_token_logps"] = old_logps
        if ratio is not None:
            output["importance_sampling_ratio"] = ratio
        if sampling_logps is not None:
            output["sampling_per_token_logps"] = sampling_logps
        if ref_logps is not None:
            output["ref_per_token_logps"] = ref_logps
        return pad_to_slices(output, config.steps_per_generation)

    def _log_rewards(
        self, groups: list[_Group], rows: list[tuple[_Group, int]], rewards: torch.Tensor, advantages: torch.Tensor
    ) -> None:
        metrics = self._metrics["train"]
        per_func = torch.tensor([g.rewards_per_func[j] for g, j in rows], dtype=torch.float32)
        for i, name in enumerate(self.reward_func_names):
            metrics[f"rewards/{name}/mean"].append(torch.nanmean(per_func[:, i]).item())
            metrics[f"rewards/{name}/std"].append(nanstd(per_func[:, i]).item())
        metrics["reward"].append(torch.nanmean(rewards).item())
        sizes = [len(g.completion_ids) for g in groups]
        metrics["rlvr/reward_per_prompt"].append(per_prompt_mean(rewards.tolist(), sizes))
        metrics["reward_std"].append(nanstd(rewards).item())
        metrics["frac_reward_zero_std"].append(float(np.mean([not is_mixed(g.correct) for g in groups])))
        metrics["rlvr/rows_per_group"].append(float(np.mean([len(g.completion_ids) for g in groups])))
        logs: Any = self._logs  # TRL's completion table (log_completions)
        logs["prompt"].extend(g.row["prompt"] for g, _ in rows)
        logs["completion"].extend(g.completions[j] for g, j in rows)
        for i, name in enumerate(self.reward_func_names):
            logs["rewards"][name].extend(per_func[:, i].tolist())
        logs["advantages"].extend(advantages.detach().cpu().tolist())

    # --- logging ------------------------------------------------------------------------------------------------
    def train(self, *args: Any, **kwargs: Any) -> Any:
        """``GRPOTrainer.train``; the returned metrics hold the real speeds (:mod:`meta.rlvr.trl_metrics`)."""
        self._session = SessionCount()
        return super().train(*args, **kwargs)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        # TRL's train_samples_per_second counts the loader's nominal rows; the real speeds go beside it. The dict is
        # the one train() returns, so they reach TrainOutput.metrics too.
        if "train_runtime" in logs:
            logs.update(self._session.speeds(logs["train_runtime"]))
        super().log(logs, start_time)

    # --- checkpoints ---------------------------------------------------------------------------------------------
    def rlvr_state_dict(self) -> dict[str, Any]:
        """The adapter's own state as plain data: statistics, reuse buffer, ledger, allocator, temperature, refill
        generator and prompt count (TRL's checkpoint holds the rest)."""
        return {
            "stats": self.rlvr_stats.state_dict(),
            "buffer": self.response_buffer.state_dict() if self.response_buffer is not None else None,
            "ledger": self.ledger.as_dict(),
            "allocator": self.allocator.state_dict(),
            "temperature": float(self.temperature),
            "refill_rng": generator_state(self._refill_rng),
            "prompts_drawn": self._prompts_drawn,
            "epochs_ended": self._epochs_ended,
        }

    def load_rlvr_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`rlvr_state_dict` (the temperature through :func:`set_temperature`)."""
        self.rlvr_stats.load_state_dict(state["stats"])
        if (state["buffer"] is None) != (self.response_buffer is None):
            raise ValueError("the checkpoint and this trainer disagree on response reuse (allocator differs)")
        if self.response_buffer is not None:
            self.response_buffer.load_state_dict(state["buffer"])
        self.ledger = CostLedger.from_dict(state["ledger"])
        self.allocator.load_state_dict(state["allocator"])
        set_generator_state(self._refill_rng, state["refill_rng"])
        self._prompts_drawn = int(state["prompts_drawn"])
        self._epochs_ended = int(state["epochs_ended"])
        if float(state["temperature"]) != float(self.temperature):
            set_temperature(self, float(state["temperature"]))

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        super()._save_checkpoint(model, trial)
        if self.args.should_save:
            folder = os.path.join(self._get_output_dir(trial=trial), f"checkpoint-{self.state.global_step}")
            fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump(self.rlvr_state_dict(), f)
            os.replace(tmp, os.path.join(folder, STATE_FILE))

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None:
            path = os.path.join(checkpoint, STATE_FILE)
            if os.path.exists(path):
                with open(path) as f:
                    self.load_rlvr_state_dict(json.load(f))


class TemperatureCallback(TrainerCallback):
    """Applies an :class:`EntropyTemperature` controller (E3) after every optimizer step.

    Reads the trainer's logged mean token entropy (``entropy`` metric) and sets the temperature of the next
    generation *and* of the loss's log-probabilities (:func:`set_temperature`). Pass it in
    ``AllocatingGRPOTrainer(callbacks=[...])`` (the trainer binds itself) or call :meth:`attach` on any
    ``GRPOTrainer``.

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
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)
        return self

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.trainer is None:
            raise RuntimeError(
                "TemperatureCallback is not bound to a trainer: pass it to AllocatingGRPOTrainer(callbacks=[...]) "
                "or call TemperatureCallback(...).attach(trainer) on a plain GRPOTrainer"
            )

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        trainer = self.trainer
        if trainer is None:
            return
        entropies = trainer._metrics["train"].get("entropy", [])
        if not entropies:
            return
        temperature = self.controller.decide({"entropy": float(entropies[-1])})
        set_temperature(trainer, temperature)
        self.history.append(temperature)
