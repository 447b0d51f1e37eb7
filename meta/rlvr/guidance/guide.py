"""Guide (Nath et al. 2025, "Adaptive Guidance Accelerates Reinforcement Learning of Reasoning Models", §2, Guide-GRPO).

When every response of a group is wrong, Guide samples the group again with a hint in the context and trains on
those responses with an importance ratio whose numerator is the policy *without* the hint and whose denominator is the
policy that sampled them, *with* it, inside the clipped objective, so the update improves the hint-free policy — the
one evaluated — rather than the hinted one.

Here the hint is a prefix of the reference answer (:func:`hint_length`: ``⌈fraction·|answer|⌉`` characters, at least
one): the hinted context is ``prompt + hint`` and the sampler continues it. The trajectory the hint-free policy is
asked about is then ``hint + continuation``, after the plain prompt, and the behaviour policy that produced it put the
hint there with probability 1 and drew the rest from ``π_old(· | prompt, hint, o_<t)``. So per token
(:func:`behaviour_logprobs`, :func:`importance_ratios`)

``ρ_t = π_θ(y_t | q, y_<t) / π_b(y_t | q, y_<t)``, ``π_b = 1`` on the hint's tokens and ``π_old`` on the sampled ones,

and the denominator of a sampled token is computed in the same forward pass as the numerator (the hinted context of
token ``t`` *is* the hint-free context ``q, y_<t``). Inside ``min(ρA, clip(ρ, 1−ε_low, 1+ε_high)A)``: a correct guided
answer (``A > 0``) raises its hint tokens with weight ``ρ = π_θ(hint token)`` (the unclipped branch, ``ρ < 1``); a wrong
one (``A < 0``) leaves them alone (the clipped branch is constant), so a wrong continuation never pushes the reference
prefix down. Advantages are over the whole group, the failed unguided responses and the guided ones together.

The guided responses' tokens and prompts are counted in the trainer's cost ledger like any others; the controller
keeps its own counters (groups guided, responses, successes) in its state.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from meta.control import Feedback
from meta.rlvr.guidance.base import GroupLike, Guidance, GuidedTrainer


def hint_length(answer_length: int, fraction: float) -> int:
    """Characters of the reference answer given as the hint: ``⌈fraction·L⌉``, clamped to ``1..L`` (0 for ``L = 0``)."""
    if answer_length <= 0:
        return 0
    return min(max(math.ceil(round(fraction * answer_length, 9)), 1), int(answer_length))


def behaviour_logprobs(sampled: Sequence[float], forced: int) -> list[float]:
    """Per-token ``log π_b`` of a guided trajectory: 0 (probability 1) on the ``forced`` hint tokens, then the
    sampling policy's log-probabilities ``sampled[forced:]`` (``sampled`` is over the whole trajectory)."""
    if not 0 <= forced <= len(sampled):
        raise ValueError(f"forced must be in 0..{len(sampled)}, got {forced}")
    return [0.0] * forced + [float(x) for x in sampled[forced:]]


def importance_ratios(target: Sequence[float], behaviour: Sequence[float]) -> list[float]:
    """Per-token ``ρ_t = exp(log π_θ − log π_b)``: ``target`` the hint-free policy's log-probabilities of the
    trajectory, ``behaviour`` :func:`behaviour_logprobs`."""
    if len(target) != len(behaviour):
        raise ValueError(f"need one behaviour log-probability per token, got {len(target)} and {len(behaviour)}")
    return [float(np.exp(t - b)) for t, b in zip(target, behaviour, strict=True)]


class Guide(Guidance):
    """Guide-GRPO's rollout: hinted resampling of all-wrong groups.

    Args:
        fraction: Share of the reference answer given as the hint (:func:`hint_length`), in ``(0, 1]``.
        responses: Guided responses per all-wrong group; 0 (the default) takes the group's own size.
        success_threshold: A reward at or above this is a success (a group with none is "all wrong").
    """

    name = "guide"

    def __init__(self, fraction: float = 0.5, responses: int = 0, success_threshold: float = 0.5) -> None:
        if not 0.0 < fraction <= 1.0:
            raise ValueError(f"the hint fraction must be in (0, 1], got {fraction}")
        if responses < 0:
            raise ValueError(f"responses must be >= 0, got {responses}")
        self.fraction = float(fraction)
        self.responses = int(responses)
        self.success_threshold = float(success_threshold)
        self.guided_groups = 0
        self.guided_responses = 0
        self.guided_successes = 0

    def decide(self, feedback: Feedback) -> list[int]:
        """``feedback["rewards"]`` (one list per group) and ``feedback["answer_lengths"]`` -> hint length per group,
        0 for a group that needs none (it got something right, or has no responses)."""
        rewards, lengths = feedback["rewards"], feedback["answer_lengths"]
        return [
            hint_length(int(n), self.fraction) if r and max(r) < self.success_threshold else 0
            for r, n in zip(rewards, lengths, strict=True)
        ]

    def rollout(self, trainer: GuidedTrainer, groups: Sequence[GroupLike], default: Callable[[], None]) -> None:
        default()
        hints = self.decide(
            {"rewards": [g.rewards for g in groups], "answer_lengths": [len(g.task.answer) for g in groups]}
        )
        contexts: list[list[int]] = []
        owners: list[tuple[int, list[int]]] = []
        for i, (g, k) in enumerate(zip(groups, hints, strict=True)):
            if k == 0:
                continue
            hint = trainer.vocab.encode(g.task.answer[:k])
            n = self.responses or len(g.responses)
            contexts += [g.prompt_ids + hint] * n
            owners += [(i, hint)] * n
            self.guided_groups += 1
        if not contexts:
            return
        for (i, hint), completion in zip(owners, trainer.generate_for(contexts), strict=True):
            g = groups[i]
            tokens = hint + completion
            reward = float(trainer.reward(g.task, trainer.vocab.decode(tokens)))
            # Trained under the hint-free prompt: the hint is the trajectory's forced start (behaviour probability 1).
            trainer.add_response(g, tokens, reward, forced=len(hint), condition=len(hint))
            self.guided_responses += 1
            self.guided_successes += int(reward >= self.success_threshold)

    def state_dict(self) -> dict[str, Any]:
        return {
            "guided_groups": self.guided_groups,
            "guided_responses": self.guided_responses,
            "guided_successes": self.guided_successes,
        }

    def __repr__(self) -> str:
        return f"Guide(fraction={self.fraction}, responses={self.responses})"
