"""RLVR seed methods, each measured on the testbed whose headroom gate it passed, against uniform GRPO and DAPO-style
dynamic sampling at equal generated-token budgets.

Run from the repository root (one thread, low priority, resumable; every method and seed not yet on disk):

    OMP_NUM_THREADS=1 nice -n 10 python experiments/rlvr/seed_methods.py

``--methods alp hbpo`` runs only those methods (with their testbed's references). Each method trains on the testbed
named by its gate in ``experiments/rlvr/headroom.py`` (:data:`experiments.rlvr.headroom.GATES`): ALP, HBPO and EHPO on
``carry`` (answer-length spread), ARPO on ``toolmix`` (tool calls on prompts that need none), HAPO, EEPO, DARS-B, Guide,
SEELE, E3 and BAPO on ``countdown`` (pass@k gap, hint lift, entropy, the clip fraction of stale updates); DART, which
has no gate (its lever is wall-clock time, not a statistic of the warm start), on ``countdown`` too. Every arm of a
testbed starts from the same warm start (``runs/rlvr/testbeds/<testbed>.pt``, trained first if missing,
:func:`experiments.rlvr.testbeds.load_or_train`), draws from the same prompt pool in the same seeded order, and trains
until the same number of generated completion tokens (:data:`TOKEN_BUDGETS`; it stops at the first step that reaches
it); only the method differs. The references ``uniform`` (uniform GRPO, G=8) and ``dapo`` (dynamic sampling, G=8, up to
3 refills) run on every testbed a method needs.

Two methods are measured against a matched baseline arm of their own instead of uniform (:data:`METHOD_BASELINES`):

* BAPO (adaptive clip bounds, :class:`~meta.rlvr.token.clipping.BalancedClip`) acts only off-policy: with one
  optimizer step per generated batch its ratio is exactly 1 and no bound binds. Both ``bapo`` and its baseline
  ``clip_fixed`` (the trainer's fixed bounds ``[1 − ε_low, 1 + ε_high]`` of :class:`GRPOConfig`) therefore train on
  stale data: ``stale_epochs`` passes over each generated batch of ``minibatches`` minibatches, 4 × 4 = 16 optimizer
  steps per generation by default (the staleness of BAPO's gate), the same token budget and the same optimizer steps
  per generated batch in both arms. Every unit records its updates per generation, the share of learning tokens the
  clip removed and the ratio range (``updates``), so the staleness each comparison ran under is on disk beside it.
* DART (decoupled asynchronous rollout workers, :class:`~meta.rlvr.trainers.dart.DARTTrainer`) against ``dart_sync``,
  the same learner, workers and rollout counts in synchronous mode, both with ``dart_workers`` Ray workers; the
  headline is learner steps per second of training time (held-out evaluations excluded; the workers are drained before
  each evaluation, so asynchronous sampling never overlaps it) at equal generated tokens, with accuracy not worse.

A unit is (testbed, arm, seed); its record is written to ``results/seed_methods/<testbed>__<arm>__<seed>.json`` the
moment it finishes (:func:`experiments.sweep.run_sweep`), so a killed benchmark resumes where it stopped. The summary,
``results/seed_methods.json``, holds for every method with all its seeds and its testbed's references: its paper's
headline measure (:data:`HEADLINES`) as a paired (by seed) difference or ratio against uniform with a 95% seed-bootstrap
interval, whether the headline's direction was met with an interval that excludes no effect (a miss is reported as a
miss), the accuracy against dynamic sampling, and its gate's numbers from ``results/headroom.json``.
"""

from __future__ import annotations

import functools
import json
import math
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from envs.reasoning.registry import family_spec
from experiments.rlvr.allocator_benchmark import FINAL_WINDOW, cost_ratio, paired_delta, run_record
from experiments.rlvr.headroom import GATES
from experiments.rlvr.headroom import Args as GateArgs
from experiments.rlvr.testbeds import WarmStart, find_testbed, load_or_train, sample_responses
from experiments.rlvr.token_level_protocol import training_tool_calls
from experiments.sweep import Unit, grid, read_record, run_sweep
from meta.rlvr.allocators import Allocator, DynamicSampling, Uniform, make_allocator
from meta.rlvr.allocators.dars_breadth import DARSBreadth
from meta.rlvr.guidance import make_guidance
from meta.rlvr.lm.charlm import load_model
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.token import make_token_controller
from meta.rlvr.token.arpo import BranchingRollout
from meta.rlvr.token.clipping import BalancedClip
from meta.rlvr.token.eepo import EEPO
from meta.rlvr.token.hapo import HAPO
from meta.rlvr.token.length_penalty import AdaptiveLengthPenalty
from meta.rlvr.token.temperature import EntropyTemperature
from meta.rlvr.trainers.dars_breadth import breadth_config, pass_at_k
from meta.rlvr.trainers.dart import DARTConfig, DARTTrainer
from meta.rlvr.trainers.dart_workers import BACKENDS
from meta.rlvr.trainers.grpo import GRPOTrainer
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.tools import CalculatorTool
from rolloutlab.checkpoint import atomic_write_json, json_nulls
from rolloutlab.seeding import seed_everything
from rolloutlab.threads import set_torch_threads

