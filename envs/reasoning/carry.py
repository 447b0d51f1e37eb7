"""Multi-operand addition with carries at graded lengths, answered short or long (the ``carry`` family).

A prompt is a sum of ``k`` numbers of ``digits`` digits each, every number written least-significant digit first (as
in the ``add`` family): ``"53+71+92="`` is 35 + 17 + 29. The answer is the reversed sum, ``"18"`` (81). A completion
either answers at once, ``"#18"`` (**short**: every column's digits and its carry, which can exceed one, summed in one
go), or first adds the operands pairwise, left to right, one step per addition, ``"53+71=25;25+92=18;#18"``
(**long**: each step is a two-operand carried addition). :func:`verify_carry` reads only the text after the last
``#``, so both are correct and their lengths differ by a factor that grows with ``k``: the room that length
controllers (HBPO, ALP, ADR/EHPO's fast and slow modes) need. The short answer gets harder with ``k`` (more digits per
column, larger carries), the long one stays a chain of easy steps, so a length that is wasted on an easy prompt pays
on a hard one.

Difficulty is the number of operands ``k`` (2..:data:`MAX_CARRY_OPERANDS`), known by construction;
:func:`carry_count` gives the columns whose sum carries. :func:`make_carry_sft_set` mixes short and long traces (and
optionally budget prompts, ``"12<53+71+92="``, :func:`envs.reasoning.scratchpad.budget_prompt`, whose trace is the
longest that fits).

Plain Python plus numpy; no other rolloutlab package is imported.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from envs.reasoning.scratchpad import BUDGET_MARK, budget_prompt
from envs.reasoning.tasks import Task

#: Family name of the carry tasks (``Task.family``); ``Task.difficulty`` is the number of operands.
CARRY_FAMILY = "carry"
#: Closes a step; the answer follows the mark.
STEP_END, ANSWER_MARK = ";", "#"
#: Every character a prompt (budget prompts included) or a completion can contain.
CARRY_ALPHABET = "0123456789+=;#<"
#: Trace styles: ``short`` (``#18``) and ``long`` (``53+71=25;25+92=18;#18``).
CARRY_STYLES: tuple[str, ...] = ("short", "long")
#: Fewest and most operands (difficulty range), and most digits per operand.
MIN_CARRY_OPERANDS, MAX_CARRY_OPERANDS, MAX_CARRY_DIGITS = 2, 6, 4


def _rev(n: int) -> str:
    return str(n)[::-1]


def operands(task: Task) -> list[int]:
    """The operands of a carry prompt (budget prefix allowed), as ordinary integers: ``"53+71+92="`` gives
    ``[35, 17, 29]``.

    Raises:
        ValueError: Not a sum of reversed numbers.
    """
    body = task.prompt.split(BUDGET_MARK)[-1].removesuffix("=")
    parts = body.split("+")
    if len(parts) < 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"not a carry prompt: {task.prompt!r}")
    return [int(p[::-1]) for p in parts]


def carry_count(task: Task) -> int:
    """Columns (least-significant first) whose digit sum plus incoming carry is 10 or more.

    ``"53+71+92="`` (35 + 17 + 29): units 5 + 7 + 9 = 21 carry 2, tens 3 + 1 + 2 + 2 = 8: one carrying column.
    """
    nums = operands(task)
    width = max(len(str(x)) for x in nums)
    carry, count = 0, 0
    for col in range(width):
        total = carry + sum((x // 10**col) % 10 for x in nums)
        carry = total // 10
        count += carry > 0
    return count


def make_carry_task(k: int, rng: np.random.Generator, digits: int = 2) -> Task:
    """A sum of ``k`` numbers with exactly ``digits`` digits each (reversed digits).

    Raises:
        ValueError: ``k`` outside ``2..MAX_CARRY_OPERANDS`` or ``digits`` outside ``1..MAX_CARRY_DIGITS``.
    """
    if not MIN_CARRY_OPERANDS <= k <= MAX_CARRY_OPERANDS:
        raise ValueError(f"carry difficulty must be in {MIN_CARRY_OPERANDS}..{MAX_CARRY_OPERANDS}, got {k}")
    if not 1 <= digits <= MAX_CARRY_DIGITS:
        raise ValueError(f"carry digits must be in 1..{MAX_CARRY_DIGITS}, got {digits}")
    low = 0 if digits == 1 else 10 ** (digits - 1)
    nums = [int(x) for x in rng.integers(low, 10**digits, size=k)]
    return Task("+".join(_rev(x) for x in nums) + "=", _rev(sum(nums)), CARRY_FAMILY, k)


def make_carry_set(
    n: int, rng: np.random.Generator, difficulties: Sequence[int] = (2, 3, 4), digits: int = 2
) -> list[Task]:
    """``n`` carry tasks, the number of operands drawn uniformly from ``difficulties`` per task."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    picks = rng.choice(len(difficulties), size=n)
    return [make_carry_task(int(difficulties[int(i)]), rng, digits) for i in picks]


