"""PETS: it learns the point mass, refuses bad configurations before any work, resumes, and runs from the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from planning.mpc.pets import CHECKPOINT_KIND, PETS, PETSConfig, check_config
from rolloutlab.checkpoint import load_checkpoint


def _text(output: str) -> str:
    """CLI output without rich's box drawing and line wrapping."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", output).split())


TINY_MODEL = {"ensemble_size": 3, "num_elites": 3, "hidden_size": 32, "num_layers": 2, "min_train_steps": 300}


def _tiny(**overrides) -> PETSConfig:
    from mbrl.models import ModelConfig
    from planning.mpc import CEMConfig

    values = {
        "env_id": "rolloutlab/PointMass-v0",
        "total_steps": 150,
        "controller": "fixed:8",
        "num_particles": 3,
        "initial_random_steps": 60,
        "model_train_freq": 30,
        "eval_every": 30,
        "eval_episodes": 2,
        "checkpoint_every": 30,
        "log_every": 30,
        "cem": CEMConfig(population=40, iterations=2),
        "model": ModelConfig(**TINY_MODEL),
    }
    values.update(overrides)
    return PETSConfig(**values)


def test_pets_learns_the_point_mass(tmp_path: Path) -> None:
    run = PETS(_tiny(), run_dir=tmp_path / "run", log_formats=("csv",)).learn()
    steps, returns = zip(*run.eval_history, strict=True)
    assert steps == (30, 60, 90, 120, 150)
    # Before any fit the evaluation acts at random (about -25 per episode); after two fits it plans near the
    # good controller's -3.
    assert returns[0] < -10 and max(returns[2:]) > -6, returns
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["algo"] == "pets" and result["env_steps"] == 150 and result["horizons"] == [8, 8, 8]
    assert result["plan_ms_p50"] > 0 and result["plan_ms_p95"] >= result["plan_ms_p50"]
    progress = (tmp_path / "run" / "progress.csv").read_text()
    assert "eval/mean_reward" in progress and "model/holdout_nmse" in progress and "meta/planning_horizon" in progress


def test_evaluation_does_not_change_training(tmp_path: Path) -> None:
    a = PETS(_tiny(total_steps=100, eval_every=0), run_dir=tmp_path / "a", log_formats=()).learn()
    b = PETS(_tiny(total_steps=100, eval_every=20), run_dir=tmp_path / "b", log_formats=()).learn()
    np.testing.assert_array_equal(a.real.all().action, b.real.all().action)
    # Same seed, same evaluations, including the random-action ones before the first fit (at 20, 40 and 60).
    again = PETS(_tiny(total_steps=100, eval_every=20), run_dir=tmp_path / "c", log_formats=()).learn()
    assert again.eval_history == b.eval_history and len(b.eval_history) == 5


def test_pets_from_env_and_controller_objects_matches_the_id_run(tmp_path: Path) -> None:
    import gymnasium as gym

    import envs  # noqa: F401  (registers rolloutlab/PointMass-v0)
    from meta.control import Fixed

    by_id = PETS(_tiny(total_steps=90, eval_every=45), run_dir=tmp_path / "id", log_formats=()).learn()
    env = gym.make("rolloutlab/PointMass-v0")
    controller = Fixed(8)
    run = PETS(
        _tiny(total_steps=90, eval_every=45, env_id="Pendulum-v1", controller="fixed:3"),
        run_dir=tmp_path / "obj",
        log_formats=(),
        env=env,
        controller=controller,
    )
    assert run.learn() is run
    assert run.env is env and run.driver.controllers == [controller] and run.cfg.env_id == "rolloutlab/PointMass-v0"
    assert run.eval_history == by_id.eval_history and run.driver.schedules == by_id.driver.schedules
    with pytest.raises(ValueError, match="resume"):
        PETS.resume(run.run_dir, controller=Fixed(8))
    resumed = PETS.resume(run.run_dir, env=gym.make("rolloutlab/PointMass-v0"), controller=Fixed(8))
    assert resumed.env_steps == 90 and resumed.eval_history == run.eval_history


