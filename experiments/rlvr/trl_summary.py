"""The summary of the TRL benchmark (``experiments/rlvr/trl_benchmark.py``): the allocator arms trained through TRL's
``GRPOTrainer``, per task family and process count (:func:`summarize_trl`, :func:`trl_table`).

Costs per arm: generated tokens and rows (responses) and trained tokens and rows (the adapter's ledger), wall-clock
seconds of training (evaluations excluded), and from TRL's per-step log the stages per step, the seconds per stage call
and per step's rollout, TRL's row-mean ``reward`` and the adapter's per-prompt reward. The "to target" numbers are read
at the first evaluation reaching 95% of uniform G=8's final accuracy on the same process count.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from experiments.rlvr.allocator_benchmark import (
    BASELINE,
    FINAL_WINDOW,
    accuracy_interval,
    cost_ratio,
    final_accuracy,
    first_reaching,
    fmt,
    summarize,
)

#: The issue's bounds: the best adaptive arm's tokens-to-target and (on 2 processes) wall-clock-to-target as a multiple
#: of uniform G=8's.
TOKENS_BOUND = 0.5
WALL_CLOCK_BOUND = 1.0


def _mean_of_steps(runs: Sequence[dict[str, Any]], name: str) -> float:
    """Mean over runs of each run's mean over steps of the logged field ``name`` (NaN steps skipped)."""
    return float(np.mean([np.nanmean(np.asarray(r["steps"][name], dtype=float)) for r in runs]))


def trl_family_summary(runs: Sequence[dict[str, Any]], family: str, arms: Sequence[str]) -> dict[str, Any]:
    """:func:`summarize` for one task family and process count of the TRL benchmark, on the seeds uniform G=8 has,
    plus per arm: wall-clock to target and its ratio to uniform G=8, rows and tokens generated and trained, the
    per-step log's means, the real speeds, and the paired (by seed) final-accuracy difference of the best adaptive arm
    to uniform G=8."""
    arms = [a for a in arms if any(r["arm"] == a for r in runs)]
    seeds = sorted({r["seed"] for r in runs if r["arm"] == BASELINE})
    runs = [r for r in runs if r["seed"] in seeds]
    summary = summarize(runs, family, seeds, arms)
    target = summary["target_accuracy"]
    # Held-out accuracy of the SFT checkpoint every run starts from (the step-0 evaluation).
    summary["start_accuracy"] = float(np.mean([r["curve"][0]["accuracy"] for r in runs]))
    by = {(r["arm"], r["seed"]): r for r in runs}
    base_seconds = [first_reaching(by[(BASELINE, s)], target, "train_seconds") for s in seeds]
    base_cpu = [first_reaching(by[(BASELINE, s)], target, "train_cpu_seconds") for s in seeds]
    for arm, entry in summary["arms"].items():
        rs = [by[(arm, s)] for s in seeds]
        entry["seconds_to_target"] = [first_reaching(r, target, "train_seconds") for r in rs]
        seconds = cost_ratio(entry["seconds_to_target"], base_seconds)
        entry["ratio_seconds_vs_uniform_g8"], entry["ratio_seconds_ci"] = seconds["value"], seconds["ci"]
        # The same in CPU time (the busiest process's): what the wall-clock ratio is on a machine no one else uses.
        entry["cpu_seconds_to_target"] = [first_reaching(r, target, "train_cpu_seconds") for r in rs]
        cpu = cost_ratio(entry["cpu_seconds_to_target"], base_cpu)
        entry["ratio_cpu_seconds_vs_uniform_g8"], entry["ratio_cpu_seconds_ci"] = cpu["value"], cpu["ci"]
        entry["rows_trained"] = float(np.mean([r["costs"]["rows_trained"] for r in rs]))
        entry["tokens_trained"] = float(np.mean([r["costs"]["tokens_trained"] for r in rs]))
        entry["seconds"] = float(np.mean([r["seconds"] for r in rs]))
        entry["cpu_seconds"] = float(np.mean([r["cpu_seconds"] for r in rs]))
        steps = [len(r["steps"]["rlvr/stages"]) for r in rs]
        entry["seconds_per_step"] = float(np.mean([r["seconds"] / max(n, 1) for r, n in zip(rs, steps, strict=True)]))
        entry["stages_per_step"] = _mean_of_steps(rs, "rlvr/stages")
        entry["rollout_seconds_per_step"] = _mean_of_steps(rs, "rlvr/rollout_seconds")
        # Seconds per stage call over the whole run (total rollout time / total stage calls), not a mean of means.
        entry["seconds_per_stage"] = float(
            np.mean(
                [np.sum(r["steps"]["rlvr/rollout_seconds"]) / max(np.sum(r["steps"]["rlvr/stages"]), 1) for r in rs]
            )
        )
        entry["reward_per_prompt"] = _mean_of_steps(rs, "rlvr/reward_per_prompt")
        entry["reward_row_mean"] = _mean_of_steps(rs, "reward")
        for speed in ("train_samples_per_second", "train_rows_per_second", "train_generated_tokens_per_second"):
            entry[speed] = float(np.mean([r["speeds"][speed] for r in rs]))
        entry["load_average"] = float(np.mean([np.mean(r["load"]) for r in rs]))
    best = summary.get("best_adaptive")
    if isinstance(best, dict) and best.get("arm") in summary["arms"]:
        mine = summary["arms"][best["arm"]]
        best["ratio_seconds_vs_uniform_g8"] = mine["ratio_seconds_vs_uniform_g8"]
        best["seconds_ci"] = mine["ratio_seconds_ci"]
        best["ratio_cpu_seconds_vs_uniform_g8"] = mine["ratio_cpu_seconds_vs_uniform_g8"]
        best["cpu_seconds_ci"] = mine["ratio_cpu_seconds_ci"]
        diffs = [
            float(
                np.mean([p["accuracy"] for p in by[(best["arm"], s)]["curve"][-FINAL_WINDOW:]])
                - np.mean([p["accuracy"] for p in by[(BASELINE, s)]["curve"][-FINAL_WINDOW:]])
            )
            for s in seeds
        ]
        best["final_accuracy_minus_uniform_g8"] = float(np.mean(diffs))
        best["final_accuracy_minus_uniform_g8_ci"] = accuracy_interval(diffs)
    return summary


