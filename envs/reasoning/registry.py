"""One table of the task families: how to draw a prompt set, how to verify a completion, which characters they use.

:func:`family_spec` is the lookup a trainer, a warm start or a test uses instead of branching on family names; every
family is registered here (``add``, ``mul``, ``scratch``, ``calc``, ``countdown``, ``carry``), and the contract tests
(``tests/envs/test_reasoning_contract.py``) run over :data:`FAMILY_SPECS`: same seed same tasks, difficulty labels in
range, the reference completion verified correct, every character in the family's alphabet.

Plain Python plus numpy; no other rolloutlab package is imported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from envs.reasoning import carry, countdown, scratchpad, tooluse
from envs.reasoning.tasks import ALPHABET, MAX_DIGITS, Task, make_prompt_set, verify

#: ``(n, rng, difficulties) -> tasks``.
SetMaker = Callable[[int, np.random.Generator, Sequence[int]], list[Task]]


@dataclass(frozen=True)
class FamilySpec:
    """A registered task family.

    Attributes:
        name: ``Task.family`` of its tasks.
        make_set: Draws ``n`` tasks with difficulties from the given list (uniformly per task).
        verify: ``(task, completion) -> reward`` in ``{0.0, 1.0}``; the completion may end with EOS ``$``.
        reference: A correct completion of a task (without EOS): its answer or reference trace.
        alphabet: Every character its prompts and completions (tool results included) can contain.
        difficulties: The difficulty labels its generator accepts, easiest first.
        difficulty_meaning: What the difficulty counts (for reports and docs).
        uses_tool: Whether completions call the calculator (sample with the calculator hook).
    """

    name: str
    make_set: SetMaker
    verify: Callable[[Task, str], float]
    reference: Callable[[Task], str]
    alphabet: str
    difficulties: tuple[int, ...]
    difficulty_meaning: str
    uses_tool: bool = False

    def tasks(self, n: int, seed: int, difficulties: Sequence[int] | None = None) -> list[Task]:
        """``n`` tasks from ``np.random.default_rng(seed)`` (all difficulties when ``None``).

        Raises:
            ValueError: A difficulty the family does not have.
        """
        diffs = tuple(self.difficulties if difficulties is None else difficulties)
        bad = [d for d in diffs if d not in self.difficulties]
        if bad or not diffs:
            raise ValueError(
                f"the {self.name!r} family has difficulties {list(self.difficulties)}, got {list(diffs) or 'none'}"
            )
        return self.make_set(n, np.random.default_rng(seed), diffs)


def _arith(family: str) -> SetMaker:
    return lambda n, rng, d: make_prompt_set(n, rng, families=[family], difficulties=d)


FAMILY_SPECS: dict[str, FamilySpec] = {
    spec.name: spec
    for spec in (
        FamilySpec(
            "add", _arith("add"), verify, lambda t: t.answer, ALPHABET, tuple(range(1, MAX_DIGITS + 1)), "digits"
        ),
        FamilySpec(
            "mul", _arith("mul"), verify, lambda t: t.answer, ALPHABET, tuple(range(1, MAX_DIGITS + 1)), "digits"
        ),
        FamilySpec(
            scratchpad.SCRATCH_FAMILY,
            lambda n, rng, d: scratchpad.make_scratch_set(n, rng, d),
            scratchpad.verify_scratch,
            lambda t: scratchpad.trace(t, "scratch"),
            scratchpad.SCRATCH_ALPHABET,
            tuple(range(1, scratchpad.MAX_SCRATCH_DIGITS + 1)),
            "digits",
        ),
        FamilySpec(
            tooluse.CALC_FAMILY,
            lambda n, rng, d: tooluse.make_calc_set(n, rng, d),
            tooluse.verify_calc,
            lambda t: tooluse.trace(t, "tool"),
            tooluse.TOOL_ALPHABET,
            tuple(range(1, tooluse.MAX_OPERANDS)),
            "operations",
            uses_tool=True,
        ),
        FamilySpec(
            countdown.COUNTDOWN_FAMILY,
            lambda n, rng, d: countdown.make_countdown_set(n, rng, d),
            countdown.verify_countdown,
            lambda t: t.answer,
            countdown.COUNTDOWN_ALPHABET,
            tuple(range(countdown.MIN_COUNTDOWN_NUMBERS, countdown.MAX_COUNTDOWN_NUMBERS + 1)),
            "given numbers",
        ),
        FamilySpec(
            carry.CARRY_FAMILY,
            lambda n, rng, d: carry.make_carry_set(n, rng, d),
            carry.verify_carry,
            lambda t: carry.trace(t, "long"),
            carry.CARRY_ALPHABET,
            tuple(range(carry.MIN_CARRY_OPERANDS, carry.MAX_CARRY_OPERANDS + 1)),
            "operands",
        ),
    )
}


def family_spec(name: str) -> FamilySpec:
    """The registered family ``name``.

    Raises:
        ValueError: An unknown family (the message lists the known ones).
    """
    if name not in FAMILY_SPECS:
        raise ValueError(f"unknown task family {name!r}; known: {', '.join(FAMILY_SPECS)}")
    return FAMILY_SPECS[name]
