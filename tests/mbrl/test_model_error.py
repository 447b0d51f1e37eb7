"""The model's error on real data: open-loop h-step RMSE on real segments, and model episodes that stop where real
ones do."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the rolloutlab/ ids)
from mbrl.algorithms.base import episode_step_limit
from mbrl.algorithms.dyna import BatchedDynaDQN, DynaConfig
from mbrl.model_error import RMSE_HORIZONS, open_loop_rmse, rmse_feedback
from mbrl.models.dynamics import ModelStep
from mbrl.phases import TRAINING_DATA_KEYS, RolloutLengthDriver
from meta.control import make_controller

ENV_ID = "rolloutlab/DiscretePendulum-v0"


class AddAction:
    """A 1-d model: ``x' = x + a + bias`` (``bias = 0``: exact for the data below)."""

    def __init__(self, bias: float = 0.0) -> None:
        self.bias = bias

    def predict(self, obs, actions, rng, deterministic=False, disagreement_rows=None):  # type: ignore[no-untyped-def]
        obs = np.asarray(obs, np.float64)
        n = obs.shape[0]
        nxt = obs + np.asarray(actions, np.float64).reshape(n, 1) + self.bias
        return ModelStep(nxt, np.zeros(n), None, np.zeros(n), np.ones(n, bool))


def _two_episodes() -> tuple[np.ndarray, ...]:
    """Episode A: 0 -> 1 -> 2 -> 3 -> 4 (ends); episode B: 10 -> 11 -> 12. Actions are all +1."""
    obs = np.array([0, 1, 2, 3, 10, 11], np.float64)[:, None]
    next_obs = obs + 1
    ends = np.array([False, False, False, True, False, False])
    return obs, np.ones(6, np.int64), next_obs, ends


def test_open_loop_rmse_is_zero_for_an_exact_model_and_never_crosses_an_episode_boundary() -> None:
    obs, action, next_obs, ends = _two_episodes()
    rng = np.random.default_rng(0)
    exact = open_loop_rmse(AddAction(), obs, action, next_obs, ends, horizon=6, rng=rng)
    # Episode A has segments of up to 4 steps, B of up to 2: h = 5, 6 is reached by no segment. A segment crossing
    # from A into B would compare a prediction of 4 + ... with 11 and not be 0.
    np.testing.assert_array_equal(exact[:4], 0.0)
    assert np.isnan(exact[4:]).all()
    biased = open_loop_rmse(AddAction(bias=0.1), obs, action, next_obs, ends, horizon=4, rng=rng)
    np.testing.assert_allclose(biased, [0.1, 0.2, 0.3, 0.4])  # open loop: the bias compounds with h
    fewer = open_loop_rmse(AddAction(bias=0.1), obs, action, next_obs, ends, horizon=2, rng=rng, max_starts=2)
    np.testing.assert_allclose(fewer, [0.1, 0.2])  # starts 0 and 5: only start 0 reaches h = 2
    feedback = rmse_feedback(biased, k=2)
    assert feedback["model_rmse_h1"] == pytest.approx(0.1) and feedback["model_rmse_h4"] == pytest.approx(0.4)
    assert np.isnan(feedback["model_rmse_h8"]) and feedback["model_rmse_at_k"] == pytest.approx(0.15)
    assert rmse_feedback(biased, k=0)["model_rmse_at_k"] == pytest.approx(0.1)  # K = 0 reads the one-step error
    assert set(feedback) == {*(f"model_rmse_h{h}" for h in RMSE_HORIZONS), "model_rmse_at_k"}


def _pendulum_learner(models: list, **overrides: object) -> BatchedDynaDQN:
    values: dict[str, object] = {
        "budget": 600,
        "phase_length": 600,
        "learning_starts": 600,  # random actions throughout: a model never changes the real data
        "num_model_rollouts": 16,
        "batch_size": 16,
        "net_arch": [16],
        "eval_episodes": 1,
        "model_train_freq": 600,
        "controller_feedback": "training",
    }
    values.update(overrides)
    return BatchedDynaDQN(
        [lambda: gym.make(ENV_ID)] * len(models),
        DynaConfig(**values),
        seed=0,
        run_seeds=[4] * len(models),
        models=models,
    )


def test_open_loop_error_on_real_segments_is_zero_for_the_exact_simulator_and_grows_with_its_error() -> None:
    """DiscretePendulum with its exact simulator as the model: every h-step RMSE on the run's real segments is below
    1e-5 (float32 observations); with an angle-sensor offset of 0.2 and 0.5 rad it grows with the offset."""
    from mbrl.models.true_dynamics import TruePendulumModel

    exact = TruePendulumModel.from_env(gym.make(ENV_ID))
    offsets = (0.0, 0.2, 0.5)
    learner = _pendulum_learner([exact.perturbed({}, angle_offset=b) for b in offsets])
    driver = RolloutLengthDriver([make_controller("fixed:0")] * len(offsets), k_cap=learner.cfg.k_cap)
    feedback = driver.run_phase(learner)
    for fb in feedback:
        assert set(TRAINING_DATA_KEYS) <= set(fb)
    keys = [f"model_rmse_h{h}" for h in RMSE_HORIZONS] + ["model_rmse_at_k", "model_one_step_rmse"]
    assert max(feedback[0][k] for k in keys) < 1e-5, {k: feedback[0][k] for k in keys}
    for key in keys:
        errors = [fb[key] for fb in feedback]
        assert errors[0] < 1e-5 < 1e-2 < errors[1] < errors[2], (key, errors)
    # The same numbers whichever feedback mode: they come from training data only.
    again = _pendulum_learner([exact.perturbed({}, angle_offset=0.2)], controller_feedback="evaluation")
    fb = RolloutLengthDriver([make_controller("fixed:0")], k_cap=32).run_phase(again)[0]
    assert fb["model_rmse_h8"] == feedback[1]["model_rmse_h8"]


def test_model_episodes_stop_where_the_real_ones_do_for_an_env_object() -> None:
    """An env object wrapped in TimeLimit by hand has no spec: model episodes used to run 1000 steps against the real
    200, so model_return_error was about -4x the return for an exact model. Now both stop at 200 and the exact
    simulator's model_return_error is 0 up to float32 drift of the start state."""
    from envs.pendulum import DiscretePendulumEnv
    from mbrl.models.true_dynamics import TruePendulumModel

    def by_hand() -> gym.Env:
        return gym.wrappers.TimeLimit(DiscretePendulumEnv(), 200)

    assert by_hand().spec is None and episode_step_limit(by_hand()) == 200
    assert episode_step_limit(gym.make("CartPole-v1")) == 500
    assert episode_step_limit(DiscretePendulumEnv()) == 1000 and episode_step_limit(DiscretePendulumEnv(), 7) == 7
    cfg = DynaConfig(
        budget=400,
        phase_length=400,
        learning_starts=100,
        rollout_freq=200,
        num_model_rollouts=16,
        batch_size=16,
        net_arch=[16],
        eval_episodes=2,
        model_train_freq=400,
    )
    learner = BatchedDynaDQN([by_hand], cfg, seed=1, models=[TruePendulumModel()])
    assert learner.max_episode_steps == 200
    fb = RolloutLengthDriver([make_controller("fixed:2")], k_cap=32).run_phase(learner)[0]
    assert fb["model_length_error"] == 0.0
    assert abs(fb["model_return_error"]) < 0.5 < abs(fb["mean_return"])
