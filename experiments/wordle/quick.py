"""The Wordle pillar's lines in ``rolloutlab bench``: the two headlines at full size.

Easy mode, rollout over GEP with k = 10, opener ``salet``, should reach the proven optimum total of 7920 guesses (mean
3.4212, Selby 2022) with at most 5 guesses, in <= 60 s including loading the cached pattern table; hard mode, rollout
over GEP with k = 5 over a base that plays exactly on beliefs of <= 40 answers, target <= 8124 with no failures
(optimum 8122). Both are cheap enough to run at full size (about half a minute each)."""

from __future__ import annotations

from pathlib import Path

from experiments.wordle.solver_studies import (
    HARD_HEADLINE,
    HARD_HEADLINE_COMMAND,
    HARD_TARGET,
    HEADLINE,
    HEADLINE_COMMAND,
    OPTIMUM_EASY,
    OPTIMUM_HARD_SALET,
)
from planning.wordle.evaluation import run_benchmark
from rolloutlab.bench import BenchLine
from rolloutlab.checkpoint import atomic_write_json

#: Wall seconds on an idle 2-core machine (the progress bar's estimate): both headlines and the cached pattern table.
EXPECTED_SECONDS = 12.0


def quick_bench(out_dir: Path) -> list[BenchLine]:
    """The Wordle headlines at full size: easy (rollout GEP k=10, opener salet) and hard (k=5, exact <= 40)."""
    record = run_benchmark(HEADLINE)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out_dir / "wordle_easy_rollout.json", record)
    passed = record["total"] == OPTIMUM_EASY and record["max"] <= 5 and record["failures"] == 0
    hard = run_benchmark(HARD_HEADLINE)
    atomic_write_json(out_dir / "wordle_hard_rollout.json", hard)
    return [
        BenchLine(
            pillar="wordle",
            benchmark="easy, rollout(GEP, k=10), opener salet, 2315 answers",
            metric="total guesses",
            value=float(record["total"]),
            target=f"= {OPTIMUM_EASY} (optimum), max 5, 0 failures, <= 60 s",
            passed=passed and record["seconds"] <= 60,
            seconds=record["seconds"],
            command=HEADLINE_COMMAND,
            details={k: record[k] for k in ("mean", "max", "failures", "distribution", "table_seconds", "table_built")},
        ),
        BenchLine(
            pillar="wordle",
            benchmark="hard (NYT rule), rollout(GEP, k=5, exact <= 40), opener salet, 2315 answers",
            metric="total guesses",
            value=float(hard["total"]),
            target=f"<= {HARD_TARGET} (optimum {OPTIMUM_HARD_SALET}), 0 failures",
            passed=hard["total"] <= HARD_TARGET and hard["failures"] == 0,
            seconds=hard["seconds"],
            command=HARD_HEADLINE_COMMAND,
            details={k: hard[k] for k in ("mean", "max", "failures", "distribution")},
        ),
    ]
