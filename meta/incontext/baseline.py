"""The recurrent baseline: sb3-contrib ``RecurrentPPO`` (LSTM policy) on the same RL^2 inputs (Duan et al., 2016).

One gymnasium episode is one meta-rollout, so SB3 resets the LSTM state only between tasks and the policy can carry
what it learned about a task across that task's inner episodes. It is evaluated on the same tasks
as the in-context agent (seeds from :data:`~meta.incontext.tasks.EVAL_SEED_BASE`).

It gets two budgets beside the agent's: the agent's env steps, and the agent's wall-clock
(``max_seconds``: PPO is cheaper per step, so at equal time it sees more steps), with settings chosen over the small
grid :data:`RECURRENT_PPO_GRID` (:func:`recurrent_ppo_grid`).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from rolloutlab.statistics import mean_with_stderr


@dataclass
class RecurrentPPOConfig:
    """RecurrentPPO settings (sb3-contrib defaults unless noted).

    Attributes:
        n_envs: Parallel environments.
        n_steps: Steps per environment per rollout.
        batch_size: Minibatch size (in steps).
        n_epochs: Passes over each rollout.
        learning_rate: Adam learning rate.
        gamma: Discount (0.99, close to the undiscounted meta-RL return over 100-500 steps).
        ent_coef: Entropy bonus (0.01 keeps early exploration up on sparse tasks).
        lstm_hidden_size: LSTM width.
    """

    n_envs: int = 8
    n_steps: int = 128
    batch_size: int = 256
    n_epochs: int = 4
    learning_rate: float = 3e-4
    gamma: float = 0.99
    ent_coef: float = 0.01
    lstm_hidden_size: int = 64


#: The settings grid RecurrentPPO is tuned over (untuned it runs at 4 epochs, LSTM 64, gamma 0.99):
#: every combination of these values, the other fields at :class:`RecurrentPPOConfig`'s defaults.
RECURRENT_PPO_GRID: dict[str, tuple[Any, ...]] = {
    "lstm_hidden_size": (64, 128),
    "n_epochs": (4, 10),
    "gamma": (0.99, 0.999),
}


def recurrent_ppo_grid(base: RecurrentPPOConfig | None = None) -> list[RecurrentPPOConfig]:
    """Every combination of :data:`RECURRENT_PPO_GRID` on top of ``base`` (default settings), in a fixed order."""
    base = base or RecurrentPPOConfig()
    keys = list(RECURRENT_PPO_GRID)
    return [
        replace(base, **dict(zip(keys, values, strict=True)))
        for values in itertools.product(*(RECURRENT_PPO_GRID[k] for k in keys))
    ]


def train_recurrent_ppo(
    task: str,
    env_steps: int | None,
    seed: int,
    eval_tasks: int,
    config: RecurrentPPOConfig | None = None,
    max_seconds: float | None = None,
    **task_kwargs: Any,
) -> dict[str, Any]:
    """Train RecurrentPPO on ``task`` for ``env_steps`` steps and/or ``max_seconds`` of training, then evaluate it
    (greedy headline, sampled as an extra).

    Args:
        task: ``bandit``, ``tmaze`` or ``keydoor``.
        env_steps: Training budget in environment steps (``None``: only the wall-clock cap ends training).
        seed: Seed of the model, the training tasks and the action sampling.
        eval_tasks: Evaluation tasks.
        config: PPO settings.
        max_seconds: Wall-clock budget of training (evaluation excluded), checked after every env step: the agent's
            training seconds give the equal-wall-clock comparison.
        **task_kwargs: :func:`~meta.incontext.tasks.make_task_env` options (``n_arms``, ``horizon``,
            ``corridor_length``, ``time_input``): the agent's inputs.

    Returns:
        ``{"eval": {"mean", "stderr", "returns"}, "eval_sampled", "env_steps", "train_seconds", "stopped_by",
        "config"}``.
    """
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv

    from meta.incontext.tasks import task_env_fns

    if env_steps is None and max_seconds is None:
        raise ValueError("give env_steps, max_seconds or both")
    cfg = config or RecurrentPPOConfig()

    class WallClockStop(BaseCallback):
        """Stop training once ``max_seconds`` have passed (SB3 stops when ``_on_step`` returns False)."""

        def __init__(self) -> None:
            super().__init__()
            self.hit = False

        def _on_step(self) -> bool:
            self.hit = max_seconds is not None and time.perf_counter() - start > max_seconds
            return not self.hit

    venv = DummyVecEnv(task_env_fns(task, cfg.n_envs, **task_kwargs))
    venv.seed(seed)
    model = RecurrentPPO(
        "MlpLstmPolicy",
        venv,
        n_steps=cfg.n_steps,
        batch_size=cfg.batch_size,
        n_epochs=cfg.n_epochs,
        learning_rate=cfg.learning_rate,
        gamma=cfg.gamma,
        ent_coef=cfg.ent_coef,
        policy_kwargs={"lstm_hidden_size": cfg.lstm_hidden_size},
        seed=seed,
        verbose=0,
        device="cpu",
    )
    stop = WallClockStop()
    start = time.perf_counter()
    model.learn(total_timesteps=env_steps if env_steps is not None else 10**12, callback=stop)
    train_seconds = time.perf_counter() - start
    returns = evaluate_recurrent_ppo(model, task, eval_tasks, 50, True, **task_kwargs)
    sampled = evaluate_recurrent_ppo(model, task, eval_tasks, 50, False, **task_kwargs)
    mean, stderr = mean_with_stderr(returns)
    return {
        "eval_sampled": {"mean": float(np.mean(sampled))},
        "eval": {"mean": mean, "stderr": stderr, "returns": [float(r) for r in returns]},
        "env_steps": int(model.num_timesteps),
        "train_seconds": train_seconds,
        "stopped_by": "wall_clock" if stop.hit else "env_steps",
        "config": vars(cfg),
    }


def evaluate_recurrent_ppo(
    model: Any, task: str, n_tasks: int, max_parallel: int = 50, greedy: bool = True, **task_kwargs: Any
) -> np.ndarray:
    """Total reward per meta-rollout of a RecurrentPPO model on the shared evaluation tasks, ``(n_tasks,)``.

    ``greedy`` takes the policy's most likely action (the headline); otherwise actions are sampled.
    """
    import gymnasium as gym

    from meta.incontext.tasks import eval_task_seeds, task_env_fns

    n_parallel = min(n_tasks, max_parallel)
    venv = gym.vector.SyncVectorEnv(task_env_fns(task, n_parallel, **task_kwargs))
    returns: list[float] = []
    try:
        for first in range(0, n_tasks, n_parallel):
            obs, _ = venv.reset(seed=eval_task_seeds(first + n_parallel)[first:])  # type: ignore[arg-type]
            lstm_state = None
            starts = np.ones(n_parallel, dtype=bool)
            totals = np.zeros(n_parallel)
            active = np.ones(n_parallel, dtype=bool)
            while active.any():
                actions, lstm_state = model.predict(obs, state=lstm_state, episode_start=starts, deterministic=greedy)
                obs, rewards, terminated, truncated, _ = venv.step(actions)
                totals += np.where(active, rewards, 0.0)
                active &= ~(terminated | truncated)
                starts = np.zeros(n_parallel, dtype=bool)
            returns.extend(totals[: n_tasks - first].tolist())
    finally:
        venv.close()
    return np.asarray(returns)
