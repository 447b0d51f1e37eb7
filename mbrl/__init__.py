"""World models and model-based learners (MBPO on SB3 SAC, Dyna-DQN).

The learners and the parts they are built from, importable from here::

    from mbrl import MBPO, MBPOConfig

    run = MBPO(MBPOConfig(total_steps=2_000), env="Pendulum-v1", controller="fixed:1").learn()
    print(run.eval_history)  # [(env_steps, mean return), ...]

* learners: :class:`MBPO` / :class:`MBPOConfig` (continuous actions) and :class:`DynaDQN` / :class:`DynaConfig`
  (discrete actions); PETS is :class:`planning.mpc.PETS`;
* parts a learner is composed of: :class:`DynamicsModel` / :class:`ModelConfig` (the Gaussian ensemble world model),
  :class:`ModelEnv` (imagined rollouts in it), :class:`TransitionBuffer` (real data) and
  :class:`RolloutLengthDriver` (the one owner of the rollout-length controller's decisions).

The names load on first use (PEP 562): they pull in torch and SB3, and the ``rolloutlab`` command imports this
package at every start.

Note: ``mbrl`` is also the import name of facebookresearch's mbrl-lib; do not install both in one environment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rolloutlab.lazy import lazy_getattr

if TYPE_CHECKING:
    from mbrl.algorithms.dyna import DynaConfig, DynaDQN
    from mbrl.algorithms.mbpo import MBPO, MBPOConfig, SACConfig
    from mbrl.buffers import TransitionBuffer
    from mbrl.model_env import ModelEnv
    from mbrl.models import DynamicsModel, ModelConfig
    from mbrl.phases import RolloutLengthDriver

_HOMES = {
    "DynaConfig": "mbrl.algorithms.dyna",
    "DynaDQN": "mbrl.algorithms.dyna",
    "DynamicsModel": "mbrl.models",
    "MBPO": "mbrl.algorithms.mbpo",
    "MBPOConfig": "mbrl.algorithms.mbpo",
    "ModelConfig": "mbrl.models",
    "ModelEnv": "mbrl.model_env",
    "RolloutLengthDriver": "mbrl.phases",
    "SACConfig": "mbrl.algorithms.mbpo",
    "TransitionBuffer": "mbrl.buffers",
}

__all__ = [
    "MBPO",
    "DynaConfig",
    "DynaDQN",
    "DynamicsModel",
    "MBPOConfig",
    "ModelConfig",
    "ModelEnv",
    "RolloutLengthDriver",
    "SACConfig",
    "TransitionBuffer",
]


__getattr__ = lazy_getattr(__name__, _HOMES)
