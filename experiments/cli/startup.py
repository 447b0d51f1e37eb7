"""How long ``rolloutlab --help`` takes: the command line must answer at once, whatever the pillars import.

Each repeat starts a fresh interpreter (``python -m rolloutlab.cli --help``) and times it to the exit, so the figure
includes Python's own start-up. Alongside, ``python -c pass`` is timed in the same loop as the floor no command can
beat on this machine. Reported: median and 90th percentile over ``repeats`` runs, and which heavy libraries the help
path imported (none should be).

    python experiments/cli/startup.py                # -> experiments/cli/results/startup.json
"""

from __future__ import annotations

import json
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import tyro

from rolloutlab.checkpoint import atomic_write_json

HEAVY = ("torch", "gymnasium", "stable_baselines3", "transformers", "trl")
TARGET_SECONDS = 1.0


@dataclass
class Args:
    repeats: int = 15
    """fresh interpreters timed per command"""
    out: Path = Path(__file__).resolve().parent / "results" / "startup.json"
    """where the JSON goes"""


def _time(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _summary(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "median_s": round(statistics.median(ordered), 4),
        "p90_s": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], 4),
        "min_s": round(ordered[0], 4),
    }


def main(args: Args) -> dict[str, object]:
    help_cmd = [sys.executable, "-m", "rolloutlab.cli", "--help"]
    floor_cmd = [sys.executable, "-c", "pass"]
    help_s, floor_s = [], []
    for _ in range(args.repeats):  # interleaved, so a busy moment hits both columns alike
        help_s.append(_time(help_cmd))
        floor_s.append(_time(floor_cmd))
    probe = (
        "import sys, runpy; sys.argv = ['rolloutlab', '--help']\n"
        "try:\n    runpy.run_module('rolloutlab.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"
    )
    imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stderr
    result: dict[str, object] = {
        "command": "python experiments/cli/startup.py",
        "args": {k: str(v) for k, v in asdict(args).items()},
        "machine": {"python": platform.python_version(), "processor": platform.machine()},
        "rolloutlab_help": _summary(help_s),
        "python_pass": _summary(floor_s),
        "heavy_modules_imported": json.loads(imported.strip().splitlines()[-1].replace("'", '"')),
        "target_s": TARGET_SECONDS,
    }
    result["met"] = _summary(help_s)["median_s"] <= TARGET_SECONDS and not result["heavy_modules_imported"]
    atomic_write_json(args.out, result)
    print(json.dumps({k: result[k] for k in ("rolloutlab_help", "python_pass", "heavy_modules_imported", "met")}))
    return result


if __name__ == "__main__":
    main(tyro.cli(Args))
