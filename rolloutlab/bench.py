"""The quick benchmark suite behind ``rolloutlab bench``.

Each pillar contributes a ``quick_bench(out_dir) -> list[BenchLine]`` function that runs its headline benchmark at a
small default size. This module runs whatever functions it is handed, prints one table, and writes
``summary.json`` and ``summary.md`` into the bench directory. It imports no pillar: :mod:`rolloutlab.cli` resolves the
pillar functions and passes them in.
"""

from __future__ import annotations

import dataclasses
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


@dataclass
class PillarEntry:
    """A pillar as the bench sees it: its name and its quick benchmark."""

    name: str
    quick_bench: QuickBench


def _format_value(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.4g}" if isinstance(value, float) and not float(value).is_integer() else f"{value:g}"


def run_suite(pillars: Sequence[PillarEntry], out_dir: Path, console: Console | None = None) -> dict[str, Any]:
    """Run each pillar's quick benchmark, print the table and write summary.json / summary.md.

    A pillar whose benchmark raises is reported as failed with the error; the others still run.

    Returns:
        The summary written to ``summary.json``.
    """
    # Rich wraps to 80 columns when stdout is not a terminal (CI logs, `make run | tee`); the table needs more.
    console = console or Console(width=None if sys.stdout.isatty() else 180)
    out_dir.mkdir(parents=True, exist_ok=True)
    lines: list[BenchLine] = []
    errors: dict[str, str] = {}
    for entry in pillars:
        console.print(f"[bold]{entry.name}[/bold]: running quick benchmark ...")
        start = time.perf_counter()
        try:
            lines.extend(entry.quick_bench(out_dir / entry.name))
        except Exception as exc:
            errors[entry.name] = f"{type(exc).__name__}: {exc}"
            console.print(f"[red]{entry.name} failed after {time.perf_counter() - start:.1f}s[/red]")
            console.print(traceback.format_exc())

    table = Table(title="rolloutlab bench")
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
    console.print(table)

    summary = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "lines": [dataclasses.asdict(line) for line in lines],
        "errors": errors,
    }
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
    return summary
