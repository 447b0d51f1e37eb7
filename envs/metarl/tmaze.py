"""Passive T-maze: remember a cue over a corridor of length L (Ni et al., 2023, "When do Transformers shine in RL?")."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class PassiveTMazeEnv(gym.Env[np.ndarray, np.int64]):
    """A cue (up or down) is shown at the first step only; the agent is carried along a corridor of ``corridor_length``
    cells and at the junction must turn the way the cue pointed.

    "Passive" means the corridor needs no exploration: every action moves the agent one cell forward, so the only
    decision that matters is the last one, and it needs a memory of length ``corridor_length``. An optimal agent
    scores 1.0; a memory-free one 0.5 in expectation.

    Observation (float32, shape ``(3,)``): ``[cue, at_junction, 1]`` with ``cue`` = +1 (up) / -1 (down) at the first
    step and 0 afterwards. Action: 0 = up, 1 = down (ignored in the corridor). Reward: 1.0 for the right turn at the
    junction, else 0.0. The episode terminates after the turn, ``corridor_length + 1`` steps in all.

    Args:
        corridor_length: Steps between the cue and the junction (>= 1).
    """

    metadata = {"render_modes": []}  # noqa: RUF012  (gymnasium declares it as a plain attribute)

    def __init__(self, corridor_length: int = 10) -> None:
        if corridor_length < 1:
            raise ValueError(f"corridor_length must be >= 1, got {corridor_length}")
        self.corridor_length = int(corridor_length)
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.cue = 1
        self._pos = 0

    def _obs(self) -> np.ndarray:
        cue = float(self.cue) if self._pos == 0 else 0.0
        return np.array([cue, float(self._pos == self.corridor_length), 1.0], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.cue = 1 if self.np_random.random() < 0.5 else -1
        self._pos = 0
        return self._obs(), {"inner_reset": True}

    def step(self, action: np.int64 | int) -> tuple[np.ndarray, float, bool, bool, dict]:
        if not self.action_space.contains(int(action)):
            raise ValueError(f"invalid action {action!r}; expected 0 or 1")
        if self._pos > self.corridor_length:
            raise RuntimeError("step() called after the episode ended; call reset()")
        if self._pos < self.corridor_length:
            self._pos += 1
            return self._obs(), 0.0, False, False, {"inner_reset": False}
        correct = (int(action) == 0) == (self.cue == 1)
        self._pos += 1
        obs = np.array([0.0, 0.0, 1.0], dtype=np.float32)
        return obs, float(correct), True, False, {"inner_reset": False, "success": bool(correct)}
