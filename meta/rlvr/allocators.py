"""Per-prompt rollout allocators: how many responses each prompt of a GRPO step gets, possibly in stages.

The problem they address: with binary verifiable rewards a group whose responses are all right or all wrong has zero
group-normalised advantage (Shao et al. 2024, GRPO, eq. 3), so its rollouts cost tokens and teach nothing.

An allocator is a :class:`meta.controllers.Controller`. A trainer drives it through three calls per step:

1. :meth:`Allocator.initial` — first-stage counts ``n_i`` for the batch's prompts, from the :class:`StatsTable`;
2. :meth:`Allocator.extra` — after each stage, more responses per prompt given the rewards seen so far this step
   (all zeros ends the step; at most :attr:`Allocator.max_stages` stages);
3. :meth:`Allocator.keep` — which groups enter the loss (DAPO drops zero-variance groups; the rest keep all).

``refill`` (DAPO dynamic sampling) asks the trainer to draw fresh prompts until the batch is full of kept groups.
``decide(feedback)`` wraps the first two for the generic controller protocol. Everything is plain Python; no torch.

The staged / budgeted methods live beside this file: :mod:`meta.rlvr.ar3po`, :mod:`meta.rlvr.dars`,
:mod:`meta.rlvr.e3`, :mod:`meta.rlvr.knapsack`; :func:`make_allocator` builds any of them from a spec string. Allocator
specs are their own kind, apart from the rollout-length specs of :func:`meta.controllers.make_controller`: each
builder refuses the other's names with a pointer to the right one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from meta.controllers import Controller, Feedback, build_spec, register_spec, register_spec_kind
from meta.rlvr.stats import StatsTable


def is_mixed(rewards: Sequence[float]) -> bool:
    """Whether a group has a non-zero reward spread (at least two distinct rewards), i.e. a GRPO signal."""
    return len(rewards) > 1 and max(rewards) > min(rewards)


class Allocator(Controller):
    """Base allocator: uniform ``group_size`` responses per prompt, one stage, keep every group.

    Attributes:
        name: Short name used in logs and results.
        max_stages: Upper bound on stages per step (the trainer stops after this many even if ``extra`` asks more).
        refill: If true the trainer replaces dropped groups by fresh prompts (DAPO dynamic sampling).
    """

    name = "base"
    max_stages = 1
    refill = False

    def initial(self, keys: Sequence[str], stats: StatsTable) -> list[int]:
        """First-stage response counts, one per prompt (each ``>= 0``)."""
        raise NotImplementedError

    def extra(self, keys: Sequence[str], rewards: Sequence[Sequence[float]], stage: int) -> list[int]:
        """Additional responses per prompt after ``stage`` completed stages (1-based); zeros end the step.

        Args:
            keys: Prompt keys of the step, in batch order.
            rewards: Rewards collected so far this step, one list per prompt.
            stage: Number of stages already run (1 after the first).
        """
        return [0] * len(keys)

    def keep(self, rewards: Sequence[Sequence[float]]) -> list[bool]:
        """Which groups enter the loss; default: every group with at least one response."""
        return [len(r) > 0 for r in rewards]

    def end_epoch(self) -> None:
        """Hook called by the trainer after each pass over its prompt pool (E3 widens its bounds here)."""

    def decide(self, feedback: Feedback) -> list[int]:
        """Controller protocol: ``feedback`` has ``keys`` and either ``stats`` (first stage) or ``rewards`` and
        ``stage`` (later stages); returns the counts."""
        keys = list(feedback["keys"])
        if "rewards" in feedback:
            return self.extra(keys, feedback["rewards"], int(feedback.get("stage", 1)))
        stats = feedback.get("stats")
        return self.initial(keys, stats if stats is not None else StatsTable())

    def describe(self) -> dict[str, Any]:
        """The allocator's name and settings, for result files."""
        return {"name": self.name, **{k: v for k, v in vars(self).items() if not k.startswith("_")}}


