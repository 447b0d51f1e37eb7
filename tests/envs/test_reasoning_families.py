"""The countdown and carry families and the calculator's tool-needed labels: generators, verifiers, difficulty labels
(hand-computed cases)."""

from __future__ import annotations

import numpy as np
import pytest

from envs.reasoning import Task
from envs.reasoning.carry import (
    CARRY_FAMILY,
    carry_count,
    make_carry_set,
    make_carry_sft_set,
    make_carry_task,
    operands,
    trace,
    trace_tokens,
    verify_carry,
)
from envs.reasoning.countdown import (
    COUNTDOWN_FAMILY,
    countdown_prompt,
    make_countdown_set,
    make_countdown_sft_set,
    make_countdown_task,
    parse_prompt,
    reachable,
    solutions,
    verify_countdown,
)
from envs.reasoning.tooluse import calculate, make_tool_mix_set, make_tool_mix_sft_set, needs_tool, verify_calc

CD = Task("8,7,9>65=", "8*7=56;56+9=65;#65", COUNTDOWN_FAMILY, 3)


@pytest.mark.parametrize(
    ("completion", "reward"),
    [
        ("8*7=56;56+9=65;#65", 1.0),
        ("7*8=56;9+56=65;#65$", 1.0),  # operand order is free
        ("9*8=72;72-7=65;#65", 1.0),  # another path
        ("8*7=56;56+9=65;#65$#1", 1.0),  # after EOS is ignored
        ("8*7=56;56+9=65;#64", 0.0),  # wrong answer
        ("8*7=57;57+8=65;#65", 0.0),  # wrong arithmetic
        ("8*7=56;56+8=64;#64", 0.0),  # 8 used twice
        ("9*7=63;63+8=71;#65", 0.0),
        ("8*7=56;56+9=65#65", 0.0),  # unterminated step
        ("8*7=56;56+9=65;", 0.0),  # no answer
        ("#65", 0.0),  # no derivation
        ("08*7=56;56+9=65;#65", 0.0),  # leading zero
        ("7-9=0;8*7=56;#65", 0.0),
        ("", 0.0),
    ],
)
def test_countdown_verifier_hand_cases(completion: str, reward: float) -> None:
    assert verify_countdown(CD, completion) == reward


def test_countdown_verifier_needs_every_number_and_exact_division() -> None:
    unused = Task("8,7,9>56=", "", COUNTDOWN_FAMILY, 3)
    assert verify_countdown(unused, "8*7=56;#56") == 0.0  # 9 never used
    div = Task("8,4,3>6=", "", COUNTDOWN_FAMILY, 3)
    assert verify_countdown(div, "8/4=2;2*3=6;#6") == 1.0
    assert verify_countdown(div, "3/4=0;8-4=4;4+0=4;#6") == 0.0  # inexact division
    neg = Task("3,9>6=", "", COUNTDOWN_FAMILY, 2)
    assert verify_countdown(neg, "9-3=6;#6") == 1.0 and verify_countdown(neg, "3-9=6;#6") == 0.0


def test_countdown_solutions_hand_enumerated() -> None:
    # From (7, 8, 9) only 8*7+9 and 9*8-7 reach 65 (every other pairing and operation checked by hand).
    assert solutions([8, 7, 9], 65) == ["8*7=56;56+9=65;#65", "9*8=72;72-7=65;#65"]
    assert solutions([8, 7, 9], 1000) == []
    assert reachable((2, 3)) == frozenset({5, 6, 1})  # 3+2, 3*2, 3-2 (3/2 inexact)
    assert solutions([8, 7, 9], 65, limit=1) == ["8*7=56;56+9=65;#65"]


def test_countdown_prompt_round_trip_and_errors() -> None:
    assert countdown_prompt([8, 7, 9], 65) == "8,7,9>65="
    assert parse_prompt("8,7,9>65=") == ([8, 7, 9], 65)
    for bad in ("8,7,9=", "8,,9>6=", ">6="):
        with pytest.raises(ValueError, match="not a countdown prompt"):
            parse_prompt(bad)
    with pytest.raises(ValueError, match=r"countdown difficulty must be in 2\.\.5, got 6"):
        make_countdown_task(6, np.random.default_rng(0))


@pytest.mark.parametrize("n_numbers", [2, 3, 4, 5])
def test_countdown_generator_difficulty_and_reference(n_numbers: int) -> None:
    rng = np.random.default_rng(n_numbers)
    for _ in range(10):
        task = make_countdown_task(n_numbers, rng)
        numbers, target = parse_prompt(task.prompt)
        assert task.difficulty == n_numbers == len(numbers) and task.family == COUNTDOWN_FAMILY
        assert all(1 <= x <= 9 for x in numbers) and 10 <= target <= 99 and target not in numbers
        assert verify_countdown(task, task.answer + "$") == 1.0
        assert task.answer.count(";") == n_numbers - 1  # every solution takes n - 1 steps
        assert task.answer == solutions(numbers, target)[0]


