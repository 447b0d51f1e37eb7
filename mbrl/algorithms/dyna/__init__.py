"""Dyna-DQN (Bhatia, Thomas & Zilberstein 2022, Algorithm 1): DQN trained on real and imagined transitions.

* :mod:`~mbrl.algorithms.dyna.config`: :class:`DynaConfig` and rl-zoo's DQN values per env family (:data:`ZOO_DQN`);
* :mod:`~mbrl.algorithms.dyna.batched`: :class:`BatchedDynaDQN`, many independent runs advanced in lockstep with
  their Q-networks batched over runs (the inner learner of the meta-MDP and of the arm evaluations);
* :mod:`~mbrl.algorithms.dyna.run`: :class:`DynaDQN`, one run on a real env with a rollout-length controller, its
  logs, checkpoints and exact resume (``rolloutlab mbrl train --algo dyna``).
"""

from __future__ import annotations

from mbrl.algorithms.dyna.batched import BatchedDynaDQN
from mbrl.algorithms.dyna.config import ZOO_DQN, DynaConfig, dyna_model_config
from mbrl.algorithms.dyna.run import DynaDQN

__all__ = ["ZOO_DQN", "BatchedDynaDQN", "DynaConfig", "DynaDQN", "dyna_model_config"]
