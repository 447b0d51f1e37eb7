"""The mpc pillar's line in ``rolloutlab bench`` (``--only mpc``): PETS with CEM on Pendulum-v1 at a small size."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from experiments.mbrl.arms import THRESHOLDS
from experiments.mbrl.pets_protocol import PLAN_MS_TARGET, STEP_TARGETS, PETSSettings, run_pets, summarize_env
from rolloutlab.bench import BenchLine
from rolloutlab.checkpoint import atomic_write_json

#: The quick bench: CEM on Pendulum-v1 with the committed benchmark's budget, its first three seeds.
QUICK_ENV = "Pendulum-v1"
QUICK_SEEDS = (0, 1, 2)
QUICK_BUDGET = 2000
FULL_COMMAND = "OMP_NUM_THREADS=1 python experiments/mbrl/pets.py --envs Pendulum-v1 --budget 2000"


def quick_bench(out_dir: Path, seeds: Sequence[int] = QUICK_SEEDS) -> list[BenchLine]:
    """``rolloutlab bench --only mpc``: PETS (CEM) on Pendulum-v1 for ``seeds`` under the benchmark's protocol.

    The full benchmark's Pendulum half at fewer seeds and one arm (each run stops at the threshold, about a minute
    here), against the issue's targets: median env steps to threshold <= 1000 and planning p50 <= 50 ms per step.
    Writes ``quick_pets.json`` (the summary entry and the runs) into ``out_dir``.
    """
    started = time.perf_counter()
    settings = PETSSettings(env_id=QUICK_ENV, threshold=THRESHOLDS[QUICK_ENV], budget=QUICK_BUDGET)
    records = [run_pets("pets_cem", settings, seed) for seed in seeds]
    entry = summarize_env(settings, records)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out_dir / "quick_pets.json", {"entry": entry, "runs": records})
    cem = entry["pets_cem"]
    return [
        BenchLine(
            pillar="mpc",
            benchmark=f"PETS (CEM) {QUICK_ENV}, {len(seeds)} seeds, budget {QUICK_BUDGET}",
            metric="median env steps to threshold",
            value=cem["median_steps_to_threshold"],
            target=f"<= {STEP_TARGETS[QUICK_ENV]} steps, plan p50 <= {PLAN_MS_TARGET:.0f} ms",
            passed=bool(cem["steps_met"] and cem["plan_ms_met"]),
            seconds=time.perf_counter() - started,
            command=FULL_COMMAND,
            details={k: cem[k] for k in ("steps_to_threshold", "plan_ms_p50", "plan_ms_p95", "seconds_median")},
        )
    ]
