"""The trained meta-agent's values have the size of its returns (round one's meta-DQN was ~500x too small)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from meta.control.training import MetaAgentConfig, MetaTrainConfig, MetaTrainer
from meta.rollout_length.diagnostics import returns_to_go, value_check
from meta.rollout_length.env import MetaEnvConfig


def test_meta_dqn_values_track_monte_carlo_returns(tmp_path: Path) -> None:
    # The toy learner: 200 meta-episodes of 10 decisions, the meta-reward on the default fixed scale (the step limit).
    env = MetaEnvConfig(budget=100_000, phase_length=10_000, inner="toy")
    cfg = MetaTrainConfig(env=env, agent=MetaAgentConfig(), episodes=200, runs_per_round=10, seed=0)
    trainer = MetaTrainer(cfg, tmp_path, show_progress=False)
    trainer.train()
    model = trainer.model
    assert model is not None
    check = value_check(model)
    assert check["transitions"] >= 1_900
    # Returns are (J_final - J) / 200, in [0, 1] here; the values must be on that scale and follow them.
    assert 0.1 < check["mean_abs_return"] < 1.0
    assert 0.5 < check["size_ratio"] < 2.0
    assert check["sign_agreement"] > 0.9
    assert check["correlation"] > 0.8


def test_returns_to_go_follow_episode_ends() -> None:
    rewards = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    dones = np.array([[0, 1], [1, 0], [0, 0]])
    out = returns_to_go(rewards, dones)
    # Column 0: the episode ends at t = 1 (1 + 3), t = 2 starts one that never ends. Column 1: ends at t = 0 only.
    np.testing.assert_array_equal(out[:, 0], [4.0, 3.0, np.nan])
    np.testing.assert_array_equal(out[:, 1], [2.0, np.nan, np.nan])
