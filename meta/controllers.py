"""The framework-free controller protocol and the rollout-length controllers.

A controller is asked for a *decision* at each decision point and is shown *feedback* about the learning process
(see ``DESIGN.md``, "The controller contract"). It keeps its own state, which :meth:`Controller.state_dict` /
:meth:`Controller.load_state_dict` save and restore as plain data, so a resumed run decides exactly as the
uninterrupted one would have.

This module imports numpy and the standard library only.

Feedback keys used by the rollout-length controllers here (all optional unless a controller says otherwise):

* ``epoch`` (int): index of the current epoch / decision point, from 0.
* ``budget_fraction`` (float in [0, 1]): fraction of the interaction budget already used.
* ``current_length`` (int): the rollout length in force before this decision.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from enum import IntEnum
from typing import Any

import numpy as np

Feedback = Mapping[str, Any]


class Controller(ABC):
    """Base class of every controller: ``decide(feedback) -> decision`` plus saveable state.

    Subclasses keep all mutable state in attributes listed by :meth:`state_dict`; the default implementation saves
    nothing, which is right for stateless controllers.
    """

    @abstractmethod
    def decide(self, feedback: Feedback) -> Any:
        """Return the decision for this decision point, given the feedback."""

    def reset(self) -> None:  # noqa: B027 - optional hook: stateless controllers have nothing to reset
        """Forget any state from a previous run (called at the start of a run)."""

    def state_dict(self) -> dict[str, Any]:
        """Plain-data snapshot of the controller's mutable state."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot made by :meth:`state_dict`."""
        unexpected = set(state) - set(self.state_dict())
        if unexpected:
            raise KeyError(f"{type(self).__name__}.load_state_dict: unexpected keys {sorted(unexpected)}")
        for key, value in state.items():
            setattr(self, key, value)


class RolloutLengthController(Controller):
    """A controller whose decision is a model-rollout length ``h >= 0`` (an int)."""

    @abstractmethod
    def decide(self, feedback: Feedback) -> int:
        """Return the rollout length for the coming epoch."""


def _require(feedback: Feedback, key: str, who: str) -> Any:
    if key not in feedback:
        raise KeyError(f"{who} needs feedback[{key!r}]; got keys {sorted(feedback)}")
    return feedback[key]


class Fixed(RolloutLengthController):
    """Always the same rollout length ``k``."""

    def __init__(self, k: int) -> None:
        if k < 0:
            raise ValueError(f"rollout length must be >= 0, got {k}")
        self.k = int(k)

    def decide(self, feedback: Feedback) -> int:
        return self.k

    def __repr__(self) -> str:
        return f"Fixed({self.k})"


class TruncatedLinear(RolloutLengthController):
    """MBPO's rollout schedule ``[epoch_a, epoch_b, h_min, h_max]`` (Janner et al. 2019, appendix C).

    ``h = h_min`` up to ``epoch_a``, then linear in the epoch up to ``h_max`` at ``epoch_b``, then constant; the
    interpolated value is truncated to an int, as in the reference implementation. Needs ``feedback["epoch"]``.
    """

    def __init__(self, epoch_a: int, epoch_b: int, h_min: int, h_max: int) -> None:
        if epoch_b <= epoch_a:
            raise ValueError(f"need epoch_a < epoch_b, got [{epoch_a}, {epoch_b}]")
        if h_min < 0 or h_max < 0:
            raise ValueError(f"rollout lengths must be >= 0, got h_min={h_min}, h_max={h_max}")
        self.schedule = (int(epoch_a), int(epoch_b), int(h_min), int(h_max))

    def decide(self, feedback: Feedback) -> int:
        epoch = float(_require(feedback, "epoch", "TruncatedLinear"))
        epoch_a, epoch_b, h_min, h_max = self.schedule
        fraction = min(max((epoch - epoch_a) / (epoch_b - epoch_a), 0.0), 1.0)
        return int(h_min + fraction * (h_max - h_min))

    def __repr__(self) -> str:
        return f"TruncatedLinear({list(self.schedule)})"


# --- controller specs: "name:args" strings as used on the command line -------------------------------------------

