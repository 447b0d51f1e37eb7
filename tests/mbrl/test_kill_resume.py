"""A training run killed with SIGKILL in a subprocess resumes from its last checkpoint to the same final budget."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from typer.testing import CliRunner

from mbrl.algorithms.mbpo import CHECKPOINT_KIND
from mbrl.cli import app
from rolloutlab.checkpoint import load_checkpoint

REPO = Path(__file__).resolve().parents[2]
TINY = {
    "controller": "fixed:2",
    "initial_random_steps": 60,
    "epoch_length": 30,
    "model_train_freq": 30,
    "rollout_batch_size": 200,
    "updates_per_step": 2,
    "eval_every": 60,
    "eval_episodes": 2,
    "log_every": 30,
    "sac": {"batch_size": 64, "net_arch": [32, 32]},
    "model": {"ensemble_size": 3, "num_elites": 2, "hidden_size": 32, "num_layers": 2, "max_epochs": 10},
}


def _train_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "mbrl.cli", "train", *args]


def test_sigkill_then_resume(tmp_path: Path) -> None:
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    out = tmp_path / "runs"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    args = ["--env", "rolloutlab/PointMass-v0", "--steps", "240", "--checkpoint-every", "60", "--seed", "3"]
    proc = subprocess.Popen(
        _train_cmd(*args, "--config", str(config), "--out", str(out)),
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    checkpoint: Path | None = None
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            found = sorted(out.glob("*/checkpoint.pt"))
            if found:
                checkpoint = found[0]
                break
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "training exited early"
            time.sleep(0.2)
        assert checkpoint is not None, "no checkpoint appeared"
        assert proc.poll() is None, "the run finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    run_dir = checkpoint.parent
    killed_at = load_checkpoint(checkpoint, kind=CHECKPOINT_KIND)["state"]["counters"]["env_steps"]
    assert 0 < killed_at < 240 and killed_at % 60 == 0
    assert not (run_dir / "result.json").exists()

    done = subprocess.run(
        _train_cmd("--resume", str(run_dir)), cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["env_steps"] == 240  # the original budget, not 240 more
    assert [s for s, _ in result["eval"]] == [60, 120, 180, 240]
    final = load_checkpoint(run_dir / "checkpoint.pt", kind=CHECKPOINT_KIND)["state"]["counters"]
    assert final["env_steps"] == 240 and final["model_fits"] == (240 - 60) // 30
    assert (run_dir / "progress.1.csv").exists() and (run_dir / "progress.csv").exists()


def test_cli_validates_input(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["train", "--controller", "nonsense:1", "--out", str(tmp_path)])
    assert result.exit_code != 0 and "unknown controller" in result.output
    result = runner.invoke(app, ["train", "--resume", str(tmp_path / "missing")])
    assert result.exit_code != 0 and "checkpoint not found" in result.output
    result = runner.invoke(app, ["train", "--algo", "ppo"])
    assert result.exit_code != 0 and "unknown algorithm" in result.output
