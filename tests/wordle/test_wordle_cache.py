"""``rolloutlab wordle cache info|clear``: the files it lists and deletes are the cache's own, and only those."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from envs.wordle_rules import WordLists
from planning.wordle.solver import SolverConfig, WordleSolver
from planning.wordle.table import load_pattern_table
from rolloutlab.cli import app

runner = CliRunner()


def test_clear_deletes_the_table_and_book_files_and_nothing_else(
    small: WordLists, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("ROLLOUTLAB_CACHE", str(cache))
    # Real cache files, written by the code that owns them, so the names cannot drift from what `clear` matches.
    table = load_pattern_table(small)
    book = WordleSolver(SolverConfig(top_k=3, opener=None), small, table).enable_book()
    leftover = cache / f".{table.path.name}.4242.tmp"  # interrupted writes: the table's and atomic_write's names
    leftover.write_bytes(b"x" * 10)
    book_leftover = cache / f".{book.path.name}.k3_9xq2a.tmp"
    book_leftover.write_bytes(b"{")
    keep = [cache / "notes.txt", cache / "wordle-table-mine.bin", cache / "other-tool.bin"]
    for path in keep:
        path.write_text("not the cache's")
    (cache / "wordle-book-0123456789abcdef0123456789abcdef.json").mkdir()  # a directory, whatever its name
    ours = [table.path, book.path, leftover, book_leftover]
    size = sum(p.stat().st_size for p in ours)

    info = runner.invoke(app, ["wordle", "cache", "info"])
    assert info.exit_code == 0, info.output
    assert str(cache) in info.output and f"4 files, {size:,} bytes" in info.output
    assert all(p.name in info.output for p in ours) and not any(p.name in info.output for p in keep)

    cleared = runner.invoke(app, ["wordle", "cache", "clear"])
    assert cleared.exit_code == 0, cleared.output
    assert f"deleted 4 files ({size:,} bytes" in cleared.output
    assert all(p.name in cleared.output for p in ours)
    assert not any(p.exists() for p in ours) and all(p.exists() for p in keep)

    again = runner.invoke(app, ["wordle", "cache", "clear"])
    assert again.exit_code == 0 and "nothing to delete" in again.output


def test_clear_and_info_without_a_cache_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "never-created"
    monkeypatch.setenv("ROLLOUTLAB_CACHE", str(missing))
    for command in ("info", "clear"):
        result = runner.invoke(app, ["wordle", "cache", command])
        assert result.exit_code == 0, result.output
        assert f"no cache directory at {missing}" in result.output
    assert not missing.exists()


def test_a_file_that_cannot_be_deleted_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLOUTLAB_CACHE", str(tmp_path))
    stuck, gone = (tmp_path / f"wordle-book-{c * 32}.json" for c in "ab")
    stuck.write_text("{}")
    gone.write_text("{}")
    real_unlink = Path.unlink

    def unlink(self: Path, missing_ok: bool = False) -> None:
        if self == stuck:
            raise PermissionError(13, "Permission denied")
        real_unlink(self, missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    result = runner.invoke(app, ["wordle", "cache", "clear"])
    assert result.exit_code == 1
    assert "deleted 1 file (2 bytes" in result.output
    assert f"could not delete {stuck}: Permission denied" in result.output
    assert stuck.exists() and not gone.exists()
