"""When to call the zoom tool: the arms of adaptive pixel reasoning, as controllers of the project's protocol.

An arm is two controllers (:class:`meta.control.protocol.Controller`), so the fixed, heuristic and learned choices
compare on the same footing:

* a **gate** decides, per query, who makes the call-or-answer decision: :class:`AlwaysZoom` (``"zoom"``: the policy
  must call the tool, it still picks where), :class:`NeverZoom` (``"answer"``: the tool is masked out) or
  :class:`PolicyDecides` (``"policy"``: the policy's own first token decides, the learned arm);
* a **call reward** decides what a tool call is worth on top of the verifier's 0/1 correctness, given feedback from
  the policy's own rollouts on that query: :class:`NoCallReward` (0), :class:`FixedToolPenalty` (``-λ`` for every
  call, the usual baseline) or :class:`RolloutGuidedReward`, the rule of adaptive pixel reasoning: the policy's own
  success rate with and without the tool on this query says whether the tool is *needed* here, and a call is rewarded
  where it is needed and penalised where it is not.

Arms are written as specs of the project's one grammar and registry (:mod:`meta.control.spec`), a kind of their
own: ``always_zoom``, ``never_zoom``, ``free_zoom`` (the policy decides, correctness only), ``zoom_penalty:LAMBDA``
and ``rollout_guided:BONUS,MARGIN``; :func:`make_tool_arm` builds one.

Plain Python; no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from meta.control.protocol import Controller, Feedback, require
from meta.control.spec import TOOL_ARM, Spec, build_spec

#: Who decides between calling the tool and answering: the tool forced, the tool masked, or the policy.
GateDecision = Literal["zoom", "answer", "policy"]


class ToolGate(Controller):
    """A controller whose decision is a :data:`GateDecision`."""

    decision: GateDecision = "policy"

    def decide(self, feedback: Feedback) -> GateDecision:
        """The gate's decision for one query (these gates read no feedback)."""
        return self.decision


class AlwaysZoom(ToolGate):
    """Every response calls the tool first (the accuracy ceiling the adaptive arm is measured against)."""

    decision: GateDecision = "zoom"


class NeverZoom(ToolGate):
    """No response calls the tool (the global view only)."""

    decision: GateDecision = "answer"


class PolicyDecides(ToolGate):
    """The policy's first token decides (a tool-call token or an answer); what it learns depends on the reward."""

    decision: GateDecision = "policy"


class CallReward(Controller):
    """A controller whose decision is the reward added to a response that called the tool (0 for one that did not)."""

    #: Whether :meth:`decide` reads ``success_with`` / ``success_without`` (the trainer then measures them).
    needs_rollout_feedback = False

    def decide(self, feedback: Feedback) -> float:
        """The reward of one tool call on this query."""
        return 0.0


class NoCallReward(CallReward):
    """Correctness alone: a call costs nothing and earns nothing."""


class FixedToolPenalty(CallReward):
    """``-λ`` for every call, needed or not (the fixed tool-penalty baseline).

    Args:
        penalty: ``λ >= 0``, in reward units (a right answer is worth 1).
    """

    def __init__(self, penalty: float = 0.1) -> None:
        if penalty < 0:
            raise ValueError(f"the tool penalty must be >= 0, got {penalty}")
        self.penalty = float(penalty)

    def decide(self, feedback: Feedback) -> float:
        return -self.penalty


class RolloutGuidedReward(CallReward):
    """The rollout-guided rule: the policy's own rollouts on a query decide whether a call there is rewarded.

    With ``s_with`` and ``s_without`` the policy's success rates on the query with and without the tool (measured by
    the trainer from this step's rollouts of each kind), the tool is *needed* when ``s_with - s_without > margin``.
    A call then earns ``+bonus`` where the tool is needed and ``-bonus`` where it is not; with no rollout of one kind
    the need is unknown and a call earns 0.

    Args:
        bonus: Size of the call reward, ``>= 0`` (a right answer is worth 1).
        margin: How much the tool must raise the success rate to count as needed, in ``[0, 1)``.
    """

    needs_rollout_feedback = True

    def __init__(self, bonus: float = 0.2, margin: float = 0.1) -> None:
        if bonus < 0:
            raise ValueError(f"the rollout-guided bonus must be >= 0, got {bonus}")
        if not 0.0 <= margin < 1.0:
            raise ValueError(f"the rollout-guided margin must be in [0, 1), got {margin}")
        self.bonus = float(bonus)
        self.margin = float(margin)

    def needed(self, feedback: Feedback) -> bool | None:
        """Whether the tool is needed on this query (``None``: a success rate is missing)."""
        with_tool = require(feedback, "success_with", type(self).__name__)
        without = require(feedback, "success_without", type(self).__name__)
        if with_tool is None or without is None:
            return None
        return float(with_tool) - float(without) > self.margin

    def decide(self, feedback: Feedback) -> float:
        need = self.needed(feedback)
        if need is None:
            return 0.0
        return self.bonus if need else -self.bonus


@dataclass
class ToolArm:
    """One arm: its spec, its gate and its call reward."""

    spec: str
    gate: ToolGate
    call_reward: CallReward

    def state_dict(self) -> dict[str, Any]:
        """Both controllers' state (plain data)."""
        return {"gate": self.gate.state_dict(), "call_reward": self.call_reward.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.gate.load_state_dict(state["gate"])
        self.call_reward.load_state_dict(state["call_reward"])


#: Spec name -> (what it builds, its arguments as written).
ARM_SPECS: dict[str, str] = {
    "always_zoom": "",
    "never_zoom": "",
    "free_zoom": "",
    "zoom_penalty": "LAMBDA",
    "rollout_guided": "BONUS,MARGIN",
}


def arm_from_spec(spec: Spec) -> ToolArm:
    """The arm a parsed tool-arm spec names (the factory the registry calls)."""
    usage = ARM_SPECS[spec.name]
    nums = spec.numbers(f"[{usage}]" if usage else "no arguments", 0, usage.count(",") + 1 if usage else 0)
    if spec.name == "always_zoom":
        return ToolArm(spec.text, AlwaysZoom(), NoCallReward())
    if spec.name == "never_zoom":
        return ToolArm(spec.text, NeverZoom(), NoCallReward())
    if spec.name == "free_zoom":
        return ToolArm(spec.text, PolicyDecides(), NoCallReward())
    if spec.name == "zoom_penalty":
        return ToolArm(spec.text, PolicyDecides(), FixedToolPenalty(*nums))
    return ToolArm(spec.text, PolicyDecides(), RolloutGuidedReward(*nums))


def make_tool_arm(spec: str) -> ToolArm:
    """Build an arm from ``name[:ARGS]``: ``always_zoom``, ``never_zoom``, ``free_zoom``, ``zoom_penalty:LAMBDA``
    [0.1] or ``rollout_guided:BONUS,MARGIN`` [0.2,0.1].

    Raises:
        ValueError: An unknown name (with the known ones), a spec of another kind, malformed numbers or values the
            controllers refuse.
    """
    arm = build_spec(TOOL_ARM, spec)
    if not isinstance(arm, ToolArm):
        raise TypeError(f"spec {spec!r} built {type(arm).__name__}, not a ToolArm")
    return arm
