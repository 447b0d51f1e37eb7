"""Gymnasium-style contract tests over every environment registered by ``envs``.

Each env must pass gymnasium's and SB3's checkers, give identical rollouts for the same seed, and survive a pickle round
trip mid-episode (same continuation afterwards).
"""

from __future__ import annotations

import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import envs

ENV_IDS = list(envs.ENV_IDS)
ROLLOUT_STEPS = 60


def _rollout(env: gym.Env, seed: int, steps: int) -> list[tuple]:
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    trace: list[tuple] = [(np.asarray(obs).tobytes(),)]
    for _ in range(steps):
        action = env.action_space.sample()
        obs, reward, terminated, truncated, _ = env.step(action)
        trace.append((np.asarray(obs).tobytes(), float(reward), bool(terminated), bool(truncated)))
        if terminated or truncated:
            obs, _ = env.reset()
            trace.append((np.asarray(obs).tobytes(),))
    return trace


def test_every_env_is_namespaced() -> None:
    assert all(env_id.startswith("rolloutlab/") for env_id in ENV_IDS)
    for env_id in ENV_IDS:
        assert env_id in gym.registry


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_and_sb3_checkers(env_id: str) -> None:
    env = gym.make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gym_check_env(env.unwrapped, skip_render_check=True)
        sb3_check_env(env.unwrapped, warn=False)
    env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seed_same_rollout(env_id: str) -> None:
    first = _rollout(gym.make(env_id), seed=11, steps=ROLLOUT_STEPS)
    second = _rollout(gym.make(env_id), seed=11, steps=ROLLOUT_STEPS)
    assert first == second


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_pickle_round_trip_mid_episode(env_id: str) -> None:
    env = gym.make(env_id)
    env.reset(seed=3)
    env.action_space.seed(3)
    for _ in range(2):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    clone = pickle.loads(pickle.dumps(env))
    actions = [env.action_space.sample() for _ in range(5)]
    for action in actions:
        a = env.step(action)
        b = clone.step(action)
        assert np.array_equal(np.asarray(a[0]), np.asarray(b[0]))
        assert a[1:4] == b[1:4]
        if a[2] or a[3]:
            break
