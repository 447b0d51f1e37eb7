"""The LLM bridge: adaptive-rollout controllers for RL with verifiable rewards (RLVR).

Importing this package needs numpy only (no torch, transformers or TRL): the allocators, statistics and controllers
here can be dropped into any LLM training loop. The compact GRPO trainer (:mod:`meta.rlvr.grpo`), the character-level
model (:mod:`meta.rlvr.charlm`) and the TRL adapter (:mod:`meta.rlvr.trl`) import torch / transformers / TRL and are
imported explicitly.
"""

from __future__ import annotations

from meta.rlvr.allocators import Allocator, DynamicSampling, Uniform, is_mixed, make_allocator
from meta.rlvr.ar3po import AR3PO
from meta.rlvr.arpo import ARPO
from meta.rlvr.clipping import BalancedClip, positive_share
from meta.rlvr.dars import DARS, cumulative_advantage_factor
from meta.rlvr.e3 import E3Budget
from meta.rlvr.eepo import EEPO
from meta.rlvr.ehpo import EHPO
from meta.rlvr.hapo import HAPO
from meta.rlvr.knapsack import Knapsack, p_mixed, solve_knapsack
from meta.rlvr.length_penalty import AdaptiveLengthPenalty
from meta.rlvr.reuse import ResponseBuffer, StoredResponse
from meta.rlvr.staging import CostLedger, reuse_or_store, run_stages
from meta.rlvr.stats import PromptStats, StatsTable
from meta.rlvr.temperature import EntropyTemperature
from meta.rlvr.token_controllers import make_token_controller

__all__ = [
    "AR3PO",
    "ARPO",
    "DARS",
    "EEPO",
    "EHPO",
    "HAPO",
    "AdaptiveLengthPenalty",
    "Allocator",
    "BalancedClip",
    "CostLedger",
    "DynamicSampling",
    "E3Budget",
    "EntropyTemperature",
    "Knapsack",
    "PromptStats",
    "ResponseBuffer",
    "StatsTable",
    "StoredResponse",
    "Uniform",
    "cumulative_advantage_factor",
    "is_mixed",
    "make_allocator",
    "make_token_controller",
    "p_mixed",
    "positive_share",
    "reuse_or_store",
    "run_stages",
    "solve_knapsack",
]
