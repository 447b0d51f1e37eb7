"""RLVR breadth and asynchrony (DARS-B and DART): DARS-B against uniform GRPO G=8 and DARS at equal
generated tokens (held-out pass@1 and pass@8), and DART against the synchronous trainer (wall-clock and learner idle
time per step).

Run from the repository root (one thread, low priority, resumable):

    OMP_NUM_THREADS=1 nice -n 5 .venv/bin/python experiments/rlvr/breadth_async.py

Every arm starts from the same SFT checkpoint (reversed-digit add/mul, trained first from ``sft.yaml`` on difficulties
1-3 if missing), draws from the same prompt pool (:func:`~experiments.rlvr.allocator_benchmark.prompt_sets`,
difficulties 1-3) and trains until the same number of generated completion tokens (the DART arms' dropped stale
groups and last jobs in flight included). Each finished (method, arm, seed) run is written at once to
``results/hints_budgets_partial/<method>__<arm>__<seed>.json``, so a killed benchmark resumes where it stopped.

* DARS-B: ``uniform_g8`` (16 prompts x 8), ``dars`` (DARS 4/16, 16 prompts) and ``dars_b`` (DARS 4/16 over 64 prompts,
  full-batch updates, 2 epochs), all at the same learning rate; at the end pass@1 and pass@8 from 8 samples per
  held-out prompt at temperature 1 (unbiased estimator) and greedy accuracy.
* DART: ``sync`` (``dart_sync``) and ``dart`` (asynchronous, max staleness 1), the same DART counts (4 or 8 per task)
  and the same learner code, each with one rollout worker process beside the learner (2 processes). Per-step means
  leave out the first step (worker start-up). The machine's 2 cores are shared with other jobs, so the times are what
  this machine gave at the time, written with the load average next to them.

At the end the script writes ``results/breadth_async.json`` (every arm and paired comparison) and the two section
files ``results/hints_budgets_parts/{dars_b,dart}.json`` (``{headline_metric, value, baseline, ci, headline_met}``,
paired seed-bootstrap intervals of :func:`~experiments.rlvr.allocator_benchmark.paired_delta`), which
``hints_budgets.py`` merges into ``hints_budgets.json``; then it prints the table.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.rlvr.allocator_benchmark import paired_delta, prompt_sets
from experiments.sweep import Unit, grid, run_sweep
from meta.rlvr.allocators import Uniform
from meta.rlvr.allocators.dars import DARS
from meta.rlvr.allocators.dars_breadth import DARSBreadth
from meta.rlvr.lm.charlm import load_model
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.dars_breadth import DARSBreadthTrainer, sampled_pass_rates
from meta.rlvr.trainers.dart import DARTTrainer, make_dart_config
from meta.rlvr.trainers.grpo import GRPOTrainer
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.sft import SFTConfig, train_sft
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.config import load_yaml
from rolloutlab.threads import set_torch_threads

HERE = Path(__file__).parent
COMMAND = "OMP_NUM_THREADS=1 nice -n 5 .venv/bin/python experiments/rlvr/breadth_async.py"
DARS_B_ARMS = ("uniform_g8", "dars", "dars_b")
DART_ARMS = ("sync", "dart")


@dataclass
class Args:
    methods: list[str] = field(default_factory=lambda: ["dars_b", "dart"])
    """Which comparisons to run: dars_b, dart."""
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    """RL seeds (prompt order, sampling); the SFT checkpoint is shared by all."""
    checkpoint: str = "runs/rlvr/breadth_async_sft.pt"
    """SFT checkpoint every arm starts from; trained from `sft_preset` on difficulties 1-3 if missing."""
    sft_preset: str = str(HERE / "sft.yaml")
    """SFTConfig preset of the warm start."""
    sft_steps: int = 1500
    """Warm-start steps if the checkpoint has to be trained."""
    tokens_budget: int = 300_000
    """Generated completion tokens per DARS-B-comparison run (each arm stops at the first step that reaches it)."""
    dart_tokens_budget: int = 100_000
    """Generated completion tokens per DART-comparison run."""
    lr: float = 3e-4
    """AdamW rate per optimizer step, every arm (the allocator benchmark's rate for full-batch steps)."""
    prompts_per_step: int = 16
    """Prompts per step of uniform_g8, dars and both DART arms."""
    breadth: int = 64
    """DARS-B's prompts per step."""
    epochs: int = 2
    """DARS-B's full-batch optimizer steps per generated batch."""
    pass_n: int = 8
    """Samples per held-out prompt for pass@k (k = 1 and k = pass_n)."""
    dart_backend: str = "process"
    """Where DART's rollout worker runs: process (the measured setting) or ray."""
    dart_prompts_per_job: int = 16
    """Prompts per asynchronous worker job (16: one job per step, the synchronous arm's job size)."""
    pool_size: int = 256
    """Training prompts."""
    held_out_size: int = 300
    """Held-out prompts."""
    out: str = str(HERE / "results")
    """Results folder (breadth_async.json, hints_budgets_partial/, hints_budgets_parts/)."""


def parse_args() -> Args:
    """Every ``Args`` field as a ``--flag`` (tyro; the field docstrings are the help text)."""
    return tyro.cli(Args, description=__doc__)


def _load(checkpoint: str, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    model, _, _ = load_model(checkpoint)
    return model


def run_dars_b_arm(arm: str, seed: int, args: Args, pool: list[Any], held_out: list[Any]) -> dict[str, Any]:
    """One DARS-B-comparison run to ``args.tokens_budget`` tokens; pass@1, pass@k and greedy accuracy at the end."""
    cfg = GRPOConfig(prompts_per_step=args.prompts_per_step, lr=args.lr, minibatches=1, seed=seed)
    model = _load(args.checkpoint, seed)
    trainer: GRPOTrainer
    if arm == "uniform_g8":
        trainer = GRPOTrainer(model, CharVocab(), pool, Uniform(8), cfg)
    elif arm == "dars":
        trainer = GRPOTrainer(model, CharVocab(), pool, DARS(4, 16), cfg)
    elif arm == "dars_b":
        trainer = DARSBreadthTrainer(model, CharVocab(), pool, DARSBreadth(4, 16, args.epochs, args.breadth), cfg)
    else:
        raise ValueError(f"unknown DARS-B arm {arm!r}; known: {DARS_B_ARMS}")
    start = time.perf_counter()
    optimizer_steps = 0
    while trainer.costs.completion_tokens < args.tokens_budget:
        optimizer_steps += int(trainer.step()["optimizer_steps"])
    seconds = time.perf_counter() - start
    rates = sampled_pass_rates(trainer, held_out, n=args.pass_n, ks=(1, args.pass_n), seed=10_000 + seed)
    return {
        "method": "dars_b",
        "arm": arm,
        "seed": seed,
        "steps": trainer.num_steps,
        "optimizer_steps": optimizer_steps,
        "pass@1": rates["pass@1"],
        f"pass@{args.pass_n}": rates[f"pass@{args.pass_n}"],
        "greedy_accuracy": trainer.evaluate(held_out),
        "costs": trainer.costs.as_dict(),
        "seconds": seconds,
        "config": asdict(trainer.cfg),
        "allocator": trainer.allocator.describe(),
    }


def run_dart_arm(arm: str, seed: int, args: Args, pool: list[Any], held_out: list[Any]) -> dict[str, Any]:
    """One DART-comparison run to ``args.dart_tokens_budget`` tokens, timing every step."""
    spec = "dart:1,4,8,1" if arm == "dart" else "dart_sync:4,8,1" if arm == "sync" else None
    if spec is None:
        raise ValueError(f"unknown DART arm {arm!r}; known: {DART_ARMS}")
    dart = make_dart_config(f"{spec},{args.dart_backend}", prompts_per_job=args.dart_prompts_per_job)
    cfg = GRPOConfig(prompts_per_step=args.prompts_per_step, lr=args.lr, minibatches=1, seed=seed)
    trainer = DARTTrainer(_load(args.checkpoint, seed), CharVocab(), pool, dart, cfg)
    step_seconds: list[float] = []
    idle_seconds: list[float] = []
    load: list[float] = []
    start = time.perf_counter()
    try:
        while trainer.costs.completion_tokens < args.dart_tokens_budget:
            metrics = trainer.step()
            step_seconds.append(float(metrics["async/step_seconds"]))
            idle_seconds.append(float(metrics["async/idle_seconds"]))
            load.append(os.getloadavg()[0])
    finally:
        trainer.close()  # the last jobs in flight are booked (their tokens count)
    seconds = time.perf_counter() - start
    steady = slice(1, None)  # the first step waits for the worker process to start
    return {
        "method": "dart",
        "arm": arm,
        "seed": seed,
        "steps": trainer.num_steps,
        "seconds_per_step": float(np.mean(step_seconds[steady])),
        "idle_seconds_per_step": float(np.mean(idle_seconds[steady])),
        "idle_share": float(np.sum(idle_seconds[steady]) / max(np.sum(step_seconds[steady]), 1e-9)),
        "first_step_seconds": step_seconds[0],
        "step_seconds": step_seconds,
        "idle_seconds": idle_seconds,
        "load_average": float(np.mean(load)),
        "greedy_accuracy": trainer.evaluate(held_out),
        "stale_groups": trainer.stale_groups,
        "stale_responses": trainer.stale_responses,
        "stale_tokens": trainer.stale_tokens,
        "corrected_responses": trainer.corrected_responses,
        "costs": trainer.costs.as_dict(),
        "seconds": seconds,
        "dart": asdict(dart),
        "config": asdict(trainer.cfg),
    }


def _delta(runs: dict[tuple[str, int], dict[str, Any]], arm: str, base: str, key: str, seeds: list[int]) -> Any:
    return paired_delta([runs[(arm, s)][key] for s in seeds], [runs[(base, s)][key] for s in seeds])


def summarize_dars_b(runs: dict[tuple[str, int], dict[str, Any]], seeds: list[int], k: int) -> dict[str, Any]:
    """Per-arm means and DARS-B's paired deltas against uniform G=8 and DARS; the section dict of ``methods.dars_b``.

    The headline (the paper's): DARS-B gains both pass@1 and pass@k over uniform G=8 at equal generated tokens, each
    paired interval above 0.
    """
    keys = ("pass@1", f"pass@{k}", "greedy_accuracy")
    arms = {
        arm: {
            **{key: float(np.mean([runs[(arm, s)][key] for s in seeds])) for key in keys},
            "tokens": float(np.mean([runs[(arm, s)]["costs"]["completion_tokens"] for s in seeds])),
            "steps": float(np.mean([runs[(arm, s)]["steps"] for s in seeds])),
            "optimizer_steps": float(np.mean([runs[(arm, s)]["optimizer_steps"] for s in seeds])),
            "seconds": float(np.mean([runs[(arm, s)]["seconds"] for s in seeds])),
        }
        for arm in DARS_B_ARMS
    }
    deltas = {
        f"{key} dars_b - {base}": _delta(runs, "dars_b", base, key, seeds)
        for base in ("uniform_g8", "dars")
        for key in keys
    }
    p1 = deltas["pass@1 dars_b - uniform_g8"]
    pk = deltas[f"pass@{k} dars_b - uniform_g8"]
    section = {
        "headline_metric": f"held-out pass@1 (T=1, {k} samples per prompt) at equal generated tokens, DARS-B vs "
        f"uniform GRPO G=8; ci: paired seed-bootstrap 95% interval of the difference; met if it and the pass@{k} "
        "difference's interval both lie above 0",
        "value": arms["dars_b"]["pass@1"],
        "baseline": arms["uniform_g8"]["pass@1"],
        "ci": p1["ci"],
        "headline_met": bool(p1["ci"][0] > 0.0 and pk["ci"][0] > 0.0),
    }
    return {"arms": arms, "deltas": deltas, "section": section}


def summarize_dart(runs: dict[tuple[str, int], dict[str, Any]], seeds: list[int]) -> dict[str, Any]:
    """Per-arm means and DART's paired deltas against the synchronous trainer; the section dict of ``methods.dart``.

    The headline (the paper's direction): less wall-clock per learner step and less learner idle time per step than
    the synchronous trainer, each paired interval below 0.
    """
    keys = ("seconds_per_step", "idle_seconds_per_step", "idle_share", "greedy_accuracy", "load_average")
    arms = {
        arm: {
            **{key: float(np.mean([runs[(arm, s)][key] for s in seeds])) for key in keys},
            "steps": float(np.mean([runs[(arm, s)]["steps"] for s in seeds])),
            "tokens": float(np.mean([runs[(arm, s)]["costs"]["completion_tokens"] for s in seeds])),
            "stale_responses": float(np.mean([runs[(arm, s)]["stale_responses"] for s in seeds])),
            "corrected_responses": float(np.mean([runs[(arm, s)]["corrected_responses"] for s in seeds])),
            "seconds": float(np.mean([runs[(arm, s)]["seconds"] for s in seeds])),
        }
        for arm in DART_ARMS
    }
    deltas = {f"{key} dart - sync": _delta(runs, "dart", "sync", key, seeds) for key in keys[:4]}
    wall = deltas["seconds_per_step dart - sync"]
    idle = deltas["idle_seconds_per_step dart - sync"]
    section = {
        "headline_metric": "wall-clock seconds per learner step, DART (asynchronous, 1 worker process + learner) vs "
        "synchronous (same code and processes); ci: paired seed-bootstrap 95% interval of the difference; met if it "
        "and the learner-idle-seconds-per-step difference's interval both lie below 0",
        "value": arms["dart"]["seconds_per_step"],
        "baseline": arms["sync"]["seconds_per_step"],
        "ci": wall["ci"],
        "headline_met": bool(wall["ci"][1] < 0.0 and idle["ci"][1] < 0.0),
    }
    return {"arms": arms, "deltas": deltas, "section": section}


def table(summary: dict[str, Any]) -> str:
    """The markdown the docs quote."""
    lines: list[str] = []
    if "dars_b" in summary:
        s = summary["dars_b"]
        k = summary["pass_k"]
        lines += [
            f"| arm | pass@1 | pass@{k} | greedy acc | steps | optimizer steps | tokens |",
            "|---|---|---|---|---|---|---|",
        ]
        for arm, e in s["arms"].items():
            lines.append(
                f"| {arm} | {e['pass@1']:.3f} | {e[f'pass@{k}']:.3f} | {e['greedy_accuracy']:.3f} | {e['steps']:.0f} "
                f"| {e['optimizer_steps']:.0f} | {e['tokens']:,.0f} |"
            )
        lines.append("")
        for name, d in s["deltas"].items():
            lines.append(f"- {name}: {d['value']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}]")
        lines.append(f"- DARS-B headline: **{'met' if s['section']['headline_met'] else 'missed'}**.")
        lines.append("")
    if "dart" in summary:
        s = summary["dart"]
        lines += [
            "| arm | s/step | idle s/step | idle share | greedy acc | steps | stale dropped | corrected | load avg |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for arm, e in s["arms"].items():
            lines.append(
                f"| {arm} | {e['seconds_per_step']:.3f} | {e['idle_seconds_per_step']:.3f} | {e['idle_share']:.2f} "
                f"| {e['greedy_accuracy']:.3f} | {e['steps']:.0f} | {e['stale_responses']:.0f} "
                f"| {e['corrected_responses']:.0f} | {e['load_average']:.1f} |"
            )
        lines.append("")
        for name, d in s["deltas"].items():
            lines.append(f"- {name}: {d['value']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}]")
        lines.append(f"- DART headline: **{'met' if s['section']['headline_met'] else 'missed'}**.")
    return "\n".join(lines) + "\n"


def main(args: Args) -> dict[str, Any]:
    set_torch_threads()
    out = Path(args.out)
    partial = out / "hints_budgets_partial"
    parts = out / "hints_budgets_parts"
    partial.mkdir(parents=True, exist_ok=True)
    parts.mkdir(parents=True, exist_ok=True)
    if not Path(args.checkpoint).is_file():
        overrides = {"steps": args.sft_steps, "difficulties": [1, 2, 3], "difficulty_weights": [1.0, 1.0, 1.0]}
        train_sft(load_yaml(SFTConfig, args.sft_preset, overrides), out_path=Path(args.checkpoint))
    pool, held_out = prompt_sets(args.pool_size, args.held_out_size)
    summary: dict[str, Any] = {
        "command": COMMAND,
        "args": asdict(args),
        "seeds": list(args.seeds),
        "pass_k": args.pass_n,
    }
    plan = {"dars_b": (DARS_B_ARMS, run_dars_b_arm), "dart": (DART_ARMS, run_dart_arm)}
    for method in args.methods:
        arms, run_method_arm = plan[method]

        def run(unit: Unit, run_method_arm: Callable[..., dict[str, Any]] = run_method_arm) -> dict[str, Any]:
            record = run_method_arm(unit.arm, unit.seed, args, pool, held_out)
            record["args"] = asdict(args)
            return record

        units = grid(arms, args.seeds, partial, group=method)
        records = run_sweep(units, run, describe=lambda u, r: f"{u.label}: {r['steps']} steps")
        runs = {(unit.arm, unit.seed): record for unit, record in records.items()}
        if method == "dars_b":
            summary["dars_b"] = summarize_dars_b(runs, list(args.seeds), args.pass_n)
        else:
            summary["dart"] = summarize_dart(runs, list(args.seeds))
        atomic_write_json(parts / f"{method}.json", summary[method]["section"])
    atomic_write_json(out / "breadth_async.json", summary)
    text = table(summary)
    (out / "breadth_async.md").write_text(text)
    print(text)
    return summary


if __name__ == "__main__":
    main(parse_args())
