"""The solver from every strong opener against Alex Selby's proven optima.

Easy mode: every one of the 105 listed openers; hard mode: the 20 best of the 101 listed. Each opener is evaluated
exactly over all 2315 original answers with the documented configuration of its mode (``DEFAULT_TOP_K``,
``DEFAULT_SECOND_TOP_K`` and ``DEFAULT_EXACT_UP_TO`` of ``planning.wordle.solver``: rollout over GEP, k = 10,
100 contenders at the second guess and exact play on beliefs of at most 20 answers easy; k = 5, 100 at the second
guess and exact play on beliefs of at most 40 answers hard), the same code as ``rolloutlab wordle bench --top-k 10
--second-top-k 100 --exact-up-to 20 --opener WORD`` (hard: ``--mode hard --top-k 5 --second-top-k 100 --exact-up-to
40``). The optima are facts from Selby's published tables
(``experiments/wordle/optima/SOURCE.md``).

    OMP_NUM_THREADS=1 python experiments/wordle/openers.py

Each finished opener is saved in ``results/openers_partial/<mode>/<word>.json`` at once and reused by a rerun with
the same configuration, so a killed run resumes where it stopped. Writes ``results/openers.json``: per mode every
opener's total, optimum, excess, max, failures and seconds, and the targets' keys ``<mode>.matched_fraction`` (share
of openers at their optimum; target >= 0.95), ``<mode>.max_excess`` (target <= 2) and ``<mode>.max_seconds``
(targets: 30 s easy, 300 s hard); ``results/openers.md`` is the table the docs quote. The evaluation, the summary
and the table are :mod:`experiments.wordle.solver_studies`'s.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.wordle.solver_studies import (
    opener_config,
    opener_record,
    openers_table,
    read_optima,
    summarize_openers,
)
from rolloutlab.checkpoint import atomic_write_json, atomic_write_text

HERE = Path(__file__).resolve().parent
OPTIMA = {"easy": HERE / "optima" / "easy_original_top105.txt", "hard": HERE / "optima" / "hard_original_top101.txt"}


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
            record = json.loads(path.read_text()) if path.exists() else None
            if record is None or record["config"] != dataclasses.asdict(opener_config(mode, word)):
                record = opener_record(mode, word, optimum)
                atomic_write_json(path, record)
                print(
                    f"{mode} {i}/{len(optima)} {word}: {record['total']} (optimum {optimum}, +{record['excess']}) "
                    f"in {record['seconds']:.1f} s; {time.perf_counter() - started:.0f} s so far",
                    flush=True,
                )
            rows.append({k: record[k] for k in ("opener", "optimum", "total", "excess", "max", "failures", "seconds")})
            summary[mode] = summarize_openers(mode, rows)
            summary["command"] = "python experiments/wordle/openers.py"
            atomic_write_json(out, summary)
            atomic_write_text(out.with_suffix(".md"), openers_table(summary))
        entry = summary[mode]
        print(
            f"{mode}: {entry['matched_fraction']:.3f} of {entry['openers']} openers at the optimum, max excess "
            f"{entry['max_excess']}, slowest {entry['max_seconds']:.1f} s"
        )
    return summary


if __name__ == "__main__":
    main()
