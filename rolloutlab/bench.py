"""The quick benchmark suite behind ``rolloutlab bench``.

Each pillar contributes a ``quick_bench(out_dir) -> list[BenchLine]`` function that runs its headline benchmark at a
small default size. Those functions are benchmark protocol, so they live in the clone's ``experiments/<pillar>/``
(not in the installed packages): :func:`load_quick_bench` imports one from the checkout, and fails with
:data:`NEEDS_CLONE` in an installed wheel. :func:`run_suite` runs whatever functions it is handed, prints one table,
and writes ``summary.json`` and ``summary.md`` into the bench directory. This module imports no pillar.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

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


@dataclass
class PillarEntry:
    """A pillar as the bench sees it: its name and its quick benchmark."""

    name: str
    quick_bench: QuickBench


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


def run_suite(pillars: Sequence[PillarEntry], out_dir: Path, console: Console | None = None) -> dict[str, Any]:
    """Run each pillar's quick benchmark, print its rows as it finishes, then the whole table and a verdict line;
    write summary.json / summary.md.

    A pillar whose benchmark raises is reported as failed with the error; the others still run.

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
            rows = entry.quick_bench(out_dir / entry.name)
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
