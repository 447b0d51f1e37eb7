"""A tiny point-mass environment for fast "it learns" tests of model-based agents.

A point on a line with damped velocity is pushed towards the origin: state ``[x, v]``, action ``a in [-1, 1]``,

    v' = 0.8 v + 0.2 a,    x' = clip(x + v', -2, 2),    r = -x'^2 - 0.01 a^2.

Episodes start at ``x ~ U(-1.5, 1.5)``, ``v = 0`` and never terminate; the id ``rolloutlab/PointMass-v0``
(registered in ``envs/__init__.py``) cuts them at 30 steps (``truncated``). A random policy scores about -25 per
episode, a good controller about -3. mbrl-lib tests MBPO the same way on a point-mass toy; this is our own minimal
version. Its known reward and termination functions are ``mbrl.rewards.point_mass`` and ``mbrl.termination.never``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class PointMassEnv(gym.Env[np.ndarray, np.ndarray]):
    """Damped 1-D point mass driven to the origin (see the module docstring for the equations)."""

    metadata = {"render_modes": []}  # noqa: RUF012  (gymnasium declares it as a plain class attribute)

    def __init__(self) -> None:
        self.observation_space = spaces.Box(
            low=np.array([-2.0, -1.0], np.float32), high=np.array([2.0, 1.0], np.float32), dtype=np.float32
        )
        self.action_space = spaces.Box(low=-1.0, high=1.0, shape=(1,), dtype=np.float32)
        self._state = np.zeros(2, dtype=np.float64)

    def _obs(self) -> np.ndarray:
        return self._state.astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._state = np.array([self.np_random.uniform(-1.5, 1.5), 0.0])
        return self._obs(), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        a = float(np.clip(np.asarray(action, dtype=np.float64).reshape(-1)[0], -1.0, 1.0))
        x, v = float(self._state[0]), float(self._state[1])
        v = 0.8 * v + 0.2 * a  # |v| stays below 1 because 0.8 + 0.2 = 1
        x = float(np.clip(x + v, -2.0, 2.0))
        self._state = np.array([x, v])
        reward = -(x**2) - 0.01 * a**2
        return self._obs(), float(reward), False, False, {}
