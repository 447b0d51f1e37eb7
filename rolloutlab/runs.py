"""Run directories: ``runs/<name>__<seed>__<time>/`` holding config.yaml, logs, checkpoints and result.json."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.config import save_yaml

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def run_dir_name(name: str, seed: int, when: float | None = None) -> str:
    """``<name>__<seed>__<YYYYmmdd-HHMMSS>`` with unsafe characters in ``name`` replaced by ``-``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if when is None else when))
    return f"{_SAFE.sub('-', name).strip('-') or 'run'}__{seed}__{stamp}"


def make_run_dir(name: str, seed: int, root: str | os.PathLike[str] = "runs", config: Any = None) -> Path:
    """Create a fresh run directory and write the resolved config into it.

    Args:
        name: Human-readable run name (e.g. ``"mbpo-Pendulum-v1"``).
        seed: The run's seed (part of the directory name).
        root: Parent directory, created if needed.
        config: A dataclass config or mapping written to ``config.yaml``; skipped if ``None``.

    Returns:
        The new directory. If the name is taken (two runs in the same second) a ``-N`` suffix is added.
    """
    base = Path(root) / run_dir_name(name, seed)
    path = base
    counter = 1
    while True:
        try:
            path.mkdir(parents=True, exist_ok=False)
            break
        except FileExistsError:
            counter += 1
            path = base.with_name(f"{base.name}-{counter}")
    if config is not None:
        save_yaml(config, path / "config.yaml")
    return path


class OutputPathError(ValueError):
    """An output path that cannot be written; the message names the path and the reason."""


def _first_missing(path: Path) -> Path | None:
    """The topmost ancestor of ``path`` (``path`` included) that does not exist yet; ``None`` if ``path`` exists."""
    missing = None
    for candidate in (path, *path.parents):
        if candidate.exists():
            return missing
        missing = candidate
    return missing


def check_output_path(path: str | os.PathLike[str], kind: Literal["dir", "file"] = "dir") -> Path:
    """Refuse, before any work starts, an output path that the work could not write at its end.

    The path is usable when it already is a writable directory (``kind="dir"``) or a writable file or nothing yet
    (``kind="file"``), or when it does not exist and its nearest existing ancestor is a writable directory (the
    missing folders can be created). Writability is tried, not looked up: ``os.access`` says yes to root everywhere,
    ``/proc`` and read-only mounts included. Nothing is left behind: the probe file is removed and no folder is
    created.

    Args:
        path: The output directory or file.
        kind: ``"dir"`` for a directory the work writes into, ``"file"`` for one file it writes.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        OutputPathError: naming the path and why it cannot be written.
    """
    target = Path(path)
    if str(path) == "":
        raise OutputPathError("empty output path")
    if target.exists():
        if kind == "dir" and not target.is_dir():
            raise OutputPathError(f"{target} exists and is not a directory")
        if kind == "file" and target.is_dir():
            raise OutputPathError(f"{target} is a directory, not a file")
    missing = _first_missing(target)
    probe_dir = target if missing is None and kind == "dir" else (missing or target).parent
    if not probe_dir.is_dir():
        raise OutputPathError(f"cannot create {target}: {probe_dir} is not a directory")
    try:
        handle, name = tempfile.mkstemp(dir=probe_dir, prefix=".write-check-")
    except OSError as exc:
        raise OutputPathError(f"cannot write {target}: {probe_dir}: {exc.strerror or exc}") from exc
    os.close(handle)
    os.unlink(name)
    return target


def _output_option(value: Path | None, kind: Literal["dir", "file"]) -> Path | None:
    import typer  # the CLI's library, imported here so that the trainers importing this module do not need it

    if value is None:
        return None
    try:
        return check_output_path(value, kind)
    except OutputPathError as exc:
        raise typer.BadParameter(str(exc)) from exc


def output_dir_option(value: Path | None) -> Path | None:
    """Typer callback of options naming an output directory: :func:`check_output_path` before any work.

    Raises:
        typer.BadParameter: the directory cannot be written (exit code 2, one line).
    """
    return _output_option(value, "dir")


def output_file_option(value: Path | None) -> Path | None:
    """Typer callback of options naming an output file: :func:`check_output_path` before any work.

    Raises:
        typer.BadParameter: the file cannot be written (exit code 2, one line).
    """
    return _output_option(value, "file")


@contextlib.contextmanager
def run_dir_kept_on_success(
    name: str, seed: int, root: str | os.PathLike[str] = "runs", config: Any = None
) -> Iterator[Path]:
    """:func:`make_run_dir` for a block that builds the run: if the block raises, the run was refused before any work,
    so the run directory goes again, with every folder of ``root`` it created, and the exception goes on.

    Yields:
        The new run directory.
    """
    missing = _first_missing(Path(root))
    path = make_run_dir(name, seed, root=root, config=config)
    try:
        yield path
    except BaseException:
        shutil.rmtree(missing if missing is not None else path, ignore_errors=True)
        raise


def write_result(run_dir: str | os.PathLike[str], result: dict[str, Any]) -> Path:
    """Atomically write ``result.json`` into a run directory."""
    return atomic_write_json(Path(run_dir) / "result.json", result)
