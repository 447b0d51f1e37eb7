"""The arms file shared by several test processes on one machine: units claimed under a lock, results merged on write.

One test process runs one unit at a time on one core (``OMP_NUM_THREADS=1``), so a machine with N cores scores the arms
N times faster with N processes on the same command. They must neither run the same unit twice nor overwrite each
other's finished units, which a process holding the arms file in memory and writing it whole would do. Here every
read-modify-write of the arms file, and every claim of a unit, happens under one :class:`filelock.FileLock`, and the
file is re-read from disk inside the lock. Claims live in a small JSON file beside the per-phase scratch checkpoints
(not in the results, which are committed): ``{unit name: {"pid", "started"}}``. A claim whose process has died (a kill,
the end of a session) is void, so the next process takes the unit up and resumes it from its per-phase checkpoint.

Units are independent (run ``i``'s seed depends on ``i`` alone), so which process runs which unit changes no number.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from filelock import FileLock

from experiments.meta.rollout_length_protocol import EvalUnit, pending_units, record_unit
from rolloutlab.checkpoint import atomic_write_json


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (``/proc/<pid>/stat`` field 22), which tells a reused pid apart.

    None where ``/proc`` is unavailable or the process does not exist.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is parenthesised and may hold spaces: split after its closing parenthesis.
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[19]  # field 22 overall; fields[0] here is field 3


def process_alive(pid: int, started: str | None) -> bool:
    """Whether process ``pid`` still runs and is the one that was started at ``started`` (None: any)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: it exists
    return started is None or process_start_time(pid) in (None, started)


class SharedArmsFile:
    """An arms file (``{"protocol", "arms", "slices"}``) that several processes fill unit by unit.

    Args:
        path: The arms file (results; committed).
        scratch_dir: Where the lock and the claims file go (not committed).
        protocol: The test protocol; a file that holds another protocol's results is refused.
    """

    def __init__(self, path: str | Path, scratch_dir: str | Path, protocol: Mapping[str, Any]) -> None:
        self.path = Path(path)
        scratch = Path(scratch_dir)
        scratch.mkdir(parents=True, exist_ok=True)
        self.lock = FileLock(str(scratch / f"{self.path.name}.lock"))
        self.claims_path = scratch / f"{self.path.stem}.claims.json"
        self.protocol = dict(protocol)
        with self.lock:
            saved = self._read()
            if saved.get("protocol", self.protocol) != self.protocol:
                raise SystemExit(f"{self.path} holds results of another protocol; move it away to start anew")
            if "protocol" not in saved:
                saved["protocol"] = self.protocol
                atomic_write_json(self.path, saved)

    def _read(self) -> dict[str, Any]:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def _live_claims(self) -> dict[str, dict[str, Any]]:
        claims = json.loads(self.claims_path.read_text()) if self.claims_path.exists() else {}
        return {name: c for name, c in claims.items() if process_alive(int(c["pid"]), c.get("started"))}

    def read(self) -> dict[str, Any]:
        """The arms file as it is on disk now."""
        with self.lock:
            return self._read()

    def claim_next(self, specs: Mapping[str, str], test_runs: int, runs_per_unit: int) -> EvalUnit | None:
        """Claim the first pending unit (in :func:`pending_units` order) that no live process holds; None if none."""
        with self.lock:
            claims = self._live_claims()
            for unit in pending_units(specs, test_runs, runs_per_unit, self._read()):
                if unit.name not in claims:
                    pid = os.getpid()
                    claims[unit.name] = {"pid": pid, "started": process_start_time(pid), "since": time.time()}
                    atomic_write_json(self.claims_path, claims)
                    return unit
            return None

    def claimed_by_others(self, specs: Mapping[str, str], test_runs: int, runs_per_unit: int) -> list[str]:
        """Names of the pending units that other live processes hold (what this process leaves to them)."""
        with self.lock:
            claims = self._live_claims()
            pending = pending_units(specs, test_runs, runs_per_unit, self._read())
            return [u.name for u in pending if u.name in claims and int(claims[u.name]["pid"]) != os.getpid()]

    def release(self, unit: EvalUnit) -> None:
        """Drop this process's claim on ``unit`` (it failed or was interrupted; another process may take it)."""
        with self.lock:
            claims = self._live_claims()
            if claims.get(unit.name, {}).get("pid") == os.getpid():
                del claims[unit.name]
                atomic_write_json(self.claims_path, claims)

    def record(self, unit: EvalUnit, result: Mapping[str, Any], test_runs: int) -> tuple[dict[str, Any], bool]:
        """File a finished unit into the file as it is on disk now and release its claim.

        Returns:
            The arms file after the write, and whether the unit's arm became complete.
        """
        with self.lock:
            saved = self._read()
            complete = record_unit(unit, result, saved, test_runs)
            atomic_write_json(self.path, saved)
            claims = self._live_claims()
            claims.pop(unit.name, None)
            atomic_write_json(self.claims_path, claims)
            return saved, complete
