"""The true-simulator Pendulum model against ``envs.pendulum.DiscretePendulumEnv``, and its wrong-physics copies."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the env)
from envs.pendulum import DiscretePendulumEnv
from mbrl.models.true_dynamics import TruePendulumModel

ENV_ID = "rolloutlab/DiscretePendulum-v0"


def test_discrete_pendulum_applies_evenly_spaced_torques() -> None:
    env = gym.make(ENV_ID)
    assert env.action_space == gym.spaces.Discrete(5)
    assert env.spec is not None and env.spec.max_episode_steps == 200
    np.testing.assert_allclose(env.unwrapped.torques, [-2.0, -1.0, 0.0, 1.0, 2.0])  # type: ignore[attr-defined,arg-type]
    with pytest.raises(ValueError, match="not in"):
        env.reset(seed=0)
        env.step(5)


def test_nominal_model_matches_the_env_step_for_step() -> None:
    env = gym.make(ENV_ID)
    model = TruePendulumModel.from_env(env)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    worst_obs, worst_reward, steps = 0.0, 0.0, 0
    while steps < 600:
        action = int(rng.integers(5))
        predicted = model.predict(obs[None], np.array([action]), rng)
        obs_next, reward, terminated, truncated, _ = env.step(action)
        worst_obs = max(worst_obs, float(np.abs(predicted.next_obs[0] - obs_next).max()))
        worst_reward = max(worst_reward, abs(float(predicted.reward[0]) - float(reward)))
        assert not terminated
        obs = env.reset()[0] if truncated else obs_next
        steps += 1
    assert worst_obs < 2e-6  # float32 observations
    assert worst_reward < 2e-6


def test_from_env_reads_the_physics_and_perturbed_scales_it() -> None:
    model = TruePendulumModel.from_env(DiscretePendulumEnv(g=9.0, m=1.5, num_actions=3))
    assert (model.g, model.m, model.action_dim) == (9.0, 1.5, 3)
    wrong = model.perturbed({"g": 0.5, "l": 2.0})
    assert (wrong.g, wrong.l, wrong.m) == (4.5, 2.0, 1.5)
    with pytest.raises(ValueError, match="unknown physics"):
        model.perturbed({"gravity": 0.5})
    with pytest.raises(TypeError):
        TruePendulumModel.from_env(gym.make("CartPole-v1"))


def test_mismatch_one_step_error_grows_with_delta() -> None:
    nominal = TruePendulumModel()
    rng = np.random.default_rng(1)
    theta = rng.uniform(-np.pi, np.pi, 2_000)
    obs = np.stack([np.cos(theta), np.sin(theta), rng.uniform(-8, 8, 2_000)], axis=1)
    actions = rng.integers(0, 5, 2_000)
    truth = nominal.predict(obs, actions, rng)
    errors = []
    for delta in (0.0, 0.1, 0.2, 0.4, 0.6):
        for sign in (-1.0, 1.0):
            step = nominal.perturbed({"g": 1.0 + sign * delta}).predict(obs, actions, rng)
            np.testing.assert_array_equal(step.reward, truth.reward)  # wrong physics errs in the next state only
            errors.append(float(np.sqrt(np.mean((step.next_obs - truth.next_obs) ** 2))))
    assert errors[0] == errors[1] == 0.0
    pairs = np.array(errors).reshape(-1, 2).mean(axis=1)
    assert np.all(np.diff(pairs) > 0)


def test_angle_offset_is_the_env_seen_through_a_shifted_sensor() -> None:
    """The offset model steps the physics from ``theta + b`` and reports the result shifted back by ``b``."""
    rng = np.random.default_rng(2)
    theta = rng.uniform(-np.pi, np.pi, 500)
    dtheta = rng.uniform(-6, 6, 500)
    actions = rng.integers(0, 5, 500)
    offset = 0.4
    seen = np.stack([np.cos(theta), np.sin(theta), dtheta], axis=1)
    believed = np.stack([np.cos(theta + offset), np.sin(theta + offset), dtheta], axis=1)
    wrong = TruePendulumModel().perturbed({}, angle_offset=offset).predict(seen, actions, rng)
    truth_there = TruePendulumModel().predict(believed, actions, rng)
    np.testing.assert_allclose(wrong.reward, truth_there.reward, atol=1e-9)
    back = np.arctan2(truth_there.next_obs[:, 1], truth_there.next_obs[:, 0]) - offset
    np.testing.assert_allclose(wrong.next_obs[:, 0], np.cos(back), atol=1e-9)
    np.testing.assert_allclose(wrong.next_obs[:, 1], np.sin(back), atol=1e-9)
    np.testing.assert_allclose(wrong.next_obs[:, 2], truth_there.next_obs[:, 2], atol=1e-9)
    # Upright as observed is not upright to the model: it is paid less there than the true reward.
    upright = np.array([[1.0, 0.0, 0.0]])
    assert wrong.reward is not None
    assert float(TruePendulumModel(angle_offset=offset).predict(upright, np.array([2]), rng).reward[0]) < -0.15
    assert TruePendulumModel(angle_offset=0.0).physics()["angle_offset"] == 0.0
    with pytest.raises(ValueError, match="angle_offset"):
        TruePendulumModel(angle_offset=float("nan"))
