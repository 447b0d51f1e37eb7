"""ARPO entropy-based adaptive rollout (Dong et al. 2025, "Agentic Reinforced Policy Optimization").

After a tool call returns, a language model's next tokens are often much more uncertain than its first ones. ARPO
spends part of each group's response budget branching there. Per group of ``G`` responses (the same budget as
uniform GRPO with ``G``):

1. **initial rollouts**: ``N = ⌈G/2⌉`` complete responses; ``H_initial`` of a response is the mean next-token entropy
   (nats) of its first ``k`` sampled tokens;
2. **entropy after a tool result**: at every point where the tool's inserted tokens end, ``H_after`` is the mean
   entropy of the next ``k`` sampled tokens and ``ΔH = H_after − H_initial``;
3. **adaptive branching**: with probability ``p = clip(α + β·ΔH, 0, 1)`` (:func:`branch_probability`) the point gets
   ``Z`` partial rollouts: continuations sampled from the shared prefix (prompt, tokens up to and including the tool
   result), at most as many as the ``G − N`` responses left in the budget; points are visited response by response,
   left to right;
4. **supplement**: whatever budget no branch used is spent on complete responses, so every group has exactly ``G``;
5. **advantage attribution over shared prefixes** (:func:`prefix_advantages`, the paper's "hard" setting): every
   response gets its group advantage; a token that several responses share (the same token at the same place of
   the same physical prefix) gets the mean advantage of all of them and enters the loss once.

Rolloutlab's readings, where the paper leaves room: ``ΔH`` is in nats, not normalised (the paper normalises the entropy
change; with ``β`` per nat the rule stays hand-computable), the branch is a Bernoulli draw with probability ``p``
(the paper's text thresholds ``p`` against ``τ``; its public code draws), branches fork only from the initial
responses (one level), and a branch's generated-token cost is its continuation alone (the prefix is cached).

Numpy-free (``import meta.rlvr`` stays torch-free); the trainer (:class:`meta.rlvr.trainers.grpo.GRPOTrainer` with
``arpo=``) samples. The spec ``arpo:ALPHA,BETA[,K[,BRANCHES]]`` builds it
(:func:`meta.rlvr.token.make_token_controller`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from meta.control import Controller, Feedback


def branch_probability(h_after: float, h_initial: float, alpha: float, beta: float) -> float:
    """``p = clip(α + β·(H_after − H_initial), 0, 1)``; entropies in nats, ``β`` per nat."""
    return min(1.0, max(0.0, alpha + beta * (h_after - h_initial)))


def tool_return_points(inserted: Sequence[int]) -> list[int]:
    """Positions right after each run of tool-inserted tokens (0/1 flags per token), where a branch can fork."""
    return [p for p in range(1, len(inserted) + 1) if inserted[p - 1] and (p == len(inserted) or not inserted[p])]


def window_entropy(entropies: Sequence[float], inserted: Sequence[int], start: int, k: int) -> float:
    """Mean entropy of the first ``k`` sampled (not inserted) tokens from ``start`` on; ``nan`` when there are none."""
    picked = [e for e, f in zip(entropies[start:], inserted[start:], strict=False) if not f][:k]
    return sum(picked) / len(picked) if picked else math.nan


def prefix_advantages(
    completions: Sequence[Sequence[int]], advantages: Sequence[float], families: Sequence[int] | None = None
) -> tuple[list[list[float]], list[list[int]]]:
    """Per-token advantages and ownership over the shared prefixes of one group.

    Responses of the same ``family`` (the initial response and the branches forked from it) form a prefix tree;
    each token is a node, shared by every response that passes through it. The node's advantage is the mean of
    those responses' ``advantages``; its **owner** is the first of them, the only row where the token counts in the
    loss, so a shared token is trained once. Responses of different families never share (``families=None``: each
    response is its own).

    Returns:
        ``(token_advantages, owned)``, one list per response, as long as its completion (``owned`` is 0/1).
    """
    if len(completions) != len(advantages):
        raise ValueError(f"need one advantage per completion, got {len(completions)} and {len(advantages)}")
    fams = list(families) if families is not None else list(range(len(completions)))
    node_of: dict[tuple[int, int, int], int] = {}
    members: list[list[int]] = []
    paths: list[list[int]] = []
    for i, tokens in enumerate(completions):
        parent, path = -1, []
        for tok in tokens:
            node = node_of.setdefault((fams[i], parent, int(tok)), len(members))
            if node == len(members):
                members.append([])
            members[node].append(i)
            path.append(node)
            parent = node
        paths.append(path)
    mean = [sum(float(advantages[m]) for m in ms) / len(ms) for ms in members]
    token_adv = [[mean[n] for n in path] for path in paths]
    owned = [[int(members[n][0] == i) for n in path] for i, path in enumerate(paths)]
    return token_adv, owned


class BranchingRollout(Controller):
    """A group's budget split into whole responses and branches from their prefixes (ARPO, EHPO).

    The trainer (:class:`meta.rlvr.trainers.grpo.GRPOTrainer` with ``branching=``) samples :meth:`initial_count` whole
    responses per group, asks :meth:`branch_points` for each one's candidate forks, draws each with its probability
    (``branches`` partial rollouts, while the budget lasts), fills the rest with whole responses and attributes
    advantages with :func:`prefix_advantages`; subclasses say where to fork and may shape the rewards.

    Args:
        branches: ``Z``, partial rollouts per branching point (a whole number >= 1).
    """

    #: Whether the rule only makes sense with a tool hook (the trainer refuses it without one).
    needs_tool = False

    def __init__(self, branches: int = 2) -> None:
        if int(branches) != branches or branches < 1:
            raise ValueError(f"need a whole number of branches >= 1, got {branches}")
        self.branches = int(branches)
        self.points = 0
        self.branch_points_taken = 0
        self.branch_responses = 0
        self.supplemented = 0

    @staticmethod
    def initial_count(group_size: int) -> int:
        """``N = ⌈G/2⌉`` complete responses first; the rest of the budget is for branches."""
        return (int(group_size) + 1) // 2

    def branch_points(
        self, pieces: Sequence[str], inserted: Sequence[int], entropies: Sequence[float]
    ) -> list[tuple[int, float]]:
        """``(position, probability)`` of each fork of one whole response, in the order they are drawn.

        Args:
            pieces: The response's tokens as text, one string per token (``""`` for EOS).
            inserted: 0/1 per token, 1 where a tool inserted it.
            entropies: Next-token entropy (nats) per token.
        """
        raise NotImplementedError

    def shape(self, rewards: Sequence[float], lengths: Sequence[int]) -> list[float]:
        """Rewards the group's advantages are computed from (unchanged here)."""
        return [float(r) for r in rewards]

    def record(self, branched: int, supplemented: int = 0) -> None:
        """Count ``branched`` partial rollouts at one point (0: none) and ``supplemented`` complete ones."""
        if branched:
            self.branch_points_taken += 1
            self.branch_responses += int(branched)
        self.supplemented += int(supplemented)

    def reset(self) -> None:
        self.points = self.branch_points_taken = self.branch_responses = self.supplemented = 0

    def state_dict(self) -> dict[str, Any]:
        return {
            "points": self.points,
            "branch_points_taken": self.branch_points_taken,
            "branch_responses": self.branch_responses,
            "supplemented": self.supplemented,
        }


