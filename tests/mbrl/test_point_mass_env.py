"""Contract tests for the point-mass toy env: gymnasium and SB3 checkers, same-seed determinism, pickle round trip."""

from __future__ import annotations

import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

from mbrl.point_mass import ENV_ID, MAX_EPISODE_STEPS, PointMassEnv


def _trace(env: gym.Env, seed: int, steps: int) -> list[tuple[bytes, float, bool, bool]]:
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    out = [(obs.tobytes(), 0.0, False, False)]
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        out.append((obs.tobytes(), float(reward), terminated, truncated))
        if terminated or truncated:
            obs, _ = env.reset()
    return out


def test_checkers() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gym_check_env(PointMassEnv(), skip_render_check=True)
        sb3_check_env(PointMassEnv(), warn=False)


def test_registered_with_time_limit() -> None:
    env = gym.make(ENV_ID)
    env.reset(seed=0)
    flags = [env.step(np.zeros(1, np.float32))[2:4] for _ in range(MAX_EPISODE_STEPS)]
    assert not any(terminated for terminated, _ in flags)
    assert [truncated for _, truncated in flags] == [False] * (MAX_EPISODE_STEPS - 1) + [True]


def test_same_seed_same_rollout() -> None:
    assert _trace(gym.make(ENV_ID), 3, 70) == _trace(gym.make(ENV_ID), 3, 70)
    assert _trace(gym.make(ENV_ID), 3, 5) != _trace(gym.make(ENV_ID), 4, 5)


def test_pickle_round_trip_mid_episode() -> None:
    env = gym.make(ENV_ID)
    env.reset(seed=1)
    for _ in range(7):
        env.step(np.array([0.3], np.float32))
    clone = pickle.loads(pickle.dumps(env))
    for _ in range(5):
        a = np.array([-0.5], np.float32)
        np.testing.assert_array_equal(env.step(a)[0], clone.step(a)[0])


def test_dynamics_and_reward_by_hand() -> None:
    env = PointMassEnv()
    env.reset(seed=0)
    env._state = np.array([1.0, 0.5])
    obs, reward, *_ = env.step(np.array([1.0], np.float32))
    v = 0.8 * 0.5 + 0.2  # 0.6
    np.testing.assert_allclose(obs, [1.6, v], rtol=1e-6)
    assert reward == pytest.approx(-(1.6**2) - 0.01)
