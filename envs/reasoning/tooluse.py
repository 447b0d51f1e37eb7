"""Multi-step arithmetic with a calculator tool: the verifiable tool-use family (``calc``).

A prompt is an integer expression over ``+ - *`` with the usual precedence, e.g. ``"3+45*2-7="``; the answer is its
value (``"86"``, digits most-significant first, a leading ``-`` when negative). The model may write

* a **calculator call** ``<calc>EXPR</calc>``: the environment evaluates ``EXPR`` with :func:`calculate` (a small
  recursive-descent parser, never Python's ``eval``) and inserts the result text right after the closing tag
  (:func:`tool_response`; ``?`` when the expression is refused), and
* a **scratchpad**: intermediate steps such as ``45*2=90;``,

and ends with ``#ANSWER``. :func:`verify_calc` gives 1.0 when the text after the last ``#`` (up to the
end-of-sequence character) is exactly the answer, else 0.0. So tool calls, the entropy after a tool result and the
answer length all vary between responses, as ARPO / ADR / HAPO need.

:func:`trace` writes the reference completion of a task in one of :data:`TRACE_STYLES` (direct answer, scratchpad,
one calculator call per step, one call for the whole expression), and :func:`make_sft_set` mixes them into
supervised warm-start examples (``Task`` objects whose ``answer`` is the whole trace, the form
:func:`meta.rlvr.sft.fit_sft` trains on).

Plain Python plus numpy; no other rolloutlab package is imported.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from envs.reasoning.tasks import Task

#: Family name of the tool-use tasks (``Task.family``); ``Task.difficulty`` is the number of operations.
CALC_FAMILY = "calc"
#: Opening and closing tags of a calculator call.
CALL_OPEN, CALL_CLOSE = "<calc>", "</calc>"
#: What the environment inserts when it refuses an expression.
REFUSED = "?"
#: Every character a prompt, a trace or a tool result can contain (a character vocabulary for the char LM).
TOOL_ALPHABET = "0123456789+-*=<>/cal;#?"
#: Reference trace styles: ``direct`` (``#86``), ``scratch`` (``45*2=90;3+90=93;93-7=86;#86``), ``tool`` (one call per
#: step: ``<calc>45*2</calc>90;<calc>3+90</calc>93;...#86``) and ``tool_once`` (``<calc>3+45*2-7</calc>86#86``).
TRACE_STYLES: tuple[str, ...] = ("direct", "scratch", "tool", "tool_once")
#: Longest expression :func:`calculate` accepts (characters), most operands and most digits per literal: a model
#: cannot make the environment compute arbitrarily large numbers.
MAX_EXPR_CHARS = 64
MAX_OPERANDS = 8
MAX_LITERAL_DIGITS = 9


class CalcError(ValueError):
    """An expression :func:`calculate` refuses (malformed, too long, or with a character outside ``0-9 + - *``)."""


def _tokens(expr: str) -> list[str]:
    """Split ``expr`` into integer literals and operators; the first literal may carry a leading ``-``."""
    if not expr:
        raise CalcError("empty expression")
    if len(expr) > MAX_EXPR_CHARS:
        raise CalcError(f"expression longer than {MAX_EXPR_CHARS} characters")
    out: list[str] = []
    i = 0
    expect_number = True
    while i < len(expr):
        c = expr[i]
        if expect_number:
            j = i + 1 if (c == "-" and i == 0) else i  # unary minus on the first literal only
            k = j
            while k < len(expr) and expr[k] in "0123456789":
                k += 1
            if k == j:
                raise CalcError(f"expected a number at position {i} of {expr!r}")
            if k - j > MAX_LITERAL_DIGITS:
                raise CalcError(f"literal longer than {MAX_LITERAL_DIGITS} digits in {expr!r}")
            out.append(expr[i:k])
            i = k
            expect_number = False
        else:
            if c not in "+-*":
                raise CalcError(f"unexpected {c!r} at position {i} of {expr!r} (only + - * on integers)")
            out.append(c)
            i += 1
            expect_number = True
    if expect_number:
        raise CalcError(f"expression {expr!r} ends with an operator")
    if (len(out) + 1) // 2 > MAX_OPERANDS:
        raise CalcError(f"more than {MAX_OPERANDS} operands in {expr!r}")
    return out


def calculate(expr: str) -> int:
    """Value of an integer expression over ``+ - *`` with the usual precedence (``*`` first, then left to right).

    Grammar: ``expr := ['-'] number (op number)*``, ``op := '+' | '-' | '*'``, ``number := [0-9]{1,9}``; no spaces,
    parentheses, division or powers (``**`` is two operators in a row and refused).

    Raises:
        CalcError: The expression is malformed, too long, or has a character outside that grammar.
    """
    toks = _tokens(expr)
    terms: list[int] = []  # signed terms of the sum, each a product
    sign = 1
    product = int(toks[0])
    for op, lit in zip(toks[1::2], toks[2::2], strict=True):
        if op == "*":
            product *= int(lit)
        else:
            terms.append(sign * product)
            sign = 1 if op == "+" else -1
            product = int(lit)
    terms.append(sign * product)
    return sum(terms)


def tool_response(text: str) -> str | None:
    """What the environment inserts after ``text`` (the completion so far), or ``None`` when no call just closed.

    When ``text`` ends with ``</calc>``, the expression between the last ``<calc>`` and that tag is evaluated; the
    result's digits are returned, or :data:`REFUSED` when :func:`calculate` refuses it (or no ``<calc>`` opens it).
    """
    if not text.endswith(CALL_CLOSE):
        return None
    body = text[: -len(CALL_CLOSE)]
    start = body.rfind(CALL_OPEN)
    if start < 0:
        return REFUSED
    try:
        return str(calculate(body[start + len(CALL_OPEN) :]))
    except CalcError:
        return REFUSED


def make_calc_task(operations: int, rng: np.random.Generator, max_operand: int = 99) -> Task:
    """A random expression with ``operations`` operators (``operations + 1`` operands in ``0..max_operand``).

    Raises:
        ValueError: ``operations`` not in ``1..MAX_OPERANDS-1`` or ``max_operand`` not in ``1..999``.
    """
    if not 1 <= operations < MAX_OPERANDS:
        raise ValueError(f"operations must be in 1..{MAX_OPERANDS - 1}, got {operations}")
    if not 1 <= max_operand <= 999:
        raise ValueError(f"max_operand must be in 1..999, got {max_operand}")
    operands = [int(x) for x in rng.integers(0, max_operand + 1, size=operations + 1)]
    ops = [str(o) for o in rng.choice(list("+-*"), size=operations)]
    expr = str(operands[0]) + "".join(f"{o}{x}" for o, x in zip(ops, operands[1:], strict=True))
    return Task(f"{expr}=", str(calculate(expr)), CALC_FAMILY, operations)


def make_calc_set(
    n: int, rng: np.random.Generator, operations: Sequence[int] = (1, 2, 3), max_operand: int = 99
) -> list[Task]:
    """``n`` calc tasks, the number of operations drawn uniformly from ``operations`` per task."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    picks = rng.choice(len(operations), size=n)
    return [make_calc_task(int(operations[int(i)]), rng, max_operand) for i in picks]