RESULTS = Path("experiments/rlvr/results")  # relative to the repository root, where the script runs
#: The references every testbed runs: uniform GRPO G=8 (the baseline of every paired measure) and dynamic sampling.
REFERENCES: tuple[str, ...] = ("uniform", "dapo")
BASELINE = "uniform"
#: Each method arm and the name its gate has in ``headroom.json``.
GATE_NAMES: dict[str, str] = {
    "alp": "ALP",
    "hbpo": "HBPO",
    "ehpo": "EHPO",
    "arpo": "ARPO",
    "hapo": "HAPO",
    "eepo": "EEPO",
    "dars_b": "DARS-B",
    "guide": "Guide",
    "seele": "SEELE",
    "e3": "E3",
    "bapo": "BAPO",
}
#: Each method's testbed: the one its gate reads (DART, without a gate, on countdown).
METHOD_TESTBEDS: dict[str, str] = {arm: GATES[name][0].testbed for arm, name in GATE_NAMES.items()} | {
    "dart": "countdown"
}
#: Every method arm, in run order.
METHODS: tuple[str, ...] = tuple(METHOD_TESTBEDS)
#: Methods measured against a matched baseline arm of their own (run with them) rather than against uniform.
METHOD_BASELINES: dict[str, str] = {"bapo": "clip_fixed", "dart": "dart_sync"}
#: Generated completion tokens per run, per testbed (every arm of a testbed gets the same budget).
TOKEN_BUDGETS: dict[str, int] = {"carry": 300_000, "toolmix": 600_000, "countdown": 600_000}
#: ALP's β (:class:`AdaptiveLengthPenalty`'s default; the normaliser N is the testbed's ``max_new_tokens``).
ALP_BETA = 0.05
#: HBPO's α and budgets (the budgets the carry warm start was taught, ``TESTBEDS["carry"].mix["budgets"]``).
HBPO_SPEC = "hbpo:0.05,8,16,32,64"
#: Specs of the token controllers and guidance arms (their modules' defaults).
SPECS: dict[str, str] = {
    "ehpo": "ehpo:1,0.1",
    "arpo": "arpo:0.5,1",
    "hapo": "hapo:0.2,1",
    "eepo": "eepo:0.001",
    "guide": "guide:0.5",
    "seele": "seele:2",
    "dars_b": "dars_b",
}
#: E3's entropy target (nats per token): about the countdown warm start's sampled entropy (its gate: 0.294).
E3_TARGET = 0.3
#: Length and tool-call headlines: "−30%" is a ratio to uniform of at most this.
CUT = 0.7
#: ARPO's "half the tool calls".
HALF = 0.5
#: ALP and EHPO's accuracy tolerance ("at <= 1 point accuracy"), as a held-out accuracy difference.
ONE_POINT = 0.01
#: Each method's headline (the issue's Measure list) and how :func:`headline_met` tests it.
HEADLINES: dict[str, str] = {
    "alp": f"length_ratio <= {CUT} with CI < 1, accuracy_delta >= -{ONE_POINT}",
    "ehpo": f"length_ratio <= {CUT} with CI < 1, accuracy_delta >= -{ONE_POINT}",
    "hbpo": f"length_ratio <= {CUT} with CI < 1, accuracy_delta CI reaches 0 or above (not below uniform)",
    "arpo": f"tool_calls_ratio <= {HALF} with CI < 1, accuracy_delta CI reaches 0 or above (not below uniform)",
    "hapo": "accuracy_delta CI > 0 and entropy_retention_ratio CI > 1",
    "eepo": "accuracy_delta CI > 0 and entropy_retention_ratio CI > 1",
    "dars_b": "pass_k_delta CI > 0 and pass_1_delta CI > 0",
    "guide": "hard_accuracy_delta CI > 0 (the hardest bucket)",
    "seele": "hard_accuracy_delta CI > 0 (the hardest bucket)",
    "e3": "entropy_retention_ratio CI > 1 (entropy held up where fixed T loses it)",
    "bapo": "accuracy_delta CI > 0 and entropy_retention_ratio CI > 1 against clip_fixed (same stale updates)",
    "dart": "steps_per_second_ratio CI > 1 against dart_sync, accuracy_delta CI reaches 0 or above (not worse)",
}


