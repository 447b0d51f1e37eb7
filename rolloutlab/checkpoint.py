"""Atomic checkpoint and file I/O.

A checkpoint is a plain dictionary of tensors, numbers, strings, lists and dicts (``state_dict``s of networks and
optimizers, normalizer statistics, counters), saved with :func:`torch.save` and loaded with
``torch.load(..., weights_only=True)`` so that nothing is ever unpickled from a file. Every checkpoint carries a format
version and a ``kind`` string; loading refuses an unknown version or a different kind with a clear error.

Writes are atomic: the bytes go to a temporary file in the same directory, are fsynced, and the temporary file is
renamed over the target. A crash at any point leaves either the old file or the new one, never a torn one.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

# torch is imported inside save_checkpoint / load_checkpoint: the JSON and text writers are used by light modules
# (the CLI's top floor, `rolloutlab bench`) that should not pay torch's ~1 s import.

#: Version of the checkpoint envelope written by :func:`save_checkpoint`.
FORMAT_VERSION = 1
_SUPPORTED_VERSIONS = frozenset({1})


class CheckpointError(RuntimeError):
    """A checkpoint is missing, unreadable, of another kind, or of an unknown format version."""


def _fsync_dir(directory: Path) -> None:
    # Make the rename itself durable; not every platform lets us open a directory, hence the suppress.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike[str], write: Callable[[IO[bytes]], None]) -> Path:
    """Write a file atomically: temp file in the same directory, fsync, then rename over ``path``.

    Args:
        path: Destination file. Its parent directory is created if needed.
        write: Called with a binary file object open on the temporary file.

    Returns:
        The destination path.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        # mkstemp creates the file 0600; give the result the permissions a plain open() would have.
        os.fchmod(fd, 0o666 & ~_current_umask())
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    _fsync_dir(target.parent)
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Atomically write UTF-8 text to ``path``."""
    data = text.encode("utf-8")

    def write(handle: IO[bytes]) -> None:
        handle.write(data)

    return atomic_write(path, write)


def json_nulls(obj: Any) -> Any:
    """``obj`` with every non-finite float (NaN, ±inf) inside dicts, lists and tuples replaced by ``None``.

    Strict JSON has no such numbers: Python writes them as ``NaN``/``Infinity``, which strict readers (JavaScript,
    jq, ``json.loads`` with ``parse_constant`` raising) refuse. Records that may hold an undefined statistic pass
    through this before :func:`atomic_write_json`, and their readers take ``None`` as undefined.
    """
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {k: json_nulls(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_nulls(v) for v in obj]
    return obj


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, indent: int = 2) -> Path:
    """Atomically write ``obj`` as JSON (keys kept in insertion order, trailing newline)."""
    return atomic_write_text(path, json.dumps(obj, indent=indent, allow_nan=True) + "\n")


def save_checkpoint(
    path: str | os.PathLike[str],
    state: Mapping[str, Any],
    *,
    kind: str,
    config: Mapping[str, Any] | None = None,
) -> Path:
    """Atomically save a checkpoint.

    Args:
        path: Destination file (conventionally ``*.pt``).
        state: Plain data only: tensors, numpy-free numbers, strings, lists, tuples and dicts of those. Convert numpy
            arrays with ``torch.as_tensor`` first; ``weights_only`` loading refuses arbitrary objects.
        kind: What this checkpoint holds (e.g. ``"mbpo-run"``); :func:`load_checkpoint` checks it.
        config: Optional resolved configuration stored beside the state (plain data).

    Returns:
        The destination path.
    """
    envelope = {
        "format_version": FORMAT_VERSION,
        "kind": kind,
        "config": dict(config) if config is not None else None,
        "state": dict(state),
    }
    import torch

    return atomic_write(path, lambda handle: torch.save(envelope, handle))


def load_checkpoint(path: str | os.PathLike[str], *, kind: str | None = None) -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint`.

    Args:
        path: The checkpoint file.
        kind: If given, the checkpoint must have been saved with this ``kind``.

    Returns:
        A dictionary with keys ``format_version``, ``kind``, ``config`` and ``state``.

    Raises:
        CheckpointError: The file is missing or unreadable, not a rolloutlab checkpoint, of another kind, or of a
            format version this release does not know.
    """
    source = Path(path)
    if not source.is_file():
        raise CheckpointError(f"checkpoint not found: {source}")
    import torch

    try:
        envelope = torch.load(source, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for truncated or foreign files
        raise CheckpointError(f"cannot read checkpoint {source}: {exc}") from exc
    if not isinstance(envelope, dict) or "format_version" not in envelope or "state" not in envelope:
        raise CheckpointError(f"{source} is not a rolloutlab checkpoint (no format_version/state envelope)")
    version = envelope["format_version"]
    if version not in _SUPPORTED_VERSIONS:
        raise CheckpointError(
            f"{source} has checkpoint format version {version!r}; this rolloutlab reads {sorted(_SUPPORTED_VERSIONS)}"
        )
    if kind is not None and envelope.get("kind") != kind:
        raise CheckpointError(f"{source} holds a {envelope.get('kind')!r} checkpoint, expected {kind!r}")
    return envelope
