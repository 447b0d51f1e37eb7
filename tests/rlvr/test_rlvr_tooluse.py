"""The calc tool-use family: calculator, verifier, traces, the sampler's tool hook and the loss mask of tool tokens."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from envs.reasoning import Task
from envs.reasoning.tooluse import (
    MAX_EXPR_CHARS,
    REFUSED,
    TOOL_ALPHABET,
    TRACE_STYLES,
    CalcError,
    calculate,
    make_calc_set,
    make_sft_set,
    reduction_steps,
    tool_response,
    trace,
    verify_calc,
)
from meta.rlvr import Uniform
from meta.rlvr.lm.charlm import CharLMConfig, build_model
from meta.rlvr.lm.sampling import sample
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.grpo import GRPOTrainer
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.grpo_groups import Group, Response
from meta.rlvr.trainers.tools import CalculatorTool

TINY = CharLMConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, alphabet=TOOL_ALPHABET)


@pytest.mark.parametrize(
    ("expr", "value"),
    [("7", 7), ("3+4", 7), ("3-4", -1), ("2*3+4", 10), ("2+3*4", 14), ("3+45*2-7", 86), ("-4+10", 6), ("10-2-3", 5)],
)
def test_calculator_hand_cases(expr: str, value: int) -> None:
    assert calculate(expr) == value


@pytest.mark.parametrize(
    "expr",
    [
        "",
        "1+",
        "+1",
        "1++2",
        "2**3",
        "1/2",
        "1 + 2",
        "(1+2)",
        "1e5",
        "--1",
        "1--2",
        "__import__('os').system('ls')",
        "\u0663+1",  # a Unicode digit that str.isdigit() accepts
        "1" * 10,  # literal too long
        "+".join(["1"] * 9),  # too many operands
        "1+" * MAX_EXPR_CHARS + "1",  # too long
    ],
)
def test_calculator_refuses_malformed_or_unsafe(expr: str) -> None:
    with pytest.raises(CalcError):
        calculate(expr)


def test_tool_response() -> None:
    assert tool_response("12;<calc>2*3</calc>") == "6"
    assert tool_response("<calc>1</calc>1;<calc>5-9</calc>") == "-4"  # the last call is answered
    assert tool_response("<calc>2*3</calc>6") is None  # no call just closed
    assert tool_response("<calc>2**3</calc>") == REFUSED
    assert tool_response("2*3</calc>") == REFUSED  # no opening tag
    assert tool_response("") is None


def test_verify_calc_hand_cases() -> None:
    task = Task("3+45*2-7=", "86", "calc", 3)
    assert verify_calc(task, "#86$") == 1.0
    assert verify_calc(task, "<calc>3+45*2-7</calc>86#86$junk#1") == 1.0  # after EOS is ignored
    assert verify_calc(task, "#1#86") == 1.0  # the last answer counts
    assert verify_calc(task, "86$") == 0.0  # no answer marker
    assert verify_calc(task, "#860$") == 0.0
    assert verify_calc(task, "#86#1$") == 0.0
    assert verify_calc(task, "") == 0.0


def test_traces_hand_case_and_all_verify() -> None:
    task = Task("3+45*2-7=", "86", "calc", 3)
    assert reduction_steps("3+45*2-7") == [("45*2", 90), ("3+90", 93), ("93-7", 86)]
    assert trace(task, "direct") == "#86"
    assert trace(task, "scratch") == "45*2=90;3+90=93;93-7=86;#86"
    assert trace(task, "tool") == "<calc>45*2</calc>90;<calc>3+90</calc>93;<calc>93-7</calc>86;#86"
    assert trace(task, "tool_once") == "<calc>3+45*2-7</calc>86#86"
    for t in make_calc_set(200, np.random.default_rng(0), operations=(1, 2, 3, 4)):
        assert int(t.answer) == calculate(t.prompt[:-1])
        for style in TRACE_STYLES:
            text = trace(t, style)
            assert verify_calc(t, text + "$") == 1.0
            assert set(text + t.prompt) <= set(TOOL_ALPHABET)
            # Replaying a tool trace through the environment: after each closing tag it inserts exactly the
            # result the trace has there.
            for cut in range(len(text)):
                result = tool_response(text[:cut])
                if result is not None:
                    assert text[cut:].startswith(result)
                    assert result != REFUSED
    with pytest.raises(ValueError, match="unknown trace style"):
        trace(task, "verbose")
    with pytest.raises(ValueError, match="needs a 'calc' task"):
        trace(Task("53+7=", "24", "add", 2), "direct")


def test_sft_set_is_deterministic_and_mixes_tool_and_plain_traces() -> None:
    a = make_sft_set(400, np.random.default_rng(3))
    b = make_sft_set(400, np.random.default_rng(3))
    c = make_sft_set(400, np.random.default_rng(4))
    assert a == b
    assert a != c
    with_tool = sum("<calc>" in t.answer for t in a)
    assert 100 < with_tool < 300  # half of the four styles call the tool
    only_plain = make_sft_set(50, np.random.default_rng(3), style_weights=(1, 1, 0, 0))
    assert not any("<calc>" in t.answer for t in only_plain)
    with pytest.raises(ValueError, match="style_weights"):
        make_sft_set(5, np.random.default_rng(0), style_weights=(1, 1))


class _Scripted:
    """A tool hook that answers ``reply`` after ``trigger`` and records what it was shown."""

    def __init__(self, trigger: int, reply: Sequence[int]) -> None:
        self.trigger = trigger
        self.reply = list(reply)
        self.seen: list[list[int]] = []

    def respond(self, completion: Sequence[int]) -> list[int]:
        self.seen.append(list(completion))
        return self.reply


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(TINY).eval()


def test_sampler_inserts_tool_tokens_and_keeps_the_cache_consistent() -> None:
    vocab = CharVocab(TOOL_ALPHABET)
    model = _model()
    prompt = vocab.encode("12+3=", bos=True)
    kwargs: dict[str, Any] = {"max_new_tokens": 10, "eos_id": vocab.eos_id, "pad_id": vocab.pad_id, "suppress": (0, 1)}
    plain = sample(model, [prompt], temperature=0.0, **kwargs)
    first = plain.completions[0][0]
    reply = vocab.encode("42")
    hook = _Scripted(first, reply)
    out = sample(model, [prompt, prompt], temperature=0.0, tool=hook, **kwargs)
    row = out.completions[0]
    assert row[:3] == [first, *reply]
    assert out.inserted[0][:3] == [0, 1, 1]
    assert len(out.inserted[0]) == len(row)
    assert hook.seen[0] == [first]
    assert out.completions[1] == row  # both rows alike: the batch stays in lockstep
    # The KV cache saw the inserted tokens: greedy decoding from prompt + the first three tokens continues alike.
    cont = sample(model, [prompt + row[:3]], temperature=0.0, **{**kwargs, "max_new_tokens": len(row) - 3})
    assert cont.completions[0] == row[3:]


def test_sampler_hook_never_triggered_changes_nothing() -> None:
    vocab = CharVocab(TOOL_ALPHABET)
    model = _model()
    prompts = [vocab.encode("12+3=", bos=True)] * 6
    kwargs: dict[str, Any] = {"max_new_tokens": 12, "eos_id": vocab.eos_id, "pad_id": vocab.pad_id, "suppress": (0, 1)}
    a = sample(model, prompts, generator=torch.Generator().manual_seed(5), **kwargs)
    hook = _Scripted(vocab.bos_id, vocab.encode("1"))  # BOS is suppressed, so never sampled
    b = sample(model, prompts, generator=torch.Generator().manual_seed(5), tool=hook, **kwargs)
    assert a.completions == b.completions
    assert a.mean_entropy == b.mean_entropy
    assert b.inserted == [[0] * len(c) for c in b.completions]
    assert a.inserted == []


def test_calculator_tool_answers_closed_calls() -> None:
    vocab = CharVocab(TOOL_ALPHABET)
    tool = CalculatorTool(vocab)
    assert tool.trigger == vocab.index[">"]
    assert tool.respond(vocab.encode("<calc>6*7</calc>")) == vocab.encode("42")
    assert tool.respond(vocab.encode("<calc>")) == []  # '>' of the opening tag: no call closed
    assert tool.respond(vocab.encode("<calc>6/7</calc>")) == vocab.encode(REFUSED)
    assert tool.calls == 2
    with pytest.raises(ValueError, match="not in the vocabulary"):
        CalculatorTool(CharVocab())


def test_inserted_tokens_are_out_of_the_loss() -> None:
    """Hand case: dr_grpo advantages ±0.5, dapo normaliser over the model's own tokens, ratio 1 (one minibatch).

    Response 1 (reward 1) has 4 tokens, 2 inserted; response 2 (reward 0) has 4 sampled tokens. The loss is
    ``−(0.5·2 − 0.5·4) / (2 + 4) = 1/6``; counting the inserted tokens it would be ``0``.
    """
    vocab = CharVocab(TOOL_ALPHABET)
    task = Task("1+2=", "3", "calc", 1)
    cfg = GRPOConfig(prompts_per_step=1, advantage="dr_grpo", loss="dapo", minibatches=1)
    trainer = GRPOTrainer(_model(), vocab, [task], Uniform(2), cfg, reward_fn=verify_calc, tool=CalculatorTool(vocab))
    ids = vocab.encode("#3$")
    group = Group(task, vocab.encode(task.prompt, bos=True))
    group.responses = [
        Response([*vocab.encode("<>"), *ids[:2]], 1.0, inserted=[0, 1, 1, 0]),
        Response(vocab.encode("#4$1"), 0.0, inserted=[0, 0, 0, 0]),
    ]
    metrics = trainer._update([group])
    assert metrics["loss"] == pytest.approx(1.0 / 6.0, abs=1e-6)
    assert trainer.costs.tokens_trained == 6
    # Without a tool (no insertion marks) the same batch gives 0.
    for r in group.responses:
        r.inserted = None
    plain = GRPOTrainer(_model(), vocab, [task], Uniform(2), cfg, reward_fn=verify_calc)
    assert plain._update([group])["loss"] == pytest.approx(0.0, abs=1e-6)


def test_trainer_refuses_tool_with_reuse() -> None:
    from meta.rlvr import AR3PO

    vocab = CharVocab(TOOL_ALPHABET)
    pool = make_calc_set(2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="response reuse"):
        GRPOTrainer(_model(), vocab, pool, AR3PO(2, 2), tool=CalculatorTool(vocab))


def test_trainer_step_with_the_calculator_runs() -> None:
    vocab = CharVocab(TOOL_ALPHABET)
    cfg = GRPOConfig(prompts_per_step=2, max_new_tokens=16)
    tool = CalculatorTool(vocab)
    trainer = GRPOTrainer(
        _model(), vocab, make_calc_set(4, np.random.default_rng(0)), Uniform(4), cfg, reward_fn=verify_calc, tool=tool
    )
    out = trainer.step()
    assert out["groups_generated"] == 2
    assert 0.0 <= trainer.evaluate(make_calc_set(4, np.random.default_rng(1))) <= 1.0


def test_calc_sft_then_grpo_run_with_the_calculator(tmp_path: Path) -> None:
    from tiny_grpo import tiny_calc_sft

    from meta.rlvr.lm.charlm import load_model
    from meta.rlvr.trainers.run import GRPORun, GRPORunConfig

    metrics = tiny_calc_sft(tmp_path / "sft.pt")
    assert set(metrics["sampled"]) == {"calc/1", "calc/2", "overall"}
    cfg = GRPORunConfig(
        sft_checkpoint=str(tmp_path / "sft.pt"),
        steps=1,
        pool_size=8,
        held_out_size=4,
        families=["calc"],
        difficulties=[1, 2],
        grpo=GRPOConfig(prompts_per_step=2, max_new_tokens=40),
    )
    model, loaded_cfg, _ = load_model(cfg.sft_checkpoint)
    run = GRPORun(cfg, model, loaded_cfg)
    assert isinstance(run.trainer.tool, CalculatorTool)
    assert all(t.family == "calc" for t in run.held_out)
    run.learn()
    assert run.trainer.num_steps == 1 and len(run.evals) == 2


def test_calc_family_refusals() -> None:
    from meta.rlvr.trainers.sft import SFTConfig

    with pytest.raises(ValueError, match="TOOL_ALPHABET"):
        SFTConfig(families=["calc"])
    with pytest.raises(ValueError, match="trained alone"):
        SFTConfig(families=["calc", "add"], model=CharLMConfig(alphabet=TOOL_ALPHABET))
