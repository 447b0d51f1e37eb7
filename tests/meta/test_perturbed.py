"""Perturbed-physics MountainCar / Acrobot: contract tests and checks that the physics really changes."""

from __future__ import annotations

import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import envs  # noqa: F401  (registers the ids)
from envs.perturbed import (
    NOMINAL_PHYSICS,
    PERTURBED_IDS,
    TEST_PHYSICS,
    PhysicsSampler,
    env_factory,
    make_perturbed,
)

BASE_IDS = sorted(PERTURBED_IDS)


def _trace(env: gym.Env, seed: int, steps: int = 80) -> list[tuple]:
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    out: list[tuple] = [tuple(np.asarray(obs, dtype=np.float64).round(12))]
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        out.append((*np.asarray(obs, dtype=np.float64).round(12), reward, terminated, truncated))
        if terminated or truncated:
            obs, _ = env.reset()
    return out


@pytest.mark.parametrize("base_id", BASE_IDS)
def test_checkers_pass(base_id: str) -> None:
    env = make_perturbed(base_id, TEST_PHYSICS[base_id])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gym_check_env(env.unwrapped, skip_render_check=True)
        sb3_check_env(env.unwrapped, warn=False)


@pytest.mark.parametrize("base_id", BASE_IDS)
def test_same_seed_same_rollout_and_pickle_round_trip(base_id: str) -> None:
    assert _trace(make_perturbed(base_id, TEST_PHYSICS[base_id]), 3) == _trace(
        make_perturbed(base_id, TEST_PHYSICS[base_id]), 3
    )
    env = make_perturbed(base_id, TEST_PHYSICS[base_id])
    env.reset(seed=5)
    for _ in range(10):
        env.step(1)
    clone = pickle.loads(pickle.dumps(env))
    for _ in range(20):
        a = env.step(0)
        b = clone.step(0)
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1:4] == b[1:4]


@pytest.mark.parametrize("base_id", BASE_IDS)
def test_nominal_physics_reproduces_gymnasium(base_id: str) -> None:
    """With nominal parameters the subclass must be the gymnasium env, step for step."""
    ours = make_perturbed(base_id, None)
    theirs = gym.make(base_id)
    assert _trace(ours, 11, 300) == _trace(theirs, 11, 300)


@pytest.mark.parametrize("base_id", BASE_IDS)
def test_test_perturbation_changes_the_dynamics(base_id: str) -> None:
    assert _trace(make_perturbed(base_id, TEST_PHYSICS[base_id]), 2) != _trace(make_perturbed(base_id, None), 2)


def test_registered_defaults_are_the_paper_test_perturbation() -> None:
    car = gym.make("rolloutlab/PerturbedMountainCar-v0")
    assert car.unwrapped.gravity == pytest.approx(0.003)  # type: ignore[attr-defined]
    assert car.spec is not None and car.spec.max_episode_steps == 200
    bot = gym.make("rolloutlab/PerturbedAcrobot-v1").unwrapped
    assert bot.gravity == pytest.approx(12.0)  # type: ignore[attr-defined]
    assert np.allclose([bot.LINK_LENGTH_1, bot.LINK_MASS_1], 1.2)  # type: ignore[attr-defined]
    assert np.allclose([bot.LINK_LENGTH_2, bot.LINK_MASS_2], 0.8)  # type: ignore[attr-defined]


def test_higher_gravity_makes_mountain_car_harder() -> None:
    """Under the same energy-pumping policy, stronger gravity must not let the car reach the goal sooner."""

    def steps_to_goal(gravity: float) -> int:
        env = make_perturbed("MountainCar-v0", {"gravity": gravity})
        obs, _ = env.reset(seed=0)
        for t in range(200):
            obs, _, terminated, truncated, _ = env.step(2 if obs[1] >= 0 else 0)
            if terminated or truncated:
                return t + 1 if terminated else 10_000
        return 10_000

    assert steps_to_goal(0.0025) < steps_to_goal(0.0035)


def test_bad_parameters_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown physics"):
        make_perturbed("MountainCar-v0", {"mass": 1.0})
    with pytest.raises(ValueError, match="no perturbed version"):
        make_perturbed("CartPole-v1")
    with pytest.raises(ValueError, match="must be > 0"):
        make_perturbed("Acrobot-v1", {"gravity": -1.0})


@pytest.mark.parametrize("base_id", BASE_IDS)
def test_sampler_is_seeded_and_within_ranges(base_id: str) -> None:
    sampler = PhysicsSampler(base_id)
    a = [sampler.sample(np.random.default_rng(4)) for _ in range(3)]
    b = [sampler.sample(np.random.default_rng(4)) for _ in range(3)]
    assert a == b
    draws = [sampler.sample(np.random.default_rng(s)) for s in range(50)]
    assert sampler.ranges is not None
    for name, (low, high) in sampler.ranges.items():
        values = [d[name] for d in draws]
        assert low <= min(values) and max(values) <= high
        # The randomization range covers both the nominal and the test physics.
        assert low <= NOMINAL_PHYSICS[base_id][name] <= high
        assert low <= TEST_PHYSICS[base_id][name] <= high
    assert PhysicsSampler(base_id, ranges={}).sample(np.random.default_rng(0)) == NOMINAL_PHYSICS[base_id]
    factory = env_factory(base_id, sampler.sample(np.random.default_rng(0)))
    env = pickle.loads(pickle.dumps(factory))()
    assert env.spec is not None and env.spec.id == PERTURBED_IDS[base_id]
    assert env_factory(base_id)().unwrapped.gravity == NOMINAL_PHYSICS[base_id]["gravity"]  # type: ignore[attr-defined]


def test_physics_from_the_command_line() -> None:
    from envs.perturbed import NOMINAL_PHYSICS, TEST_PHYSICS, parse_physics

    assert parse_physics("Acrobot-v1", "test") == TEST_PHYSICS["Acrobot-v1"]
    assert parse_physics("MountainCar-v0", " nominal ") == NOMINAL_PHYSICS["MountainCar-v0"]
    mine = parse_physics("Acrobot-v1", "gravity=11, link_mass_1=1.3")
    assert mine == {**NOMINAL_PHYSICS["Acrobot-v1"], "gravity": 11.0, "link_mass_1": 1.3}
    assert parse_physics("Acrobot-v1", "gravity=11 link_mass_1=1.3") == mine  # spaces work as separators
    make_perturbed("Acrobot-v1", mine).reset(seed=0)
    for text, message in (
        ("mass=2", "unknown physics parameter 'mass' for Acrobot-v1; known: gravity, link_length_1"),
        ("gravity", "use test, nominal or name=value"),
        ("gravity=heavy", "'heavy' is not a number"),
        ("gravity=-1", "positive finite"),
        ("gravity=nan", "positive finite"),
        ("gravity=9,gravity=10", "given twice"),
        ("", "no physics given"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_physics("Acrobot-v1", text)
