"""Loading a trained meta-policy: the SB3 policy both meta-MDPs export (rollout length K and RLVR group size G).

Meta-training (:mod:`meta.control.training`) saves the SB3 policy's ``state_dict`` with the algorithm and network
sizes; :class:`meta.rollout_length.learned.LearnedController` and :class:`meta.rlvr.learned.LearnedGroupSize` rebuild
an empty policy of that kind with :func:`build_meta_policy` and load the weights into it. Imports SB3 (torch) when
called, not when imported.
"""

from __future__ import annotations

from typing import Any

from rolloutlab.checkpoint import CheckpointError


def build_meta_policy(algo: str, net_arch: list[int], obs_space: Any, act_space: Any) -> Any:
    """An empty SB3 policy of the exported meta-agent's kind (``dqn`` or ``ppo``), for loading its ``state_dict``.

    Raises:
        CheckpointError: an unknown algorithm.
    """
    if algo == "dqn":
        from stable_baselines3.dqn.policies import DQNPolicy

        return DQNPolicy(obs_space, act_space, lambda _: 0.0, net_arch=net_arch)
    if algo == "ppo":
        from stable_baselines3.common.policies import ActorCriticPolicy

        return ActorCriticPolicy(obs_space, act_space, lambda _: 0.0, net_arch=net_arch)
    raise CheckpointError(f"unknown meta-agent algorithm {algo!r}")
