"""Replay of whole trajectories (meta-rollouts), sampled whole from step 0 or as random fixed-length windows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from meta.incontext.agent import Batch

#: The array fields of a :class:`Trajectory` in a checkpoint (``novelty`` only where it was kept).
FIELDS = ("obs", "actions", "rewards", "dones", "novelty")


@dataclass
class Trajectory:
    """One finished meta-rollout.

    Attributes:
        obs: RL^2 inputs ``(T + 1, D)`` float32 (the last one follows the final action).
        actions: ``(T,)`` int64.
        rewards: ``(T,)`` float32.
        dones: ``(T,)`` float32, 1.0 where the task ended (terminated, not truncated).
        novelty: ``(T,)`` float32, 1.0 where the step reached an observation new to the trial
            (:func:`~meta.incontext.exploration.first_visits`), or ``None`` when the run keeps no novelty bonus.
    """

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    dones: np.ndarray
    novelty: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.actions)


class TrajectoryReplay:
    """FIFO store of whole trajectories; :meth:`sample` cuts random windows and pads short ones.

    Args:
        capacity: Trajectories kept (the oldest is dropped first).
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.trajectories: list[Trajectory] = []

    def __len__(self) -> int:
        return len(self.trajectories)

    def add(self, trajectory: Trajectory) -> None:
        """Store a finished trajectory."""
        if len(trajectory.obs) != len(trajectory) + 1:
            raise ValueError("a trajectory needs one more observation than actions")
        self.trajectories.append(trajectory)
        if len(self.trajectories) > self.capacity:
            self.trajectories.pop(0)

    def sample(
        self,
        batch_size: int,
        window: int,
        rng: np.random.Generator,
        full_trials: bool = False,
        novelty_coef: float = 0.0,
    ) -> Batch:
        """``batch_size`` windows from uniformly chosen trajectories (see :meth:`windows`)."""
        if not self.trajectories:
            raise RuntimeError("cannot sample from an empty replay")
        indices = rng.integers(0, len(self.trajectories), size=batch_size)
        return self.windows(indices, window, rng, full_trials, novelty_coef)

    def windows(
        self,
        indices: np.ndarray,
        window: int,
        rng: np.random.Generator,
        full_trials: bool = False,
        novelty_coef: float = 0.0,
    ) -> Batch:
        """Windows of the trajectories at ``indices``, one row each.

        With ``full_trials`` every row is its whole trajectory from step 0 (``window`` is ignored): the agent then
        trains on exactly the histories it acts with (AMAGO, Sec. 4.1, sets the context to the trial length).
        Otherwise a window of ``window`` steps starts uniformly in ``[0, len - window]`` so it lies inside its
        trajectory (drawn from ``rng``). Trajectories shorter than the time axis are padded with zeros, with
        ``mask = 0`` on the padding. With ``novelty_coef`` > 0 the rewards are the env's plus ``novelty_coef`` times
        each trajectory's ``novelty`` (the coefficient of the moment, so an annealed bonus leaves old trials too).

        Returns:
            A :class:`~meta.incontext.agent.Batch` whose time axis is the longest chosen trajectory with
            ``full_trials``, else ``min(window, longest chosen trajectory)``.
        """
        chosen = [self.trajectories[int(i)] for i in indices]
        longest = max(len(traj) for traj in chosen)
        steps = longest if full_trials else min(window, longest)
        batch_size = len(chosen)
        dim = chosen[0].obs.shape[1]
        obs = np.zeros((batch_size, steps + 1, dim), dtype=np.float32)
        actions = np.zeros((batch_size, steps), dtype=np.int64)
        rewards = np.zeros((batch_size, steps), dtype=np.float32)
        dones = np.zeros((batch_size, steps), dtype=np.float32)
        mask = np.zeros((batch_size, steps), dtype=np.float32)
        start = np.zeros(batch_size, dtype=np.int64)
        for row, traj in enumerate(chosen):
            begin = 0 if full_trials else int(rng.integers(0, max(len(traj) - steps, 0) + 1))
            end = min(begin + steps, len(traj))
            n = end - begin
            obs[row, : n + 1] = traj.obs[begin : end + 1]
            actions[row, :n] = traj.actions[begin:end]
            rewards[row, :n] = traj.rewards[begin:end]
            if novelty_coef > 0.0:
                if traj.novelty is None:
                    raise ValueError("novelty_coef > 0 needs trajectories stored with their novelty")
                rewards[row, :n] += novelty_coef * traj.novelty[begin:end]
            dones[row, :n] = traj.dones[begin:end]
            mask[row, :n] = 1.0
            start[row] = begin
        return Batch(*(torch.from_numpy(a) for a in (obs, actions, rewards, dones, mask, start)))

    def state_dict(self) -> dict[str, Any]:
        """Plain tensors for a weights-only checkpoint."""
        return {
            "capacity": self.capacity,
            "trajectories": [
                {name: torch.from_numpy(getattr(t, name)) for name in FIELDS if getattr(t, name) is not None}
                for t in self.trajectories
            ],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict`."""
        self.capacity = int(state["capacity"])
        self.trajectories = [
            Trajectory(**{name: tensor.numpy() for name, tensor in item.items()}) for item in state["trajectories"]
        ]
