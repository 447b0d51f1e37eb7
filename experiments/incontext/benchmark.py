"""In-context RL benchmarks, first protocol: the AMAGO-style agent against RecurrentPPO and the reference policies.

One part per invocation, each writing ``experiments/incontext/results/<part>.json`` after every finished run (a killed
benchmark loses at most the run in progress, and that run resumes from its checkpoint under ``runs/``):

* ``references``: bandit reference policies (Monte Carlo over 20k tasks, exact DP for 2 arms), key-door random/oracle.
* ``bandit_5x100`` / ``bandit_2x100``: agent and RecurrentPPO (at the agent's env steps), per seed.
* ``tmaze``: success of the agent (and of RecurrentPPO at its env steps) vs corridor length, per seed, and the
  memory-free encoder at the shortest corridor.
* ``keydoor``: agent and RecurrentPPO per seed.

``summarize.py`` merges the part files into ``summary.json`` and draws ``summary.png``. The benchmark's logic (the
agent's settings per part, the runs, what is kept and what is rerun) is :mod:`experiments.incontext.benchmark_parts`'s.

    OMP_NUM_THREADS=1 nice -n 10 python experiments/incontext/benchmark.py --part bandit_5x100 --seeds 3
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.incontext.benchmark_parts import (
    SEEDED_PARTS,
    AgentRunSettings,
    load_part,
    run_references,
    run_seeded_part,
    run_tmaze,
)
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.threads import set_torch_threads

RESULTS = Path(__file__).parent / "results"


@dataclass
class Args(AgentRunSettings):
    """The benchmark's command line: the agent runs' shared settings (:class:`AgentRunSettings`) and the part's."""

    part: str = "bandit_5x100"
    """Which benchmark: references, bandit_5x100, bandit_2x100, tmaze or keydoor."""
    seeds: int = 3
    """Training seeds (0 .. seeds-1) for the agent and for RecurrentPPO."""
    corridors: str = "10,25,50,100"
    """T-maze corridor lengths, comma-separated, shortest first."""
    reference_tasks: int = 20_000
    """Monte-Carlo tasks per bandit reference policy."""
    keydoor_reference_tasks: int = 500
    """Monte-Carlo tasks for the key-door random and oracle policies."""
    extend_minutes: float = 0.0
    """T-maze only: continue each stored corridor run that is not yet solved (success < 0.95) from its checkpoint for
    this many more minutes, then re-run RecurrentPPO at the new env steps (0: no extension)."""
    tag: str = ""
    """Suffix of the part's result file and run directory (e.g. ``_no_sigma_reparam`` for an ablation)."""
    runs_root: str = "runs/incontext-bench"
    """Where the per-run checkpoints go (a killed run resumes from here)."""
    out: str = str(RESULTS)
    """Directory of the result JSON files."""


def parse_args() -> Args:
    """Every ``Args`` field as a ``--flag`` (tyro; the field docstrings are the help text)."""
    return tyro.cli(Args, description=__doc__)


def main(args: Args) -> None:
    set_torch_threads(1)
    path = Path(args.out) / f"{args.part}{args.tag}.json"
    part = load_part(path)
    part["args"] = dataclasses.asdict(args)

    def save() -> None:
        atomic_write_json(path, part)

    if args.part == "references":
        if run_references(part, args.reference_tasks, args.keydoor_reference_tasks):
            save()
        else:
            print("references already computed; delete references.json to recompute", flush=True)
        return
    runs_root = Path(args.runs_root) / f"{args.part}{args.tag}"
    if args.part in SEEDED_PARTS:
        run_seeded_part(args.part, part, args, range(args.seeds), runs_root, save)
    elif args.part == "tmaze":
        corridors = [int(c) for c in args.corridors.split(",")]
        run_tmaze(part, args, range(args.seeds), corridors, runs_root, save, extend_minutes=args.extend_minutes)
    else:
        raise ValueError(f"unknown part {args.part!r}")


if __name__ == "__main__":
    main(parse_args())