def process_comparison(
    one: Sequence[dict[str, Any]], other: Sequence[dict[str, Any]], target: float, arms: Sequence[str]
) -> dict[str, Any]:
    """Per arm, the runs of another process count against the 1-process runs, paired by seed: the difference
    (other − one) of final accuracy and of tokens to ``target`` (the 1-process target accuracy, the same for both), each
    with its seed-bootstrap interval, and the ratio of tokens to target with its paired interval.

    An arm is "equal within noise" when both difference intervals contain 0 and every seed reached the target on both
    process counts (a run that never reached it has no difference); with one seed there is no interval and the verdict
    is ``None``.

    Returns:
        ``{arm: {"seeds", "final_accuracy_diff", "final_accuracy_diff_ci", "tokens_to_target_diff",
        "tokens_to_target_diff_ci", "ratio_tokens", "ratio_tokens_ci", "unreached_seeds", "equal_within_noise"}}``.
    """
    out: dict[str, Any] = {}
    for arm in arms:
        a = {r["seed"]: r for r in one if r["arm"] == arm}
        b = {r["seed"]: r for r in other if r["arm"] == arm}
        seeds = sorted(set(a) & set(b))
        if not seeds:
            continue
        acc = [final_accuracy(b[s]) - final_accuracy(a[s]) for s in seeds]
        t_one = [first_reaching(a[s], target) for s in seeds]
        t_other = [first_reaching(b[s], target) for s in seeds]
        both = [(x, y) for x, y in zip(t_one, t_other, strict=True) if x is not None and y is not None]
        tokens = [y - x for x, y in both]
        ratio = cost_ratio(t_other, t_one)
        entry: dict[str, Any] = {
            "seeds": seeds,
            "final_accuracy_diff": float(np.mean(acc)),
            "final_accuracy_diff_ci": accuracy_interval(acc),
            "tokens_to_target_diff": float(np.mean(tokens)) if tokens else None,
            "tokens_to_target_diff_ci": accuracy_interval(tokens) if tokens else [None, None],
            "ratio_tokens": ratio["value"],
            "ratio_tokens_ci": ratio["ci"],
            "unreached_seeds": len(seeds) - len(both),
        }
        lo, hi = entry["final_accuracy_diff_ci"]
        t_lo, t_hi = entry["tokens_to_target_diff_ci"]
        # One seed has no interval to hold 0: undecided (None), which no target part counts as met.
        entry["equal_within_noise"] = (
            None
            if len(seeds) < 2
            else bool(lo <= 0.0 <= hi and not entry["unreached_seeds"] and t_lo is not None and t_lo <= 0.0 <= t_hi)
        )
        out[arm] = entry
    return out


