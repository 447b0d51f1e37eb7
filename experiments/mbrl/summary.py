"""Assemble ``results/summary.json`` (issue 4's result file) from the benchmark JSONs beside it.

Reads every ``results/sample_efficiency_<env>.json`` written by ``sample_efficiency.py``; adds costs (wall-clock per
1k env steps per arm, imagined transitions per second) and rliable aggregates (IQM of final returns with 95%
stratified-bootstrap intervals, per env). The Dyna-DQN gate writes its own ``results/gate.json`` (``gate.py``). Nothing
is recomputed from scratch: the per-seed runs are the ones stored in those files.

    python experiments/mbrl/summary.py
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tyro

from mbrl.sample_efficiency import summarize_env
from rolloutlab.checkpoint import atomic_write_json, atomic_write_text

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Args:
    results: str = str(RESULTS)
    """folder holding the benchmark JSONs; summary.json is written there"""
    bootstrap_reps: int = 2000
    """bootstrap resamples for the rliable intervals"""


def parse_args() -> Args:
    """Every ``Args`` field as a ``--flag`` (tyro; the field docstrings are the help text)."""
    return tyro.cli(Args, description=__doc__)


def iqm_by_arm(entry: dict[str, Any], reps: int) -> dict[str, Any]:
    """rliable IQM of the per-seed final returns of each arm, with a 95% stratified-bootstrap interval."""
    from rliable import library as rly
    from rliable import metrics

    scores = {
        arm: np.asarray(row["final_return"], dtype=float).reshape(-1, 1)
        for arm, row in entry["arms"].items()
        if row["final_return"] and None not in row["final_return"]
    }
    if not scores or min(v.shape[0] for v in scores.values()) < 2:
        return {}
    np.random.seed(0)  # arch (under rliable) may fall back to the global generator; keep the CIs reproducible
    point, interval = rly.get_interval_estimates(
        scores,
        lambda x: np.array([metrics.aggregate_iqm(x)]),
        reps=reps,
        random_state=np.random.RandomState(0),
    )
    return {
        arm: {"iqm": float(point[arm][0]), "ci": [float(interval[arm][0][0]), float(interval[arm][1][0])]}
        for arm in scores
    }


def _fmt(x: float | None, digits: int = 0) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _iqm_text(agg: dict[str, Any] | None) -> str:
    return f"{agg['iqm']:.0f} [{agg['ci'][0]:.0f}, {agg['ci'][1]:.0f}]" if agg else "—"


def markdown(summary: dict[str, Any]) -> str:
    """The sample-efficiency table quoted in docs/mbrl.md."""
    lines = [
        "| env | threshold | budget | seeds | arm | steps to threshold (per seed) | median | never | final return "
        "(per seed) | IQM final [95% CI] | s / 1k steps |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in summary["sample_efficiency"]:
        iqm = summary["aggregate_iqm_final_return"].get(entry["env"], {})
        for arm, row in entry["arms"].items():
            steps = ", ".join("never" if s is None else str(s) for s in row["steps_to_threshold"])
            finals = ", ".join(_fmt(v) for v in row["final_return"])
            agg_text = _iqm_text(iqm.get(arm))
            lines.append(
                f"| {entry['env']} | {entry['threshold']:g} | {entry['budget']} | {len(entry['seeds'])} | {arm} "
                f"| {steps} | {_fmt(row['median_steps'])} | {row['never_reached']} | {finals} | {agg_text} "
                f"| {_fmt(float(np.median(row['seconds_per_1k_steps'])))} |"
            )
        ci = entry["ratio_ci"]
        ratio = entry["ratio_best_sac_over_mbpo"]
        lines.append(
            f"| {entry['env']} | | | | **ratio best SAC / MBPO** | | **{_fmt(ratio, 2)}** "
            f"[{_fmt(ci[0] if ci else None, 2)}, {_fmt(ci[1] if ci else None, 2)}] | | | | |"
        )
        for arm, row in (entry.get("ratio_by_sac_arm") or {}).items():
            lines.append(
                f"| {entry['env']} | | | | ratio {arm} / MBPO | | {_fmt(row['ratio'], 2)} "
                f"[{_fmt(row['ci'][0], 2)}, {_fmt(row['ci'][1], 2)}] | | | | |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    args = parse_args()
    results = Path(args.results)
    summary: dict[str, Any] = {"sample_efficiency": [], "costs": {}, "aggregate_iqm_final_return": {}}
    sources: list[str] = []
    for path in sorted(results.glob("sample_efficiency_*.json")):
        data = json.loads(path.read_text())
        a = data["args"]
        # Recompute the entry from the stored runs so the summary always matches them.
        entry = summarize_env(a["env_id"], a["threshold"], a["budget"], data["runs"], np.random.default_rng(0))
        entry["settings"] = data["settings"]
        entry["command"] = (
            f"python experiments/mbrl/sample_efficiency.py --env-id {a['env_id']} --threshold {a['threshold']:g} "
            f"--budget {a['budget']} --seeds {a['seeds']} --updates-per-step {a['updates_per_step']} "
            f"--controller {a['controller']}" + (f" --tag {a['tag']}" if a.get("tag") else "")
        )
        summary["sample_efficiency"].append(entry)
        mbpo_runs = [r for r in data["runs"] if r["arm"] == "mbpo" and r["seed"] in entry["seeds"]]
        imagined = [r["imagined_per_second"] for r in mbpo_runs if r.get("imagined_per_second")]
        summary["costs"][a["env_id"]] = {
            "seconds_per_1k_env_steps_median": {
                arm: float(np.median(row["seconds_per_1k_steps"])) for arm, row in entry["arms"].items()
            },
            "mbpo_imagined_transitions_per_second_median": float(np.median(imagined)) if imagined else None,
            "note": "wall-clock on the shared 2-core machine, other benchmarks beside it; compare arms, not machines",
        }
        summary["aggregate_iqm_final_return"][a["env_id"]] = iqm_by_arm(entry, args.bootstrap_reps)
        sources.append(path.name)
    summary["sources"] = sources
    atomic_write_json(results / "summary.json", summary)
    atomic_write_text(results / "summary.md", markdown(summary))
    for entry in summary["sample_efficiency"]:
        medians = {arm: row["median_steps"] for arm, row in entry["arms"].items()}
        print(
            f"{entry['env']}: seeds {entry['seeds']}, median steps {medians}, "
            f"ratio {entry['ratio_best_sac_over_mbpo']} CI {entry['ratio_ci']}"
        )
    print(f"wrote {results / 'summary.json'} from {sources}")


if __name__ == "__main__":
    main()
