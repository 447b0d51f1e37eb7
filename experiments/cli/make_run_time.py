"""How long ``make run`` takes: the whole quick benchmark suite, end to end, with each pillar's seconds.

Runs ``make run`` once from the repository root (the environment already installed, so the figure is the suite, not
pip), its output streamed to this terminal and kept in ``make_run.log`` beside the JSON. Reported: the wall time of
the command, its exit code, the suite's own per-pillar seconds and verdict (from the ``summary.json`` it wrote), the
machine's CPU count and load average before the run (timings on a busy machine are not comparable).

    python experiments/cli/make_run_time.py                    # -> experiments/cli/results/make_run.json
    python experiments/cli/make_run_time.py --venv /path/.venv # a virtual environment installed elsewhere
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from anywhere
from experiments.cli.command_timing import machine, run_streamed
from rolloutlab.checkpoint import atomic_write_json

ROOT = Path(__file__).resolve().parents[2]
#: The brief for the command: the suite must finish within five minutes on the project's 2-core machine.
TARGET_SECONDS = 300.0


@dataclass
class Args:
    venv: Path = ROOT / ".venv"
    """the installed virtual environment ``make`` should use (its VENV variable)"""
    out: Path = Path(__file__).resolve().parent / "results" / "make_run.json"
    """where the JSON goes"""


def main(args: Args) -> None:
    runs = ROOT / "runs"
    before = set(runs.glob("bench-*")) if runs.is_dir() else set()
    load = os.getloadavg()
    # The environment is installed already: --assume-old keeps make from reinstalling it when pyproject.toml is newer
    # than its stamp, and PYTHONPATH makes this checkout's code run whatever the venv's install points to.
    stamps = [f"--assume-old={stamp}" for stamp in args.venv.glob(".installed-*")]
    code, wall, _ = run_streamed(
        ["make", "run", f"VENV={args.venv}", *stamps],
        cwd=ROOT,
        log_path=args.out.with_name("make_run.log"),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    new = sorted(set(runs.glob("bench-*")) - before)
    summary = json.loads((new[-1] / "summary.json").read_text()) if new else {}
    record = {
        "command": "make run",
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "wall_seconds": round(wall, 1),
        "target_seconds": TARGET_SECONDS,
        "within_target": wall <= TARGET_SECONDS,
        "exit_code": code,
        "pillar_seconds": summary.get("seconds", {}),
        "suite_passed": summary.get("passed"),
        "rows": [
            {k: line[k] for k in ("pillar", "metric", "value", "target", "passed", "seconds")}
            for line in summary.get("lines", [])
        ],
        "errors": summary.get("errors", {}),
        "machine": machine(load),
    }
    atomic_write_json(args.out, record)
    print(f"make run: {wall:.0f} s (exit {code}); per pillar {record['pillar_seconds']}; wrote {args.out}")


if __name__ == "__main__":
    main(tyro.cli(Args))