@dataclass
class Args:
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    """Method arms to run (names of METHODS); each brings its testbed's references (uniform, dapo) and its own
    baseline arm (METHOD_BASELINES)."""
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    """RL seeds (prompt order, sampling); the warm start is shared by all."""
    tokens_budget: int = 0
    """Generated completion tokens per run (0: the testbed's TOKEN_BUDGETS entry)."""
    max_steps: int = 400
    """Step cap per run, in case an arm generates far fewer tokens per step."""
    eval_every: int = 10
    """Held-out evaluation period in steps (also at step 0 and at the end)."""
    prompts_per_step: int = 16
    """Prompts (groups of 8) per step."""
    lr: float = GRPOConfig.lr
    """AdamW learning rate per optimizer step (GRPOConfig's, sized for its 4 minibatches)."""
    pool_per_bucket: int = 64
    """Training prompts per difficulty bucket of the testbed."""
    held_out_per_bucket: int = 64
    """Held-out prompts per difficulty bucket (greedy accuracy, answer length, tool calls, entropy)."""
    pass_k: int = 8
    """Responses per held-out prompt (T=1) at the end of a run, for pass@1 and pass@k (0: skip)."""
    sft_steps: int = 0
    """Override every testbed's SFT steps if its warm start must be trained (0: the testbed's own; smoke runs)."""
    checkpoint_dir: str = ""
    """Where warm starts are loaded from or saved to (empty: runs/rlvr/testbeds)."""
    out: str = str(RESULTS)
    """Folder of seed_methods.json and the per-unit folder seed_methods/."""
    headroom: str = str(RESULTS / "headroom.json")
    """The gate's results, quoted beside each method."""
    stale_epochs: int = GateArgs.bapo_epochs
    """Passes over each generated batch of bapo and clip_fixed (GRPOConfig's minibatches each: minibatches x
    stale_epochs optimizer steps per generation); the other arms make one pass."""
    dart_workers: int = 2
    """Rollout workers of dart and dart_sync."""
    dart_backend: str = "ray"
    """Where DART's workers run: ray (the measured setting), process, or inline (one job at a time: tests)."""
    dart_max_staleness: int = 1
    """Most policy versions a group may lag DART's learner when it is trained on."""
    workers: int = 1
    """Units run at once, each in its own process (one thread each)."""
    summarize_only: bool = False
    """Run nothing: write the summary from the records on disk (methods with a record for every one of `seeds`)."""

    def __post_init__(self) -> None:
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise ValueError(f"unknown method {unknown[0]!r} in --methods; known: {', '.join(METHODS)}")
        if self.tokens_budget < 0 or self.max_steps < 1 or self.eval_every < 1 or self.pass_k < 0 or self.workers < 1:
            raise ValueError("need tokens_budget >= 0, max_steps >= 1, eval_every >= 1, pass_k >= 0 and workers >= 1")
        if self.stale_epochs < 1 or self.dart_workers < 1 or self.dart_max_staleness < 0:
            raise ValueError(
                f"need stale_epochs >= 1, dart_workers >= 1 and dart_max_staleness >= 0, got {self.stale_epochs}, "
                f"{self.dart_workers} and {self.dart_max_staleness}"
            )
        if self.dart_backend not in BACKENDS:
            raise ValueError(f"dart_backend must be one of {', '.join(BACKENDS)}, got {self.dart_backend!r}")

    def budget(self, testbed: str) -> int:
        """The generated-token budget of every run on ``testbed``."""
        return self.tokens_budget or TOKEN_BUDGETS[testbed]


def testbeds_of(methods: Sequence[str]) -> list[str]:
    """The testbeds ``methods`` need, in first-use order."""
    return list(dict.fromkeys(METHOD_TESTBEDS[m] for m in methods))


def units_of(args: Args) -> list[Unit]:
    """Every (testbed, arm, seed) unit: per testbed its references, its methods' own baselines, then its methods,
    seeds outermost within a testbed (a benchmark cut short still has whole comparisons on its first seeds)."""
    folder = Path(args.out) / "seed_methods"
    out: list[Unit] = []
    for bed in testbeds_of(args.methods):
        methods = [m for m in args.methods if METHOD_TESTBEDS[m] == bed]
        arms = [*REFERENCES, *(METHOD_BASELINES[m] for m in methods if m in METHOD_BASELINES), *methods]
        out += grid(list(dict.fromkeys(arms)), args.seeds, folder, group=bed)
    return out


# --- one run -------------------------------------------------------------------------------------------------------
def warm_start(bed: WarmStart, args: Args) -> tuple[WarmStart, Path]:
    """The testbed (SFT steps overridden for smoke runs) and its checkpoint, trained first if missing."""
    if args.sft_steps:
        bed = replace(bed, steps=args.sft_steps)
    path = Path(args.checkpoint_dir) / f"{bed.name}.pt" if args.checkpoint_dir else bed.checkpoint
    if not path.is_file():
        load_or_train(bed, path)
    return bed, path


