"""Where issue 16's round-two run stands: meta-training rounds, what the meta-agents do so far, test runs done.

Reads only what ``experiments/meta/rollout_length.py`` commits (each action set's ``meta_training.json`` and the
arms file) and writes ``results/round2/progress.json``, the source of the progress figures in
``docs/results/meta.md``. The K and final-return trends are over *training* meta-episodes (randomized physics,
epsilon-greedy exploration), so they say what the compute is buying, not how the learned schedule scores: that is the
test arms' job.

    python experiments/meta/round2_progress.py
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tyro

from rolloutlab.checkpoint import atomic_write_json

HERE = Path(__file__).resolve().parent


@dataclass
class Args:
    results: str = str(HERE / "results" / "round2")
    """The round-two folder (``<env>_<action set>/meta_training.json`` and ``arms_<env>.json``)."""
    env_id: str = "Acrobot-v1"
    """Inner env of the run."""
    window: int = 5
    """Rounds averaged at the start and at the end of meta-training."""


def training_trend(history: list[dict[str, Any]], window: int) -> dict[str, float]:
    """Mean K over a meta-episode and mean final return J, over the first and the last ``window`` rounds.

    Args:
        history: ``meta_training.json``'s ``history``: one row per meta-episode with ``round``, ``k_schedule`` and
            ``final_j``.
        window: Rounds in each average.
    """
    rounds = sorted({row["round"] for row in history})
    first, last = set(rounds[:window]), set(rounds[-window:])

    def mean_of(key: str, keep: set[int]) -> float:
        return float(np.mean([np.mean(row[key]) for row in history if row["round"] in keep]))

    return {
        "mean_k_first": mean_of("k_schedule", first),
        "mean_k_last": mean_of("k_schedule", last),
        "final_j_first": mean_of("final_j", first),
        "final_j_last": mean_of("final_j", last),
    }


def count_test_runs(arms: dict[str, Any]) -> dict[str, Any]:
    """Runs filed per arm (finished arms and loose slices together) and the seconds each slice took."""
    runs = {arm: len(result["finals"]) for arm, result in arms.get("arms", {}).items()}
    seconds = []
    for arm, slices in arms.get("slices", {}).items():
        runs[arm] = runs.get(arm, 0) + sum(len(part["finals"]) for part in slices.values())
        seconds += [part["seconds"] for part in slices.values() if "seconds" in part]
    return {"per_arm": runs, "total": sum(runs.values()), "slice_seconds": sorted(seconds)}


def filed_in_order(arms: dict[str, Any], key: str) -> dict[str, list[Any]]:
    """Each arm's per-run ``key`` (``finals``, ``k_schedules``) over its runs filed from run 0 on without a gap.

    A slice after a gap (say runs 5-9 while runs 0-4 run elsewhere) is left out until the gap is filled: only the
    prefix from run 0 pairs with the other arms' runs.
    """
    ordered = {arm: list(result[key]) for arm, result in arms.get("arms", {}).items()}
    for arm, slices in arms.get("slices", {}).items():
        values: list[Any] = []
        for start in sorted(slices, key=int):
            if int(start) != len(values):
                break
            values += slices[start][key]
        ordered[arm] = values
    return ordered


def paired_so_far(arms: dict[str, Any]) -> dict[str, Any]:
    """Each arm's mean final return over the runs that every arm has finished (runs 0 .. n-1, the same inner seeds).

    An early paired look while the test arms fill in slice by slice; the issue's statistics (IQM, intervals,
    probability of improvement) wait for all 40 runs in ``summary.json``.
    """
    ordered = filed_in_order(arms, "finals")
    runs = min((len(finals) for finals in ordered.values()), default=0)
    return {"runs": runs, "mean": {arm: float(np.mean(finals[:runs])) for arm, finals in ordered.items() if runs}}


def k_on_test_physics(arms: dict[str, Any]) -> dict[str, Any]:
    """What each arm did with K on the test physics: its mean K at each of the run's decisions, and how often it
    chose each K, over its filed runs (from run 0 on). For the META arms this is the learned schedule, greedy."""
    out = {}
    for arm, schedules in filed_in_order(arms, "k_schedules").items():
        if not schedules:
            continue
        ks = np.asarray(schedules, dtype=np.int64)
        values, counts = np.unique(ks, return_counts=True)
        out[arm] = {
            "runs": int(ks.shape[0]),
            "mean_k_by_decision": [round(float(k), 2) for k in ks.mean(axis=0)],
            "share_of_decisions": {
                str(int(v)): round(float(c) / ks.size, 3) for v, c in zip(values, counts, strict=True)
            },
        }
    return out


def against_schedule(arms: dict[str, Any], reference: str) -> dict[str, Any]:
    """Each arm run for run against ``reference`` (the best schedule): wins, ties and losses of the final return, the
    runs whose K schedule is the reference's, and how many of those have its final return bit for bit (all of them,
    where the comparison is paired), plus the runs that hold the reference's last K over the second half."""
    finals, schedules = filed_in_order(arms, "finals"), filed_in_order(arms, "k_schedules")
    ref_f, ref_k = finals[reference], schedules[reference]
    out = {}
    for arm in finals:
        n = min(len(finals[arm]), len(ref_f))
        f, k = finals[arm][:n], schedules[arm][:n]
        same = [i for i in range(n) if k[i] == ref_k[i]]
        half = len(ref_k[0]) // 2 if ref_k else 0
        out[arm] = {
            "runs": n,
            "wins": sum(f[i] > ref_f[i] for i in range(n)),
            "ties": sum(f[i] == ref_f[i] for i in range(n)),
            "losses": sum(f[i] < ref_f[i] for i in range(n)),
            "same_schedule_runs": len(same),
            "same_schedule_equal_finals": sum(f[i] == ref_f[i] for i in same),
            "last_half_at_reference_k": sum(all(x == ref_k[i][-1] for x in k[i][half:]) for i in range(n)),
        }
    return out


def main(args: Args) -> dict[str, Any]:
    root = Path(args.results)
    out: dict[str, Any] = {"env_id": args.env_id, "window": args.window, "meta_training": {}}
    for folder in sorted(root.glob(f"{args.env_id}_*")):
        record = json.loads((folder / "meta_training.json").read_text())
        rounds_total = record["config"]["episodes"] // record["config"]["runs_per_round"]
        out["meta_training"][folder.name.removeprefix(f"{args.env_id}_")] = {
            "rounds_done": record["rounds_done"],
            "rounds_total": rounds_total,
            "meta_episodes": len(record["history"]),
            "wall_seconds": record["wall_seconds"],
            **training_trend(record["history"], args.window),
        }
    arms_path = root / f"arms_{args.env_id}.json"
    if arms_path.exists():
        arms = json.loads(arms_path.read_text())
        out["test_runs"] = count_test_runs(arms)
        out["paired_so_far"] = paired_so_far(arms)
        out["k_on_test_physics"] = k_on_test_physics(arms)
        summary_path = root / "summary.json"
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
        best = summary.get("envs", {}).get(args.env_id, {}).get("best_schedule")
        if best is not None:
            out["against_best_schedule"] = {"best_schedule": best, "arms": against_schedule(arms, best)}
    atomic_write_json(root / "progress.json", out)
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
