"""The token-level benchmark (``experiments/rlvr/token_level.py``).

It trains the :data:`TOKEN_ARMS` (uniform G=8 and the HAPO, EEPO, ARPO, EHPO controllers on the ``calc`` tool-use
family) to the same generated-tokens budget with :func:`run_token_arm` and summarizes them with
:func:`token_level_summary` (paired ratios to uniform G=8 of tokens to target, tool calls, answer length and entropy
retention, each method's headline) and :func:`token_level_table`."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from experiments.rlvr.allocator_benchmark import (
    BASELINE,
    FINAL_WINDOW,
    cost_ratio,
    final_accuracy,
    first_reaching,
    fmt,
    paired_delta,
    run_record,
)
from meta.rlvr.lm.charlm import load_model
from meta.rlvr.trainers.run import GRPORun, GRPORunConfig

#: Issue 21's arms: uniform GRPO G=8 and the four token-level controllers (``--token-controller`` specs, their
#: defaults), every one on the same uniform G=8 allocator, so each group has the same response budget.
TOKEN_ARMS: dict[str, str] = {
    "uniform_g8": "",
    "hapo": "hapo:0.2,1",
    "eepo": "eepo:0.001",
    "arpo": "arpo:0.5,1",
    "ehpo": "ehpo:1,0.1",
}
#: "About half" in the issue's headlines (ARPO's tool calls, ADR's answer length): a ratio to uniform at most this.
HALF = 0.6
#: Entropy collapse: a run whose final held-out entropy is below this share of its initial entropy collapsed.
COLLAPSE = 0.5
#: Each method's headline direction (the issue's), as :func:`token_level_summary` tests it.
HEADLINES: dict[str, str] = {
    "arpo": f"accuracy not below uniform's (delta CI reaches 0) with tool_calls_ratio <= {HALF} and its CI < 1",
    "ehpo": f"accuracy not below uniform's (delta CI reaches 0) with length_ratio <= {HALF} and its CI < 1",
    "hapo": f"entropy_retention_ratio CI > 1 (entropy kept up more than uniform's), mean retention >= {COLLAPSE}",
    "eepo": f"entropy_retention_ratio CI > 1 (entropy kept up more than uniform's), mean retention >= {COLLAPSE}",
}


def run_token_arm(
    arm: str,
    seed: int,
    base: GRPORunConfig,
    tokens_budget: int,
    max_steps: int,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Train one token-level arm, with ``base``'s settings but its own controller, allocator uniform G=8 and ``seed``,
    until ``tokens_budget`` completion tokens are generated (or ``max_steps`` steps), evaluating every
    ``base.eval_every`` steps and at the end.

    Returns:
        :func:`run_record`'s dict plus ``"token_controller"`` and ``"steps"``; each curve point holds the held-out
        :meth:`~meta.rlvr.trainers.grpo.GRPOTrainer.evaluate_details` (accuracy, tool calls, answer length, slow share,
        entropy) and the cumulative costs, ``training_tool_calls`` among them (:func:`training_tool_calls`'s count,
        also in the record's ``costs``).
    """
    cfg = replace(base, allocator="uniform:8", token_controller=TOKEN_ARMS[arm], grpo=replace(base.grpo, seed=seed))
    model, model_config, _ = load_model(cfg.sft_checkpoint)
    run = GRPORun(cfg, model, model_config)
    trainer = run.trainer
    start = time.perf_counter()
    calls = 0  # tool calls executed during training rollouts (branches included), not in evaluations

    def costs() -> dict[str, int]:
        return {**trainer.costs.as_dict(), "training_tool_calls": calls}

    def point() -> dict[str, Any]:
        return {"step": trainer.num_steps, **trainer.evaluate_details(run.held_out), **costs()}

    curve = [point()]
    while trainer.costs.completion_tokens < tokens_budget and trainer.num_steps < max_steps:
        calls += training_tool_calls(trainer.tool, trainer.step)
        done = trainer.costs.completion_tokens >= tokens_budget or trainer.num_steps >= max_steps
        if trainer.num_steps % cfg.eval_every == 0 or done:
            curve.append(point())
            if log is not None:
                last = curve[-1]
                log(
                    f"{arm} seed {seed} step {last['step']}: acc {last['accuracy']:.3f} "
                    f"tokens {last['completion_tokens']}"
                )
    record = run_record(arm, seed, curve, costs(), time.perf_counter() - start, trainer.allocator)
    return {**record, "token_controller": TOKEN_ARMS[arm], "steps": trainer.num_steps}


