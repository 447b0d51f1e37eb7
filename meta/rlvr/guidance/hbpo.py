"""HBPO (Lyu et al. 2025, "Hierarchical Budget Policy Optimization for Adaptive Reasoning", §3): token budgets stated
in the prompt, a budget-aware reward and advantages within and across budget subgroups.

Each group of ``G`` responses is split into ``K`` subgroups (:func:`meta.rlvr.guidance.split_evenly`), subgroup ``j``
sampled from the prompt with the budget ``b_j`` stated before it (:func:`envs.reasoning.scratchpad.budget_prompt`,
``"9<35+7="``), so one group explores several reasoning lengths at once instead of collapsing to one.

**Budget-aware reward** (:func:`budget_reward`, HBPO §3.2, rolloutlab's reading of its piecewise form) of a response
of ``n`` tokens (EOS included) in the subgroup of budget ``b``, with ``f(x) = cos(π·x / (4·b_max))`` the classic
cosine length reward scaled so that ``f(b_max) = cos(π/4)``:

* wrong: ``0``;
* correct, ``n <= b``: ``f(b)`` — flat inside the budget (no push below it, so exploration inside a budget is kept),
  and higher for a tighter budget (a correct short-budget answer is worth more);
* correct, ``n > b``: ``f(n) − α·(n − b)`` — the cosine value of its own length minus a deviation penalty.

**Two-level advantages** (:func:`hierarchical_advantages`, HBPO §3.3): for response ``i`` of subgroup ``j``

``A_ij = (r_ij − μ_j)/(σ_j + ε) + (μ_j − μ)/(σ + ε)``,

the intra-subgroup term comparing a response with its own budget's mean ``μ_j`` (population std ``σ_j``) and the
inter-subgroup term comparing that budget's mean with the whole group's ``μ`` (std ``σ``); with ``advantage="dr_grpo"``
both terms are only centred. A subgroup of one response has intra term 0.

The responses' stored rewards stay the verifier's (accuracy statistics and the reward log are unchanged); the budget
reward is computed when the advantages are. Each response is trained under its own budget prompt.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from envs.reasoning.scratchpad import budget_prompt
from meta.control import Feedback
from meta.rlvr.guidance.base import GroupLike, Guidance, GuidedTrainer, split_evenly

EPS = 1e-6


def cosine_length_reward(length: float, max_budget: int) -> float:
    """``f(x) = cos(π·x / (4·b_max))``: 1 at length 0, ``cos(π/4) ≈ 0.707`` at the largest budget."""
    return math.cos(math.pi * float(length) / (4.0 * max_budget))


def budget_reward(correct: bool, length: int, budget: int, max_budget: int, alpha: float) -> float:
    """HBPO's piecewise budget-aware reward of one response (module docstring)."""
    if not correct:
        return 0.0
    if length <= budget:
        return cosine_length_reward(budget, max_budget)
    return cosine_length_reward(length, max_budget) - alpha * (length - budget)


def hierarchical_advantages(
    rewards: Sequence[float], subgroups: Sequence[int], kind: str = "grpo", eps: float = EPS
) -> list[float]:
    """Intra- plus inter-subgroup advantages of one group (module docstring).

    Args:
        rewards: One (budget-aware) reward per response.
        subgroups: The subgroup (budget) of each response; any hashable ids.
        kind: ``"grpo"`` (both terms std-normalised) or ``"dr_grpo"`` (both only centred).
        eps: Added to every std.
    """
    if kind not in ("grpo", "dr_grpo"):
        raise ValueError(f"advantage must be 'grpo' or 'dr_grpo', got {kind!r}")
    r = np.asarray(rewards, dtype=float)
    ids = list(subgroups)
    if r.size != len(ids):
        raise ValueError(f"need one subgroup per reward, got {r.size} and {len(ids)}")
    if r.size < 2:
        return [0.0] * int(r.size)
    mu, sigma = float(r.mean()), float(r.std())
    out = np.zeros_like(r)
    for j in set(ids):
        rows = np.asarray([k for k, s in enumerate(ids) if s == j])
        sub = r[rows]
        intra = sub - sub.mean() if sub.size > 1 else np.zeros_like(sub)
        inter = float(sub.mean()) - mu
        if kind == "grpo":
            intra = intra / (float(sub.std()) + eps)
            inter = inter / (sigma + eps)
        out[rows] = intra + inter
    return [float(x) for x in out]


class HBPO(Guidance):
    """HBPO's budgeted rollout and advantages (module docstring).

    Args:
        budgets: Token budgets of the subgroups (completion tokens, EOS included), ascending after sorting.
        alpha: ``α``, the deviation penalty per token over the budget.
    """

    name = "hbpo"

    def __init__(self, budgets: Sequence[int] = (4, 6, 8, 10), alpha: float = 0.05) -> None:
        values = sorted(int(b) for b in budgets)
        if not values or values[0] < 1 or alpha < 0:
            raise ValueError(f"need at least one budget >= 1 and alpha >= 0, got {list(budgets)}, {alpha}")
        self.budgets = values
        self.alpha = float(alpha)
        self.responses_per_budget = {str(b): 0 for b in values}
        self.over_budget = 0

    def decide(self, feedback: Feedback) -> list[int]:
        """``feedback["group_size"]`` -> the budget of each of the group's responses, subgroups in budget order."""
        shares = split_evenly(int(feedback["group_size"]), len(self.budgets))
        return [b for b, n in zip(self.budgets, shares, strict=True) for _ in range(n)]

    def reward(self, correct: bool, length: int, budget: int) -> float:
        """:func:`budget_reward` with this controller's budgets and ``α``."""
        return budget_reward(correct, length, budget, self.budgets[-1], self.alpha)

    def rollout(self, trainer: GuidedTrainer, groups: Sequence[GroupLike], default: Callable[[], None]) -> None:
        counts = trainer.allocator.initial([g.task.prompt for g in groups], trainer.stats)
        contexts: list[list[int]] = []
        owners: list[tuple[int, int]] = []
        for i, (g, c) in enumerate(zip(groups, counts, strict=True)):
            for b in self.decide({"group_size": int(c)}):
                contexts.append(trainer.vocab.encode(budget_prompt(g.task.prompt, b), bos=True))
                owners.append((i, b))
        if not contexts:
            return
        for (i, b), context, completion in zip(owners, contexts, trainer.generate_for(contexts), strict=True):
            g = groups[i]
            reward = float(trainer.reward(g.task, trainer.vocab.decode(completion)))
            trainer.add_response(g, completion, reward, context=context, condition=b)
            self.responses_per_budget[str(b)] = self.responses_per_budget.get(str(b), 0) + 1
            self.over_budget += int(len(completion) > b)

    def advantages(self, group: GroupLike, kind: str) -> list[float]:
        budgets = [int(r.condition) for r in group.responses]
        shaped = [self.reward(r.reward >= 0.5, len(r.tokens), b) for r, b in zip(group.responses, budgets, strict=True)]
        return hierarchical_advantages(shaped, budgets, kind)

    def state_dict(self) -> dict[str, Any]:
        return {"responses_per_budget": dict(self.responses_per_budget), "over_budget": self.over_budget}

    def __repr__(self) -> str:
        return f"HBPO(budgets={self.budgets}, alpha={self.alpha})"
