"""The quick benchmark suite behind ``rolloutlab bench``.

Each pillar contributes a ``quick_bench(out_dir) -> list[BenchLine]`` function that runs its headline benchmark at a
small default size. Those functions are benchmark protocol, so they live in the clone's ``experiments/<pillar>/``
(not in the installed packages): :func:`load_quick_bench` imports one from the checkout, and fails with
:data:`NEEDS_CLONE` in an installed wheel. :func:`run_suite` runs whatever functions it is handed, prints one table,
and writes ``summary.json`` and ``summary.md`` into the bench directory, with a progress bar per pillar while it runs.
This module imports no pillar.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console, RenderableType
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from rolloutlab.checkpoint import atomic_write_json, atomic_write_text


@dataclass
class BenchLine:
    """One row of the bench table.

    Attributes:
        pillar: ``wordle``, ``mbrl``, ``mpc``, ``meta``, ``rlvr`` or ``incontext``.
        benchmark: What was run, e.g. ``"easy, rollout(GEP, k=10), opener salet"``.
        metric: Name of the headline number, e.g. ``"total guesses"``.
        value: The measured number (``None`` if it could not be measured).
        target: The target in words, e.g. ``"= 7920"``.
        passed: Whether the target was met (``None`` when there is no pass/fail notion).
        seconds: Wall-clock seconds this line took.
        command: The command that reproduces the full-size measurement.
        details: Any extra numbers worth keeping in ``summary.json``.
    """

    pillar: str
    benchmark: str
    metric: str
    value: float | None
    target: str
    passed: bool | None
    seconds: float
    command: str
    details: dict[str, Any] = field(default_factory=dict)


QuickBench = Callable[[Path], list[BenchLine]]


#: What a command that needs the benchmark protocol says when it runs from an installed wheel.
NEEDS_CLONE = (
    "rolloutlab bench needs a clone of the repository: the benchmark protocol lives in its experiments/ folder, "
    "which the installed package does not include"
)


class CheckoutMissing(RuntimeError):
    """The ``experiments/`` folder of a clone is not beside the ``rolloutlab`` package (an installed wheel)."""


def checkout_root() -> Path | None:
    """The clone's root (the folder above the ``rolloutlab`` package) if it holds ``experiments/``, else ``None``."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "experiments" / "__init__.py").is_file() else None


def load_quick_bench(module: str) -> QuickBench:
    """The ``quick_bench`` function of a checkout module such as ``experiments.mbrl.quick``.

    Puts the checkout's root on ``sys.path`` (only when a bench command asks, so importing rolloutlab never does).

    Raises:
        CheckoutMissing: no ``experiments/`` beside the package; the message is :data:`NEEDS_CLONE`.
    """
    root = checkout_root()
    if root is None:
        raise CheckoutMissing(NEEDS_CLONE)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    quick_bench: QuickBench = importlib.import_module(module).quick_bench
    return quick_bench


def expected_seconds(module: str) -> float | None:
    """The ``EXPECTED_SECONDS`` a checkout module such as ``experiments.mbrl.quick`` declares (its quick bench's wall
    time on an idle 2-core machine), or ``None`` if it declares none. Call after :func:`load_quick_bench`."""
    value = getattr(importlib.import_module(module), "EXPECTED_SECONDS", None)
    return None if value is None else float(value)


def previous_seconds(parent: Path) -> dict[str, float]:
    """Each pillar's wall seconds in the newest ``bench-*/summary.json`` under ``parent`` (empty if there is none):
    the last suite on this machine, which estimates the next one better than a figure measured elsewhere. A pillar
    that failed there is left out (it stopped early)."""
    for path in sorted(parent.glob("bench-*/summary.json"), reverse=True):
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
            failed = set(summary.get("errors", {}))
            return {str(name): float(value) for name, value in summary.get("seconds", {}).items() if name not in failed}
        except (OSError, ValueError, TypeError, AttributeError):
            continue  # a summary cut short or edited by hand: try the one before
    return {}


@dataclass
class PillarEntry:
    """A pillar as the bench sees it.

    Attributes:
        name: The pillar, e.g. ``mbrl``.
        quick_bench: Its quick benchmark.
        expected_seconds: How long it should take (the progress bar's length and ETA); ``None``: unknown, so the bar
            shows only the elapsed time.
    """

    name: str
    quick_bench: QuickBench
    expected_seconds: float | None = None


class _EstimateBar(BarColumn):
    """The bar of a pillar that reports no progress of its own: elapsed time over its expected seconds (stopping
    short of the end until the pillar returns), or a pulsing bar when no estimate exists."""

    def render(self, task: Task) -> ProgressBar:
        elapsed = task.elapsed or 0.0
        total = task.total
        return ProgressBar(
            total=total or 1.0,
            completed=0.0 if total is None else min(elapsed, 0.99 * total),
            width=None if self.bar_width is None else max(1, self.bar_width),
            pulse=total is None,
            animation_time=task.get_time(),
            style=self.style,
            complete_style=self.complete_style,
            finished_style=self.finished_style,
            pulse_style=self.pulse_style,
        )


class _EstimateLeft(ProgressColumn):
    """The ETA: expected seconds minus elapsed, or how far past its estimate a slow pillar runs."""

    def render(self, task: Task) -> RenderableType:
        if task.total is None:
            return Text("no estimate", style="progress.remaining")
        left = task.total - (task.elapsed or 0.0)
        if left > -1.0:  # "past the estimate" only once a whole second is
            return Text(f"ETA ~{max(left, 0.0):.0f} s", style="progress.remaining")
        return Text(f"{-left:.0f} s past the ~{task.total:.0f} s estimate", style="progress.remaining")


