"""Known termination functions reproduce the real environments' ``terminated`` flags."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from mbrl.termination import base_name, known_env_names, termination_fn

# (env id, steps of random play); MuJoCo envs fall over quickly under random actions, which exercises the rule.
ENVS = [
    ("Pendulum-v1", 150),
    ("InvertedPendulum-v5", 300),
    ("Hopper-v5", 300),
    ("Walker2d-v5", 300),
    ("HalfCheetah-v5", 100),
    ("MountainCar-v0", 200),
    ("Acrobot-v1", 300),
    ("CartPole-v1", 300),
]


def _random_transitions(env_id: str, steps: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    env = gym.make(env_id)
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    rows: list[tuple[np.ndarray, np.ndarray, np.ndarray, bool]] = []
    for _ in range(steps):
        action = env.action_space.sample()
        next_obs, _, terminated, truncated, _ = env.step(action)
        rows.append((obs, np.atleast_1d(action), next_obs, bool(terminated)))
        obs = next_obs
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    o, a, n, t = zip(*rows, strict=True)
    return np.stack(o), np.stack(a), np.stack(n), np.array(t)


@pytest.mark.parametrize(("env_id", "steps"), ENVS)
def test_matches_environment(env_id: str, steps: int) -> None:
    obs, action, next_obs, terminated = _random_transitions(env_id, steps)
    fn = termination_fn(env_id)
    assert fn is not None
    predicted = fn(obs, action, next_obs)
    assert predicted.shape == terminated.shape and predicted.dtype == bool
    np.testing.assert_array_equal(predicted, terminated)


def test_random_play_exercises_terminal_states() -> None:
    # Guard against a vacuous comparison: these envs must actually terminate under random play.
    for env_id in ("InvertedPendulum-v5", "Hopper-v5", "CartPole-v1"):
        _, _, _, terminated = _random_transitions(env_id, 300)
        assert terminated.any(), env_id


def test_hand_computed_cases() -> None:
    z = np.zeros((1, 1))
    mc = termination_fn("MountainCar-v0")
    assert mc is not None
    np.testing.assert_array_equal(mc(z, z, np.array([[0.5, 0.0], [0.49, 0.07], [0.55, -0.01]])), [True, False, False])
    acro = termination_fn("Acrobot-v1")
    assert acro is not None
    up = np.array([[-1.0, 0.0, 1.0, 0.0, 0.0, 0.0]])  # theta1 = pi, theta2 = 0: tip straight up, height 2
    down = np.array([[1.0, 0.0, 1.0, 0.0, 0.0, 0.0]])  # hanging: height -2
    np.testing.assert_array_equal(acro(up, z, up), [True])
    np.testing.assert_array_equal(acro(down, z, down), [False])
    cart = termination_fn("CartPole-v1")
    assert cart is not None
    np.testing.assert_array_equal(
        cart(z, z, np.array([[2.41, 0, 0, 0], [0, 0, 0.21, 0], [2.3, 0, -0.2, 0]])), [True, True, False]
    )
    pend = termination_fn("InvertedPendulum-v5")
    assert pend is not None
    np.testing.assert_array_equal(pend(z, z, np.array([[0, 0.21, 0, 0], [0, np.nan, 0, 0], [0, 0.1, 0, 0]])), [1, 1, 0])


def test_lookup() -> None:
    assert base_name("rolloutlab/PointMass-v0") == "PointMass"
    assert base_name("Hopper-v5") == "Hopper"
    assert termination_fn("Hopper-v4") is termination_fn("Hopper-v5")
    assert termination_fn("SomethingUnknown-v0") is None
    assert {"Pendulum", "InvertedPendulum", "Hopper", "Walker2d", "HalfCheetah", "MountainCar", "Acrobot"} <= set(
        known_env_names()
    )
    with pytest.raises(ValueError, match="shape"):
        termination_fn("CartPole-v1")(np.zeros(4), np.zeros(1), np.zeros(4))  # type: ignore[misc]
