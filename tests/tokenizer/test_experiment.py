"""The adaptive-length experiment end to end at a toy size: both trainings, the held-out measures, the JSON and the
two pictures."""

from __future__ import annotations

import json
from pathlib import Path

from experiments.tokenizer.adaptive_length import Args, main


def test_experiment_writes_its_json_and_pictures(tmp_path: Path) -> None:
    args = Args(
        steps=3,
        fixed_steps=2,
        batch_size=8,
        iterations=3,
        budget=2,
        d_model=16,
        encoder_layers=1,
        decoder_hidden=32,
        shape_images=48,
        digit_images=0,
        held_out_shapes=40,
        calibration_images=24,
        bootstrap_resamples=200,
        run_root=str(tmp_path / "runs"),
        out=str(tmp_path / "results" / "adaptive_length.json"),
    )
    result = main(args)
    saved = json.loads((tmp_path / "results" / "adaptive_length.json").read_text())
    assert saved["token_counts"] == [2, 4, 6]
    assert saved["headline"]["budget_tokens"] == 4
    # Rate control keeps the adaptive arm within the budget, and the fixed arm sits exactly on it.
    assert saved["headline"]["adaptive"]["mean_iterations"] <= 2.0
    assert saved["headline"]["fixed"]["mean_iterations"] == 2.0
    assert [b["budget_iterations"] for b in saved["budgets"]] == [1, 2]
    low, high = saved["headline"]["versus_best_fixed"]["interval"]
    assert low <= saved["headline"]["versus_best_fixed"]["difference"] <= high
    assert set(saved["targets"]) == {"spearman_at_least_0.6", "adaptive_below_best_fixed"}
    assert (tmp_path / "results" / "adaptive_length.png").stat().st_size > 0
    assert (tmp_path / "results" / "adaptive_length_examples.png").stat().st_size > 0
    assert (tmp_path / "results" / "adaptive_length_predictor.json").exists()
    assert (tmp_path / "results" / "adaptive_length.md").read_text().count("\n") == 4  # header, rule, 2 budgets
    assert result["training"]["adaptive_steps"] == 3 and result["training"]["fixed_steps"] == 2
