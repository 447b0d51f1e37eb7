"""Per-prompt rollout allocators: how many responses each prompt of a GRPO step gets (numpy only).

* :mod:`.base` — :class:`Allocator`, :class:`Uniform` (GRPO), :class:`DynamicSampling` (DAPO);
* :mod:`.ar3po`, :mod:`.dars`, :mod:`.dars_breadth`, :mod:`.e3`, :mod:`.knapsack` — staged and budgeted allocators;
* :mod:`.stats` — per-prompt solve-rate statistics the allocators read;
* :mod:`.staging` and :mod:`.reuse` — running an allocator's stages, with the token cost ledger and response reuse;
* :mod:`.specs` — :func:`make_allocator`, which builds any of them from a spec such as ``dars:4,16``.
"""

from __future__ import annotations

from meta.rlvr.allocators.ar3po import AR3PO
from meta.rlvr.allocators.base import Allocator, DynamicSampling, Uniform, is_mixed
from meta.rlvr.allocators.dars import DARS, cumulative_advantage_factor
from meta.rlvr.allocators.dars_breadth import DARSBreadth
from meta.rlvr.allocators.e3 import E3Budget
from meta.rlvr.allocators.knapsack import Knapsack, p_mixed, solve_knapsack
from meta.rlvr.allocators.reuse import ResponseBuffer, StoredResponse
from meta.rlvr.allocators.specs import make_allocator
from meta.rlvr.allocators.staging import CostLedger, reuse_or_store, run_stages
from meta.rlvr.allocators.stats import PromptStats, StatsTable

__all__ = [
    "AR3PO",
    "DARS",
    "Allocator",
    "CostLedger",
    "DARSBreadth",
    "DynamicSampling",
    "E3Budget",
    "Knapsack",
    "PromptStats",
    "ResponseBuffer",
    "StatsTable",
    "StoredResponse",
    "Uniform",
    "cumulative_advantage_factor",
    "is_mixed",
    "make_allocator",
    "p_mixed",
    "reuse_or_store",
    "run_stages",
    "solve_knapsack",
]
