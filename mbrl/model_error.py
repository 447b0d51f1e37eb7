"""The world model's error measured on real data: open-loop h-step prediction error on recent real segments.

A rollout of ``K`` steps in the model compounds its one-step errors, so what a rollout-length controller needs to know
is how far the model's open-loop predictions drift from what really happened over ``h = 1 .. K`` steps. Given a run's
latest real transitions in the order they were collected, :func:`open_loop_rmse` starts the model at real states and
feeds it the actions that were really taken, without ever correcting its state from the data, and compares its
``h``-th prediction with the real observation ``h`` steps later. Segments never cross an episode boundary (a
transition that ended its episode, terminated or truncated, is the last of its segment), so the feature is measured on
the run's own training episodes only: no extra interaction, no evaluation episode.

With an exact simulator as the model the error is zero up to the float32 rounding of the observations the model
starts from (below 1e-5 on ``rolloutlab/DiscretePendulum-v0`` at h = 32); it grows with the model's error.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["MODEL_ERROR_STARTS", "RMSE_HORIZONS", "open_loop_rmse", "rmse_feedback"]

#: Horizons reported as the feedback keys ``model_rmse_h{h}`` (:mod:`mbrl.phases`), where ``h <= k_cap``.
RMSE_HORIZONS: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
#: Most segment starts per run and measurement: the starts are spread evenly over the window, which keeps the cost at
#: ``horizon`` model calls on at most this many states.
MODEL_ERROR_STARTS = 128


def open_loop_rmse(
    model: Any,
    obs: np.ndarray,
    action: np.ndarray,
    next_obs: np.ndarray,
    episode_end: np.ndarray,
    horizon: int,
    rng: np.random.Generator,
    max_starts: int = MODEL_ERROR_STARTS,
) -> np.ndarray:
    """The model's open-loop ``h``-step next-observation RMSE on consecutive real transitions, ``h = 1 .. horizon``.

    Args:
        model: A world model with ``predict(obs, actions, rng, deterministic=True)`` returning ``next_obs`` and
            ``finite`` (:class:`mbrl.models.DynamicsModel`, the exact simulators of :mod:`mbrl.models.true_dynamics`).
            Each step uses one elite's mean, chosen from ``rng``.
        obs: ``[T, obs_dim]`` observations of ``T`` consecutive real transitions, oldest first.
        action: ``[T]`` (or ``[T, act_dim]``) the actions taken.
        next_obs: ``[T, obs_dim]`` the observations that followed.
        episode_end: ``[T]`` bool, whether the transition ended its episode (terminated or truncated); the next
            transition then starts a new episode and no segment runs across.
        horizon: Largest ``h``.
        rng: Generator of the model's elite choices (pass one of the caller's own, so training is untouched).
        max_starts: Most segment starts, spread evenly over the ``T`` transitions.

    Returns:
        ``[horizon]`` RMSE (over observation dimensions and over every start whose segment lasts ``h`` steps); NaN
        for an ``h`` no segment reaches. A start whose prediction becomes non-finite is dropped from then on.
    """
    obs = np.asarray(obs, np.float64)
    next_obs = np.asarray(next_obs, np.float64)
    action = np.asarray(action)
    ends = np.asarray(episode_end, bool).reshape(-1)
    t_total, horizon = obs.shape[0], int(horizon)
    out = np.full(horizon, np.nan)
    if t_total == 0 or horizon < 1:
        return out
    starts = np.unique(np.linspace(0, t_total - 1, min(int(max_starts), t_total)).round().astype(np.int64))
    state = obs[starts]
    alive = np.ones(len(starts), bool)
    for h in range(1, horizon + 1):
        index = starts + h - 1  # the transition whose next_obs is the h-th prediction's target
        alive &= index < t_total
        if not alive.any():
            break
        live = np.flatnonzero(alive)
        step = model.predict(state[live], action[index[live]], rng, deterministic=True)
        predicted = np.asarray(step.next_obs, np.float64)
        finite = np.isfinite(predicted).all(axis=1)
        alive[live[~finite]] = False
        live, predicted = live[finite], predicted[finite]
        if live.size:
            out[h - 1] = float(np.sqrt(np.mean((predicted - next_obs[index[live]]) ** 2)))
        state[live] = predicted
        alive[live] &= ~ends[index[live]]  # the segment ends with its episode
    return out


def rmse_feedback(rmse: np.ndarray, k: int) -> dict[str, float]:
    """The feedback keys of one run's :func:`open_loop_rmse` (``[horizon]``) with rollout length ``k`` in force.

    Returns:
        ``model_rmse_h{h}`` for every ``h`` in :data:`RMSE_HORIZONS` (NaN beyond the measured horizon) and
        ``model_rmse_at_k``, the mean h-step RMSE over ``h = 1 .. max(k, 1)`` (the horizons the current rollouts
        use; NaN where none was measured).
    """
    rmse = np.asarray(rmse, np.float64).reshape(-1)
    out = {f"model_rmse_h{h}": float(rmse[h - 1]) if h <= rmse.size else float("nan") for h in RMSE_HORIZONS}
    upto = rmse[: max(int(k), 1)]
    upto = upto[np.isfinite(upto)]
    out["model_rmse_at_k"] = float(upto.mean()) if upto.size else float("nan")
    return out
