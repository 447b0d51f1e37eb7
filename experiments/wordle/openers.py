"""The solver from every strong opener against Alex Selby's proven optima (issue "Wordle, second round").

Easy mode: every one of the 105 listed openers; hard mode: the 20 best of the 101 listed. Each opener is evaluated
exactly over all 2315 original answers with the documented configuration of its mode (``DEFAULT_TOP_K`` and
``DEFAULT_EXACT_UP_TO`` of ``planning.wordle.solver``: rollout over GEP, k = 10 easy; k = 5 with exact play on
beliefs of at most 40 answers hard), the same code as ``rolloutlab wordle bench --opener WORD``. The optima are
facts from Selby's published tables (``experiments/wordle/optima/SOURCE.md``).

    OMP_NUM_THREADS=1 python experiments/wordle/openers.py

Each finished opener is saved in ``results/openers_partial/<mode>/<word>.json`` at once and reused by a rerun with
the same configuration, so a killed run resumes where it stopped. Writes ``results/openers.json``: per mode every
opener's total, optimum, excess, max, failures and seconds, and the targets' keys ``<mode>.matched_fraction`` (share
of openers at their optimum; target >= 0.95), ``<mode>.max_excess`` (target <= 2) and ``<mode>.max_seconds``
(targets: 30 s easy, 300 s hard); ``results/openers.md`` is the table the docs quote.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tyro

from planning.wordle.bench import run_benchmark
from planning.wordle.solver import DEFAULT_EXACT_UP_TO, DEFAULT_TOP_K, SolverConfig
from rolloutlab.checkpoint import atomic_write_json, atomic_write_text

HERE = Path(__file__).resolve().parent
OPTIMA = {"easy": HERE / "optima" / "easy_original_top105.txt", "hard": HERE / "optima" / "hard_original_top101.txt"}
#: The issue's targets per mode.
TARGETS = {"matched_fraction": 0.95, "max_excess": 2, "max_seconds": {"easy": 30.0, "hard": 300.0}}


@dataclass
class Args:
    """Command line (each field a ``--flag``)."""

    modes: str = "easy,hard"
    """comma-separated modes"""
    hard_top: int = 20
    """hard mode: the best this many listed openers"""
    easy_top: int = 105
    """easy mode: the best this many listed openers (all 105 by default)"""
    out_dir: Path = HERE / "results"
    """where openers.json and openers_partial/ go"""


def read_optima(path: Path) -> list[tuple[str, int]]:
    """``(word, proven optimum total)`` per line of one of Selby's tables, best first as listed."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        word, total = line.split()
        rows.append((word, int(total)))
    return rows


def config_for(mode: str, opener: str) -> SolverConfig:
    """The documented configuration of ``mode`` with ``opener`` as the first guess."""
    return SolverConfig(mode=mode, top_k=DEFAULT_TOP_K[mode], exact_up_to=DEFAULT_EXACT_UP_TO[mode], opener=opener)


def summarize(mode: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One mode's entry: the rows and the target keys."""
    excess = [r["excess"] for r in rows]
    seconds = [r["seconds"] for r in rows]
    matched = sum(e == 0 for e in excess) / len(rows) if rows else float("nan")
    limit = TARGETS["max_seconds"][mode]  # type: ignore[index]
    return {
        "openers": len(rows),
        "matched_fraction": matched,
        "max_excess": max(excess) if excess else None,
        "max_seconds": max(seconds) if seconds else None,
        "targets": {
            "matched_fraction": TARGETS["matched_fraction"],
            "max_excess": TARGETS["max_excess"],
            "max_seconds": limit,
        },
        "met": {
            "matched_fraction": bool(rows) and matched >= TARGETS["matched_fraction"],  # type: ignore[operator]
            "max_excess": bool(rows) and max(excess) <= TARGETS["max_excess"],  # type: ignore[operator]
            "max_seconds": bool(rows) and max(seconds) <= limit,
        },
        "config": dataclasses.asdict(config_for(mode, "salet")) | {"opener": "each listed opener"},
        "rows": rows,
    }


def table(summary: dict[str, Any]) -> str:
    """The markdown table of ``openers.json`` that the docs quote (a test checks they agree)."""
    lines = [
        "| mode | openers | at the optimum | max excess | openers above it (excess) | slowest | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode in ("easy", "hard"):
        if mode not in summary:
            continue
        e = summary[mode]
        above = ", ".join(
            f"{r['opener']} +{r['excess']}" for r in sorted(e["rows"], key=lambda r: -r["excess"]) if r["excess"]
        )
        met = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in e["met"].items())
        lines.append(
            f"| {mode} | {e['openers']} | {e['matched_fraction']:.3f} (target ≥ {e['targets']['matched_fraction']}) "
            f"| {e['max_excess']} (target ≤ {e['targets']['max_excess']}) | {above or '—'} | {e['max_seconds']:.1f} s "
            f"(target ≤ {e['targets']['max_seconds']:.0f} s) | {met} |"
        )
    return "\n".join(lines) + "\n"


def main(args: Args | None = None) -> dict[str, Any]:
    """Evaluate (or reuse) every opener and write ``openers.json``."""
    if args is None:
        args = tyro.cli(Args, description=__doc__)
    out = args.out_dir / "openers.json"
    summary: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        top = args.easy_top if mode == "easy" else args.hard_top
        optima = read_optima(OPTIMA[mode])[:top]
        partial = args.out_dir / "openers_partial" / mode
        partial.mkdir(parents=True, exist_ok=True)
        rows = []
        started = time.perf_counter()
        for i, (word, optimum) in enumerate(optima, start=1):
            path = partial / f"{word}.json"
            config = dataclasses.asdict(config_for(mode, word))
            record = json.loads(path.read_text()) if path.exists() else None
            if record is None or record["config"] != config:
                result = run_benchmark(config_for(mode, word))
                record = {
                    "opener": word,
                    "optimum": optimum,
                    "total": result["total"],
                    "excess": result["total"] - optimum,
                    "max": result["max"],
                    "failures": result["failures"],
                    "seconds": result["seconds"],
                    "config": config,
                }
                atomic_write_json(path, record)
                print(
                    f"{mode} {i}/{len(optima)} {word}: {record['total']} (optimum {optimum}, +{record['excess']}) "
                    f"in {record['seconds']:.1f} s; {time.perf_counter() - started:.0f} s so far",
                    flush=True,
                )
            rows.append({k: record[k] for k in ("opener", "optimum", "total", "excess", "max", "failures", "seconds")})
            summary[mode] = summarize(mode, rows)
            summary["command"] = "python experiments/wordle/openers.py"
            atomic_write_json(out, summary)
            atomic_write_text(out.with_suffix(".md"), table(summary))
        entry = summary[mode]
        print(
            f"{mode}: {entry['matched_fraction']:.3f} of {entry['openers']} openers at the optimum, max excess "
            f"{entry['max_excess']}, slowest {entry['max_seconds']:.1f} s"
        )
    return summary


if __name__ == "__main__":
    main()