def build_trainer(arm: str, bed: WarmStart, path: Path, args: Args, seed: int) -> GRPOTrainer:
    """The GRPO trainer of ``arm`` on ``bed``: G=8 everywhere, the method's controller, allocator or guidance added;
    ``bapo`` and ``clip_fixed`` with ``args.stale_epochs`` passes per batch, ``dart`` and ``dart_sync`` a
    :class:`DARTTrainer` (DART's 4-or-8 rollout counts in both)."""
    model, model_config, _ = load_model(path)
    vocab = CharVocab(model_config.alphabet)
    cfg = GRPOConfig(prompts_per_step=args.prompts_per_step, max_new_tokens=bed.max_new_tokens, lr=args.lr, seed=seed)
    pool = bed.eval_tasks(args.pool_per_bucket, seed=1)
    verifier = family_spec(bed.family).verify
    if arm in ("dart", "dart_sync"):
        dart = DARTConfig(
            max_staleness=args.dart_max_staleness,
            workers=args.dart_workers,
            backend=args.dart_backend,
            synchronous=arm == "dart_sync",
        )
        return DARTTrainer(model, vocab, pool, dart, cfg, reward_fn=verifier)
    allocator: Allocator = DynamicSampling(8, 3) if arm == "dapo" else Uniform(8)
    kwargs: dict[str, Any] = {}
    if arm in ("bapo", "clip_fixed"):
        # Stale data: every pass after the first trains on responses the current policy did not sample.
        cfg = replace(cfg, epochs=args.stale_epochs)
        if arm == "bapo":
            kwargs["clip_controller"] = BalancedClip()
    elif arm == "alp":
        kwargs["length_penalty"] = AdaptiveLengthPenalty(ALP_BETA, bed.max_new_tokens)
    elif arm == "hbpo":
        kwargs["guidance"] = make_guidance(HBPO_SPEC)
    elif arm in ("guide", "seele"):
        kwargs["guidance"] = make_guidance(SPECS[arm])
    elif arm == "e3":
        kwargs["temperature_controller"] = EntropyTemperature(E3_TARGET, len(vocab))
    elif arm == "dars_b":
        allocator = make_allocator(SPECS[arm])
        assert isinstance(allocator, DARSBreadth)
        cfg = breadth_config(cfg, allocator)
    elif arm in SPECS:
        token = make_token_controller(SPECS[arm])
        if isinstance(token, HAPO):
            kwargs["token_controller"] = token
        elif isinstance(token, EEPO):
            kwargs["eepo"] = token
        elif isinstance(token, BranchingRollout):
            kwargs["branching"] = token
    tool = CalculatorTool(vocab, 1) if bed.uses_tool else None
    return GRPOTrainer(model, vocab, pool, allocator, cfg, reward_fn=verifier, tool=tool, **kwargs)


def evaluate(trainer: GRPOTrainer, held_out: Sequence[Any]) -> dict[str, Any]:
    """Greedy held-out measures, overall and per difficulty bucket (``buckets[d]["accuracy"]``).

    Overall accuracy, tool calls, answer length and slow share are means over prompts; entropy is per token (each
    bucket weighted by its answer tokens), as :meth:`GRPOTrainer.evaluate_details` computes them on the whole set.
    """
    by: dict[int, list[Any]] = {}
    for t in held_out:
        by.setdefault(int(t.difficulty), []).append(t)
    buckets = {d: trainer.evaluate_details(tasks) for d, tasks in sorted(by.items())}
    n = {d: len(tasks) for d, tasks in by.items()}
    total = sum(n.values())
    out: dict[str, Any] = {
        key: sum(buckets[d][key] * n[d] for d in buckets) / total
        for key in ("accuracy", "tool_calls", "answer_length", "slow_share")
    }
    tokens = {d: buckets[d]["answer_length"] * n[d] for d in buckets}
    out["entropy"] = sum(buckets[d]["entropy"] * tokens[d] for d in buckets) / max(sum(tokens.values()), 1e-12)
    out["buckets"] = {str(d): {"accuracy": buckets[d]["accuracy"]} for d in buckets}
    return out


def sampled_pass(trainer: GRPOTrainer, bed: WarmStart, held_out: Sequence[Any], k: int, seed: int) -> dict[str, float]:
    """Sampled (T=1) pass@1 and pass@k of the trained policy on the held-out set, ``k`` responses per prompt."""
    resp = sample_responses(trainer.model, bed, held_out, k, seed=10_000 + seed)
    rows = resp.per_task(resp.correct)
    return {
        "pass@1": float(np.mean([pass_at_k(k, sum(r), 1) for r in rows])),
        f"pass@{k}": float(np.mean([pass_at_k(k, sum(r), k) for r in rows])),
    }


