"""Model-predictive control on learned models: CEM / MPPI over action sequences scored in an ensemble (PETS).

::

    from planning.mpc import PETS, PETSConfig

    run = PETS(PETSConfig(total_steps=600), env="Pendulum-v1", controller="fixed:15").learn()

The names below load on first use (PEP 562): the ``rolloutlab`` command imports :mod:`planning.mpc.cli` at every
start to register ``--algo pets``, and that should not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rolloutlab.lazy import lazy_getattr

if TYPE_CHECKING:
    from planning.mpc.optimizers import ActionSequenceOptimizer, CEMConfig, CEMOptimizer, MPPIConfig, MPPIOptimizer
    from planning.mpc.pets import PETS, PETSConfig
    from planning.mpc.planner import MPCPlanner
    from planning.mpc.trajectories import PROPAGATIONS, TrajectoryEvaluator

_HOMES = {
    "ActionSequenceOptimizer": "planning.mpc.optimizers",
    "CEMConfig": "planning.mpc.optimizers",
    "CEMOptimizer": "planning.mpc.optimizers",
    "MPPIConfig": "planning.mpc.optimizers",
    "MPPIOptimizer": "planning.mpc.optimizers",
    "MPCPlanner": "planning.mpc.planner",
    "PETS": "planning.mpc.pets",
    "PETSConfig": "planning.mpc.pets",
    "PROPAGATIONS": "planning.mpc.trajectories",
    "TrajectoryEvaluator": "planning.mpc.trajectories",
}

__all__ = [
    "PETS",
    "PROPAGATIONS",
    "ActionSequenceOptimizer",
    "CEMConfig",
    "CEMOptimizer",
    "MPCPlanner",
    "MPPIConfig",
    "MPPIOptimizer",
    "PETSConfig",
    "TrajectoryEvaluator",
]


__getattr__ = lazy_getattr(__name__, _HOMES)
