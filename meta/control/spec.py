"""One spec grammar and one registry for every kind of controller: ``name[:ARG,ARG,...]`` strings.

Every controller a command-line option or a config file names is written as a *spec*: a name, optionally a colon
and comma-separated arguments, e.g. ``fixed:5`` (a rollout-length controller), ``uniform:8`` (an RLVR allocator),
``hapo:0.2,1`` (a token-level controller), ``hbpo:0.05,4,6`` (a guidance controller), ``dart:1,4,8,2`` (a DART
trainer configuration), ``rollout_guided:0.2,0.1`` (a tool-use arm) or ``halt_error:0.01,8`` (a tokenizer halting
controller). :func:`parse_spec` reads the grammar, :meth:`Spec.numbers` is the one parser of numeric arguments, and
:data:`SPECS` is the one table from a spec name to its kind and its factory.

The kinds share one name space, so a name given to the builder of another kind is refused when it is parsed, with
the function that builds it (``make_controller("uniform:8")``: 'uniform' is an RLVR allocator spec, built by
``meta.rlvr.allocators.make_allocator``). Factories are named by dotted path and imported only when a spec of theirs is
built, so this module imports the standard library only and never imports a pillar: ``learned:PATH`` loads the
torch-side meta-policy loader only when a ``learned`` spec is built.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SpecKind:
    """One kind of spec: what a spec builds and the function users call to build it.

    Attributes:
        key: Short identifier, e.g. ``"rollout-length"``.
        title: What one spec builds, e.g. ``"rollout-length controller"``.
        article: ``"a"`` or ``"an"``, the article before ``title``.
        noun: Short word for error messages, e.g. ``"controller"``.
        builder: Dotted name of the function that builds this kind, e.g. ``"meta.control.make_controller"``.
    """

    key: str
    title: str
    article: str
    noun: str
    builder: str


ROLLOUT_LENGTH = SpecKind(
    "rollout-length", "rollout-length controller", "a", "controller", "meta.control.make_controller"
)
ALLOCATOR = SpecKind("rlvr-allocator", "RLVR allocator", "an", "allocator", "meta.rlvr.allocators.make_allocator")
TOKEN_CONTROLLER = SpecKind(
    "rlvr-token-controller",
    "RLVR token controller",
    "an",
    "token controller",
    "meta.rlvr.token.make_token_controller",
)
GUIDANCE = SpecKind("rlvr-guidance", "RLVR guidance", "an", "guidance controller", "meta.rlvr.guidance.make_guidance")
DART = SpecKind("rlvr-dart", "DART trainer", "a", "DART", "meta.rlvr.trainers.dart.make_dart_config")
TOOL_ARM = SpecKind("rlvr-tool-arm", "tool-use arm", "a", "tool arm", "meta.rlvr.vision.arms.make_tool_arm")
HALTING = SpecKind(
    "tokenizer-halting",
    "tokenizer halting controller",
    "a",
    "halting controller",
    "meta.tokenizer.halting.make_halting",
)

#: Every kind, by key.
KINDS: dict[str, SpecKind] = {
    kind.key: kind for kind in (ROLLOUT_LENGTH, ALLOCATOR, TOKEN_CONTROLLER, GUIDANCE, DART, TOOL_ARM, HALTING)
}


@dataclass(frozen=True)
class Spec:
    """A parsed spec.

    Attributes:
        text: The spec as written.
        name: Its name, lower-cased.
        args: Its comma-separated arguments, stripped, empty pieces dropped (``"fixed:5,"`` has one).
        kind: The kind it was parsed for.
    """

    text: str
    name: str
    args: tuple[str, ...]
    kind: SpecKind

    @property
    def raw_args(self) -> str:
        """Everything after the first colon, stripped (a path argument may hold commas)."""
        return self.text.partition(":")[2].strip()

    def numbers(
        self, usage: str, at_least: int = 0, at_most: int | None = None, whole: Collection[int] | bool = False
    ) -> list[float]:
        """The arguments as numbers: the one number parser of every spec kind.

        Args:
            usage: The arguments as the user writes them, for messages, e.g. ``"EPOCH_A,EPOCH_B,H_MIN,H_MAX"``.
            at_least: Fewest arguments.
            at_most: Most arguments (``None``: as many as given).
            whole: Positions (0-based) that must be whole numbers, or ``True`` for all; those come back as ``int``.

        Returns:
            The numbers, ``len(args)`` of them (missing optional ones are the caller's defaults).

        Raises:
            ValueError: Too few or too many arguments, an argument that is not a number, or a fraction where a whole
                number is needed. Every message names the spec and its usage.
        """
        count = len(self.args)
        if count < at_least or (at_most is not None and count > at_most):
            raise ValueError(f"{self.kind.noun} spec {self.text!r} takes {usage}, got {count} number(s)")
        values: list[float] = []
        for i, arg in enumerate(self.args):
            try:
                value = float(arg)
            except ValueError as exc:
                raise ValueError(f"{self.kind.noun} spec {self.text!r}: arguments must be numbers ({usage})") from exc
            if whole is True or (whole is not False and i in whole):
                if not math.isfinite(value) or value != int(value):
                    raise ValueError(
                        f"{self.kind.noun} spec {self.text!r}: {_argument_name(usage, i)} must be a whole number, "
                        f"got {arg!r} ({usage})"
                    )
                value = int(value)
            values.append(value)
        return values

    def integers(self, usage: str, at_least: int = 0, at_most: int | None = None) -> list[int]:
        """The arguments as whole numbers: :meth:`numbers` with every position whole."""
        return [int(v) for v in self.numbers(usage, at_least, at_most, whole=True)]


def _argument_name(usage: str, index: int) -> str:
    """The name ``usage`` gives argument ``index`` (``"THRESHOLD,LAMBDA[,BRANCHES]"``, 2 -> ``"BRANCHES"``), or
    ``"argument N"`` where the usage does not name it (a variable-length list such as ``"ALPHA,B1,...,BK"``)."""
    names = [n.strip() for n in re.sub(r"\(.*?\)|\[|\]", "", usage).split(",")]
    if "..." in names or index >= len(names) or not names[index]:
        return f"argument {index + 1}"
    return names[index]


#: A factory builds one spec's object from the parsed spec.
SpecFactory = Callable[[Spec], Any]


@dataclass(frozen=True)
class SpecEntry:
    """One registered spec name: its kind and its factory (a ``"module:function"`` path, or the function)."""

    kind: SpecKind
    factory: str | SpecFactory

    def build(self, spec: Spec) -> Any:
        factory = self.factory
        if isinstance(factory, str):
            module, _, function = factory.partition(":")
            factory = getattr(importlib.import_module(module), function)
        return factory(spec)


_ROLLOUT = "meta.control.rollout_length"
_ALLOCATORS = "meta.rlvr.allocators.specs"
_TOKEN = "meta.rlvr.token.specs"
_GUIDANCE = "meta.rlvr.guidance.specs"
_ARMS = "meta.rlvr.vision.arms"
_HALTING = "meta.tokenizer.halting"

#: The one registry: spec name -> kind and factory. Names are unique across kinds.
SPECS: dict[str, SpecEntry] = {
    # rollout-length controllers (meta.control.rollout_length; learned:PATH loads a meta-policy, torch and SB3)
    "fixed": SpecEntry(ROLLOUT_LENGTH, f"{_ROLLOUT}:fixed_from_spec"),
    "linear": SpecEntry(ROLLOUT_LENGTH, f"{_ROLLOUT}:linear_from_spec"),
    "inc": SpecEntry(ROLLOUT_LENGTH, f"{_ROLLOUT}:budget_linear_from_spec"),
    "dec": SpecEntry(ROLLOUT_LENGTH, f"{_ROLLOUT}:budget_linear_from_spec"),
    "incdec": SpecEntry(ROLLOUT_LENGTH, f"{_ROLLOUT}:budget_linear_from_spec"),
    "uncertainty": SpecEntry(ROLLOUT_LENGTH, f"{_ROLLOUT}:uncertainty_from_spec"),
    "random": SpecEntry(ROLLOUT_LENGTH, f"{_ROLLOUT}:random_from_spec"),
    "learned": SpecEntry(ROLLOUT_LENGTH, "meta.rollout_length.learned:learned_from_spec"),
    # RLVR allocators (meta.rlvr.allocators)
    "uniform": SpecEntry(ALLOCATOR, f"{_ALLOCATORS}:allocator_from_spec"),
    "dapo": SpecEntry(ALLOCATOR, f"{_ALLOCATORS}:allocator_from_spec"),
    "ar3po": SpecEntry(ALLOCATOR, f"{_ALLOCATORS}:allocator_from_spec"),
    "dars": SpecEntry(ALLOCATOR, f"{_ALLOCATORS}:allocator_from_spec"),
    "dars_b": SpecEntry(ALLOCATOR, f"{_ALLOCATORS}:allocator_from_spec"),
    "e3": SpecEntry(ALLOCATOR, f"{_ALLOCATORS}:allocator_from_spec"),
    "knapsack": SpecEntry(ALLOCATOR, f"{_ALLOCATORS}:allocator_from_spec"),
    # RLVR token-level controllers (meta.rlvr.token)
    "hapo": SpecEntry(TOKEN_CONTROLLER, f"{_TOKEN}:hapo_from_spec"),
    "eepo": SpecEntry(TOKEN_CONTROLLER, f"{_TOKEN}:eepo_from_spec"),
    "arpo": SpecEntry(TOKEN_CONTROLLER, f"{_TOKEN}:arpo_from_spec"),
    "ehpo": SpecEntry(TOKEN_CONTROLLER, f"{_TOKEN}:ehpo_from_spec"),
    # RLVR guidance controllers (meta.rlvr.guidance)
    "guide": SpecEntry(GUIDANCE, f"{_GUIDANCE}:guide_from_spec"),
    "seele": SpecEntry(GUIDANCE, f"{_GUIDANCE}:seele_from_spec"),
    "hbpo": SpecEntry(GUIDANCE, f"{_GUIDANCE}:hbpo_from_spec"),
    # DART trainer configurations (meta.rlvr.trainers.dart; torch)
    "dart": SpecEntry(DART, "meta.rlvr.trainers.dart:dart_config_from_spec"),
    "dart_sync": SpecEntry(DART, "meta.rlvr.trainers.dart:dart_config_from_spec"),
    # tool-use arms of adaptive pixel reasoning (meta.rlvr.vision.arms)
    "always_zoom": SpecEntry(TOOL_ARM, f"{_ARMS}:arm_from_spec"),
    "never_zoom": SpecEntry(TOOL_ARM, f"{_ARMS}:arm_from_spec"),
    "free_zoom": SpecEntry(TOOL_ARM, f"{_ARMS}:arm_from_spec"),
    "zoom_penalty": SpecEntry(TOOL_ARM, f"{_ARMS}:arm_from_spec"),
    "rollout_guided": SpecEntry(TOOL_ARM, f"{_ARMS}:arm_from_spec"),
    # halting controllers of the adaptive-length tokenizer (meta.tokenizer.halting)
    "halt_fixed": SpecEntry(HALTING, f"{_HALTING}:fixed_from_spec"),
    "halt_error": SpecEntry(HALTING, f"{_HALTING}:error_from_spec"),
    "halt_learned": SpecEntry(HALTING, f"{_HALTING}:learned_from_spec"),
}


def register_spec(kind: SpecKind, name: str, factory: str | SpecFactory) -> None:
    """Add a spec name of your own: ``name:ARGS`` specs of ``kind`` then build through ``factory(spec)``.

    Raises:
        ValueError: ``name`` is already registered (the message names its kind).
    """
    name = name.strip().lower()
    if name in SPECS:
        other = SPECS[name].kind
        raise ValueError(f"spec name {name!r} is already {other.article} {other.title} spec")
    SPECS[name] = SpecEntry(kind, factory)


def available_specs(kind: SpecKind) -> list[str]:
    """The spec names of ``kind``, sorted."""
    return sorted(name for name, entry in SPECS.items() if entry.kind == kind)


def parse_spec(text: str, kind: SpecKind) -> Spec:
    """Read ``name[:ARG,ARG,...]`` as a spec of ``kind``.

    Raises:
        ValueError: The name belongs to another kind (the message names that kind's builder) or is unknown (the
            message lists the known names of ``kind``).
    """
    name, _, args = text.partition(":")
    name = name.strip().lower()
    entry = SPECS.get(name)
    if entry is None:
        known = ", ".join(available_specs(kind))
        raise ValueError(f"unknown {kind.noun} {name!r} in spec {text!r}; known {kind.title} specs: {known}")
    if entry.kind != kind:
        other = entry.kind
        raise ValueError(
            f"{name!r} is {other.article} {other.title} spec, not {kind.article} {kind.title}: "
            f"build {text!r} with {other.builder}"
        )
    pieces = tuple(p.strip() for p in args.split(",")) if args.strip() else ()
    return Spec(text=text, name=name, args=tuple(p for p in pieces if p), kind=kind)


def build_spec(kind: SpecKind, text: str) -> Any:
    """Build the object a ``name[:ARGS]`` spec of ``kind`` names (kind-checked by :func:`parse_spec`)."""
    spec = parse_spec(text, kind)
    return SPECS[spec.name].build(spec)


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
