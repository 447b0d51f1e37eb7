"""Reversed-digit addition with an optional, variable-length scratchpad: the budget family (``scratch``).

The prompt is the ``add`` family's (``"35+7="``: 53 + 7, digits least-significant first) and the answer the same
reversed sum (``"06"``). A completion may first write a **scratchpad**, the carry out of every column of the long
operand, least-significant column first, closed by ``;`` (``"10;"``: 3+7 carries one, 5+0+1 does not), and then
``#ANSWER``; or skip the scratchpad and write ``#ANSWER`` at once. :func:`verify_scratch` gives 1.0 when the text after
the last ``#`` (up to the end-of-sequence character) is exactly the answer. The scratchpad is never graded, so its
length (0, or ``difficulty + 1`` tokens) is the model's choice, and it grows with the difficulty: the setting in which
a token budget stated in the prompt (HBPO, :mod:`meta.rlvr.guidance.hbpo`) has something to trade.

A **budget prompt** (:func:`budget_prompt`) states a completion budget in tokens before the problem, ``"9<35+7="``;
:func:`trace` writes the reference completion in a style, and :func:`make_scratch_sft_set` mixes plain and budget
prompts into warm-start examples whose traces fit their budgets (the scratchpad when it fits, else the direct answer).

Plain Python plus numpy; no other rolloutlab package is imported.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from envs.reasoning.tasks import Task, make_task

#: Family name of the scratchpad tasks (``Task.family``); ``Task.difficulty`` is the digits of the long operand.
SCRATCH_FAMILY = "scratch"
#: Closes the scratchpad.
PAD_END = ";"
#: The answer follows this character.
ANSWER_MARK = "#"
#: Separates a stated budget from the problem.
BUDGET_MARK = "<"
#: Every character a prompt, budget or completion can contain (a character vocabulary for the char LM).
SCRATCH_ALPHABET = "0123456789+*=;#<"
#: Reference completion styles: ``direct`` (``#06``) and ``scratch`` (``10;#06``).
SCRATCH_STYLES: tuple[str, ...] = ("direct", "scratch")
#: Most digits of the long operand (the prompt and the longest trace must fit a small model's positions).
MAX_SCRATCH_DIGITS = 5


def _operands(task: Task) -> tuple[str, str]:
    """The two reversed operands of a scratch (or add) task's prompt."""
    left, _, right = task.prompt.split(BUDGET_MARK)[-1].removesuffix("=").partition("+")
    if not left or not right:
        raise ValueError(f"not an addition prompt: {task.prompt!r}")
    return left, right


def carries(task: Task) -> str:
    """The scratchpad's carries: ``"1"`` or ``"0"`` per column of the longer operand, least-significant first.

    ``"35+7="`` (53 + 7): column 0 is 3 + 7 = 10 (carry 1), column 1 is 5 + 0 + 1 = 6 (carry 0), so ``"10"``.
    """
    a, b = _operands(task)
    width = max(len(a), len(b))
    out, carry = [], 0
    for i in range(width):
        da = int(a[i]) if i < len(a) else 0
        db = int(b[i]) if i < len(b) else 0
        carry = (da + db + carry) // 10
        out.append(str(carry))
    return "".join(out)


def trace(task: Task, style: str) -> str:
    """The reference completion of ``task`` in ``style`` (one of :data:`SCRATCH_STYLES`), without EOS.

    Raises:
        ValueError: Unknown style.
    """
    if style == "direct":
        return f"{ANSWER_MARK}{task.answer}"
    if style == "scratch":
        return f"{carries(task)}{PAD_END}{ANSWER_MARK}{task.answer}"
    raise ValueError(f"unknown scratchpad style {style!r}; known: {', '.join(SCRATCH_STYLES)}")


def trace_tokens(task: Task, style: str) -> int:
    """Completion tokens of the reference trace in ``style``, end-of-sequence included (one token per character)."""
    return len(trace(task, style)) + 1


def budget_prompt(prompt: str, budget: int) -> str:
    """``prompt`` with a completion budget of ``budget`` tokens stated before it: ``"9<35+7="``.

    Raises:
        ValueError: ``budget`` below 1.
    """
    if budget < 1:
        raise ValueError(f"a token budget must be >= 1, got {budget}")
    return f"{int(budget)}{BUDGET_MARK}{prompt}"


def make_scratch_task(difficulty: int, rng: np.random.Generator) -> Task:
    """One scratch task: reversed-digit addition whose long operand has ``difficulty`` digits.

    Raises:
        ValueError: ``difficulty`` outside ``1..MAX_SCRATCH_DIGITS``.
    """
    if not 1 <= difficulty <= MAX_SCRATCH_DIGITS:
        raise ValueError(f"difficulty must be in 1..{MAX_SCRATCH_DIGITS}, got {difficulty}")
    task = make_task("add", difficulty, rng)
    return Task(task.prompt, task.answer, SCRATCH_FAMILY, difficulty)


def make_scratch_set(n: int, rng: np.random.Generator, difficulties: Sequence[int] = (1, 2, 3)) -> list[Task]:
    """``n`` scratch tasks, the difficulty drawn uniformly from ``difficulties`` per task."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    picks = rng.choice(len(difficulties), size=n)
    return [make_scratch_task(int(difficulties[int(i)]), rng) for i in picks]


def verify_scratch(task: Task, completion: str, eos: str = "$") -> float:
    """1.0 when the text after the last ``#`` of ``completion`` (cut at the first ``eos``) equals the answer.

    A completion without ``#`` scores 0.0; the scratchpad before it is not graded.
    """
    text = completion.split(eos, 1)[0]
    if ANSWER_MARK not in text:
        return 0.0
    return 1.0 if text.rsplit(ANSWER_MARK, 1)[1].strip() == task.answer else 0.0


def fitting_style(task: Task, budget: int) -> str:
    """The longest reference style whose trace fits ``budget`` tokens (``direct`` when none does)."""
    return "scratch" if trace_tokens(task, "scratch") <= budget else "direct"


def make_scratch_sft_set(
    n: int,
    rng: np.random.Generator,
    difficulties: Sequence[int] = (1, 2, 3),
    scratch_share: float = 0.5,
    budgets: Sequence[int] = (),
    budget_share: float = 0.0,
) -> list[Task]:
    """``n`` warm-start examples: ``Task(prompt, trace, "scratch", d)``; train on ``prompt → answer + EOS``.

    A share ``1 − budget_share`` of the examples have plain prompts with the scratchpad trace with probability
    ``scratch_share`` (else the direct one); the rest state a budget drawn from ``budgets`` and carry the trace that
    fits it (:func:`fitting_style`).

    Raises:
        ValueError: Shares outside ``[0, 1]``, or a budget share without budgets.
    """
    if not (0.0 <= scratch_share <= 1.0 and 0.0 <= budget_share <= 1.0):
        raise ValueError(f"shares must be in [0, 1], got {scratch_share}, {budget_share}")
    if budget_share > 0 and not budgets:
        raise ValueError("budget_share > 0 needs budgets")
    out = []
    for task in make_scratch_set(n, rng, difficulties):
        if budgets and rng.random() < budget_share:
            budget = int(budgets[int(rng.integers(len(budgets)))])
            out.append(
                Task(
                    budget_prompt(task.prompt, budget),
                    trace(task, fitting_style(task, budget)),
                    task.family,
                    task.difficulty,
                )
            )
        else:
            style = "scratch" if rng.random() < scratch_share else "direct"
            out.append(Task(task.prompt, trace(task, style), task.family, task.difficulty))
    return out
