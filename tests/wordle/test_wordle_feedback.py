"""Feedback rule: hand-checked duplicate-letter cases, a brute-force reference, and the vectorized table."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.wordle_rules import decode_pattern, encode_pattern, feedback, solved_code
from planning.wordle.table import build_pattern_table, pattern_dtype


def reference_feedback(guess: str, answer: str) -> tuple[int, ...]:
    """Brute force, written differently on purpose: count-based, greens then yellows by letter budget."""
    out = []
    for i, g in enumerate(guess):
        if answer[i] == g:
            out.append(2)
            continue
        # Copies of g in the answer not matched by a green, minus earlier non-green copies of g in the guess.
        budget = sum(1 for j, a in enumerate(answer) if a == g and guess[j] != a)
        earlier = sum(1 for j in range(i) if guess[j] == g and answer[j] != g)
        out.append(1 if earlier < budget else 0)
    return tuple(out)


@pytest.mark.parametrize(
    ("guess", "answer", "expected"),
    [
        ("speed", "abide", "bbyby"),  # one yellow E: abide has a single E
        ("geese", "those", "bbbgg"),  # the final E is green, so the other Es are grey
        ("added", "dread", "yybyg"),
        ("roses", "horse", "ygyyb"),  # second S grey: horse has one S
        ("sease", "essay", "yyyyb"),
        ("salet", "salet", "ggggg"),
        ("aaaaa", "abbey", "gbbbb"),
        ("abbey", "aaaaa", "gbbbb"),
        ("llama", "hello", "yybbb"),
    ],
)
def test_hand_checked_cases(guess: str, answer: str, expected: str) -> None:
    colours = "".join("byg"[c] for c in feedback(guess, answer))
    assert colours == expected


words = st.integers(min_value=2, max_value=6).flatmap(
    lambda n: st.tuples(st.text("abcde", min_size=n, max_size=n), st.text("abcde", min_size=n, max_size=n))
)


@settings(max_examples=400, deadline=None)
@given(words)
def test_matches_brute_force_reference(pair: tuple[str, str]) -> None:
    guess, answer = pair
    assert feedback(guess, answer) == reference_feedback(guess, answer)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 6).flatmap(lambda n: st.lists(st.text("abcd", min_size=n, max_size=n), min_size=1, max_size=12)))
def test_vectorized_table_matches_feedback(words_list: list[str]) -> None:
    table = build_pattern_table(words_list, words_list[::-1])
    assert table.dtype == pattern_dtype(len(words_list[0]))
    for i, g in enumerate(words_list):
        for j, a in enumerate(words_list[::-1]):
            assert table[i, j] == encode_pattern(feedback(g, a))


def test_pattern_codes_round_trip_and_solved_code() -> None:
    for length in (2, 5, 6):
        for code in range(0, 3**length, 7):
            assert encode_pattern(decode_pattern(code, length)) == code
        assert encode_pattern((2,) * length) == solved_code(length)
    assert pattern_dtype(5) is np.uint8
    assert pattern_dtype(6) is np.uint16