def test_countdown_sets_are_seeded_and_sft_paths_vary() -> None:
    a = make_countdown_set(20, np.random.default_rng(3), difficulties=(3, 4))
    assert a == make_countdown_set(20, np.random.default_rng(3), difficulties=(3, 4))
    assert {t.difficulty for t in a} == {3, 4}
    sft = make_countdown_sft_set(200, np.random.default_rng(0), difficulties=(4,), reference_share=0.5)
    assert all(verify_countdown(t, t.answer) == 1.0 for t in sft)
    references = [solutions(*parse_prompt(t.prompt))[0] for t in sft]
    others = sum(t.answer != r for t, r in zip(sft, references, strict=True))
    assert 40 <= others <= 100  # about half draw another path (a few draws land on the reference again)
    with pytest.raises(ValueError, match="reference_share"):
        make_countdown_sft_set(1, np.random.default_rng(0), reference_share=1.5)


def test_carry_hand_cases() -> None:
    task = Task("53+71+92=", "18", CARRY_FAMILY, 3)  # 35 + 17 + 29 = 81
    assert operands(task) == [35, 17, 29] and carry_count(task) == 1  # units 21 carry 2, tens 3+1+2+2 = 8
    assert trace(task, "short") == "#18" and trace(task, "long") == "53+71=25;25+92=18;#18"
    assert trace_tokens(task, "short") == 4 and trace_tokens(task, "long") == 22
    assert verify_carry(task, "#18$") == verify_carry(task, "53+71=25;25+92=18;#18$") == 1.0
    assert verify_carry(task, "99;#18") == 1.0  # steps are not graded
    assert verify_carry(task, "18$") == 0.0 and verify_carry(task, "#81$") == 0.0
    assert carry_count(Task("99+99=", "891", CARRY_FAMILY, 2)) == 2  # 18 carry 1, 9+9+1 = 19 carry 1
    assert operands(Task("20<53+71=", "", CARRY_FAMILY, 2)) == [35, 17]  # budget prefix
    with pytest.raises(ValueError, match="unknown carry trace style"):
        trace(task, "medium")


def test_carry_generator_and_sft_mix() -> None:
    rng = np.random.default_rng(0)
    for k in (2, 4, 6):
        task = make_carry_task(k, rng, digits=3)
        nums = operands(task)
        assert task.difficulty == k == len(nums) and all(100 <= x <= 999 for x in nums)
        assert task.answer == str(sum(nums))[::-1]
        assert verify_carry(task, trace(task, "long")) == verify_carry(task, trace(task, "short")) == 1.0
    with pytest.raises(ValueError, match=r"carry difficulty must be in 2\.\.6, got 7"):
        make_carry_task(7, rng)
    assert make_carry_set(10, np.random.default_rng(1)) == make_carry_set(10, np.random.default_rng(1))
    sft = make_carry_sft_set(400, np.random.default_rng(2), long_share=0.5, budgets=(5, 40), budget_share=0.5)
    plain = [t for t in sft if "<" not in t.prompt]
    budget = [t for t in sft if "<" in t.prompt]
    assert 150 <= len(plain) <= 250
    assert all(t.answer.rsplit("#", 1)[1] == str(sum(operands(t)))[::-1] for t in sft)  # every trace is correct
    assert 0.35 <= np.mean([";" in t.answer for t in plain]) <= 0.65
    for t in budget:  # the long trace exactly when it fits the stated budget
        plain_task = Task(t.prompt.split("<")[1], str(sum(operands(t)))[::-1], CARRY_FAMILY, t.difficulty)
        assert (";" in t.answer) == (trace_tokens(plain_task, "long") <= int(t.prompt.split("<")[0]))
    assert {";" in t.answer for t in budget} == {True, False}


def test_tool_needed_labels_hand_cases() -> None:
    def calc(prompt: str, ops: int) -> Task:
        return Task(prompt, "", "calc", ops)

    assert not needs_tool(calc("7*8=", 1)) and not needs_tool(calc("0+9=", 1))
    assert needs_tool(calc("17*8=", 1)) and needs_tool(calc("7*18=", 1)) and needs_tool(calc("3+4*5=", 2))
    with pytest.raises(ValueError, match="needs a 'calc' task"):
        needs_tool(CD)


def test_tool_mix_sets() -> None:
    tasks = make_tool_mix_set(400, np.random.default_rng(0), no_tool_share=0.25, operations=(1, 2))
    share = np.mean([not needs_tool(t) for t in tasks])
    assert 0.18 <= share <= 0.32 and {t.difficulty for t in tasks} == {1, 2}
    sft = make_tool_mix_sft_set(600, np.random.default_rng(1), no_tool_share=0.5, overuse=0.6, operations=(1,))
    assert all(verify_calc(Task(t.prompt, str(calculate(t.prompt[:-1])), "calc", 1), t.answer) == 1.0 for t in sft)
    assert all("<calc>" in t.answer for t in sft if needs_tool(t))
    no_tool = [t for t in sft if not needs_tool(t)]
    assert 0.5 <= np.mean(["<calc>" in t.answer for t in no_tool]) <= 0.7