def by_processes(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{processes: {family: summary}}`` of a :func:`summarize_trl` result (``"1"`` is its ``families``)."""
    return {"1": summary["families"], **summary.get("processes", {})}


def _target_parts(
    per_count: dict[str, dict[str, Any]], families: Sequence[str], comparison: dict[str, Any]
) -> dict[str, Any]:
    """Every part of the issue's target, each with the numbers it was judged on and ``met``; a family or process count
    without runs is a part not met."""
    tokens: dict[str, Any] = {}
    accuracy: dict[str, Any] = {}
    for count, fams in per_count.items():
        tokens[count], accuracy[count] = {}, {}
        for family in families:
            best = fams.get(family, {}).get("best_adaptive", {})
            value = best.get("ratio_tokens_vs_uniform_g8")
            tokens[count][family] = {
                "ran": family in fams,
                "arm": best.get("arm"),
                "value": value,
                "ci": best.get("ci", [None, None]),
                "met": value is not None and value <= TOKENS_BOUND,
            }
            diff_ci = best.get("final_accuracy_minus_uniform_g8_ci", [None, None])
            accuracy[count][family] = {
                "arm": best.get("arm"),
                "value": best.get("final_accuracy_minus_uniform_g8"),
                "ci": diff_ci,
                "met": diff_ci[1] is not None and diff_ci[1] >= 0.0,
            }
    wall: dict[str, Any] = {}
    for family in families:
        best = per_count.get("2", {}).get(family, {}).get("best_adaptive", {})
        value = best.get("ratio_seconds_vs_uniform_g8")
        wall[family] = {
            "ran": family in per_count.get("2", {}),
            "arm": best.get("arm"),
            "value": value,
            "ci": best.get("seconds_ci", [None, None]),
            "met": value is not None and value <= WALL_CLOCK_BOUND,
            # Beside it, not judged: the ratio in the busiest process's CPU time, robust to a shared machine's load.
            "cpu_value": best.get("ratio_cpu_seconds_vs_uniform_g8"),
            "cpu_ci": best.get("cpu_seconds_ci", [None, None]),
        }
    equal: dict[str, Any] = {}
    for family in families:
        arms = comparison.get("2", {}).get(family, {})
        unequal = [arm for arm, e in arms.items() if e["equal_within_noise"] is not True]
        equal[family] = {"arms": sorted(arms), "not_equal": unequal, "met": bool(arms) and not unequal}
    return {
        "tokens_at_most_half_uniform": tokens,
        "final_accuracy_not_below_uniform": accuracy,
        "wall_clock_at_most_uniform_on_2_processes": wall,
        "two_processes_equal_one_process": equal,
    }


def _all_met(parts: Any) -> bool:
    """Every ``met`` leaf of :func:`_target_parts` is true."""
    if isinstance(parts, dict):
        if "met" in parts:
            return bool(parts["met"])
        return all(_all_met(v) for v in parts.values())
    return True


def summarize_trl(
    runs: Sequence[dict[str, Any]],
    families: Sequence[str],
    arms: Sequence[str],
    seeds: Sequence[int],
    processes: Sequence[int] = (1,),
) -> dict[str, Any]:
    """The TRL benchmark's summary: per process count and family (:func:`trl_family_summary`; a family without a
    uniform G=8 run is left out), the 2-process runs against the 1-process ones (:func:`process_comparison`), and the
    issue's target part by part.

    The target: on every family, the best adaptive arm (fewest tokens to target) at <= 0.5x uniform G=8's tokens on
    every process count, "at equal final accuracy", read as: the paired interval of the final-accuracy difference
    reaches 0 or lies above it (an arm that ends *more* accurate is not penalised); on 2 processes, the same arm at
    <= 1.0x uniform G=8's wall-clock to target; and every arm's 2-process runs equal to its 1-process runs within noise.
    A run record without ``processes`` counts as 1 process.

    Returns:
        ``{"target_met", "target_parts", "families": {family: 1-process summary}, "processes": {"<n>": {family:
        summary}} for n > 1, "two_vs_one_process": {"<n>": {family: {arm: comparison}}}}``.
    """
    per_count: dict[str, dict[str, Any]] = {}
    for count in processes:
        out: dict[str, Any] = {}
        for family in families:
            mine = [
                r
                for r in runs
                if r["family"] == family and r.get("processes", 1) == count and r["arm"] in arms and r["seed"] in seeds
            ]
            if any(r["arm"] == BASELINE for r in mine):
                out[family] = trl_family_summary(mine, family, arms)
        per_count[str(count)] = out
    comparison: dict[str, Any] = {}
    for count in processes:
        if count == 1:
            continue
        comparison[str(count)] = {}
        for family in families:
            if family not in per_count.get("1", {}) or family not in per_count[str(count)]:
                continue
            one = [r for r in runs if r["family"] == family and r.get("processes", 1) == 1 and r["seed"] in seeds]
            other = [r for r in runs if r["family"] == family and r.get("processes", 1) == count and r["seed"] in seeds]
            target = per_count["1"][family]["target_accuracy"]
            comparison[str(count)][family] = process_comparison(one, other, target, arms)
    parts = _target_parts(per_count, families, comparison)
    return {
        "target_met": _all_met(parts),
        "target_parts": parts,
        "families": per_count.get("1", {}),
        "processes": {k: v for k, v in per_count.items() if k != "1"},
        "two_vs_one_process": comparison,
    }


def _ci(bounds: Sequence[float | None], spec: str = ".2f", signed: bool = False) -> str:
    """An interval ``[low, high]`` in ``spec`` (with a sign if ``signed``), ``[never]`` without bounds."""
    low, high = bounds
    if low is None or high is None:
        return "[never]"
    sign = "+" if signed else ""
    return f"[{low:{sign}{spec}}, {high:{sign}{spec}}]"


def _equal_word(equal: bool | None) -> str:
    return "undecided (1 seed)" if equal is None else ("yes" if equal else "no")


def trl_table(summary: dict[str, Any]) -> str:
    """The markdown tables docs/results/rlvr.md quotes: one row per process count, family and arm; the 2-process
    runs against the 1-process ones; then each part of the target and the verdict."""
    lines = [
        "| processes | family | arm | tokens-to-target ratio [95% CI] | wall-clock-to-target ratio [95% CI] "
        "| CPU-time-to-target ratio [95% CI] | final acc (mean [95% CI]) | tokens generated / trained "
        "| rows generated / trained | stages per step "
        "| s per stage | s per step | reward per prompt / per row |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for count, fams in by_processes(summary).items():
        for family, s in fams.items():
            for arm, e in s["arms"].items():
                lo, hi = e["ratio_ci"]
                s_lo, s_hi = e["ratio_seconds_ci"]
                c_lo, c_hi = e["ratio_cpu_seconds_ci"]
                acc_lo, acc_hi = e["final_accuracy_ci"]
                lines.append(
                    f"| {count} | {family} | {arm} | {fmt(e['ratio_tokens_vs_uniform_g8'])} [{fmt(lo)}, {fmt(hi)}] "
                    f"| {fmt(e['ratio_seconds_vs_uniform_g8'])} [{fmt(s_lo)}, {fmt(s_hi)}] "
                    f"| {fmt(e['ratio_cpu_seconds_vs_uniform_g8'])} [{fmt(c_lo)}, {fmt(c_hi)}] "
                    f"| {np.mean(e['final_accuracy']):.3f} [{acc_lo:.3f}, {acc_hi:.3f}] "
                    f"| {e['total_tokens']:,.0f} / {e['tokens_trained']:,.0f} "
                    f"| {e['total_responses']:,.0f} / {e['rows_trained']:,.0f} | {e['stages_per_step']:.2f} "
                    f"| {e['seconds_per_stage']:.3f} | {e['seconds_per_step']:.3f} "
                    f"| {e['reward_per_prompt']:.3f} / {e['reward_row_mean']:.3f} |"
                )
    comparison = summary.get("two_vs_one_process", {})
    if any(comparison.values()):
        lines += [
            "",
            "| processes | family | arm | final acc minus 1 process [95% CI] | tokens to target minus 1 process "
            "[95% CI] | tokens ratio to 1 process [95% CI] | equal within noise |",
            "|---|---|---|---|---|---|---|",
        ]
        for count, fams in comparison.items():
            for family, arms in fams.items():
                for arm, e in arms.items():
                    tokens = "never" if e["tokens_to_target_diff"] is None else f"{e['tokens_to_target_diff']:+,.0f}"
                    t_ci = _ci(e["tokens_to_target_diff_ci"], spec=",.0f", signed=True)
                    unreached = f" ({e['unreached_seeds']} seeds unreached)" if e["unreached_seeds"] else ""
                    r_lo, r_hi = e["ratio_tokens_ci"]
                    lines.append(
                        f"| {count} | {family} | {arm} | {e['final_accuracy_diff']:+.3f} "
                        f"{_ci(e['final_accuracy_diff_ci'], spec='.3f', signed=True)} | {tokens} {t_ci}{unreached} "
                        f"| {fmt(e['ratio_tokens'])} [{fmt(r_lo)}, {fmt(r_hi)}] "
                        f"| {_equal_word(e['equal_within_noise'])} |"
                    )
    lines.append("")
    parts = summary["target_parts"]

    def verdict(met: bool) -> str:
        return "**met**" if met else "**missed**"

    for count, fams in parts["tokens_at_most_half_uniform"].items():
        for family, p in fams.items():
            acc = parts["final_accuracy_not_below_uniform"][count][family]
            if not p["ran"]:
                lines.append(
                    f"- {family}, {count} process(es): not run (no uniform G=8 run on these seeds): {verdict(False)}."
                )
                continue
            if p["arm"] is None:
                lines.append(
                    f"- {family}, {count} process(es): no adaptive arm reached the target accuracy: tokens "
                    f"{verdict(False)}."
                )
                continue
            lo, hi = p["ci"]
            d_lo, d_hi = acc["ci"]
            lines.append(
                f"- {family}, {count} process(es): best adaptive arm {p['arm']}, {fmt(p['value'])}x uniform G=8's "
                f"tokens [{fmt(lo)}, {fmt(hi)}] (<= {TOKENS_BOUND}x: {verdict(p['met'])}); final accuracy "
                f"{acc['value']:+.3f} [{d_lo:+.3f}, {d_hi:+.3f}] against it (not below: {verdict(acc['met'])})."
            )
    for family, p in parts["wall_clock_at_most_uniform_on_2_processes"].items():
        if p["arm"] is None:
            state = "no adaptive arm reached the target accuracy" if p["ran"] else "not run"
            lines.append(f"- {family}, 2 processes: {state}: wall-clock {verdict(False)}.")
            continue
        lo, hi = p["ci"]
        lines.append(
            f"- {family}, 2 processes: {p['arm']} at {fmt(p['value'])}x uniform G=8's wall-clock to target "
            f"[{fmt(lo)}, {fmt(hi)}] (<= {WALL_CLOCK_BOUND}x: {verdict(p['met'])}); in CPU time of the busiest process "
            f"{fmt(p['cpu_value'])}x [{fmt(p['cpu_ci'][0])}, {fmt(p['cpu_ci'][1])}] (not judged)."
        )
    for family, p in parts["two_processes_equal_one_process"].items():
        if not p["arms"]:
            lines.append(f"- {family}: 2 processes against 1: not run on both: {verdict(False)}.")
            continue
        unequal = f" (not equal or undecided: {', '.join(p['not_equal'])})" if p["not_equal"] else ""
        lines.append(
            f"- {family}: 2 processes equal 1 process within noise for every arm{unequal}: {verdict(p['met'])}."
        )
    lines.append(
        f"- Target (best adaptive arm <= {TOKENS_BOUND}x uniform G=8's tokens on every family and process count, final "
        f"accuracy not below uniform G=8's, <= {WALL_CLOCK_BOUND}x its wall-clock on 2 processes, 2 processes equal to "
        f"1): {verdict(bool(summary.get('target_met')))}."
    )
    return "\n".join(lines) + "\n"
