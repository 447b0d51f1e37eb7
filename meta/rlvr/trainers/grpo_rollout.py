"""The rollout half of the compact GRPO trainer (:class:`GRPORollout`, a base of
:class:`~meta.rlvr.trainers.grpo.GRPOTrainer`):
the allocator's stages sampled with the KV-cache sampler, EEPO's two-stage and
the branching (ARPO/EHPO) rollouts, the verifier's scores, response reuse, the guidance interface
(:class:`meta.rlvr.guidance.GuidedTrainer`) and the exact cost accounting of everything sampled."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from envs.reasoning import Task
from meta.rlvr.allocators import Allocator, is_mixed
from meta.rlvr.allocators.reuse import ResponseBuffer
from meta.rlvr.allocators.staging import CostLedger, reuse_or_store, run_stages
from meta.rlvr.allocators.stats import StatsTable
from meta.rlvr.guidance import Guidance
from meta.rlvr.lm.sampling import Samples, ToolHook, sample
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.token.arpo import BranchingRollout
from meta.rlvr.token.eepo import EEPO, perturbed
from meta.rlvr.token.hapo import HAPO
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.grpo_groups import Group, Response, RewardFn

#: Part of a stage's sampling: group index per row, the samples, and ARPO's (family, shared tokens) per row.
_Part = tuple[list[int], Samples, list[tuple[int, int]] | None]


class GRPORollout:
    """Sampling and scoring a step's groups; ``GRPOTrainer`` sets the attributes below in its
    constructor (this class has none of its own and is not used alone)."""

    cfg: GRPOConfig
    model: torch.nn.Module
    vocab: CharVocab
    allocator: Allocator
    reward_fn: RewardFn
    stats: StatsTable
    buffer: ResponseBuffer | None
    costs: CostLedger
    rng: np.random.Generator
    generator: torch.Generator
    temperature: float
    suppress: tuple[int, int]
    tool: ToolHook | None
    token_controller: HAPO | None
    eepo: EEPO | None
    branching: BranchingRollout | None
    guidance: Guidance | None
    _entropy_sink: list[float]

    # --- rollout -------------------------------------------------------------------------------------------------
    def _generate(
        self,
        groups: Sequence[Group],
        rows: Sequence[int],
        prefixes: Sequence[Sequence[int]] | None = None,
        max_new_tokens: int | None = None,
    ) -> Samples:
        """One response for each row (a group index per row), continuing ``prefixes`` (ARPO's branches) if given."""
        prompts = [groups[i].prompt_ids for i in rows]
        if prefixes is not None:
            prompts = [p + list(q) for p, q in zip(prompts, prefixes, strict=True)]
        return sample(
            self.model,
            prompts,
            max_new_tokens=max_new_tokens or self.cfg.max_new_tokens,
            eos_id=self.vocab.eos_id,
            pad_id=self.vocab.pad_id,
            temperature=self.temperature,
            generator=self.generator,
            suppress=self.suppress,
            tool=self.tool,
            token_temperature=self._token_temperature if self.token_controller is not None else None,
            record_entropies=self.branching is not None,
        )

    def _generate_eepo(self, groups: Sequence[Group], counts: Sequence[int]) -> list[tuple[list[int], Samples]]:
        """EEPO's two-stage rollout: ⌈n/2⌉ per group, the gated unlearning step, ⌊n/2⌋ more, weights restored."""
        assert self.eepo is not None
        first = [i for i, c in enumerate(counts) for _ in range((int(c) + 1) // 2)]
        second = [i for i, c in enumerate(counts) for _ in range(int(c) // 2)]
        out = self._generate(groups, first)
        parts = [(first, out)]
        if second:
            if self.eepo.decide({"entropy": out.mean_entropy}):
                prompts = [groups[i].prompt_ids for i in first]
                with perturbed(
                    self.model,
                    prompts,
                    out.completions,
                    lr=self.eepo.lr,
                    pad_id=self.vocab.pad_id,
                    temperature=self.temperature,
                    suppress=self.suppress,
                ):
                    parts.append((second, self._generate(groups, second)))
            else:
                parts.append((second, self._generate(groups, second)))
        return parts

    def _generate_branching(self, groups: Sequence[Group], counts: Sequence[int]) -> list[_Part]:
        """The branching rollout (:mod:`meta.rlvr.token.arpo`): ``⌈n/2⌉`` whole responses per group, branches at the
        controller's points, drawn with its probabilities, whole responses for the budget left; ``n`` in all."""
        arpo = self.branching
        assert arpo is not None
        family = self.costs.responses  # unique ids: responses generated before this stage
        first = [i for i, c in enumerate(counts) for _ in range(arpo.initial_count(c))]
        out = self._generate(groups, first)
        parts: list[_Part] = [(first, out, [(family + k, 0) for k in range(len(first))])]
        left = [int(c) - arpo.initial_count(c) for c in counts]
        rows, prefixes, forks = [], [], []
        for k, (i, tokens) in enumerate(zip(first, out.completions, strict=True)):
            flags = out.inserted[k] if out.inserted else [0] * len(tokens)
            pieces = [self.vocab.decode([t]) for t in tokens]
            for p, prob in arpo.branch_points(pieces, flags, out.entropies[k]):
                if left[i] <= 0 or not 0 < p < self.cfg.max_new_tokens:
                    continue
                z = min(arpo.branches, left[i]) if self.rng.random() < prob else 0
                arpo.record(z)
                left[i] -= z
                rows += [i] * z
                prefixes += [tokens[:p]] * z
                forks += [(family + k, p)] * z
        if rows:
            # One batch for every branch, as long as the longest one may run; each is then cut to its own budget.
            budget = self.cfg.max_new_tokens - min(len(q) for q in prefixes)
            more = self._generate(groups, rows, prefixes, budget)
            cut = [self.cfg.max_new_tokens - len(q) for q in prefixes]
            root_flags = [
                out.inserted[f - family] if out.inserted else [0] * len(q)
                for (f, _), q in zip(forks, prefixes, strict=True)
            ]
            root_ents = [out.entropies[f - family] for f, _ in forks]
            more = Samples(
                [q + c[:n] for q, c, n in zip(prefixes, more.completions, cut, strict=True)],
                more.mean_entropy,
                # Without a tool nothing is inserted and the samples carry no flags (EHPO on a tool-free family).
                [f[: len(q)] + g[:n] for f, q, g, n in zip(root_flags, prefixes, more.inserted, cut, strict=True)]
                if more.inserted
                else [],
                [],
                [e[: len(q)] + h[:n] for e, q, h, n in zip(root_ents, prefixes, more.entropies, cut, strict=True)],
            )
            parts.append((rows, more, forks))
        whole = [i for i, n in enumerate(left) for _ in range(n)]
        if whole:
            arpo.record(0, supplemented=len(whole))
            start = family + len(first) + len(rows)
            parts.append((whole, self._generate(groups, whole), [(start + k, 0) for k in range(len(whole))]))
        return parts

    def _sample_stage(self, groups: Sequence[Group], counts: Sequence[int], stage: int) -> list[float]:
        rows = [i for i, c in enumerate(counts) for _ in range(int(c))]
        if not rows:
            return []
        if self.branching is not None:
            parts = self._generate_branching(groups, counts)
        else:
            plain = (
                self._generate_eepo(groups, counts) if self.eepo is not None else [(rows, self._generate(groups, rows))]
            )
            parts = [(r, o, None) for r, o in plain]
        for i, c in enumerate(counts):
            if c > 0:
                self.costs.prompt_tokens += len(groups[i].prompt_ids)
                if stage > 0:
                    self.costs.prompt_tokens_extra_stages += len(groups[i].prompt_ids)
        entropies: list[float] = []
        for part_rows, out, forks in parts:
            for k, (i, tokens) in enumerate(zip(part_rows, out.completions, strict=True)):
                reward = float(self.reward_fn(groups[i].task, self.vocab.decode(tokens)))
                inserted = out.inserted[k] if self.tool is not None else None
                response = Response(tokens, reward, inserted=inserted)
                if out.temperatures:
                    response.temperatures, response.entropies = out.temperatures[k], out.entropies[k]
                if forks is not None:
                    response.family, response.shared = forks[k]
                groups[i].responses.append(response)
                self.costs.responses += 1
                self.costs.completion_tokens += len(tokens) - response.shared  # a branch's prefix is cached
            entropies += [out.mean_entropy] * len(part_rows)
        return entropies

    # --- guidance interface (meta.rlvr.guidance.GuidedTrainer) -----------------------------------------------------
    def reward(self, task: Task, text: str) -> float:
        """The verifier's reward of a completion text (``reward_fn``)."""
        return float(self.reward_fn(task, text))

    def generate_for(self, contexts: Sequence[list[int]]) -> list[list[int]]:
        """One sampled completion per context (prompt ids with a hint or a budget), for a guidance controller.

        Counted in the ledger like a stage: the responses, their tokens, and each distinct context's tokens once
        (a prefix-caching server reads a repeated context once).
        """
        if not contexts:
            return []
        out = sample(
            self.model,
            contexts,
            max_new_tokens=self.cfg.max_new_tokens,
            eos_id=self.vocab.eos_id,
            pad_id=self.vocab.pad_id,
            temperature=self.temperature,
            generator=self.generator,
            suppress=self.suppress,
        )
        self.costs.responses += len(contexts)
        self.costs.completion_tokens += sum(len(c) for c in out.completions)
        self.costs.prompt_tokens += sum(len(c) for c in {tuple(c) for c in contexts})
        self._entropy_sink += [out.mean_entropy] * len(contexts)
        return out.completions

    @staticmethod
    def add_response(
        group: Group,
        tokens: list[int],
        reward: float,
        *,
        context: list[int] | None = None,
        forced: int = 0,
        condition: int | None = None,
    ) -> None:
        """Append a scored response to ``group`` (see :class:`~meta.rlvr.trainers.grpo_groups.Response` for ``context``,
        ``forced`` and ``condition``)."""
        if not 0 <= forced <= len(tokens):
            raise ValueError(f"forced must be in 0..{len(tokens)}, got {forced}")
        group.responses.append(Response(tokens, reward, context=context, forced=forced, condition=condition))

    def _rollout(self, tasks: Sequence[Task]) -> tuple[list[Group], list[float]]:
        """Run the allocator's stages for ``tasks``; returns the groups and per-response entropies."""
        groups = [Group(t, self.vocab.encode(t.prompt, bos=True)) for t in tasks]
        keys = [t.prompt for t in tasks]
        entropies: list[float] = []

        def generate(counts: list[int], stage: int) -> None:
            entropies.extend(self._sample_stage(groups, counts, stage))

        def stages() -> None:
            run_stages(self.allocator, keys, self.stats, generate, lambda: [g.rewards for g in groups])

        if self.guidance is not None:
            self._entropy_sink = entropies
            self.guidance.rollout(self, groups, stages)
        else:
            stages()
        for g in groups:
            if g.responses:
                self.stats.update(g.task.prompt, g.rewards, [len(r.tokens) for r in g.responses])
                self.costs.groups += 1
                self.costs.zero_variance_groups += int(not is_mixed(g.rewards))
        if self.buffer is not None:
            for g in groups:
                stored = reuse_or_store(self.buffer, g.task.prompt, [r.tokens for r in g.responses], g.rewards)
                if stored is not None:
                    # The verifier's reward from when it was stored, not a fixed 1.0: rewards on another scale
                    # (or with partial credit) keep the group's advantages on the fresh responses' scale.
                    g.responses.append(Response(stored.tokens, stored.reward, reused=True))
                    self.costs.reused_responses += 1
                    self.costs.reused_tokens += len(stored.tokens)
        return groups, entropies

    def _drop(self, groups: Sequence[Group]) -> None:
        for g in groups:
            generated = [r for r in g.responses if not r.reused]
            self.costs.dropped_responses += len(generated)
            self.costs.dropped_tokens += sum(len(r.tokens) for r in generated)

    def _token_temperature(self, entropy: torch.Tensor) -> torch.Tensor:
        assert self.token_controller is not None
        temps = self.token_controller.temperatures(entropy.detach().cpu().numpy(), self.temperature)
        return torch.as_tensor(temps, dtype=torch.float32)
