"""Known reward functions for the gymnasium environments rolloutlab plans on.

A planner that scores action sequences in a learned model (PETS, Chua et al. 2018; mbrl-lib's PETS) uses the task's
reward as a known function of the predicted states instead of a learned one: the reward is part of the task
definition, not of the unknown dynamics, and a learned reward adds its own error to every simulated return. Each
function reproduces the reward of the gymnasium 1.x environment, batched over samples, with the signature of
:mod:`mbrl.termination`: ``fn(obs, action, next_obs) -> reward`` with ``obs`` and ``next_obs`` of shape
``[N, obs_dim]``, ``action`` of shape ``[N, act_dim]`` and a float result of shape ``[N]``.

The functions here also take float32 torch tensors of any leading shape (``[..., dim]``, marked with
:func:`mbrl.termination.accepts_tensors`), so a planner scores particles without leaving torch; a registered function
without the mark is called with numpy rows.

Environments without an entry here can still be planned on with the model's learned reward head
(``PETSConfig.reward = "model"``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from mbrl.termination import accepts_tensors, base_name, inverted_pendulum

RewardFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def _batch(x: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"{name} must have shape [N, dim], got {x.shape}")
    return x


@accepts_tensors
def pendulum(obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
    """Pendulum-v1: ``-(theta^2 + 0.1 thetadot^2 + 0.001 u^2)`` of the state *before* the step.

    ``obs = [cos theta, sin theta, thetadot]``; ``theta`` is normalized to ``[-pi, pi)`` (``atan2``) and the torque
    ``u`` clipped to gymnasium's ``[-2, 2]`` first, as the environment does.
    """
    if isinstance(obs, torch.Tensor):
        u_t = action[..., 0].clamp(-2.0, 2.0)  # type: ignore[union-attr]
        theta_t = torch.atan2(obs[..., 1], obs[..., 0])
        return -(theta_t**2 + 0.1 * obs[..., 2] ** 2 + 0.001 * u_t**2)  # type: ignore[return-value]
    x = _batch(obs, "obs")
    u = np.clip(_batch(action, "action")[:, 0], -2.0, 2.0)
    theta = np.arctan2(x[:, 1], x[:, 0])
    return -(theta**2 + 0.1 * x[:, 2] ** 2 + 0.001 * u**2)


@accepts_tensors
def inverted_pendulum_reward(obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
    """InvertedPendulum-v5: 1 for every step that does not end the episode (``reward = int(not terminated)``)."""
    done = inverted_pendulum(obs, action, next_obs)
    if isinstance(done, torch.Tensor):
        return 1.0 - done.float()  # type: ignore[return-value]
    return 1.0 - done.astype(np.float64)


@accepts_tensors
def point_mass(obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
    """``rolloutlab/PointMass-v0``: ``-x'^2 - 0.01 a^2`` with the action clipped to ``[-1, 1]``."""
    if isinstance(next_obs, torch.Tensor):
        a_t = action[..., 0].clamp(-1.0, 1.0)  # type: ignore[union-attr]
        return -(next_obs[..., 0] ** 2) - 0.01 * a_t**2  # type: ignore[return-value]
    a = np.clip(_batch(action, "action")[:, 0], -1.0, 1.0)
    return -(_batch(next_obs, "next_obs")[:, 0] ** 2) - 0.01 * a**2


# Keyed by the environment name without namespace and version, as mbrl.termination.
_BY_NAME: dict[str, RewardFn] = {
    "Pendulum": pendulum,
    "InvertedPendulum": inverted_pendulum_reward,
    "PointMass": point_mass,
}


def register_reward_fn(name: str, fn: RewardFn) -> None:
    """Register ``fn`` for environments whose :func:`mbrl.termination.base_name` is ``name``."""
    _BY_NAME[name] = fn


def reward_fn(env_id: str) -> RewardFn | None:
    """The known reward function for ``env_id`` (namespace and version ignored), or ``None``."""
    return _BY_NAME.get(base_name(env_id))


def known_env_names() -> list[str]:
    """Environment base names with a known reward function."""
    return sorted(_BY_NAME)