def test_stop_at_return_ends_the_run(tmp_path: Path) -> None:
    run = PETS(_tiny(stop_at_return=-1e9), run_dir=tmp_path / "run", log_formats=()).learn()
    assert run.stopped_early and run.env_steps == 30 and len(run.eval_history) == 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"controller": "fixed:0"}, "planning horizon of 0"),
        ({"controller": "uncertainty:90"}, "truncates"),
        ({"env_id": "MountainCarContinuous-v0"}, "no known reward function"),
        ({"optimizer": "adam"}, "unknown optimizer"),
        ({"propagation": "moments"}, "unknown propagation"),
        ({"reward": "learned"}, "unknown reward source"),
        ({"model_train_freq": 0}, "must be >= 1"),
    ],
)
def test_bad_configurations_fail_before_any_work(overrides: dict, message: str, tmp_path: Path) -> None:
    cfg = _tiny(**overrides)
    with pytest.raises(ValueError, match=message):
        check_config(cfg)
    with pytest.raises(ValueError, match=message):
        PETS(cfg, run_dir=tmp_path / "run", log_formats=())
    assert not (tmp_path / "run").exists()


def test_model_reward_plans_without_a_reward_function(tmp_path: Path) -> None:
    run = PETS(
        _tiny(env_id="MountainCarContinuous-v0", reward="model", total_steps=70, eval_every=0),
        run_dir=tmp_path / "run",
        log_formats=(),
    ).learn()
    assert run.env_steps == 70 and run.model_fits == 1


def test_discrete_actions_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="continuous actions"):
        PETS(_tiny(env_id="CartPole-v1", reward="model"), run_dir=tmp_path / "run", log_formats=())


def test_resume_continues_to_the_same_budget(tmp_path: Path) -> None:
    first = PETS(_tiny(total_steps=90), run_dir=tmp_path / "run", log_formats=("csv",))
    first.learn()
    envelope = load_checkpoint(tmp_path / "run" / "checkpoint.pt", kind=CHECKPOINT_KIND)
    assert envelope["state"]["counters"]["env_steps"] == 90
    # Pretend the run was killed at 90 of 150: raise the budget in the saved config and resume.
    config = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert config["total_steps"] == 90
    envelope["config"]["total_steps"] = 150
    from rolloutlab.checkpoint import save_checkpoint

    save_checkpoint(
        tmp_path / "run" / "checkpoint.pt", envelope["state"], kind=CHECKPOINT_KIND, config=envelope["config"]
    )
    resumed = PETS.resume(tmp_path / "run", logger=None)
    assert resumed.env_steps == 90 and resumed.model_fits == first.model_fits
    np.testing.assert_array_equal(resumed.real.all().obs, first.real.all().obs)
    assert resumed.eval_history == first.eval_history and resumed.planner.latencies == first.planner.latencies
    resumed.learn()
    assert resumed.env_steps == 150 and [s for s, _ in resumed.eval_history] == [30, 60, 90, 120, 150]


def test_cli_trains_pets_and_refuses_a_zero_horizon(tmp_path: Path) -> None:
    from rolloutlab.cli import app

    config = tmp_path / "tiny.yaml"
    tiny = _tiny(total_steps=90)
    from rolloutlab.config import to_dict

    values = to_dict(tiny)
    for key in ("env_id", "seed", "controller", "total_steps"):
        values.pop(key)
    config.write_text(yaml.safe_dump(values))
    runner = CliRunner()
    out = tmp_path / "runs"
    common = ["mbrl", "train", "--algo", "pets", "--env", "rolloutlab/PointMass-v0", "--out", str(out)]
    result = runner.invoke(app, [*common, "--steps", "90", "--controller", "fixed:6", "--config", str(config)])
    assert result.exit_code == 0, result.output
    (run_dir,) = out.iterdir()
    assert run_dir.name.startswith("pets-rolloutlab-PointMass-v0__0__")
    saved = json.loads((run_dir / "result.json").read_text())
    assert saved["env_steps"] == 90 and saved["horizons"] == [6]
    bad = runner.invoke(app, [*common, "--controller", "fixed:0", "--config", str(config)])
    assert bad.exit_code == 2 and "planning horizon of 0" in _text(bad.output)
    assert list(out.iterdir()) == [run_dir]  # the refused run left no directory behind
    no_env = runner.invoke(app, ["mbrl", "train", "--algo", "mbpo", "--env", "NoSuchEnv-v0", "--out", str(out)])
    assert no_env.exit_code == 2 and "NoSuchEnv" in _text(no_env.output) and list(out.iterdir()) == [run_dir]
    unknown = runner.invoke(app, ["mbrl", "train", "--algo", "petz"])
    assert unknown.exit_code == 2 and "choose one of dyna, mbpo, pets" in _text(unknown.output)
