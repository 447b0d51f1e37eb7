"""Guide: hint lengths, the importance ratio on hand-computed cases, the identity that gives its denominator in one
forward pass, the trainer's guided resampling and its costs, the spec, and kill-and-resume through the CLI."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from kill_resume import assert_same, guided_preset, kill_and_resume, tiny_mul_sft
from tiny_grpo import TINY_LM, resumed_alongside

from envs.reasoning import Task, make_prompt_set
from meta.rlvr import Uniform, make_allocator
from meta.rlvr.guidance import make_guidance
from meta.rlvr.guidance.guide import Guide, behaviour_logprobs, hint_length, importance_ratios
from meta.rlvr.lm.charlm import build_model
from meta.rlvr.lm.sampling import sequence_logprobs
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.grpo import GRPOTrainer
from meta.rlvr.trainers.grpo_config import GRPOConfig


def test_hint_length_hand_cases() -> None:
    assert [hint_length(n, 0.5) for n in (0, 1, 2, 3, 4, 5)] == [0, 1, 1, 2, 2, 3]
    assert hint_length(5, 0.1) == 1  # at least one character
    assert hint_length(4, 1.0) == 4
    assert hint_length(10, 0.3) == 3  # 0.3 * 10 is 3.0000000000000004 in floating point: still 3


def test_importance_ratio_hand_case() -> None:
    # Trajectory "hint + continuation" of 3 tokens, the first one the hint.
    target = [-0.5, -1.0, -0.2]  # log π_θ(y_t | q, y_<t): the hint-free policy
    sampled = [-9.0, -1.0, -0.1]  # log π_old along the same tokens (the hint's entry is never used)
    behaviour = behaviour_logprobs(sampled, forced=1)
    assert behaviour == [0.0, -1.0, -0.1]  # the hint was given: probability 1
    assert importance_ratios(target, behaviour) == pytest.approx([math.exp(-0.5), 1.0, math.exp(-0.1)])
    assert behaviour_logprobs(sampled, forced=0) == sampled
    with pytest.raises(ValueError, match="forced"):
        behaviour_logprobs(sampled, forced=4)
    with pytest.raises(ValueError, match="one behaviour"):
        importance_ratios(target, behaviour[:2])


def test_denominator_is_the_hinted_policy_on_the_sampled_tokens() -> None:
    """log π(o_t | q + hint, o_<t) equals the hint-free forward pass's log π(y_t | q, y_<t) at t >= |hint|: the
    trainer computes the denominator of the sampled tokens and the numerator of all tokens from one context."""
    torch.manual_seed(0)
    vocab = CharVocab()
    model = build_model(TINY_LM).eval()
    prompt, hint, rest = vocab.encode("53+7=", bos=True), vocab.encode("0"), [*vocab.encode("6"), vocab.eos_id]
    free = sequence_logprobs(model, [prompt], [hint + rest], vocab.pad_id, suppress=(0, 1))[0].detach()
    hinted = sequence_logprobs(model, [prompt + hint], [rest], vocab.pad_id, suppress=(0, 1))[0].detach()
    assert free[0, 1:].tolist() == pytest.approx(hinted[0].tolist(), abs=1e-5)
    ratios = importance_ratios(free[0].tolist(), behaviour_logprobs(free[0].tolist(), forced=1))
    assert ratios == pytest.approx([math.exp(float(free[0, 0])), 1.0, 1.0])  # π_θ(hint) on the hint, 1 elsewhere


def test_decide_hints_only_all_wrong_groups() -> None:
    guide = Guide(fraction=0.5)
    rewards = [[0.0, 0.0], [1.0, 0.0], [], [0.0]]
    assert guide.decide({"rewards": rewards, "answer_lengths": [4, 3, 2, 5]}) == [2, 0, 0, 3]


def _answer_prefix_reward(task: Task, text: str) -> float:
    """Right when the text starts with the whole answer and has an even length: an untrained model almost never
    starts with the answer, a fully hinted one always does, so unguided groups fail and guided ones are mixed."""
    return float(text.startswith(task.answer) and len(text) % 2 == 0)


def _trainer(guide: Guide | None = None, minibatches: int = 1) -> GRPOTrainer:
    torch.manual_seed(0)
    pool = make_prompt_set(8, np.random.default_rng(0), difficulties=[1, 2])
    cfg = GRPOConfig(prompts_per_step=2, minibatches=minibatches, lr=0.02)
    return GRPOTrainer(
        build_model(TINY_LM), CharVocab(), pool, Uniform(4), cfg, reward_fn=_answer_prefix_reward, guidance=guide
    )


def test_trainer_resamples_all_wrong_groups_with_the_hint_and_pays_for_it() -> None:
    plain = _trainer()
    plain_metrics = plain.step()
    assert plain_metrics["ratio_min"] == plain_metrics["ratio_max"] == 1.0  # one step per batch: on-policy
    trainer = _trainer(Guide(fraction=1.0))
    metrics = [trainer.step() for _ in range(3)]
    guide = trainer.guidance
    assert isinstance(guide, Guide) and guide.guided_groups == 6 and guide.guided_responses == 24
    assert 0 < guide.guided_successes < 24
    # Every response is paid for: 4 unguided and 4 guided per group, 2 groups per step.
    assert trainer.costs.responses == 3 * 2 * 8
    # A guided row's hint tokens have ratio π_θ(hint) < 1 even on-policy: the importance weight acts.
    assert min(m["ratio_min"] for m in metrics) < 0.5 and max(m["ratio_max"] for m in metrics) == pytest.approx(1.0)
    assert plain.costs.responses == 8


def test_guide_resumes_exactly() -> None:
    full, resumed = resumed_alongside(lambda: _trainer(Guide(fraction=0.5), minibatches=2))
    assert full.guidance is not None and resumed.guidance is not None
    assert full.guidance.state_dict() == resumed.guidance.state_dict()
    assert full.costs == resumed.costs


def test_spec() -> None:
    guide = make_guidance("guide:0.25,2")
    assert isinstance(guide, Guide) and (guide.fraction, guide.responses) == (0.25, 2)
    assert make_guidance("guide").fraction == 0.5  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="FRACTION"):
        make_guidance("guide:0.5,1,2")
    with pytest.raises(ValueError, match="in \\(0, 1\\]"):
        make_guidance("guide:1.5")
    with pytest.raises(ValueError, match="make_guidance"):
        make_allocator("guide:0.5")
    with pytest.raises(ValueError, match="not combined"):
        GRPOTrainer(
            build_model(TINY_LM),
            CharVocab(),
            make_prompt_set(2, np.random.default_rng(0)),
            make_allocator("ar3po:2,2"),
            guidance=Guide(),
        )


def test_cli_kill_and_resume_matches_straight_run(tmp_path: Path) -> None:
    """SIGKILL after a checkpoint, then ``--resume``: bit-identical to a straight run, Guide's state included."""
    sft = tiny_mul_sft(tmp_path / "sft.pt")
    preset = guided_preset(tmp_path / "preset.yaml", sft, "guide:0.5", 16, ["mul"])
    straight, resumed = kill_and_resume(tmp_path, preset, 16)
    assert_same(straight["state"]["trainer"], resumed["state"]["trainer"], "trainer")
    assert_same(straight["state"]["evals"], resumed["state"]["evals"], "evals")
    assert resumed["state"]["trainer"]["guidance"]["guided_groups"] > 0
