"""The on-disk pattern-table cache: keyed by the lists, validated, rebuilt when missing or corrupt."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from envs.wordle_rules import WordLists, make_word_lists
from planning.wordle.table import build_pattern_table, load_pattern_table


def test_cache_round_trip_and_corruption(small: WordLists, tmp_path: Path) -> None:
    first = load_pattern_table(small, tmp_path)
    assert first.built and first.path.exists()
    assert first.table.shape == (len(small.allowed), len(small.answers))
    second = load_pattern_table(small, tmp_path)
    assert not second.built
    np.testing.assert_array_equal(first.table, second.table)

    raw = bytearray(first.path.read_bytes())
    raw[-10] ^= 0xFF  # flip one byte of the body: the content hash no longer matches
    first.path.write_bytes(bytes(raw))
    third = load_pattern_table(small, tmp_path)
    assert third.built
    np.testing.assert_array_equal(third.table, first.table)

    first.path.write_bytes(first.path.read_bytes()[:100])  # truncated
    assert load_pattern_table(small, tmp_path).built
    first.path.write_bytes(b"")  # empty
    assert load_pattern_table(small, tmp_path).built
    first.path.unlink()  # missing
    assert load_pattern_table(small, tmp_path).built


def test_cache_is_keyed_by_the_lists(small: WordLists, tmp_path: Path) -> None:
    other = WordLists(small.answers[:-1], small.allowed, "other")
    a = load_pattern_table(small, tmp_path)
    b = load_pattern_table(other, tmp_path)
    assert a.path != b.path
    assert b.table.shape[1] == len(small.answers) - 1


def test_six_letter_lists_use_uint16(tmp_path: Path) -> None:
    lists = make_word_lists("banana\n", "bandit\nbanana\n")
    got = load_pattern_table(lists, tmp_path)
    assert got.table.dtype == np.uint16
    assert got.table[1, 0] == 3**6 - 1


def test_full_table_spot_checks(original: WordLists, original_table) -> None:  # type: ignore[no-untyped-def]
    table = original_table.table
    assert table.shape == (12972, 2315) and table.dtype == np.uint8
    rng = np.random.default_rng(0)
    g = rng.integers(0, 12972, 200)
    a = rng.integers(0, 2315, 200)
    want = build_pattern_table([original.allowed[i] for i in g], [original.answers[j] for j in a])
    np.testing.assert_array_equal(table[g, a], np.diag(want))
