"""envs.reasoning: exact answers, verifier, difficulty knob and mixed prompt sets."""

from __future__ import annotations

import numpy as np
import pytest

from envs.reasoning import FAMILIES, MAX_DIGITS, Task, make_prompt_set, make_task, verify


def _unrev(s: str) -> int:
    return int(s[::-1])


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("digits", range(1, MAX_DIGITS + 1))
def test_answers_are_exact(family: str, digits: int) -> None:
    rng = np.random.default_rng(digits)
    for _ in range(20):
        task = make_task(family, digits, rng)
        left, right = task.prompt.rstrip("=").split("+" if family == "add" else "*")
        assert len(left) == digits
        expected = _unrev(left) + _unrev(right) if family == "add" else _unrev(left) * int(right)
        assert _unrev(task.answer) == expected
        assert task.answer == str(expected)[::-1]
        assert verify(task, task.answer + "$") == 1.0


def test_verify_hand_cases() -> None:
    task = Task("53+7=", "24", "add", 2)  # reversed digits: 35 + 7 = 42, written "24"
    assert verify(task, "24$") == 1.0
    assert verify(task, "24$999") == 1.0  # after EOS is ignored
    assert verify(task, "24") == 1.0
    assert verify(task, "42$") == 0.0
    assert verify(task, "240$") == 0.0
    assert verify(task, "") == 0.0


def test_prompt_sets_mix_difficulties_and_are_seeded() -> None:
    a = make_prompt_set(300, np.random.default_rng(0), difficulties=[1, 3, 5])
    b = make_prompt_set(300, np.random.default_rng(0), difficulties=[1, 3, 5])
    assert a == b
    assert {t.difficulty for t in a} == {1, 3, 5} and {t.family for t in a} == set(FAMILIES)
    weighted = make_prompt_set(200, np.random.default_rng(0), difficulties=[1, 2], weights=[1.0, 0.0])
    assert {t.difficulty for t in weighted} == {1}


def test_invalid_arguments() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="family"):
        make_task("sub", 2, rng)
    with pytest.raises(ValueError, match="difficulty"):
        make_task("add", 7, rng)
    with pytest.raises(ValueError):
        make_prompt_set(3, rng, difficulties=[1, 2], weights=[0.0, 0.0])