def training_tool_calls(tool: object, step: Callable[[], object]) -> int:
    """Tool calls the environment executed while ``step()`` ran (one training step's rollouts): the increase of the
    tool hook's ``calls`` counter (:class:`~meta.rlvr.trainers.tools.CalculatorTool`; 0 without a counting tool).

    ARPO's budget measure: a branch's shared prefix was executed once, so its calls count once; refused calls count
    (the environment answered them); the held-out evaluations, which run outside the step, do not.
    """
    before = int(getattr(tool, "calls", 0))
    step()
    return int(getattr(tool, "calls", 0)) - before


def final_value(run: dict[str, Any], key: str) -> float:
    """``key`` at the end of a run: the mean of the last :data:`FINAL_WINDOW` evaluations, as :func:`final_accuracy`."""
    return float(np.mean([p[key] for p in run["curve"][-FINAL_WINDOW:]]))


def entropy_retention(run: dict[str, Any]) -> float:
    """Final held-out entropy over the initial (step 0) one: 1 is no change, below :data:`COLLAPSE` a collapse."""
    initial = run["curve"][0]["entropy"]
    return final_value(run, "entropy") / initial if initial > 0 else math.nan


def _headline_met(name: str, entry: dict[str, Any]) -> bool | None:
    """Whether ``entry`` shows the method's :data:`HEADLINES` direction (``None``: no headline, or not computable)."""
    accuracy_kept = entry["accuracy_delta_ci"][1] >= 0.0

    def below(key: str) -> bool:
        value, high = entry[key], entry[f"{key}_ci"][1]
        return value is not None and high is not None and value <= HALF and high < 1.0

    if name == "arpo":
        return accuracy_kept and below("tool_calls_ratio")
    if name == "ehpo":
        return accuracy_kept and below("length_ratio")
    if name in ("hapo", "eepo"):
        low = entry["entropy_retention_ratio_ci"][0]
        return low is not None and low > 1.0 and float(np.mean(entry["entropy_retention"])) >= COLLAPSE
    return None


def token_level_summary(runs: Sequence[dict[str, Any]], seeds: Sequence[int], arms: Sequence[str]) -> dict[str, Any]:
    """Issue 21's summary: ``methods.<name>.{tokens_ratio, accuracy_delta, tool_calls_ratio, length_ratio,
    headline_met}`` against uniform G=8, each with a paired (by seed) bootstrap interval.

    ``tokens_ratio`` is the tokens-to-target ratio of the allocator benchmark (tokens at which held-out accuracy
    first reaches 95% of uniform's final accuracy, :func:`cost_ratio`); ``accuracy_delta`` the final accuracy minus
    uniform's (:func:`paired_delta`); ``tool_calls_ratio``, ``length_ratio`` and ``entropy_retention_ratio`` ratios of
    seed means of the final tool calls per answer, answer length (sampled tokens) and :func:`entropy_retention` to
    uniform's (:func:`cost_ratio`; ``None`` where uniform's is 0). All at the same tokens budget
    (``total_tokens_ratio`` shows how close the arms' budgets came).

    Beside them, ARPO's own headline measure (the paper's: the tool-call budget of RL training to reach equal
    accuracy), not used by any :data:`HEADLINES` rule: ``training_tool_calls_ratio``, the tool calls executed in
    training rollouts (branches included) up to the first evaluation at the target accuracy, paired ratio to uniform's
    (a run that never reaches it counts as infinite, as in ``tokens_ratio``), and
    ``training_tool_calls_total_ratio``, the same over the whole run (equal tokens budget). Runs without the
    ``training_tool_calls`` count (older records) give ``None``.

    Raises:
        ValueError: A seed without a uniform G=8 run.
    """
    by = {(r["arm"], r["seed"]): r for r in runs}
    if not all((BASELINE, s) in by for s in seeds):
        raise ValueError("the token-level summary needs a uniform_g8 run for every seed")
    base = [by[(BASELINE, s)] for s in seeds]
    target = 0.95 * float(np.mean([final_accuracy(r) for r in base]))
    methods: dict[str, Any] = {}
    for arm in arms:
        if not all((arm, s) in by for s in seeds):
            continue
        rs = [by[(arm, s)] for s in seeds]
        entry: dict[str, Any] = {
            "token_controller": TOKEN_ARMS.get(arm, ""),
            "final_accuracy": [final_accuracy(r) for r in rs],
            "total_tokens": float(np.mean([r["costs"]["completion_tokens"] for r in rs])),
            "steps": float(np.mean([r["steps"] for r in rs])),
            "seconds": float(np.mean([r["seconds"] for r in rs])),
            "tool_calls": [final_value(r, "tool_calls") for r in rs],
            "answer_length": [final_value(r, "answer_length") for r in rs],
            "slow_share": [final_value(r, "slow_share") for r in rs],
            "entropy_retention": [entropy_retention(r) for r in rs],
        }
        pairs = {
            "tokens_ratio": ([first_reaching(r, target) for r in rs], [first_reaching(r, target) for r in base]),
            "total_tokens_ratio": (
                [r["costs"]["completion_tokens"] for r in rs],
                [r["costs"]["completion_tokens"] for r in base],
            ),
            "tool_calls_ratio": (entry["tool_calls"], [final_value(r, "tool_calls") for r in base]),
            "length_ratio": (entry["answer_length"], [final_value(r, "answer_length") for r in base]),
            "entropy_retention_ratio": (entry["entropy_retention"], [entropy_retention(r) for r in base]),
        }
        if all("training_tool_calls" in r["costs"] for r in [*rs, *base]):
            entry["training_tool_calls"] = [float(r["costs"]["training_tool_calls"]) for r in rs]
            pairs["training_tool_calls_ratio"] = (
                [first_reaching(r, target, "training_tool_calls") for r in rs],
                [first_reaching(r, target, "training_tool_calls") for r in base],
            )
            pairs["training_tool_calls_total_ratio"] = (
                entry["training_tool_calls"],
                [float(r["costs"]["training_tool_calls"]) for r in base],
            )
        else:
            for key in ("training_tool_calls_ratio", "training_tool_calls_total_ratio"):
                entry[key], entry[f"{key}_ci"] = None, [None, None]
        for key, (mine, theirs) in pairs.items():
            ratio = cost_ratio(mine, theirs)  # None where uniform's mean is 0 (no ratio)
            entry[key], entry[f"{key}_ci"] = ratio["value"], ratio["ci"]
        delta = paired_delta(entry["final_accuracy"], [final_accuracy(r) for r in base])
        entry["accuracy_delta"], entry["accuracy_delta_ci"] = delta["value"], delta["ci"]
        entry["headline"] = HEADLINES.get(arm, "baseline")
        entry["headline_met"] = _headline_met(arm, entry)
        methods[arm] = entry
    return {"seeds": list(seeds), "target_accuracy": target, "methods": methods}


