"""How long ``make test`` takes on a fresh clone: lint, type check, the docs build and the whole pytest suite.

Clones the committed ``HEAD`` of this repository into a temporary folder (so untracked files, caches and an installed
``.venv`` play no part) and runs ``make test`` there once, its output streamed to this terminal and kept in
``make_test.log`` beside the JSON. By default the clone installs its own environment, as a new user's would, so the
figure includes pip; ``--venv`` points ``make`` at an environment installed already, for the suite alone. Reported:
the wall time, the exit code, pytest's counts and its own seconds (from its last summary line), the commit, and the
machine's CPU count and load average before the run (timings on a busy machine are not comparable).

    python experiments/cli/make_test_time.py                     # -> experiments/cli/results/make_test.json
    python experiments/cli/make_test_time.py --venv /path/.venv  # the suite only, in an installed environment
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from anywhere
from experiments.cli.command_timing import machine, run_streamed
from rolloutlab.checkpoint import atomic_write_json

ROOT = Path(__file__).resolve().parents[2]

#: pytest's closing line, e.g. ``==== 867 passed, 3 skipped, 2 warnings in 812.31s (0:13:32) ====`` (without the
#: ``=`` rules under ``-q``).
_SUMMARY = re.compile(r"^(?:=+ )?(?P<body>.*\d+ (?:passed|failed|error|errors|skipped|deselected).*) in (?P<s>[\d.]+)s")
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)")


@dataclass
class Args:
    command: str = "make test"
    """what to time, run in the clone's root (split like a shell line)"""
    venv: Path | None = None
    """an installed virtual environment for ``make`` (its VENV variable); unset: the clone installs its own"""
    repo: Path = ROOT
    """the repository whose HEAD is cloned"""
    out: Path = Path(__file__).resolve().parent / "results" / "make_test.json"
    """where the JSON goes (the log goes beside it as make_test.log)"""


def pytest_summary(output: str) -> dict[str, Any]:
    """pytest's counts and seconds from the last summary line of ``output`` (``{}`` if pytest printed none).

    Returns:
        ``{"passed": int, "failed": int, ..., "seconds": float}`` with only the counts that line names; ``error`` and
        ``warning`` are reported as ``errors`` and ``warnings``.
    """
    summary: dict[str, Any] = {}
    for line in output.splitlines():
        match = _SUMMARY.match(line.strip())
        if match is None:
            continue
        summary = {}  # the last summary line wins (make test runs one pytest, but a log may hold more)
        for count, kind in _COUNT.findall(match["body"]):
            key = {"error": "errors", "warning": "warnings"}.get(kind, kind)
            summary[key] = int(count)
        summary["seconds"] = float(match["s"])
    return summary


def main(args: Args) -> dict[str, Any]:
    """Clone, run the command, write the JSON; returns what it wrote."""
    load = os.getloadavg()
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=args.repo, check=True, capture_output=True, text=True
    ).stdout.strip()
    command = shlex.split(args.command)
    if args.venv is not None:
        # --assume-old keeps make from reinstalling an environment whose stamp is older than the clone's files.
        command += [f"VENV={args.venv}", *(f"--assume-old={stamp}" for stamp in args.venv.glob(".installed-*"))]
    with tempfile.TemporaryDirectory(prefix="rolloutlab-make-test-") as tmp:
        clone = Path(tmp) / "rolloutlab"
        subprocess.run(["git", "clone", "--quiet", str(args.repo), str(clone)], check=True)
        env = {**os.environ, "PYTHONPATH": str(clone)}  # the clone's code, whatever an installed venv points to
        code, wall, output = run_streamed(command, cwd=clone, log_path=args.out.with_name("make_test.log"), env=env)
    record = {
        "command": args.command,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "commit": commit,
        "fresh_clone": True,
        "installs_environment": args.venv is None,
        "wall_seconds": round(wall, 1),
        "exit_code": code,
        "pytest": pytest_summary(output),
        "machine": machine(load),
    }
    atomic_write_json(args.out, record)
    print(f"{args.command}: {wall:.0f} s (exit {code}); pytest {record['pytest']}; wrote {args.out}")
    return record


if __name__ == "__main__":
    main(tyro.cli(Args))
