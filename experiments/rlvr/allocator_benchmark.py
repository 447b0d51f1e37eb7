"""The RLVR allocator benchmark: the allocator arms, one training run per (arm, seed), the summary statistics, tables.

Every arm starts from the same SFT checkpoint, sees prompts from the same pool in the same seeded order, uses the same
optimizer, prompts per step and number of steps, and is evaluated (greedy accuracy) on the same held-out set
(:func:`prompt_sets`). Only the allocator differs. The primary metric is the cumulative number of generated completion
tokens (and responses) at which held-out accuracy first reaches 95% of uniform G=8's final accuracy;
:func:`cost_ratio` turns it into a ratio to uniform G=8 with a paired seed-bootstrap interval.

The compact benchmark (``experiments/rlvr/benchmark.py``) trains with :func:`run_arm` and prints
:func:`benchmark_table`; the TRL benchmark (``experiments/rlvr/trl_benchmark.py``) trains through TRL's
``GRPOTrainer`` and summarizes with :mod:`experiments.rlvr.trl_summary`; :mod:`experiments.rlvr.quick` is the
pillar's line in ``rolloutlab bench``. All three read the same :func:`summarize`. The token-level benchmark is
:mod:`experiments.rlvr.token_level_protocol`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from envs.reasoning import Task, make_prompt_set
from meta.rlvr.allocators import Allocator, DynamicSampling, Uniform
from meta.rlvr.allocators.ar3po import AR3PO
from meta.rlvr.allocators.dars import DARS
from meta.rlvr.allocators.e3 import E3Budget
from meta.rlvr.allocators.knapsack import Knapsack
from meta.rlvr.lm.charlm import load_model
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.grpo import GRPOTrainer
from meta.rlvr.trainers.grpo_config import GRPOConfig
from rolloutlab.statistics import mean_interval, ratio_of_statistics

#: The issue's arms, all matched to uniform G=8's per-step budget where the method has a budget knob.
ARMS: dict[str, Callable[[], Allocator]] = {
    "uniform_g4": lambda: Uniform(4),
    "uniform_g8": lambda: Uniform(8),
    "uniform_g16": lambda: Uniform(16),
    "dapo": lambda: DynamicSampling(8, max_rounds=2),
    "ar3po": lambda: AR3PO(stage_size=2, max_stages=4, reuse=True),
    "dars": lambda: DARS(base=4, max_total=16, schedule="et"),
    "e3": lambda: E3Budget(n_min=4, n_max=12, budget_per_prompt=8, delta=2, n_low=2, n_high=16),
    "knapsack": lambda: Knapsack(budget_per_prompt=8, n_max=16),
}
ADAPTIVE_ARMS = ("dapo", "ar3po", "dars", "e3", "knapsack")
BASELINE = "uniform_g8"
#: The issue's TRL arms: uniform G=8 against the five adaptive allocators.
TRL_ARMS = ("uniform_g8", "dapo", "ar3po", "dars", "e3", "knapsack")

#: The SFT warm start every arm begins from (``rolloutlab rlvr sft``'s default output).
DEFAULT_CHECKPOINT = "runs/rlvr/sft.pt"
#: Digits of the long operand in the RL pool and the held-out set.
DIFFICULTIES = (1, 2, 3)
#: Training prompts: small enough that each is revisited every 16 steps (256 prompts / 16 per step), so per-prompt
#: statistics inform the allocators.
POOL_SIZE = 256
#: Held-out prompts (greedy accuracy).
HELD_OUT_SIZE = 600
#: Held-out evaluation period in GRPO steps.
EVAL_EVERY = 3
#: The benchmark's update: one full-batch optimizer step per generated batch at lr 3e-4. The table in docs/rlvr.md was
#: measured that way (the compact trainer's update before minibatches existed); GRPOConfig's defaults (4 minibatches
#: at 1e-4) are the trainer's regime in general, see its docstring.
BENCHMARK_LR = 3e-4
BENCHMARK_MINIBATCHES = 1


def prompt_sets(
    pool_size: int = POOL_SIZE, held_out_size: int = HELD_OUT_SIZE, difficulties: Sequence[int] = DIFFICULTIES
) -> tuple[list[Task], list[Task]]:
    """The training pool and the held-out set (reversed-digit add/mul), from fixed generators (seeds 1 and 2), so
    every arm, seed and trainer sees the same prompts."""
    pool = make_prompt_set(pool_size, np.random.default_rng(1), difficulties=list(difficulties))
    held_out = make_prompt_set(held_out_size, np.random.default_rng(2), difficulties=list(difficulties))
    return pool, held_out


@dataclass
class RunSettings:
    """What every arm shares.

    Attributes:
        steps: GRPO steps per run.
        eval_every: Evaluate held-out accuracy every this many steps (and at step 0 and the end).
        grpo: Trainer settings (its ``seed`` is overwritten per run).
    """

    steps: int
    eval_every: int
    grpo: GRPOConfig


def run_arm(
    arm: str,
    seed: int,
    checkpoint: str,
    pool: Sequence[Task],
    held_out: Sequence[Task],
    settings: RunSettings,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Train one arm from the SFT checkpoint and record the learning curve against cumulative cost.

    Returns:
        ``{"arm", "seed", "curve": [{"step", "accuracy", "completion_tokens", "responses", ...}], "costs", "seconds",
        "zero_variance_fraction", "allocator"}``.
    """
    torch.manual_seed(seed)
    model, _, _ = load_model(checkpoint)
    allocator = ARMS[arm]()
    cfg = GRPOConfig(**{**vars(settings.grpo), "seed": seed})
    trainer = GRPOTrainer(model, CharVocab(), pool, allocator, cfg)
    start = time.perf_counter()

    def point(step: int) -> dict[str, Any]:
        costs = trainer.costs.as_dict()
        return {"step": step, "accuracy": trainer.evaluate(held_out), **costs}

    curve = [point(0)]
    for step in range(1, settings.steps + 1):
        trainer.step()
        if step % settings.eval_every == 0 or step == settings.steps:
            curve.append(point(step))
            if log is not None:
                last = curve[-1]
                log(f"{arm} seed {seed} step {step}: acc {last['accuracy']:.3f} tokens {last['completion_tokens']}")
    return run_record(arm, seed, curve, trainer.costs.as_dict(), time.perf_counter() - start, allocator)


