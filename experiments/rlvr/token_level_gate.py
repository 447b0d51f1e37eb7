"""Gate of a token-level benchmark task: is there room for the methods before the full benchmark runs?

Run from the repository root (one thread; a minute or two):

    OMP_NUM_THREADS=1 python experiments/rlvr/token_level_gate.py \
        --preset experiments/rlvr/presets/calc2_grpo.yaml --checkpoint runs/rlvr/calc2_sft.pt

Loads the SFT checkpoint, evaluates it greedily on the preset's held-out prompts (accuracy, calculator calls per answer,
answer length, slow share, overall and per number of operations), then trains uniform GRPO G=8 for ``--steps`` steps
and evaluates again every ``--eval-every`` steps, printing one line per evaluation. A task passes the gate when the
start accuracy is well below ceiling, accuracy still moves at the end, the slow share starts below 1 and hard tasks
take more than one call per answer. Nothing is written.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.rlvr.token_level_protocol import training_tool_calls
from meta.rlvr.lm.charlm import load_model
from meta.rlvr.trainers.run import GRPORun, load_run_config
from rolloutlab.threads import set_torch_threads

PRESETS = Path(__file__).parent / "presets"


@dataclass
class Args:
    preset: str = str(PRESETS / "calc2_grpo.yaml")
    """GRPORunConfig preset (prompt sets, calculator, optimizer)."""
    checkpoint: str = "runs/rlvr/calc2_sft.pt"
    """SFT checkpoint to start from."""
    steps: int = 30
    """Uniform G=8 steps."""
    eval_every: int = 10
    """Steps between evaluations (also at step 0)."""
    seed: int = 0
    """RL seed."""


def main(args: Args) -> None:
    set_torch_threads()
    cfg = load_run_config(args.preset, {"sft_checkpoint": args.checkpoint})
    cfg = replace(cfg, allocator="uniform:8", token_controller="", grpo=replace(cfg.grpo, seed=args.seed))
    model, model_config, extra = load_model(cfg.sft_checkpoint)
    print(f"SFT report: sampled {extra['sft']['sampled']}, greedy {extra['sft']['greedy']}")
    run = GRPORun(cfg, model, model_config)
    trainer = run.trainer
    difficulties = sorted({t.difficulty for t in run.held_out})
    calls = 0

    def report() -> None:
        d = trainer.evaluate_details(run.held_out)
        line = (
            f"step {trainer.num_steps} tokens {trainer.costs.completion_tokens} training calls {calls}: "
            f"acc {d['accuracy']:.3f} calls {d['tool_calls']:.2f} len {d['answer_length']:.1f} "
            f"slow {d['slow_share']:.2f} entropy {d['entropy']:.3f}"
        )
        for k in difficulties:
            e = trainer.evaluate_details([t for t in run.held_out if t.difficulty == k])
            line += f" | {k} ops: acc {e['accuracy']:.2f} calls {e['tool_calls']:.2f} slow {e['slow_share']:.2f}"
        print(line, flush=True)

    start = time.perf_counter()
    report()
    for _ in range(args.steps):
        calls += training_tool_calls(trainer.tool, trainer.step)
        if trainer.num_steps % args.eval_every == 0:
            report()
    print(f"{args.steps} steps in {time.perf_counter() - start:.0f}s")


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
