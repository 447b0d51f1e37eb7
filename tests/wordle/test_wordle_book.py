"""Second-move book: same replies as computing them, cached on disk by configuration, rebuilt when corrupt."""

from __future__ import annotations

from pathlib import Path

import pytest

from envs.wordle_rules import WordLists
from planning.wordle.solver import SolverConfig, WordleSolver
from planning.wordle.table import TableLoad, load_pattern_table


@pytest.fixture(scope="module")
def small_table(small: WordLists, cache_path: Path) -> TableLoad:
    return load_pattern_table(small, cache_path)


@pytest.mark.parametrize("mode", ["easy", "hard"])
def test_book_replies_equal_computed_ones_and_are_cached(
    mode: str, small: WordLists, small_table: TableLoad, tmp_path: Path
) -> None:
    config = SolverConfig(mode=mode, top_k=4, opener=None, exact_up_to=6 if mode == "hard" else 0)
    with_book = WordleSolver(config, small, small_table)
    book = with_book.enable_book(tmp_path)
    assert book.built and book.path.exists() and book.path.parent == tmp_path
    plain = WordleSolver(config, small, small_table)
    root = plain.root()
    opener = plain.opener()
    children = plain.model.split(root, opener)[1]
    assert len(book) == len(children) > 1
    for _, child in children:
        assert with_book.act(child, 1) == plain.act(child, 1)
        assert with_book.alternatives(child, 1) == plain.compute_alternatives(child, 1)
    # A second solver with the same configuration loads the file; another configuration gets its own file.
    again = WordleSolver(config, small, small_table).enable_book(tmp_path)
    assert not again.built and again.path == book.path
    other = WordleSolver(SolverConfig(mode=mode, top_k=3, opener=None), small, small_table).enable_book(tmp_path)
    assert other.path != book.path


def test_book_is_rebuilt_when_corrupt_and_ignores_other_first_guesses(
    small: WordLists, small_table: TableLoad, tmp_path: Path
) -> None:
    config = SolverConfig(top_k=3, opener=None)
    book = WordleSolver(config, small, small_table).enable_book(tmp_path)
    book.path.write_text(book.path.read_text()[:100])
    solver = WordleSolver(config, small, small_table)
    rebuilt = solver.enable_book(tmp_path)
    assert rebuilt.built and len(rebuilt) == len(book)
    # A belief reached by another first guess is not the book's, even when it is one guess deep.
    root = solver.root()
    other = next(g for g in range(len(small.allowed)) if g != solver.opener())
    child = solver.model.split(root, other)[1][0][1]
    assert rebuilt.lookup(child, 1) is None or solver.model.key(child) in {
        solver.model.key(c) for _, c in solver.model.split(root, solver.opener())[1]
    }
    assert rebuilt.lookup(root, 0) is None
