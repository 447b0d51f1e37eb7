"""Wordle benchmark table: every policy evaluated exactly over all 2315 original answers.

Read top to bottom: the runs are listed in ``RUNS``; each is evaluated with ``planning.wordle.bench.run_benchmark``
(the same code as ``rolloutlab wordle bench``) and written to ``experiments/wordle/results/<name>.json`` as soon as
it finishes, so an interrupted table resumes where it stopped (finished runs are skipped unless ``--force``). The
table is printed at the end and written to ``results/summary.json``.

    OMP_NUM_THREADS=1 python experiments/wordle/benchmark.py            # all runs
    OMP_NUM_THREADS=1 python experiments/wordle/benchmark.py --only easy_rollout_gep_k10_salet
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from planning.wordle.bench import run_benchmark
from planning.wordle.solver import SolverConfig
from rolloutlab.checkpoint import atomic_write_json


@dataclass
class Args:
    out_dir: Path = Path(__file__).parent / "results"
    """Where the JSON records go."""
    only: list[str] = field(default_factory=list)
    """Run only these names (default: every run)."""
    force: bool = False
    """Re-run runs whose JSON already exists."""


def command_for(config: SolverConfig, name: str) -> str:
    """The ``rolloutlab wordle bench`` command that reproduces one run."""
    parts = [
        "rolloutlab wordle bench",
        f"--mode {config.mode}",
        f"--policy {config.policy}",
        f"--heuristic {config.heuristic}",
        f"--top-k {config.top_k}",
        f"--opener {config.opener or 'none'}",
    ]
    if config.lists != "original":
        parts.append(f"--lists {config.lists}")
    if not config.candidate_tiebreak:
        parts.append("--no-candidate-tiebreak")
    if config.exact_up_to:
        parts.append(f"--exact-up-to {config.exact_up_to}")
    parts.append(f"--json experiments/wordle/results/{name}.json")
    return " ".join(parts)


# name -> configuration. Greedy runs use the same opener as the rollout headline so the columns compare policies only.
RUNS: dict[str, SolverConfig] = {
    "easy_rollout_gep_k10_salet": SolverConfig(
        mode="easy", policy="rollout", heuristic="gep", top_k=10, opener="salet"
    ),
    **{
        f"easy_greedy_{h}_salet": SolverConfig(mode="easy", policy="greedy", heuristic=h, opener="salet")
        for h in ("mig", "mrd", "gep", "minimax")
    },
    "hard_rollout_gep_k10_salet": SolverConfig(
        mode="hard", policy="rollout", heuristic="gep", top_k=10, opener="salet"
    ),
    **{
        f"hard_greedy_{h}_salet": SolverConfig(mode="hard", policy="greedy", heuristic=h, opener="salet")
        for h in ("mig", "mrd", "gep", "minimax")
    },
    # The paper-faithful configuration: plain max-entropy greedy (ties by list order, no candidate preference, no
    # "guess a candidate when two are left"), its own first guess; then ours with the same opener.
    "paper_easy_greedy_mig_notiebreak": SolverConfig(
        policy="greedy", heuristic="mig", opener=None, candidate_tiebreak=False
    ),
    "paper_easy_rollout_mig_k10_notiebreak": SolverConfig(
        policy="rollout", heuristic="mig", top_k=10, opener=None, candidate_tiebreak=False
    ),
    "easy_greedy_mig_own_opener": SolverConfig(policy="greedy", heuristic="mig", opener=None),
    "easy_rollout_mig_k10_own_opener": SolverConfig(policy="rollout", heuristic="mig", top_k=10, opener=None),
    "easy_rollout_gep_k10_auto": SolverConfig(mode="easy", policy="rollout", heuristic="gep", top_k=10, opener="auto"),
    # Hard mode with a stronger base policy: exact play on beliefs of <= N answers (planning/wordle/exact.py), the
    # heuristic above. Every N tried is a run of its own, so the table shows the whole sweep, not just the winner;
    # k = 5 with exact40 is the documented hard-mode configuration (8122, the optimum with salet).
    **{
        f"hard_rollout_gep_k10_exact{n}_salet": SolverConfig(
            mode="hard", policy="rollout", heuristic="gep", top_k=10, opener="salet", exact_up_to=n
        )
        for n in (3, 6, 10, 20, 30, 40, 60, 100)
    },
    **{
        f"hard_rollout_gep_k{k}_exact40_salet": SolverConfig(
            mode="hard", policy="rollout", heuristic="gep", top_k=k, opener="salet", exact_up_to=40
        )
        for k in (5, 15)
    },
    # Controls for the k = 5 winner: the same k without the exact base, and other exact sizes.
    **{
        f"hard_rollout_gep_k5_exact{n}_salet": SolverConfig(
            mode="hard", policy="rollout", heuristic="gep", top_k=5, opener="salet", exact_up_to=n
        )
        for n in (0, 20, 60)
    },
    "hard_greedy_gep_exact40_salet": SolverConfig(
        mode="hard", policy="greedy", heuristic="gep", opener="salet", exact_up_to=40
    ),
    # `--opener auto` in hard mode with the documented hard configuration: GEP's 5 best first guesses, each valued by
    # the exact total of the whole game under that configuration.
    "hard_rollout_gep_k5_exact40_auto": SolverConfig(
        mode="hard", policy="rollout", heuristic="gep", top_k=5, opener="auto", exact_up_to=40
    ),
}


def main(args: Args) -> None:
    args.out_dir.mkdir(parents=True, exist_ok=True)
    names = args.only or list(RUNS)
    for name in names:
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

    rows = []
    for name in RUNS:
        path = args.out_dir / f"{name}.json"
        if path.exists():
            r = json.loads(path.read_text())
            r.setdefault("exact_up_to", 0)  # runs recorded before the exact base policy existed
            rows.append(
                {
                    k: r[k]
                    for k in (
                        "name",
                        "mode",
                        "policy",
                        "heuristic",
                        "top_k",
                        "opener",
                        "total",
                        "mean",
                        "max",
                        "failures",
                        "seconds",
                        "exact_up_to",
                        "command",
                    )
                }
            )
    atomic_write_json(args.out_dir / "summary.json", {"runs": rows})
    print("| run | total | mean | max | failures | seconds |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['total']} | {r['mean']:.4f} | {r['max']} | {r['failures']} | {r['seconds']:.1f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", type=Path, default=Args.out_dir)
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--force", action="store_true")
    ns = parser.parse_args()
    main(Args(out_dir=ns.out_dir, only=ns.only, force=ns.force))
