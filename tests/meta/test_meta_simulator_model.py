"""The rollout-length meta-MDP over runs whose model is the exact Pendulum simulator with a per-run error."""

from __future__ import annotations

import numpy as np
import pytest

from meta.rollout_length.env import SIMULATOR_ENV, MetaEnvConfig, MetaVecEnv, simulator_model
from meta.rollout_length.features import FEATURE_NAMES

SMALL_DYNA = {
    "learning_starts": 100,
    "batch_size": 32,
    "net_arch": [16],
    "rollout_freq": 100,
    "num_model_rollouts": 20,
    "eval_episodes": 1,
    "model_use": "dyna",
    "controller_feedback": "training",
    "model_train_freq": 600,
}


def simulator_config(**overrides: object) -> MetaEnvConfig:
    values: dict[str, object] = {
        "env_id": SIMULATOR_ENV,
        "model": "simulator",
        "model_error": {"angle_offset": [0.0, 0.8]},
        "randomize_physics": False,
        "budget": 600,
        "phase_length": 200,
        "k_cap": 4,
        "k_grid": [0, 1, 2, 4],
        "action_set": "direct",
        "compute_matched": True,
        "dyna": dict(SMALL_DYNA, buffer_size=600),
    }
    values.update(overrides)
    return MetaEnvConfig(**values)  # type: ignore[arg-type]


def test_each_run_gets_its_own_model_error_and_the_real_env_stays_nominal() -> None:
    venv = MetaVecEnv(simulator_config(), num_runs=3, seed=5)
    obs = venv.reset()
    assert obs.shape == (3, len(FEATURE_NAMES))
    offsets = [info["model_error"]["angle_offset"] for info in venv.reset_infos]
    assert len(set(offsets)) == 3 and all(0.0 <= b <= 0.8 for b in offsets)
    learner = venv.runs.problem.learner
    assert [m.angle_offset for m in learner.models] == offsets  # type: ignore[union-attr]
    assert all(learner.compute_matched)  # type: ignore[union-attr]
    for _ in range(3):
        obs, _reward, done, infos = venv.step(np.array([3, 0, 3]))
    assert done.all()
    # The model-error feature reads the model's one-step error on the run's own real data: it orders the runs by
    # their offset (all three saw the same nominal env).
    rmse = [info["terminal_observation"][FEATURE_NAMES.index("model_one_step_rmse")] for info in infos]
    assert np.argsort(rmse).tolist() == np.argsort(offsets).tolist()


def test_an_exact_model_has_zero_one_step_error_feature() -> None:
    venv = MetaVecEnv(simulator_config(model_error={"angle_offset": [0.0, 0.0]}), num_runs=1, seed=0)
    venv.reset()
    obs, _, _, _ = venv.step(np.array([3]))
    assert obs[0, FEATURE_NAMES.index("model_one_step_rmse")] == pytest.approx(0.0, abs=1e-5)


def test_simulator_model_applies_scales_and_offset() -> None:
    model = simulator_model({"angle_offset": 0.3, "g": 0.5})
    assert model.angle_offset == 0.3 and model.g == pytest.approx(15.0)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"env_id": "Acrobot-v1"}, "needs env_id"),
        ({"randomize_physics": True}, "keeps the real env nominal"),
        ({"model_error": {"gravity": [0.0, 1.0]}}, "unknown parameter 'gravity'"),
        ({"model_error": {"angle_offset": [1.0, 0.0]}}, "low <= high"),
        ({"model_error": {"g": [-1.5, 0.0]}}, "1 \\+ low must be > 0"),
        ({"inner": "toy"}, "inner='dyna'"),
        ({"model": "exact"}, "model must be"),
    ],
)
def test_bad_simulator_settings_are_refused(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        simulator_config(**overrides)


def test_model_error_without_a_simulator_is_refused() -> None:
    with pytest.raises(ValueError, match="model='simulator'"):
        MetaEnvConfig(model_error={"angle_offset": [0.0, 0.5]})
