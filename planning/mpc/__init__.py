"""Model-predictive control on learned models: CEM / MPPI over action sequences scored in an ensemble (PETS)."""

from planning.mpc.optimizers import ActionSequenceOptimizer, CEMConfig, CEMOptimizer, MPPIConfig, MPPIOptimizer
from planning.mpc.planner import MPCPlanner
from planning.mpc.trajectories import PROPAGATIONS, TrajectoryEvaluator

__all__ = [
    "PROPAGATIONS",
    "ActionSequenceOptimizer",
    "CEMConfig",
    "CEMOptimizer",
    "MPCPlanner",
    "MPPIConfig",
    "MPPIOptimizer",
    "TrajectoryEvaluator",
]
