"""Assemble ``results/summary.json`` and ``summary.md`` from the benchmark JSONs beside them.

Reads every ``results/sample_efficiency_<env>[_<tag>].json`` written by ``sample_efficiency.py`` and recomputes each
summary entry from the per-seed runs stored there (nothing is rerun). Files of this protocol (a ``protocol``
field) give the steps-to-threshold entries (``sample_efficiency``, with the targets and their ``met`` flags)
and the HalfCheetah final-return entry (``halfcheetah``), plus costs and rliable aggregates (IQM of final returns with
95% stratified-bootstrap intervals). Files of round one (no ``protocol`` field: eval every 250 steps, 250 warm-up
steps, 5 seeds, a smaller MBPO data scale) go under ``round_one`` with this protocol's arm names, without targets: their
numbers are kept for the record and never read against this protocol's targets. The Dyna-DQN gate writes its own
``results/gate.json`` (``gate.py``). The summary's logic is :func:`build_summary` and :func:`markdown` here.

    python experiments/mbrl/summary.py
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.mbrl.arms import MBPO_PREFIX, PROTOCOL, SAC_SAME_UTD, SAC_UTD1, is_mbpo
from experiments.mbrl.sample_efficiency_stats import BOOTSTRAP_REPS, RATIO_TARGETS, summarize, summarize_threshold
from rolloutlab.checkpoint import atomic_write_json, atomic_write_text
from rolloutlab.statistics import interval_estimates, iqm

#: Round one's SAC arm names in this protocol's vocabulary (its ``mbpo`` arm becomes ``mbpo:<its controller>``).
ROUND_ONE_SAC_NAMES = {"sac_same_utd": SAC_SAME_UTD, "sac_default": SAC_UTD1}


# --- round one --------------------------------------------------------------------------------------------------


def round_one_runs(runs: Sequence[dict[str, Any]], controller: str) -> list[dict[str, Any]]:
    """Round one's run records under this protocol's arm names.

    ``mbpo`` becomes ``mbpo:<controller>`` (round one ran ``fixed:1``), ``sac_default`` becomes ``sac_utd1`` and
    ``sac_same_utd`` keeps its name; each record keeps its old name as ``round_one_arm``. The renaming is of names
    only: round one ran another protocol (evaluation every 250 env steps, 250 warm-up steps, 5 seeds, 5000 imagined
    rollouts per round, at most 30 model epochs per refit), so its numbers are never this protocol's.

    Raises:
        ValueError: an arm name round one did not have.
    """
    out = []
    for run in runs:
        name = run["arm"]
        if name == "mbpo":
            new = MBPO_PREFIX + controller
        elif name in ROUND_ONE_SAC_NAMES:
            new = ROUND_ONE_SAC_NAMES[name]
        else:
            raise ValueError(f"{name!r} is not a round-one arm (mbpo, sac_same_utd, sac_default)")
        out.append({**run, "arm": new, "round_one_arm": name})
    return out


# --- the results summary ----------------------------------------------------------------------------------------

#: What the wall-clock numbers in ``summary.json`` measure.
COST_NOTE = "wall-clock on the shared 2-core machine, other benchmarks beside it; compare arms, not machines"
ROUND_ONE_LABEL = (
    "Round one: the superseded protocol (5 seeds, evaluation every 250 env steps, 250 warm-up steps, MBPO with 5000 "
    "imagined rollouts per round and at most 30 model epochs per refit). Arm names mapped to this protocol's "
    "(mbpo -> mbpo:<its controller>, sac_default -> sac_utd1); no targets are evaluated on these numbers."
)
#: The protocol and its targets in words, the head of ``summary.json``.
PROTOCOL_DESCRIPTION: dict[str, Any] = {
    "name": PROTOCOL,
    "arms": "mbpo:SPEC (one per rollout-length controller spec), sac_same_utd (SAC at MBPO's G updates per env step), "
    "sac_utd1 (SAC at 1 update per env step); same seeds, networks, warm-up and evaluation in every arm",
    "mbpo": "the MBPO arm with the lowest median steps to threshold (entry.mbpo_arm); every MBPO arm alone in "
    "entry.ratios_by_mbpo_arm",
    "steps_to_threshold": "first evaluation step whose mean deterministic return reaches the threshold; a run that "
    "never reaches it counts as the budget",
    "targets": {
        key: {
            "target": target,
            "met": f"median-steps ratio >= {target:g}",
            "ci_low_meets_target": f"lower end of its 95% bootstrap interval >= {target:g}",
        }
        for key, target in RATIO_TARGETS.items()
    }
    | {
        "halfcheetah.mbpo_minus_sac_same_utd": {
            "target": "> 0",
            "met": "the paired (by seed) bootstrap 95% interval of the mean final-return difference excludes 0 and "
            "the mean is > 0",
        }
    },
}


def iqm_by_arm(entry: dict[str, Any], reps: int) -> dict[str, Any]:
    """rliable IQM of the per-seed final returns of each arm, with a 95% stratified-bootstrap interval."""
    scores = {
        arm: np.asarray(row["final_return"], dtype=float)
        for arm, row in entry["arms"].items()
        if row["final_return"] and None not in row["final_return"]
    }
    if not scores or min(v.shape[0] for v in scores.values()) < 2:
        return {}
    estimates = interval_estimates(scores, {"iqm": iqm}, seed=0, reps=reps)
    return {arm: {"iqm": e["iqm"].value, "ci": [e["iqm"].low, e["iqm"].high]} for arm, e in estimates.items()}


def costs(entry: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median wall seconds per run, per 1k env steps and in evaluations, per arm; MBPO's imagined transitions / s."""
    used = [r for r in runs if r["seed"] in entry["seeds"]]

    def median(values: list[Any]) -> float | None:
        values = [v for v in values if v is not None]
        return float(np.median(values)) if values else None

    return {
        "seconds_median": {arm: row["seconds_median"] for arm, row in entry["arms"].items()},
        "seconds_per_1k_env_steps_median": {
            arm: median(row["seconds_per_1k_steps"]) for arm, row in entry["arms"].items()
        },
        "eval_seconds_median": {arm: median(row["eval_seconds"]) for arm, row in entry["arms"].items()},
        "mbpo_imagined_transitions_per_second_median": {
            arm: median([r.get("imagined_per_second") for r in used if r["arm"] == arm])
            for arm in entry["arms"]
            if is_mbpo(arm)
        },
        "note": COST_NOTE,
    }


