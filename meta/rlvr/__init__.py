"""The LLM bridge: adaptive-rollout controllers for RL with verifiable rewards (RLVR).

Rooms:

* :mod:`meta.rlvr.allocators` — how many responses each prompt gets (GRPO, DAPO, AR3PO, DARS, E3, knapsack);
* :mod:`meta.rlvr.token` — controllers inside a group's sampling and loss (HAPO, EEPO, ARPO, EHPO, temperature,
  length penalty, clipping);
* :mod:`meta.rlvr.guidance` — what responses are sampled with (Guide, SEELE, HBPO);
* :mod:`meta.rlvr.trainers` — the compact GRPO trainer, DART, DARS-B, SFT and the run driver (torch);
* :mod:`meta.rlvr.lm` — the character-level model, its vocabulary and a transformers tokenizer (torch);
* :mod:`meta.rlvr.meta_mdp` and :mod:`meta.rlvr.learned` — the group-size meta-MDP and its trained policy;
* :mod:`meta.rlvr.trl` — :class:`AllocatingGRPOTrainer`, the allocators inside TRL's ``GRPOTrainer``, switched on by
  :class:`AdaptiveRolloutConfig` (``meta.rlvr.trl_config``).

Importing this package needs numpy only (no torch, transformers or TRL): the allocators, statistics and controllers
can be dropped into any LLM training loop. The guidance controllers (which read the reasoning environments) and the
names that need torch / transformers / TRL (:class:`AllocatingGRPOTrainer`, :class:`GRPOTrainer`, ...) load on first
use (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from meta.rlvr.allocators import (
    AR3PO,
    DARS,
    Allocator,
    CostLedger,
    DARSBreadth,
    DynamicSampling,
    E3Budget,
    Knapsack,
    PromptStats,
    ResponseBuffer,
    StatsTable,
    StoredResponse,
    Uniform,
    cumulative_advantage_factor,
    is_mixed,
    make_allocator,
    p_mixed,
    reuse_or_store,
    run_stages,
    solve_knapsack,
)
from meta.rlvr.token import (
    ARPO,
    EEPO,
    EHPO,
    HAPO,
    AdaptiveLengthPenalty,
    BalancedClip,
    EntropyTemperature,
    make_token_controller,
    positive_share,
)
from rolloutlab.lazy import lazy_getattr

if TYPE_CHECKING:
    from meta.rlvr.guidance import HBPO, SEELE, Guidance, Guide, make_guidance
    from meta.rlvr.learned import GroupSizeCallback, LearnedGroupSize, RandomGroupSize, TokenBudgetCallback
    from meta.rlvr.meta_mdp import RLVRMetaConfig
    from meta.rlvr.trainers.dart import DARTConfig, DARTTrainer, make_dart_config
    from meta.rlvr.trainers.grpo import GRPOTrainer
    from meta.rlvr.trainers.grpo_config import GRPOConfig
    from meta.rlvr.trainers.run import GRPORun, GRPORunConfig
    from meta.rlvr.trl import AllocatingGRPOTrainer
    from meta.rlvr.trl_config import AdaptiveRolloutConfig

# The guidance room reads envs.reasoning (HBPO's budget prompt), which registers gymnasium environments; the trainers,
# the meta-MDP and the TRL adapter import torch / transformers / TRL.
_HOMES = {
    "Guidance": "meta.rlvr.guidance",
    "Guide": "meta.rlvr.guidance",
    "HBPO": "meta.rlvr.guidance",
    "SEELE": "meta.rlvr.guidance",
    "make_guidance": "meta.rlvr.guidance",
    "AdaptiveRolloutConfig": "meta.rlvr.trl_config",
    "AllocatingGRPOTrainer": "meta.rlvr.trl",
    "DARTConfig": "meta.rlvr.trainers.dart",
    "DARTTrainer": "meta.rlvr.trainers.dart",
    "GRPOConfig": "meta.rlvr.trainers.grpo",
    "GRPORun": "meta.rlvr.trainers.run",
    "GRPORunConfig": "meta.rlvr.trainers.run",
    "GRPOTrainer": "meta.rlvr.trainers.grpo",
    "GroupSizeCallback": "meta.rlvr.learned",
    "LearnedGroupSize": "meta.rlvr.learned",
    "RLVRMetaConfig": "meta.rlvr.meta_mdp",
    "RandomGroupSize": "meta.rlvr.learned",
    "TokenBudgetCallback": "meta.rlvr.learned",
    "make_dart_config": "meta.rlvr.trainers.dart",
}

__all__ = [
    "AR3PO",
    "ARPO",
    "DARS",
    "EEPO",
    "EHPO",
    "HAPO",
    "HBPO",
    "SEELE",
    "AdaptiveLengthPenalty",
    "AdaptiveRolloutConfig",
    "AllocatingGRPOTrainer",
    "Allocator",
    "BalancedClip",
    "CostLedger",
    "DARSBreadth",
    "DARTConfig",
    "DARTTrainer",
    "DynamicSampling",
    "E3Budget",
    "EntropyTemperature",
    "GRPOConfig",
    "GRPORun",
    "GRPORunConfig",
    "GRPOTrainer",
    "GroupSizeCallback",
    "Guidance",
    "Guide",
    "Knapsack",
    "LearnedGroupSize",
    "PromptStats",
    "RLVRMetaConfig",
    "RandomGroupSize",
    "ResponseBuffer",
    "StatsTable",
    "StoredResponse",
    "TokenBudgetCallback",
    "Uniform",
    "cumulative_advantage_factor",
    "is_mixed",
    "make_allocator",
    "make_dart_config",
    "make_guidance",
    "make_token_controller",
    "p_mixed",
    "positive_share",
    "reuse_or_store",
    "run_stages",
    "solve_knapsack",
]


__getattr__ = lazy_getattr(__name__, _HOMES)
