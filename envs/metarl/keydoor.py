"""Dark key-door: find an unseen key, then an unseen door, again and again within one task (AMAGO's meta-RL test)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

#: Moves for actions 0..3: up, down, left, right as (dx, dy).
MOVES = np.array([[0, 1], [0, -1], [-1, 0], [1, 0]], dtype=np.int64)


class DarkKeyDoorEnv(gym.Env[np.ndarray, np.int64]):
    """A ``size`` x ``size`` grid where the start, key and door cells are drawn (distinct) once per task.

    The agent sees only its own position and whether it holds the key ("dark"): the key and door locations must be
    found by search in the first inner episodes and remembered for the rest of the rollout. Entering the key cell
    without the key gives +1 and the key; entering the door cell with the key gives +1 and ends the inner episode.
    An inner episode also ends after ``episode_steps`` steps. At an inner-episode end the agent goes back to the
    start cell without the key (``info["inner_reset"] = True``); the task itself terminates after ``rollout_steps``
    steps in all.

    Observation (float32, shape ``(3,)``): ``[x / (size-1), y / (size-1), has_key]``; with ``cell_input`` a one-hot
    of the agent's cell (index ``x * size + y``) follows, shape ``(3 + size * size,)``; with ``reached_cell_input`` a
    one-hot of the cell the last move entered follows that (zeros after ``reset``). Either way it says only where the
    agent is, where its last move took it and whether it holds the key. With ``cell_marks_entered`` the one-hot cell
    also marks the cell the last move entered when that move sent the agent back to the start, so on the step that
    opens the door two cells are hot: the start and the door. Action: 0..3 = up, down, left, right (a move
    into a wall leaves the agent in place). Reward: 0, or +1 at the key and +1 at the door.

    Args:
        size: Side of the grid (>= 3).
        episode_steps: Step limit of one inner episode.
        rollout_steps: Steps of the whole task (meta-rollout).
        cell_input: Append the one-hot cell. Values that jump at one cell (the step onto a key or door) are a
            bump of the scaled coordinates, which small networks fit slowly; on the one-hot cell they are linear
            (Algorithm Distillation's dark rooms embed the cell index the same way).
        reached_cell_input: Append a one-hot of the cell the last move entered. It is the agent's cell except on the
            step that ends an inner episode, where the agent is already back at the start: on the step that opens the
            door it is the door's cell, which otherwise is only the previous cell plus the move.
        cell_marks_entered: Mark the cell the last move entered in the one-hot cell too, when the move ended an inner
            episode (needs ``cell_input``): the door's cell then arrives in the same input units as the agent's own
            cell, as the key's does when the agent steps onto it.
        room_sizes: Sides (each in 3..``size``) that a task's room is drawn from, uniformly, at every ``reset``: the
            start, key and door lie in the room's cells ``[0, room)^2`` and its edges are walls, while observations
            stay in the ``size`` grid's units (coordinates scaled by ``size - 1``, one-hots of ``size * size``
            cells). Smaller rooms are easier versions of the same task in the same inputs. ``None``: the whole grid.
    """

    metadata = {"render_modes": []}  # noqa: RUF012  (gymnasium declares it as a plain attribute)

    def __init__(
        self,
        size: int = 8,
        episode_steps: int = 50,
        rollout_steps: int = 500,
        cell_input: bool = False,
        reached_cell_input: bool = False,
        cell_marks_entered: bool = False,
        room_sizes: Sequence[int] | None = None,
    ) -> None:
        if size < 3:
            raise ValueError(f"size must be >= 3, got {size}")
        if cell_marks_entered and not cell_input:
            raise ValueError("cell_marks_entered needs cell_input=True")
        if room_sizes is not None and (not room_sizes or any(not 3 <= int(r) <= size for r in room_sizes)):
            raise ValueError(f"room_sizes must be sides in 3..{size}, got {room_sizes!r}")
        if episode_steps < 1 or rollout_steps < 1:
            raise ValueError("episode_steps and rollout_steps must be >= 1")
        self.size = int(size)
        self.episode_steps = int(episode_steps)
        self.rollout_steps = int(rollout_steps)
        self.cell_input = bool(cell_input)
        self.reached_cell_input = bool(reached_cell_input)
        self.cell_marks_entered = bool(cell_marks_entered)
        self.room_sizes = None if room_sizes is None else [int(r) for r in room_sizes]
        self.room = self.size
        width = 3 + self.size * self.size * (int(self.cell_input) + int(self.reached_cell_input))
        self.observation_space = spaces.Box(0.0, 1.0, shape=(width,), dtype=np.float32)
        self.action_space = spaces.Discrete(4)
        self.start = np.zeros(2, dtype=np.int64)
        self.key = np.zeros(2, dtype=np.int64)
        self.door = np.zeros(2, dtype=np.int64)
        self.pos = np.zeros(2, dtype=np.int64)
        self.reached: np.ndarray | None = None
        self.has_key = False
        self._t = 0
        self._t_episode = 0

    def _one_hot(self, cell: np.ndarray | None) -> np.ndarray:
        out = np.zeros(self.size * self.size, dtype=np.float32)
        if cell is not None:
            out[cell[0] * self.size + cell[1]] = 1.0
        return out

    def _obs(self) -> np.ndarray:
        scale = self.size - 1
        parts = [np.array([self.pos[0] / scale, self.pos[1] / scale, float(self.has_key)], dtype=np.float32)]
        if self.cell_input:
            cell = self._one_hot(self.pos)
            parts.append(np.maximum(cell, self._one_hot(self.reached)) if self.cell_marks_entered else cell)
        if self.reached_cell_input:
            parts.append(self._one_hot(self.reached))
        return np.concatenate(parts)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.room = self.size
        if self.room_sizes is not None:
            self.room = int(self.room_sizes[int(self.np_random.integers(len(self.room_sizes)))])
        cells = self.np_random.choice(self.room * self.room, size=3, replace=False)
        self.start, self.key, self.door = (np.array(divmod(int(c), self.room), dtype=np.int64) for c in cells)
        self.pos = self.start.copy()
        self.reached = None
        self.has_key = False
        self._t = 0
        self._t_episode = 0
        return self._obs(), {"inner_reset": True}

    def step(self, action: np.int64 | int) -> tuple[np.ndarray, float, bool, bool, dict]:
        if not self.action_space.contains(int(action)):
            raise ValueError(f"invalid action {action!r}; expected 0..3")
        if self._t >= self.rollout_steps:
            raise RuntimeError("step() called after the episode ended; call reset()")
        self.pos = np.clip(self.pos + MOVES[int(action)], 0, self.room - 1)
        self.reached = self.pos.copy()
        reward = 0.0
        episode_over = False
        if not self.has_key and np.array_equal(self.pos, self.key):
            self.has_key = True
            reward = 1.0
        elif self.has_key and np.array_equal(self.pos, self.door):
            reward = 1.0
            episode_over = True
        self._t += 1
        self._t_episode += 1
        if episode_over or self._t_episode >= self.episode_steps:
            self.pos = self.start.copy()
            self.has_key = False
            self._t_episode = 0
            episode_over = True
        return self._obs(), reward, self._t >= self.rollout_steps, False, {"inner_reset": episode_over}
