"""SEELE (Li et al. 2025, "Staying in the Sweet Spot: Responsive Reasoning Evolution via Capability-Adaptive Hint
Scaffolding", §3): a hint of the right length per problem, found by fitting an item-response curve between rounds.

GRPO learns fastest from a prompt whose accuracy is near 0.5 (the expected loss decrease is bounded by a multiple of
``a(1 − a)``, SEELE §2). SEELE appends a hint — a prefix of the reference solution — to each problem and sizes it so
the accuracy lands there. Each step samples a prompt's responses in ``rounds`` rounds; before every round it fits an
item-response curve to the (hint fraction, successes, trials) points collected so far for that prompt and gives the
hint that the curve predicts reaches ``target`` accuracy.

The curve (:func:`fit_curve`) is a two-parameter logistic in the hint fraction ``x = k/|answer|``:

``p(x) = σ(w₀ + w₁·x)``,

fitted by Newton's method on the binomial log-likelihood plus a Gaussian prior (``w₀ ~ N(0, 10²)``,
``w₁ ~ N(4, 2²)``: more hint helps) that keeps the fit finite with one point or all-equal outcomes. Its inverse gives
the hint (:func:`choose_hint_length`): ``x* = (logit(target) − w₀)/w₁`` clamped to ``[0, 1]``, ``k = ⌊x*·L + ½⌋``
clamped to ``0..L−1`` (the model always writes at least one answer character). SEELE's paper fits a three-parameter
logistic (with a guessing floor); exact-match arithmetic has no guessing floor, so rolloutlab fits two parameters.
The first round of a prompt never seen uses no hint.

Points are kept per prompt across steps (the ``memory`` most recent), so a prompt's curve follows the policy as it
learns; every response of every round enters the group's advantages and is trained under its own hinted context (it
is on-policy there). The calibration samples are the training samples, so they cost no extra tokens; their tokens
are counted in the trainer's ledger, and the hint characters as prompt tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from meta.control import Feedback
from meta.rlvr.guidance.base import GroupLike, Guidance, GuidedTrainer, split_evenly

#: Prior of the curve's parameters ``(w₀, w₁)``: means and standard deviations (module docstring).
PRIOR_MEAN = (0.0, 4.0)
PRIOR_STD = (10.0, 2.0)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -60.0, 60.0)))  # clipped: no overflow far in the tails


def fit_curve(
    points: Sequence[Sequence[float]],
    prior_mean: Sequence[float] | None = PRIOR_MEAN,
    prior_std: Sequence[float] = PRIOR_STD,
    iterations: int = 50,
) -> tuple[float, float]:
    """``(w₀, w₁)`` of ``p(x) = σ(w₀ + w₁x)`` fitted to ``(x, successes, trials)`` points (MAP, Newton's method).

    Args:
        points: Hint fraction, successes and trials per point (repeated ``x`` values add up).
        prior_mean: Gaussian prior means of ``(w₀, w₁)``; ``None`` fits the plain maximum likelihood (it needs at
            least two distinct ``x`` values and no perfect separation).
        prior_std: The prior's standard deviations.
        iterations: Newton steps (the objective is concave; it converges in a handful).

    Returns:
        The fitted ``(w₀, w₁)``; the prior mean when there are no points.
    """
    data = np.asarray(points, dtype=float).reshape(-1, 3)
    x, s, n = data[:, 0], data[:, 1], data[:, 2]
    if prior_mean is None:
        mean, precision = np.zeros(2), np.zeros(2)
    else:
        mean = np.asarray(prior_mean, dtype=float)
        precision = 1.0 / np.asarray(prior_std, dtype=float) ** 2
    w = mean.copy()
    design = np.stack([np.ones_like(x), x], axis=1)
    for _ in range(iterations):
        p = _sigmoid(design @ w)
        grad = design.T @ (s - n * p) - precision * (w - mean)
        hess = -(design.T * (n * p * (1.0 - p))) @ design - np.diag(precision)
        step = np.linalg.solve(hess, grad)
        w = w - step
        if float(np.abs(step).max()) < 1e-10:
            break
    return float(w[0]), float(w[1])


def curve(x: float, w0: float, w1: float) -> float:
    """``σ(w₀ + w₁x)``: the fitted accuracy at hint fraction ``x``."""
    return float(_sigmoid(np.asarray(w0 + w1 * x)))


def choose_hint_length(w0: float, w1: float, answer_length: int, target: float = 0.5) -> int:
    """Hint characters that the curve predicts give accuracy ``target`` (module docstring); 0 for a one-character
    answer or when the curve never rises with the hint (``w₁ <= 0``: the full hint fraction 1, clamped)."""
    if answer_length <= 1:
        return 0
    logit = math.log(target / (1.0 - target))
    fraction = 1.0 if w1 <= 0 else (logit - w0) / w1
    fraction = min(max(fraction, 0.0), 1.0)
    return min(math.floor(fraction * answer_length + 0.5), answer_length - 1)


class SEELE(Guidance):
    """SEELE's multi-round hinted rollout (module docstring).

    Args:
        rounds: Rounds of sampling per step; a prompt's responses (the allocator's first-stage count) are split
            evenly over them (:func:`meta.rlvr.guidance.split_evenly`).
        target: Accuracy the hint aims at.
        memory: Points kept per prompt across steps (the most recent).
    """

    name = "seele"

    def __init__(self, rounds: int = 2, target: float = 0.5, memory: int = 8) -> None:
        if rounds < 1 or memory < 1 or not 0.0 < target < 1.0:
            raise ValueError(f"need rounds >= 1, memory >= 1 and 0 < target < 1, got {rounds}, {memory}, {target}")
        self.rounds = int(rounds)
        self.target = float(target)
        self.memory = int(memory)
        self.points: dict[str, list[list[float]]] = {}
        self.hinted_responses = 0
        self.hint_characters = 0

    def decide(self, feedback: Feedback) -> int:
        """``feedback["key"]`` (the prompt) and ``feedback["answer_length"]`` -> the hint length for its next round,
        from the points stored for it (no hint before the first point)."""
        points = self.points.get(str(feedback["key"]), [])
        if not points:
            return 0
        w0, w1 = fit_curve(points)
        return choose_hint_length(w0, w1, int(feedback["answer_length"]), self.target)

    def record(self, key: str, fraction: float, successes: float, trials: int) -> None:
        """Add one round's ``(fraction, successes, trials)`` point for ``key`` (oldest dropped past ``memory``)."""
        kept = self.points.setdefault(key, [])
        kept.append([float(fraction), float(successes), float(trials)])
        del kept[: max(len(kept) - self.memory, 0)]

    def rollout(self, trainer: GuidedTrainer, groups: Sequence[GroupLike], default: Callable[[], None]) -> None:
        keys = [g.task.prompt for g in groups]
        counts = trainer.allocator.initial(keys, trainer.stats)
        shares = [split_evenly(int(c), self.rounds) for c in counts]
        for r in range(self.rounds):
            contexts: list[list[int]] = []
            owners: list[int] = []
            hints: dict[int, str] = {}
            for i, g in enumerate(groups):
                if shares[i][r] == 0:
                    continue
                k = self.decide({"key": keys[i], "answer_length": len(g.task.answer)})
                hints[i] = g.task.answer[:k]
                contexts += [g.prompt_ids + trainer.vocab.encode(hints[i])] * shares[i][r]
                owners += [i] * shares[i][r]
            if not contexts:
                continue
            results: dict[int, list[float]] = {}
            for i, completion in zip(owners, trainer.generate_for(contexts), strict=True):
                g, hint = groups[i], hints[i]
                reward = float(trainer.reward(g.task, hint + trainer.vocab.decode(completion)))
                context = g.prompt_ids + trainer.vocab.encode(hint) if hint else None
                trainer.add_response(g, completion, reward, context=context, condition=len(hint))
                results.setdefault(i, []).append(reward)
                self.hinted_responses += int(bool(hint))
                self.hint_characters += len(hint)
            # This round's outcome is a point of the prompt's curve before the next round is sized.
            for i, rewards in results.items():
                fraction = len(hints[i]) / max(len(groups[i].task.answer), 1)
                self.record(keys[i], fraction, sum(min(max(x, 0.0), 1.0) for x in rewards), len(rewards))

    def state_dict(self) -> dict[str, Any]:
        return {
            "points": {k: [list(p) for p in v] for k, v in self.points.items()},
            "hinted_responses": self.hinted_responses,
            "hint_characters": self.hint_characters,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.points = {str(k): [[float(x) for x in p] for p in v] for k, v in self.points.items()}

    def __repr__(self) -> str:
        return f"SEELE(rounds={self.rounds}, target={self.target}, memory={self.memory})"
