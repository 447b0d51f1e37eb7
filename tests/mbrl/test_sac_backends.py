"""The fused SAC backend: SB3's update to float32 rounding, its checkpoints resume bit for bit; bad names and a
missing SBX refused (the SBX backend itself: test_sbx_backend.py)."""

from __future__ import annotations

import copy
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3 import SAC
from stable_baselines3.common.logger import configure
from typer.testing import CliRunner

from mbrl.algorithms import sac_backends
from mbrl.algorithms.mbpo import MBPO, MBPOConfig, SACConfig
from mbrl.algorithms.sac_backends import FusedSAC, make_sac
from mbrl.cli import app
from rolloutlab.run_state import capture_sac, restore_sac


def _filled(backend: str) -> SAC:
    sac = make_sac(
        backend, "MlpPolicy", gym.make("Pendulum-v1"), buffer_size=500, policy_kwargs={"net_arch": [32, 32]}, seed=0
    )
    rng = np.random.default_rng(0)
    for _ in range(300):
        obs, nxt = rng.normal(size=(1, 3)), rng.normal(size=(1, 3))
        sac.replay_buffer.add(obs, nxt, rng.uniform(-2, 2, size=(1, 1)), rng.normal(size=1), np.zeros(1), [{}])
    sac.set_logger(configure(None, []))
    return sac


def _train(sac: SAC, steps: int, seed: int) -> None:
    np.random.seed(seed)  # SB3's buffer samples with numpy's global generator, the actor with torch's
    torch.manual_seed(seed)
    sac.train(gradient_steps=steps, batch_size=64)


def test_fused_backend_makes_sb3s_updates_to_rounding() -> None:
    sb3, fused = _filled("sb3"), _filled("fused")
    assert isinstance(fused, FusedSAC) and type(sb3) is SAC
    assert fused.critic.optimizer.defaults["fused"] and fused.actor.optimizer.defaults["fused"]
    for a, b in zip(sb3.policy.parameters(), fused.policy.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)  # same initialization
    _train(sb3, 10, seed=1)
    _train(fused, 10, seed=1)
    for (name, a), b in zip(sb3.policy.named_parameters(), fused.policy.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
    torch.testing.assert_close(sb3.log_ent_coef, fused.log_ent_coef, rtol=1e-5, atol=1e-6)
    assert sb3._n_updates == fused._n_updates == 10
    # The critics' own gradients are not computed by the actor loss (and the critics stay trainable).
    assert all(p.requires_grad for p in fused.critic.parameters())


def test_fused_backend_resumes_bit_for_bit() -> None:
    run = _filled("fused")
    _train(run, 5, seed=2)
    saved = copy.deepcopy(capture_sac(run))  # as a checkpoint on disk: optimizer states must not alias the run's
    resumed = _filled("fused")
    restore_sac(resumed, saved)
    resumed.replay_buffer = run.replay_buffer
    _train(run, 5, seed=3)
    _train(resumed, 5, seed=3)
    for a, b in zip(run.policy.state_dict().values(), resumed.policy.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_unknown_backend_is_refused_in_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown sac\.backend 'jax'; choose one of sb3, fused, sbx"):
        MBPO(MBPOConfig(total_steps=10, sac=SACConfig(backend="jax")), run_dir=tmp_path, log_formats=("csv",))
    with pytest.raises(ValueError, match=r"unknown sac\.backend"):
        make_sac("jax", "MlpPolicy", gym.make("Pendulum-v1"))


def test_sbx_without_its_extra_is_refused_in_one_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sac_backends, "sbx_available", lambda: False)
    message = r"^sac\.backend 'sbx' needs SBX and JAX, which are not installed here: pip install 'rolloutlab\[sbx\]'$"
    with pytest.raises(ValueError, match=message):
        MBPO(MBPOConfig(total_steps=10, sac=SACConfig(backend="sbx")), run_dir=tmp_path / "run", log_formats=("csv",))
    assert not (tmp_path / "run").exists()  # refused before the run directory is made
    result = CliRunner().invoke(app, ["train", "--sac-backend", "sbx", "--out", str(tmp_path)])
    assert result.exit_code != 0 and "pip install 'rolloutlab[sbx]'" in result.output


def test_cli_sac_backend_flag_is_checked() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["train", "--sac-backend", "jax"])
    assert result.exit_code != 0 and "unknown sac.backend 'jax'" in result.output
    result = runner.invoke(app, ["train", "--algo", "dyna", "--sac-backend", "fused"])
    assert result.exit_code != 0 and "applies to new MBPO runs only" in result.output
