"""Transfer test of the RLVR meta-policy: the same policy, not retrained, picks G inside TRL on an unseen task family.

The meta-policy of ``experiments/meta/rlvr_meta.py`` learned to pick GRPO's responses per prompt G (grid 2, 4, 8, 16,
at six marks of a 32k completion-token budget) in the compact GRPO trainer on reversed-digit arithmetic. Here it runs
unchanged inside TRL's ``GRPOTrainer`` (:class:`meta.rlvr.trl.AllocatingGRPOTrainer`, through
:class:`meta.rlvr.learned.GroupSizeCallback`) on the TRL benchmark's second family ``sort`` (sort the digits of a 4-7
digit string, ``experiments/rlvr/trl_benchmark.py``: its tasks, its own SFT warm start and its greedy measure, loaded
from that script), a task it never saw.

Arms, all from the same sort warm start, with the same prompt pool and held-out set, TRL seed (prompt order and
sampling) and completion-token budget (``token_budget``, default 32k, the policy's training budget):

* ``meta``: a uniform allocator whose G the meta-policy sets at each phase mark (``LearnedGroupSize``, greedy);
* ``uniform_g8``, ``dapo``, ``ar3po``, ``dars``, ``e3``, ``knapsack``: the allocator benchmark's heuristics at their
  settings there (:data:`experiments.rlvr.allocator_benchmark.ARMS`), stopped at the same budget
  (:class:`meta.rlvr.learned.TokenBudgetCallback`, the callback's budget logic without the decisions).

Held-out greedy accuracy is measured for every arm at the same points: before the first step, after the step that
crosses each phase mark and at the end. TRL settings are the TRL benchmark's ``run_one`` (DAPO loss, clip-higher
0.2 / 0.28, no KL, temperature 1, TRL's num_generations 8, which only groups the batch), except: 8 prompts per step
(the meta-policy's training setting), a constant learning rate (3e-4; runs end at a token budget, not a step count,
so a decaying schedule would depend on the step bound; the compact trainer the policy learned in has none either),
and ``max_steps`` a bound never reached. Seeds 0..N-1 are paired across arms.

Each finished run is written at once to ``results/rlvr_meta/trl_runs/<arm>__<seed>.json`` (rerun the same command
to resume; runs made with other settings or another policy file are refused). The summary,
``results/rlvr_meta_trl.json``: per arm the final accuracy (mean, bootstrap interval over seeds), the mean accuracy at
each mark, tokens and steps; META's G schedules; ``meta_minus_best_heuristic``, the paired bootstrap over seeds of
META's final accuracy minus that of the heuristic arm with the best mean final accuracy (picked on the same data, which
favours the heuristic side); ``target_met``: that interval's upper end is >= 0.

    OMP_NUM_THREADS=1 nice -n 10 python experiments/meta/rlvr_meta_trl.py --workers 2
    OMP_NUM_THREADS=1 python experiments/meta/rlvr_meta_trl.py --seeds 2 --token-budget 2000 \\
        --policy /tmp/tiny/meta_policy.pt --out /tmp/trl_runs --summary /tmp/trl.json --sort-checkpoint /tmp/sort.pt

Cost, an estimate from a smoke test only (a tiny policy; budgets of 2000 and 8000 tokens extrapolated linearly in
tokens; one core of the shared 2-core machine under load): one 32k-token run takes about 20-40 s (uniform G = 8 about
20 s, AR3PO about 40 s; META's depends on the G it picks, more steps at small G), so the 70 runs of 10 seeds x 7 arms
take about 35 minutes on one worker; the sort warm start, if missing, about 10 s once.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.rlvr.allocator_benchmark import ARMS, BENCHMARK_LR, HELD_OUT_SIZE, POOL_SIZE, TRL_ARMS
from experiments.sweep import Unit, grid, run_sweep
from meta.rlvr.allocators import Allocator, Uniform
from meta.rlvr.learned import GroupSizeCallback, LearnedGroupSize, TokenBudgetCallback
from meta.rlvr.lm.charlm import load_model
from meta.rlvr.trainers.grpo_config import GRPOConfig as CompactGRPOConfig
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.statistics import mean_interval, paired_difference
from rolloutlab.threads import set_torch_threads

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
BENCHMARK_SCRIPT = HERE.parent / "rlvr" / "trl_benchmark.py"
FAMILY = "sort"
META_ARM = "meta"


def load_benchmark() -> ModuleType:
    """``experiments/rlvr/trl_benchmark.py`` (a script, not a package) as a module, executed once per process."""
    # The name the test helper gives it too, so that both share one module (its dataclasses look it up by name).
    name = "experiments_rlvr_trl_benchmark"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCHMARK_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


bench = load_benchmark()


@dataclass
class Args:
    policy: str = str(RESULTS / "rlvr_meta" / "train" / "meta_policy.pt")
    """the RLVR meta-policy (experiments/meta/rlvr_meta.py's export), used as it is"""
    seeds: int = 10
    """paired seeds 0..seeds-1 (TRL's seed: prompt order and sampling)"""
    arms: list[str] = field(default_factory=lambda: [META_ARM, *TRL_ARMS])
    """meta and heuristic allocators (names from allocator_benchmark.ARMS)"""
    token_budget: int = 32_000
    """completion tokens per run, every arm"""
    phases: int | None = None
    """phase marks of the budget (decisions of META, evaluations of every arm); default: the policy's"""
    prompts_per_step: int = 8
    """prompts per GRPO step (the meta-policy's training setting)"""
    lr: float = BENCHMARK_LR
    """AdamW learning rate, constant (the TRL benchmark's)"""
    max_new_tokens: int = CompactGRPOConfig.max_new_tokens
    """TRL's max_completion_length (the TRL benchmark's)"""
    sort_checkpoint: str = "runs/rlvr/sft_sort.pt"
    """the sort family's SFT warm start (trained by the TRL benchmark's ensure_checkpoint if missing)"""
    sort_sft_steps: int = 100
    """supervised steps of that warm start (the TRL benchmark's)"""
    pool_size: int = POOL_SIZE
    """training prompts"""
    held_out_size: int = HELD_OUT_SIZE
    """held-out prompts (greedy accuracy)"""
    workers: int = 1
    """runs side by side in worker processes"""
    out: str = str(RESULTS / "rlvr_meta" / "trl_runs")
    """per-run results folder"""
    summary: str = str(RESULTS / "rlvr_meta_trl.json")
    """summary file"""


def benchmark_args(args: Args) -> Any:
    """The TRL benchmark's settings for its sort family (prompt sets and warm start)."""
    return bench.Args(
        families=[FAMILY],
        sort_checkpoint=args.sort_checkpoint,
        sort_sft_steps=args.sort_sft_steps,
        pool_size=args.pool_size,
        held_out_size=args.held_out_size,
        max_new_tokens=args.max_new_tokens,
    )


def file_digest(path: str) -> str:
    """SHA-256 of a file (which policy, which warm start a run used)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def settings(args: Args, phases: int) -> dict[str, Any]:
    """What a run's result depends on besides its arm and seed; runs made otherwise are not mixed in."""
    keep = ("token_budget", "prompts_per_step", "lr", "max_new_tokens", "sort_sft_steps", "pool_size", "held_out_size")
    return {
        **{k: getattr(args, k) for k in keep},
        "phases": phases,
        "policy_sha256": file_digest(args.policy),
        "sort_checkpoint_sha256": file_digest(args.sort_checkpoint),
    }


def run_one(arm: str, seed: int, phases: int, args: Args) -> dict[str, Any]:
    """Train one arm on sort through TRL to the token budget; held-out accuracy at every phase mark."""
    set_torch_threads()
    pool, held_out = bench.family_tasks(FAMILY, benchmark_args(args))
    torch.manual_seed(seed)
    model, _, _ = load_model(args.sort_checkpoint)
    controller = LearnedGroupSize(args.policy) if arm == META_ARM else None
    allocator: Allocator = Uniform(controller.g) if controller is not None else ARMS[arm]()
    described = allocator.describe()

    def evaluate() -> float:
        return float(bench.greedy_accuracy(model, held_out, args.max_new_tokens))

    with tempfile.TemporaryDirectory() as tmp:
        trainer = bench.make_trainer(
            model,
            pool,
            allocator,
            FAMILY,
            tmp,
            seed,
            prompts_per_step=args.prompts_per_step,
            max_new_tokens=args.max_new_tokens,
            lr=args.lr,
            # Every step generates at least one token, so the budget stops each run long before this bound.
            max_steps=args.token_budget,
            lr_scheduler_type="constant",
        )
        callback: TokenBudgetCallback
        if controller is not None:
            callback = GroupSizeCallback(controller, evaluate, token_budget=args.token_budget, phases=phases)
        else:
            callback = TokenBudgetCallback(evaluate, token_budget=args.token_budget, phases=phases)
        callback.attach(trainer)
        start = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - start
    record: dict[str, Any] = {
        "family": FAMILY,
        "arm": arm,
        "seed": seed,
        "curve": callback.curve,
        "final_accuracy": callback.final_accuracy,
        "budget_spent": callback.stopped,
        "grpo_steps": int(trainer.state.global_step),
        "ledger": trainer.ledger.as_dict(),
        "allocator": described,
        "seconds": seconds,
        "g_schedule": None,
        "decisions": None,
    }
    if isinstance(callback, GroupSizeCallback):
        record["g_schedule"] = [g for _, _, g in callback.schedule]
        record["decisions"] = [
            {"tokens": t, "accuracy": acc, "g": g, "feedback": fb}
            for (t, acc, g), fb in zip(callback.schedule, callback.feedbacks, strict=True)
        ]
    return record


def run_unit(unit: Unit, phases: int, args: Args, run_settings: dict[str, Any]) -> dict[str, Any]:
    """One (arm, seed) run's record, with the settings a rerun checks it against."""
    run = run_one(unit.arm, unit.seed, phases, args)
    run["settings"] = run_settings
    return run


def describe(unit: Unit, run: dict[str, Any]) -> str:
    steps = f"{run['grpo_steps']} steps"
    schedule = f", G {run['g_schedule']}" if run["g_schedule"] is not None else ""
    return f"{unit.label}: final accuracy {run['final_accuracy']:.3f} ({steps}{schedule}, {run['seconds']:.0f} s)"


def summarize(args: Args, runs: dict[tuple[str, int], dict[str, Any]], phases: int) -> dict[str, Any]:
    """The summary over the seeds every arm has finished (the bootstrap needs two)."""
    seeds = [s for s in range(args.seeds) if all((a, s) in runs for a in args.arms)]
    out: dict[str, Any] = {
        "command": "OMP_NUM_THREADS=1 nice -n 10 python experiments/meta/rlvr_meta_trl.py",
        "args": asdict(args),
        "family": FAMILY,
        "phases": phases,
        "seeds_complete": seeds,
        "complete": len(seeds) == args.seeds,
        "target": "META no worse than the best heuristic arm: interval includes or exceeds it "
        "(upper end of meta_minus_best_heuristic.ci >= 0)",
        "best_heuristic": None,
        "meta_minus_best_heuristic": None,
        "target_met": None,
    }
    if len(seeds) < 2:
        return out
    final = {a: np.asarray([runs[a, s]["final_accuracy"] for s in seeds], dtype=float) for a in args.arms}
    out["start_accuracy_mean"] = float(np.mean([runs[args.arms[0], s]["curve"][0]["accuracy"] for s in seeds]))
    arms: dict[str, Any] = {}
    for i, arm in enumerate(args.arms):
        these = [runs[arm, s] for s in seeds]
        ci = mean_interval(final[arm], rng=i)
        arms[arm] = {
            "final_accuracy_mean": float(final[arm].mean()),
            "final_accuracy_ci": [ci.low, ci.high],
            "final_accuracies": final[arm].tolist(),
            # Marks 0..phases-1 then the end: the same points for every arm (a step crossing two marks repeats one).
            "accuracy_at_marks_mean": np.mean([[p["accuracy"] for p in r["curve"]] for r in these], axis=0).tolist(),
            "tokens_at_marks_mean": np.mean([[p["tokens"] for p in r["curve"]] for r in these], axis=0).tolist(),
            "completion_tokens_mean": float(np.mean([r["ledger"]["completion_tokens"] for r in these])),
            "grpo_steps_mean": float(np.mean([r["grpo_steps"] for r in these])),
            "seconds_mean": float(np.mean([r["seconds"] for r in these])),
            "g_schedules": [r["g_schedule"] for r in these] if arm == META_ARM else None,
        }
    out["arms"] = arms
    heuristics = [a for a in args.arms if a != META_ARM]
    if META_ARM in args.arms and heuristics:
        best = max(heuristics, key=lambda a: float(final[a].mean()))
        diff = paired_difference(final[META_ARM], final[best], rng=0)
        out["best_heuristic"] = best
        out["meta_minus_best_heuristic"] = {"point": diff.value, "ci": [diff.low, diff.high]}
        out["target_met"] = bool(diff.high >= 0)
    return out


def main(args: Args) -> dict[str, Any]:
    set_torch_threads()
    unknown = [a for a in args.arms if a != META_ARM and a not in ARMS]
    if unknown:
        raise SystemExit(f"unknown arms {unknown}; known: {META_ARM}, {sorted(ARMS)}")
    if not Path(args.policy).is_file():
        raise SystemExit(
            f"no RLVR meta-policy at {args.policy}: train it with `python experiments/meta/rlvr_meta.py --no-test` "
            "or pass --policy"
        )
    phases = args.phases or LearnedGroupSize(args.policy).config.phases
    bench.ensure_checkpoint(FAMILY, benchmark_args(args))
    run_settings = settings(args, phases)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def reuse(unit: Unit, record: dict[str, Any]) -> bool:
        if record.get("settings") != run_settings:
            raise SystemExit(f"{unit.path} was made with other settings or another policy; move {out} away")
        return True

    # Seeds outermost: after each seed every arm has a paired run, so an experiment cut short stays usable.
    units = grid(args.arms, range(args.seeds), Path(args.out))
    records = run_sweep(
        units,
        partial(run_unit, phases=phases, args=args, run_settings=run_settings),
        reuse=reuse,
        workers=args.workers,
        describe=describe,
    )
    runs = {(unit.arm, unit.seed): record for unit, record in records.items()}
    summary = summarize(args, runs, phases)
    atomic_write_json(Path(args.summary), summary)
    diff = summary["meta_minus_best_heuristic"]
    if diff is not None:
        print(
            f"META - {summary['best_heuristic']}: {diff['point']:+.3f} {diff['ci']}, target "
            f"{'met' if summary['target_met'] else 'missed'}",
            flush=True,
        )
    return summary


if __name__ == "__main__":
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    main(tyro.cli(Args, description=__doc__))
