"""``rolloutlab rlvr train`` in a run directory: SIGKILL, then ``--resume`` ends bit-identical to a straight run."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from kill_resume import assert_same, only_run_dir
from typer.testing import CliRunner

from meta.rlvr.cli import app
from meta.rlvr.lm.charlm import CharLMConfig
from meta.rlvr.trainers.run import CHECKPOINT_KIND, CHECKPOINT_NAME
from meta.rlvr.trainers.sft import SFTConfig, train_sft
from rolloutlab.checkpoint import load_checkpoint, save_checkpoint

REPO = Path(__file__).resolve().parents[2]
TINY = CharLMConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2)
STEPS = 24
EVERY = 4


@pytest.fixture(scope="module")
def sft_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model warm-started on 1-digit multiplication, so GRPO's groups are mixed and the weights move."""
    path = tmp_path_factory.mktemp("sft") / "sft.pt"
    cfg = SFTConfig(
        steps=150,
        batch_size=32,
        lr=1e-2,
        families=["mul"],
        difficulties=[1],
        difficulty_weights=[1.0],
        eval_per_difficulty=5,
        model=TINY,
    )
    train_sft(cfg, out_path=path, log=None)
    return path


def _preset(tmp_path: Path, sft: Path) -> Path:
    preset = {
        "sft_checkpoint": str(sft),
        "allocator": "ar3po:2,3",  # stages and the response buffer are part of the state
        "steps": STEPS,
        "eval_every": EVERY,
        "checkpoint_every": EVERY,
        "pool_size": 16,
        "held_out_size": 20,
        "families": ["mul"],
        "difficulties": [1],
        "grpo": {"prompts_per_step": 4, "lr": 3e-3, "max_new_tokens": 4},
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(preset))
    return path


def _train(*args: str) -> Any:
    result = CliRunner().invoke(app, ["train", "--no-progress", *args])
    assert result.exit_code == 0, result.output
    return result


def test_sigkill_then_resume_matches_uninterrupted_run(tmp_path: Path, sft_checkpoint: Path) -> None:
    preset = _preset(tmp_path, sft_checkpoint)
    _train("--config", str(preset), "--out", str(tmp_path / "straight"))
    straight = only_run_dir(tmp_path / "straight")

    killed_root = tmp_path / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "rolloutlab.cli", "rlvr", "train", "--no-progress"]
    proc = subprocess.Popen(
        [*command, "--config", str(preset), "--out", str(killed_root)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not list(killed_root.glob(f"*/{CHECKPOINT_NAME}")):
            assert proc.poll() is None, "training exited before its first checkpoint"
            assert time.monotonic() < deadline, "no checkpoint appeared"
            time.sleep(0.01)
        time.sleep(0.1)  # into the next interval: the steps after the checkpoint are lost and redone
        assert proc.poll() is None, "the run finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    killed = only_run_dir(killed_root)
    assert not (killed / "result.json").exists()
    at_kill = load_checkpoint(killed / CHECKPOINT_NAME, kind=CHECKPOINT_KIND)["state"]
    killed_at = at_kill["trainer"]["num_steps"]
    assert 0 < killed_at < STEPS and killed_at % EVERY == 0

    resumed = _train("--resume", str(killed))
    assert f"resumed {killed} at step {killed_at} of {STEPS}" in resumed.output

    a = load_checkpoint(straight / CHECKPOINT_NAME, kind=CHECKPOINT_KIND)
    b = load_checkpoint(killed / CHECKPOINT_NAME, kind=CHECKPOINT_KIND)
    assert a["config"] == b["config"]
    # Model, optimizer, RNGs, prompt order, statistics, buffer, costs and the evaluation curve: all bit-identical.
    assert_same(a["state"]["trainer"], b["state"]["trainer"], "trainer")
    assert_same(a["state"]["evals"], b["state"]["evals"], "evals")
    assert b["state"]["sessions"] == 2 and a["state"]["sessions"] == 1
    assert b["state"]["trainer"]["buffer"]["store"], "the run never stored a correct response"
    start = load_checkpoint(sft_checkpoint)["state"]["model"]
    final = b["state"]["trainer"]["model"]
    assert any(not torch.equal(start[k], final[k]) for k in start), "GRPO never changed the weights"

    ra, rb = (json.loads((d / "result.json").read_text()) for d in (straight, killed))
    timing = ("wall_seconds", "sessions")
    assert {k: v for k, v in ra.items() if k not in timing} == {k: v for k, v in rb.items() if k not in timing}
    assert [p["step"] for p in rb["evals"]] == list(range(0, STEPS + 1, EVERY))
    # One progress.csv, continued from the checkpoint: every step once, in order.
    assert sorted(p.name for p in killed.glob("progress*.csv")) == ["progress.csv"]
    with (killed / "progress.csv").open() as f:
        steps = [int(float(row["step"])) for row in csv.DictReader(f)]
    assert steps == sorted(set(steps)) and steps[0] == 0 and steps[-1] == STEPS


def _refused(*args: str) -> str:
    """Invoke ``train`` expecting a usage error; its message with the error box's borders and line breaks removed."""
    result = CliRunner().invoke(app, ["train", *args])
    assert result.exit_code == 2, result.output
    return " ".join(result.output.replace("│", " ").split())


def test_resume_refuses_what_is_not_an_rlvr_run(tmp_path: Path) -> None:
    assert "run directory not found" in _refused("--resume", str(tmp_path / "missing"))
    assert "is not an rlvr train run: it has neither checkpoint.pt nor config.yaml" in _refused(
        "--resume", str(tmp_path)
    )
    other = tmp_path / "mbpo"
    save_checkpoint(other / CHECKPOINT_NAME, {"counters": {}}, kind="mbpo-run")
    assert "holds a 'mbpo-run' checkpoint, expected 'rlvr-grpo-run'" in _refused("--resume", str(other))

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "config.yaml").write_text(yaml.safe_dump({"env_id": "Pendulum-v1", "total_steps": 10}))
    assert "is not an rlvr train run" in _refused("--resume", str(foreign))
    assert "drop --steps" in _refused("--resume", str(foreign), "--steps", "5")


def test_resume_before_the_first_checkpoint_and_of_a_finished_run(tmp_path: Path, sft_checkpoint: Path) -> None:
    preset = _preset(tmp_path, sft_checkpoint)
    _train("--config", str(preset), "--out", str(tmp_path / "a"), "--steps", "3", "--checkpoint-every", "0")
    run_dir = only_run_dir(tmp_path / "a")
    saved = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    _train("--resume", str(run_dir))  # finished: nothing changes
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == saved

    # A run killed before its first checkpoint has only config.yaml: it starts over and ends like the first one.
    fresh = tmp_path / "b" / run_dir.name
    fresh.mkdir(parents=True)
    (fresh / "config.yaml").write_bytes(saved["config.yaml"])
    _train("--resume", str(fresh))
    a = load_checkpoint(run_dir / CHECKPOINT_NAME, kind=CHECKPOINT_KIND)["state"]
    b = load_checkpoint(fresh / CHECKPOINT_NAME, kind=CHECKPOINT_KIND)["state"]
    assert_same(a["trainer"], b["trainer"], "trainer")