def verify_calc(task: Task, completion: str, eos: str = "$") -> float:
    """1.0 when the text after the last ``#`` of ``completion`` (cut at the first ``eos``) equals the answer.

    A completion without ``#`` scores 0.0; tool calls and scratchpad before the ``#`` are not graded.
    """
    text = completion.split(eos, 1)[0]
    if "#" not in text:
        return 0.0
    return 1.0 if text.rsplit("#", 1)[1].strip() == task.answer else 0.0


def reduction_steps(expr: str) -> list[tuple[str, int]]:
    """The scratchpad's steps: ``(sub-expression, value)`` pairs, multiplications first, then left to right.

    ``"3+45*2-7"`` gives ``[("45*2", 90), ("3+90", 93), ("93-7", 86)]``. Each sub-expression is one that
    :func:`calculate` accepts (a negative intermediate value appears only as the first literal).
    """
    toks = _tokens(expr)
    steps: list[tuple[str, int]] = []
    while len(toks) > 1:
        ops = toks[1::2]
        k = ops.index("*") if "*" in ops else 0
        left, op, right = toks[2 * k], toks[2 * k + 1], toks[2 * k + 2]
        sub = f"{left}{op}{right}"
        # Only the first literal can be negative: it becomes so in a +/- step, which comes after every product.
        value = calculate(sub)
        steps.append((sub, value))
        toks = [*toks[: 2 * k], str(value), *toks[2 * k + 3 :]]
    return steps


def trace(task: Task, style: str) -> str:
    """The reference completion of a calc ``task`` in ``style`` (one of :data:`TRACE_STYLES`), without EOS.

    In the tool styles the text right after each ``</calc>`` is the calculator's result: during sampling the
    environment inserts it (:func:`tool_response`); in a supervised trace it is simply part of the target.

    Raises:
        ValueError: Unknown style, or a task of another family.
    """
    if task.family != CALC_FAMILY:
        raise ValueError(f"trace() needs a {CALC_FAMILY!r} task, got family {task.family!r}")
    expr = task.prompt.removesuffix("=")
    if style == "direct":
        return f"#{task.answer}"
    if style == "tool_once":
        return f"{CALL_OPEN}{expr}{CALL_CLOSE}{task.answer}#{task.answer}"
    if style == "scratch":
        return "".join(f"{sub}={value};" for sub, value in reduction_steps(expr)) + f"#{task.answer}"
    if style == "tool":
        calls = "".join(f"{CALL_OPEN}{sub}{CALL_CLOSE}{value};" for sub, value in reduction_steps(expr))
        return calls + f"#{task.answer}"
    raise ValueError(f"unknown trace style {style!r}; known: {', '.join(TRACE_STYLES)}")


def make_sft_set(
    n: int,
    rng: np.random.Generator,
    style_weights: Sequence[float] = (1.0, 1.0, 1.0, 1.0),
    operations: Sequence[int] = (1, 2, 3),
    max_operand: int = 99,
) -> list[Task]:
    """``n`` supervised warm-start examples: calc tasks whose ``answer`` is a reference trace.

    Args:
        n: Number of examples.
        rng: Source of randomness (tasks and styles); the same generator state gives the same examples.
        style_weights: Relative frequency of each of :data:`TRACE_STYLES` (a mix with and without tool calls).
        operations: Numbers of operations to mix.
        max_operand: Largest operand.

    Returns:
        ``Task(prompt, trace, "calc", operations)`` per example; train on ``prompt → answer + EOS``.
    """
    w = np.asarray(style_weights, dtype=float)
    if w.shape != (len(TRACE_STYLES),) or (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"style_weights must be {len(TRACE_STYLES)} non-negative numbers with a positive sum")
    tasks = make_calc_set(n, rng, operations, max_operand)
    styles = rng.choice(len(TRACE_STYLES), size=n, p=w / w.sum())
    return [
        Task(t.prompt, trace(t, TRACE_STYLES[int(s)]), t.family, t.difficulty)
        for t, s in zip(tasks, styles, strict=True)
    ]
