"""From a task name to RL^2-wrapped environments (single and vectorised), and what every method shares about a task:
its trial length, its return range and its evaluation tasks."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

import envs  # noqa: F401  (registers the rolloutlab/ environment ids)
from envs.metarl.rl2 import RL2Wrapper

TASKS = ("bandit", "tmaze", "keydoor")
#: Evaluation tasks are seeded from here: task ``i`` of an evaluation is the env reset with ``EVAL_SEED_BASE + i``, for
#: every training seed and every method (agent, RecurrentPPO, the reference policies of :mod:`.references`).
EVAL_SEED_BASE = 10_000_000


def eval_task_seeds(n_tasks: int) -> list[int]:
    """The reset seeds of the first ``n_tasks`` evaluation tasks (the same for every method)."""
    return [EVAL_SEED_BASE + i for i in range(n_tasks)]


class TimeInTrialWrapper(gym.ObservationWrapper[np.ndarray, np.int64, np.ndarray], gym.utils.RecordConstructorArgs):
    """Append ``t / trial_length`` (0 at the first input, 1 after the last step) to the observation.

    AMAGO feeds the time index of every timestep to its policy (Grigsby et al., 2024, Sec. 4 and ``time_idxs`` in its
    code); with a fixed trial length this tells the agent how much of the trial is left, which decides how much
    exploring still pays. The dark key-door's own observation has no clock at all.

    Args:
        env: An RL^2-wrapped env whose trial has ``trial_length`` steps.
        trial_length: Steps of one trial (meta-rollout).
    """

    def __init__(self, env: gym.Env, trial_length: int) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, trial_length=trial_length)
        gym.ObservationWrapper.__init__(self, env)
        base = env.observation_space
        assert isinstance(base, spaces.Box)
        self.trial_length = int(trial_length)
        self.observation_space = spaces.Box(
            np.append(base.low, 0.0).astype(np.float32), np.append(base.high, 1.0).astype(np.float32), dtype=np.float32
        )
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        self._t = 0
        obs, info = self.env.reset(seed=seed, options=options)
        return self.observation(obs), info

    def step(self, action: np.int64 | int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self._t += 1
        obs, reward, terminated, truncated, info = self.env.step(action)  # type: ignore[arg-type]
        return self.observation(obs), float(reward), terminated, truncated, info

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return np.append(observation, min(self._t / self.trial_length, 1.0)).astype(np.float32)


def make_task_env(
    task: str,
    n_arms: int = 5,
    horizon: int = 100,
    corridor_length: int = 10,
    time_input: bool = False,
    keydoor_size: int = 8,
    keydoor_episode_steps: int = 50,
    keydoor_trial_steps: int = 500,
    keydoor_cell_input: bool = False,
    keydoor_reached_cell_input: bool = False,
    keydoor_cell_marks_entered: bool = False,
    keydoor_room_sizes: list[int] | None = None,
    previous_obs_input: bool = False,
) -> gym.Env:
    """One RL^2-wrapped meta-RL env.

    Args:
        task: ``bandit``, ``tmaze`` or ``keydoor``.
        n_arms: Bandit arms.
        horizon: Bandit pulls.
        corridor_length: T-maze corridor length.
        time_input: Append the time in the trial (:class:`TimeInTrialWrapper`).
        keydoor_size: Side of the key-door grid.
        keydoor_episode_steps: Step limit of one inner key-door episode.
        keydoor_trial_steps: Steps of one key-door trial (meta-rollout).
        keydoor_cell_input: Append the one-hot cell to the key-door's observation
            (:class:`~envs.metarl.keydoor.DarkKeyDoorEnv`'s ``cell_input``).
        keydoor_reached_cell_input: Append the one-hot of the cell the last move entered (``reached_cell_input``).
        keydoor_cell_marks_entered: Mark the entered cell in the one-hot cell when a move ends an inner episode
            (``cell_marks_entered``).
        keydoor_room_sizes: Room sides each key-door task draws from (``room_sizes``; ``None``: the whole grid).
        previous_obs_input: Append the previous observation to the RL^2 input (:class:`~envs.metarl.rl2.RL2Wrapper`'s
            ``previous_observation``).
    """
    if task == "bandit":
        env = gym.make("rolloutlab/BernoulliBandit-v0", n_arms=n_arms, horizon=horizon)
    elif task == "tmaze":
        env = gym.make("rolloutlab/PassiveTMaze-v0", corridor_length=corridor_length)
    elif task == "keydoor":
        env = gym.make(
            "rolloutlab/DarkKeyDoor-v0",
            size=keydoor_size,
            episode_steps=keydoor_episode_steps,
            rollout_steps=keydoor_trial_steps,
            cell_input=keydoor_cell_input,
            reached_cell_input=keydoor_reached_cell_input,
            cell_marks_entered=keydoor_cell_marks_entered,
            room_sizes=keydoor_room_sizes,
        )
    else:
        raise ValueError(f"unknown task {task!r}; known: {TASKS}")
    wrapped: gym.Env = RL2Wrapper(env, previous_observation=previous_obs_input)
    if time_input:
        wrapped = TimeInTrialWrapper(wrapped, rollout_length(task, horizon, corridor_length, keydoor_trial_steps))
    return wrapped


def task_env_fns(task: str, n_envs: int, **kwargs: Any) -> list[Callable[[], gym.Env]]:
    """``n_envs`` env constructors for :class:`gymnasium.vector.SyncVectorEnv`."""
    return [lambda: make_task_env(task, **kwargs) for _ in range(n_envs)]


def rollout_length(task: str, horizon: int = 100, corridor_length: int = 10, keydoor_trial_steps: int = 500) -> int:
    """Steps of one meta-rollout of ``task`` (fixed for every task here)."""
    return {"bandit": horizon, "tmaze": corridor_length + 1, "keydoor": keydoor_trial_steps}[task]


def max_return(task: str, horizon: int = 100, corridor_length: int = 10, keydoor_trial_steps: int = 500) -> float:
    """An upper bound on one trial's total reward (every reward here is 0 or 1; the T-maze pays once)."""
    if task == "tmaze":
        return 1.0
    return float(rollout_length(task, horizon, corridor_length, keydoor_trial_steps))


def critic_bins(
    task: str,
    gammas: list[float],
    horizon: int = 100,
    corridor_length: int = 10,
    reward_scale: float = 1.0,
    keydoor_trial_steps: int = 500,
) -> tuple[float, float]:
    """``(bin_low, bin_high)`` in symlog units for a critic sized to ``task``'s value range.

    Rewards are never negative, so no value is below 0; no discounted value exceeds
    ``reward_scale * min(max_return, 1 / (1 - max gamma))`` (reward at most 1 per step, times the agent's
    ``reward_scale``). A 5 % margin keeps the top bin reachable.
    """
    top = min(max_return(task, horizon, corridor_length, keydoor_trial_steps), 1.0 / (1.0 - max(gammas)))
    return 0.0, 1.05 * math.log1p(reward_scale * top)
