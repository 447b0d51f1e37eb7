"""Did the meta-agent learn? Its values against the Monte-Carlo returns of its own replay buffer.

An earlier meta-DQN reported "META keeps K = 0", but its Q-values were about 500x smaller than its returns and its
greedy action was the same in almost every state: the decision had never been learned. :func:`value_check` measures
that failure directly on a trained SB3 DQN meta-agent: for every stored meta-transition, the Q-value of the action
taken against the undiscounted return that followed it in the same meta-episode (the meta-MDP's ``gamma = 1``, see
:mod:`meta.rollout_length.env`). Values that learned their returns have the same sign, the same size and a high
correlation; a collapsed agent shows a size ratio far from 1 and one greedy action everywhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def returns_to_go(rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
    """Undiscounted Monte-Carlo return-to-go of every stored transition.

    Args:
        rewards: ``[T, B]`` rewards in storage order (SB3's replay layout: step ``t`` of vector env ``b``).
        dones: ``[T, B]``, nonzero where the meta-episode ended at that step.

    Returns:
        ``[T, B]``; NaN after a column's last episode end (a meta-episode cut off by the end of the buffer has no
        return yet).
    """
    out = np.full(rewards.shape, np.nan)
    following = np.full(rewards.shape[1], np.nan)
    for t in range(rewards.shape[0] - 1, -1, -1):
        following = np.where(dones[t] > 0, rewards[t], rewards[t] + following)
        out[t] = following
    return out


def value_check(model: Any) -> dict[str, float]:
    """Compare a DQN meta-agent's Q-values of the actions taken with the returns that followed them.

    Only a replay buffer that has not overwritten anything is in storage order (the meta-training buffers hold every
    meta-transition of a run; one filled exactly to capacity counts); a wrapped buffer is refused.

    Args:
        model: A trained SB3 ``DQN`` (``q_net`` and ``replay_buffer``).

    Returns:
        ``transitions`` (with a known return), ``mean_abs_return``, ``mean_abs_value``, ``size_ratio``
        (``mean_abs_value / mean_abs_return``), ``sign_agreement`` (fraction with the same sign), ``correlation``
        (Pearson, NaN without spread) and ``greedy_action_share`` (the fraction of stored states whose greedy action
        is the most common one: 1.0 means the agent answers every state the same way).
    """
    buffer = model.replay_buffer
    if buffer.full and buffer.pos != 0:
        raise ValueError("value_check reads the replay buffer in storage order; this one has wrapped around")
    size = int(buffer.buffer_size if buffer.full else buffer.pos)
    if size == 0:
        raise ValueError("value_check needs a replay buffer with transitions")
    returns = returns_to_go(buffer.rewards[:size], buffer.dones[:size]).reshape(-1)
    observations = torch.as_tensor(buffer.observations[:size].reshape(size * buffer.n_envs, -1))
    with torch.no_grad():
        q = model.q_net(observations).numpy()
    taken = q[np.arange(q.shape[0]), buffer.actions[:size].reshape(-1).astype(np.int64)]
    greedy = q.argmax(axis=1)
    known = np.isfinite(returns)
    returns, taken = returns[known], taken[known]
    if returns.size == 0:
        raise ValueError("no stored transition has a finished meta-episode after it")
    mean_abs_return = float(np.abs(returns).mean())
    mean_abs_value = float(np.abs(taken).mean())
    spread = returns.std() > 0 and taken.std() > 0
    return {
        "transitions": float(returns.size),
        "mean_abs_return": mean_abs_return,
        "mean_abs_value": mean_abs_value,
        "size_ratio": mean_abs_value / mean_abs_return if mean_abs_return > 0 else float("nan"),
        "sign_agreement": float(np.mean(np.sign(taken) == np.sign(returns))),
        "correlation": float(np.corrcoef(taken, returns)[0, 1]) if spread else float("nan"),
        "greedy_action_share": float(np.bincount(greedy).max() / greedy.size),
    }
