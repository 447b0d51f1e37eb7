"""The testbeds' warm-start mixes and sampler, and GRPO runs on the countdown and carry families."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from envs.reasoning.carry import CARRY_ALPHABET, verify_carry
from envs.reasoning.countdown import COUNTDOWN_ALPHABET, verify_countdown
from envs.reasoning.tooluse import needs_tool
from experiments.rlvr.testbeds import TESTBEDS, sample_responses, train_warm_start
from meta.rlvr.lm.charlm import CharLMConfig, build_model
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.run import GRPORun, GRPORunConfig

TINY = {"hidden_size": 32, "intermediate_size": 64, "num_layers": 1, "num_heads": 2}


def test_warm_start_mixes_follow_their_settings() -> None:
    cd = TESTBEDS["countdown"].sft_examples(400, np.random.default_rng(0))
    assert all(verify_countdown(t, t.answer) == 1.0 for t in cd)
    shares = np.bincount([t.difficulty for t in cd], minlength=6)[2:] / len(cd)
    assert shares[3] < 0.1 < min(shares[:3])  # the 5-number bucket is rare (weight 0.15 against 1, 1, 1)
    carry = TESTBEDS["carry"].sft_examples(400, np.random.default_rng(0))
    plain = [t for t in carry if "<" not in t.prompt]
    assert 0.4 <= np.mean([";" in t.answer for t in plain]) <= 0.6  # short and long traces on plain prompts
    tools = TESTBEDS["toolmix"].sft_examples(400, np.random.default_rng(0))
    no_tool = [t for t in tools if not needs_tool(t)]
    assert 0.5 <= np.mean(["<calc>" in t.answer for t in no_tool]) <= 0.7  # overuse 0.6


def test_sampler_grades_hints_and_counts_sampled_tokens() -> None:
    bed = replace(TESTBEDS["countdown"], model=CharLMConfig(alphabet=COUNTDOWN_ALPHABET, **TINY), steps=1)
    model, _ = train_warm_start(bed, log=None)
    tasks = bed.eval_tasks(2, seed=0)
    full = sample_responses(model, bed, tasks[:2], 3, hints=[t.answer for t in tasks[:2]], seed=0)
    # The whole reference as the hint: the completion only has to stop, and EOS is its one sampled token when it does.
    assert full.n == 3 and len(full.correct) == 6
    assert all(text.startswith(t.answer) for text, t in zip(full.texts, [tasks[0]] * 3 + [tasks[1]] * 3, strict=True))
    assert all(
        (ok == 1) == (text == t.answer)
        for ok, text, t in zip(full.correct, full.texts, [tasks[0]] * 3 + [tasks[1]] * 3, strict=True)
    )
    again = sample_responses(model, bed, tasks[:2], 3, hints=[t.answer for t in tasks[:2]], seed=0)
    assert again.texts == full.texts and again.lengths == full.lengths  # seeded


@pytest.mark.parametrize(
    ("family", "alphabet", "verify"),
    [("countdown", COUNTDOWN_ALPHABET, verify_countdown), ("carry", CARRY_ALPHABET, verify_carry)],
)
def test_grpo_run_trains_on_the_new_families(family: str, alphabet: str, verify: object) -> None:
    model_cfg = CharLMConfig(alphabet=alphabet, max_positions=64, **TINY)
    cfg = GRPORunConfig(
        allocator="uniform:2",
        families=[family],
        difficulties=[2, 3],
        pool_size=8,
        held_out_size=4,
        grpo=GRPOConfig(prompts_per_step=2, max_new_tokens=12),
    )
    run = GRPORun(cfg, build_model(model_cfg), model_cfg)
    assert run.trainer.reward_fn is verify
    assert {t.family for t in run.held_out} == {family} and {t.difficulty for t in run.held_out} <= {2, 3}
    run.trainer.step()
    with pytest.raises(ValueError, match=f"the '{family}' family is trained alone"):
        GRPORun(replace(cfg, families=[family, "add"]), build_model(model_cfg), model_cfg)
