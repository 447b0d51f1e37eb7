"""Run directories: ``runs/<name>__<seed>__<time>/`` holding config.yaml, logs, checkpoints and result.json."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

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


def write_result(run_dir: str | os.PathLike[str], result: dict[str, Any]) -> Path:
    """Atomically write ``result.json`` into a run directory."""
    return atomic_write_json(Path(run_dir) / "result.json", result)