def run_record(
    arm: str, seed: int, curve: list[dict[str, Any]], costs: dict[str, int], seconds: float, allocator: Allocator
) -> dict[str, Any]:
    """One run's result as :func:`summarize` reads it (shared by the compact and the TRL benchmark)."""
    return {
        "arm": arm,
        "seed": seed,
        "curve": curve,
        "costs": costs,
        "seconds": seconds,
        "zero_variance_fraction": costs["zero_variance_groups"] / max(costs["groups"], 1),
        "allocator": allocator.describe(),
    }


#: Evaluations averaged into a run's "final" accuracy (the held-out estimate is noisy; one point would be noisier).
FINAL_WINDOW = 3
#: Seed-bootstrap resamples of every interval in the summary.
N_BOOT = 2000


def final_accuracy(run: dict[str, Any]) -> float:
    """Held-out accuracy at the end of a run: the mean of the last :data:`FINAL_WINDOW` evaluations."""
    return float(np.mean([p["accuracy"] for p in run["curve"][-FINAL_WINDOW:]]))


def first_reaching(run: dict[str, Any], target: float, key: str = "completion_tokens") -> float | None:
    """``key`` (cumulative cost) at the first evaluation with accuracy ``>= target``; ``None`` if never."""
    for p in run["curve"]:
        if p["accuracy"] >= target - 1e-12:
            return float(p[key])
    return None


def accuracy_at(run: dict[str, Any], tokens: float) -> float:
    """Accuracy of the last evaluation made with at most ``tokens`` completion tokens spent."""
    best = run["curve"][0]["accuracy"]
    for p in run["curve"]:
        if p["completion_tokens"] <= tokens:
            best = p["accuracy"]
    return float(best)


def _finite(x: float) -> float | None:
    """JSON has no infinity: an infinite or undefined number is written as ``None``."""
    return None if (math.isinf(x) or math.isnan(x)) else float(x)


def accuracy_interval(values: Sequence[float]) -> list[float]:
    """Seed-bootstrap percentile interval (95%, 2000 resamples, seed 0) of the mean of ``values``."""
    estimate = mean_interval(values, rng=0, n_resamples=N_BOOT)
    return [estimate.low, estimate.high]


def paired_delta(arm_values: Sequence[float], base_values: Sequence[float]) -> dict[str, Any]:
    """Mean of the per-seed differences (arm − baseline) and its seed-bootstrap interval (:func:`accuracy_interval`)."""
    diffs = [a - b for a, b in zip(arm_values, base_values, strict=True)]
    return {"value": float(np.mean(diffs)), "ci": accuracy_interval(diffs)}


def cost_ratio(arm_values: Sequence[float | None], base_values: Sequence[float | None]) -> dict[str, Any]:
    """Ratio of seed means (arm / baseline) with a paired seed-bootstrap percentile interval (95%, 2000, seed 0).

    A run that never reached the target counts as infinitely expensive; an infinite ratio or bound is written as
    ``None``. Seeds are resampled jointly (the same seed shares the SFT start and prompt order), and the interval ends
    are sample values (``inverted_cdf``), so infinite resamples never meet ``inf - inf``
    (:func:`rolloutlab.statistics.ratio_of_statistics`).

    Returns:
        ``{"value", "ci": [low, high]}``.

    Raises:
        ValueError: Arm and baseline have different or no seeds.
    """
    a = np.array([math.inf if v is None else v for v in arm_values], dtype=float)
    b = np.array([math.inf if v is None else v for v in base_values], dtype=float)
    if a.shape != b.shape or a.size == 0:
        raise ValueError("need the same non-zero number of seeds for arm and baseline")
    estimate = ratio_of_statistics(a, b, paired=True, rng=0, n_resamples=N_BOOT)
    return {"value": _finite(estimate.value), "ci": [_finite(estimate.low), _finite(estimate.high)]}


