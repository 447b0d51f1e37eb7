"""What a Dyna-DQN learner measures on its own training data at the end of a phase, for its controllers.

Every function here reads a :class:`~mbrl.algorithms.dyna.batched.BatchedDynaDQN` (its real replay buffer, its model
buffers, its Q-networks and world models) and returns one value per run; nothing touches an evaluation episode, and
every random draw comes from a generator keyed by (run seed, phase) of its own, so measuring never moves a training
stream and a run's measurements do not depend on the other runs of its batch. The keys they fill are listed in
:mod:`mbrl.phases` (``td_error_mean``, :data:`mbrl.phases.TRAINING_DATA_KEYS`).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch

from mbrl.algorithms.batched_q import BatchedQNetwork
from mbrl.algorithms.dyna.config import DynaConfig
from mbrl.buffers import ModelBuffer, RunBatchedBuffer, Transitions
from mbrl.model_error import open_loop_rmse
from mbrl.phases import TD_SAMPLE

__all__ = [
    "DynaLearner",
    "imagined_td_errors",
    "latest_real",
    "one_step_rmse",
    "open_loop_rmse_by_run",
    "real_td_errors",
]


class DynaLearner(Protocol):
    """What the measurements read of a :class:`~mbrl.algorithms.dyna.batched.BatchedDynaDQN`."""

    cfg: DynaConfig
    num_runs: int
    run_seeds: list[int]
    phase: int
    device: torch.device
    real: RunBatchedBuffer
    model_buffers: list[ModelBuffer]
    models: list[Any]
    model_fitted: list[bool]
    q: BatchedQNetwork
    q_target: BatchedQNetwork


def latest_real(learner: DynaLearner, window: int) -> Transitions | None:
    """Every run's latest ``min(window, size)`` real transitions in the order they were collected, ``[B, n, ...]``
    (``None`` while the buffer is empty)."""
    size = len(learner.real)
    if size == 0:
        return None
    n = min(size, window)
    # Storage positions pos - n .. pos - 1 (mod capacity): consecutive env steps of every run (all runs add one
    # transition per env step), so a run's rows are its own trajectory, reset observations included.
    idx = (learner.real.pos - n + np.arange(n)) % learner.real.capacity
    return learner.real.gather(np.broadcast_to(idx, (learner.num_runs, n)))


@torch.no_grad()
def _mean_abs_td_error(learner: DynaLearner, run: int, batch: Transitions) -> float:
    """Run ``run``'s mean absolute TD error against its target network on ``batch`` (``[n, ...]``; an ``n``-step
    transition bootstraps with ``gamma ** n``, as in training)."""
    device = learner.device
    obs = torch.as_tensor(batch.obs, dtype=torch.float32, device=device)
    next_obs = torch.as_tensor(batch.next_obs, dtype=torch.float32, device=device)
    action = torch.as_tensor(batch.action, dtype=torch.int64, device=device).reshape(-1, 1)
    q = learner.q.forward_run(run, obs).gather(-1, action).squeeze(-1)
    next_q = learner.q_target.forward_run(run, next_obs).max(dim=-1).values
    not_done = 1.0 - torch.as_tensor(batch.terminated, dtype=torch.float32, device=device)
    discount = torch.as_tensor(np.power(learner.cfg.gamma, batch.steps), dtype=torch.float32, device=device)
    reward = torch.as_tensor(batch.reward, dtype=torch.float32, device=device)
    return float((q - (reward + not_done * discount * next_q)).abs().mean())


@torch.no_grad()
def real_td_errors(learner: DynaLearner) -> np.ndarray:
    """Per run, the mean absolute one-step TD error of the Q-network against its target network on up to
    :data:`~mbrl.phases.TD_SAMPLE` of the run's real transitions, ``[B]`` (``td_error_mean``: how far value learning
    is from a fixed point on the data it has; NaN while the buffer is empty)."""
    size = len(learner.real)
    if size == 0:
        return np.full(learner.num_runs, np.nan)
    n = min(size, TD_SAMPLE)
    rngs = [np.random.default_rng([s, 104_729, learner.phase]) for s in learner.run_seeds]
    idx = np.stack([rng.choice(size, n, replace=False) for rng in rngs])
    batch = learner.real.gather(idx)
    device = learner.device
    q = learner.q(torch.as_tensor(batch.obs, device=device))
    q = q.gather(-1, torch.as_tensor(batch.action, device=device).unsqueeze(-1)).squeeze(-1)
    next_q = learner.q_target(torch.as_tensor(batch.next_obs, device=device)).max(dim=-1).values
    not_done = 1.0 - torch.as_tensor(batch.terminated, dtype=torch.float32, device=device)
    target = torch.as_tensor(batch.reward, device=device) + not_done * learner.cfg.gamma * next_q
    return (q - target).abs().mean(dim=1).double().cpu().numpy()


def imagined_td_errors(learner: DynaLearner) -> np.ndarray:
    """Per run, the same TD error on up to :data:`~mbrl.phases.TD_SAMPLE` of the imagined transitions in the run's
    model buffer, ``[B]`` (``td_error_imagined``; NaN where the buffer is empty, e.g. while ``K = 0``). Next to
    ``td_error_mean`` it shows whether Q fits the model's data better or worse than the real data."""
    out = np.full(learner.num_runs, np.nan)
    for i, buffer in enumerate(learner.model_buffers):
        if len(buffer) == 0:
            continue
        rng = np.random.default_rng([learner.run_seeds[i], 15_013, learner.phase])
        out[i] = _mean_abs_td_error(learner, i, buffer.sample(min(len(buffer), TD_SAMPLE), rng))
    return out


def one_step_rmse(learner: DynaLearner, window: int = TD_SAMPLE) -> np.ndarray:
    """Per run, the world model's one-step next-observation RMSE on the run's latest ``window`` real transitions,
    ``[B]`` (``model_one_step_rmse``; NaN where the model is not fitted yet)."""
    out = np.full(learner.num_runs, np.nan)
    batch = latest_real(learner, window)
    if batch is None:
        return out
    for i in range(learner.num_runs):
        if not learner.model_fitted[i]:
            continue
        rng = np.random.default_rng([learner.run_seeds[i], 6_661, learner.phase])
        step = learner.models[i].predict(batch.obs[i], batch.action[i], rng, deterministic=True)
        out[i] = float(np.sqrt(np.mean((np.asarray(step.next_obs) - batch.next_obs[i]) ** 2)))
    return out


def open_loop_rmse_by_run(learner: DynaLearner, window: int = TD_SAMPLE, horizon: int | None = None) -> np.ndarray:
    """Per run, the world model's open-loop ``h``-step next-observation RMSE for ``h = 1 .. horizon`` (default
    ``cfg.k_cap``) on segments of the run's latest ``window`` real transitions that stay inside one training episode
    (:func:`mbrl.model_error.open_loop_rmse`), ``[B, horizon]``; NaN where the model is not fitted yet or no segment
    is that long."""
    horizon = max(int(learner.cfg.k_cap if horizon is None else horizon), 1)
    out = np.full((learner.num_runs, horizon), np.nan)
    batch = latest_real(learner, window)
    if batch is None:
        return out
    ends = batch.terminated | batch.truncated
    for i in range(learner.num_runs):
        if not learner.model_fitted[i]:
            continue
        rng = np.random.default_rng([learner.run_seeds[i], 7_207, learner.phase])
        out[i] = open_loop_rmse(
            learner.models[i], batch.obs[i], batch.action[i], batch.next_obs[i], ends[i], horizon, rng
        )
    return out
