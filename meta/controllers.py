"""The framework-free controller protocol and the rollout-length controllers.

A controller is asked for a *decision* at each decision point and is shown *feedback* about the learning process
(the README's "Controllers" section shows the calls). It keeps its own state, which :meth:`Controller.state_dict` /
:meth:`Controller.load_state_dict` save and restore as plain data, so a resumed run decides exactly as the
uninterrupted one would have.

This module imports numpy and the standard library only, and never a pillar: controllers are also built from
*specs*, ``name[:ARGS]`` strings such as ``fixed:5`` or ``random:0,32``, through one registry per kind of spec
(:func:`make_controller` builds rollout-length controllers). A pillar with a spec language of its own declares its kind
and registers its names when it is imported (:func:`register_spec_kind`, :func:`register_spec`; the RLVR allocators
of ``meta.rlvr`` do), and a pillar's rollout-length controller registers into this kind (``learned:PATH``, by
``meta.rollout_length``). A name is refused by the builder of another kind with the name of the right builder.

Feedback keys used by the rollout-length controllers here (all optional unless a controller says otherwise):

* ``epoch`` (int): index of the current epoch / decision point, from 0.
* ``budget_fraction`` (float in [0, 1]): fraction of the interaction budget already used.
* ``current_length`` (int): the rollout length in force before this decision.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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

    def max_length(self) -> int | None:
        """The longest rollout length this controller can return, or ``None`` if it does not say."""
        return None


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

    def max_length(self) -> int:
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

    def max_length(self) -> int:
        return max(self.schedule[2], self.schedule[3])

    def __repr__(self) -> str:
        return f"TruncatedLinear({list(self.schedule)})"


# --- specs: "name:args" strings as used on the command line, one registry per kind --------------------------------

ControllerFactory = Callable[[str], Controller]


@dataclass(frozen=True)
class SpecKind:
    """One spec language: the names it knows, what they build and the function users call to build them.

    Every kind shares one name space, so a name given to the wrong builder is refused with the right builder's name
    (``make_controller("uniform:8")``: 'uniform' is an RLVR allocator spec). A pillar declares its kind and registers
    its names when it is imported; this module never imports a pillar.

    Attributes:
        title: What one spec builds, e.g. ``"rollout-length controller"``.
        article: ``"a"`` or ``"an"``, the article before ``title``.
        noun: Short word for error messages, e.g. ``"controller"``.
        builder: Dotted name of the function that builds this kind, e.g. ``"meta.controllers.make_controller"``.
    """

    title: str
    article: str
    noun: str
    builder: str
    factories: dict[str, ControllerFactory] = field(default_factory=dict, compare=False, repr=False)


_KINDS: dict[str, SpecKind] = {}

#: The kind of the specs :func:`make_controller` builds.
ROLLOUT_LENGTH = "rollout-length"


def register_spec_kind(kind: str, title: str, article: str, noun: str, builder: str) -> None:
    """Declare a spec language (idempotent: declaring the same kind again keeps its registered names)."""
    declared = SpecKind(title, article, noun, builder)
    existing = _KINDS.get(kind)
    if existing is not None and existing != declared:
        raise ValueError(f"spec kind {kind!r} is already declared as {existing}")
    _KINDS.setdefault(kind, declared)


def register_spec(kind: str, name: str, factory: ControllerFactory) -> None:
    """Make ``name:ARGS`` specs of ``kind`` build through ``factory(ARGS)``.

    Raises:
        KeyError: ``kind`` has not been declared with :func:`register_spec_kind`.
        ValueError: ``name`` already belongs to another kind.
    """
    if kind not in _KINDS:
        raise KeyError(f"unknown spec kind {kind!r}; declared: {', '.join(sorted(_KINDS))}")
    name = name.strip().lower()
    for other_kind, other in _KINDS.items():
        if other_kind != kind and name in other.factories:
            raise ValueError(f"spec name {name!r} is already {other.article} {other.title} spec")
    _KINDS[kind].factories[name] = factory


def register_controller(name: str, factory: ControllerFactory) -> None:
    """Make ``name:ARGS`` specs build rollout-length controllers through ``factory(ARGS)``."""
    register_spec(ROLLOUT_LENGTH, name, factory)


def available_specs(kind: str) -> list[str]:
    """Names registered so far for ``kind`` (a pillar's names appear once it has been imported)."""
    return sorted(_KINDS[kind].factories)


def build_spec(kind: str, spec: str) -> Controller:
    """Build the controller a ``name[:ARGS]`` spec of ``kind`` names.

    Raises:
        ValueError: The name belongs to another kind (the message names that kind's builder), is unknown (the message
            lists the known names), or the arguments are malformed.
    """
    name, _, args = spec.partition(":")
    name = name.strip().lower()
    own = _KINDS[kind]
    if name in own.factories:
        return own.factories[name](args.strip())
    for other in _KINDS.values():
        if other is not own and name in other.factories:
            raise ValueError(
                f"{name!r} is {other.article} {other.title} spec, not {own.article} {own.title}: "
                f"build {spec!r} with {other.builder}"
            )
    known = ", ".join(sorted(own.factories))
    raise ValueError(
        f"unknown {own.noun} {name!r} in spec {spec!r}; known {own.title} specs: {known} "
        "(a module that defines more registers them when it is imported)"
    )


def split_specs(text: str) -> list[str]:
    """Split a comma-separated list of specs whose own arguments are comma-separated too.

    A piece that starts like a number (a digit, a sign or a point) continues the previous spec's arguments, so
    ``"fixed:0,linear:0,5,1,32,dqn_zoo"`` gives ``["fixed:0", "linear:0,5,1,32", "dqn_zoo"]``.
    """
    specs: list[str] = []
    for piece in (p.strip() for p in text.split(",")):
        if not piece:
            continue
        if specs and piece[0] in "0123456789+-.":
            specs[-1] += f",{piece}"
        else:
            specs.append(piece)
    return specs


register_spec_kind(ROLLOUT_LENGTH, "rollout-length controller", "a", "controller", "meta.controllers.make_controller")


def _ints(args: str, count: int | tuple[int, ...], name: str) -> list[int]:
    counts = (count,) if isinstance(count, int) else count
    parts = [p for p in args.split(",") if p.strip()] if args else []
    if len(parts) not in counts:
        wanted = " or ".join(str(c) for c in counts)
        raise ValueError(f"controller spec '{name}' takes {wanted} integer argument(s), got {args!r}")
    try:
        return [int(p) for p in parts]
    except ValueError as exc:
        raise ValueError(f"controller spec '{name}:{args}': arguments must be integers") from exc


register_controller("fixed", lambda args: Fixed(*_ints(args, 1, "fixed")))
register_controller("linear", lambda args: TruncatedLinear(*_ints(args, 4, "linear")))


def make_controller(spec: str) -> RolloutLengthController:
    """Build a rollout-length controller from a spec such as ``fixed:5`` or ``linear:20,150,1,15``.

    The specs defined here: ``fixed:K``, ``linear:EPOCH_A,EPOCH_B,H_MIN,H_MAX``, ``inc:K_MAX``, ``dec:K_MAX``,
    ``incdec:K_MAX``, ``uncertainty:PERCENTILE[,K_MAX]``, ``random:K_INIT,K_CAP[,SEED]``. Other modules register
    theirs when imported (``learned:PATH`` comes with ``meta.rollout_length``).

    Raises:
        ValueError: unknown name (with the list of known names), a name of another spec kind such as an RLVR
            allocator (with the function that builds it), or malformed arguments.
    """
    controller = build_spec(ROLLOUT_LENGTH, spec)
    if not isinstance(controller, RolloutLengthController):
        raise TypeError(f"spec {spec!r} built {type(controller).__name__}, not a RolloutLengthController")
    return controller


def available_controllers() -> list[str]:
    """Names accepted by :func:`make_controller` (so far: names of modules not yet imported are missing)."""
    return available_specs(ROLLOUT_LENGTH)


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

    def max_length(self) -> int:
        return self.k_max

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


class RandomMetaPolicy(RolloutLengthController):
    """UP / DOWN / NOOP uniformly at random at each decision, through :func:`step_rollout_length` (the sanity floor
    of the meta-level comparison, Bhatia, Thomas & Zilberstein 2022). Spec: ``random:K_INIT,K_CAP[,SEED]``.

    Args:
        k_init: Rollout length before the first decision.
        k_cap: Largest rollout length.
        seed: Seed of the controller's own generator. ``None`` (a spec without SEED) draws from seed 0 until a caller
            sets :attr:`seed`; the meta-level comparison gives every run its own.
    """

    def __init__(self, k_init: int, k_cap: int, seed: int | None = None) -> None:
        if not 0 <= k_init <= k_cap:
            raise ValueError(f"need 0 <= k_init <= k_cap, got {k_init}, {k_cap}")
        if seed is not None and seed < 0:
            raise ValueError(f"seed must be >= 0, got {seed}")
        self.k_init, self.k_cap = int(k_init), int(k_cap)
        self.seed = None if seed is None else int(seed)
        self.k = self.k_init
        self.draws = 0

    def reset(self) -> None:
        self.k, self.draws = self.k_init, 0

    def decide(self, feedback: Feedback) -> int:
        # A fresh generator keyed by (seed, draw index) makes the state two ints, trivially saved and restored.
        seed = 0 if self.seed is None else self.seed
        action = StepAction(int(np.random.default_rng([seed, self.draws]).integers(len(StepAction))))
        self.draws += 1
        self.k = step_rollout_length(self.k, action, self.k_cap)
        return self.k

    def max_length(self) -> int:
        return self.k_cap

    def state_dict(self) -> dict[str, Any]:
        return {"k": self.k, "draws": self.draws}

    def __repr__(self) -> str:
        return f"RandomMetaPolicy({self.k_init}, {self.k_cap}, seed={self.seed})"


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

    def max_length(self) -> int:
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
register_controller("random", lambda args: RandomMetaPolicy(*_ints(args, (2, 3), "random")))
