"""The public API: root imports, learners built from env and controller objects as well as strings, Dyna-DQN's run
class (learn returns the run, save / resume round trip, a run stopped and resumed ends as the uninterrupted one)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import torch
from gymnasium.envs.classic_control import CartPoleEnv

import envs  # noqa: F401  (registers rolloutlab/PointMass-v0)
from mbrl import MBPO, DynaConfig, DynaDQN, MBPOConfig
from mbrl.algorithms.base import CHECKPOINT_NAME
from mbrl.models import ModelConfig
from meta.control import Fixed
from rolloutlab.checkpoint import load_checkpoint
from rolloutlab.config import from_dict

REPO = Path(__file__).resolve().parents[2]


def test_root_names_resolve_lazily() -> None:
    """``import mbrl`` / ``planning.mpc`` / ``planning.wordle`` load no torch; each public name is its home's class."""
    code = (
        "import sys, mbrl, planning.mpc, planning.wordle\n"
        "assert 'torch' not in sys.modules and 'stable_baselines3' not in sys.modules, 'eager import'\n"
        "assert 'planning.wordle.solver' not in sys.modules\n"
        "from mbrl import MBPO, MBPOConfig, DynaDQN, DynaConfig, DynamicsModel, ModelEnv, RolloutLengthDriver\n"
        "from mbrl.algorithms.dyna.run import DynaDQN as home\n"
        "assert DynaDQN is home and MBPO.__module__ == 'mbrl.algorithms.mbpo'\n"
        "from planning.mpc import PETS, PETSConfig\n"
        "from planning.wordle import Assistant, SolverConfig, WordleSolver, feedback\n"
        "assert feedback('salet', 'crane') == (0, 1, 0, 1, 0)\n"
        "print(sorted(mbrl.__all__))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    with pytest.raises(AttributeError):
        import mbrl

        _ = mbrl.NotAName  # type: ignore[attr-defined]


# --- MBPO -------------------------------------------------------------------------------------------------------


def _mbpo_cfg(**overrides: Any) -> MBPOConfig:
    values: dict[str, Any] = {
        "env_id": "rolloutlab/PointMass-v0",
        "total_steps": 120,
        "controller": "fixed:2",
        "initial_random_steps": 60,
        "epoch_length": 30,
        "model_train_freq": 30,
        "rollout_batch_size": 50,
        "updates_per_step": 1,
        "eval_every": 60,
        "eval_episodes": 1,
        "checkpoint_every": 0,
        "log_every": 60,
        "sac": {"batch_size": 32, "net_arch": [16, 16]},
        "model": {"ensemble_size": 2, "num_elites": 2, "hidden_size": 16, "num_layers": 2, "max_epochs": 2},
    }
    values.update(overrides)
    return from_dict(MBPOConfig, values)


def test_mbpo_from_env_and_controller_objects_matches_the_id_run(tmp_path: Path) -> None:
    by_id = MBPO(_mbpo_cfg(), run_dir=tmp_path / "id", log_formats=())
    assert by_id.learn() is by_id
    env = gym.make("rolloutlab/PointMass-v0")
    run = MBPO(_mbpo_cfg(env_id="Pendulum-v1"), run_dir=tmp_path / "obj", log_formats=(), env=env, controller=Fixed(2))
    assert run.learn() is run
    assert run.env is env and run.cfg.env_id == "rolloutlab/PointMass-v0" and run.cfg.controller == "Fixed(2)"
    # The object path trains and evaluates on the same envs as the id path, so the numbers are the same.
    assert run.eval_history == by_id.eval_history and run.episode_returns == by_id.episode_returns

    state = load_checkpoint(run.run_dir / CHECKPOINT_NAME, kind=MBPO.checkpoint_kind)["state"]
    assert state["given_objects"] == ["env", "controller"]
    with pytest.raises(ValueError, match=r"resume\(run_dir, env=\.\.\., controller=\.\.\.\)"):
        MBPO.resume(run.run_dir)
    resumed = MBPO.resume(run.run_dir, env=gym.make("rolloutlab/PointMass-v0"), controller=Fixed(2))
    assert resumed.env_steps == 120 and resumed.eval_history == run.eval_history


def test_an_env_gym_cannot_make_again_needs_an_eval_env(tmp_path: Path) -> None:
    from gymnasium.envs.classic_control import PendulumEnv

    with pytest.raises(ValueError, match="eval_env="):
        MBPO(_mbpo_cfg(), run_dir=tmp_path / "refused", log_formats=(), env=PendulumEnv())
    assert not (tmp_path / "refused").exists()
    run = MBPO(
        _mbpo_cfg(total_steps=60, eval_every=60),
        run_dir=tmp_path / "run",
        log_formats=(),
        env=gym.wrappers.TimeLimit(PendulumEnv(), 50),
        eval_env=gym.wrappers.TimeLimit(PendulumEnv(), 50),
    ).learn()
    assert run.cfg.env_id == "PendulumEnv" and len(run.eval_history) == 1


# --- Dyna-DQN ---------------------------------------------------------------------------------------------------


def _dyna_cfg(**overrides: Any) -> DynaConfig:
    values: dict[str, Any] = {
        "budget": 400,
        "phase_length": 200,
        "learning_starts": 100,
        "buffer_size": 1000,
        "train_freq": 4,
        "gradient_steps": 1,
        "target_update_interval": 50,
        "net_arch": [16, 16],
        "num_model_rollouts": 20,
        "model_train_freq": 100,
        "rollout_freq": 50,
        "eval_episodes": 1,
        "model": ModelConfig(ensemble_size=2, num_elites=2, hidden_size=16, num_layers=2, max_epochs=2),
    }
    values.update(overrides)
    return DynaConfig.for_env("CartPole-v1", **values)


def _q(run: DynaDQN) -> list[torch.Tensor]:
    return [p.detach().clone() for p in run.learner.q.parameters()]


def test_dyna_from_env_and_controller_objects_matches_the_id_run(tmp_path: Path) -> None:
    by_id = DynaDQN("CartPole-v1", _dyna_cfg(), seed=3, controller="fixed:2", run_dir=tmp_path / "id", log_formats=())
    assert by_id.learn() is by_id
    env = gym.make("CartPole-v1")
    run = DynaDQN(env, _dyna_cfg(), seed=3, controller=Fixed(2), run_dir=tmp_path / "obj", log_formats=())
    assert run.learn() is run
    assert run.learner.envs[0] is env and run.env_id == "CartPole-v1" and run.controller_spec == "Fixed(2)"
    assert run.eval_history == by_id.eval_history and len(run.eval_history) == 2
    assert all(torch.equal(a, b) for a, b in zip(_q(run), _q(by_id), strict=True))
    assert (run.run_dir / "result.json").exists() and (run.run_dir / "config.yaml").exists()

    with pytest.raises(ValueError, match=r"resume\(run_dir, env=\.\.\., controller=\.\.\.\)"):
        DynaDQN.resume(run.run_dir)
    with pytest.raises(ValueError, match=r"pass cfg=DynaConfig"):
        DynaDQN("Pendulum-v1", run_dir=tmp_path / "refused")


def test_dyna_save_and_resume_round_trip_and_a_stopped_run_ends_as_the_uninterrupted_one(tmp_path: Path) -> None:
    whole = DynaDQN("CartPole-v1", _dyna_cfg(), seed=5, run_dir=tmp_path / "whole", log_formats=()).learn()

    stopped = DynaDQN(gym.make("CartPole-v1"), _dyna_cfg(), seed=5, run_dir=tmp_path / "stopped", log_formats=())

    def stop(run: DynaDQN) -> None:
        run.stop_requested = True

    stopped.on_phase = stop
    stopped.learn()
    assert stopped.env_steps == 200
    # Round trip: the resumed run holds what was saved.
    resumed = DynaDQN.resume(stopped.run_dir, env=gym.make("CartPole-v1"))
    assert resumed.env_steps == 200 and resumed.eval_history == stopped.eval_history
    assert all(torch.equal(a, b) for a, b in zip(_q(resumed), _q(stopped), strict=True))
    assert resumed.learn() is resumed
    assert resumed.eval_history == whole.eval_history and resumed.episodes == whole.episodes
    assert all(torch.equal(a, b) for a, b in zip(_q(resumed), _q(whole), strict=True))


def test_a_dyna_run_from_an_env_without_spec_evaluates_on_eval_env(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="eval_env="):
        DynaDQN(CartPoleEnv(), _dyna_cfg(), run_dir=tmp_path / "refused", log_formats=())
    assert not (tmp_path / "refused").exists()
    eval_env = gym.wrappers.TimeLimit(CartPoleEnv(), 500)
    run = DynaDQN(
        gym.wrappers.TimeLimit(CartPoleEnv(), 500),
        _dyna_cfg(budget=200),
        eval_env=eval_env,
        run_dir=tmp_path / "run",
        log_formats=(),
    ).learn()
    assert run.env_id == "CartPoleEnv" and len(run.eval_history) == 1
    eval_env.reset(seed=0)  # evaluations left it open
