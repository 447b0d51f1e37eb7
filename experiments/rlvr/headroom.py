"""Headroom gate of the RLVR methods: does the statistic each method acts on exist in its testbed's warm start?

Run from the repository root (one thread, low priority, resumable; on a shared two-core machine at ``nice -n 10``
about 17-21 minutes per testbed, most of it the warm start's fit):

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python experiments/rlvr/headroom.py

A method cannot be judged on a task where its lever does nothing, so before any benchmark each method's statistic is
measured on the warm start of its testbed (``experiments/rlvr/testbeds.py``; trained first if its checkpoint under
``runs/rlvr/testbeds/`` is missing) and compared with a threshold:

========================  =========  ===================================================================  ==========
method                    testbed    statistic                                                            threshold
========================  =========  ===================================================================  ==========
ARPO                      toolmix    tool-call rate on prompts that need no tool (share of responses      >= 0.3
                                     with a calculator call)
HBPO, ALP, EHPO           carry      length headroom: share of correct-response tokens above each         >= 0.3
                                     prompt's shortest correct response (:func:`length_headroom`)
EEPO, DARS-B, HAPO        countdown  pass@16 − pass@1 (unbiased estimates from ``samples`` responses)     >= 0.2
SEELE, Guide              countdown  hinted accuracy of the best bucket whose pass@16 is below 0.1        > 0.3
                                     (0 when no bucket is that hard), over the hint fractions tried
BAPO                      countdown  clip fraction of the off-policy setting (``minibatches × epochs``    >= 0.05
                                     optimizer steps per generated batch; on-policy it is 0)
E3                        countdown  mean token entropy at T = 1 (nats) and its gain at T = 2             >= 0.1, 1.5
========================  =========  ===================================================================  ==========

Each warm start is one unit: its record (every statistic above that its testbed feeds, per difficulty bucket too) is
written to ``results/headroom_parts/<testbed>__0.json`` the moment it is measured, so a killed gate resumes there.
``results/headroom.json`` holds the records, the definitions and one PASS/FAIL per method with its number. An
undefined statistic (the length headroom of a bucket without a correct answer) is written as ``null``. A failed
gate is a property of the testbed, to be fixed there (never in the method), and stays reported as a fail.
"""

from __future__ import annotations

import copy
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from envs.reasoning.registry import family_spec
from envs.reasoning.tooluse import needs_tool
from experiments.rlvr.testbeds import TESTBEDS, WarmStart, find_testbed, load_or_train, sample_responses
from experiments.sweep import Unit, grid, run_sweep
from meta.rlvr import Uniform
from meta.rlvr.guidance.guide import hint_length
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.token.ehpo import response_mode
from meta.rlvr.trainers.dars_breadth import pass_at_k
from meta.rlvr.trainers.grpo import GRPOTrainer
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.tools import CalculatorTool
from rolloutlab.checkpoint import atomic_write_json, json_nulls
from rolloutlab.threads import set_torch_threads

COMMAND = "OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python experiments/rlvr/headroom.py"


@dataclass(frozen=True)
class Gate:
    """One condition of a method's gate: ``record[statistic] <op> threshold`` on ``testbed``'s record."""

    testbed: str
    statistic: str
    op: str
    threshold: float


#: Every method's gate: all its conditions must hold.
GATES: dict[str, tuple[Gate, ...]] = {
    "ARPO": (Gate("toolmix", "tool_call_rate_no_tool", ">=", 0.3),),
    **{m: (Gate("carry", "length_headroom", ">=", 0.3),) for m in ("HBPO", "ALP", "EHPO")},
    **{m: (Gate("countdown", "pass_gap", ">=", 0.2),) for m in ("EEPO", "DARS-B", "HAPO")},
    **{m: (Gate("countdown", "hint_lift", ">", 0.3),) for m in ("SEELE", "Guide")},
    "BAPO": (Gate("countdown", "off_policy_clip_fraction", ">=", 0.05),),
    "E3": (Gate("countdown", "entropy", ">=", 0.1), Gate("countdown", "entropy_gain_t2", ">=", 1.5)),
}