def update_stats(metrics: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How off-policy a run's updates were, from its steps' :meth:`GRPOTrainer.step` metrics.

    Returns:
        ``updates_per_generation`` (mean optimizer steps per generated batch), ``clip_fraction`` (mean share of
        learning tokens whose gradient the clip removed: 0 when every ratio is 1), ``ratio_min`` / ``ratio_max`` (the
        extremes over the run), ``ratio_spread_mean`` (mean per-step ``ratio_max − ratio_min``) and the range of the
        clip bounds of the steps' last optimizer steps (``clip_low_range``, ``clip_high_range``: one value each for
        fixed clipping).
    """
    if not metrics:
        return {}
    return {
        "updates_per_generation": float(np.mean([m["optimizer_steps"] for m in metrics])),
        "clip_fraction": float(np.mean([m["clip_fraction"] for m in metrics])),
        "ratio_min": float(min(m["ratio_min"] for m in metrics)),
        "ratio_max": float(max(m["ratio_max"] for m in metrics)),
        "ratio_spread_mean": float(np.mean([m["ratio_max"] - m["ratio_min"] for m in metrics])),
        "clip_low_range": [float(min(m["clip_low"] for m in metrics)), float(max(m["clip_low"] for m in metrics))],
        "clip_high_range": [float(min(m["clip_high"] for m in metrics)), float(max(m["clip_high"] for m in metrics))],
    }


def run_unit(unit: Unit, args: Args, log: Callable[[str], None] | None = print) -> dict[str, Any]:
    """Train ``unit.arm`` on testbed ``unit.group`` with seed ``unit.seed`` until the testbed's token budget (or
    ``args.max_steps``), evaluating every ``args.eval_every`` steps and at the end.

    Returns:
        :func:`experiments.rlvr.allocator_benchmark.run_record`'s dict plus ``testbed``, ``steps``, ``tokens_budget``,
        ``train_seconds`` (wall-clock seconds of the training steps alone, and for DART the drain of its workers before
        each evaluation), ``steps_per_second`` (steps over ``train_seconds``), ``updates`` (:func:`update_stats`),
        ``final`` (pass@1 and pass@k sampled at the end) and ``args``; each curve point holds :func:`evaluate`'s
        measures and the cumulative costs (``training_tool_calls`` among them).
    """
    set_torch_threads()  # also in a worker process
    bed, path = warm_start(find_testbed(unit.group), args)
    seed_everything(unit.seed)
    trainer = build_trainer(unit.arm, bed, path, args, unit.seed)
    held_out = bed.eval_tasks(args.held_out_per_bucket, seed=10_000)
    budget = args.budget(bed.name)
    start = time.perf_counter()
    calls = 0  # calculator calls executed in training rollouts (ARPO's budget), not in evaluations
    train_seconds = 0.0
    metrics: list[dict[str, Any]] = []

    def point() -> dict[str, Any]:
        return {
            "step": trainer.num_steps,
            **evaluate(trainer, held_out),
            **trainer.costs.as_dict(),
            "training_tool_calls": calls,
        }

    def train_step() -> None:
        metrics.append(trainer.step())

    try:
        curve = [point()]
        while trainer.costs.completion_tokens < budget and trainer.num_steps < args.max_steps:
            tick = time.perf_counter()
            calls += training_tool_calls(trainer.tool, train_step)
            done = trainer.costs.completion_tokens >= budget or trainer.num_steps >= args.max_steps
            evaluating = trainer.num_steps % args.eval_every == 0 or done
            if evaluating and isinstance(trainer, DARTTrainer):
                trainer.drain()  # the workers stop before the evaluation, so none of their sampling overlaps it
            train_seconds += time.perf_counter() - tick
            if evaluating:
                curve.append(point())
                if log is not None:
                    last = curve[-1]
                    log(
                        f"{unit.label} step {last['step']}: acc {last['accuracy']:.3f} "
                        f"tokens {last['completion_tokens']}"
                    )
    finally:
        if isinstance(trainer, DARTTrainer):
            trainer.close()  # stops its workers (and the Ray instance it started)
    costs = {**trainer.costs.as_dict(), "training_tool_calls": calls}
    record = run_record(unit.arm, unit.seed, curve, costs, time.perf_counter() - start, trainer.allocator)
    final = sampled_pass(trainer, bed, held_out, args.pass_k, unit.seed) if args.pass_k else {}
    out = {
        **record,
        "testbed": bed.name,
        "steps": trainer.num_steps,
        "tokens_budget": budget,
        "train_seconds": train_seconds,
        "steps_per_second": trainer.num_steps / train_seconds if train_seconds > 0 else None,
        "updates": update_stats(metrics),
        "final": final,
        "args": asdict(args),
    }
    if isinstance(trainer, DARTTrainer):
        out["async"] = {
            "idle_seconds": trainer.idle_seconds,
            "step_seconds": trainer.step_seconds,
            "mean_staleness": float(np.mean([m["async/mean_staleness"] for m in metrics])) if metrics else 0.0,
            "stale_groups": trainer.stale_groups,
            "corrected_responses": trainer.corrected_responses,
        }
    return out


# --- the summary ---------------------------------------------------------------------------------------------------
def final_value(run: dict[str, Any], key: str) -> float:
    """``key`` at the end of a run: the mean of its last :data:`FINAL_WINDOW` evaluations."""
    return float(np.mean([p[key] for p in run["curve"][-FINAL_WINDOW:]]))


def hard_accuracy(run: dict[str, Any]) -> float:
    """Final accuracy on the hardest difficulty bucket (mean of the last :data:`FINAL_WINDOW` evaluations)."""
    hardest = max(run["curve"][0]["buckets"], key=int)
    return float(np.mean([p["buckets"][hardest]["accuracy"] for p in run["curve"][-FINAL_WINDOW:]]))


def entropy_retention(run: dict[str, Any]) -> float:
    """Final held-out entropy over the initial (step 0) one (1: kept; NaN when the initial one is 0)."""
    initial = run["curve"][0]["entropy"]
    return final_value(run, "entropy") / initial if initial > 0 else math.nan


def _ci_above(measure: dict[str, Any], bound: float) -> bool:
    low = measure["ci"][0]
    return low is not None and low > bound


def _ci_below(measure: dict[str, Any], bound: float) -> bool:
    high = measure["ci"][1]
    return high is not None and high < bound


def headline_met(arm: str, m: dict[str, dict[str, Any]]) -> bool:
    """Whether the measures ``m`` of ``arm`` show its :data:`HEADLINES` direction with an interval excluding no
    effect."""
    acc = m["accuracy_delta"]
    if arm in ("alp", "ehpo", "hbpo"):
        shorter = m["length_ratio"]["value"] is not None and m["length_ratio"]["value"] <= CUT
        kept = acc["value"] >= -ONE_POINT if arm != "hbpo" else acc["ci"][1] >= 0.0
        return shorter and _ci_below(m["length_ratio"], 1.0) and kept
    if arm == "arpo":
        calls = m["tool_calls_ratio"]
        return calls["value"] is not None and calls["value"] <= HALF and _ci_below(calls, 1.0) and acc["ci"][1] >= 0
    if arm in ("hapo", "eepo"):
        return _ci_above(acc, 0.0) and _ci_above(m["entropy_retention_ratio"], 1.0)
    if arm == "dars_b":
        return "pass_k_delta" in m and _ci_above(m["pass_k_delta"], 0.0) and _ci_above(m["pass_1_delta"], 0.0)
    if arm in ("guide", "seele"):
        return _ci_above(m["hard_accuracy_delta"], 0.0)
    if arm == "e3":
        return _ci_above(m["entropy_retention_ratio"], 1.0)
    if arm == "bapo":
        return _ci_above(acc, 0.0) and _ci_above(m["entropy_retention_ratio"], 1.0)
    if arm == "dart":
        return "steps_per_second_ratio" in m and _ci_above(m["steps_per_second_ratio"], 1.0) and acc["ci"][1] >= 0
    raise ValueError(f"no headline for arm {arm!r}")


def _interval(measure: dict[str, Any]) -> dict[str, Any]:
    return {"value": measure["value"], "ci": list(measure["ci"])}


def measures(rs: Sequence[dict[str, Any]], base: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Paired (by seed) measures of runs ``rs`` against the baseline runs ``base`` (same seeds, same order):
    differences of final accuracy, hardest-bucket accuracy, answer length (tokens), sampled pass@1 and pass@k, and
    ratios of answer length, tool calls per answer, entropy retention, generated tokens and (where every record has
    it) training steps per second, each with its 95% seed-bootstrap interval."""
    out = {
        "accuracy_delta": paired_delta(
            [final_value(r, "accuracy") for r in rs], [final_value(r, "accuracy") for r in base]
        ),
        "hard_accuracy_delta": paired_delta([hard_accuracy(r) for r in rs], [hard_accuracy(r) for r in base]),
        "answer_length_delta": paired_delta(
            [final_value(r, "answer_length") for r in rs], [final_value(r, "answer_length") for r in base]
        ),
        "length_ratio": cost_ratio(
            [final_value(r, "answer_length") for r in rs], [final_value(r, "answer_length") for r in base]
        ),
        "tool_calls_ratio": cost_ratio(
            [final_value(r, "tool_calls") for r in rs], [final_value(r, "tool_calls") for r in base]
        ),
        "entropy_retention_ratio": cost_ratio([entropy_retention(r) for r in rs], [entropy_retention(r) for r in base]),
        "training_tool_calls_ratio": cost_ratio(
            [float(r["costs"]["training_tool_calls"]) for r in rs],
            [float(r["costs"]["training_tool_calls"]) for r in base],
        ),
        "total_tokens_ratio": cost_ratio(
            [float(r["costs"]["completion_tokens"]) for r in rs],
            [float(r["costs"]["completion_tokens"]) for r in base],
        ),
    }
    if all(r.get("steps_per_second") for r in [*rs, *base]):  # records before train_seconds existed have none
        out["steps_per_second_ratio"] = cost_ratio(
            [float(r["steps_per_second"]) for r in rs], [float(r["steps_per_second"]) for r in base]
        )
    finals = [r.get("final", {}) for r in [*rs, *base]]
    k_keys = [k for k in finals[0] if k.startswith("pass@") and k != "pass@1"] if finals[0] else []
    if k_keys and all(k_keys[0] in f for f in finals):
        key = k_keys[0]
        out["pass_1_delta"] = paired_delta([r["final"]["pass@1"] for r in rs], [r["final"]["pass@1"] for r in base])
        out["pass_k_delta"] = paired_delta([r["final"][key] for r in rs], [r["final"][key] for r in base])
        out["pass_k_delta"]["k"] = int(key.removeprefix("pass@"))
    return {
        name: {"value": m["value"], "ci": list(m["ci"]), **{k: v for k, v in m.items() if k == "k"}}
        for name, m in out.items()
    }


