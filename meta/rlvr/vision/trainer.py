"""Training the pixel-reasoning policy: operation-aware SFT, then GRPO with a tool-use arm.

Operation-aware SFT (:func:`train_sft`): teacher-forced traces of both operations on every query kind, so the policy
learns *how* to answer and *how* to call the tool (zooming into the glyph's cell where the glyph is asked about, a
random cell elsewhere) but not *when*: a trace calls the tool with probability ``tool_share`` whatever the query.

GRPO (:class:`ZoomGRPOTrainer`) then teaches *when*, with the project's RLVR parts: the allocator
(:mod:`meta.rlvr.allocators`) sets each query's group size and which groups enter the loss, the prompt statistics are
its :class:`~meta.rlvr.allocators.stats.StatsTable`, the settings are a
:class:`~meta.rlvr.trainers.grpo_config.GRPOConfig` (with ``max_new_tokens=2``: a call and an answer), and the group
advantages, loss normalisers and aggregation are :mod:`meta.rlvr.trainers.grpo_loss`'s. The arm
(:mod:`meta.rlvr.vision.arms`) supplies the gate (tool forced, masked, or the policy's choice) and the reward of a
call. A response's reward is the verifier's 0/1 correctness plus, if it called the tool, the arm's call reward. For
the rollout-guided rule the trainer measures, per query, the policy's success with and without the tool from this
step's rollouts: the group's own responses of each kind plus ``probes`` extra responses of each kind sampled with the
gate forced (not trained on, counted in the rollout cost).

Everything the trainer draws from is in :meth:`ZoomGRPOTrainer.state_dict` (policy, optimizer, generators, prompt
order, statistics, allocator and arm state, counters), so a checkpointed run resumes bit-identically.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from envs.vision.zoom_queries import ANSWERS, verify
from meta.rlvr.allocators import Allocator
from meta.rlvr.allocators.stats import StatsTable
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.grpo_loss import aggregate_loss, group_advantages, loss_normaliser
from meta.rlvr.vision.arms import GateDecision, ToolArm
from meta.rlvr.vision.policy import N_ANSWERS, EncodedQueries, PixelPolicy, call_cell, is_call, response_text
from rolloutlab.run_state import generator_state, set_generator_state


def banned_actions(gates: Sequence[GateDecision], actions: int) -> torch.Tensor:
    """``(R, actions)`` bool: the first-decision tokens each row's gate forbids (answers for ``"zoom"``, calls for
    ``"answer"``, none for ``"policy"``)."""
    banned = torch.zeros(len(gates), actions, dtype=torch.bool)
    for i, gate in enumerate(gates):
        if gate == "zoom":
            banned[i, :N_ANSWERS] = True
        elif gate == "answer":
            banned[i, N_ANSWERS:] = True
    return banned


def _crops_for(data: EncodedQueries, rows: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
    """Each row's crop for its call token (cell 0's crop for answer rows, which never read it)."""
    cells = (first - N_ANSWERS).clamp(min=0)
    return data.crops[rows, cells]


def _log_probs(logits: torch.Tensor, banned: torch.Tensor, temperature: float) -> torch.Tensor:
    scaled = logits / temperature if temperature > 0 else logits
    return torch.log_softmax(scaled.masked_fill(banned, float("-inf")), dim=-1)


@torch.no_grad()
def sample_responses(
    policy: PixelPolicy,
    data: EncodedQueries,
    rows: Sequence[int],
    gates: Sequence[GateDecision],
    *,
    temperature: float,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One response per row: the first token under the row's gate, and after a call the answer given the crop.

    Args:
        policy: The policy.
        data: Encoded queries.
        rows: Query index of each response.
        gates: Gate decision of each response.
        temperature: Sampling temperature; 0 is greedy.
        generator: Torch generator of the draws.

    Returns:
        ``(first, second)``, both ``(R,)`` long; ``second`` is -1 where the first token was an answer.
    """
    was_training = policy.training
    policy.eval()
    idx = torch.as_tensor(list(rows), dtype=torch.long)
    banned = banned_actions(gates, policy.cfg.actions)
    logp = _log_probs(policy(data.views[idx], data.kinds[idx])[:, 0], banned, temperature)
    first = _draw(logp, temperature, generator)
    second = torch.full_like(first, -1)
    calls = (first >= N_ANSWERS).nonzero().flatten()
    if calls.numel():
        c_idx, c_first = idx[calls], first[calls]
        logits = policy(data.views[c_idx], data.kinds[c_idx], c_first, _crops_for(data, c_idx, c_first))[:, 1]
        after = torch.zeros(logits.shape[-1], dtype=torch.bool)
        after[N_ANSWERS:] = True
        second[calls] = _draw(_log_probs(logits, after.expand_as(logits), temperature), temperature, generator)
    policy.train(was_training)
    return first, second


