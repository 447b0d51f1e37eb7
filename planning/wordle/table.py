"""The pattern table: the feedback code of every allowed guess against every answer, built once and cached on disk.

``table[g, a]`` is the pattern code (see :func:`envs.wordle_rules.encode_pattern`) of guess ``allowed[g]`` against
answer ``answers[a]``; shape ``(len(allowed), len(answers))``, dtype uint8 for words of up to 5 letters (3**5 = 243
codes) and uint16 beyond. Every planner query is a slice of it, so it is the one place feedback is computed in bulk.

The build is vectorized over (guess chunk x answers), one 2-D boolean array per pair of letter positions: greens are
a comparison; the two-pass yellow rule becomes "the k-th non-green copy of a letter in the guess is yellow iff
k <= the answer's non-green copies of it", which is a count along the word. The cache lives in
``platformdirs.user_cache_dir("rolloutlab")`` under a name keyed by the SHA-256 of the two lists; a file with the
wrong shape, dtype or content hash is rebuilt.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import platformdirs

from envs.wordle_rules import WordLists, words_to_array

_FORMAT = 1


def pattern_dtype(length: int) -> type[np.unsignedinteger]:
    """Smallest unsigned dtype holding every code for words of ``length`` letters."""
    return np.uint8 if 3**length <= 256 else np.uint16  # type: ignore[return-value]


def build_pattern_table(guesses: list[str] | tuple[str, ...], answers: list[str] | tuple[str, ...]) -> np.ndarray:
    """Compute the feedback codes of every guess against every answer.

    Args:
        guesses: G words of length L.
        answers: A words of length L.

    Returns:
        Codes, shape ``(G, A)``, dtype :func:`pattern_dtype` (L).
    """
    g_letters = words_to_array(guesses)
    a_letters = words_to_array(answers)
    length = a_letters.shape[1]
    out = np.empty((len(guesses), len(answers)), dtype=pattern_dtype(length))
    chunk = max(1, 1_000_000 // max(1, len(answers)))
    for start in range(0, len(guesses), chunk):
        g = g_letters[start : start + chunk]
        # eq[i][j]: guess letter i equals answer letter j, shape (C, A); 2-D boolean ops are what numpy does fastest.
        eq = [[g[:, i, None] == a_letters[None, :, j] for j in range(length)] for i in range(length)]
        not_green = [~eq[j][j] for j in range(length)]
        code = np.zeros((len(g), len(answers)), dtype=np.int32)
        for i in range(length):
            # The answer's copies of guess letter i not already matched by a green.
            available = np.zeros(code.shape, dtype=np.int8)
            for j in range(length):
                available += eq[i][j] & not_green[j]
            # Which occurrence (1-based) letter i is among the guess's non-green copies of it, up to position i.
            rank = np.zeros(code.shape, dtype=np.int8)
            for j in range(i + 1):
                rank += (g[:, j] == g[:, i])[:, None] & not_green[j]
            code *= 3
            code += 2 * eq[i][i] + (not_green[i] & (rank <= available))
        out[start : start + len(g)] = code
    return out


def lists_digest(lists: WordLists) -> str:
    """SHA-256 of both lists (order included): the cache key of their table."""
    h = hashlib.sha256()
    h.update("\n".join(lists.allowed).encode())
    h.update(b"\0")
    h.update("\n".join(lists.answers).encode())
    return h.hexdigest()


@dataclass
class TableLoad:
    """A pattern table and how it was obtained.

    Attributes:
        table: Codes, shape ``(len(allowed), len(answers))``.
        path: Cache file.
        built: True if built now (missing or corrupt cache), False if loaded.
        seconds: Wall-clock seconds to build or load.
        write_error: Why a table built now could not be cached at ``path`` (``None`` if it was, or if it was loaded):
            a read-only cache directory only costs a rebuild next time, but the user should hear of it.
    """

    table: np.ndarray
    path: Path
    built: bool
    seconds: float
    write_error: str | None = None


def cache_dir() -> Path:
    """Directory of cached tables (``ROLLOUTLAB_CACHE`` overrides the platform user cache directory)."""
    override = os.environ.get("ROLLOUTLAB_CACHE")
    return Path(override) if override else Path(platformdirs.user_cache_dir("rolloutlab"))


def _read_cached(path: Path, shape: tuple[int, int], dtype: np.dtype) -> np.ndarray | None:
    """The cached table if the file is intact (header, shape, dtype and content hash all match), else ``None``."""
    try:
        raw = path.read_bytes()
        header_len = int.from_bytes(raw[:4], "little")
        header = json.loads(raw[4 : 4 + header_len])
        body = raw[4 + header_len :]
        if header.get("format") != _FORMAT or tuple(header["shape"]) != shape or header["dtype"] != dtype.str:
            return None
        if hashlib.sha256(body).hexdigest() != header["sha256"]:
            return None
        table = np.frombuffer(body, dtype=dtype)
        if table.size != shape[0] * shape[1]:
            return None
        return table.reshape(shape)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_cached(path: Path, table: np.ndarray) -> None:
    # A raw body with a small JSON header rather than np.save: the header carries the content hash we validate, and
    # nothing is ever unpickled. Written to a temp file and renamed, so a crash never leaves a torn cache.
    body = np.ascontiguousarray(table).tobytes()
    header = json.dumps(
        {
            "format": _FORMAT,
            "shape": list(table.shape),
            "dtype": table.dtype.str,
            "sha256": hashlib.sha256(body).hexdigest(),
        }
    ).encode()
    buffer = io.BytesIO()
    buffer.write(len(header).to_bytes(4, "little"))
    buffer.write(header)
    buffer.write(body)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(buffer.getvalue())
    os.replace(tmp, path)


def load_pattern_table(lists: WordLists, directory: Path | None = None) -> TableLoad:
    """The pattern table of ``lists``, from the cache if intact, else built and cached.

    Args:
        lists: Validated word lists.
        directory: Cache directory; default :func:`cache_dir`.
    """
    import time

    start = time.perf_counter()
    path = (directory or cache_dir()) / f"wordle-table-{lists_digest(lists)[:32]}.bin"
    shape = (len(lists.allowed), len(lists.answers))
    dtype = np.dtype(pattern_dtype(lists.length))
    table = _read_cached(path, shape, dtype)
    if table is not None:
        return TableLoad(table, path, False, time.perf_counter() - start)
    table = build_pattern_table(lists.allowed, lists.answers)
    write_error = None
    try:
        _write_cached(path, table)
    except OSError as exc:  # a read-only cache directory only costs a rebuild next time: report it, go on
        write_error = exc.strerror or str(exc)
    return TableLoad(table, path, True, time.perf_counter() - start, write_error)
