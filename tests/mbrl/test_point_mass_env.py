"""Unit tests for the point-mass toy env (the checkers, determinism and pickle contract run in tests/contract)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from envs.point_mass import PointMassEnv

ENV_ID = "rolloutlab/PointMass-v0"


def test_registered_with_time_limit() -> None:
    horizon = gym.spec(ENV_ID).max_episode_steps
    assert horizon == 30
    env = gym.make(ENV_ID)
    env.reset(seed=0)
    flags = [env.step(np.zeros(1, np.float32))[2:4] for _ in range(horizon)]
    assert not any(terminated for terminated, _ in flags)
    assert [truncated for _, truncated in flags] == [False] * (horizon - 1) + [True]


def test_seed_sets_the_start_state() -> None:
    starts = [gym.make(ENV_ID).reset(seed=seed)[0] for seed in (3, 3, 4)]
    np.testing.assert_array_equal(starts[0], starts[1])
    assert not np.array_equal(starts[0], starts[2])
    assert starts[0][1] == 0.0 and -1.5 <= starts[0][0] <= 1.5


def test_dynamics_and_reward_by_hand() -> None:
    env = PointMassEnv()
    env.reset(seed=0)
    env._state = np.array([1.0, 0.5])
    obs, reward, *_ = env.step(np.array([1.0], np.float32))
    v = 0.8 * 0.5 + 0.2  # 0.6
    np.testing.assert_allclose(obs, [1.6, v], rtol=1e-6)
    assert reward == pytest.approx(-(1.6**2) - 0.01)
    obs, _, *_ = env.step(np.array([1.0], np.float32))
    assert obs[0] == pytest.approx(2.0)  # 1.6 + 0.68 is clipped to the wall at x = 2
