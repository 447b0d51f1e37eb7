"""Kill-and-resume of ``rolloutlab rlvr train`` in a subprocess: SIGKILL after the first checkpoint, ``--resume``, and
the two runs' final checkpoints side by side (the pattern of ``tests/rlvr/test_rlvr_resume.py``, shared by the
guidance tests).

Importable from every test as ``kill_resume``: pytest puts ``tests/`` on ``sys.path`` for ``tests/conftest.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch
from typer.testing import CliRunner

from meta.rlvr.cli import app
from meta.rlvr.trainers.run import CHECKPOINT_KIND, CHECKPOINT_NAME
from rolloutlab.checkpoint import load_checkpoint

REPO = Path(__file__).resolve().parents[1]


def tiny_mul_sft(path: Path) -> Path:
    """A one-layer model warm-started for 60 steps on 1-digit multiplication (groups mixed, some all wrong)."""
    from meta.rlvr.lm.charlm import CharLMConfig
    from meta.rlvr.trainers.sft import SFTConfig, train_sft

    model = CharLMConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2)
    cfg = SFTConfig(
        steps=60,
        batch_size=32,
        lr=1e-2,
        families=["mul"],
        difficulties=[1],
        difficulty_weights=[1.0],
        eval_per_difficulty=2,
        model=model,
    )
    train_sft(cfg, out_path=path, log=None)
    return path


def guided_preset(path: Path, sft: Path, spec: str, steps: int, families: list[str]) -> Path:
    """A tiny ``GRPORunConfig`` preset with guidance ``spec``, checkpointed every 4 steps, written to ``path``."""
    import yaml

    preset = {
        "sft_checkpoint": str(sft),
        "guidance": spec,
        "steps": steps,
        "eval_every": 4,
        "checkpoint_every": 4,
        "pool_size": 12,
        "held_out_size": 8,
        "families": families,
        "difficulties": [1],
        "grpo": {"prompts_per_step": 4, "lr": 3e-3, "max_new_tokens": 6},
    }
    path.write_text(yaml.safe_dump(preset))
    return path


def assert_same(a: Any, b: Any, where: str = "state") -> None:
    """Recursive bit-equality of two checkpoint states (tensors with ``torch.equal``)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def only_run_dir(root: Path) -> Path:
    """The one run folder an ``--out`` root holds."""
    (run_dir,) = [p for p in root.iterdir() if p.is_dir()]
    return run_dir


def kill_and_resume(tmp_path: Path, preset: Path, steps: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Train ``preset`` straight, and again killed with SIGKILL after its first checkpoint then resumed.

    Returns:
        The two final checkpoint envelopes ``(straight, resumed)``; asserts the kill happened mid-run and the resume
        went through.
    """
    result = CliRunner().invoke(app, ["train", "--no-progress", "--config", str(preset), "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    killed_root = tmp_path / "b"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "rolloutlab.cli", "rlvr", "train", "--no-progress", "--config", str(preset)]
    proc = subprocess.Popen(
        [*command, "--out", str(killed_root)], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 120
        while not list(killed_root.glob(f"*/{CHECKPOINT_NAME}")):
            assert proc.poll() is None, "training exited before its first checkpoint"
            assert time.monotonic() < deadline, "no checkpoint appeared"
            time.sleep(0.01)
        time.sleep(0.05)
        assert proc.poll() is None, "the run finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    killed = only_run_dir(killed_root)
    killed_at = load_checkpoint(killed / CHECKPOINT_NAME, kind=CHECKPOINT_KIND)["state"]["trainer"]["num_steps"]
    assert 0 < killed_at < steps
    result = CliRunner().invoke(app, ["train", "--no-progress", "--resume", str(killed)])
    assert result.exit_code == 0, result.output
    assert f"resumed {killed} at step {killed_at} of {steps}" in result.output
    straight = load_checkpoint(only_run_dir(tmp_path / "a") / CHECKPOINT_NAME, kind=CHECKPOINT_KIND)
    resumed = load_checkpoint(killed / CHECKPOINT_NAME, kind=CHECKPOINT_KIND)
    return straight, resumed
