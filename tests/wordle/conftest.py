"""Fixtures for the Wordle tests: a private table cache and small custom lists that build in a blink."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from envs.wordle_rules import WordLists, load_word_lists, make_word_lists
from planning.wordle.table import TableLoad, load_pattern_table


@pytest.fixture(scope="session")
def cache_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh cache directory for the session (so tests never depend on, or disturb, the user's cache)."""
    path = tmp_path_factory.mktemp("rolloutlab-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("ROLLOUTLAB_CACHE", str(path))
    yield path
    mp.undo()


@pytest.fixture(scope="session")
def original() -> WordLists:
    return load_word_lists("original")


@pytest.fixture(scope="session")
def original_table(original: WordLists, cache_path: Path) -> TableLoad:
    return load_pattern_table(original, cache_path)


@pytest.fixture(scope="session")
def small_files(original: WordLists, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """120 real answers and 800 real guesses (answers included), written as custom list files."""
    answers = sorted(original.answers)[::19][:120]
    extra = [w for w in original.allowed if w not in set(answers)][::15][: 800 - len(answers)]
    allowed = sorted({*answers, *extra})
    folder = tmp_path_factory.mktemp("lists")
    (folder / "answers.txt").write_text("\n".join(answers) + "\n")
    (folder / "allowed.txt").write_text("\n".join(allowed) + "\n")
    return folder / "answers.txt", folder / "allowed.txt"


@pytest.fixture(scope="session")
def small(small_files: tuple[Path, Path]) -> WordLists:
    answers, allowed = small_files
    return make_word_lists(answers.read_text(), allowed.read_text(), "small")
