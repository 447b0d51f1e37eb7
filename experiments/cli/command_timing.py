"""What the ``make`` timings share: run a command with its output streamed to the terminal and a log, and describe
the machine it ran on (timings on a busy machine are not comparable, so the load average goes with every figure)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def run_streamed(
    command: Sequence[str], cwd: Path, log_path: Path, env: Mapping[str, str] | None = None
) -> tuple[int, float, str]:
    """Run ``command`` in ``cwd``, copying its output (stdout and stderr together) to this terminal and ``log_path``.

    Returns:
        The exit code, the wall time in seconds, and the whole output.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    output: list[str] = []
    start = time.perf_counter()
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=dict(os.environ if env is None else env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        assert process.stdout is not None
        for line in process.stdout:
            sys.stdout.write(line)
            log.write(line)
            output.append(line)
        code = process.wait()
    return code, time.perf_counter() - start, "".join(output)


def machine(load_average_before: tuple[float, float, float]) -> dict[str, Any]:
    """CPU count, the 1/5/15-minute load averages taken before the command, Python and platform."""
    return {
        "cpus": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_average_before],
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
