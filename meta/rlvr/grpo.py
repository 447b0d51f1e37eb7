"""A compact GRPO trainer for small causal LMs, with per-prompt allocators and exact cost accounting.

One step (Shao et al. 2024, GRPO; Yu et al. 2025, DAPO):

1. draw ``prompts_per_step`` prompts; the allocator (:mod:`meta.rlvr.allocators`) sets each prompt's first-stage
   count, then, stage by stage, how many more responses each prompt gets given this step's rewards so far;
2. sample with a KV cache (:mod:`meta.rlvr.sampling`) and score every response with the verifier;
3. optionally inject buffered correct responses into all-wrong groups (AR3PO response reuse) and drop
   zero-variance groups, refilling with fresh prompts (DAPO dynamic sampling);
4. advantages per group of *any* size ``n``: ``grpo``: ``A = (r − mean) / (std + ε)`` (population std),
   ``dr_grpo``: ``A = r − mean`` (Liu et al. 2025, Dr. GRPO, eq. 4);
5. clipped surrogate ``−min(ρA, clip(ρ, 1−ε_low, 1+ε_high)A)`` with clip-higher ``ε_high > ε_low`` (DAPO §3.1),
   averaged per sequence then over sequences (``loss="sequence"``, GRPO eq. 3) or over all tokens of the batch
   (``loss="dapo"``, DAPO eq. 12), plus an optional ``β·KL`` to a frozen reference (k3 estimator, Schulman 2020).

Cost accounting (:class:`CostLedger`) is exact: responses and completion tokens generated (EOS included), prompt
tokens read (each prompt once per stage in which it is sampled, as a prefix-caching server would; the part due to
stages after the first kept apart), responses and tokens in dropped groups, and reused responses counted separately
(they cost no generation).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from envs.reasoning import Task, verify
from meta.rlvr.allocators import Allocator, is_mixed
from meta.rlvr.clipping import BalancedClip
from meta.rlvr.length_penalty import AdaptiveLengthPenalty
from meta.rlvr.reuse import ResponseBuffer
from meta.rlvr.sampling import sample, sequence_logprobs
from meta.rlvr.stats import StatsTable
from meta.rlvr.temperature import EntropyTemperature
from meta.rlvr.vocab import CharVocab


@dataclass
class GRPOConfig:
    """Trainer settings.

    Attributes:
        prompts_per_step: Prompts (groups) per step.
        max_new_tokens: Most tokens per response (EOS included).
        temperature: Sampling temperature (a temperature controller may change it).
        lr: AdamW learning rate.
        advantage: ``"grpo"`` (std-normalised) or ``"dr_grpo"`` (mean-centred only).
        loss: ``"sequence"`` (per-sequence mean) or ``"dapo"`` (token-level).
        clip_low: ``ε_low``.
        clip_high: ``ε_high`` (clip-higher when larger than ``ε_low``).
        kl_coef: ``β`` of the KL penalty to the initial policy (0 disables it and the reference copy).
        updates_per_step: Optimizer steps on each batch (ratios differ from 1 from the second on).
        max_grad_norm: Gradient clipping.
        reuse_capacity: Correct responses kept per prompt when the allocator asks for reuse.
        seed: Seed for prompt order and sampling.
    """

    prompts_per_step: int = 16
    max_new_tokens: int = 8
    temperature: float = 1.0
    lr: float = 1e-3
    advantage: Literal["grpo", "dr_grpo"] = "grpo"
    loss: Literal["sequence", "dapo"] = "dapo"
    clip_low: float = 0.2
    clip_high: float = 0.28
    kl_coef: float = 0.0
    updates_per_step: int = 1
    max_grad_norm: float = 1.0
    reuse_capacity: int = 4
    seed: int = 0


@dataclass
class CostLedger:
    """Cumulative rollout cost.

    Attributes:
        responses: Responses generated.
        completion_tokens: Tokens generated (EOS included).
        prompt_tokens: Prompt tokens read (each prompt once per stage it is sampled in).
        prompt_tokens_extra_stages: The part of ``prompt_tokens`` from stages after the first.
        dropped_responses: Generated responses in groups left out of the loss.
        dropped_tokens: Their completion tokens.
        reused_responses: Buffered responses injected (not generated).
        reused_tokens: Their tokens.
        groups: Generated groups.
        zero_variance_groups: Generated groups whose rewards were all equal.
    """

    responses: int = 0
    completion_tokens: int = 0
    prompt_tokens: int = 0
    prompt_tokens_extra_stages: int = 0
    dropped_responses: int = 0
    dropped_tokens: int = 0
    reused_responses: int = 0
    reused_tokens: int = 0
    groups: int = 0
    zero_variance_groups: int = 0

    def as_dict(self) -> dict[str, int]:
        """Plain-data copy."""
        return asdict(self)


@dataclass
class Response:
    """One response: completion token ids, verifier reward, and whether it was reused from the buffer."""

    tokens: list[int]
    reward: float
    reused: bool = False


@dataclass
class Group:
    """A prompt and its responses this step."""

    task: Task
    prompt_ids: list[int]
    responses: list[Response] = field(default_factory=list)

    @property
    def rewards(self) -> list[float]:
        return [r.reward for r in self.responses]


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


RewardFn = Callable[[Task, str], float]


class GRPOTrainer:
    """GRPO with a pluggable per-prompt allocator.

    Args:
        model: Causal LM (Hugging Face ``PreTrainedModel`` or a module with the same forward).
        vocab: Encodes prompts, decodes completions.
        tasks: Training prompt pool, visited in shuffled epochs.
        allocator: Decides responses per prompt (and stages, dropping, reuse).
        config: :class:`GRPOConfig`.
        reward_fn: ``(task, completion_text) -> reward``; exact-match :func:`envs.reasoning.verify` by default.
        temperature_controller: Optional E3 temperature controller, updated from each step's token entropy.
        length_penalty: Optional ALP shaping of the rewards used for advantages (statistics keep raw rewards).
        clip_controller: Optional BAPO controller setting the ratio bounds from each update's ratios.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        vocab: CharVocab,
        tasks: Sequence[Task],
        allocator: Allocator,
        config: GRPOConfig | None = None,
        *,
        reward_fn: RewardFn = verify,
        temperature_controller: EntropyTemperature | None = None,
        length_penalty: AdaptiveLengthPenalty | None = None,
        clip_controller: BalancedClip | None = None,
    ) -> None:
        if not tasks:
            raise ValueError("the task pool is empty")
        self.cfg = config or GRPOConfig()
        if self.cfg.loss not in ("sequence", "dapo"):
            raise ValueError(f"loss must be 'sequence' or 'dapo', got {self.cfg.loss!r}")
        group_advantages([], self.cfg.advantage)  # validates the advantage kind
        self.model = model
        self.vocab = vocab
        self.tasks = list(tasks)
        self.allocator = allocator
        self.reward_fn = reward_fn
        self.temperature_controller = temperature_controller
        self.length_penalty = length_penalty
        self.clip_controller = clip_controller
        self.temperature = temperature_controller.temperature if temperature_controller else self.cfg.temperature
        self.stats = StatsTable()
        self.buffer = ResponseBuffer(self.cfg.reuse_capacity) if getattr(allocator, "reuse", False) else None
        self.costs = CostLedger()
        self.rng = np.random.default_rng(self.cfg.seed)
        self.generator = torch.Generator().manual_seed(self.cfg.seed)
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=self.cfg.lr, weight_decay=0.0)
        self.ref_model = copy.deepcopy(model).eval() if self.cfg.kl_coef > 0 else None
        self.suppress = (vocab.pad_id, vocab.bos_id)
        self.num_steps = 0
        self._order = self.rng.permutation(len(self.tasks))
        self._cursor = 0

    # --- prompts -------------------------------------------------------------------------------------------------
    def _draw(self, n: int) -> list[Task]:
        out: list[Task] = []
        while len(out) < n:
            if self._cursor == len(self._order):
                self._order = self.rng.permutation(len(self.tasks))
                self._cursor = 0
                self.allocator.end_epoch()
            take = min(n - len(out), len(self._order) - self._cursor)
            out += [self.tasks[int(i)] for i in self._order[self._cursor : self._cursor + take]]
            self._cursor += take
        return out

    # --- rollout -------------------------------------------------------------------------------------------------
    def _sample_stage(self, groups: Sequence[Group], counts: Sequence[int], stage: int) -> list[float]:
        rows = [i for i, c in enumerate(counts) for _ in range(int(c))]
        if not rows:
            return []
        out = sample(
            self.model,
            [groups[i].prompt_ids for i in rows],
            max_new_tokens=self.cfg.max_new_tokens,
            eos_id=self.vocab.eos_id,
            pad_id=self.vocab.pad_id,
            temperature=self.temperature,
            generator=self.generator,
            suppress=self.suppress,
        )
        for i, c in enumerate(counts):
            if c > 0:
                self.costs.prompt_tokens += len(groups[i].prompt_ids)
                if stage > 0:
                    self.costs.prompt_tokens_extra_stages += len(groups[i].prompt_ids)
        for i, tokens in zip(rows, out.completions, strict=True):
            reward = float(self.reward_fn(groups[i].task, self.vocab.decode(tokens)))
            groups[i].responses.append(Response(tokens, reward))
            self.costs.responses += 1
            self.costs.completion_tokens += len(tokens)
        return [out.mean_entropy] * len(rows)

    def _rollout(self, tasks: Sequence[Task]) -> tuple[list[Group], list[float]]:
        """Run the allocator's stages for ``tasks``; returns the groups and per-response entropies."""
        groups = [Group(t, self.vocab.encode(t.prompt, bos=True)) for t in tasks]
        keys = [t.prompt for t in tasks]
        counts = self.allocator.initial(keys, self.stats)
        entropies: list[float] = []
        stage = 0
        while any(c > 0 for c in counts) and stage < self.allocator.max_stages:
            entropies += self._sample_stage(groups, counts, stage)
            stage += 1
            counts = self.allocator.extra(keys, [g.rewards for g in groups], stage)
        for g in groups:
            if g.responses:
                self.stats.update(g.task.prompt, g.rewards, [len(r.tokens) for r in g.responses])
                self.costs.groups += 1
                self.costs.zero_variance_groups += int(not is_mixed(g.rewards))
        if self.buffer is not None:
            for g in groups:
                if g.responses and max(g.rewards) < self.buffer.success_threshold:
                    stored = self.buffer.get(g.task.prompt)
                    if stored is not None:
                        g.responses.append(Response(stored, 1.0, reused=True))
                        self.costs.reused_responses += 1
                        self.costs.reused_tokens += len(stored)
                else:
                    generated = [r for r in g.responses if not r.reused]
                    self.buffer.add(g.task.prompt, [r.tokens for r in generated], [r.reward for r in generated])
        return groups, entropies

    def _drop(self, groups: Sequence[Group]) -> None:
        for g in groups:
            generated = [r for r in g.responses if not r.reused]
            self.costs.dropped_responses += len(generated)
            self.costs.dropped_tokens += sum(len(r.tokens) for r in generated)

    # --- one step ------------------------------------------------------------------------------------------------
    def step(self) -> dict[str, Any]:
        """One GRPO step; returns step metrics (the cumulative :attr:`costs` are updated in place)."""
        groups, entropies = self._rollout(self._draw(self.cfg.prompts_per_step))
        keep = self.allocator.keep([g.rewards for g in groups])
        kept = [g for g, k in zip(groups, keep, strict=True) if k]
        self._drop([g for g, k in zip(groups, keep, strict=True) if not k])
        generated_groups = len(groups)
        mixed_groups = sum(is_mixed(g.rewards) for g in groups)
        rounds = 0
        max_rounds = int(getattr(self.allocator, "max_rounds", 0))
        while self.allocator.refill and len(kept) < self.cfg.prompts_per_step and rounds < max_rounds:
            more, ent = self._rollout(self._draw(self.cfg.prompts_per_step - len(kept)))
            entropies += ent
            keep = self.allocator.keep([g.rewards for g in more])
            kept += [g for g, k in zip(more, keep, strict=True) if k]
            self._drop([g for g, k in zip(more, keep, strict=True) if not k])
            generated_groups += len(more)
            mixed_groups += sum(is_mixed(g.rewards) for g in more)
            rounds += 1
        if len(kept) > self.cfg.prompts_per_step:
            self._drop(kept[self.cfg.prompts_per_step :])
            kept = kept[: self.cfg.prompts_per_step]
        loss = self._update(kept)
        mean_entropy = float(np.mean(entropies)) if entropies else 0.0
        if self.temperature_controller is not None and entropies:
            self.temperature = self.temperature_controller.decide({"entropy": mean_entropy})
        self.num_steps += 1
        rewards = [r.reward for g in groups for r in g.responses if not r.reused]
        return {
            "step": self.num_steps,
            "loss": loss,
            "reward_mean": float(np.mean(rewards)) if rewards else 0.0,
            "groups_generated": generated_groups,
            "groups_mixed": mixed_groups,
            "groups_kept": len(kept),
            "refill_rounds": rounds,
            "entropy": mean_entropy,
            "temperature": self.temperature,
            **{f"cost/{k}": v for k, v in self.costs.as_dict().items()},
        }

    def _shaped_rewards(self, g: Group) -> list[float]:
        if self.length_penalty is None:
            return g.rewards
        return self.length_penalty.shape(g.rewards, [len(r.tokens) for r in g.responses])

    def _update(self, groups: Sequence[Group]) -> float:
        """Policy-gradient update on ``groups``; returns the last loss value (0.0 when nothing to learn from)."""
        prompts: list[list[int]] = []
        completions: list[list[int]] = []
        advantages: list[float] = []
        total_tokens = 0
        total_rows = 0
        for g in groups:
            adv = group_advantages(self._shaped_rewards(g), self.cfg.advantage)
            for r, a in zip(g.responses, adv, strict=True):
                total_tokens += len(r.tokens)
                total_rows += 1
                # Zero-advantage rows add nothing to the policy-gradient term; they only count in the normaliser,
                # so they are skipped in the forward pass unless a KL term needs them.
                if (a != 0.0 or self.ref_model is not None) and r.tokens:
                    prompts.append(g.prompt_ids)
                    completions.append(r.tokens)
                    advantages.append(a)
        if not completions or total_tokens == 0:
            return 0.0
        adv_t = torch.tensor(advantages, dtype=torch.float32).unsqueeze(1)
        old_logp: torch.Tensor | None = None
        ref_logp: torch.Tensor | None = None
        if self.cfg.updates_per_step > 1:
            with torch.no_grad():
                old_logp, _ = self._logprobs(self.model, prompts, completions)
        if self.ref_model is not None:
            with torch.no_grad():
                ref_logp, _ = self._logprobs(self.ref_model, prompts, completions)
        self.model.train()
        loss_value = 0.0
        for _ in range(self.cfg.updates_per_step):
            logp, mask = self._logprobs(self.model, prompts, completions)
            # With one update per batch the sampling policy *is* the current one, so the ratio is exactly 1; reused
            # responses get the same treatment (AR3PO: current policy as the old one).
            old = logp.detach() if old_logp is None else old_logp
            ratio = torch.exp(logp - old)
            low, high = 1.0 - self.cfg.clip_low, 1.0 + self.cfg.clip_high
            if self.clip_controller is not None:
                low, high = self.clip_controller.decide(
                    {
                        "ratios": ratio.detach()[mask > 0].numpy(),
                        "advantages": adv_t.expand_as(ratio)[mask > 0].numpy(),
                    }
                )
            per_token = -torch.min(ratio * adv_t, torch.clamp(ratio, low, high) * adv_t)
            if ref_logp is not None:
                delta = ref_logp - logp
                per_token = per_token + self.cfg.kl_coef * (torch.exp(delta) - delta - 1.0)
            if self.cfg.loss == "dapo":
                loss = (per_token * mask).sum() / total_tokens
            else:
                loss = ((per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)).sum() / total_rows
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.max_grad_norm)
            self.optimizer.step()
            loss_value = float(loss.detach())
        return loss_value

    def _logprobs(
        self, model: torch.nn.Module, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return sequence_logprobs(
            model, prompts, completions, self.vocab.pad_id, temperature=self.temperature, suppress=self.suppress
        )

    # --- evaluation ----------------------------------------------------------------------------------------------
    def evaluate(self, tasks: Sequence[Task], batch_size: int = 256) -> float:
        """Greedy-decoding accuracy on ``tasks`` (held-out set), in [0, 1]."""
        if not tasks:
            return math.nan
        correct = 0.0
        for start in range(0, len(tasks), batch_size):
            chunk = tasks[start : start + batch_size]
            out = sample(
                self.model,
                [self.vocab.encode(t.prompt, bos=True) for t in chunk],
                max_new_tokens=self.cfg.max_new_tokens,
                eos_id=self.vocab.eos_id,
                pad_id=self.vocab.pad_id,
                temperature=0.0,
                suppress=self.suppress,
            )
            correct += sum(self.reward_fn(t, self.vocab.decode(c)) for t, c in zip(chunk, out.completions, strict=True))
        return correct / len(tasks)
