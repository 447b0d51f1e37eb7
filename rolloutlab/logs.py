"""Logger set-up: an SB3 :class:`~stable_baselines3.common.logger.Logger` writing stdout, CSV and TensorBoard.

Keys follow SB3's namespaces (``rollout/``, ``train/``, ``eval/``, ``time/``) plus ``model/`` for the world model and
``meta/`` for controller decisions, so one TensorBoard view shows the policy learner, the model and the controller.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from stable_baselines3.common.logger import Logger, configure

DEFAULT_FORMATS: tuple[str, ...] = ("stdout", "csv", "tensorboard")


def make_logger(run_dir: str | os.PathLike[str] | None, formats: Sequence[str] = DEFAULT_FORMATS) -> Logger:
    """Create an SB3 logger writing into ``run_dir`` (``progress.csv``, TensorBoard events).

    Args:
        run_dir: Where to write; ``None`` logs to stdout only. If ``progress.csv`` is already there (a resumed run),
            it is kept as ``progress.N.csv`` rather than overwritten.
        formats: Any of ``"stdout"``, ``"csv"``, ``"tensorboard"``, ``"json"``, ``"log"``.
    """
    if run_dir is None:
        return configure(None, ["stdout"] if "stdout" in formats else [])
    directory = Path(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    # SB3's CSV writer truncates progress.csv; a resumed run must not lose the sessions before the crash, so the
    # earlier file is kept as progress.N.csv (N = 1, 2, ... in session order).
    previous = directory / "progress.csv"
    if "csv" in formats and previous.exists() and previous.stat().st_size > 0:
        index = 1
        while (directory / f"progress.{index}.csv").exists():
            index += 1
        previous.rename(directory / f"progress.{index}.csv")
    return configure(str(directory), list(formats))