def trace(task: Task, style: str) -> str:
    """The reference completion of ``task`` in ``style`` (one of :data:`CARRY_STYLES`), without EOS.

    Raises:
        ValueError: Unknown style.
    """
    if style == "short":
        return f"{ANSWER_MARK}{task.answer}"
    if style == "long":
        nums = operands(task)
        steps, total = [], nums[0]
        for x in nums[1:]:
            steps.append(f"{_rev(total)}+{_rev(x)}={_rev(total + x)}{STEP_END}")
            total += x
        return "".join(steps) + f"{ANSWER_MARK}{task.answer}"
    raise ValueError(f"unknown carry trace style {style!r}; known: {', '.join(CARRY_STYLES)}")


def trace_tokens(task: Task, style: str) -> int:
    """Completion tokens of the reference trace in ``style``, EOS included (one token per character)."""
    return len(trace(task, style)) + 1


def verify_carry(task: Task, completion: str, eos: str = "$") -> float:
    """1.0 when the text after the last ``#`` of ``completion`` (cut at the first ``eos``) is the answer, else 0.0;
    the steps before it are not graded."""
    text = completion.split(eos, 1)[0]
    if ANSWER_MARK not in text:
        return 0.0
    return 1.0 if text.rsplit(ANSWER_MARK, 1)[1].strip() == task.answer else 0.0


def make_carry_sft_set(
    n: int,
    rng: np.random.Generator,
    difficulties: Sequence[int] = (2, 3, 4),
    long_share: float = 0.5,
    digits: int = 2,
    budgets: Sequence[int] = (),
    budget_share: float = 0.0,
) -> list[Task]:
    """``n`` warm-start examples ``Task(prompt, trace, "carry", k)``; train on ``prompt → answer + EOS``.

    A share ``1 − budget_share`` have plain prompts with the long trace with probability ``long_share`` (else the short
    one), whatever the difficulty, so short and long correct traces exist on every prompt; the rest state a budget
    drawn from ``budgets`` and carry the long trace when it fits the budget, else the short one.

    Raises:
        ValueError: Shares outside ``[0, 1]``, or a budget share without budgets.
    """
    if not (0.0 <= long_share <= 1.0 and 0.0 <= budget_share <= 1.0):
        raise ValueError(f"long_share and budget_share must be in [0, 1], got {long_share}, {budget_share}")
    if budget_share > 0 and not budgets:
        raise ValueError("budget_share > 0 needs budgets")
    out = []
    for task in make_carry_set(n, rng, difficulties, digits):
        if budgets and rng.random() < budget_share:
            budget = int(budgets[int(rng.integers(len(budgets)))])
            style = "long" if trace_tokens(task, "long") <= budget else "short"
            out.append(Task(budget_prompt(task.prompt, budget), trace(task, style), task.family, task.difficulty))
        else:
            style = "long" if rng.random() < long_share else "short"
            out.append(Task(task.prompt, trace(task, style), task.family, task.difficulty))
    return out