def build_summary(
    results: Path, names: list[str] | None = None, bootstrap_reps: int = BOOTSTRAP_REPS
) -> dict[str, Any]:
    """The whole ``summary.json`` from the benchmark files in ``results`` (all, or those ``names``).

    Every entry is recomputed from the per-seed run records stored in ``sample_efficiency_<env>[_<tag>].json``
    (nothing is rerun). Files of this protocol give the steps-to-threshold entries (``sample_efficiency``) and the
    HalfCheetah final-return entry (``halfcheetah``), plus costs and rliable aggregates; files of round one (no
    ``protocol`` field) go under ``round_one`` with this protocol's arm names and without targets.

    Raises:
        ValueError: two files of this protocol for the same env and mode, or a final-return file for an env other
            than HalfCheetah (the summary has a place for HalfCheetah's only).
    """
    paths = [results / n for n in names] if names else sorted(results.glob("sample_efficiency_*.json"))
    summary: dict[str, Any] = {
        "protocol": PROTOCOL_DESCRIPTION,
        "sample_efficiency": [],
        "halfcheetah": None,
        "costs": {},
        "aggregate_iqm_final_return": {},
        "round_one": None,
        "sources": [],
    }
    round_one: dict[str, Any] = {
        "label": ROUND_ONE_LABEL,
        "sample_efficiency": [],
        "sources": [],
    }
    seen: dict[tuple[str, str], str] = {}
    for path in paths:
        data = json.loads(path.read_text())
        rng = np.random.default_rng(0)
        if data.get("protocol") != PROTOCOL:
            a = data["args"]
            runs = round_one_runs(data["runs"], a["controller"])
            entry = summarize_threshold(a["env_id"], a["threshold"], a["budget"], runs, rng, targets=False)
            entry.update(
                round_one_arm_names={"mbpo": f"mbpo:{a['controller']}", **ROUND_ONE_SAC_NAMES},
                settings=data["settings"],
                command=_round_one_command(a),
                source=path.name,
            )
            round_one["sample_efficiency"].append(entry)
            round_one["sources"].append(path.name)
            continue
        settings, mode = data["settings"], data["mode"]
        env = settings["env_id"]
        if (env, mode) in seen:
            raise ValueError(
                f"{path.name} and {seen[(env, mode)]} both hold {mode} results for {env}; pick one (--files)"
            )
        seen[(env, mode)] = path.name
        entry = summarize(mode, env, data["threshold"], settings["budget"], data["runs"], rng)
        entry.update(settings=settings, command=data["command"], source=path.name)
        if mode == "final_return":
            if not env.startswith("HalfCheetah"):
                raise ValueError(f"{path.name}: summary.json has a final-return place for HalfCheetah only, not {env}")
            summary["halfcheetah"] = entry
        else:
            summary["sample_efficiency"].append(entry)
        summary["costs"][env] = costs(entry, data["runs"])
        summary["aggregate_iqm_final_return"][env] = iqm_by_arm(entry, bootstrap_reps)
        summary["sources"].append(path.name)
    if round_one["sources"]:
        summary["round_one"] = round_one
    return summary


