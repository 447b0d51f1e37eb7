"""From a task name to RL^2-wrapped environments (single and vectorised)."""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym

import envs  # noqa: F401  (registers the rolloutlab/ environment ids)
from envs.metarl.rl2 import RL2Wrapper

TASKS = ("bandit", "tmaze", "keydoor")


def make_task_env(task: str, n_arms: int = 5, horizon: int = 100, corridor_length: int = 10) -> gym.Env:
    """One RL^2-wrapped meta-RL env.

    Args:
        task: ``bandit``, ``tmaze`` or ``keydoor``.
        n_arms: Bandit arms.
        horizon: Bandit pulls.
        corridor_length: T-maze corridor length.
    """
    if task == "bandit":
        env = gym.make("rolloutlab/BernoulliBandit-v0", n_arms=n_arms, horizon=horizon)
    elif task == "tmaze":
        env = gym.make("rolloutlab/PassiveTMaze-v0", corridor_length=corridor_length)
    elif task == "keydoor":
        env = gym.make("rolloutlab/DarkKeyDoor-v0")
    else:
        raise ValueError(f"unknown task {task!r}; known: {TASKS}")
    return RL2Wrapper(env)


def task_env_fns(task: str, n_envs: int, **kwargs: int) -> list[Callable[[], gym.Env]]:
    """``n_envs`` env constructors for :class:`gymnasium.vector.SyncVectorEnv`."""
    return [lambda: make_task_env(task, **kwargs) for _ in range(n_envs)]


def rollout_length(task: str, horizon: int = 100, corridor_length: int = 10) -> int:
    """Steps of one meta-rollout of ``task`` (fixed for every task here)."""
    return {"bandit": horizon, "tmaze": corridor_length + 1, "keydoor": 500}[task]
