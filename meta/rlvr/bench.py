"""``quick_bench`` for ``rolloutlab bench``: a reduced allocation benchmark (one seed, three arms, short runs).

The full benchmark is ``experiments/rlvr/benchmark.py`` (3 seeds, 8 arms). Here uniform G=8, AR3PO and DARS train
from the SFT checkpoint (``runs/rlvr/sft.pt`` if present, otherwise a short warm start is trained first) and the line
reports AR3PO's and DARS's generated tokens to reach 95% of uniform G=8's final accuracy, as a ratio.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from envs.reasoning import make_prompt_set
from meta.rlvr.benchmark import RunSettings, run_arm, summarize
from meta.rlvr.grpo import GRPOConfig
from meta.rlvr.sft import SFTConfig, train_sft
from rolloutlab.bench import BenchLine
from rolloutlab.checkpoint import atomic_write_json

DEFAULT_CHECKPOINT = Path("runs/rlvr/sft.pt")
FULL_COMMAND = "OMP_NUM_THREADS=1 python experiments/rlvr/benchmark.py"


def quick_bench(
    out_dir: Path,
    steps: int = 60,
    sft_steps: int = 800,
    checkpoint: Path = DEFAULT_CHECKPOINT,
    seeds: tuple[int, ...] = (0, 1),
) -> list[BenchLine]:
    """Run the reduced benchmark into ``out_dir`` and return its table lines.

    Args:
        out_dir: Where ``quick_summary.json`` (and a fallback checkpoint) go.
        steps: GRPO steps per arm.
        sft_steps: Warm-start steps if ``checkpoint`` does not exist.
        checkpoint: SFT checkpoint to start from.
        seeds: RL seeds.
    """
    start = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    if not checkpoint.is_file():
        checkpoint = out_dir / "sft.pt"
        train_sft(SFTConfig(steps=sft_steps), out_path=checkpoint, log=None)
    pool = make_prompt_set(256, np.random.default_rng(1), difficulties=[1, 2, 3])
    held_out = make_prompt_set(600, np.random.default_rng(2), difficulties=[1, 2, 3])  # the full benchmark's set
    # One optimizer step per batch, as in the full benchmark whose table docs/rlvr.md quotes (measured that way).
    grpo = GRPOConfig(prompts_per_step=16, lr=3e-4, minibatches=1)
    settings = RunSettings(steps=steps, eval_every=3, grpo=grpo)
    arms = ["uniform_g8", "ar3po", "dars"]
    runs = [run_arm(arm, seed, str(checkpoint), pool, held_out, settings) for seed in seeds for arm in arms]
    summary = summarize(runs, "reversed-digit add/mul, 1-3 digits", list(seeds), arms)
    atomic_write_json(out_dir / "quick_summary.json", {"summary": summary, "runs": runs})
    seconds = time.perf_counter() - start
    lines = []
    for arm in ("ar3po", "dars"):
        entry = summary["arms"][arm]
        ratio = entry["ratio_tokens_vs_uniform_g8"]
        lines.append(
            BenchLine(
                pillar="rlvr",
                benchmark=f"{arm} vs uniform G=8, {len(seeds)} seeds, {steps} steps",
                metric="tokens-to-target ratio",
                value=ratio,
                # Too few seeds and steps for a verdict: the issue's <= 0.5 applies to the full benchmark.
                target="<= 0.5 in the full benchmark (5 seeds)",
                passed=None,
                seconds=seconds / 2,
                command=FULL_COMMAND,
                details={
                    "ci": entry["ratio_ci"],
                    "final_accuracy": entry["final_accuracy"],
                    "uniform_g8_final_accuracy": summary["arms"]["uniform_g8"]["final_accuracy"],
                    "target_accuracy": summary["target_accuracy"],
                },
            )
        )
    return lines
