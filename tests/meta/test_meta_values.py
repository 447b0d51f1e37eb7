"""The trained meta-agent's values have the size of its returns (round one's meta-DQN was ~500x too small)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from meta.rollout_length.env import MetaEnvConfig
from meta.rollout_length.train import MetaAgentConfig, MetaTrainConfig, MetaTrainer


def _returns_to_go(rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
    """Undiscounted Monte-Carlo return-to-go of every stored transition ``[T, B]``; NaN after a column's last end."""
    out = np.full(rewards.shape, np.nan)
    following = np.full(rewards.shape[1], np.nan)
    for t in range(rewards.shape[0] - 1, -1, -1):
        following = np.where(dones[t] > 0, rewards[t], rewards[t] + following)
        out[t] = following
    return out


def test_meta_dqn_values_track_monte_carlo_returns(tmp_path: Path) -> None:
    # The toy learner: 200 meta-episodes of 10 decisions, the meta-reward on the default fixed scale (the step limit).
    env = MetaEnvConfig(budget=100_000, phase_length=10_000, inner="toy")
    cfg = MetaTrainConfig(env=env, agent=MetaAgentConfig(), episodes=200, runs_per_round=10, seed=0)
    trainer = MetaTrainer(cfg, tmp_path, show_progress=False)
    trainer.train()
    model = trainer.model
    assert model is not None
    buffer = model.replay_buffer
    size = buffer.buffer_size if buffer.full else buffer.pos
    returns = _returns_to_go(buffer.rewards[:size], buffer.dones[:size]).reshape(-1)
    with torch.no_grad():
        q = model.q_net(torch.as_tensor(buffer.observations[:size].reshape(size * buffer.n_envs, -1))).numpy()
    taken = q[np.arange(q.shape[0]), buffer.actions[:size].reshape(-1).astype(np.int64)]
    known = np.isfinite(returns)
    assert known.sum() >= 1_900
    returns, taken = returns[known], taken[known]
    # Returns are (J_final - J) / 200, in [0, 1] here; the values must be on that scale and follow them.
    assert 0.1 < np.abs(returns).mean() < 1.0
    assert 0.5 < np.abs(taken).mean() / np.abs(returns).mean() < 2.0
    assert np.mean(np.sign(taken) == np.sign(returns)) > 0.9
    assert np.corrcoef(taken, returns)[0, 1] > 0.8
