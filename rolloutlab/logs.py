"""Logger set-up: an SB3 :class:`~stable_baselines3.common.logger.Logger` writing stdout, CSV and TensorBoard.

Keys follow SB3's namespaces (``rollout/``, ``train/``, ``eval/``, ``time/``) plus ``model/`` for the world model and
``meta/`` for controller decisions, so one TensorBoard view shows the policy learner, the model and the controller.

``progress.csv`` carries a ``step`` column (the step each row was dumped at), so a resumed run continues the one file:
:func:`make_logger` with ``resume_step`` drops the rows the interrupted session wrote after its checkpoint and appends.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stable_baselines3.common.logger import CSVOutputFormat, Logger, configure

from rolloutlab.checkpoint import atomic_write_text

DEFAULT_FORMATS: tuple[str, ...] = ("stdout", "csv", "tensorboard")

#: The column of ``progress.csv`` holding the step passed to ``Logger.dump``.
STEP_COLUMN = "step"


def _step_of(row: list[str], index: int) -> float | None:
    try:
        return float(row[index])
    except (IndexError, ValueError):
        return None


def truncate_progress(path: Path, resume_step: int) -> list[str]:
    """Keep the header and the rows of ``path`` whose step is at most ``resume_step``; return the header's keys.

    The rows after the checkpoint step were written by the interrupted session and are written again by the resumed
    one, so keeping them would duplicate steps.
    """
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    if not lines:
        return []
    header = next(csv.reader([lines[0]]))
    index = header.index(STEP_COLUMN)
    kept = [lines[0]]
    for line in lines[1:]:
        step = _step_of(next(csv.reader([line]), []), index)
        if step is not None and step <= resume_step:
            kept.append(line if line.endswith("\n") else line + "\n")
    atomic_write_text(path, "".join(kept))
    return header


class StepCSVOutputFormat(CSVOutputFormat):
    """SB3's CSV writer with a ``step`` column, that can continue an existing ``progress.csv`` in place."""

    def __init__(self, filename: str, resume_step: int | None = None) -> None:
        path = Path(filename)
        header: list[str] = []
        if resume_step is not None and path.exists() and path.stat().st_size > 0:
            header = truncate_progress(path, resume_step)
        if header:
            # r+ (not a+): SB3 rewrites the file from the start when a new key appears, which append mode forbids.
            self.file: io.TextIOWrapper = open(path, "r+", encoding="utf-8")  # noqa: SIM115 - closed by close()
            self.file.seek(0, os.SEEK_END)
        else:
            self.file = open(path, "w+", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self.keys: list[str] = header
        self.separator = ","
        self.quotechar = '"'

    def write(self, key_values: dict[str, Any], key_excluded: dict[str, tuple[str, ...]], step: int = 0) -> None:
        """Write one row, its ``step`` column set to ``step``."""
        if not self.keys:
            self.keys.append(STEP_COLUMN)
        super().write({STEP_COLUMN: step, **key_values}, key_excluded, step)


def _has_step_column(path: Path) -> bool:
    with path.open(encoding="utf-8") as f:
        return STEP_COLUMN in next(csv.reader([f.readline()]), [])


def make_logger(
    run_dir: str | os.PathLike[str] | None,
    formats: Sequence[str] = DEFAULT_FORMATS,
    resume_step: int | None = None,
) -> Logger:
    """Create an SB3 logger writing into ``run_dir`` (``progress.csv`` with a ``step`` column, TensorBoard events).

    Args:
        run_dir: Where to write; ``None`` logs to stdout only.
        formats: Any of ``"stdout"``, ``"csv"``, ``"tensorboard"``, ``"json"``, ``"log"``.
        resume_step: The checkpoint step of a resumed run: ``progress.csv`` keeps its rows up to this step and the
            new rows are appended to it. ``None`` (a fresh run) starts a new ``progress.csv``; one already there, or
            one without a ``step`` column, is kept as ``progress.N.csv`` rather than overwritten.
    """
    if run_dir is None:
        return configure(None, ["stdout"] if "stdout" in formats else [])
    directory = Path(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    previous = directory / "progress.csv"
    earlier = previous.exists() and previous.stat().st_size > 0 and "csv" in formats
    if earlier and (resume_step is None or not _has_step_column(previous)):
        index = 1
        while (directory / f"progress.{index}.csv").exists():
            index += 1
        previous.rename(directory / f"progress.{index}.csv")
    logger = configure(str(directory), [f for f in formats if f != "csv"])
    if "csv" in formats:
        logger.output_formats.append(StepCSVOutputFormat(str(previous), resume_step))
    return logger


def announce_resume(run_dir: str | os.PathLike[str], step: int, total: int | None = None) -> str:
    """Print (stdout) and return the line every trainer shows when it resumes: ``resumed RUN_DIR at step N of T``."""
    line = f"resumed {run_dir} at step {step}" + (f" of {total}" if total is not None else "")
    print(line, flush=True)
    return line


def progress_bar(total: int, initial: int = 0, desc: str = "", unit: str = "step", enabled: bool | None = None) -> Any:
    """A tqdm bar with an ETA on stderr, shown only when stderr is a terminal (``enabled=None``), so logs stay clean.

    Args:
        total: The run's budget in ``unit``.
        initial: Where a resumed run starts.
        desc: The bar's label.
        unit: What one update counts (env steps, rounds).
        enabled: ``True``/``False`` force the bar on or off.
    """
    import sys

    from tqdm.auto import tqdm

    return tqdm(
        total=total,
        initial=initial,
        desc=desc,
        unit=unit,
        file=sys.stderr,
        dynamic_ncols=True,
        disable=None if enabled is None else not enabled,
    )