def token_level_table(summary: dict[str, Any]) -> str:
    """The markdown table of :func:`token_level_summary`: each ratio with its paired interval, then the verdicts."""

    def cell(entry: dict[str, Any], key: str) -> str:
        lo, hi = entry[f"{key}_ci"]
        return f"{fmt(entry[key])} [{fmt(lo)}, {fmt(hi)}]"

    lines = [
        f"target accuracy {summary['target_accuracy']:.3f} (95% of uniform_g8 final), seeds {summary['seeds']}",
        "| method | tokens-to-target ratio | accuracy delta | tool calls ratio | length ratio | entropy retention "
        "ratio | training tool calls to target ratio | final acc | slow share | tool calls | tokens |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, e in summary["methods"].items():
        lo, hi = e["accuracy_delta_ci"]
        lines.append(
            f"| {name} | {cell(e, 'tokens_ratio')} | {e['accuracy_delta']:+.3f} [{lo:+.3f}, {hi:+.3f}] "
            f"| {cell(e, 'tool_calls_ratio')} | {cell(e, 'length_ratio')} | {cell(e, 'entropy_retention_ratio')} "
            f"| {cell(e, 'training_tool_calls_ratio')} | {np.mean(e['final_accuracy']):.3f} "
            f"| {np.mean(e['slow_share']):.2f} | {np.mean(e['tool_calls']):.2f} | {e['total_tokens']:,.0f} |"
        )
    lines.append("")
    for name, e in summary["methods"].items():
        if e["headline_met"] is not None:
            verdict = "met" if e["headline_met"] else "missed"
            lines.append(f"- {name}: {e['headline']}: **{verdict}**.")
    arpo = summary["methods"].get("arpo")
    if arpo is not None and "training_tool_calls" in arpo:
        lines.append(
            f"- arpo, the paper's own measure (not the headline rule above): training tool calls to the target "
            f"accuracy {cell(arpo, 'training_tool_calls_ratio')}x uniform's, over the whole budget "
            f"{cell(arpo, 'training_tool_calls_total_ratio')}x."
        )
    return "\n".join(lines) + "\n"
