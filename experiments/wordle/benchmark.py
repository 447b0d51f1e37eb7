"""Wordle benchmark table: every policy evaluated exactly over all 2315 original answers.

Read top to bottom: the runs are listed in ``experiments.wordle.solver_studies.RUNS``; each is evaluated with
``planning.wordle.evaluation.run_benchmark`` (the same code as ``rolloutlab wordle bench``) and written to
``experiments/wordle/results/<name>.json`` as soon as it finishes, so an interrupted table resumes where it stopped
(finished runs are skipped unless ``--force``). The table is printed at the end and written to
``results/summary.json``.

    OMP_NUM_THREADS=1 python experiments/wordle/benchmark.py            # all runs
    OMP_NUM_THREADS=1 python experiments/wordle/benchmark.py --only easy_rollout_gep_k10_salet
"""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.wordle.solver_studies import RUNS, command_for, summary_rows, summary_table
from planning.wordle.evaluation import run_benchmark
from rolloutlab.checkpoint import atomic_write_json


@dataclass
class Args:
    out_dir: Path = Path(__file__).parent / "results"
    """Where the JSON records go."""
    only: list[str] = field(default_factory=list)
    """Run only these names (default: every run)."""
    force: bool = False
    """Re-run runs whose JSON already exists."""


def main(args: Args) -> None:
    args.out_dir.mkdir(parents=True, exist_ok=True)
    unknown = sorted(set(args.only) - set(RUNS))
    if unknown:
        raise SystemExit(f"unknown runs {unknown}; known: {list(RUNS)}")
    for name in args.only or list(RUNS):
        path = args.out_dir / f"{name}.json"
        if path.exists() and not args.force:
            print(f"{name}: exists, skipped")
            continue
        config = RUNS[name]
        start = time.perf_counter()
        record = run_benchmark(config)
        record["name"] = name
        record["command"] = command_for(config, name)
        record["args"] = {k: str(v) for k, v in dataclasses.asdict(args).items()}
        record["created"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        atomic_write_json(path, record)
        print(
            f"{name}: total {record['total']} mean {record['mean']:.4f} max {record['max']} "
            f"failures {record['failures']} ({time.perf_counter() - start:.1f}s)",
            flush=True,
        )
    rows = summary_rows(args.out_dir)
    atomic_write_json(args.out_dir / "summary.json", {"runs": rows})
    print(summary_table(rows))


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
