"""The tokenizer's trainer: a smoke run of the whole pipeline, exact resume after an interruption, and loading a
trained tokenizer back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from meta.tokenizer.config import TokenizerConfig, TrainConfig
from meta.tokenizer.evaluate import count_features, error_curves, fit_count_predictor
from meta.tokenizer.halting import ErrorThreshold, LearnedCount, halting_iterations
from meta.tokenizer.trainer import CHECKPOINT_NAME, TokenizerTrainer, learning_rate, load_tokenizer
from rolloutlab.checkpoint import CheckpointError


def tiny_config(steps: int = 6, **changes: object) -> TrainConfig:
    model = TokenizerConfig(
        image_size=8, patch_size=4, d_model=16, n_heads=2, encoder_layers=1, decoder_hidden=32, iterations=3
    )
    fields: dict[str, object] = {
        "steps": steps,
        "batch_size": 8,
        "warmup_steps": 2,
        "shape_images": 64,
        "digit_images": 0,
        "checkpoint_every": 3,
        "log_every": 5,
        "model": model,
    }
    return TrainConfig(**{**fields, **changes})  # type: ignore[arg-type]


def test_learning_rate_warms_up_then_decays_to_a_tenth() -> None:
    cfg = tiny_config(steps=12, lr=1.0, warmup_steps=2)
    assert [learning_rate(s, cfg) for s in (0, 1)] == [0.5, 1.0]
    assert learning_rate(2, cfg) == pytest.approx(1.0)
    assert learning_rate(12, cfg) == pytest.approx(0.1)


def test_smoke_pipeline_trains_evaluates_and_halts(tmp_path: Path) -> None:
    trainer = TokenizerTrainer(tiny_config(steps=30), tmp_path / "run")
    result = trainer.learn()
    assert result["steps"] == 30 and result["train_seconds"] > 0
    assert (tmp_path / "run" / CHECKPOINT_NAME).exists() and (tmp_path / "run" / "progress.csv").exists()
    first, last = trainer.history[0], trainer.history[-1]
    assert last["mse_first"] < first["mse_first"]  # it learns something in 30 steps
    model, config = load_tokenizer(tmp_path / "run" / CHECKPOINT_NAME)
    images = trainer.images[:16].numpy()
    errors = error_curves(model, images)
    assert errors.shape == (16, 3) and np.isfinite(errors).all()
    threshold = float(np.median(errors[:, 1]))
    predictor = fit_count_predictor(images, errors, threshold)
    learned = halting_iterations(LearnedCount(predictor), errors, count_features(images, errors[:, 0]))
    by_rule = halting_iterations(ErrorThreshold(threshold, 3), errors)
    assert set(learned.tolist()) <= {1, 2, 3} and set(by_rule.tolist()) <= {1, 2, 3}
    assert config == trainer.config


def _parameters(trainer: TokenizerTrainer) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in trainer.model.state_dict().items()}


def test_a_killed_run_resumes_to_identical_parameters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    straight = TokenizerTrainer(tiny_config(steps=6), tmp_path / "straight")
    straight.learn()

    # The interrupted run dies right after its first checkpoint (step 3 of 6).
    class Killed(Exception):
        pass

    original_save = TokenizerTrainer.save

    def save_then_die(self: TokenizerTrainer, path: Path) -> Path:
        original_save(self, path)
        raise Killed

    monkeypatch.setattr(TokenizerTrainer, "save", save_then_die)
    with pytest.raises(Killed):
        TokenizerTrainer(tiny_config(steps=6), tmp_path / "killed").learn()
    monkeypatch.setattr(TokenizerTrainer, "save", original_save)

    resumed = TokenizerTrainer(tiny_config(steps=6), tmp_path / "killed")
    assert resumed.step == 3
    resumed.learn()
    assert resumed.step == 6
    expected, got = _parameters(straight), _parameters(resumed)
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.equal(expected[name], got[name]), name


def test_loading_another_kind_of_checkpoint_is_refused(tmp_path: Path) -> None:
    from rolloutlab.checkpoint import save_checkpoint

    path = save_checkpoint(tmp_path / "other.pt", {"x": 1}, kind="incontext-agent")
    with pytest.raises(CheckpointError, match="expected 'adaptive-tokenizer'"):
        load_tokenizer(path)
