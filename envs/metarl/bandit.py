"""Bernoulli multi-armed bandit as a meta-RL task: one episode = H pulls of one freshly drawn bandit."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class BernoulliBanditEnv(gym.Env[np.ndarray, np.int64]):
    """``n_arms`` Bernoulli arms with means drawn i.i.d. from U[0, 1] at every ``reset``; ``horizon`` pulls.

    Observation: ``[t / horizon]`` (float32, shape ``(1,)``), the fraction of pulls already made; the arm outcomes
    reach the agent only through the RL^2 inputs (previous action and reward). Action: the arm to pull. Reward: 1.0
    or 0.0. The episode *terminates* after ``horizon`` pulls: the horizon is part of the task (the Bayes-optimal
    policy depends on the pulls left), not a time-limit cut of a longer process.

    Args:
        n_arms: Number of arms (>= 2).
        horizon: Pulls per task (>= 1).
    """

    metadata = {"render_modes": []}  # noqa: RUF012  (gymnasium declares it as a plain attribute)

    def __init__(self, n_arms: int = 5, horizon: int = 100) -> None:
        if n_arms < 2:
            raise ValueError(f"n_arms must be >= 2, got {n_arms}")
        if horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {horizon}")
        self.n_arms = int(n_arms)
        self.horizon = int(horizon)
        self.observation_space = spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(self.n_arms)
        self.means = np.zeros(self.n_arms)
        self._t = 0

    def _obs(self) -> np.ndarray:
        return np.array([self._t / self.horizon], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.means = self.np_random.uniform(0.0, 1.0, size=self.n_arms)
        self._t = 0
        return self._obs(), {"inner_reset": True}

    def step(self, action: np.int64 | int) -> tuple[np.ndarray, float, bool, bool, dict]:
        if not self.action_space.contains(int(action)):
            raise ValueError(f"invalid arm {action!r}; expected 0..{self.n_arms - 1}")
        if self._t >= self.horizon:
            raise RuntimeError("step() called after the episode ended; call reset()")
        reward = float(self.np_random.random() < self.means[int(action)])
        self._t += 1
        return self._obs(), reward, self._t >= self.horizon, False, {"inner_reset": False}