#: What each statistic is, for the JSON (the docstring's table in words).
DEFINITIONS: dict[str, str] = {
    "tool_call_rate_no_tool": "share of sampled responses (T=1) to prompts that need no calculator that call it",
    "length_headroom": "sum over prompts and correct responses of (length - the prompt's shortest correct length), "
    "over the sum of correct lengths (sampled tokens, T=1): the token share a shortest-correct policy would save",
    "pass_gap": "pass@k - pass@1, unbiased estimates from `samples` responses per prompt (T=1)",
    "hint_lift": "hinted accuracy (T=1) of the best (bucket, hint fraction) among buckets whose unhinted pass@k is "
    "below `hard_pass_k`; the hint is the first ceil(fraction * |reference|) characters of the reference derivation",
    "off_policy_clip_fraction": "share of learning tokens whose ratio the clip removed, in uniform GRPO G=8 steps "
    "with `bapo_minibatches` x `bapo_epochs` optimizer steps per generated batch",
    "entropy": "mean next-token entropy (nats) of responses sampled at T=1",
    "entropy_gain_t2": "mean token entropy at T=2 (E3's upper clamp) over that at T=1",
}


@dataclass
class Args:
    testbeds: list[str] = field(default_factory=lambda: list(TESTBEDS))
    """Testbeds to measure (every method whose gate reads one of them is judged)."""
    per_bucket: int = 64
    """Held-out prompts per difficulty bucket."""
    samples: int = 32
    """Responses per prompt (the n of the pass@k estimates; at least ``k``)."""
    k: int = 16
    """The k of pass@k."""
    hint_fractions: list[float] = field(default_factory=lambda: [0.25, 0.5, 0.75])
    """Hint lengths tried on the hard buckets, as fractions of the reference derivation."""
    hint_samples: int = 8
    """Responses per prompt and hint fraction."""
    hard_pass_k: float = 0.1
    """A bucket is unsolved when its pass@k is below this."""
    bapo_minibatches: int = 4
    """Optimizer steps per pass over a generated batch in the off-policy measurement."""
    bapo_epochs: int = 4
    """Passes over each generated batch in the off-policy measurement."""
    bapo_steps: int = 2
    """GRPO steps (generated batches) per setting of the clip measurement."""
    sft_steps: int = 0
    """Override every testbed's SFT steps (0: the testbed's own; for smoke runs)."""
    checkpoint_dir: str = ""
    """Where warm starts are loaded from or saved to (empty: ``runs/rlvr/testbeds``)."""
    out: str = str(Path(__file__).parent / "results")
    """Folder of ``headroom.json`` and ``headroom_parts/``."""
    seed: int = 0
    """Seed of the held-out prompts and of the sampling."""

    def __post_init__(self) -> None:
        for name in self.testbeds:
            find_testbed(name)
        if not 1 <= self.k <= self.samples:
            raise ValueError(f"need 1 <= k <= samples, got k={self.k}, samples={self.samples}")
        if self.per_bucket < 1 or self.hint_samples < 1 or self.bapo_steps < 1:
            raise ValueError("per_bucket, hint_samples and bapo_steps must be >= 1")


# --- the gate statistics -------------------------------------------------------------------------------------------
def pass_gap(correct: Sequence[Sequence[int]], k: int) -> dict[str, float]:
    """Mean unbiased pass@1 and pass@k over prompts (one 0/1 list per prompt, all of the same length ``n >= k``).

    Returns:
        ``{"pass@1", "pass@k", "gap"}``.
    """
    if not correct:
        return {"pass@1": math.nan, "pass@k": math.nan, "gap": math.nan}
    n = len(correct[0])
    p1 = float(np.mean([pass_at_k(n, int(sum(c)), 1) for c in correct]))
    pk = float(np.mean([pass_at_k(n, int(sum(c)), k) for c in correct]))
    return {"pass@1": p1, "pass@k": pk, "gap": pk - p1}


def length_headroom(lengths: Sequence[Sequence[int]], correct: Sequence[Sequence[int]]) -> float:
    """Share of correct-response tokens above each prompt's shortest correct response.

    ``Σ_p Σ_{i correct} (ℓ_i − min_p) / Σ_p Σ_{i correct} ℓ_i`` over prompts with a correct response, ``min_p`` the
    prompt's shortest correct length: the token saving of a policy that always gave the shortest correct answer it
    already gives, at its current accuracy. 0 when every correct answer of a prompt has one length; NaN without a
    correct response.
    """
    excess, total = 0, 0
    for lens, oks in zip(lengths, correct, strict=True):
        good = [ell for ell, ok in zip(lens, oks, strict=True) if ok]
        if good:
            excess += sum(good) - min(good) * len(good)
            total += sum(good)
    return excess / total if total else math.nan


def tool_call_rate(calls: Sequence[Sequence[int]], needed: Sequence[bool]) -> dict[str, float]:
    """Share of responses with at least one calculator call, on prompts that need no tool and on those that do."""

    def rate(flag: bool) -> float:
        rows = [c for c, need in zip(calls, needed, strict=True) if need == flag]
        return float(np.mean([x > 0 for r in rows for x in r])) if rows else math.nan

    return {"no_tool": rate(False), "tool": rate(True)}


