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
:func:`meta.rlvr.trainers.sft.fit_sft` trains on).

:class:`CalcOptions` (default off, the behaviour above) restricts the calculator to a few operations per call
(``call_operations=1``: ``<calc>3+45*2-7</calc>`` gets the refusal ``?``, so a multi-step problem needs one call per
step or a scratchpad) and sets the largest operand per difficulty (``operand_limits``: e.g. single digits on
one-operation tasks, which a small model can answer directly, and up to 99 on the longer ones).

:func:`needs_tool` labels a task by construction (only one operation on single digits needs no calculator);
:func:`make_tool_mix_set` mixes such tasks with ones that need it, and :func:`make_tool_mix_sft_set` writes warm-start
traces that call the calculator on a share of the tasks that do not need it.

Plain Python plus numpy; no other rolloutlab package is imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

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
#: Largest operand of a task unless :attr:`CalcOptions.operand_limits` says otherwise.
DEFAULT_MAX_OPERAND = 99


@dataclass
class CalcOptions:
    """The calculator and task mix of the ``calc`` family, shared by the SFT and GRPO configs (defaults: off).

    Attributes:
        call_operations: Most operations one calculator call may hold (``<calc>45*2</calc>`` holds one); a call with
            more gets the refusal :data:`REFUSED`. 0: any expression :func:`calculate` accepts (the default).
        operand_limits: Largest operand of the tasks of each entry of the config's ``difficulties`` (same length),
            e.g. ``[9, 99, 99, 99]`` with difficulties ``[1, 2, 3, 4]``: one-operation tasks on single digits. Empty:
            :data:`DEFAULT_MAX_OPERAND` for every difficulty (the default).
    """

    call_operations: int = 0
    operand_limits: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.call_operations < 0:
            raise ValueError(f"calc.call_operations must be >= 0 (0: any), got {self.call_operations}")
        bad = [m for m in self.operand_limits if not 1 <= m <= 999]
        if bad:
            raise ValueError(f"calc.operand_limits must lie in 1..999, got {bad}")

    def limits(self, difficulties: Sequence[int]) -> list[int]:
        """Largest operand per entry of ``difficulties``.

        Raises:
            ValueError: ``operand_limits`` is set but not one per difficulty.
        """
        if not self.operand_limits:
            return [DEFAULT_MAX_OPERAND] * len(difficulties)
        if len(self.operand_limits) != len(difficulties):
            raise ValueError(
                f"calc.operand_limits needs one limit per difficulty ({len(difficulties)}), "
                f"got {len(self.operand_limits)}"
            )
        return list(self.operand_limits)

    def check_styles(self, style_weights: Sequence[float], difficulties: Sequence[int]) -> None:
        """Refuse a trace mix the calculator could not answer: ``tool_once`` traces of tasks with more operations
        than a call may hold (the calculator would refuse them).

        Raises:
            ValueError: A positive ``tool_once`` weight with such tasks in the mix.
        """
        once = style_weights[TRACE_STYLES.index("tool_once")] if len(style_weights) == len(TRACE_STYLES) else 0.0
        if self.call_operations and once > 0 and max(difficulties, default=0) > self.call_operations:
            raise ValueError(
                f"tool_once traces need one call for the whole expression, but calc.call_operations is "
                f"{self.call_operations} and difficulties reach {max(difficulties)}: set its style weight to 0"
            )


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


def calculate(expr: str, max_operations: int = 0) -> int:
    """Value of an integer expression over ``+ - *`` with the usual precedence (``*`` first, then left to right).

    Grammar: ``expr := ['-'] number (op number)*``, ``op := '+' | '-' | '*'``, ``number := [0-9]{1,9}``; no spaces,
    parentheses, division or powers (``**`` is two operators in a row and refused). ``max_operations`` > 0 also
    refuses an expression with more operators than that (the leading minus of the first literal is a sign, not one).

    Raises:
        CalcError: The expression is malformed, too long, has a character outside that grammar, or has more than
            ``max_operations`` operations.
    """
    toks = _tokens(expr)
    if max_operations and len(toks) // 2 > max_operations:
        raise CalcError(f"more than {max_operations} operation(s) in {expr!r}")
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


