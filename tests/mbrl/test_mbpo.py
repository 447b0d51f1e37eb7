"""MBPO on the point-mass toy: it learns, checkpoints resume exactly, NaN/inf in the model is recovered from."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from mbrl.algorithms.mbpo import CHECKPOINT_KIND, MBPO, MBPOConfig
from mbrl.phases import FEEDBACK_KEYS
from rolloutlab.checkpoint import load_checkpoint
from rolloutlab.config import from_dict


def tiny_config(**overrides: Any) -> MBPOConfig:
    """A point-mass MBPO run small enough for CI (episodes are 30 steps)."""
    values: dict[str, Any] = {
        "env_id": "rolloutlab/PointMass-v0",
        "total_steps": 300,
        "controller": "fixed:3",
        "initial_random_steps": 60,
        "epoch_length": 30,
        "model_train_freq": 30,
        "rollout_batch_size": 400,
        "updates_per_step": 10,
        "eval_every": 30,
        "eval_episodes": 5,
        "checkpoint_every": 0,
        "log_every": 60,
        "sac": {"learning_rate": 1e-3, "batch_size": 128, "net_arch": [64, 64]},
        "model": {
            "ensemble_size": 5,
            "num_elites": 3,
            "hidden_size": 64,
            "num_layers": 2,
            "max_epochs": 30,
            "min_train_steps": 50,
            "patience_steps": 50,
        },
    }
    values.update(overrides)
    return from_dict(MBPOConfig, values)


def test_mbpo_learns_point_mass(tmp_path: Path) -> None:
    run = MBPO(tiny_config(seed=0), run_dir=tmp_path, log_formats=("csv",)).learn()
    returns = [r for _, r in run.eval_history]
    # A random policy scores about -25 per episode; a policy that steers to the origin about -3.
    assert returns[0] < -15
    assert max(returns[-3:]) > -5.0, returns
    assert run.model_fits == (300 - 60) // 30 and run.imagined_total > 0
    assert len(run.model_buffer) > 0 and len(run.real) == 300
    result = (tmp_path / "result.json").read_text()
    assert '"env_steps": 300' in result
    progress = (tmp_path / "progress.csv").read_text().splitlines()[0].split(",")
    assert {"model/holdout_nll", "model/holdout_mse", "meta/rollout_length", "meta/disagreement_h1"} <= set(progress)
    assert {"eval/mean_reward", "model/real_samples", "model/model_samples"} <= set(progress)


def test_resume_continues_exactly(tmp_path: Path) -> None:
    cfg = tiny_config(total_steps=150, checkpoint_every=60, eval_every=30)
    snapshot = tmp_path / "snapshot"

    def keep_step_120(run: MBPO) -> None:
        if run.env_steps == 120:
            shutil.copytree(run.run_dir, snapshot)

    full = MBPO(cfg, run_dir=tmp_path / "full", log_formats=("csv",))
    full.on_step = keep_step_120
    full.learn()
    envelope = load_checkpoint(snapshot / "checkpoint.pt", kind=CHECKPOINT_KIND)
    assert envelope["state"]["counters"]["env_steps"] == 120
    resumed = MBPO.resume(snapshot)
    assert resumed.env_steps == 120 and len(resumed.real) == 120
    resumed.learn()
    assert resumed.env_steps == 150
    assert resumed.eval_history == full.eval_history  # same evaluations before and after the cut
    for key, value in full.sac.policy.state_dict().items():
        torch.testing.assert_close(resumed.sac.policy.state_dict()[key], value)
    np.testing.assert_array_equal(resumed.real.all().obs, full.real.all().obs)


def test_nonfinite_model_is_restored(tmp_path: Path) -> None:
    run = MBPO(tiny_config(total_steps=90), run_dir=tmp_path, log_formats=("csv",)).learn()
    good = {k: v.clone() for k, v in run.model.ensemble.state_dict().items()}
    # 1) Non-finite predictions during rollouts: dropped, and the last good weights come back.
    with torch.no_grad():
        for p in run.model.ensemble.parameters():
            p.fill_(float("nan"))
    original_fit = run.model.fit
    run.model.fit = lambda *a, **k: dict(run.last_model_metrics)  # type: ignore[method-assign]
    run._model_round()
    assert run.nan_restores == 1 and run.last_rollout is not None and run.last_rollout.num_nonfinite > 0
    for key, value in run.model.ensemble.state_dict().items():
        torch.testing.assert_close(value, good[key], equal_nan=False)
    # 2) A non-finite training loss: fit falls back to the last good weights and the driver logs it.
    run.model.fit = original_fit  # type: ignore[method-assign]
    with torch.no_grad():
        for p in run.model.ensemble.parameters():
            p.fill_(float("inf"))
    run._model_round()
    assert run.nan_restores == 2 and run.last_model_metrics["model/restored_after_nan"] == 1.0
    assert all(torch.isfinite(p).all() for p in run.model.ensemble.parameters())


def test_rejects_discrete_actions(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Box action space"):
        MBPO(tiny_config(env_id="CartPole-v1"), run_dir=tmp_path, log_formats=("csv",))


def test_uncertainty_controller_cuts_rollouts_and_feedback_keys(tmp_path: Path) -> None:
    run = MBPO(tiny_config(total_steps=90, controller="uncertainty:50,3"), run_dir=tmp_path, log_formats=("csv",))
    run.learn()
    assert run.rollout_length == 3 and run.last_rollout is not None
    # Half the starts lie above the 50th percentile of the first-step disagreement, so they are cut at once.
    assert run.last_rollout.num_uncertainty_cut >= 400 // 2
    assert len(run.last_rollout.transitions) < 400 * 3
    feedback = run._feedback()
    # MBPO speaks the same feedback vocabulary as Dyna-DQN, model errors included (a learned controller reads both).
    assert set(FEEDBACK_KEYS) <= set(feedback)
    assert all(math.isfinite(feedback[key]) for key in FEEDBACK_KEYS), feedback
    assert len(feedback["disagreement_by_step"]) == len(run.last_rollout.disagreement_by_step)
    assert run.driver.schedules[0] and set(run.driver.schedules[0]) == {3}