def hint_lift(buckets: dict[str, dict[str, Any]], hard_pass_k: float) -> dict[str, Any]:
    """The best hinted accuracy among buckets whose unhinted ``pass@k`` is below ``hard_pass_k``.

    Args:
        buckets: Per bucket, ``{"pass@k": float, "hinted": {fraction: accuracy}}`` (``hinted`` may be empty).
        hard_pass_k: The unsolved threshold.

    Returns:
        ``{"value", "bucket", "fraction"}``: value 0.0 and ``None``s when no bucket is that hard.
    """
    best: dict[str, Any] = {"value": 0.0, "bucket": None, "fraction": None}
    for name, stats in buckets.items():
        if stats["pass@k"] is None or not stats["pass@k"] < hard_pass_k:  # None: an empty bucket, read back
            continue
        for fraction, acc in sorted(stats.get("hinted", {}).items(), key=lambda kv: float(kv[0])):
            if acc > best["value"]:
                best = {"value": float(acc), "bucket": name, "fraction": float(fraction)}
    return best


def judge(value: float, op: str, threshold: float) -> bool:
    """``value <op> threshold`` for ``op`` in ``>=``, ``>``; NaN never passes."""
    if op not in (">=", ">"):
        raise ValueError(f"unknown gate comparison {op!r}; known: >=, >")
    if math.isnan(value):
        return False
    return value >= threshold if op == ">=" else value > threshold


# --- one warm start ------------------------------------------------------------------------------------------------
def needed_statistics(name: str) -> set[str]:
    """The statistics some gate reads from testbed ``name``."""
    return {g.statistic for gates in GATES.values() for g in gates if g.testbed == name}


def clip_fractions(model: Any, bed: WarmStart, args: Args) -> dict[str, float]:
    """Mean clip fraction of ``args.bapo_steps`` uniform GRPO G=8 steps, on-policy (one optimizer step per batch) and
    off-policy (``bapo_minibatches × bapo_epochs``), each from a copy of the warm start."""
    spec = family_spec(bed.family)
    pool = spec.tasks(64, args.seed + 7, bed.eval_difficulties)
    vocab = CharVocab(bed.model.alphabet)
    out = {}
    for label, minibatches, epochs in (("on_policy", 1, 1), ("off_policy", args.bapo_minibatches, args.bapo_epochs)):
        cfg = GRPOConfig(
            prompts_per_step=8,
            max_new_tokens=bed.max_new_tokens,
            minibatches=minibatches,
            epochs=epochs,
            lr=1e-4,
            seed=args.seed,
        )
        trainer = GRPOTrainer(
            copy.deepcopy(model),
            vocab,
            pool,
            Uniform(8),
            cfg,
            reward_fn=spec.verify,
            tool=CalculatorTool(vocab, 1) if bed.uses_tool else None,
        )
        out[label] = float(np.mean([trainer.step()["clip_fraction"] for _ in range(args.bapo_steps)]))
    return out