class ARPO(BranchingRollout):
    """ARPO's branching rule: fork where a tool result ends, with probability rising with the entropy increase.

    Args:
        alpha: ``α``, the branch probability at no entropy change.
        beta: ``β``, its slope per nat of entropy increase.
        k: Tokens in each entropy window (``H_initial`` and ``H_after``).
        branches: ``Z``, partial rollouts per branching point.

    :meth:`decide` returns ``p`` for one point.
    """

    needs_tool = True

    def __init__(self, alpha: float = 0.5, beta: float = 1.0, k: int = 4, branches: int = 2) -> None:
        if not 0.0 <= alpha <= 1.0 or beta < 0.0:
            raise ValueError(f"need 0 <= alpha <= 1 and beta >= 0, got {alpha}, {beta}")
        if int(k) != k or k < 1:
            raise ValueError(f"need a whole number k >= 1, got {k}")
        super().__init__(branches)
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.k = int(k)

    def decide(self, feedback: Feedback) -> float:
        """``feedback["entropy_after"]``, ``feedback["entropy_initial"]`` (nats) -> the branch probability ``p``."""
        for key in ("entropy_after", "entropy_initial"):
            if key not in feedback:
                raise KeyError(f"ARPO needs feedback[{key!r}]; got keys {sorted(feedback)}")
        self.points += 1
        after, initial = float(feedback["entropy_after"]), float(feedback["entropy_initial"])
        return branch_probability(after, initial, self.alpha, self.beta)

    def branch_points(
        self, pieces: Sequence[str], inserted: Sequence[int], entropies: Sequence[float]
    ) -> list[tuple[int, float]]:
        """Every tool-return point with a sampled token after it, with ARPO's ``p`` (the response's order)."""
        h_initial = window_entropy(entropies, inserted, 0, self.k)
        out = []
        for p in tool_return_points(inserted):
            h_after = window_entropy(entropies, inserted, p, self.k)
            if not (math.isnan(h_after) or math.isnan(h_initial)):
                out.append((p, self.decide({"entropy_after": h_after, "entropy_initial": h_initial})))
        return out

    def __repr__(self) -> str:
        return f"ARPO(alpha={self.alpha}, beta={self.beta}, k={self.k}, branches={self.branches})"
