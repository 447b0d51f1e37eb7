"""RLVR token-level benchmark: where inside the response to spend samples — HAPO, EEPO, ARPO, EHPO
against uniform GRPO G=8 on the calc tool-use family.

Run from the repository root (one thread, low priority, resumable); the committed results are the restricted
calculator's task (``presets/calc2_*.yaml``: one operation per call, single-digit one-operation tasks beside 2-4
operations on operands up to 99):

    OMP_NUM_THREADS=1 nice -n 5 python experiments/rlvr/token_level.py \
        --preset experiments/rlvr/presets/calc2_grpo.yaml --checkpoint runs/rlvr/calc2_sft.pt \
        --sft-preset experiments/rlvr/presets/calc2_sft.yaml --partial-dir token_level_calc2_partial

Every arm starts from the same calc SFT checkpoint (trained first from ``--sft-preset`` if missing), takes its
settings from ``--preset`` (prompt pool, held-out set, calculator, optimizer, G=8 per prompt) and trains until the
same number of generated completion tokens; only the ``--token-controller`` differs. Each finished (arm, seed) run is
written to ``results/<partial-dir>/<arm>__<seed>.json`` at once, so a killed benchmark resumes where it stopped (the
first run, on the unrestricted ``calc_*.yaml`` task, is in ``results/token_level_partial/``). At the end the script
writes ``results/token_level.json`` (``methods.<name>.{tokens_ratio, accuracy_delta, tool_calls_ratio, length_ratio,
headline_met}`` with paired seed-bootstrap intervals, and ARPO's training tool-call budget
``training_tool_calls_ratio`` beside them) and ``results/token_level.md``, and prints the table. The logic (arms,
runs, summary, headlines, table) is :mod:`experiments.rlvr.token_level_protocol`'s.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.rlvr.token_level_protocol import TOKEN_ARMS, run_token_arm, token_level_summary, token_level_table
from experiments.sweep import Unit, grid, run_sweep
from meta.rlvr.trainers.run import load_run_config
from meta.rlvr.trainers.sft import SFTConfig, train_sft
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.config import load_yaml
from rolloutlab.threads import set_torch_threads

PRESETS = Path(__file__).parent / "presets"


@dataclass
class Args:
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    """RL seeds (prompt order, sampling); the SFT checkpoint is shared by all."""
    arms: list[str] = field(default_factory=lambda: list(TOKEN_ARMS))
    """Arms to run (names from token_level_protocol.TOKEN_ARMS; uniform_g8 is the baseline and must be among them)."""
    preset: str = str(PRESETS / "calc_grpo.yaml")
    """GRPORunConfig preset every arm starts from (allocator, controller and seed are set per arm)."""
    checkpoint: str = "runs/rlvr/calc_sft.pt"
    """SFT checkpoint every arm starts from; trained from `sft_preset` with `sft_steps` if missing."""
    sft_preset: str = str(PRESETS / "calc_sft.yaml")
    """SFTConfig preset of the warm start."""
    sft_steps: int = 1500
    """Warm-start steps if the checkpoint has to be trained."""
    tokens_budget: int = 1_000_000
    """Generated completion tokens per run (every arm stops at the first step that reaches it)."""
    max_steps: int = 600
    """Step cap per run, in case an arm generates far fewer tokens per step."""
    eval_every: int = 10
    """Held-out evaluation period in steps (also at step 0 and the end)."""
    prompts_per_step: int = 16
    """Prompts (groups of 8) per step."""
    pool_size: int = 256
    """Training prompts."""
    held_out_size: int = 300
    """Held-out prompts (greedy accuracy, tool calls, answer length, entropy)."""
    out: str = "experiments/rlvr/results"
    """Results folder (token_level.json, token_level.md and the partial-run folder)."""
    partial_dir: str = "token_level_partial"
    """Folder under `out` for the per-run files a resumed benchmark reads (a new task needs a new folder)."""


def parse_args() -> Args:
    """Every ``Args`` field as a ``--flag`` (tyro; the field docstrings are the help text)."""
    return tyro.cli(Args, description=__doc__)


def main(args: Args) -> dict:
    set_torch_threads()
    out = Path(args.out)
    partial = out / args.partial_dir
    partial.mkdir(parents=True, exist_ok=True)
    if not Path(args.checkpoint).is_file():
        sft = load_yaml(SFTConfig, args.sft_preset, {"steps": args.sft_steps})
        train_sft(sft, out_path=Path(args.checkpoint))
    base = load_run_config(
        args.preset,
        {
            "sft_checkpoint": args.checkpoint,
            "eval_every": args.eval_every,
            "pool_size": args.pool_size,
            "held_out_size": args.held_out_size,
            "grpo": {"prompts_per_step": args.prompts_per_step},
        },
    )

    def run(unit: Unit) -> dict[str, Any]:
        record = run_token_arm(unit.arm, unit.seed, base, args.tokens_budget, args.max_steps, log=print)
        record["args"] = asdict(args)
        return record

    units = grid(args.arms, args.seeds, partial)
    runs = list(
        run_sweep(units, run, describe=lambda u, r: f"{u.label}: {r['steps']} steps, {r['seconds']:.0f}s").values()
    )
    summary = token_level_summary(runs, args.seeds, args.arms)
    summary["args"] = asdict(args)
    summary["command"] = "OMP_NUM_THREADS=1 python " + shlex.join(sys.argv)
    atomic_write_json(out / "token_level.json", summary)
    table = token_level_table(summary)
    (out / "token_level.md").write_text(table)
    print(table)
    return summary


if __name__ == "__main__":
    main(parse_args())
