"""``examples/trl_adaptive_grpo.py`` runs as documented (a few steps), with AR3PO and with uniform G."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from script_modules import load_script

pytest.importorskip("trl")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trl_adaptive_grpo.py"


@pytest.mark.parametrize("allocator", ["ar3po:2,4", "uniform:4"])
def test_the_trl_example_runs_and_saves_its_result(tmp_path: Path, allocator: str) -> None:
    example = load_script(EXAMPLE)
    args = example.Args(
        allocator=allocator,
        max_steps=2,
        prompts_per_step=4,
        num_generations=4,
        train_prompts=8,
        held_out_prompts=8,
        sft_steps=10,
        output_dir=str(tmp_path / "run"),
    )
    result = example.main(args)
    saved = json.loads((tmp_path / "run" / "result.json").read_text())
    assert saved["ledger"] == result["ledger"]
    ledger = result["ledger"]
    assert ledger["rows_trained"] == ledger["responses"] + ledger["reused_responses"] - ledger["dropped_responses"]
    if allocator.startswith("uniform"):
        assert ledger["responses"] == 2 * 4 * 4
    else:
        assert 2 * 4 * 2 <= ledger["responses"] <= 2 * 4 * 8
    assert 0.0 <= result["held_out_accuracy"]["after"] <= 1.0