def _round_one_command(a: dict[str, Any]) -> str:
    return (
        f"python experiments/mbrl/sample_efficiency.py --env-id {a['env_id']} --threshold {a['threshold']:g} "
        f"--budget {a['budget']} --seeds {a['seeds']} --updates-per-step {a['updates_per_step']} "
        f"--controller {a['controller']}"
        + (f" --tag {a['tag']}" if a.get("tag") else "")
        + " (round one's script, before the protocol of 'The model must pay off')"
    )


def _fmt(x: float | None, digits: int = 0) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def ratio_text(ratio: dict[str, Any] | None) -> str:
    """A ratio entry as ``value [low, high] (target ≥ t: met)`` (``—`` for ``None``)."""
    if ratio is None:
        return "—"
    text = f"{ratio['value']:.2f} [{ratio['ci'][0]:.2f}, {ratio['ci'][1]:.2f}]"
    if "target" in ratio:
        text += f" (target ≥ {ratio['target']:g}: {'met' if ratio['met'] else 'not met'})"
    return text


def _threshold_table(entries: list[dict[str, Any]], iqm_final: dict[str, Any]) -> list[str]:
    lines = [
        "| env | threshold | budget | seeds | arm | steps to threshold (per seed) | median | never | final return "
        "(per seed) | IQM final [95% CI] | wall s per run (median) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in entries:
        env = entry["env"]
        for arm, row in entry["arms"].items():
            steps = ", ".join("never" if s is None else str(s) for s in row["steps_to_threshold"])
            finals = ", ".join(_fmt(v) for v in row["final_return"])
            agg = iqm_final.get(env, {}).get(arm)
            agg_text = f"{agg['iqm']:.0f} [{agg['ci'][0]:.0f}, {agg['ci'][1]:.0f}]" if agg else "—"
            lines.append(
                f"| {env} | {entry['threshold']:g} | {entry['budget']} | {len(entry['seeds'])} | {arm} | {steps} "
                f"| {_fmt(row['median_steps'])} | {row['never_reached']} | {finals} | {agg_text} "
                f"| {_fmt(row['seconds_median'])} |"
            )
        for key in ("ratio_sac_utd1_over_mbpo", "ratio_best_sac_over_mbpo", "ratio_sac_same_utd_over_mbpo"):
            if entry.get(key) is not None:
                label = f"**{key}** (MBPO = {entry['mbpo_arm']})"
                lines.append(f"| {env} | | | | {label} | | {ratio_text(entry[key])} | | | | |")
    return lines


def markdown(summary: dict[str, Any]) -> str:
    """The tables quoted in the docs: this protocol's results, then round one's, labelled as such."""
    lines = [f"## Protocol: {PROTOCOL}", ""]
    if summary["sample_efficiency"]:
        lines += _threshold_table(summary["sample_efficiency"], summary["aggregate_iqm_final_return"])
    else:
        lines.append("No steps-to-threshold results of this protocol yet.")
    lines.append("")
    hc = summary["halfcheetah"]
    if hc is None:
        lines.append("No HalfCheetah final-return results of this protocol yet.")
    else:
        lines += [
            "| env | budget | seeds | arm | final return (per seed) | mean | wall s per run (median) |",
            "|---|---|---|---|---|---|---|",
        ]
        for arm, row in hc["arms"].items():
            finals = ", ".join(_fmt(v) for v in row["final_return"])
            lines.append(
                f"| {hc['env']} | {hc['budget']} | {len(hc['seeds'])} | {arm} | {finals} "
                f"| {_fmt(row['final_return_mean'])} | {_fmt(row['seconds_median'])} |"
            )
        diff = hc["mbpo_minus_sac_same_utd"]
        if diff is not None:
            lines.append(
                f"| {hc['env']} | | | **mbpo_minus_sac_same_utd** (MBPO = {hc['mbpo_arm']}) | "
                f"{', '.join(_fmt(d) for d in diff['differences'])} | {diff['mean']:.0f} "
                f"[{diff['ci'][0]:.0f}, {diff['ci'][1]:.0f}] (target > 0: {'met' if diff['met'] else 'not met'}) | |"
            )
        context = hc.get("mbpo_minus_sac_utd1")
        if context is not None:
            lines.append(
                f"| {hc['env']} | | | mbpo_minus_sac_utd1 (MBPO = {context['mbpo_arm']}) | "
                f"{', '.join(_fmt(d) for d in context['differences'])} | {context['mean']:.0f} "
                f"[{context['ci'][0]:.0f}, {context['ci'][1]:.0f}] (no target) | |"
            )
    if summary["round_one"] is not None:
        lines += ["", "## Round one (superseded protocol; not evidence for this protocol's targets)", ""]
        lines += [summary["round_one"]["label"], ""]
        lines += _threshold_table(summary["round_one"]["sample_efficiency"], {})
    return "\n".join(lines) + "\n"


RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Args:
    results: str = str(RESULTS)
    """folder holding the benchmark JSONs; summary.json and summary.md are written there"""
    files: str = ""
    """comma-separated file names to use (default: every sample_efficiency_*.json there)"""
    bootstrap_reps: int = BOOTSTRAP_REPS
    """bootstrap resamples for the rliable intervals"""


def parse_args() -> Args:
    """Every ``Args`` field as a ``--flag`` (tyro; the field docstrings are the help text)."""
    return tyro.cli(Args, description=__doc__)


def main() -> None:
    args = parse_args()
    results = Path(args.results)
    names = [n for n in args.files.split(",") if n] or None
    summary = build_summary(results, names, args.bootstrap_reps)
    atomic_write_json(results / "summary.json", summary)
    atomic_write_text(results / "summary.md", markdown(summary))
    for entry in summary["sample_efficiency"]:
        for key in ("ratio_sac_utd1_over_mbpo", "ratio_best_sac_over_mbpo"):
            print(f"{entry['env']} {key} (MBPO = {entry['mbpo_arm']}): {ratio_text(entry[key])}")
    if summary["halfcheetah"] is not None and summary["halfcheetah"]["mbpo_minus_sac_same_utd"] is not None:
        diff = summary["halfcheetah"]["mbpo_minus_sac_same_utd"]
        print(f"HalfCheetah mbpo_minus_sac_same_utd: {diff['mean']:.0f} CI {diff['ci']} met {diff['met']}")
    print(f"wrote {results / 'summary.json'} from {summary['sources']} (round one: {bool(summary['round_one'])})")


if __name__ == "__main__":
    main()
