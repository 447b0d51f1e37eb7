"""The Wordle planners' files in the cache directory: which are theirs, how big they are, and deleting them.

The directory is :func:`planning.wordle.table.cache_dir` (``ROLLOUTLAB_CACHE`` or the platform's user cache
directory), which other tools may share, so a file counts as the cache's only if its name is one this package writes:
a pattern table ``wordle-table-<32 hex>.bin`` (:func:`planning.wordle.table.load_pattern_table`, about 30 MB per
pair of lists), a second-move book ``wordle-book-<32 hex>.json`` (:func:`planning.wordle.book.book_path`), or the
temporary file of an interrupted write of either (``.<name>.<suffix>.tmp``). Sub-directories and links are left
alone, whatever their names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from planning.wordle.table import cache_dir

_NAME = r"wordle-(?:table-[0-9a-f]{32}\.bin|book-[0-9a-f]{32}\.json)"
_CACHE_FILE = re.compile(rf"{_NAME}|\.{_NAME}\.[A-Za-z0-9_]+\.tmp")


@dataclass(frozen=True)
class CacheFile:
    """One file of the cache.

    Attributes:
        path: Where it is.
        size: Its size in bytes.
    """

    path: Path
    size: int


def cache_files(directory: Path | None = None) -> list[CacheFile]:
    """The cache's own files in ``directory`` (default :func:`cache_dir`), by name; none if it does not exist."""
    folder = directory or cache_dir()
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.iterdir()):
        # is_symlink first: a link is not ours to delete even when it points at a cache file.
        if _CACHE_FILE.fullmatch(path.name) and not path.is_symlink() and path.is_file():
            out.append(CacheFile(path, path.stat().st_size))
    return out


def clear_cache(directory: Path | None = None) -> tuple[list[CacheFile], list[tuple[CacheFile, OSError]]]:
    """Delete the cache's own files (see :func:`cache_files`); they are rebuilt when next needed.

    Args:
        directory: Cache directory; default :func:`cache_dir`.

    Returns:
        ``(deleted, failed)``: the files deleted, with their sizes, and those that could not be, with the error. A
        file that vanished meanwhile (another process cleared it) is in neither.
    """
    deleted: list[CacheFile] = []
    failed: list[tuple[CacheFile, OSError]] = []
    for entry in cache_files(directory):
        try:
            entry.path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:  # keep going: one undeletable file should not keep the others
            failed.append((entry, exc))
            continue
        deleted.append(entry)
    return deleted, failed
