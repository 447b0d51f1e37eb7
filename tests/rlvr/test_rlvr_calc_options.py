"""The restricted calculator and the difficulty mix of the calc family (CalcOptions), and ARPO's training tool-call
budget in the token-level benchmark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from envs.reasoning.tooluse import (
    REFUSED,
    TOOL_ALPHABET,
    CalcError,
    CalcOptions,
    calculate,
    make_calc_set,
    make_sft_set,
    tool_response,
    trace,
)
from experiments.rlvr.token_level_protocol import token_level_summary, token_level_table, training_tool_calls
from meta.rlvr.lm.charlm import CharLMConfig
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.tools import CalculatorTool

REPO = Path(__file__).resolve().parents[2]
PRESETS = REPO / "experiments" / "rlvr" / "presets"
CALC2 = CalcOptions(call_operations=1, operand_limits=[9, 99, 99, 99])


def _operands(prompt: str) -> list[int]:
    expr = prompt.removesuffix("=")
    for op in "+-*":
        expr = expr.replace(op, " ")
    return [int(x) for x in expr.split()]


def test_calculator_with_one_operation_per_call() -> None:
    assert calculate("3+4", max_operations=1) == 7
    assert calculate("-3+4", max_operations=1) == 1  # the leading minus is a sign, not an operation
    assert calculate("12", max_operations=1) == 12
    assert calculate("3+4*2", max_operations=2) == 11
    with pytest.raises(CalcError, match="more than 1 operation"):
        calculate("3+4*2", max_operations=1)
    assert calculate("3+45*2-7") == calculate("3+45*2-7", max_operations=0) == 86  # 0: any
    assert tool_response("<calc>3+45*2-7</calc>", max_operations=1) == REFUSED
    assert tool_response("<calc>3+45*2-7</calc>") == "86"  # the default is unchanged
    assert tool_response("<calc>45*2</calc>90;<calc>3+90</calc>", max_operations=1) == "93"


def test_calculator_tool_restricted() -> None:
    vocab = CharVocab(TOOL_ALPHABET)
    tool = CalculatorTool(vocab, max_operations=1)
    assert tool.respond(vocab.encode("<calc>6*7</calc>")) == vocab.encode("42")
    assert tool.respond(vocab.encode("<calc>6*7+1</calc>")) == vocab.encode(REFUSED)
    assert tool.calls == 2  # a refusal is a call the environment answered
    assert CalculatorTool(vocab).respond(vocab.encode("<calc>6*7+1</calc>")) == vocab.encode("43")
    with pytest.raises(ValueError, match="max_operations"):
        CalculatorTool(vocab, max_operations=-1)


def test_operand_limits_per_difficulty_and_default_draws_unchanged() -> None:
    tasks = make_calc_set(400, np.random.default_rng(0), [1, 2, 3, 4], operand_limits=CALC2.limits([1, 2, 3, 4]))
    assert {t.difficulty for t in tasks} == {1, 2, 3, 4}
    assert all(max(_operands(t.prompt)) <= 9 for t in tasks if t.difficulty == 1)
    assert max(max(_operands(t.prompt)) for t in tasks if t.difficulty > 1) > 9
    assert all(int(t.answer) == calculate(t.prompt[:-1]) for t in tasks)
    # Off (no limits, or every limit the default) draws exactly the tasks it drew before.
    assert make_calc_set(50, np.random.default_rng(1)) == make_calc_set(
        50, np.random.default_rng(1), operand_limits=CalcOptions().limits([1, 2, 3])
    )
    with pytest.raises(ValueError, match="one limit per difficulty"):
        CALC2.limits([1, 2])
    with pytest.raises(ValueError, match="one operand limit per entry"):
        make_calc_set(3, np.random.default_rng(0), [1, 2], operand_limits=[9])
    with pytest.raises(ValueError, match="call_operations"):
        CalcOptions(call_operations=-1)
    with pytest.raises(ValueError, match="operand_limits"):
        CalcOptions(operand_limits=[0])


def test_restricted_sft_mix_has_no_whole_expression_call_and_every_trace_replays() -> None:
    weights = (1.0, 1.0, 1.0, 0.0)
    tasks = make_sft_set(600, np.random.default_rng(2), weights, [1, 2, 3, 4], options=CALC2)
    assert tasks == make_sft_set(600, np.random.default_rng(2), weights, [1, 2, 3, 4], options=CALC2)
    styles = {"direct": 0, "scratch": 0, "tool": 0}
    for t in tasks:
        assert t.answer.rsplit("#", 1)[1] == str(calculate(t.prompt[:-1]))  # the trace ends with the answer
        if t.difficulty == 1:
            assert max(_operands(t.prompt)) <= 9
        if t.answer.startswith("#"):
            styles["direct"] += 1
        elif "<calc>" in t.answer:
            styles["tool"] += 1
            # Replayed through the restricted calculator, every call is answered with the trace's own result.
            for cut in range(len(t.answer)):
                result = tool_response(t.answer[:cut], max_operations=1)
                if result is not None:
                    assert result != REFUSED and t.answer[cut:].startswith(result)
        else:
            styles["scratch"] += 1
    assert min(styles.values()) > 100
    # A whole-expression call is what the restricted calculator refuses; such traces are refused in the mix.
    multi = next(t for t in tasks if t.difficulty > 1)
    assert tool_response(trace(multi, "tool_once").split("</calc>")[0] + "</calc>", max_operations=1) == REFUSED
    with pytest.raises(ValueError, match="tool_once"):
        make_sft_set(5, np.random.default_rng(0), (1, 1, 1, 1), [1, 2], options=CALC2)
    # One-operation tasks only: a whole-expression call is one operation, so tool_once stays allowed.
    make_sft_set(5, np.random.default_rng(0), (1, 1, 1, 1), [1], options=CalcOptions(call_operations=1))
    # Default options leave the mix exactly as before.
    assert make_sft_set(50, np.random.default_rng(3), options=CalcOptions()) == make_sft_set(
        50, np.random.default_rng(3)
    )


def test_configs_carry_the_options(tmp_path: Path) -> None:
    from tiny_grpo import tiny_calc_sft

    from meta.rlvr.lm.charlm import load_model
    from meta.rlvr.trainers.grpo_config import GRPOConfig
    from meta.rlvr.trainers.run import GRPORun, load_run_config
    from meta.rlvr.trainers.sft import SFTConfig, eval_tasks
    from rolloutlab.config import load_yaml

    sft = load_yaml(SFTConfig, PRESETS / "calc2_sft.yaml")
    assert sft.calc == CALC2 and sft.style_weights[3] == 0.0
    assert all(max(_operands(t.prompt)) <= 9 for t in eval_tasks(sft, 0) if t.difficulty == 1)
    alphabet = CharLMConfig(alphabet=TOOL_ALPHABET)
    with pytest.raises(ValueError, match="tool_once"):
        SFTConfig(families=["calc"], difficulties=[1, 2], calc=CalcOptions(call_operations=1), model=alphabet)
    with pytest.raises(ValueError, match="one limit per difficulty"):
        SFTConfig(families=["calc"], difficulties=[1, 2], calc=CalcOptions(operand_limits=[9]), model=alphabet)

    tiny_calc_sft(tmp_path / "sft.pt", difficulties=[1, 2], eval_per_difficulty=1)
    cfg = load_run_config(
        PRESETS / "calc2_grpo.yaml",
        {"sft_checkpoint": str(tmp_path / "sft.pt"), "pool_size": 40, "held_out_size": 40, "grpo": {}},
    )
    assert cfg.calc == CalcOptions(call_operations=1, operand_limits=[9, 9, 99, 99])
    model, model_cfg, _ = load_model(cfg.sft_checkpoint)
    cfg = type(cfg)(**{**cfg.__dict__, "grpo": GRPOConfig(prompts_per_step=2, max_new_tokens=8)})
    run = GRPORun(cfg, model, model_cfg)
    assert isinstance(run.trainer.tool, CalculatorTool) and run.trainer.tool.max_operations == 1
    assert all(max(_operands(t.prompt)) <= 9 for t in run.held_out if t.difficulty == 1)
    assert {t.difficulty for t in run.held_out} == {1, 2, 3}


class _CountingTool:
    calls = 0


def test_training_tool_calls_counts_the_step_only() -> None:
    tool = _CountingTool()

    def step() -> None:
        tool.calls += 3

    assert training_tool_calls(tool, step) == 3
    assert training_tool_calls(None, lambda: None) == 0


def _run(arm: str, seed: int, calls_per_eval: int, reach_at: int | None) -> dict[str, Any]:
    """Four evaluations; accuracy reaches 1.0 at evaluation ``reach_at`` (never if ``None``)."""
    curve = [
        {
            "step": s,
            "accuracy": 1.0 if reach_at is not None and s >= reach_at else 0.5,
            "tool_calls": 2.0,
            "answer_length": 20.0,
            "slow_share": 0.5,
            "entropy": 1.0,
            "completion_tokens": 100 * s,
            "training_tool_calls": calls_per_eval * s,
        }
        for s in range(4)
    ]
    costs = {"completion_tokens": 300, "training_tool_calls": 3 * calls_per_eval}
    return {"arm": arm, "seed": seed, "curve": curve, "costs": costs, "steps": 3, "seconds": 1.0}


def test_training_tool_calls_ratio_by_hand() -> None:
    """ARPO spends 5 calls per evaluation period against uniform's 10 and reaches the target at the same point:
    ratio 0.5 to target and over the whole run; the headline rule (final tool calls per answer) is untouched."""
    seeds = [0, 1, 2]
    runs = [r for s in seeds for r in (_run("uniform_g8", s, 10, 2), _run("arpo", s, 5, 2), _run("hapo", s, 10, None))]
    summary = token_level_summary(runs, seeds, ["uniform_g8", "arpo", "hapo"])
    arpo, hapo = summary["methods"]["arpo"], summary["methods"]["hapo"]
    assert arpo["training_tool_calls_ratio"] == pytest.approx(0.5)
    assert arpo["training_tool_calls_ratio_ci"] == [pytest.approx(0.5), pytest.approx(0.5)]
    assert arpo["training_tool_calls_total_ratio"] == pytest.approx(0.5)
    assert arpo["training_tool_calls"] == [15.0, 15.0, 15.0]
    assert arpo["tool_calls_ratio"] == pytest.approx(1.0)
    assert arpo["headline_met"] is False  # the headline still reads tool calls per answer
    assert hapo["training_tool_calls_ratio"] is None  # never reached the target: infinite
    table = token_level_table(summary)
    assert "training tool calls to target ratio" in table and "the paper's own measure" in table
    # Older records without the count: no ratio, no error.
    for r in runs:
        del r["costs"]["training_tool_calls"]
    old = token_level_summary(runs, seeds, ["uniform_g8", "arpo"])
    assert old["methods"]["arpo"]["training_tool_calls_ratio"] is None
