"""Pendulum with a handful of discrete torque levels, for value-based learners (DQN, Dyna-DQN).

:class:`DiscretePendulumEnv` is gymnasium's ``Pendulum-v1`` (same dynamics, reward, start distribution and, once
registered, the same 200-step limit) with ``Discrete(num_actions)`` actions: action ``a`` applies the ``a``-th of
``num_actions`` evenly spaced torques over ``[-max_torque, max_torque]`` (5 levels: -2, -1, 0, 1, 2 N m). Its physics
parameters are keyword arguments, so the same class serves the nominal task and perturbed variants;
:class:`mbrl.models.true_dynamics.TruePendulumModel` is its batched numpy twin.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.envs.classic_control.pendulum import PendulumEnv

__all__ = ["DiscretePendulumEnv", "pendulum_torques"]


def pendulum_torques(num_actions: int, max_torque: float) -> np.ndarray:
    """The ``num_actions`` evenly spaced torques in N m over ``[-max_torque, max_torque]``, ``[num_actions]``."""
    if num_actions < 2:
        raise ValueError(f"need at least 2 torque levels, got {num_actions}")
    return np.linspace(-max_torque, max_torque, num_actions)


class DiscretePendulumEnv(PendulumEnv):
    """gymnasium's Pendulum with discrete torque levels and its physics as keyword arguments.

    Observation ``[cos theta, sin theta, dtheta]`` (float32; theta = 0 is upright), reward
    ``-(theta^2 + 0.1 dtheta^2 + 0.001 u^2)`` with theta normalized to ``[-pi, pi)``, no terminal states.

    Args:
        render_mode: As gymnasium's Pendulum.
        g: Gravitational acceleration in m/s^2 (gymnasium: 10).
        m: Mass of the pendulum in kg.
        l: Length of the pendulum in m.
        dt: Time step in s (one semi-implicit Euler step per ``env.step``).
        max_torque: Largest torque magnitude in N m.
        max_speed: Angular-velocity clip in rad/s.
        num_actions: Number of evenly spaced torque levels.
    """

    def __init__(
        self,
        render_mode: str | None = None,
        g: float = 10.0,
        m: float = 1.0,
        l: float = 1.0,  # noqa: E741  (gymnasium's name for the length)
        dt: float = 0.05,
        max_torque: float = 2.0,
        max_speed: float = 8.0,
        num_actions: int = 5,
    ) -> None:
        for name, value in (("g", g), ("m", m), ("l", l), ("dt", dt), ("max_torque", max_torque)):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be finite and > 0, got {value}")
        if not (math.isfinite(max_speed) and max_speed > 0):
            raise ValueError(f"max_speed must be finite and > 0, got {max_speed}")
        super().__init__(render_mode=render_mode, g=float(g))
        self.m, self.l, self.dt = float(m), float(l), float(dt)
        # gymnasium types these as ints (its defaults 2 and 8); here they are physics parameters like the rest.
        self.max_torque, self.max_speed = float(max_torque), float(max_speed)  # type: ignore[assignment]
        self.torques = pendulum_torques(int(num_actions), self.max_torque)
        high = np.array([1.0, 1.0, self.max_speed], dtype=np.float32)
        self.observation_space = spaces.Box(low=-high, high=high, dtype=np.float32)
        self.action_space = spaces.Discrete(int(num_actions))

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Apply the torque of discrete ``action``; otherwise exactly gymnasium's ``PendulumEnv.step``."""
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        obs, reward, terminated, truncated, info = super().step(np.array([self.torques[int(action)]]))
        return obs.astype(np.float32), float(reward), terminated, truncated, info
