"""The controller layer every pillar builds on: the protocol, the one spec grammar and registry, the rollout-length
controllers, and the meta-MDP core.

* :mod:`meta.control.protocol` — :class:`Controller` (``decide(feedback)`` plus saveable state) and the typed kinds;
* :mod:`meta.control.spec` — ``name[:ARG,...]`` specs: the grammar, the number parser, the registry of every name;
* :mod:`meta.control.rollout_length` — the rollout-length controllers and :func:`make_controller`;
* :mod:`meta.control.mdp` — the meta-MDP over an inner learner with one knob (gymnasium, SB3: import it explicitly);
* :mod:`meta.control.parallel` and :mod:`meta.control.training` — meta-training on any such meta-MDP, over local
  processes or Ray (torch, SB3: import them explicitly);
* :mod:`meta.control.meta_policy` — loading an exported SB3 meta-policy (torch: import it explicitly).

``import meta.control`` needs numpy only, so an LLM training script can use a controller without gymnasium, SB3 or
TRL.
"""

from __future__ import annotations

from meta.control.protocol import AllocatorLike, Controller, Feedback, RolloutLengthController
from meta.control.rollout_length import (
    BudgetLinear,
    Fixed,
    RandomMetaPolicy,
    StepAction,
    TruncatedLinear,
    UncertaintyTruncation,
    available_controllers,
    make_controller,
    step_rollout_length,
)
from meta.control.spec import Spec, SpecKind, available_specs, build_spec, parse_spec, register_spec, split_specs

__all__ = [
    "AllocatorLike",
    "BudgetLinear",
    "Controller",
    "Feedback",
    "Fixed",
    "RandomMetaPolicy",
    "RolloutLengthController",
    "Spec",
    "SpecKind",
    "StepAction",
    "TruncatedLinear",
    "UncertaintyTruncation",
    "available_controllers",
    "available_specs",
    "build_spec",
    "make_controller",
    "parse_spec",
    "register_spec",
    "split_specs",
    "step_rollout_length",
]