def tool_response(text: str, max_operations: int = 0) -> str | None:
    """What the environment inserts after ``text`` (the completion so far), or ``None`` when no call just closed.

    When ``text`` ends with ``</calc>``, the expression between the last ``<calc>`` and that tag is evaluated; the
    result's digits are returned, or :data:`REFUSED` when :func:`calculate` refuses it (or no ``<calc>`` opens it),
    including when it holds more than ``max_operations`` operations (> 0; :attr:`CalcOptions.call_operations`).
    """
    if not text.endswith(CALL_CLOSE):
        return None
    body = text[: -len(CALL_CLOSE)]
    start = body.rfind(CALL_OPEN)
    if start < 0:
        return REFUSED
    try:
        return str(calculate(body[start + len(CALL_OPEN) :], max_operations))
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
    n: int,
    rng: np.random.Generator,
    operations: Sequence[int] = (1, 2, 3),
    max_operand: int = DEFAULT_MAX_OPERAND,
    operand_limits: Sequence[int] | None = None,
) -> list[Task]:
    """``n`` calc tasks, the entry of ``operations`` drawn uniformly per task (repeat an entry to weight it).

    ``operand_limits`` (one per entry of ``operations``, :meth:`CalcOptions.limits`) overrides ``max_operand`` per
    entry; without it every task draws operands up to ``max_operand`` exactly as before.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    limits = [max_operand] * len(operations) if operand_limits is None else list(operand_limits)
    if len(limits) != len(operations):
        raise ValueError(f"need one operand limit per entry of operations, got {len(limits)} and {len(operations)}")
    picks = rng.choice(len(operations), size=n)
    return [make_calc_task(int(operations[int(i)]), rng, int(limits[int(i)])) for i in picks]


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
    max_operand: int = DEFAULT_MAX_OPERAND,
    options: CalcOptions | None = None,
) -> list[Task]:
    """``n`` supervised warm-start examples: calc tasks whose ``answer`` is a reference trace.

    Args:
        n: Number of examples.
        rng: Source of randomness (tasks and styles); the same generator state gives the same examples.
        style_weights: Relative frequency of each of :data:`TRACE_STYLES` (a mix with and without tool calls).
        operations: Numbers of operations to mix.
        max_operand: Largest operand (unless ``options`` sets ``operand_limits``).
        options: The restricted calculator and operand limits (:class:`CalcOptions`); ``None``: off.

    Returns:
        ``Task(prompt, trace, "calc", operations)`` per example; train on ``prompt → answer + EOS``.

    Raises:
        ValueError: Bad ``style_weights``, or ``tool_once`` traces the restricted calculator would refuse
            (:meth:`CalcOptions.check_styles`).
    """
    w = np.asarray(style_weights, dtype=float)
    if w.shape != (len(TRACE_STYLES),) or (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"style_weights must be {len(TRACE_STYLES)} non-negative numbers with a positive sum")
    limits = None
    if options is not None:
        options.check_styles(style_weights, operations)
        limits = options.limits(operations) if options.operand_limits else None
    tasks = make_calc_set(n, rng, operations, max_operand, limits)
    styles = rng.choice(len(TRACE_STYLES), size=n, p=w / w.sum())
    return [
        Task(t.prompt, trace(t, TRACE_STYLES[int(s)]), t.family, t.difficulty)
        for t, s in zip(tasks, styles, strict=True)
    ]


#: Largest operand of a task that needs no calculator (:func:`needs_tool`).
NO_TOOL_MAX_OPERAND = 9


def needs_tool(task: Task) -> bool:
    """Whether a calc ``task`` needs the calculator, by construction: every task except a single operation on two
    single-digit operands (``"7*8="``, one arithmetic fact a small model answers directly) does.

    Raises:
        ValueError: A task of another family.
    """
    if task.family != CALC_FAMILY:
        raise ValueError(f"needs_tool() needs a {CALC_FAMILY!r} task, got family {task.family!r}")
    toks = _tokens(task.prompt.removesuffix("="))
    return len(toks) != 3 or max(abs(int(toks[0])), int(toks[2])) > NO_TOOL_MAX_OPERAND


def make_tool_mix_set(
    n: int,
    rng: np.random.Generator,
    no_tool_share: float = 0.5,
    operations: Sequence[int] = (1, 2, 3),
    max_operand: int = DEFAULT_MAX_OPERAND,
) -> list[Task]:
    """``n`` calc tasks, a share ``no_tool_share`` of them needing no calculator (one operation on single digits,
    :func:`needs_tool` false) and the rest needing it (``operations`` drawn per task, operands from 10 up to
    ``max_operand``, so :func:`needs_tool` is true). ``Task.difficulty`` is the number of operations, as in the family.

    Raises:
        ValueError: ``no_tool_share`` outside ``[0, 1]`` or ``max_operand`` below 10.
    """
    if not 0.0 <= no_tool_share <= 1.0:
        raise ValueError(f"no_tool_share must be in [0, 1], got {no_tool_share}")
    if not 10 <= max_operand <= 999:
        raise ValueError(f"max_operand of tool-needed tasks must be in 10..999, got {max_operand}")
    out = []
    for _ in range(n):
        if rng.random() < no_tool_share:
            out.append(make_calc_task(1, rng, NO_TOOL_MAX_OPERAND))
            continue
        ops = int(operations[int(rng.integers(len(operations)))])
        operands = [int(x) for x in rng.integers(10, max_operand + 1, size=ops + 1)]
        signs = [str(o) for o in rng.choice(list("+-*"), size=ops)]
        expr = str(operands[0]) + "".join(f"{o}{x}" for o, x in zip(signs, operands[1:], strict=True))
        out.append(Task(f"{expr}=", str(calculate(expr)), CALC_FAMILY, ops))
    return out


def make_tool_mix_sft_set(
    n: int,
    rng: np.random.Generator,
    no_tool_share: float = 0.5,
    overuse: float = 0.6,
    operations: Sequence[int] = (1, 2, 3),
    max_operand: int = DEFAULT_MAX_OPERAND,
) -> list[Task]:
    """Warm-start examples over :func:`make_tool_mix_set`: a tool-needed task gets the one-call-per-step ``tool``
    trace; a no-tool task gets it too with probability ``overuse`` (a calculator call where none is needed, the habit
    ARPO's fewer-calls headline removes), else the ``direct`` answer.

    Raises:
        ValueError: ``overuse`` outside ``[0, 1]`` (and :func:`make_tool_mix_set`'s errors).
    """
    if not 0.0 <= overuse <= 1.0:
        raise ValueError(f"overuse must be in [0, 1], got {overuse}")
    out = []
    for task in make_tool_mix_set(n, rng, no_tool_share, operations, max_operand):
        style = "tool" if needs_tool(task) or rng.random() < overuse else "direct"
        out.append(Task(task.prompt, trace(task, style), task.family, task.difficulty))
    return out