ControllerFactory = Callable[[str], Controller]
_REGISTRY: dict[str, ControllerFactory] = {}
# Controllers that need heavier packages register themselves when their module is imported; `make_controller`
# imports that module on demand, so this file itself stays numpy-only.
_LAZY_MODULES: dict[str, str] = {"learned": "meta.rollout_length.learned"}
# RLVR per-prompt allocators (numpy-only): "uniform:8", "ar3po:2,4", ... as in meta.rlvr.allocators.make_allocator.
_LAZY_MODULES.update(dict.fromkeys(("uniform", "dapo", "ar3po", "dars", "e3", "knapsack"), "meta.rlvr.allocators"))


def register_controller(name: str, factory: ControllerFactory) -> None:
    """Make ``name:ARGS`` specs build controllers through ``factory(ARGS)``."""
    _REGISTRY[name] = factory


def _ints(args: str, count: int, name: str) -> list[int]:
    parts = [p for p in args.split(",") if p.strip()] if args else []
    if len(parts) != count:
        raise ValueError(f"controller spec '{name}' takes {count} integer argument(s), got {args!r}")
    try:
        return [int(p) for p in parts]
    except ValueError as exc:
        raise ValueError(f"controller spec '{name}:{args}': arguments must be integers") from exc


register_controller("fixed", lambda args: Fixed(*_ints(args, 1, "fixed")))
register_controller("linear", lambda args: TruncatedLinear(*_ints(args, 4, "linear")))


def make_controller(spec: str) -> Controller:
    """Build a controller from a spec such as ``fixed:5`` or ``linear:20,150,1,15``.

    Raises:
        ValueError: unknown controller name or malformed arguments, with the list of known names.
    """
    name, _, args = spec.partition(":")
    name = name.strip().lower()
    if name not in _REGISTRY and name in _LAZY_MODULES:
        import importlib

        importlib.import_module(_LAZY_MODULES[name])
    if name not in _REGISTRY:
        known = sorted(set(_REGISTRY) | set(_LAZY_MODULES))
        raise ValueError(f"unknown controller {name!r} in spec {spec!r}; known: {', '.join(known)}")
    return _REGISTRY[name](args.strip())


def available_controllers() -> list[str]:
    """Names accepted by :func:`make_controller`."""
    return sorted(set(_REGISTRY) | set(_LAZY_MODULES))


# --- rollout-length heuristics of Bhatia, Thomas & Zilberstein 2022 and MACURA (mbrl pillar) --------------------


class BudgetLinear(RolloutLengthController):
    """INC, DEC and INC-DEC: rollout length linear in the fraction ``f`` of the interaction budget used.

    Bhatia, Thomas & Zilberstein 2022 (section 5) compare against these schedules: INC ``K = f K_max`` (0 -> K_max),
    DEC ``K = (1 - f) K_max`` (K_max -> 0), INC-DEC up over the first half of the budget and down over the second,
    ``K = K_max (1 - |2 f - 1|)``. ``K`` is rounded to the nearest int (halves up, float noise ignored). Needs
    ``feedback["budget_fraction"]``.

    Args:
        kind: ``"inc"``, ``"dec"`` or ``"incdec"``.
        k_max: The longest rollout length.
    """

    KINDS = ("inc", "dec", "incdec")

    def __init__(self, kind: str, k_max: int) -> None:
        if kind not in self.KINDS:
            raise ValueError(f"kind must be one of {self.KINDS}, got {kind!r}")
        if k_max < 0:
            raise ValueError(f"k_max must be >= 0, got {k_max}")
        self.kind, self.k_max = kind, int(k_max)

    def decide(self, feedback: Feedback) -> int:
        f = min(max(float(_require(feedback, "budget_fraction", f"BudgetLinear({self.kind})")), 0.0), 1.0)
        if self.kind == "inc":
            level = f
        elif self.kind == "dec":
            level = 1.0 - f
        else:
            level = 1.0 - abs(2.0 * f - 1.0)
        return math.floor(round(level * self.k_max, 9) + 0.5)  # round(., 9): 0.15 * 10 must give 2, not 1

    def __repr__(self) -> str:
        return f"BudgetLinear({self.kind!r}, {self.k_max})"


