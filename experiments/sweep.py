"""The resumable sweep every benchmark script runs: units (an arm on a seed, optionally in a group), one JSON file each.

A benchmark is a grid of independent runs. :func:`run_sweep` runs the units whose file is missing, writes each record
atomically (:func:`rolloutlab.checkpoint.atomic_write_json`) the moment it finishes, and reads the others back, so a
killed benchmark loses at most the units in progress and a rerun picks up where it stopped. Units are listed seed-major
by :func:`grid` (after each seed every arm has a comparable run, so a benchmark cut short stays usable). With
``workers > 1`` units run in worker processes, each writing its own file; a unit that raises is reported at the end
(:class:`SweepError`) after the others have finished and been written.

Each script keeps its own file names and record contents: the unit's ``path`` is the caller's, and the record is what
the caller's ``run`` returns.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from rolloutlab.checkpoint import atomic_write_json

Record = dict[str, Any]


@dataclass(frozen=True)
class Unit:
    """One run of a sweep and the JSON file its record goes to.

    Attributes:
        arm: The arm (method, allocator, controller spec, ...).
        seed: The seed the arm runs on.
        path: Where the finished record is written (and read back by a rerun).
        group: What else tells units apart, e.g. a task family or a method ("" when arm and seed suffice).
    """

    arm: str
    seed: int
    path: Path
    group: str = ""

    @property
    def label(self) -> str:
        """``"[group ]arm seed N"`` for progress lines."""
        return " ".join(part for part in (self.group, self.arm, f"seed {self.seed}") if part)


class SweepError(RuntimeError):
    """Some units raised; every other unit finished and was written.

    Attributes:
        failures: The failed units with the traceback text of each.
    """

    def __init__(self, failures: Mapping[Unit, str]) -> None:
        self.failures = dict(failures)
        names = ", ".join(unit.label for unit in self.failures)
        first = next(iter(self.failures.values()), "")
        super().__init__(f"{len(self.failures)} unit(s) failed: {names}; rerun to retry them. First failure:\n{first}")


def unit_file(folder: Path, arm: str, seed: int, group: str = "") -> Path:
    """The benchmarks' usual record file: ``<folder>/[<group>__]<arm>__<seed>.json``."""
    return folder / ("__".join([group, arm, str(seed)] if group else [arm, str(seed)]) + ".json")


def grid(
    arms: Iterable[str], seeds: Iterable[int], path: Path | Callable[[str, int], Path], group: str = ""
) -> list[Unit]:
    """Every (arm, seed) unit, seeds outermost.

    Args:
        arms: Arm names, in the order the runs of one seed are made.
        seeds: Seeds.
        path: A folder (each record in :func:`unit_file`) or the file of the record of ``(arm, seed)``.
        group: The units' :attr:`Unit.group`.
    """
    arms = list(arms)

    def file(arm: str, seed: int) -> Path:
        return unit_file(path, arm, seed, group) if isinstance(path, Path) else path(arm, seed)

    return [Unit(arm, seed, file(arm, seed), group) for seed in seeds for arm in arms]


def read_record(path: Path) -> Record:
    """A unit's record as written by :func:`run_sweep`."""
    record: Record = json.loads(path.read_text())
    return record


def _run_unit(run: Callable[[Unit], Record], unit: Unit) -> Record:
    """Run one unit and write its record; in a worker process the file is written there, before the record returns."""
    record = run(unit)
    atomic_write_json(unit.path, record)
    return record


def run_sweep(
    units: Sequence[Unit],
    run: Callable[[Unit], Record],
    *,
    reuse: Callable[[Unit, Record], bool] | None = None,
    workers: int = 1,
    describe: Callable[[Unit, Record], str] | None = None,
    on_record: Callable[[Unit, Record, dict[Unit, Record]], None] | None = None,
    show_progress: bool = True,
) -> dict[Unit, Record]:
    """Run every unit whose record is not on disk yet; return every unit's record, in the order of ``units``.

    Args:
        units: The units (:func:`grid`), each with its own file.
        run: Makes one unit's record (a JSON-ready dict). With ``workers > 1`` it must pickle: a module-level function
            or a :func:`functools.partial` of one.
        reuse: Called with each record found on disk before anything runs: ``True`` keeps it, ``False`` runs the
            unit again (overwriting the file); raising stops the sweep before any run. Default: keep every record.
        workers: Worker processes (1: run in this process, in order).
        describe: The progress line of a finished unit (default: its label).
        on_record: Called in this process after each new record is written, with the unit, its record and every
            record so far (kept and new, in the order of ``units``).
        show_progress: A tqdm bar over the units to run, plus one line per finished unit.

    Returns:
        ``{unit: record}`` for every unit, in the order of ``units``.

    Raises:
        SweepError: some units raised; the records of all the others were written (and are kept by a rerun).
    """
    records: dict[Unit, Record] = {}
    todo: list[Unit] = []
    for unit in units:
        if unit.path.is_file():
            record = read_record(unit.path)
            if reuse is None or reuse(unit, record):
                records[unit] = record
                continue
        todo.append(unit)
    for parent in {unit.path.parent for unit in todo}:
        parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    bar = tqdm(total=len(todo), desc="units", unit="unit", disable=not show_progress or not todo, dynamic_ncols=True)
    if show_progress:
        tqdm.write(f"{len(todo)} units to run, {len(records)} kept")
    failures: dict[Unit, str] = {}

    def finished(unit: Unit, record: Record) -> None:
        records[unit] = record
        bar.update()
        if show_progress:
            line = describe(unit, record) if describe is not None else unit.label
            tqdm.write(f"[{time.perf_counter() - started:.0f}s] {line}")
        if on_record is not None:
            on_record(unit, record, {u: records[u] for u in units if u in records})

    def failed(unit: Unit, text: str) -> None:
        failures[unit] = text
        bar.update()
        tqdm.write(f"[{time.perf_counter() - started:.0f}s] {unit.label} FAILED:\n{text}")

    try:
        if workers > 1 and len(todo) > 1:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                futures: dict[Future[Record], Unit] = {pool.submit(_run_unit, run, unit): unit for unit in todo}
                for future in as_completed(futures):
                    error = future.exception()
                    if error is None:
                        finished(futures[future], future.result())
                    else:
                        failed(futures[future], "".join(traceback.format_exception(error)))
        else:
            for unit in todo:
                try:
                    record = _run_unit(run, unit)
                except Exception:
                    failed(unit, traceback.format_exc())
                else:
                    finished(unit, record)
    finally:
        bar.close()
    if failures:
        raise SweepError(failures)
    return {unit: records[unit] for unit in units}
