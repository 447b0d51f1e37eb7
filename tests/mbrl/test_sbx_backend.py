"""The SBX SAC backend (the optional ``sbx`` extra): MBPO trains and resumes exactly on it, every update gets its own
mixed batch, batched prediction pads without changing actions, and its state is plain data."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

pytest.importorskip("sbx")

from mbrl.algorithms.mbpo import CHECKPOINT_KIND, MBPO
from mbrl.algorithms.sac_backends import learner_state, load_learner_state
from mbrl.algorithms.sbx_backend import SBXSAC, padded_rows
from mbrl.buffers import MixedReplayBuffer
from mbrl.cli import app
from rolloutlab.checkpoint import load_checkpoint
from tests.mbrl.test_mbpo import tiny_config

SBX_SAC = {"learning_rate": 1e-3, "batch_size": 128, "net_arch": [64, 64], "backend": "sbx"}


def _flat(state: dict[str, Any]) -> dict[str, Any]:
    return {f"{name}/{key}": value for name, part in state.items() for key, value in part.items()}


def test_mbpo_on_sbx_resumes_exactly(tmp_path: Path) -> None:
    cfg = tiny_config(total_steps=150, checkpoint_every=60, eval_every=30, sac=SBX_SAC)
    snapshot = tmp_path / "snapshot"

    def keep_step_120(run: MBPO) -> None:
        if run.env_steps == 120:
            shutil.copytree(run.run_dir, snapshot)

    full = MBPO(cfg, run_dir=tmp_path / "full", log_formats=("csv",))
    assert isinstance(full.sac, SBXSAC)
    full.on_step = keep_step_120
    full.learn()
    saved = load_checkpoint(snapshot / "checkpoint.pt", kind=CHECKPOINT_KIND)["state"]["sac"]["sbx"]
    assert all(
        isinstance(v, torch.Tensor) for v in _flat({k: v for k, v in saved.items() if isinstance(v, dict)}).values()
    )
    resumed = MBPO.resume(snapshot)
    assert resumed.env_steps == 120
    resumed.learn()
    assert resumed.eval_history == full.eval_history
    np.testing.assert_array_equal(resumed.real.all().obs, full.real.all().obs)
    np.testing.assert_array_equal(resumed.model_buffer.all().obs, full.model_buffer.all().obs)
    a, b = full.sac.state_dict(), resumed.sac.state_dict()
    assert a["n_updates"] == b["n_updates"] == (150 - 60) * 10
    for key, value in _flat({k: v for k, v in a.items() if isinstance(v, dict)}).items():
        name, path = key.split("/", 1)
        assert torch.equal(value, b[name][path]), key
    # The TD-error feedback reads the critics through the backend.
    assert math.isfinite(full._td_error())


def test_each_update_draws_its_own_mixed_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = MBPO(tiny_config(total_steps=90, sac=SBX_SAC), run_dir=tmp_path, log_formats=("csv",)).learn()
    assert len(run.model_buffer) > 0
    drawn: list[int] = []
    original = MixedReplayBuffer.sample_arrays

    def spy(self: MixedReplayBuffer, batch_size: int) -> Any:
        drawn.append(batch_size)
        return original(self, batch_size)

    monkeypatch.setattr(MixedReplayBuffer, "sample_arrays", spy)
    before = run.sac._n_updates
    run.sac.train(gradient_steps=4, batch_size=128)
    # SBX's own train draws all 4 x 128 rows in one call, which would put the real rows into the first update only.
    assert drawn == [128] * 4 and run.sac._n_updates == before + 4


def test_batched_predict_pads_without_changing_actions(tmp_path: Path) -> None:
    assert [padded_rows(n) for n in (0, 1, 3, 4096, 4097, 10_000)] == [0, 1, 4, 4096, 8192, 12_288]
    run = MBPO(tiny_config(total_steps=10, sac=SBX_SAC), run_dir=tmp_path, log_formats=("csv",))
    obs = np.random.default_rng(0).normal(size=(8, run.obs_dim)).astype(np.float32)
    five, _ = run.sac.predict(obs[:5], deterministic=True)
    eight, _ = run.sac.predict(obs, deterministic=True)
    assert five.shape == (5, run.act_dim)
    np.testing.assert_array_equal(five, eight[:5])


def test_learner_state_refuses_the_other_backend(tmp_path: Path) -> None:
    sbx_run = MBPO(tiny_config(total_steps=10, sac=SBX_SAC), run_dir=tmp_path / "a", log_formats=("csv",))
    sb3_run = MBPO(tiny_config(total_steps=10), run_dir=tmp_path / "b", log_formats=("csv",))
    with pytest.raises(ValueError, match=r"saved on sac\.backend 'sbx'"):
        load_learner_state(sb3_run.sac, learner_state(sbx_run.sac))
    with pytest.raises(ValueError, match="this run's backend is 'sbx'"):
        load_learner_state(sbx_run.sac, learner_state(sb3_run.sac))


def test_cli_trains_mbpo_on_sbx(tmp_path: Path) -> None:
    config = tmp_path / "tiny.yaml"
    config.write_text("initial_random_steps: 20\nrollout_batch_size: 50\nupdates_per_step: 1\neval_every: 0\n")
    args = ["train", "--env", "rolloutlab/PointMass-v0", "--steps", "40", "--config", str(config)]
    result = CliRunner().invoke(app, [*args, "--sac-backend", "sbx", "--out", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert "backend: sbx" in (run_dir / "config.yaml").read_text()