def _draw(logp: torch.Tensor, temperature: float, generator: torch.Generator | None) -> torch.Tensor:
    if temperature <= 0:
        return logp.argmax(dim=-1)
    return torch.multinomial(logp.exp(), 1, generator=generator).squeeze(1)


def response_logprobs(
    policy: PixelPolicy,
    data: EncodedQueries,
    rows: Sequence[int],
    first: torch.Tensor,
    second: torch.Tensor,
    gates: Sequence[GateDecision],
    temperature: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probabilities of responses under the distributions they were sampled from (with gradients).

    Returns:
        ``(logp, mask)``, both ``(R, 2)``: the first token's and, for call rows, the answer's; ``mask`` is 1.0 on real
        tokens.
    """
    idx = torch.as_tensor(list(rows), dtype=torch.long)
    logits = policy(data.views[idx], data.kinds[idx], first, _crops_for(data, idx, first))
    banned_first = banned_actions(gates, policy.cfg.actions)
    banned_second = torch.zeros_like(banned_first)
    banned_second[:, N_ANSWERS:] = True
    lp_first = _log_probs(logits[:, 0], banned_first, temperature).gather(1, first.unsqueeze(1))
    has_second = second >= 0
    lp_second = _log_probs(logits[:, 1], banned_second, temperature).gather(1, second.clamp(min=0).unsqueeze(1))
    mask = torch.stack([torch.ones_like(has_second, dtype=torch.float32), has_second.float()], dim=1)
    logp = torch.cat([lp_first, lp_second.masked_fill(~has_second.unsqueeze(1), 0.0)], dim=1)
    return logp, mask


# --- operation-aware SFT -------------------------------------------------------------------------------------------


@dataclass
class PixelSFTConfig:
    """Operation-aware SFT settings.

    Attributes:
        steps: Optimizer steps.
        batch: Traces per step.
        lr: Adam learning rate.
        tool_share: Probability that a trace calls the tool, on every query kind alike.
        seed: Seed of the traces.
    """

    steps: int = 1200
    batch: int = 64
    lr: float = 3e-3
    tool_share: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        if self.steps < 0 or self.batch < 1 or self.lr <= 0 or not 0.0 <= self.tool_share <= 1.0:
            raise ValueError(f"need steps >= 0, batch >= 1, lr > 0 and tool_share in [0, 1], got {self}")


def operation_aware_traces(
    data: EncodedQueries, rng: np.random.Generator, batch: int, tool_share: float, grid: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch of SFT traces: ``(rows, first, second)`` as in :func:`sample_responses`.

    A trace calls the tool with probability ``tool_share``, whatever the query, zooming into the cell of the image's
    one small detail (the glyph's patch), and then answers; without a call it answers at once. The warm start thus
    knows how to zoom and how to read a crop, and calls the tool as often on queries that do not need it as on those
    that do (the over-use the RL stage is meant to remove).
    """
    rows = rng.integers(0, len(data), size=batch)
    use = rng.random(batch) < tool_share
    first, second = [], []
    for r, u in zip(rows, use, strict=True):
        q = data.queries[int(r)]
        answer = ANSWERS.index(q.answer)
        if u:
            first.append(N_ANSWERS + q.glyph_cell[1] * grid + q.glyph_cell[0])
            second.append(answer)
        else:
            first.append(answer)
            second.append(-1)
    return torch.as_tensor(rows, dtype=torch.long), torch.as_tensor(first), torch.as_tensor(second)


def train_sft(policy: PixelPolicy, data: EncodedQueries, cfg: PixelSFTConfig) -> dict[str, float]:
    """Teacher-forced cross-entropy on operation-aware traces (both tokens of a call trace).

    Returns:
        ``{"sft_loss": mean loss of the last 20 steps, "sft_steps": steps}``.
    """
    rng = np.random.default_rng(cfg.seed)
    optimizer = torch.optim.Adam(policy.parameters(), lr=cfg.lr)
    policy.train()
    losses: list[float] = []
    for _ in range(cfg.steps):
        rows, first, second = operation_aware_traces(data, rng, cfg.batch, cfg.tool_share, policy.cfg.grid)
        calls = second >= 0
        # Traces without a call need only the first decision (the shorter sequence).
        loss = torch.zeros(())
        if calls.any():
            c_rows, c_first = rows[calls], first[calls]
            logits = policy(data.views[c_rows], data.kinds[c_rows], c_first, _crops_for(data, c_rows, c_first))
            loss = loss + F.cross_entropy(logits[:, 0], c_first, reduction="sum")
            loss = loss + F.cross_entropy(logits[:, 1], second[calls], reduction="sum")
        if (~calls).any():
            a_rows = rows[~calls]
            logits = policy(data.views[a_rows], data.kinds[a_rows])
            loss = loss + F.cross_entropy(logits[:, 0], first[~calls], reduction="sum")
        loss = loss / (len(rows) + int(calls.sum()))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return {"sft_loss": float(np.mean(losses[-20:])) if losses else 0.0, "sft_steps": float(cfg.steps)}


# --- evaluation ----------------------------------------------------------------------------------------------------


def evaluate(policy: PixelPolicy, data: EncodedQueries, arm: ToolArm, batch: int = 256) -> dict[str, float]:
    """Greedy responses under the arm's gate on every query of ``data``.

    Returns:
        ``accuracy``; ``tool_ratio`` (share of queries answered with a call); ``tool_rate_fine`` /
        ``tool_rate_coarse`` (the same on queries that need the zoom and on those that do not; 0 where there are
        none); ``accuracy_fine`` / ``accuracy_coarse``; ``call_on_glyph`` (share of calls on fine queries that
        zoomed into the glyph's cell).
    """
    gates = [arm.gate.decide({"kind": q.kind, "key": q.key}) for q in data.queries]
    first_all, second_all = [], []
    for start in range(0, len(data), batch):
        rows = list(range(start, min(start + batch, len(data))))
        f, s = sample_responses(policy, data, rows, [gates[i] for i in rows], temperature=0.0)
        first_all.append(f)
        second_all.append(s)
    first, second = torch.cat(first_all), torch.cat(second_all)
    correct, called, fine, on_glyph = [], [], [], []
    for i, q in enumerate(data.queries):
        tokens = [int(first[i])] + ([int(second[i])] if int(second[i]) >= 0 else [])
        correct.append(verify(q, response_text(tokens, policy.cfg.grid)))
        called.append(is_call(tokens[0]))
        fine.append(q.needs_zoom)
        if q.needs_zoom and called[-1]:
            on_glyph.append(call_cell(tokens[0], policy.cfg.grid) == q.glyph_cell)
    c, k, f_ = np.asarray(correct), np.asarray(called, dtype=float), np.asarray(fine)

    def share(values: np.ndarray, where: np.ndarray) -> float:
        return float(values[where].mean()) if where.any() else 0.0

    return {
        "accuracy": float(c.mean()),
        "tool_ratio": float(k.mean()),
        "tool_rate_fine": share(k, f_),
        "tool_rate_coarse": share(k, ~f_),
        "accuracy_fine": share(c, f_),
        "accuracy_coarse": share(c, ~f_),
        "call_on_glyph": float(np.mean(on_glyph)) if on_glyph else 0.0,
    }


# --- GRPO ------------------------------------------------------------------------------------------------------------


class ZoomGRPOTrainer:
    """GRPO over the pixel-reasoning policy with a tool-use arm (module docstring).

    Args:
        policy: The policy (usually warm-started by :func:`train_sft`).
        data: Training queries, visited in shuffled epochs.
        arm: Gate and call reward (:func:`meta.rlvr.vision.arms.make_tool_arm`).
        allocator: Responses per query and which groups are kept (``make_allocator("uniform:8")``).
        config: Trainer settings (``max_new_tokens`` must be 2: a call and an answer).
        probes: Extra responses per query of each kind (tool forced, tool masked) sampled when the arm's call reward
            reads the success rates; 0 uses the group's own responses only.

    Raises:
        ValueError: ``config.max_new_tokens`` is not 2 or ``probes < 0``.
    """

    def __init__(
        self,
        policy: PixelPolicy,
        data: EncodedQueries,
        arm: ToolArm,
        allocator: Allocator,
        config: GRPOConfig,
        probes: int = 2,
    ) -> None:
        if config.max_new_tokens != 2:
            raise ValueError(
                f"a pixel-reasoning response is at most 2 tokens: set max_new_tokens=2, got {config.max_new_tokens}"
            )
        if probes < 0:
            raise ValueError(f"probes must be >= 0, got {probes}")
        self.policy = policy
        self.data = data
        self.arm = arm
        self.allocator = allocator
        self.cfg = config
        self.probes = int(probes)
        self.stats = StatsTable()
        self.rng = np.random.default_rng(config.seed)
        self.generator = torch.Generator().manual_seed(config.seed)
        self.optimizer = torch.optim.AdamW(policy.parameters(), lr=config.lr, weight_decay=0.0)
        self.num_steps = 0
        self.totals = {"rollouts": 0, "probe_rollouts": 0, "tool_calls": 0}
        self._order = self.rng.permutation(len(data))
        self._cursor = 0

    def _draw(self, n: int) -> list[int]:
        out: list[int] = []
        while len(out) < n:
            if self._cursor == len(self._order):
                self._order = self.rng.permutation(len(self.data))
                self._cursor = 0
                self.allocator.end_epoch()
            take = min(n - len(out), len(self._order) - self._cursor)
            out += [int(i) for i in self._order[self._cursor : self._cursor + take]]
            self._cursor += take
        return out

    def _success_rates(
        self, queries: Sequence[int], rows: Sequence[int], first: torch.Tensor, correct: Sequence[float]
    ) -> dict[int, tuple[float | None, float | None]]:
        """Per query, the policy's success rate with and without the tool on this step's rollouts (``None``: none of
        that kind): the group's own responses plus the forced probes."""
        seen: dict[int, tuple[list[float], list[float]]] = {q: ([], []) for q in queries}
        for r, f, c in zip(rows, first.tolist(), correct, strict=True):
            seen[r][0 if is_call(f) else 1].append(c)
        if self.probes:
            probe_rows = [q for q in queries for _ in range(self.probes)]
            forced: tuple[GateDecision, GateDecision] = ("zoom", "answer")
            gates = [forced[0]] * len(probe_rows) + [forced[1]] * len(probe_rows)
            p_first, p_second = sample_responses(
                self.policy,
                self.data,
                probe_rows + probe_rows,
                gates,
                temperature=self.cfg.temperature,
                generator=self.generator,
            )
            for r, f, s in zip(probe_rows + probe_rows, p_first.tolist(), p_second.tolist(), strict=True):
                c = self._score(r, f, s)
                seen[r][0 if is_call(f) else 1].append(c)
            self.totals["probe_rollouts"] += 2 * len(probe_rows)
        return {q: tuple(float(np.mean(v)) if v else None for v in seen[q]) for q in queries}  # type: ignore[misc]

    def _score(self, row: int, first: int, second: int) -> float:
        tokens = [first] + ([second] if second >= 0 else [])
        return verify(self.data.queries[row], response_text(tokens, self.policy.cfg.grid))

    def step(self) -> dict[str, float]:
        """One GRPO step; returns its metrics (``reward``, ``accuracy``, ``tool_ratio``, ``tool_rate_fine``,
        ``tool_rate_coarse``, ``loss``, ``clip_fraction``, ``kept_groups``, ``rollouts``)."""
        queries = self._draw(self.cfg.prompts_per_step)
        keys = [self.data.queries[q].key for q in queries]
        counts = self.allocator.initial(keys, self.stats)
        gates_of = {
            q: self.arm.gate.decide({"kind": self.data.queries[q].kind, "key": k})
            for q, k in zip(queries, keys, strict=True)
        }
        rows = [q for q, n in zip(queries, counts, strict=True) for _ in range(int(n))]
        gates = [gates_of[r] for r in rows]
        first, second = sample_responses(
            self.policy, self.data, rows, gates, temperature=self.cfg.temperature, generator=self.generator
        )
        correct = [self._score(r, f, s) for r, f, s in zip(rows, first.tolist(), second.tolist(), strict=True)]
        called = [is_call(f) for f in first.tolist()]
        rates = (
            self._success_rates(queries, rows, first, correct)
            if self.arm.call_reward.needs_rollout_feedback
            else {q: (None, None) for q in queries}
        )
        rewards = []
        for r, c, k in zip(rows, correct, called, strict=True):
            feedback = {"success_with": rates[r][0], "success_without": rates[r][1], "kind": self.data.queries[r].kind}
            rewards.append(c + (self.arm.call_reward.decide(feedback) if k else 0.0))
        # Groups in query order (rows are grouped by query), with their row positions.
        positions: list[list[int]] = []
        start = 0
        for n in counts:
            positions.append(list(range(start, start + int(n))))
            start += int(n)
        for key, pos in zip(keys, positions, strict=True):
            if pos:
                self.stats.update(key, [correct[i] for i in pos], [1 + int(called[i]) for i in pos])
        group_rewards = [[rewards[i] for i in pos] for pos in positions]
        keep = self.allocator.keep(group_rewards)
        advantages = torch.zeros(len(rows))
        kept_rows: list[int] = []
        for pos, k, g in zip(positions, keep, group_rewards, strict=True):
            if k and pos:
                advantages[pos] = torch.as_tensor(group_advantages(g, self.cfg.advantage), dtype=torch.float32)
                kept_rows += pos
        update = self._update(rows, first, second, gates, advantages, kept_rows)
        self.num_steps += 1
        self.totals["rollouts"] += len(rows)
        self.totals["tool_calls"] += int(sum(called))
        fine = np.asarray([self.data.queries[r].needs_zoom for r in rows], dtype=bool)
        k_arr = np.asarray(called, dtype=float)
        return {
            "reward": float(np.mean(rewards)) if rewards else 0.0,
            "accuracy": float(np.mean(correct)) if correct else 0.0,
            "tool_ratio": float(k_arr.mean()) if rows else 0.0,
            "tool_rate_fine": float(k_arr[fine].mean()) if fine.any() else 0.0,
            "tool_rate_coarse": float(k_arr[~fine].mean()) if (~fine).any() else 0.0,
            "kept_groups": float(sum(keep)),
            "rollouts": float(self.totals["rollouts"] + self.totals["probe_rollouts"]),
            **update,
        }

    def _update(
        self,
        rows: Sequence[int],
        first: torch.Tensor,
        second: torch.Tensor,
        gates: Sequence[GateDecision],
        advantages: torch.Tensor,
        kept_rows: Sequence[int],
    ) -> dict[str, float]:
        """Minibatched clipped policy-gradient update on the kept rows (zero-advantage rows count only in the
        normaliser, as in the compact GRPO trainer)."""
        metrics = {"loss": 0.0, "clip_fraction": 0.0, "optimizer_steps": 0.0}
        lengths = [1 + int(second[i] >= 0) for i in kept_rows]
        learn = [i for i in kept_rows if float(advantages[i]) != 0.0]
        if not learn:
            return metrics
        chunks = [c for c in np.array_split(np.asarray(learn), min(self.cfg.minibatches, len(learn))) if c.size]
        normaliser = loss_normaliser(self.cfg.loss_kind, lengths, self.cfg.max_new_tokens) / len(chunks)
        low, high = 1.0 - self.cfg.clip_low, 1.0 + self.cfg.clip_high
        parts = []
        with torch.no_grad():
            for c in chunks:
                sel = torch.as_tensor(c, dtype=torch.long)
                old, _ = response_logprobs(
                    self.policy,
                    self.data,
                    [rows[i] for i in c],
                    first[sel],
                    second[sel],
                    [gates[i] for i in c],
                    self.cfg.temperature,
                )
                parts.append((c, sel, old))
        self.policy.train()
        losses, clipped, counted = [], 0.0, 0.0
        for _ in range(self.cfg.epochs):
            for c, sel, old in parts:
                logp, mask = response_logprobs(
                    self.policy,
                    self.data,
                    [rows[i] for i in c],
                    first[sel],
                    second[sel],
                    [gates[i] for i in c],
                    self.cfg.temperature,
                )
                adv = advantages[sel].unsqueeze(1)
                ratio = torch.exp(logp - old)
                per_token = -torch.min(ratio * adv, ratio.clamp(low, high) * adv)
                loss = aggregate_loss(per_token, mask, self.cfg.loss_kind, normaliser)
                self.optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.cfg.max_grad_norm)
                self.optimizer.step()
                losses.append(float(loss.detach()))
                with torch.no_grad():
                    out = ((ratio > high) & (adv > 0)) | ((ratio < low) & (adv < 0))
                    clipped += float((out.float() * mask).sum())
                    counted += float(mask.sum())
        metrics.update(
            loss=float(np.mean(losses)), clip_fraction=clipped / max(counted, 1.0), optimizer_steps=float(len(losses))
        )
        return metrics

    # --- state -------------------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs, as plain data (``weights_only``-loadable)."""
        return {
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "rng": generator_state(self.rng),
            "generator": generator_state(self.generator),
            "order": [int(i) for i in self._order],
            "cursor": self._cursor,
            "num_steps": self.num_steps,
            "totals": dict(self.totals),
            "stats": self.stats.state_dict(),
            "allocator": self.allocator.state_dict(),
            "arm": self.arm.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` snapshot into this (identically configured) trainer.

        Raises:
            ValueError: The snapshot's prompt order does not fit this query set.
        """
        order = [int(i) for i in state["order"]]
        if sorted(order) != list(range(len(self.data))):
            raise ValueError(f"the snapshot's prompt order has {len(order)} queries, this set {len(self.data)}")
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        set_generator_state(self.rng, state["rng"])
        set_generator_state(self.generator, state["generator"])
        self._order = np.asarray(order, dtype=np.int64)
        self._cursor = int(state["cursor"])
        self.num_steps = int(state["num_steps"])
        self.totals = {k: int(v) for k, v in state["totals"].items()}
        self.stats.load_state_dict(state["stats"])
        self.allocator.load_state_dict(state["allocator"])
        self.arm.load_state_dict(state["arm"])
