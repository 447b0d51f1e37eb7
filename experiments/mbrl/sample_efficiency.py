"""MBPO vs SB3 SAC (same updates per env step, and SAC's default): steps to a return threshold, same seeds and budget.

Usage (one env per call; finished seeds are kept in results/partial/ and skipped on a rerun, so a killed run resumes).
The committed results (docs/mbrl.md) came from:

    OMP_NUM_THREADS=1 nice -n 5 python experiments/mbrl/sample_efficiency.py --env-id Pendulum-v1 --threshold -200 \
        --budget 10000 --updates-per-step 10 --tag g10
    OMP_NUM_THREADS=1 nice -n 5 python experiments/mbrl/sample_efficiency.py --env-id InvertedPendulum-v5 \
        --threshold 950 --budget 10000 --updates-per-step 10 --tag g10

Writes ``results/sample_efficiency_<env>[_<tag>].json`` (resolved args, every run's eval curve, the summary entry in
the schema of ``summary.json``) and the matching ``.png`` (learning curves, mean ± standard error).
``experiments/mbrl/summary.py`` then assembles ``results/summary.json``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tyro

from mbrl.sample_efficiency import ARMS, ArmSettings, run_arm, summarize_env
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.threads import set_torch_threads

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Args:
    env_id: str = "Pendulum-v1"
    """gymnasium id of the task"""
    threshold: float = -200.0
    """mean evaluation return that counts as solved (issue 4: Pendulum -200, InvertedPendulum 950)"""
    budget: int = 4000
    """env steps per run, the same for every arm"""
    seeds: str = "0,1,2,3,4"
    """comma-separated seeds, the same for every arm"""
    arms: str = ",".join(ARMS)
    """comma-separated arms to run: mbpo, sac_same_utd, sac_default"""
    updates_per_step: int = 3
    """G: SAC gradient updates per env step for mbpo and sac_same_utd (sac_default uses 1)"""
    eval_every: int = 250
    """env steps between deterministic evaluations (the resolution of steps-to-threshold)"""
    eval_episodes: int = 5
    """episodes per evaluation, with fixed seeds"""
    initial_random_steps: int = 250
    """uniform-random warm-up steps in every arm (SAC's learning_starts)"""
    learning_rate: float = 1e-3
    """SAC learning rate in every arm (rl-zoo's Pendulum value)"""
    batch_size: int = 128
    """SAC batch size in every arm"""
    net_arch: str = "64,64"
    """SAC hidden widths in every arm"""
    controller: str = "fixed:1"
    """MBPO rollout-length controller spec"""
    rollout_batch_size: int = 5000
    """MBPO imagined rollouts started per model refit"""
    model_train_freq: int = 250
    """MBPO env steps between model refits (also the epoch length)"""
    model_max_epochs: int = 30
    """cap on model-training epochs per refit (early stopping usually ends sooner)"""
    tag: str = ""
    """suffix for the output file names"""


def parse_args() -> Args:
    """Every ``Args`` field as a ``--flag`` (tyro; the field docstrings are the help text)."""
    return tyro.cli(Args, description=__doc__)


def plot(path: Path, runs: list[dict[str, Any]], threshold: float, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for arm in ARMS:
        curves = [r["eval"] for r in runs if r["arm"] == arm and r["eval"]]
        if not curves:
            continue
        n = min(len(c) for c in curves)
        steps = np.array([curves[0][i][0] for i in range(n)])
        values = np.array([[c[i][1] for i in range(n)] for c in curves])
        mean = values.mean(axis=0)
        se = values.std(axis=0, ddof=1) / np.sqrt(len(curves)) if len(curves) > 1 else np.zeros_like(mean)
        ax.plot(steps, mean, label=f"{arm} (n={len(curves)})")
        ax.fill_between(steps, mean - se, mean + se, alpha=0.2)
    ax.axhline(threshold, color="grey", linestyle="--", linewidth=1, label="threshold")
    ax.set_xlabel("env steps")
    ax.set_ylabel("eval return (mean ± s.e. over seeds)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    args = parse_args()
    set_torch_threads(1)
    settings = ArmSettings(
        env_id=args.env_id,
        budget=args.budget,
        updates_per_step=args.updates_per_step,
        eval_every=args.eval_every,
        eval_episodes=args.eval_episodes,
        initial_random_steps=args.initial_random_steps,
        learning_rate=args.learning_rate,
        batch_size=args.batch_size,
        net_arch=[int(w) for w in args.net_arch.split(",")],
        mbpo={
            "controller": args.controller,
            "rollout_batch_size": args.rollout_batch_size,
            "model_train_freq": args.model_train_freq,
            "epoch_length": args.model_train_freq,
            "model": {"max_epochs": args.model_max_epochs},
        },
    )
    name = args.env_id.replace("/", "-") + (f"_{args.tag}" if args.tag else "")
    partial = RESULTS / "partial" / name
    partial.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    arms = [a for a in args.arms.split(",") if a]
    runs: list[dict[str, Any]] = []
    for seed in seeds:  # seed-major order, so an interrupted benchmark has whole seeds for every arm
        for arm in arms:
            path = partial / f"{arm}__{seed}.json"
            if path.exists():
                runs.append(json.loads(path.read_text()))
                continue
            t0 = time.perf_counter()
            result = run_arm(arm, settings, seed)
            atomic_write_json(path, result)
            runs.append(result)
            seconds = time.perf_counter() - t0
            print(f"{args.env_id} {arm} seed {seed}: final {result['final_return']:.1f} in {seconds:.0f}s", flush=True)
            entry = summarize_env(args.env_id, args.threshold, args.budget, runs, np.random.default_rng(0))
            atomic_write_json(
                RESULTS / f"sample_efficiency_{name}.json",
                {
                    "args": dataclasses.asdict(args),
                    "settings": dataclasses.asdict(settings),
                    "entry": entry,
                    "runs": runs,
                },
            )
            plot(
                RESULTS / f"sample_efficiency_{name}.png", runs, args.threshold, f"{args.env_id}, budget {args.budget}"
            )
    entry = summarize_env(args.env_id, args.threshold, args.budget, runs, np.random.default_rng(0))
    atomic_write_json(
        RESULTS / f"sample_efficiency_{name}.json",
        {"args": dataclasses.asdict(args), "settings": dataclasses.asdict(settings), "entry": entry, "runs": runs},
    )
    for arm, row in entry["arms"].items():
        print(
            f"{arm:14s} median steps {row['median_steps']}  never {row['never_reached']}  final {row['final_return']}"
        )
    print(f"ratio best SAC / MBPO = {entry['ratio_best_sac_over_mbpo']}  95% CI {entry['ratio_ci']}")


if __name__ == "__main__":
    main()
