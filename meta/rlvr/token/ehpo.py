"""ADR / EHPO: fast and slow reasoning, branching at high-entropy units, a difficulty-aware length penalty.

The Adaptive Dual Reasoner (ADR) trains one model to answer in a **fast** mode (the answer directly) or a **slow**
mode (worked reasoning) and to pick the mode per problem; its RL stage, Entropy-guided Hybrid Policy Optimization
(EHPO), branches rollouts at high-entropy reasoning *units* and balances the modes with a difficulty-aware length
penalty. On the ``calc`` family (:mod:`envs.reasoning.tooluse`) the modes are the trace styles:

* **fast**: the answer right away (``#86``, style ``direct``); **slow**: a scratchpad or calculator calls before it
  (styles ``scratch``, ``tool``, ``tool_once``) — :func:`response_mode`;
* **units**: the steps of a slow trace. A unit starts after a ``;`` (a scratchpad step ends) and after a tool result
  (:func:`unit_starts`); the entropy of a unit is that of its first sampled token, where the model chooses what the
  step does. :class:`EHPO` forks ``branches`` partial rollouts at each unit start whose entropy is at least
  ``threshold`` nats, the most uncertain first, within the group's budget (the rollout, budget and prefix advantage
  attribution are shared with ARPO: :class:`meta.rlvr.token.arpo.BranchingRollout`);
* **difficulty-aware length penalty** (:func:`difficulty_length_penalty`): a group's difficulty is
  ``d = 1 − mean reward`` (its failure rate); each *correct* response loses ``λ·(1 − d)·ℓ``, with ``ℓ`` its length
  min-max scaled over the group's correct responses (0 for the shortest, 1 for the longest). On an easy prompt
  (``d`` near 0) a long, slow answer costs almost ``λ`` against a fast one, pushing to the fast mode; on a hard one
  (``d`` near 1) length is nearly free and slow reasoning stays. Wrong responses are not penalised.

Rolloutlab's reading: the paper's exact penalty and unit segmentation were not checked against its code here; the
formulas above are this module's own, chosen to be hand-computable. The spec ``ehpo[:THRESHOLD,LAMBDA[,BRANCHES]]``
builds it (:func:`meta.rlvr.token.make_token_controller`). Numpy-free.
"""

from __future__ import annotations

from collections.abc import Sequence

from meta.control import Feedback
from meta.rlvr.token.arpo import BranchingRollout

#: A scratchpad step ends with this character.
STEP_END = ";"
#: The answer follows this character (:func:`envs.reasoning.tooluse.verify_calc` reads after the last one).
ANSWER_MARK = "#"


def response_mode(text: str) -> str:
    """``"fast"`` when ``text`` gives its answer before any scratchpad step or calculator call, else ``"slow"``."""
    head = text.split(ANSWER_MARK, 1)[0]
    return "slow" if STEP_END in head or "<" in head else "fast"


def unit_starts(pieces: Sequence[str], inserted: Sequence[int]) -> list[int]:
    """Positions where a reasoning unit starts: after each ``;`` and after each run of tool-inserted tokens, as long as
    a sampled token follows (one string per token in ``pieces``, 0/1 ``inserted`` flags)."""
    out = []
    for p in range(1, len(pieces)):
        after_step = pieces[p - 1] == STEP_END and not inserted[p - 1]
        after_tool = bool(inserted[p - 1]) and not inserted[p]
        if after_step or after_tool:
            out.append(p)
    return out


def difficulty_length_penalty(rewards: Sequence[float], lengths: Sequence[int], coef: float) -> list[float]:
    """Shaped rewards of one group (module docstring): ``r − λ(1 − d)ℓ`` on correct responses (reward ≥ 0.5).

    ``d = 1 − mean(rewards)`` clipped to ``[0, 1]``; ``ℓ = (L − L_min)/(L_max − L_min)`` over the correct responses
    (0 when they are all as long).
    """
    if len(rewards) != len(lengths):
        raise ValueError(f"need one length per reward, got {len(rewards)} and {len(lengths)}")
    if not rewards:
        return []
    difficulty = min(1.0, max(0.0, 1.0 - sum(float(r) for r in rewards) / len(rewards)))
    correct = [i for i, r in enumerate(rewards) if r >= 0.5]
    out = [float(r) for r in rewards]
    if not correct:
        return out
    lo, hi = min(lengths[i] for i in correct), max(lengths[i] for i in correct)
    for i in correct:
        scaled = (lengths[i] - lo) / (hi - lo) if hi > lo else 0.0
        out[i] -= coef * (1.0 - difficulty) * scaled
    return out


class EHPO(BranchingRollout):
    """EHPO's branching at high-entropy units and its difficulty-aware length penalty.

    Args:
        threshold: A unit start whose first sampled token has at least this entropy (nats) is a branching point.
        coef: ``λ`` of the length penalty (0 disables it).
        branches: Partial rollouts per branching point.
    """

    def __init__(self, threshold: float = 1.0, coef: float = 0.1, branches: int = 2) -> None:
        if threshold < 0 or coef < 0:
            raise ValueError(f"need threshold >= 0 and coef >= 0, got {threshold}, {coef}")
        super().__init__(branches)
        self.threshold = float(threshold)
        self.coef = float(coef)

    def decide(self, feedback: Feedback) -> bool:
        """``feedback["entropy"]``: a unit's first-token entropy (nats) -> whether it is a branching point."""
        if "entropy" not in feedback:
            raise KeyError(f"EHPO needs feedback['entropy']; got keys {sorted(feedback)}")
        self.points += 1
        return float(feedback["entropy"]) >= self.threshold

    def branch_points(
        self, pieces: Sequence[str], inserted: Sequence[int], entropies: Sequence[float]
    ) -> list[tuple[int, float]]:
        """Unit starts at or above the threshold, most uncertain first, each taken (probability 1)."""
        starts = [p for p in unit_starts(pieces, inserted) if self.decide({"entropy": entropies[p]})]
        return [(p, 1.0) for p in sorted(starts, key=lambda p: -entropies[p])]

    def shape(self, rewards: Sequence[float], lengths: Sequence[int]) -> list[float]:
        return difficulty_length_penalty(rewards, lengths, self.coef)

    def __repr__(self) -> str:
        return f"EHPO(threshold={self.threshold}, coef={self.coef}, branches={self.branches})"
