"""Verifiable arithmetic tasks with a difficulty knob, and mixed-difficulty prompt sets.

A task is a prompt string such as ``"35+7="`` (reversed digits: 53 + 7) and the exact answer string ``"06"`` (60,
reversed). :func:`verify` gives reward 1.0 for an exact match of the completion (up to the first end-of-sequence
character) and 0.0 otherwise; there is no partial credit, so the reward is a Bernoulli outcome per response, the
setting in which GRPO's zero-variance groups appear.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Task families: ``add`` (d-digit + d-digit) and ``mul`` (d-digit times one digit).
FAMILIES: tuple[str, ...] = ("add", "mul")
#: Largest difficulty (number of digits of the long operand).
MAX_DIGITS = 6
#: Every character a prompt or an answer can contain.
ALPHABET = "0123456789+*="


@dataclass(frozen=True)
class Task:
    """One verifiable problem.

    Attributes:
        prompt: What the model is shown, e.g. ``"35+7="``; ends with ``=``.
        answer: The exact expected completion, e.g. ``"06"`` (digits least-significant first, no leading padding
            beyond the true number of digits).
        family: ``"add"`` or ``"mul"``.
        difficulty: Number of digits of the long operand, 1..6.
    """

    prompt: str
    answer: str
    family: str
    difficulty: int


def _rev(n: int) -> str:
    return str(n)[::-1]


def make_task(family: str, difficulty: int, rng: np.random.Generator) -> Task:
    """Draw one task of ``family`` whose long operand has exactly ``difficulty`` digits.

    Args:
        family: One of :data:`FAMILIES`.
        difficulty: 1..:data:`MAX_DIGITS`.
        rng: Source of randomness (the only one used).

    Raises:
        ValueError: Unknown family or difficulty out of range.
    """
    if family not in FAMILIES:
        raise ValueError(f"unknown task family {family!r}; known: {', '.join(FAMILIES)}")
    if not 1 <= difficulty <= MAX_DIGITS:
        raise ValueError(f"difficulty must be in 1..{MAX_DIGITS}, got {difficulty}")
    low = 0 if difficulty == 1 else 10 ** (difficulty - 1)
    high = 10**difficulty
    a = int(rng.integers(low, high))
    if family == "add":
        b = int(rng.integers(low, high))
        return Task(f"{_rev(a)}+{_rev(b)}=", _rev(a + b), family, difficulty)
    b = int(rng.integers(0, 10))
    return Task(f"{_rev(a)}*{b}=", _rev(a * b), family, difficulty)


def verify(task: Task, completion: str, eos: str = "$") -> float:
    """Exact-match reward: 1.0 if ``completion`` (cut at the first ``eos``, spaces stripped) equals the answer.

    Args:
        task: The problem.
        completion: The model's text after the prompt.
        eos: End-of-sequence marker; anything after it is ignored.

    Returns:
        1.0 or 0.0.
    """
    text = completion.split(eos, 1)[0].strip()
    return 1.0 if text == task.answer else 0.0


def make_prompt_set(
    n: int,
    rng: np.random.Generator,
    families: Sequence[str] = FAMILIES,
    difficulties: Sequence[int] = tuple(range(1, MAX_DIGITS + 1)),
    weights: Sequence[float] | None = None,
) -> list[Task]:
    """A mixed-difficulty prompt set: ``n`` tasks with family and difficulty drawn per task.

    Args:
        n: Number of tasks.
        rng: Source of randomness.
        families: Families to mix, uniformly.
        difficulties: Difficulties to mix.
        weights: Optional probabilities over ``difficulties`` (normalised here); uniform if ``None``.

    Returns:
        ``n`` tasks (duplicates possible for the smallest difficulties, as in a real dataset).
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    probs = None
    if weights is not None:
        w = np.asarray(weights, dtype=float)
        if w.shape != (len(difficulties),) or (w < 0).any() or w.sum() <= 0:
            raise ValueError("weights must be non-negative, one per difficulty, with a positive sum")
        probs = w / w.sum()
    fams = rng.choice(len(families), size=n)
    diffs = rng.choice(len(difficulties), size=n, p=probs)
    return [make_task(families[int(f)], int(difficulties[int(d)]), rng) for f, d in zip(fams, diffs, strict=True)]
