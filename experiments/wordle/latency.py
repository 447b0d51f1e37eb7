"""Pattern-table build time and the assistant's per-move latency.

1. Build the original lists' table from scratch into an empty cache directory (timed), then load it back (timed).
2. Per mode, with the configuration ``rolloutlab wordle play`` uses (easy: rollout GEP k=10; hard: rollout GEP k=5
   with exact play on beliefs of <= 40 answers), compute the second-move book (replies to every feedback on the
   opener) into that cache directory (timed), as the first game of a new user would.
3. Play ``n_games`` games against random answers the way ``play`` does -- a fresh solver per game (no memo carried
   between games), table and book already cached (loading the book is timed apart) -- and time each move's work after
   the opener: the suggestion plus its top alternatives with exact expected guesses.

    OMP_NUM_THREADS=1 python experiments/wordle/latency.py

The measurement is :func:`experiments.wordle.solver_studies.measure_latency`.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.wordle.solver_studies import measure_latency
from rolloutlab.checkpoint import atomic_write_json


@dataclass
class Args:
    n_games: int = 100
    """Random answers to play (per mode)."""
    seed: int = 0
    """Seed of the answer sample."""
    out: Path = Path(__file__).parent / "results" / "table_and_latency.json"
    """Result file."""


def main(args: Args) -> None:
    recorded = {k: str(v) for k, v in dataclasses.asdict(args).items()}
    atomic_write_json(args.out, measure_latency(args.n_games, args.seed, args=recorded))


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
