"""``rolloutlab tokenizer``: train from a preset, resume the run directory with a larger budget, evaluate a halting
controller, and refuse bad input in one line."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from meta.tokenizer.trainer import CHECKPOINT_NAME
from rolloutlab.checkpoint import load_checkpoint
from rolloutlab.cli import app

runner = CliRunner(env={"COLUMNS": "250"})  # wide enough that a refusal's sentence is not wrapped

PRESET = {
    "steps": 4,
    "batch_size": 8,
    "warmup_steps": 1,
    "shape_images": 32,
    "digit_images": 0,
    "checkpoint_every": 2,
    "model": {"image_size": 8, "patch_size": 4, "d_model": 16, "n_heads": 2, "encoder_layers": 1, "iterations": 3},
}


def test_help_lists_the_commands() -> None:
    result = runner.invoke(app, ["tokenizer", "--help"])
    assert result.exit_code == 0
    assert "train" in result.stdout and "eval" in result.stdout


def test_train_resume_and_eval(tmp_path: Path) -> None:
    preset = tmp_path / "tiny.yaml"
    preset.write_text(yaml.safe_dump(PRESET))
    run_dir = tmp_path / "run"
    result = runner.invoke(app, ["tokenizer", "train", "--config", str(preset), "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert "tokenizer: 4 steps" in result.stdout
    # Re-running the run directory with a larger budget resumes it from its checkpoint.
    result = runner.invoke(app, ["tokenizer", "train", "--run-dir", str(run_dir), "--steps", "6"])
    assert result.exit_code == 0, result.output
    assert f"resumed {run_dir} at step 4 of 6" in result.stdout
    assert load_checkpoint(run_dir / CHECKPOINT_NAME)["state"]["step"] == 6
    checkpoint = str(run_dir / CHECKPOINT_NAME)
    result = runner.invoke(app, ["tokenizer", "eval", checkpoint, "--halting", "halt_fixed:2", "--images", "20"])
    assert result.exit_code == 0, result.output
    # Two iterations of 2 tokens each: every image gets 4 tokens.
    assert "halt_fixed:2: 4.00 tokens per image" in result.stdout


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["tokenizer", "eval", str(tmp_path / "none.pt"), "--halting", "fixed:2"])
    assert result.exit_code == 2
    assert "'fixed' is a rollout-length controller spec, not a tokenizer halting controller" in result.output
    result = runner.invoke(app, ["tokenizer", "eval", str(tmp_path / "none.pt"), "--halting", "halt_fixed:2"])
    assert result.exit_code == 2
    assert "checkpoint not found" in result.output
