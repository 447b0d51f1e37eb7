"""The summary of the TRL benchmark (``experiments/rlvr/trl_benchmark.py``): the allocator arms trained through TRL's
``GRPOTrainer``, per task family (:func:`summarize_trl`, :func:`trl_table`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from experiments.rlvr.allocator_benchmark import BASELINE, FINAL_WINDOW, accuracy_interval, fmt, summarize


def trl_family_summary(runs: Sequence[dict[str, Any]], family: str, arms: Sequence[str]) -> dict[str, Any]:
    """:func:`summarize` for one task family of the TRL benchmark, on the seeds uniform G=8 has, plus rows trained,
    seconds per run and the paired (by seed) final-accuracy difference of the best adaptive arm to uniform G=8."""
    arms = [a for a in arms if any(r["arm"] == a for r in runs)]
    seeds = sorted({r["seed"] for r in runs if r["arm"] == BASELINE})
    runs = [r for r in runs if r["seed"] in seeds]
    summary = summarize(runs, family, seeds, arms)
    for arm in arms:
        rs = [r for r in runs if r["arm"] == arm]
        summary["arms"][arm]["rows_trained"] = float(np.mean([r["costs"]["rows_trained"] for r in rs]))
        summary["arms"][arm]["seconds"] = float(np.mean([r["seconds"] for r in rs]))
    best = summary.get("best_adaptive")
    if isinstance(best, dict) and best.get("arm") in summary["arms"]:
        base = {r["seed"]: r for r in runs if r["arm"] == BASELINE}
        mine = {r["seed"]: r for r in runs if r["arm"] == best["arm"]}
        common = sorted(set(base) & set(mine))
        diffs = [
            float(
                np.mean([p["accuracy"] for p in mine[s]["curve"][-FINAL_WINDOW:]])
                - np.mean([p["accuracy"] for p in base[s]["curve"][-FINAL_WINDOW:]])
            )
            for s in common
        ]
        best["final_accuracy_minus_uniform_g8"] = float(np.mean(diffs))
        best["final_accuracy_minus_uniform_g8_ci"] = accuracy_interval(diffs)
    return summary


def summarize_trl(
    runs: Sequence[dict[str, Any]], families: Sequence[str], arms: Sequence[str], seeds: Sequence[int]
) -> dict[str, Any]:
    """The TRL benchmark's summary: per family (:func:`trl_family_summary`, families without a uniform G=8 run left
    out) and the issue's target.

    The target: the best adaptive arm at <= 0.5x uniform G=8's tokens on both families "at equal final accuracy",
    read as: the paired interval of the final-accuracy difference reaches 0 or lies above it (an arm that ends *more*
    accurate is not penalised).

    Returns:
        ``{"target_met", "families": {family: summary}}``.
    """
    out: dict[str, Any] = {}
    for family in families:
        mine = [r for r in runs if r["family"] == family and r["arm"] in arms and r["seed"] in seeds]
        if any(r["arm"] == BASELINE for r in mine):
            out[family] = trl_family_summary(mine, family, arms)
    target_met = len(out) == 2 and all(
        s["best_adaptive"].get("arm") is not None
        and s["best_adaptive"]["ratio_tokens_vs_uniform_g8"] <= 0.5
        and s["best_adaptive"]["final_accuracy_minus_uniform_g8_ci"][1] >= 0.0
        for s in out.values()
    )
    return {"target_met": target_met, "families": out}


def trl_table(summary: dict[str, Any]) -> str:
    """The markdown table docs/rlvr.md and the README quote, one block per family, then the verdict."""
    lines = [
        "| family | arm | tokens-to-target ratio [95% CI] | final acc (mean [95% CI]) | tokens generated "
        "| rows trained | seconds per run |",
        "|---|---|---|---|---|---|---|",
    ]
    for family, s in summary["families"].items():
        for arm, e in s["arms"].items():
            lo, hi = e["ratio_ci"]
            acc_lo, acc_hi = e["final_accuracy_ci"]
            lines.append(
                f"| {family} | {arm} | {fmt(e['ratio_tokens_vs_uniform_g8'])} [{fmt(lo)}, {fmt(hi)}] "
                f"| {np.mean(e['final_accuracy']):.3f} [{acc_lo:.3f}, {acc_hi:.3f}] | {e['total_tokens']:,.0f} "
                f"| {e['rows_trained']:,.0f} | {e['seconds']:.0f} |"
            )
    lines.append("")
    for family, s in summary["families"].items():
        best = s["best_adaptive"]
        if best.get("arm") is None:
            lines.append(f"- {family}: no adaptive arm reached the target (95% of uniform G=8's final accuracy).")
            continue
        lo, hi = best["ci"]
        d_lo, d_hi = best["final_accuracy_minus_uniform_g8_ci"]
        tokens = "met" if best["ratio_tokens_vs_uniform_g8"] <= 0.5 else "missed"
        accuracy = "equal" if d_lo <= 0.0 <= d_hi else ("higher" if d_lo > 0 else "lower")
        lines.append(
            f"- {family}: target accuracy {s['target_accuracy']:.3f}; best adaptive arm {best['arm']}, "
            f"{fmt(best['ratio_tokens_vs_uniform_g8'])}x uniform G=8's tokens [{fmt(lo)}, {fmt(hi)}] (<= 0.5x: "
            f"**{tokens}**), final accuracy {best['final_accuracy_minus_uniform_g8']:+.3f} [{d_lo:+.3f}, {d_hi:+.3f}] "
            f"against it ({accuracy})."
        )
    verdict = "met" if summary.get("target_met") else "missed"
    lines.append(
        f"- Target (best adaptive arm <= 0.5x uniform G=8's tokens on both families, final accuracy not below "
        f"uniform G=8's): **{verdict}**."
    )
    return "\n".join(lines) + "\n"
