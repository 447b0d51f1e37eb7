"""The true-simulator Acrobot model against gymnasium's ``AcrobotEnv`` (nominal and perturbed physics).

The model only sees observations, so each comparison sets the env's internal state to a float64 state ``s``, steps the
env, and feeds the model the float64 observation of ``s``; the model's next observation must match the float64
observation of the env's next internal state (the env's own returned observation is float32, so it is compared at
float32 precision).
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.classic_control.acrobot import AcrobotEnv

from envs.perturbed import NOMINAL_PHYSICS, TEST_PHYSICS, make_perturbed
from mbrl.model_env import ModelEnv
from mbrl.models.true_dynamics import TrueAcrobotModel, _wrap
from mbrl.termination import termination_fn

ACTIONS = (0, 1, 2)


def _acrobot(env: gym.Env[Any, Any]) -> AcrobotEnv:
    """The unwrapped env, typed (its internal ``state`` is what the comparisons set)."""
    u = env.unwrapped
    assert isinstance(u, AcrobotEnv)
    return u


def _visited_states(env: gym.Env[Any, Any], n: int, seed: int) -> np.ndarray:
    """``n`` internal states ``[n, 4]`` (float64) reached by random actions, one every 7 steps across episodes."""
    u = _acrobot(env)
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    states: list[np.ndarray] = []
    while len(states) < n:
        for _ in range(7):
            _, _, terminated, _, _ = u.step(int(rng.integers(3)))  # unwrapped: no time limit to hit
            if terminated:
                env.reset(seed=int(rng.integers(2**31)))
        states.append(np.array(u.state, dtype=np.float64))
    return np.stack(states)


def _uniform_states(model: TrueAcrobotModel, n: int, seed: int) -> np.ndarray:
    """States anywhere in the state space, velocities up to the clip bounds: reaches goals, clipping and wrapping."""
    rng = np.random.default_rng(seed)
    return np.stack(
        [
            rng.uniform(-math.pi, math.pi, n),
            rng.uniform(-math.pi, math.pi, n),
            rng.uniform(-model.max_vel_1, model.max_vel_1, n),
            rng.uniform(-model.max_vel_2, model.max_vel_2, n),
        ],
        axis=1,
    )


def _compare(env: gym.Env[Any, Any], model: TrueAcrobotModel, states: np.ndarray) -> dict[str, int]:
    """Step env and model from every state with every action; assert agreement; return coverage counts."""
    u = _acrobot(env)
    n = states.shape[0]
    obs = np.repeat(TrueAcrobotModel.obs_from_state(states), len(ACTIONS), axis=0)
    actions = np.tile(np.array(ACTIONS), n)
    expected: list[np.ndarray] = []
    expected32: list[np.ndarray] = []
    rewards: list[float] = []
    terminals: list[bool] = []
    for state, action in zip(np.repeat(states, len(ACTIONS), axis=0), actions, strict=True):
        u.state = state.copy()
        ob32, reward, terminated, truncated, _ = u.step(int(action))
        assert not truncated
        expected.append(TrueAcrobotModel.obs_from_state(np.asarray(u.state))[0])
        expected32.append(ob32)
        rewards.append(reward)
        terminals.append(terminated)
    step = model.predict(obs, actions, np.random.default_rng(0))
    np.testing.assert_allclose(step.next_obs, np.stack(expected), rtol=0, atol=1e-10)
    np.testing.assert_allclose(step.next_obs, np.stack(expected32), rtol=0, atol=1e-6)  # the env's float32 obs
    np.testing.assert_array_equal(step.reward, np.array(rewards))
    fn = termination_fn("Acrobot-v1")
    assert fn is not None
    np.testing.assert_array_equal(fn(obs, actions, step.next_obs), np.array(terminals))
    assert step.next_obs.dtype == np.float64 and step.next_obs.shape == (3 * n, 6)
    assert step.terminated_prob is None
    np.testing.assert_array_equal(step.disagreement, np.zeros(3 * n))
    assert step.finite.all()
    next_vel = step.next_obs[:, 4:]
    return {
        "terminal": int(np.sum(terminals)),
        "clipped": int(np.sum(np.isclose(np.abs(next_vel), [model.max_vel_1, model.max_vel_2], rtol=0, atol=0))),
    }


def test_one_step_matches_acrobot_env_from_visited_states() -> None:
    env = gym.make("Acrobot-v1")
    u = _acrobot(env)
    assert u.torque_noise_max == 0.0 and u.book_or_nips == "book"  # the env is deterministic
    _compare(env, TrueAcrobotModel(), _visited_states(env, 200, seed=0))


def test_one_step_matches_acrobot_env_across_the_state_space() -> None:
    env = gym.make("Acrobot-v1")
    env.reset(seed=0)
    model = TrueAcrobotModel()
    counts = _compare(env, model, _uniform_states(model, 300, seed=1))
    assert counts["terminal"] > 20  # goal detection is exercised, not just the -1 reward
    assert counts["clipped"] > 0  # and the velocity clip


def test_perturbed_env_through_from_env() -> None:
    env = make_perturbed("Acrobot-v1", TEST_PHYSICS["Acrobot-v1"])
    model = TrueAcrobotModel.from_env(env)
    physics = model.physics()
    for name, value in TEST_PHYSICS["Acrobot-v1"].items():
        assert physics[name] == value
    states = _visited_states(env, 200, seed=2)
    _compare(env, model, states)
    # The perturbation matters: the nominal model is far off on the same transitions.
    obs = TrueAcrobotModel.obs_from_state(states)
    actions = np.zeros(len(states), np.int64)
    nominal = TrueAcrobotModel().predict(obs, actions, np.random.default_rng(0)).next_obs
    perturbed = model.predict(obs, actions, np.random.default_rng(0)).next_obs
    assert np.abs(nominal - perturbed).max() > 0.1


def test_from_env_reads_nominal_physics_and_gymnasium_gravity() -> None:
    model = TrueAcrobotModel.from_env(gym.make("Acrobot-v1"))
    assert model.physics() == TrueAcrobotModel().physics()
    nominal = TrueAcrobotModel.from_env(make_perturbed("Acrobot-v1", NOMINAL_PHYSICS["Acrobot-v1"]))
    assert nominal.physics() == TrueAcrobotModel().physics()
    # The plain env hard-codes g = 9.8 in its equations, so a stray attribute must not be picked up.
    env = gym.make("Acrobot-v1")
    env.unwrapped.gravity = 20.0  # type: ignore[attr-defined]
    assert TrueAcrobotModel.from_env(env).gravity == 9.8
    with pytest.raises(TypeError, match="AcrobotEnv"):
        TrueAcrobotModel.from_env(gym.make("CartPole-v1"))


def test_float32_observations_as_the_agent_sees_them() -> None:
    # The agent's buffer holds the env's float32 observations; from those the model is accurate to float32 precision.
    env = gym.make("Acrobot-v1")
    u = _acrobot(env)
    rng = np.random.default_rng(3)
    ob, _ = env.reset(seed=3)
    obs, actions, next_obs = [], [], []
    for _ in range(300):
        action = int(rng.integers(3))
        nxt, _, terminated, _, _ = u.step(action)
        obs.append(ob)
        actions.append(action)
        next_obs.append(nxt)
        ob = env.reset(seed=int(rng.integers(2**31)))[0] if terminated else nxt
    step = TrueAcrobotModel().predict(np.stack(obs), np.array(actions), rng)
    np.testing.assert_allclose(step.next_obs, np.stack(next_obs), rtol=0, atol=1e-4)


def test_stands_in_for_a_dynamics_model() -> None:
    model = TrueAcrobotModel()
    assert model.fitted is True
    assert model.fit(np.zeros((4, 6)), np.zeros(4), np.zeros(4), np.zeros((4, 6)), np.zeros(4)) == {}
    model.restore_last_good()
    assert model.state_dict() == {}
    model.load_state_dict(model.state_dict())
    with pytest.raises(ValueError, match="no state"):
        model.load_state_dict({"ensemble": {}})
    # Nothing is drawn from the caller's generator at the default (noise-free) physics.
    rng = np.random.default_rng(5)
    before = rng.bit_generator.state
    obs = TrueAcrobotModel.obs_from_state(np.zeros((4, 4)))
    model.predict(obs, np.array([0, 1, 2, 1]), rng)
    assert rng.bit_generator.state == before
    # Imagined rollouts through ModelEnv, as the Dyna learner makes them.
    env = ModelEnv(model, termination_fn("Acrobot-v1"), 6, (), np.int64)
    result = env.rollout(obs.astype(np.float32), lambda o: np.full(len(o), 2), 5, rng)
    assert len(result.transitions) == 20 and result.num_nonfinite == 0
    np.testing.assert_array_equal(result.transitions.reward, -1.0)


def test_torque_noise_and_action_validation() -> None:
    obs = TrueAcrobotModel.obs_from_state(np.zeros((64, 4)))
    actions = np.ones(64, np.int64)
    noisy = TrueAcrobotModel(torque_noise_max=0.5)
    sampled = noisy.predict(obs, actions, np.random.default_rng(0)).next_obs
    assert np.ptp(sampled[:, 5]) > 0  # same state and action, different torques
    exact = noisy.predict(obs, actions, np.random.default_rng(0), deterministic=True).next_obs
    np.testing.assert_array_equal(exact, TrueAcrobotModel().predict(obs, actions, np.random.default_rng(0)).next_obs)
    with pytest.raises(ValueError, match="integers in"):
        TrueAcrobotModel().predict(obs[:2], np.array([0, 3]), np.random.default_rng(0))
    with pytest.raises(ValueError, match="actions for"):
        TrueAcrobotModel().predict(obs[:2], np.array([0]), np.random.default_rng(0))
    with pytest.raises(ValueError, match="gravity"):
        TrueAcrobotModel(gravity=0.0)
    empty = TrueAcrobotModel().predict(np.zeros((0, 6)), np.zeros(0, np.int64), np.random.default_rng(0))
    assert empty.next_obs.shape == (0, 6) and empty.reward.shape == (0,)


def test_wrap_matches_gymnasium_loop_and_never_hangs() -> None:
    from gymnasium.envs.classic_control.acrobot import wrap

    x = np.array([-12.0, -math.pi, -3.0, 0.0, math.pi, 3.5, 9.0, 20.0])
    np.testing.assert_array_equal(_wrap(x, -math.pi, math.pi), [wrap(v, -math.pi, math.pi) for v in x])
    far = _wrap(np.array([1e6, -1e6, np.inf, np.nan]), -math.pi, math.pi)
    assert np.all(np.abs(far[:2]) <= math.pi) and np.isinf(far[2]) and np.isnan(far[3])


def test_angle_offset_is_the_env_seen_through_a_turned_shoulder_sensor() -> None:
    env = gym.make("Acrobot-v1")
    states = _visited_states(env, 200, seed=3)
    offset = 0.4
    actions = np.random.default_rng(0).integers(0, 3, len(states))
    rng = np.random.default_rng(0)
    wrong = TrueAcrobotModel().perturbed({}, angle_offset=offset)
    step = wrong.predict(TrueAcrobotModel.obs_from_state(states), actions, rng)
    # The same as the exact model stepping the turned state, with the result turned back.
    turned = states.copy()
    turned[:, 0] = _wrap(turned[:, 0] + offset, -math.pi, math.pi)
    exact = TrueAcrobotModel().step_state(turned, TrueAcrobotModel().torques[actions])
    exact[:, 0] = _wrap(exact[:, 0] - offset, -math.pi, math.pi)
    np.testing.assert_allclose(step.next_obs, TrueAcrobotModel.obs_from_state(exact), atol=1e-12)
    # It errs where the exact model does not, and at offset 0 it is the exact model bit for bit.
    right = TrueAcrobotModel().predict(TrueAcrobotModel.obs_from_state(states), actions, rng)
    assert np.abs(step.next_obs - right.next_obs).max() > 0.05
    same = (
        TrueAcrobotModel()
        .perturbed({}, angle_offset=0.0)
        .predict(TrueAcrobotModel.obs_from_state(states), actions, rng)
    )
    np.testing.assert_array_equal(same.next_obs, right.next_obs)
    # Its goal test looks at the turned frame: the arm straight up is its goal only without an offset.
    up = TrueAcrobotModel.obs_from_state(np.array([[math.pi - 0.05, 0.0, 0.0, 0.0]]))
    assert TrueAcrobotModel().predict(up, np.array([1]), rng).reward[0] == 0.0
    assert TrueAcrobotModel(angle_offset=1.5).predict(up, np.array([1]), rng).reward[0] == -1.0
    assert wrong.physics()["angle_offset"] == offset
    assert TrueAcrobotModel().perturbed({"gravity": 1.5}).gravity == pytest.approx(9.8 * 1.5)
    with pytest.raises(ValueError, match="unknown physics"):
        TrueAcrobotModel().perturbed({"g": 1.5})
    with pytest.raises(ValueError, match="angle_offset"):
        TrueAcrobotModel(angle_offset=float("inf"))
