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

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

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
