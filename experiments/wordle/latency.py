"""Pattern-table build time and the assistant's per-move latency.

1. Build the original lists' table from scratch into an empty cache directory (timed), then load it back (timed).
2. Per mode, with the configuration ``rolloutlab wordle play`` uses (easy: rollout GEP k=10; hard: rollout GEP k=5
   with exact play on beliefs of <= 40 answers), compute the second-move book (replies to every feedback on the
   opener) into that cache directory (timed), as the first game of a new user would.
3. Play ``n_games`` games against random answers the way ``play`` does -- a fresh solver per game (no memo carried
   between games), table and book already cached (loading the book is timed apart) -- and time each move's work after
   the opener: the suggestion plus its top alternatives with exact expected guesses.

    OMP_NUM_THREADS=1 python experiments/wordle/latency.py
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from envs.wordle_rules import load_word_lists
from planning.wordle.solver import DEFAULT_EXACT_UP_TO, DEFAULT_TOP_K, SolverConfig, WordleSolver
from planning.wordle.table import load_pattern_table
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
    lists = load_word_lists("original")
    tmp = tempfile.TemporaryDirectory()
    cache = Path(tmp.name)
    built = load_pattern_table(lists, cache)
    loaded = load_pattern_table(lists, cache)
    assert built.built and not loaded.built
    table = loaded
    rng = np.random.default_rng(args.seed)
    answers = [lists.answers[i] for i in rng.choice(len(lists.answers), args.n_games, replace=False)]
    record: dict[str, object] = {
        "table_build_seconds": round(built.seconds, 3),
        "table_load_seconds": round(loaded.seconds, 3),
        "table_shape": list(table.table.shape),
        "args": {k: str(v) for k, v in dataclasses.asdict(args).items()},
    }
    for mode in ("easy", "hard"):
        config = SolverConfig(mode=mode, top_k=DEFAULT_TOP_K[mode], exact_up_to=DEFAULT_EXACT_UP_TO[mode])
        book = WordleSolver(config, lists, table).enable_book(cache)
        assert book.built
        times = []
        book_loads = []
        for answer in answers:
            solver = WordleSolver(config, lists, table)
            book_loads.append(solver.enable_book(cache).seconds)
            target = lists.answers.index(answer)
            belief = solver.root()
            guess = solver.opener()
            depth = 0
            while int(solver.model.table[guess, target]) != solver.model.solved:
                belief = solver.model.observe(belief, guess, int(solver.model.table[guess, target]))
                depth += 1
                start = time.perf_counter()
                guess = solver.act(belief, depth)
                if belief.candidates.size > 1:
                    solver.alternatives(belief, depth)
                times.append(time.perf_counter() - start)
        record[mode] = {
            "config": dataclasses.asdict(config),
            "book_build_seconds": round(book.seconds, 3),
            "book_entries": len(book),
            "book_load_max_seconds": round(max(book_loads), 4),
            "moves": len(times),
            "median_seconds": round(statistics.median(times), 4),
            "p95_seconds": round(float(np.percentile(times, 95)), 4),
            "max_seconds": round(max(times), 4),
        }
        print(mode, record[mode], flush=True)
    print(f"table build {built.seconds:.2f}s, load {loaded.seconds:.3f}s")
    atomic_write_json(args.out, record)
    tmp.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-games", type=int, default=Args.n_games)
    parser.add_argument("--seed", type=int, default=Args.seed)
    parser.add_argument("--out", type=Path, default=Args.out)
    ns = parser.parse_args()
    main(Args(n_games=ns.n_games, seed=ns.seed, out=ns.out))
