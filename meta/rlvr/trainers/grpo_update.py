"""The update half of the compact GRPO trainer (:class:`GRPOUpdate`, a base of
:class:`~meta.rlvr.trainers.grpo.GRPOTrainer`):
group advantages (shaped rewards, HAPO's token-level ones, a guidance controller's own), the ratio bounds, and the
minibatched clipped policy-gradient update with its fixed behaviour and reference log-probabilities, per-token
temperatures and clip bounds (HAPO), tool-insertion masks and the branching rollout's shared prefixes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from meta.rlvr.allocators.staging import CostLedger
from meta.rlvr.guidance import Guidance
from meta.rlvr.lm.sampling import sequence_logprobs
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.token.arpo import BranchingRollout, prefix_advantages
from meta.rlvr.token.clipping import BalancedClip
from meta.rlvr.token.hapo import HAPO, token_group_advantages
from meta.rlvr.token.length_penalty import AdaptiveLengthPenalty
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.grpo_groups import Group, Response
from meta.rlvr.trainers.grpo_loss import aggregate_loss, group_advantages, loss_normaliser


@dataclass
class _Minibatch:
    """Rows of one optimizer step with their fixed behaviour / reference log-probabilities."""

    prompts: list[list[int]]
    completions: list[list[int]]
    advantages: torch.Tensor  # (rows, 1), or (rows, width) per token (ARPO's shared prefixes)
    old_logp: torch.Tensor | None  # None: on-policy (one step per batch), the ratio is exactly 1
    ref_logp: torch.Tensor | None
    policy_mask: torch.Tensor | None = None  # (rows, width), 0 on tool-inserted tokens; None: no tool insertions
    temperatures: torch.Tensor | None = None  # (rows, width) per-token sampling temperatures (HAPO), 1 past the end
    eps_low: torch.Tensor | None = None  # (rows, width) per-token clip bounds (HAPO)
    eps_high: torch.Tensor | None = None


#: A learning row: prompt ids, completion ids, advantage (one, or per token), 0/1 flags of tokens out of the loss.
_Row = tuple[list[int], list[int], float | list[float], list[int] | None]


class GRPOUpdate:
    """Advantages and the policy update of a step's kept groups; :class:`~meta.rlvr.trainers.grpo.GRPOTrainer` sets the
    attributes below in its constructor (this class has none of its own and is not used alone)."""

    cfg: GRPOConfig
    loss_kind: str
    device: torch.device
    model: torch.nn.Module
    ref_model: torch.nn.Module | None
    optimizer: torch.optim.Optimizer
    vocab: CharVocab
    costs: CostLedger
    temperature: float
    suppress: tuple[int, int]
    token_controller: HAPO | None
    clip_controller: BalancedClip | None
    length_penalty: AdaptiveLengthPenalty | None
    branching: BranchingRollout | None
    guidance: Guidance | None

    def _shaped_rewards(self, g: Group) -> list[float]:
        if self.branching is not None:
            return self.branching.shape(g.rewards, [r.policy_tokens for r in g.responses])
        if self.length_penalty is None:
            return g.rewards
        return self.length_penalty.shape(g.rewards, [len(r.tokens) for r in g.responses])

    def _advantages(self, g: Group) -> list[float]:
        if self.guidance is not None:
            own = self.guidance.advantages(g, self.cfg.advantage)
            if own is not None:
                return own
        rewards = self._shaped_rewards(g)
        if self.token_controller is not None and self.token_controller.token_advantage:
            lengths = [r.policy_tokens for r in g.responses]
            return token_group_advantages(rewards, lengths, std=self.cfg.advantage == "grpo")
        return group_advantages(rewards, self.cfg.advantage)

    def _bounds(self, ratio: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor) -> tuple[float, float]:
        if self.clip_controller is None:
            return 1.0 - self.cfg.clip_low, 1.0 + self.cfg.clip_high
        return self.clip_controller.decide(
            {
                "ratios": ratio.detach()[mask > 0].cpu().numpy(),
                "advantages": adv.expand_as(ratio)[mask > 0].cpu().numpy(),
            }
        )

    def _update(self, groups: Sequence[Group]) -> dict[str, float]:
        """Minibatched clipped policy-gradient update on ``groups``; returns the update metrics of
        :meth:`~meta.rlvr.trainers.grpo.GRPOTrainer.step`."""
        low, high = 1.0 - self.cfg.clip_low, 1.0 + self.cfg.clip_high
        metrics: dict[str, float] = {
            "loss": 0.0,
            "optimizer_steps": 0,
            "clip_fraction": 0.0,
            "ratio_min": 1.0,
            "ratio_max": 1.0,
            "clip_low": low,
            "clip_high": high,
        }
        rows: list[_Row] = []
        responses: list[Response] = []
        lengths: list[int] = []
        for g in groups:
            adv = self._advantages(g)
            if self.branching is not None:
                self._branching_rows(g, adv, rows, responses, lengths)
                continue
            for r, a in zip(g.responses, adv, strict=True):
                # Tokens a tool inserted are not the model's choice: they count neither here nor in the loss.
                lengths.append(r.policy_tokens)
                # Zero-advantage rows add nothing to the policy-gradient term; they only count in the normaliser,
                # so they are skipped in the forward pass unless a KL term needs them.
                if (a != 0.0 or self.ref_model is not None) and r.tokens:
                    prompt = g.prompt_ids if r.context is None else r.context
                    rows.append((prompt, r.tokens, a, r.inserted if r.inserted and any(r.inserted) else None))
                    responses.append(r)
        self.costs.rows_trained += len(lengths)
        self.costs.tokens_trained += sum(lengths)
        if not rows or sum(lengths) == 0:
            return metrics
        chunks = [c for c in np.array_split(np.arange(len(rows)), min(self.cfg.minibatches, len(rows))) if c.size]
        # Each minibatch's loss is its part of the batch loss times the number of minibatches: at the sampling policy
        # the minibatch losses average to the full-batch loss, and one minibatch is exactly the full-batch step.
        normaliser = loss_normaliser(self.loss_kind, lengths, self.cfg.max_new_tokens) / len(chunks)
        off_policy = len(chunks) * self.cfg.epochs > 1
        self.model.train()
        batches: list[_Minibatch] = []
        with torch.no_grad():
            for idx in chunks:
                prompts = [rows[int(i)][0] for i in idx]
                completions = [rows[int(i)][1] for i in idx]
                mb = _Minibatch(prompts, completions, torch.zeros(0), None, None, self._policy_mask(rows, idx))
                self._token_rules(mb, [responses[int(i)] for i in idx])
                # π_old is the policy that sampled the batch: computed now, before any step, with the same rows and
                # padding as the minibatch's forward pass, so the first step's ratio is exactly 1. Reused responses
                # get the same treatment (AR3PO: the current policy as the old one).
                forced = [responses[int(i)].forced for i in idx]
                if off_policy or any(forced):
                    mb.old_logp = self._logprobs(self.model, prompts, completions, mb)[0]
                    # Guide: the hint tokens were given, not sampled: behaviour probability 1 (guidance.guide).
                    for j, f in enumerate(forced):
                        if f:
                            mb.old_logp[j, :f] = 0.0
                if self.ref_model is not None:
                    mb.ref_logp = self._logprobs(self.ref_model, prompts, completions, mb)[0]
                mb.advantages = self._advantage_tensor([rows[int(i)][2] for i in idx], completions)
                batches.append(mb)
        losses: list[float] = []
        clipped, counted = 0, 0
        ratio_min, ratio_max = math.inf, -math.inf
        for _ in range(self.cfg.epochs):
            for mb in batches:
                logp, mask = self._logprobs(self.model, mb.prompts, mb.completions, mb)
                if mb.policy_mask is not None:
                    mask = mask * mb.policy_mask
                # One optimizer step per batch: the sampling policy *is* the current one and the ratio is exactly 1.
                old_logp = logp.detach() if mb.old_logp is None else mb.old_logp
                ratio = torch.exp(logp - old_logp)
                a_t = mb.advantages
                if mb.eps_low is not None and mb.eps_high is not None:  # per-token bounds (HAPO)
                    low_t, high_t = 1.0 - mb.eps_low, 1.0 + mb.eps_high
                    clipped_ratio = torch.clamp(ratio, low_t, high_t)
                    low, high = float(low_t.mean()), float(high_t.mean())
                else:
                    low, high = self._bounds(ratio, a_t, mask)
                    clipped_ratio = torch.clamp(ratio, low, high)
                    low_t, high_t = torch.tensor(low), torch.tensor(high)
                per_token = -torch.min(ratio * a_t, clipped_ratio * a_t)
                if mb.ref_logp is not None:
                    delta = mb.ref_logp - logp
                    per_token = per_token + self.cfg.kl_coef * (torch.exp(delta) - delta - 1.0)
                loss = aggregate_loss(per_token, mask, self.loss_kind, normaliser)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.max_grad_norm)
                self.optimizer.step()
                losses.append(float(loss.detach()))
                with torch.no_grad():
                    tokens = mask > 0
                    learning = tokens & (a_t != 0).expand_as(mask)
                    rho = ratio.detach()
                    # The clip removes a token's gradient once its ratio is past the bound its advantage pushes toward.
                    cut = ((a_t > 0) & (rho > high_t.to(rho.device))) | ((a_t < 0) & (rho < low_t.to(rho.device)))
                    clipped += int((cut & learning).sum())
                    counted += int(learning.sum())
                    if bool(tokens.any()):
                        ratio_min = min(ratio_min, float(rho[tokens].min()))
                        ratio_max = max(ratio_max, float(rho[tokens].max()))
        metrics.update(
            loss=float(np.mean(losses)),
            optimizer_steps=len(losses),
            clip_fraction=clipped / counted if counted else 0.0,
            ratio_min=ratio_min if math.isfinite(ratio_min) else 1.0,
            ratio_max=ratio_max if math.isfinite(ratio_max) else 1.0,
            clip_low=float(low),
            clip_high=float(high),
        )
        return metrics

    def _branching_rows(
        self, g: Group, adv: Sequence[float], rows: list[_Row], responses: list[Response], lengths: list[int]
    ) -> None:
        """Branching rollout's learning rows of ``g``: per-token advantages over shared prefixes, counted once."""
        families = [r.family if r.family is not None else -1 - j for j, r in enumerate(g.responses)]
        token_adv, owned = prefix_advantages([r.tokens for r in g.responses], adv, families)
        for r, a, own in zip(g.responses, token_adv, owned, strict=True):
            flags = r.inserted or [0] * len(r.tokens)
            # Left out of the loss: the tool's insertions and the shared tokens another row owns.
            out = [int(f or not o) for f, o in zip(flags, own, strict=True)]
            lengths.append(len(out) - sum(out))
            if r.tokens and (self.ref_model is not None or any(x != 0.0 for x, o in zip(a, out, strict=True) if not o)):
                rows.append((g.prompt_ids, r.tokens, a, out if any(out) else None))
                responses.append(r)

    def _advantage_tensor(
        self, advantages: Sequence[float | list[float]], completions: Sequence[list[int]]
    ) -> torch.Tensor:
        """``(rows, 1)`` advantages, or ``(rows, width)`` when some row has per-token ones (zero past its end)."""
        if all(isinstance(a, float) for a in advantages):
            return torch.tensor(advantages, dtype=torch.float32, device=self.device).unsqueeze(1)
        width = max(max((len(c) for c in completions), default=0), 1)
        out = torch.zeros((len(advantages), width), dtype=torch.float32)
        for j, a in enumerate(advantages):
            if isinstance(a, float):
                out[j] = a
            else:
                out[j, : len(a)] = torch.tensor(a, dtype=torch.float32)
        return out.to(self.device)

    def _token_rules(self, mb: _Minibatch, responses: Sequence[Response]) -> None:
        """Fill ``mb``'s per-token temperatures and clip bounds from its responses (HAPO; no-op without it)."""
        if self.token_controller is None:
            return
        width = max(max(len(r.tokens) for r in responses), 1)
        temps = torch.ones((len(responses), width), dtype=torch.float32)
        h_hat = torch.zeros((len(responses), width), dtype=torch.float32)
        for j, r in enumerate(responses):
            if r.temperatures is not None and r.entropies is not None and r.tokens:
                temps[j, : len(r.tokens)] = torch.tensor(r.temperatures, dtype=torch.float32)
                # The statistics have not moved since this batch was sampled (they update after the step).
                h = self.token_controller.h_hat(np.asarray(r.entropies))
                h_hat[j, : len(r.tokens)] = torch.as_tensor(h, dtype=torch.float32)
        low, high = self.token_controller.clip_bounds(h_hat.numpy(), self.cfg.clip_low, self.cfg.clip_high)
        mb.temperatures = temps.to(self.device)
        mb.eps_low = torch.as_tensor(low, dtype=torch.float32).to(self.device)
        mb.eps_high = torch.as_tensor(high, dtype=torch.float32).to(self.device)

    def _policy_mask(self, rows: Sequence[_Row], idx: np.ndarray) -> torch.Tensor | None:
        """``(rows, width)`` mask, 0 on tool-inserted tokens, or ``None`` when no row of ``idx`` has insertions."""
        picked = [rows[int(i)] for i in idx]
        if all(r[3] is None for r in picked):
            return None
        width = max(max(len(r[1]) for r in picked), 1)
        out = torch.ones((len(picked), width), dtype=torch.float32)
        for j, r in enumerate(picked):
            if r[3] is not None:
                out[j, : len(r[3])] = 1.0 - torch.tensor(r[3], dtype=torch.float32)
        return out.to(self.device)

    def _logprobs(
        self,
        model: torch.nn.Module,
        prompts: Sequence[Sequence[int]],
        completions: Sequence[Sequence[int]],
        mb: _Minibatch | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        temperature: float | torch.Tensor = self.temperature
        if mb is not None and mb.temperatures is not None:
            temperature = mb.temperatures
        return sequence_logprobs(
            model, prompts, completions, self.vocab.pad_id, temperature=temperature, suppress=self.suppress
        )