#: The measure each headline is read from first (the one quoted as the method's headline number).
HEADLINE_MEASURE: dict[str, str] = {
    "alp": "length_ratio",
    "ehpo": "length_ratio",
    "hbpo": "length_ratio",
    "arpo": "tool_calls_ratio",
    "hapo": "entropy_retention_ratio",
    "eepo": "entropy_retention_ratio",
    "dars_b": "pass_k_delta",
    "guide": "hard_accuracy_delta",
    "seele": "hard_accuracy_delta",
    "e3": "entropy_retention_ratio",
    "bapo": "accuracy_delta",
    "dart": "steps_per_second_ratio",
}


def mean_update_stats(rs: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Seed means of the runs' :func:`update_stats` (``None`` for records that have none)."""
    stats: list[dict[str, Any]] = [r.get("updates") or {} for r in rs]
    if not all(stats):
        return None
    keys = ("updates_per_generation", "clip_fraction", "ratio_min", "ratio_max", "ratio_spread_mean")
    out: dict[str, Any] = {k: float(np.mean([st[k] for st in stats])) for k in keys}
    for k in ("clip_low_range", "clip_high_range"):
        out[k] = [min(st[k][0] for st in stats), max(st[k][1] for st in stats)]
    return out


def summarize(runs: Sequence[dict[str, Any]], seeds: Sequence[int], gates: dict[str, Any]) -> dict[str, Any]:
    """Every method whose testbed has all seeds of itself and of its baseline (uniform, or its
    :data:`METHOD_BASELINES` arm): its measures against that baseline (:func:`measures`), its accuracy against dynamic
    sampling, its headline verdict, its gate's numbers and, for both arms, how off-policy the updates were.

    Args:
        runs: Unit records (any testbeds and arms).
        seeds: The seeds a comparison must have.
        gates: ``headroom.json``'s ``methods`` (verdict and conditions per gate name).
    """
    by = {(r["testbed"], r["arm"], r["seed"]): r for r in runs}
    budgets: dict[str, list[int]] = {}
    for r in runs:
        budgets.setdefault(r["testbed"], []).append(int(r["tokens_budget"]))
    for bed, values in budgets.items():
        if len(set(values)) > 1:
            raise ValueError(
                f"testbed {bed} has records at token budgets {sorted(set(values))}: the arms of a comparison share "
                "one budget (move the other records away or rerun them with one --tokens-budget)"
            )

    def complete(bed: str, arm: str) -> list[dict[str, Any]] | None:
        rs = [by.get((bed, arm, s)) for s in seeds]
        return None if any(r is None for r in rs) else rs  # type: ignore[return-value]

    methods: dict[str, Any] = {}
    references: dict[str, Any] = {}
    starts: dict[str, Any] = {}
    for bed in dict.fromkeys(r["testbed"] for r in runs):
        base = complete(bed, BASELINE)
        if base is None:
            continue
        # The warm start's greedy held-out measures (the step-0 evaluation, the same in every run of the testbed).
        starts[bed] = {k: base[0]["curve"][0][k] for k in ("accuracy", "answer_length", "tool_calls", "entropy")}
        references[bed] = {
            arm: {
                "final_accuracy": [final_value(r, "accuracy") for r in rs],
                "final_accuracy_mean": float(np.mean([final_value(r, "accuracy") for r in rs])),
                "answer_length": [final_value(r, "answer_length") for r in rs],
                "answer_length_mean": float(np.mean([final_value(r, "answer_length") for r in rs])),
                "tool_calls": [final_value(r, "tool_calls") for r in rs],
                "hard_accuracy": [hard_accuracy(r) for r in rs],
                "entropy_retention": [entropy_retention(r) for r in rs],
                "tokens": float(np.mean([r["costs"]["completion_tokens"] for r in rs])),
                "steps": float(np.mean([r["steps"] for r in rs])),
                "seconds": float(np.mean([r["seconds"] for r in rs])),
                **({"vs_uniform": measures(rs, base)} if arm != BASELINE else {}),
            }
            for arm in (*REFERENCES, *METHOD_BASELINES.values())
            if (rs := complete(bed, arm)) is not None
        }
        dapo = complete(bed, "dapo")
        for arm, testbed in METHOD_TESTBEDS.items():
            rs = complete(bed, arm) if testbed == bed else None
            baseline = METHOD_BASELINES.get(arm, BASELINE)
            against = complete(bed, baseline)
            if rs is None or against is None:
                continue
            m = measures(rs, against)
            entry: dict[str, Any] = {
                "testbed": bed,
                "baseline": baseline,
                "headline": HEADLINES[arm],
                "headline_measure": {"name": HEADLINE_MEASURE[arm], **_interval(m[HEADLINE_MEASURE[arm]])},
                "headline_met": headline_met(arm, m),
                "measures": m,
                "final_accuracy": [final_value(r, "accuracy") for r in rs],
                "final_accuracy_mean": float(np.mean([final_value(r, "accuracy") for r in rs])),
                "answer_length": [final_value(r, "answer_length") for r in rs],
                "answer_length_mean": float(np.mean([final_value(r, "answer_length") for r in rs])),
                "tokens": float(np.mean([r["costs"]["completion_tokens"] for r in rs])),
                "steps": float(np.mean([r["steps"] for r in rs])),
                "seconds": float(np.mean([r["seconds"] for r in rs])),
                "gate": gates.get(GATE_NAMES[arm]) if arm in GATE_NAMES else None,
                "updates": {arm: mean_update_stats(rs), baseline: mean_update_stats(against)},
            }
            if dapo is not None:
                entry["accuracy_delta_vs_dapo"] = _interval(
                    paired_delta([final_value(r, "accuracy") for r in rs], [final_value(r, "accuracy") for r in dapo])
                )
            methods[arm] = entry
    return {
        "seeds": list(seeds),
        "token_budgets": {bed: values[0] for bed, values in budgets.items()},
        "warm_starts": starts,
        "references": references,
        "methods": methods,
    }


def _fmt(m: dict[str, Any], signed: bool = False) -> str:
    def f(x: float | None) -> str:
        return "—" if x is None else (f"{x:+.3f}" if signed else f"{x:.3f}")

    return f"{f(m['value'])} [{f(m['ci'][0])}, {f(m['ci'][1])}]"


def table(summary: dict[str, Any]) -> str:
    """One markdown line per method: testbed, baseline, headline measure with its interval, accuracy against the
    baseline and dapo, length ratio, the verdict and the gate's number."""
    lines = [
        "| method | testbed | baseline | headline measure | accuracy − baseline | accuracy − dapo | length ratio "
        "| headline | gate |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for arm, e in summary["methods"].items():
        h = e["headline_measure"]
        gate = e["gate"] or {}
        conds = "; ".join(f"{c['statistic']} {c['value']:.3f}" for c in gate.get("conditions", []))
        vs_dapo = _fmt(e["accuracy_delta_vs_dapo"], True) if "accuracy_delta_vs_dapo" in e else "—"
        gate_text = f"{gate['verdict']} ({conds})" if gate else "—"
        headline = f"{h['name']} {_fmt(h, h['name'].endswith('delta'))}"
        lines.append(
            f"| {arm} | {e['testbed']} | {e.get('baseline', BASELINE)} | {headline} "
            f"| {_fmt(e['measures']['accuracy_delta'], True)} | {vs_dapo} | {_fmt(e['measures']['length_ratio'])} "
            f"| {'met' if e['headline_met'] else 'missed'} | {gate_text} |"
        )
    return "\n".join(lines) + "\n"


def read_gates(path: str | Path) -> dict[str, Any]:
    """``methods`` of the gate's JSON (empty when it is missing)."""
    p = Path(path)
    return dict(json.loads(p.read_text())["methods"]) if p.is_file() else {}


def main(args: Args) -> dict[str, Any]:
    set_torch_threads()
    out = Path(args.out)
    (out / "seed_methods").mkdir(parents=True, exist_ok=True)
    if not args.summarize_only:
        for name in testbeds_of(args.methods):
            warm_start(find_testbed(name), args)  # once, before any unit, so units never race to train it
        run_sweep(
            units_of(args),
            functools.partial(run_unit, args=args),  # picklable, for worker processes
            workers=args.workers,
            describe=lambda u, r: f"{u.label}: {r['steps']} steps, {r['seconds']:.0f}s",
        )
    # Every record on disk, not only this call's methods: runs of other methods made earlier stay in the summary.
    records = [read_record(p) for p in sorted((out / "seed_methods").glob("*.json"))]
    summary = summarize(records, args.seeds, read_gates(args.headroom))
    summary["command"] = "OMP_NUM_THREADS=1 python " + shlex.join(sys.argv)
    summary["args"] = asdict(args)
    summary = json_nulls(summary)
    atomic_write_json(out / "seed_methods.json", summary)
    text = table(summary)
    (out / "seed_methods.md").write_text(text)
    print(text)
    return summary


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
