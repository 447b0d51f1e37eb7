"""'It learns' tier (slow): the warm start reaches a mixed solve rate, and GRPO then raises held-out accuracy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from envs.reasoning import make_prompt_set
from meta.rlvr import Uniform
from meta.rlvr.lm.charlm import load_model
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.grpo import GRPOTrainer
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.sft import SFTConfig, train_sft


@pytest.mark.slow
def test_sft_then_grpo_learns(tmp_path: Path) -> None:
    ckpt = tmp_path / "sft.pt"
    _, metrics = train_sft(SFTConfig(steps=1500), out_path=ckpt, log=None)
    sampled = metrics["sampled"]
    assert 0.15 <= sampled["overall"] <= 0.6  # mixed overall ...
    assert sampled["add/1"] > 0.5 and sampled["add/4"] < 0.2  # ... and varying with difficulty

    model, _, _ = load_model(ckpt)
    pool = make_prompt_set(256, np.random.default_rng(1), difficulties=[1, 2, 3])
    held_out = make_prompt_set(600, np.random.default_rng(2), difficulties=[1, 2, 3])
    # The trainer's defaults: four minibatch steps per generated batch (the clip acts) at the rate sized for them.
    trainer = GRPOTrainer(model, CharVocab(), pool, Uniform(8), GRPOConfig(seed=0))
    start = trainer.evaluate(held_out)
    for _ in range(75):
        trainer.step()
    assert trainer.evaluate(held_out) >= start + 0.02
