"""Known termination functions for the gymnasium environments rolloutlab supports.

A world model predicts the next state and the reward; whether that next state *ends the episode* is, for the standard
benchmarks, a known function of the observation, so MBPO (Janner et al. 2019) and mbrl-lib hand it to the model env
instead of learning it. Each function here reproduces the ``terminated`` flag of the gymnasium 1.x environment from
its observation, batched over samples. A horizon cut (``TimeLimit``) is ``truncated``, never ``terminated``, and is
therefore never predicted here.

Every function has the signature ``fn(obs, action, next_obs) -> terminated`` with ``obs`` and ``next_obs`` of shape
``[N, obs_dim]``, ``action`` of shape ``[N, act_dim]`` or ``[N]`` and a boolean result of shape ``[N]``. Environments
without a known function fall back to the model's learned termination head (``ModelConfig.learned_termination``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import torch

TerminationFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]

F = TypeVar("F", bound=Callable[..., Any])


def accepts_tensors(fn: F) -> F:
    """Mark ``fn`` as also taking float32 torch tensors of any leading shape ``[..., dim]`` and returning a tensor
    (on their device): a planner then calls it without leaving torch. Functions without the mark get numpy rows."""
    fn.accepts_tensors = True  # type: ignore[attr-defined]
    return fn


def takes_tensors(fn: Callable[..., Any] | None) -> bool:
    """Whether ``fn`` carries the :func:`accepts_tensors` mark."""
    return bool(getattr(fn, "accepts_tensors", False))


def _as_batch(next_obs: np.ndarray) -> np.ndarray:
    next_obs = np.asarray(next_obs, dtype=np.float64)
    if next_obs.ndim != 2:
        raise ValueError(f"next_obs must have shape [N, obs_dim], got {next_obs.shape}")
    return next_obs


@accepts_tensors
def never(obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
    """No terminal states (Pendulum, HalfCheetah): every episode ends by truncation only."""
    if isinstance(next_obs, torch.Tensor):
        return torch.zeros(next_obs.shape[:-1], dtype=torch.bool, device=next_obs.device)  # type: ignore[return-value]
    return np.zeros(_as_batch(next_obs).shape[0], dtype=bool)


@accepts_tensors
def inverted_pendulum(obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
    """InvertedPendulum-v4/v5: pole angle ``next_obs[:, 1]`` outside ``[-0.2, 0.2]`` rad, or a non-finite value."""
    if isinstance(next_obs, torch.Tensor):
        return ~torch.isfinite(next_obs).all(dim=-1) | (next_obs[..., 1].abs() > 0.2)  # type: ignore[return-value]
    x = _as_batch(next_obs)
    return ~np.isfinite(x).all(axis=1) | (np.abs(x[:, 1]) > 0.2)


def hopper(obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
    """Hopper-v4/v5 (positions excluded from the observation): unhealthy means terminated.

    Healthy: height ``next_obs[:, 0] > 0.7``, torso angle ``|next_obs[:, 1]| < 0.2`` and every entry of
    ``next_obs[:, 1:]`` strictly inside ``(-100, 100)`` (gymnasium's ``healthy_*_range`` defaults).
    """
    x = _as_batch(next_obs)
    z, angle, state = x[:, 0], x[:, 1], x[:, 1:]
    healthy = (
        np.isfinite(x).all(axis=1)
        & (z > 0.7)
        & (angle > -0.2)
        & (angle < 0.2)
        & np.all((state > -100.0) & (state < 100.0), axis=1)
    )
    return ~healthy


def walker2d(obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
    """Walker2d-v4/v5: healthy while height ``next_obs[:, 0]`` is in ``(0.8, 2.0)`` and angle in ``(-1, 1)`` rad."""
    x = _as_batch(next_obs)
    z, angle = x[:, 0], x[:, 1]
    healthy = np.isfinite(x).all(axis=1) & (z > 0.8) & (z < 2.0) & (angle > -1.0) & (angle < 1.0)
    return ~healthy


def mountain_car(obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
    """MountainCar-v0: position ``>= 0.5`` and velocity ``>= 0`` (the default ``goal_velocity``)."""
    x = _as_batch(next_obs)
    return (x[:, 0] >= 0.5) & (x[:, 1] >= 0.0)


def mountain_car_continuous(obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
    """MountainCarContinuous-v0: position ``>= 0.45`` and velocity ``>= 0``."""
    x = _as_batch(next_obs)
    return (x[:, 0] >= 0.45) & (x[:, 1] >= 0.0)


def acrobot(obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
    """Acrobot-v1: the tip is above the bar, ``-cos(t1) - cos(t1 + t2) > 1``.

    The observation is ``[cos t1, sin t1, cos t2, sin t2, dt1, dt2]``, so ``cos(t1 + t2)`` is expanded as
    ``cos t1 cos t2 - sin t1 sin t2``.
    """
    x = _as_batch(next_obs)
    c1, s1, c2, s2 = x[:, 0], x[:, 1], x[:, 2], x[:, 3]
    return (-c1 - (c1 * c2 - s1 * s2)) > 1.0


_CARTPOLE_THETA = 12 * 2 * math.pi / 360  # gymnasium's theta_threshold_radians


def cartpole(obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
    """CartPole-v0/v1: cart position outside ``[-2.4, 2.4]`` or pole angle outside ``±12°``."""
    x = _as_batch(next_obs)
    return (np.abs(x[:, 0]) > 2.4) | (np.abs(x[:, 2]) > _CARTPOLE_THETA)


# Keyed by the environment name without namespace and version ("Hopper-v5" -> "Hopper").
_BY_NAME: dict[str, TerminationFn] = {
    "Pendulum": never,
    "DiscretePendulum": never,  # envs.pendulum: Pendulum-v1 with discrete torque levels
    "PointMass": never,  # envs.point_mass, the toy env of the "it learns" tests
    "HalfCheetah": never,
    "InvertedPendulum": inverted_pendulum,
    "Hopper": hopper,
    "Walker2d": walker2d,
    "MountainCar": mountain_car,
    "MountainCarContinuous": mountain_car_continuous,
    "Acrobot": acrobot,
    "CartPole": cartpole,
}


def base_name(env_id: str) -> str:
    """``"rolloutlab/PointMass-v0"`` -> ``"PointMass"``: strip the namespace and the ``-vN`` suffix."""
    name = env_id.rsplit("/", 1)[-1]
    head, sep, version = name.rpartition("-v")
    return head if sep and version.isdigit() else name


def termination_fn(env_id: str) -> TerminationFn | None:
    """The known termination function for ``env_id``, or ``None`` (use a learned termination head).

    Args:
        env_id: A gymnasium id such as ``"Hopper-v5"``; the namespace and version are ignored.
    """
    return _BY_NAME.get(base_name(env_id))


def known_env_names() -> list[str]:
    """Environment base names with a known termination function."""
    return sorted(_BY_NAME)