def summarize(runs: Sequence[dict[str, Any]], task: str, seeds: Sequence[int], arms: Sequence[str]) -> dict[str, Any]:
    """The summary JSON of the issue (plus extras): per-arm tokens/responses to target, final accuracy, ratios."""
    by = {(r["arm"], r["seed"]): r for r in runs}
    base_final = [final_accuracy(by[(BASELINE, s)]) for s in seeds if (BASELINE, s) in by]
    if len(base_final) != len(seeds):
        raise ValueError("summary needs a uniform_g8 run for every seed")
    target = 0.95 * float(np.mean(base_final))
    common_tokens = min(by[(a, s)]["costs"]["completion_tokens"] for a in arms for s in seeds if (a, s) in by)
    out_arms: dict[str, Any] = {}
    for arm in arms:
        if not all((arm, s) in by for s in seeds):
            continue
        rs = [by[(arm, s)] for s in seeds]
        out_arms[arm] = {
            "tokens_to_target": [first_reaching(r, target) for r in rs],
            "responses_to_target": [first_reaching(r, target, "responses") for r in rs],
            "final_accuracy": [final_accuracy(r) for r in rs],
            "final_accuracy_ci": accuracy_interval([final_accuracy(r) for r in rs]),
            "total_tokens": float(np.mean([r["costs"]["completion_tokens"] for r in rs])),
            "total_responses": float(np.mean([r["costs"]["responses"] for r in rs])),
            "total_prompt_tokens": float(np.mean([r["costs"]["prompt_tokens"] for r in rs])),
            "reused_responses": float(np.mean([r["costs"]["reused_responses"] for r in rs])),
            "dropped_tokens": float(np.mean([r["costs"]["dropped_tokens"] for r in rs])),
            "zero_variance_fraction": float(np.mean([r["zero_variance_fraction"] for r in rs])),
            "accuracy_at_common_tokens": [accuracy_at(r, common_tokens) for r in rs],
        }
    base = out_arms[BASELINE]
    for entry in out_arms.values():
        tokens = cost_ratio(entry["tokens_to_target"], base["tokens_to_target"])
        entry["ratio_tokens_vs_uniform_g8"], entry["ratio_ci"] = tokens["value"], tokens["ci"]
        responses = cost_ratio(entry["responses_to_target"], base["responses_to_target"])
        entry["ratio_responses_vs_uniform_g8"], entry["ratio_responses_ci"] = responses["value"], responses["ci"]
    candidates = [a for a in ADAPTIVE_ARMS if a in out_arms and out_arms[a]["ratio_tokens_vs_uniform_g8"] is not None]
    best: dict[str, Any] = {"arm": None, "ratio_tokens_vs_uniform_g8": None, "ci": [None, None]}
    if candidates:
        arm = min(candidates, key=lambda a: out_arms[a]["ratio_tokens_vs_uniform_g8"])
        best = {
            "arm": arm,
            "ratio_tokens_vs_uniform_g8": out_arms[arm]["ratio_tokens_vs_uniform_g8"],
            "ci": out_arms[arm]["ratio_ci"],
            "final_accuracy_delta": float(
                np.mean(out_arms[arm]["final_accuracy"]) - np.mean(out_arms[BASELINE]["final_accuracy"])
            ),
        }
        lo, hi = out_arms[BASELINE]["final_accuracy_ci"]
        best["final_accuracy_within_uniform_g8_interval"] = bool(lo <= np.mean(out_arms[arm]["final_accuracy"]) <= hi)
    return {
        "task": task,
        "seeds": list(seeds),
        "target_accuracy": target,
        "common_tokens": common_tokens,
        "arms": out_arms,
        "best_adaptive": best,
    }


def fmt(x: float | None) -> str:
    """A ratio or token count with two decimals, ``never`` for ``None`` (a target never reached)."""
    return "never" if x is None else f"{x:.2f}"


def benchmark_table(summary: dict[str, Any]) -> str:
    """The compact benchmark's table: ratio to uniform G=8 with its bootstrap interval, final accuracy, zero-variance
    share, with the target accuracy above it and the best adaptive arm below."""
    lines = [
        f"target accuracy {summary['target_accuracy']:.3f} (95% of uniform_g8 final), seeds {summary['seeds']}",
        "| arm | tokens-to-target ratio [95% CI] | responses ratio | final acc | total tokens | zero-var groups |",
        "|---|---|---|---|---|---|",
    ]
    for arm, e in summary["arms"].items():
        lo, hi = e["ratio_ci"]
        lines.append(
            f"| {arm} | {fmt(e['ratio_tokens_vs_uniform_g8'])} [{fmt(lo)}, {fmt(hi)}] "
            f"| {fmt(e['ratio_responses_vs_uniform_g8'])} | {np.mean(e['final_accuracy']):.3f} "
            f"| {e['total_tokens']:.0f} | {e['zero_variance_fraction']:.2f} |"
        )
    lines.append(f"best adaptive: {summary['best_adaptive']}")
    return "\n".join(lines)
