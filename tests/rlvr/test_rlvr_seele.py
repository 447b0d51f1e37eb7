"""SEELE: the item-response curve fitted on hand-computed points, the chosen hint length, the per-prompt memory, the
trainer's rounds, the spec, and kill-and-resume through the CLI."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from kill_resume import assert_same, guided_preset, kill_and_resume, tiny_mul_sft
from tiny_grpo import TINY_LM, resumed_alongside

from envs.reasoning import make_prompt_set
from meta.rlvr import Uniform
from meta.rlvr.guidance import make_guidance, split_evenly
from meta.rlvr.guidance.seele import SEELE, choose_hint_length, curve, fit_curve
from meta.rlvr.lm.charlm import build_model
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.grpo import GRPOTrainer
from meta.rlvr.trainers.grpo_config import GRPOConfig


def test_fitted_curve_hand_case() -> None:
    # 1 of 4 right without a hint, 3 of 4 with the whole answer: the maximum-likelihood logistic passes through both,
    # w0 = logit(1/4) = -ln 3 and w1 = logit(3/4) - logit(1/4) = 2 ln 3.
    w0, w1 = fit_curve([(0.0, 1, 4), (1.0, 3, 4)], prior_mean=None)
    assert (w0, w1) == pytest.approx((-math.log(3.0), 2.0 * math.log(3.0)), abs=1e-8)
    assert curve(0.0, w0, w1) == pytest.approx(0.25) and curve(0.5, w0, w1) == pytest.approx(0.5)
    # Repeated x values add up: two points of 1/2 at x = 0 are the point 2/4.
    split = fit_curve([(0.0, 1, 2), (0.0, 0, 2), (1.0, 3, 4)], prior_mean=None)
    assert split == pytest.approx((w0, w1), abs=1e-8)
    # No points: the prior mean; the prior keeps one failing point finite, with w0 pulled down.
    assert fit_curve([]) == pytest.approx((0.0, 4.0))
    w0, w1 = fit_curve([(0.0, 0, 4)])
    assert w0 < -1.0 and w1 == pytest.approx(4.0, abs=1e-6)  # one x value: the slope stays at its prior


def test_chosen_hint_length_hand_cases() -> None:
    w0, w1 = -math.log(3.0), 2.0 * math.log(3.0)  # accuracy 0.5 at x* = 0.5
    assert [choose_hint_length(w0, w1, n) for n in (1, 2, 3, 4, 5)] == [0, 1, 2, 2, 3]  # floor(x*·L + 1/2), <= L-1
    assert choose_hint_length(w0, w1, 4, target=0.75) == 3  # x* = 1: the whole answer, clamped to L - 1
    assert choose_hint_length(w0, w1, 4, target=0.25) == 0  # x* = 0: no hint
    assert choose_hint_length(-2.0, 4.0, 4) == 2  # x* = 0.5
    assert choose_hint_length(-1.0, 4.0, 4) == 1  # x* = 0.25: 1.0 + 0.5 -> 1
    assert choose_hint_length(1.0, -1.0, 4) == 3  # a curve that does not rise: the largest hint
    assert choose_hint_length(5.0, 4.0, 4) == 0  # already above target: no hint


def test_decide_and_memory() -> None:
    seele = SEELE(rounds=2, memory=3)
    assert seele.decide({"key": "12+3=", "answer_length": 2}) == 0  # never seen: no hint
    seele.record("12+3=", 0.0, 0, 4)
    k = seele.decide({"key": "12+3=", "answer_length": 4})
    assert k == choose_hint_length(*fit_curve([(0.0, 0, 4)]), 4) and k > 0  # failed without a hint: a hint now
    for i in range(4):
        seele.record("12+3=", 0.25 * i, i, 4)
    assert seele.points["12+3="] == [[0.25, 1, 4], [0.5, 2, 4], [0.75, 3, 4]]  # the last `memory` points
    assert split_evenly(8, 2) == [4, 4] and split_evenly(7, 3) == [3, 2, 2]


def _trainer(seele: SEELE, minibatches: int = 1) -> GRPOTrainer:
    torch.manual_seed(0)
    pool = make_prompt_set(8, np.random.default_rng(0), difficulties=[2, 3])
    cfg = GRPOConfig(prompts_per_step=2, minibatches=minibatches, lr=0.02)
    return GRPOTrainer(build_model(TINY_LM), CharVocab(), pool, Uniform(4), cfg, guidance=seele)


def test_trainer_rounds_hint_after_failures() -> None:
    trainer = _trainer(SEELE(rounds=2))
    trainer.step()  # an untrained model fails: round 1 unhinted, round 2 hinted
    seele = trainer.guidance
    assert isinstance(seele, SEELE)
    assert trainer.costs.responses == 8  # the allocator's 4 per prompt, split 2 + 2 over the rounds
    assert len(seele.points) == 2 and all(len(v) == 2 for v in seele.points.values())
    assert all(v[0][0] == 0.0 and v[1][0] > 0.0 for v in seele.points.values())
    assert seele.hinted_responses == 4 and seele.hint_characters > 0


def test_seele_resumes_exactly() -> None:
    full, resumed = resumed_alongside(lambda: _trainer(SEELE(rounds=2), minibatches=2))
    assert full.guidance is not None and resumed.guidance is not None
    assert full.guidance.state_dict() == resumed.guidance.state_dict()
    assert full.costs == resumed.costs


def test_spec() -> None:
    seele = make_guidance("seele:3,0.4")
    assert isinstance(seele, SEELE) and (seele.rounds, seele.target) == (3, 0.4)
    assert make_guidance("seele").rounds == 2  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="whole number"):
        make_guidance("seele:1.5")
    with pytest.raises(ValueError, match="0 < target < 1"):
        make_guidance("seele:2,1")


def test_cli_kill_and_resume_matches_straight_run(tmp_path: Path) -> None:
    """SIGKILL after a checkpoint, then ``--resume``: bit-identical to a straight run, SEELE's curves included."""
    sft = tiny_mul_sft(tmp_path / "sft.pt")
    preset = guided_preset(tmp_path / "preset.yaml", sft, "seele:2", 16, ["mul"])
    straight, resumed = kill_and_resume(tmp_path, preset, 16)
    assert_same(straight["state"]["trainer"], resumed["state"]["trainer"], "trainer")
    assert_same(straight["state"]["evals"], resumed["state"]["evals"], "evals")
    assert resumed["state"]["trainer"]["guidance"]["points"]
