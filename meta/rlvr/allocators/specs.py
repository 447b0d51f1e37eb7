"""Allocator specs: :func:`make_allocator` and the factory :data:`meta.control.spec.SPECS` names for every allocator.

This module imports every allocator class directly, and the allocator modules import only their base class, so the
registry is complete whichever module was imported first. Specs (defaults in brackets):

* ``uniform:G`` [8] — :class:`~meta.rlvr.allocators.base.Uniform`;
* ``dapo:G,MAX_ROUNDS`` [8,3] — :class:`~meta.rlvr.allocators.base.DynamicSampling`;
* ``ar3po:K,S`` [2,4] — :class:`~meta.rlvr.allocators.ar3po.AR3PO`;
* ``dars:N,N_MAX`` [4,16] — :class:`~meta.rlvr.allocators.dars.DARS`;
* ``dars_b:N,N_MAX,EPOCHS,BREADTH`` [4,16,2,64] — :class:`~meta.rlvr.allocators.dars_breadth.DARSBreadth`;
* ``e3:N_MIN,N_MAX[,BUDGET,DELTA,N_LOW,N_HIGH]`` [4,12,8,2,2,16] — :class:`~meta.rlvr.allocators.e3.E3Budget`;
* ``knapsack:BUDGET_PER_PROMPT,N_MAX[,N_MIN]`` [8,32,0] — :class:`~meta.rlvr.allocators.knapsack.Knapsack`.
"""

from __future__ import annotations

from collections.abc import Callable

from meta.control.spec import ALLOCATOR, Spec, build_spec
from meta.rlvr.allocators.ar3po import AR3PO
from meta.rlvr.allocators.base import Allocator, DynamicSampling, Uniform
from meta.rlvr.allocators.dars import DARS
from meta.rlvr.allocators.dars_breadth import DARSBreadth
from meta.rlvr.allocators.e3 import E3Budget
from meta.rlvr.allocators.knapsack import Knapsack

#: Spec name -> (allocator class, its arguments as written, all optional). Every argument is a
#: whole number passed positionally; missing ones keep the class's defaults.
ALLOCATOR_SPECS: dict[str, tuple[Callable[..., Allocator], str]] = {
    "uniform": (Uniform, "G"),
    "dapo": (DynamicSampling, "G,MAX_ROUNDS"),
    "ar3po": (AR3PO, "K,S"),
    "dars": (DARS, "N,N_MAX"),
    "dars_b": (DARSBreadth, "N,N_MAX,EPOCHS,BREADTH"),
    "e3": (E3Budget, "N_MIN,N_MAX,BUDGET,DELTA,N_LOW,N_HIGH"),
    "knapsack": (Knapsack, "BUDGET_PER_PROMPT,N_MAX,N_MIN"),
}


def allocator_from_spec(spec: Spec) -> Allocator:
    """The allocator a parsed allocator spec names (the factory the registry calls)."""
    cls, usage = ALLOCATOR_SPECS[spec.name]
    nums = spec.numbers(f"[{usage}] (whole numbers)", 0, usage.count(",") + 1, whole=True)
    return cls(*nums)


def make_allocator(spec: str) -> Allocator:
    """Build an allocator from ``name[:a,b,...]`` (specs and defaults: the module docstring).

    Raises:
        ValueError: unknown name (with the known ones), a spec of another kind such as the rollout-length ``fixed:4``
            (with the function that builds it), malformed numbers, or values the allocator refuses.
    """
    allocator = build_spec(ALLOCATOR, spec)
    if not isinstance(allocator, Allocator):
        raise TypeError(f"spec {spec!r} built {type(allocator).__name__}, not an Allocator")
    return allocator
