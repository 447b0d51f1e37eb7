"""Assemble ``results/summary.json`` and ``summary.md`` from the benchmark JSONs beside them.

Reads every ``results/sample_efficiency_<env>[_<tag>].json`` written by ``sample_efficiency.py`` and recomputes each
summary entry from the per-seed runs stored there (nothing is rerun). Files of this protocol (the issue "The model
must pay off") give the steps-to-threshold entries (``sample_efficiency``, with the targets and their ``met`` flags)
and the HalfCheetah final-return entry (``halfcheetah``), plus costs and rliable aggregates (IQM of final returns with
95% stratified-bootstrap intervals). Files of round one (no ``protocol`` field: eval every 250 steps, 250 warm-up
steps, 5 seeds, a smaller MBPO data scale) go under ``round_one`` with this protocol's arm names, without targets: their
numbers are kept for the record and never read against this protocol's targets. The Dyna-DQN gate writes its own
``results/gate.json`` (``gate.py``). The summary's logic is :func:`mbrl.benchmark.build_summary` and
:func:`mbrl.benchmark.markdown`.

    python experiments/mbrl/summary.py
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import tyro

from mbrl.benchmark import BOOTSTRAP_REPS, build_summary, markdown, ratio_text
from rolloutlab.checkpoint import atomic_write_json, atomic_write_text

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Args:
    results: str = str(RESULTS)
    """folder holding the benchmark JSONs; summary.json and summary.md are written there"""
    files: str = ""
    """comma-separated file names to use (default: every sample_efficiency_*.json there)"""
    bootstrap_reps: int = BOOTSTRAP_REPS
    """bootstrap resamples for the rliable intervals"""


def parse_args() -> Args:
    """Every ``Args`` field as a ``--flag`` (tyro; the field docstrings are the help text)."""
    return tyro.cli(Args, description=__doc__)


def main() -> None:
    args = parse_args()
    results = Path(args.results)
    names = [n for n in args.files.split(",") if n] or None
    summary = build_summary(results, names, args.bootstrap_reps)
    atomic_write_json(results / "summary.json", summary)
    atomic_write_text(results / "summary.md", markdown(summary))
    for entry in summary["sample_efficiency"]:
        for key in ("ratio_sac_utd1_over_mbpo", "ratio_best_sac_over_mbpo"):
            print(f"{entry['env']} {key} (MBPO = {entry['mbpo_arm']}): {ratio_text(entry[key])}")
    if summary["halfcheetah"] is not None and summary["halfcheetah"]["mbpo_minus_sac_same_utd"] is not None:
        diff = summary["halfcheetah"]["mbpo_minus_sac_same_utd"]
        print(f"HalfCheetah mbpo_minus_sac_same_utd: {diff['mean']:.0f} CI {diff['ci']} met {diff['met']}")
    print(f"wrote {results / 'summary.json'} from {summary['sources']} (round one: {bool(summary['round_one'])})")


if __name__ == "__main__":
    main()
