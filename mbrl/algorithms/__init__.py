"""Model-based learners: thin drivers that assemble buffers, world models, model envs and controllers."""

from __future__ import annotations

from mbrl.algorithms.base import ModelBasedRun
from mbrl.algorithms.dyna import BatchedDynaDQN, DynaConfig, DynaDQN
from mbrl.algorithms.mbpo import MBPO, MBPOConfig, SACConfig

__all__ = ["MBPO", "BatchedDynaDQN", "DynaConfig", "DynaDQN", "MBPOConfig", "ModelBasedRun", "SACConfig"]
