"""Countdown: reach a target from given numbers with ``+ - * /`` (the ``countdown`` family).

A prompt lists the numbers and the target, ``"8,7,9>65="``: use 8, 7 and 9, each exactly once, to make 65. A
completion writes a **derivation**, one step per operation, ``a OP b=c;``, and then ``#TARGET``:
``"8*7=56;56+9=65;#65"``. Every step takes two numbers from the pool (the given numbers plus the results of earlier
steps, each usable once) and puts its result back; ``-`` must not go below zero and ``/`` must divide exactly.
:func:`verify_countdown` replays the derivation and gives 1.0 when every step is such an operation, the pool ends as the
target alone (every given number used exactly once, as in TinyZero's Countdown) and the text after the last ``#`` is
the target. It checks the arithmetic, not a reference: **any** valid derivation scores, and most tasks have many
(:func:`solutions`; the order of independent steps, the pairing and the operations all vary), so exploration and the
diversity of a group's answers matter.

Difficulty is the number of given numbers ``n`` (2..:data:`MAX_COUNTDOWN_NUMBERS`), so every solution takes exactly
``n − 1`` steps, known by construction. :func:`make_countdown_task` draws the numbers and builds the target from a
random derivation over all of them, its intermediate values at most ``max_value``; the task's ``answer`` is a
reference derivation (:func:`solutions`' first, in a fixed order), so a hint (a prefix of it, Guide and SEELE) is a
partial solution.

Plain Python plus numpy; no other rolloutlab package is imported.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from envs.reasoning.tasks import Task

#: Family name of the countdown tasks (``Task.family``); ``Task.difficulty`` is the number of given numbers.
COUNTDOWN_FAMILY = "countdown"
#: Separates the given numbers, marks the target, ends a step, marks the answer.
NUMBER_SEP, TARGET_MARK, STEP_END, ANSWER_MARK = ",", ">", ";", "#"
#: Every character a prompt or a completion can contain (a character vocabulary for the char LM).
COUNTDOWN_ALPHABET = "0123456789+-*/=,>;#"
#: Operations, in the order the reference derivation tries them.
OPERATIONS = "+*-/"
#: Fewest and most given numbers (difficulty range).
MIN_COUNTDOWN_NUMBERS, MAX_COUNTDOWN_NUMBERS = 2, 5
#: Largest intermediate value the solver explores (the verifier has no limit of its own beyond the literal length).
SOLVER_VALUE_CAP = 999
#: Longest number literal the verifier reads.
MAX_LITERAL_DIGITS = 6

_STEP = re.compile(r"(\d+)([-+*/])(\d+)=(\d+)")


def apply(a: int, op: str, b: int) -> int | None:
    """``a OP b`` under the countdown rules: ``None`` for a negative difference or an inexact (or by-zero) division."""
    if op == "+":
        return a + b
    if op == "*":
        return a * b
    if op == "-":
        return a - b if a >= b else None
    if op == "/":
        return a // b if b != 0 and a % b == 0 else None
    raise ValueError(f"unknown countdown operation {op!r}; known: {OPERATIONS}")


def countdown_prompt(numbers: Sequence[int], target: int) -> str:
    """``"8,7,9>65="`` for numbers ``(8, 7, 9)`` and target 65."""
    return NUMBER_SEP.join(str(int(x)) for x in numbers) + f"{TARGET_MARK}{int(target)}="


def parse_prompt(prompt: str) -> tuple[list[int], int]:
    """The numbers and target of a countdown prompt (:func:`countdown_prompt`'s inverse).

    Raises:
        ValueError: Not a countdown prompt.
    """
    body, mark, target = prompt.removesuffix("=").partition(TARGET_MARK)
    if not mark or not target.isdigit() or not body:
        raise ValueError(f"not a countdown prompt: {prompt!r}")
    parts = body.split(NUMBER_SEP)
    if not all(p.isdigit() for p in parts):
        raise ValueError(f"not a countdown prompt: {prompt!r}")
    return [int(p) for p in parts], int(target)


def _steps(pool: tuple[int, ...]) -> list[tuple[int, str, int, int, tuple[int, ...]]]:
    """Every step from a sorted pool: ``(a, op, b, result, next_pool)``, the larger operand first."""
    out = []
    n = len(pool)
    for i in range(n):
        for j in range(i + 1, n):
            rest = pool[:i] + pool[i + 1 : j] + pool[j + 1 :]
            b, a = pool[i], pool[j]  # sorted, so a >= b
            for op in OPERATIONS:
                c = apply(a, op, b)
                if c is None or c > SOLVER_VALUE_CAP:
                    continue
                out.append((a, op, b, c, tuple(sorted((*rest, c)))))
    return out


@lru_cache(maxsize=200_000)
def reachable(pool: tuple[int, ...]) -> frozenset[int]:
    """Values a derivation using every number of ``pool`` (sorted) exactly once can end at (intermediates at most
    :data:`SOLVER_VALUE_CAP`)."""
    if len(pool) == 1:
        return frozenset(pool)
    out: set[int] = set()
    for *_, nxt in _steps(pool):
        out |= reachable(nxt)
    return frozenset(out)


def solutions(numbers: Sequence[int], target: int, limit: int = 64) -> list[str]:
    """Up to ``limit`` distinct derivations of ``target`` from ``numbers`` (all used once), as completions without
    EOS (``"8*7=56;56+9=65;#65"``), in a fixed order: pairs from the smallest numbers up, then ``+ * - /``.

    Distinct means a different step sequence: the same expression tree with independent steps in another order
    counts again, as it is another path a sampler can take.
    """
    pool = tuple(sorted(int(x) for x in numbers))
    out: list[str] = []

    def walk(state: tuple[int, ...], prefix: str) -> None:
        if len(out) >= limit:
            return
        if len(state) == 1:
            if state[0] == target:
                out.append(f"{prefix}{ANSWER_MARK}{target}")
            return
        for a, op, b, c, nxt in _steps(state):
            if target in reachable(nxt):
                walk(nxt, f"{prefix}{a}{op}{b}={c}{STEP_END}")

    if len(pool) >= 2 and target in reachable(pool):
        walk(pool, "")
    return out


def make_countdown_task(
    n_numbers: int, rng: np.random.Generator, max_number: int = 9, max_value: int = 99, min_target: int = 10
) -> Task:
    """One task with ``n_numbers`` numbers in ``1..max_number`` and a target built by a random derivation over all of
    them (every intermediate value and the target in ``1..max_value``, the target at least ``min_target`` and not one
    of the numbers); ``answer`` is the first of :func:`solutions`.

    Raises:
        ValueError: ``n_numbers`` outside ``2..MAX_COUNTDOWN_NUMBERS`` or limits that leave nothing to draw.
    """
    if not MIN_COUNTDOWN_NUMBERS <= n_numbers <= MAX_COUNTDOWN_NUMBERS:
        raise ValueError(
            f"countdown difficulty must be in {MIN_COUNTDOWN_NUMBERS}..{MAX_COUNTDOWN_NUMBERS}, got {n_numbers}"
        )
    if not (1 <= max_number <= 99 and max_number < max_value <= SOLVER_VALUE_CAP and 1 <= min_target <= max_value):
        raise ValueError(
            f"need 1 <= max_number <= 99, max_number < max_value <= {SOLVER_VALUE_CAP} and 1 <= min_target <= "
            f"max_value, got {max_number}, {max_value}, {min_target}"
        )
    for _ in range(10_000):
        numbers = [int(x) for x in rng.integers(1, max_number + 1, size=n_numbers)]
        pool = list(numbers)
        while len(pool) > 1:
            i, j = (int(k) for k in rng.choice(len(pool), size=2, replace=False))
            a, b = max(pool[i], pool[j]), min(pool[i], pool[j])
            options = [c for op in OPERATIONS if (c := apply(a, op, b)) is not None and 1 <= c <= max_value]
            if not options:
                break
            pool = [x for k, x in enumerate(pool) if k not in (i, j)] + [options[int(rng.integers(len(options)))]]
        target = pool[0]
        if len(pool) == 1 and target >= min_target and target not in numbers:
            return Task(
                countdown_prompt(numbers, target), solutions(numbers, target, 1)[0], COUNTDOWN_FAMILY, n_numbers
            )
    raise ValueError(f"no countdown task found for {n_numbers} numbers up to {max_number} with targets <= {max_value}")


def make_countdown_set(
    n: int, rng: np.random.Generator, difficulties: Sequence[int] = (2, 3, 4), max_number: int = 9, max_value: int = 99
) -> list[Task]:
    """``n`` countdown tasks, the number of given numbers drawn uniformly from ``difficulties`` per task."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    picks = rng.choice(len(difficulties), size=n)
    return [make_countdown_task(int(difficulties[int(i)]), rng, max_number, max_value) for i in picks]


def verify_countdown(task: Task, completion: str, eos: str = "$") -> float:
    """1.0 when ``completion`` (cut at the first ``eos``) is a valid derivation of the task's target (module
    docstring): steps ``a OP b=c;`` over the pool, every given number used exactly once, then ``#TARGET``; else 0.0."""
    numbers, target = parse_prompt(task.prompt)
    text = completion.split(eos, 1)[0]
    if ANSWER_MARK not in text:
        return 0.0
    body, answer = text.rsplit(ANSWER_MARK, 1)
    if answer.strip() != str(target):
        return 0.0
    pool = Counter(numbers)
    for step in body.split(STEP_END)[:-1] if body else []:
        m = _STEP.fullmatch(step)
        if m is None or any(len(g) > MAX_LITERAL_DIGITS or g != str(int(g)) for g in (m[1], m[3], m[4])):
            return 0.0
        a, op, b, c = int(m[1]), m[2], int(m[3]), int(m[4])
        pool[a] -= 1
        pool[b] -= 1
        if pool[a] < 0 or pool[b] < 0 or apply(a, op, b) != c:
            return 0.0
        pool[c] += 1
    if body and not body.endswith(STEP_END):
        return 0.0  # text between the last step and the answer mark
    return 1.0 if +pool == Counter([target]) else 0.0


def make_countdown_sft_set(
    n: int,
    rng: np.random.Generator,
    difficulties: Sequence[int] = (2, 3, 4),
    reference_share: float = 0.7,
    max_number: int = 9,
    max_value: int = 99,
) -> list[Task]:
    """``n`` warm-start examples ``Task(prompt, derivation, "countdown", d)``: with probability ``reference_share`` the
    reference derivation (the task's ``answer``, a dominant mode), else one of its other solutions at random (so the
    warm start knows several paths and its pass@k rises above its pass@1).

    Raises:
        ValueError: ``reference_share`` outside ``[0, 1]``.
    """
    if not 0.0 <= reference_share <= 1.0:
        raise ValueError(f"reference_share must be in [0, 1], got {reference_share}")
    out = []
    for task in make_countdown_set(n, rng, difficulties, max_number, max_value):
        trace = task.answer
        if rng.random() >= reference_share:
            numbers, target = parse_prompt(task.prompt)
            paths = solutions(numbers, target)
            trace = paths[int(rng.integers(len(paths)))]
        out.append(Task(task.prompt, trace, task.family, task.difficulty))
    return out
