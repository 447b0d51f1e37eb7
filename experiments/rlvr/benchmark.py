"""RLVR allocation benchmark: which per-prompt rollout allocator reaches uniform G=8's accuracy on fewer tokens?

Run from the repository root (one thread, low priority, resumable):

    OMP_NUM_THREADS=1 nice -n 10 python experiments/rlvr/benchmark.py

Every arm starts from the same SFT checkpoint (trained first with ``rolloutlab rlvr sft`` settings if missing), uses
the same prompt pool, prompts per step, optimizer, number of steps and held-out set; ≥3 seeds. Each finished
(arm, seed) run is written to ``results/per_run/<arm>__<seed>.json`` at once, so a killed benchmark resumes where it
stopped. At the end the script writes ``results/summary.json`` (the issue's keys), ``results/accuracy_vs_tokens.png``
and prints the table quoted in ``docs/results/rlvr.md``. The benchmark's logic (arms, runs, summary, table) is
:mod:`experiments.rlvr.allocator_benchmark`'s.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.rlvr.allocator_benchmark import (
    ARMS,
    BASELINE,
    BENCHMARK_LR,
    BENCHMARK_MINIBATCHES,
    DEFAULT_CHECKPOINT,
    DIFFICULTIES,
    EVAL_EVERY,
    HELD_OUT_SIZE,
    POOL_SIZE,
    RunSettings,
    benchmark_table,
    prompt_sets,
    run_arm,
    summarize,
)
from experiments.sweep import Unit, grid, run_sweep
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.sft import SFTConfig, train_sft
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.threads import set_torch_threads


@dataclass
class Args:
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    """RL seeds (prompt order, sampling); the SFT checkpoint is shared by all."""
    arms: list[str] = field(default_factory=lambda: list(ARMS))
    """Arms to run (names from allocator_benchmark.ARMS)."""
    checkpoint: str = DEFAULT_CHECKPOINT
    """SFT checkpoint every arm starts from; trained with `sft_steps` if missing."""
    sft_steps: int = SFTConfig.steps
    """Warm-start steps if the checkpoint has to be trained."""
    steps: int = 90
    """GRPO steps per run (same for every arm)."""
    eval_every: int = EVAL_EVERY
    """Held-out evaluation period in steps."""
    prompts_per_step: int = GRPOConfig.prompts_per_step
    """Prompts (groups) per step."""
    lr: float = BENCHMARK_LR
    """AdamW learning rate: 3e-4 goes with one optimizer step per batch (GRPOConfig's 1e-4 with its 4 minibatches)."""
    loss: str = "dapo"
    """Token-level (dapo) or per-sequence loss (dapo is what GRPOConfig's loss=None picks for the grpo advantage)."""
    minibatches: int = BENCHMARK_MINIBATCHES
    """Optimizer steps per generated batch. 1 (one full-batch step, ratio 1) is how the results table was
    measured and reproduces that trainer exactly; the trainer's own default is 4 (with lr 1e-4, see GRPOConfig)."""
    difficulties: list[int] = field(default_factory=lambda: list(DIFFICULTIES))
    """Digits of the long operand in the RL pool and held-out set."""
    pool_size: int = POOL_SIZE
    """Training prompts (small enough that each is revisited every 16 steps, so per-prompt statistics inform the
    allocators: 256 prompts / 16 per step)."""
    held_out_size: int = HELD_OUT_SIZE
    """Held-out prompts (greedy accuracy)."""
    out: str = "experiments/rlvr/results"
    """Results folder."""


def parse_args() -> Args:
    """Every ``Args`` field as a ``--flag`` (tyro; the field docstrings are the help text)."""
    return tyro.cli(Args, description=__doc__)


def main(args: Args) -> None:
    set_torch_threads()
    out = Path(args.out)
    (out / "per_run").mkdir(parents=True, exist_ok=True)
    if not Path(args.checkpoint).is_file():
        train_sft(SFTConfig(steps=args.sft_steps), out_path=Path(args.checkpoint))
    pool, held_out = prompt_sets(args.pool_size, args.held_out_size, args.difficulties)
    settings = RunSettings(
        steps=args.steps,
        eval_every=args.eval_every,
        grpo=GRPOConfig(
            prompts_per_step=args.prompts_per_step,
            lr=args.lr,
            loss=args.loss,  # type: ignore[arg-type]
            minibatches=args.minibatches,
        ),
    )

    def run(unit: Unit) -> dict[str, Any]:
        record = run_arm(unit.arm, unit.seed, args.checkpoint, pool, held_out, settings, log=print)
        record["args"] = asdict(args)
        return record

    units = grid(args.arms, args.seeds, out / "per_run")
    runs = list(
        run_sweep(units, run, describe=lambda u, r: f"{u.label}: final acc {r['curve'][-1]['accuracy']:.3f}").values()
    )
    arms = [a for a in args.arms if a in ARMS]
    summary = summarize(runs, f"reversed-digit add/mul, digits {args.difficulties}", args.seeds, arms)
    summary["args"] = asdict(args)
    atomic_write_json(out / "summary.json", summary)
    plot(runs, arms, out / "accuracy_vs_tokens.png")
    print(benchmark_table(summary))


def plot(runs: list[dict], arms: list[str], path: Path) -> None:
    """Mean held-out accuracy against mean cumulative generated tokens, one line per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for arm in arms:
        curves = [r["curve"] for r in runs if r["arm"] == arm]
        if not curves:
            continue
        n = min(len(c) for c in curves)
        tokens = np.mean([[p["completion_tokens"] for p in c[:n]] for c in curves], axis=0)
        acc = np.mean([[p["accuracy"] for p in c[:n]] for c in curves], axis=0)
        style = "--" if arm.startswith("uniform") else "-"
        ax.plot(tokens, acc, style, label=arm, linewidth=2 if arm == BASELINE else 1.3)
    ax.set_xlabel("generated completion tokens (cumulative, mean over seeds)")
    ax.set_ylabel("held-out accuracy (greedy)")
    ax.set_title("GRPO on reversed-digit arithmetic: accuracy vs rollout tokens")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main(parse_args())
