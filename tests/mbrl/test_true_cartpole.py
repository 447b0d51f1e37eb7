"""The true-simulator CartPole model against gymnasium's ``CartPoleEnv``, and its angle-sensor error."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from mbrl.models.true_dynamics import TrueCartPoleModel


def _visited(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` (float64 state, action, env's next float64 state) triples from random play across episodes."""
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    states, actions, nexts = [], [], []
    while len(states) < n:
        state = np.array(env.unwrapped.state, dtype=np.float64)  # type: ignore[attr-defined]
        action = int(rng.integers(0, 2))
        _, _, terminated, truncated, _ = env.step(action)
        states.append(state)
        actions.append(action)
        nexts.append(np.array(env.unwrapped.state, dtype=np.float64))  # type: ignore[attr-defined]
        if terminated or truncated:
            env.reset(seed=int(rng.integers(1 << 30)))
    return np.stack(states), np.array(actions), np.stack(nexts)


def test_one_step_is_the_env_step_bit_for_bit() -> None:
    states, actions, nexts = _visited(300, seed=0)
    model = TrueCartPoleModel.from_env(gym.make("CartPole-v1"))
    step = model.predict(states, actions, np.random.default_rng(0))
    np.testing.assert_array_equal(step.next_obs, nexts)
    np.testing.assert_array_equal(step.reward, np.ones(300))
    assert step.terminated_prob is None
    with pytest.raises(TypeError, match="CartPoleEnv"):
        TrueCartPoleModel.from_env(gym.make("Acrobot-v1"))


def test_angle_offset_is_the_env_seen_through_a_turned_pole_sensor() -> None:
    states, actions, _ = _visited(300, seed=1)
    offset = 0.1
    wrong = TrueCartPoleModel().perturbed({}, angle_offset=offset)
    step = wrong.predict(states, actions, np.random.default_rng(0))
    turned = states + np.array([0.0, 0.0, offset, 0.0])
    exact = TrueCartPoleModel().predict(turned, actions, np.random.default_rng(0)).next_obs
    np.testing.assert_allclose(step.next_obs, exact - np.array([0.0, 0.0, offset, 0.0]), atol=1e-12)
    right = TrueCartPoleModel().predict(states, actions, np.random.default_rng(0)).next_obs
    # Gravity tips the believed pole the wrong way: near upright its angular velocity gains about
    # tau g sin(offset) / (length (4/3 - masspole / total mass)) = 0.031 rad/s more per step (less far from it).
    gain = 0.02 * 9.8 * math.sin(offset) / (0.5 * (4 / 3 - 0.1 / 1.1))
    np.testing.assert_allclose(step.next_obs[:, 3] - right[:, 3], gain, rtol=0.35)
    np.testing.assert_array_equal(
        TrueCartPoleModel().perturbed({}, angle_offset=0.0).predict(states, actions, np.random.default_rng(0)).next_obs,
        right,
    )
    assert TrueCartPoleModel().perturbed({"force_mag": 1.5}).force_mag == 15.0
    assert wrong.physics()["angle_offset"] == offset
    with pytest.raises(ValueError, match="unknown physics"):
        TrueCartPoleModel().perturbed({"g": 1.5})
    with pytest.raises(ValueError, match="masspole"):
        TrueCartPoleModel(masspole=0.0)
    with pytest.raises(ValueError, match="actions must be integers"):
        TrueCartPoleModel().predict(states[:2], np.array([0, 2]), np.random.default_rng(0))