def _pillar_progress(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        _EstimateBar(),
        TimeElapsedColumn(),
        _EstimateLeft(),
        console=console,
        transient=True,  # the pillar's table replaces its bar
    )


def _format_value(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.4g}" if isinstance(value, float) and not float(value).is_integer() else f"{value:g}"


def _table(title: str, lines: Sequence[BenchLine], errors: dict[str, str]) -> Table:
    table = Table(title=title)
    for column in ("pillar", "benchmark", "metric", "value", "target", "ok", "seconds"):
        table.add_column(column)
    for line in lines:
        ok = "—" if line.passed is None else ("yes" if line.passed else "NO")
        table.add_row(
            line.pillar,
            line.benchmark,
            line.metric,
            _format_value(line.value),
            line.target,
            ok,
            f"{line.seconds:.1f}",
        )
    for name, message in errors.items():
        table.add_row(name, "(error)", message[:60], "", "", "NO", "")
    return table


def verdict(summary: dict[str, Any]) -> tuple[bool, str]:
    """Whether every row met its target (rows without a target and errors aside) and the sentence that says so."""
    failed = [f"{line['pillar']}: {line['metric']}" for line in summary["lines"] if line["passed"] is False]
    failed += [f"{name}: error" for name in summary["errors"]]
    if failed:
        return False, f"NOT ALL TARGETS MET: {len(failed)} row(s) say NO ({'; '.join(failed)})"
    return True, "all targets met"


def run_with_progress(entry: PillarEntry, out_dir: Path, console: Console | None = None) -> list[BenchLine]:
    """Run one pillar's quick benchmark into ``out_dir`` under a progress bar on ``console`` (default: stderr; drawn
    only on a terminal) that runs against the pillar's expected seconds, since a quick benchmark reports no progress of
    its own: its ETA is the estimate minus the time elapsed.

    Returns:
        The benchmark's rows; its exceptions propagate.
    """
    with _pillar_progress(console or Console(stderr=True)) as progress:
        progress.add_task(entry.name, total=entry.expected_seconds)
        return entry.quick_bench(out_dir)


def run_suite(
    pillars: Sequence[PillarEntry],
    out_dir: Path,
    console: Console | None = None,
    progress_console: Console | None = None,
) -> dict[str, Any]:
    """Run each pillar's quick benchmark under a progress bar, print its rows as it finishes, then the whole table and
    a verdict line; write summary.json / summary.md.

    A pillar whose benchmark raises is reported as failed with the error; the others still run. The bars are
    :func:`run_with_progress`'s, on ``progress_console`` (default: stderr).

    Returns:
        The summary written to ``summary.json`` (with ``passed``: no row said NO and no pillar failed, and
        ``seconds``: the wall time of each pillar).
    """
    # Rich wraps to 80 columns when stdout is not a terminal (CI logs, `make run | tee`); the table needs more.
    console = console or Console(width=None if sys.stdout.isatty() else 180)
    out_dir.mkdir(parents=True, exist_ok=True)
    lines: list[BenchLine] = []
    errors: dict[str, str] = {}
    seconds: dict[str, float] = {}
    suite_start = time.perf_counter()
    for index, entry in enumerate(pillars, start=1):
        console.print(f"[bold][{index}/{len(pillars)}] {entry.name}[/bold]: running quick benchmark ...")
        start = time.perf_counter()
        try:
            rows = run_with_progress(entry, out_dir / entry.name, progress_console)
        except Exception as exc:
            rows = []
            errors[entry.name] = f"{type(exc).__name__}: {exc}"
            console.print(traceback.format_exc())
        seconds[entry.name] = round(time.perf_counter() - start, 1)
        lines.extend(rows)
        mine = {entry.name: errors[entry.name]} if entry.name in errors else {}
        console.print(
            _table(
                f"{entry.name}: done in {seconds[entry.name]:.0f} s ({time.perf_counter() - suite_start:.0f} s so far)",
                rows,
                mine,
            )
        )

    console.print(_table("rolloutlab bench", lines, errors))

    summary = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "lines": [dataclasses.asdict(line) for line in lines],
        "errors": errors,
        "seconds": seconds,
        "total_seconds": round(time.perf_counter() - suite_start, 1),
    }
    summary["passed"], last_line = verdict(summary)
    atomic_write_json(out_dir / "summary.json", summary)
    md = [
        "| pillar | benchmark | metric | value | target | ok | seconds | command |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for line in lines:
        ok = "—" if line.passed is None else ("yes" if line.passed else "**no**")
        md.append(
            f"| {line.pillar} | {line.benchmark} | {line.metric} | {_format_value(line.value)} | {line.target} | {ok} "
            f"| {line.seconds:.1f} | `{line.command}` |"
        )
    for name, message in errors.items():
        md.append(f"| {name} | error: {message} | | | | **no** | | |")
    atomic_write_text(out_dir / "summary.md", "\n".join(md) + "\n")
    console.print(f"wrote {out_dir / 'summary.json'} and {out_dir / 'summary.md'}")
    console.print(
        f"[bold]{last_line}[/bold] ({summary['total_seconds']:.0f} s)", style=None if summary["passed"] else "red"
    )
    return summary