def measure(bed: WarmStart, args: Args) -> dict[str, Any]:
    """Train or load ``bed``'s warm start and measure every statistic its gates read, overall and per bucket."""
    if args.sft_steps:
        bed = replace(bed, steps=args.sft_steps)
    path = (Path(args.checkpoint_dir) / f"{bed.name}.pt") if args.checkpoint_dir else bed.checkpoint
    start = time.perf_counter()
    model, sft_info = load_or_train(bed, path)
    wanted = needed_statistics(bed.name)
    tasks = bed.eval_tasks(args.per_bucket, args.seed + 10_000)
    resp = sample_responses(model, bed, tasks, args.samples, seed=args.seed)
    correct, lengths, calls = resp.per_task(resp.correct), resp.per_task(resp.lengths), resp.per_task(resp.calls)
    record: dict[str, Any] = {
        "testbed": bed.name,
        "family": bed.family,
        "checkpoint": str(path),
        "sft": {"final_loss": sft_info.get("final_loss"), "seconds": sft_info.get("seconds")},
        "settings": asdict(bed),
        "entropy": resp.entropy,
        "mean_length": float(np.mean(resp.lengths)),
        "buckets": {},
    }
    gap = pass_gap(correct, args.k)
    record.update({"pass@1": gap["pass@1"], f"pass@{args.k}": gap["pass@k"], "pass_gap": gap["gap"]})
    record["length_headroom"] = length_headroom(lengths, correct)
    # ADR/EHPO's modes: fast answers at once, slow writes steps or calls first.
    fast = [response_mode(t) == "fast" for t, ok in zip(resp.texts, resp.correct, strict=True) if ok]
    record["fast_share_of_correct"] = float(np.mean(fast)) if fast else math.nan
    for d in bed.eval_difficulties:
        rows = [i for i, t in enumerate(tasks) if t.difficulty == d]
        g = pass_gap([correct[i] for i in rows], args.k)
        record["buckets"][str(d)] = {
            "pass@1": g["pass@1"],
            "pass@k": g["pass@k"],
            "length_headroom": length_headroom([lengths[i] for i in rows], [correct[i] for i in rows]),
            "mean_length": float(np.mean([x for i in rows for x in lengths[i]])) if rows else math.nan,
            "hinted": {},
        }
    if bed.uses_tool:
        rates = tool_call_rate(calls, [needs_tool(t) for t in tasks])
        record["tool_call_rate_no_tool"], record["tool_call_rate_tool"] = rates["no_tool"], rates["tool"]
        for flag, key in ((False, "no_tool"), (True, "tool")):
            rows = [i for i, t in enumerate(tasks) if needs_tool(t) == flag]
            record[f"pass@1_{key}"] = pass_gap([correct[i] for i in rows], args.k)["pass@1"]
    if "hint_lift" in wanted:
        for d in bed.eval_difficulties:
            bucket = record["buckets"][str(d)]
            if not bucket["pass@k"] < args.hard_pass_k:
                continue
            hard = [t for t in tasks if t.difficulty == d]
            for f in args.hint_fractions:
                hints = [t.answer[: hint_length(len(t.answer), f)] for t in hard]
                hinted = sample_responses(model, bed, hard, args.hint_samples, hints=hints, seed=args.seed + 1)
                bucket["hinted"][str(f)] = float(np.mean(hinted.correct))
        record["hint_lift_detail"] = hint_lift(record["buckets"], args.hard_pass_k)
        record["hint_lift"] = record["hint_lift_detail"]["value"]
    if "entropy_gain_t2" in wanted:
        hot = sample_responses(model, bed, tasks, 4, temperature=2.0, seed=args.seed + 2)
        record["entropy_t2"] = hot.entropy
        record["entropy_gain_t2"] = hot.entropy / resp.entropy if resp.entropy > 0 else math.nan
    if "off_policy_clip_fraction" in wanted:
        fractions = clip_fractions(model, bed, args)
        record["on_policy_clip_fraction"] = fractions["on_policy"]
        record["off_policy_clip_fraction"] = fractions["off_policy"]
    record["seconds"] = time.perf_counter() - start
    return record


# --- the gate ------------------------------------------------------------------------------------------------------
def verdicts(records: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """PASS/FAIL per method whose testbeds were all measured, with each condition's number."""
    out: dict[str, dict[str, Any]] = {}
    for method, gates in GATES.items():
        if any(g.testbed not in records for g in gates):
            continue
        conditions = []
        for g in gates:
            raw = records[g.testbed].get(g.statistic)
            value = math.nan if raw is None else float(raw)  # undefined statistics are written as null
            conditions.append(
                {
                    "testbed": g.testbed,
                    "statistic": g.statistic,
                    "value": value,
                    "op": g.op,
                    "threshold": g.threshold,
                    "pass": judge(value, g.op, g.threshold),
                }
            )
        out[method] = {"verdict": "PASS" if all(c["pass"] for c in conditions) else "FAIL", "conditions": conditions}
    return out


def table(methods: dict[str, dict[str, Any]]) -> str:
    """One line per method: verdict, testbed and each condition's number against its threshold."""
    lines = []
    for method, v in methods.items():
        conds = "; ".join(
            f"{c['testbed']}.{c['statistic']} = {c['value']:.3f} ({c['op']} {c['threshold']})" for c in v["conditions"]
        )
        lines.append(f"{method:7s} {v['verdict']}  {conds}")
    return "\n".join(lines)


def main(args: Args) -> dict[str, Any]:
    set_torch_threads()
    out = Path(args.out)
    parts = out / "headroom_parts"
    parts.mkdir(parents=True, exist_ok=True)

    def run(unit: Unit) -> dict[str, Any]:
        record = measure(find_testbed(unit.arm), args)
        record["args"] = asdict(args)
        return dict(json_nulls(record))  # an undefined statistic (NaN) is written as null

    units = grid(args.testbeds, [args.seed], parts)
    records = {
        u.arm: r for u, r in run_sweep(units, run, describe=lambda u, r: f"{u.label}: {r['seconds']:.0f}s").items()
    }
    methods = verdicts(records)
    summary = {
        "command": COMMAND,
        "args": asdict(args),
        "definitions": DEFINITIONS,
        "methods": methods,
        "testbeds": records,
    }
    atomic_write_json(out / "headroom.json", json_nulls(summary))
    print(table(methods))
    return summary


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