class StepAction(IntEnum):
    """The meta-agent's actions on the rollout length (Bhatia, Thomas & Zilberstein 2022, section 4)."""

    DOWN = 0
    NOOP = 1
    UP = 2


def step_rollout_length(k: int, action: int, k_max: int) -> int:
    """Apply one UP / DOWN / NOOP action to the rollout length ``k``.

    UP: ``K <- ceil(1.5 K)``, or 1 from 0; DOWN: ``K <- floor(K / 2)`` (so 1 -> 0); NOOP: unchanged; the result is
    capped at ``k_max``. Integer arithmetic throughout (``ceil(3K/2) = (3K + 1) // 2``), so no float rounding.

    Args:
        k: Current rollout length, ``>= 0``.
        action: A :class:`StepAction` (or its int value).
        k_max: Cap on the rollout length.
    """
    if k < 0:
        raise ValueError(f"rollout length must be >= 0, got {k}")
    action = StepAction(int(action))
    if action == StepAction.UP:
        k = 1 if k == 0 else (3 * k + 1) // 2
    elif action == StepAction.DOWN:
        k //= 2
    return min(int(k), int(k_max))


class UncertaintyTruncation(RolloutLengthController):
    """MACURA-style adaptive length: stop each imagined rollout once the ensemble disagrees too much.

    Frauenknecht et al. 2024 (MACURA) cut every model rollout at the first step whose model uncertainty exceeds a
    threshold, and calibrate that threshold per batch of rollouts as a quantile of the uncertainty at the *first*
    step, where the model is queried on real states. Here uncertainty is the ensemble disagreement reported by the
    world model (std across elites of the predicted mean), and the threshold is its ``percentile``-th percentile at
    step 0. :meth:`decide` returns the longest allowed length ``k_max``; the rollout code calls :meth:`keep` at each
    step with that step's disagreement and stops the rollouts for which it returns ``False``.

    Args:
        percentile: Percentile (0-100] of the first-step disagreement used as the threshold.
        k_max: Longest rollout length.
    """

    def __init__(self, percentile: float, k_max: int = 32) -> None:
        if not 0.0 < percentile <= 100.0:
            raise ValueError(f"percentile must be in (0, 100], got {percentile}")
        if k_max < 0:
            raise ValueError(f"k_max must be >= 0, got {k_max}")
        self.percentile, self.k_max = float(percentile), int(k_max)
        self.threshold: float | None = None

    def decide(self, feedback: Feedback) -> int:
        return self.k_max

    def keep(self, step: int, disagreement: Any) -> Any:
        """Which rollouts may continue past ``step`` (0-based) given their disagreement there.

        Args:
            step: Rollout step index; step 0 (re)calibrates the threshold.
            disagreement: ``[N]`` array of ensemble disagreement at this step.

        Returns:
            ``[N]`` boolean array, ``True`` where ``disagreement <= threshold``.
        """
        values = np.asarray(disagreement, dtype=np.float64)
        if step == 0 or self.threshold is None:
            self.threshold = float(np.percentile(values, self.percentile)) if values.size else math.inf
        return values <= self.threshold

    def state_dict(self) -> dict[str, Any]:
        return {"threshold": self.threshold}

    def __repr__(self) -> str:
        return f"UncertaintyTruncation({self.percentile:g}, k_max={self.k_max})"


def _uncertainty_spec(args: str) -> UncertaintyTruncation:
    parts = [p.strip() for p in args.split(",") if p.strip()]
    if len(parts) not in (1, 2):
        raise ValueError(f"controller spec 'uncertainty' takes PERCENTILE[,K_MAX], got {args!r}")
    try:
        return UncertaintyTruncation(float(parts[0]), *(int(p) for p in parts[1:]))
    except ValueError as exc:
        raise ValueError(f"controller spec 'uncertainty:{args}': {exc}") from exc


def _budget_linear_spec(kind: str) -> ControllerFactory:
    return lambda args: BudgetLinear(kind, *_ints(args, 1, kind))


for _kind in BudgetLinear.KINDS:
    register_controller(_kind, _budget_linear_spec(_kind))
register_controller("uncertainty", _uncertainty_spec)