class Uniform(Allocator):
    """GRPO baseline: every prompt gets the same ``group_size`` G responses (Shao et al. 2024)."""

    name = "uniform"

    def __init__(self, group_size: int = 8) -> None:
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        self.group_size = int(group_size)

    def initial(self, keys: Sequence[str], stats: StatsTable) -> list[int]:
        return [self.group_size] * len(keys)


class DynamicSampling(Uniform):
    """DAPO dynamic sampling (Yu et al. 2025, DAPO, eq. 11 constraint ``0 < |{o_i correct}| < G``).

    Sample G per prompt, drop groups whose accuracy is 0 or 1, and let the trainer draw fresh prompts (``refill``) until
    the batch holds the wanted number of mixed groups or ``max_rounds`` refills were made. The dropped groups' tokens
    are still paid for; that is the cost this baseline makes visible.
    """

    name = "dapo"
    refill = True

    def __init__(self, group_size: int = 8, max_rounds: int = 3) -> None:
        super().__init__(group_size)
        if max_rounds < 0:
            raise ValueError(f"max_rounds must be >= 0, got {max_rounds}")
        self.max_rounds = int(max_rounds)

    def keep(self, rewards: Sequence[Sequence[float]]) -> list[bool]:
        return [is_mixed(r) for r in rewards]


def _numbers(args: str) -> list[float]:
    return [float(p) for p in args.split(",") if p.strip()] if args else []


#: The spec kind of the allocators :func:`make_allocator` builds (declared in :mod:`meta.controllers`'s registry, so
#: ``make_controller("uniform:8")`` is refused with a pointer here, and ``make_allocator("fixed:4")`` the other way).
ALLOCATOR_SPECS = "rlvr-allocator"
#: Allocator spec names.
ALLOCATOR_NAMES = ("uniform", "dapo", "ar3po", "dars", "e3", "knapsack")


def _build(name: str, args: str) -> Allocator:
    from meta.rlvr.ar3po import AR3PO
    from meta.rlvr.dars import DARS
    from meta.rlvr.e3 import E3Budget
    from meta.rlvr.knapsack import Knapsack

    spec = f"{name}:{args}" if args else name
    try:
        nums = [int(x) for x in _numbers(args)]
    except ValueError as exc:
        raise ValueError(f"allocator spec {spec!r}: arguments must be numbers") from exc
    builders: dict[str, Any] = {
        "uniform": Uniform,
        "dapo": DynamicSampling,
        "ar3po": AR3PO,
        "dars": DARS,
        "e3": E3Budget,
        "knapsack": Knapsack,
    }
    try:
        return builders[name](*nums)  # type: ignore[no-any-return]
    except TypeError as exc:
        raise ValueError(f"allocator spec {spec!r}: {exc}") from exc


def _spec_factory(name: str) -> Callable[[str], Allocator]:
    return lambda args: _build(name, args)


register_spec_kind(ALLOCATOR_SPECS, "RLVR allocator", "an", "allocator", "meta.rlvr.allocators.make_allocator")
for _name in ALLOCATOR_NAMES:
    register_spec(ALLOCATOR_SPECS, _name, _spec_factory(_name))


def make_allocator(spec: str) -> Allocator:
    """Build an allocator from ``name[:a,b,...]``.

    Specs (defaults in brackets): ``uniform:G`` [8]; ``dapo:G,max_rounds`` [8,3]; ``ar3po:k,S`` [2,4];
    ``dars:N,N_max`` [4,16]; ``e3:n_min,n_max`` [4,12] (budget = 8 per prompt unless set on the object);
    ``knapsack:budget_per_prompt,n_max`` [8,32].

    Raises:
        ValueError: unknown name (with the known ones), a rollout-length controller spec such as ``fixed:4`` (with
            the function that builds it), or malformed numbers.
    """
    allocator = build_spec(ALLOCATOR_SPECS, spec)
    if not isinstance(allocator, Allocator):
        raise TypeError(f"spec {spec!r} built {type(allocator).__name__}, not an Allocator")
    return allocator
