"""Why the gate fails: how much can any model add over compute-matched K = 0?

The gate (``gate.py``, :func:`experiments.mbrl.gate_protocol.run_gate`) asks a learned model to beat K = 0 given the
same extra gradient updates on real data. Before improving the learned model further, this script measures the
ceiling: the environment's own dynamics used as the "model" (``+true`` arms,
:class:`mbrl.models.true_dynamics.TrueAcrobotModel`) against compute-matched K = 0, under the learner settings that
decide what extra updates buy. Every variant is a full gate protocol (Acrobot-v1, 20k env steps, phases of 2k,
paired runs, final greedy return over 10 episodes), differing in one setting:

* ``utd2_updates``: the gate's own settings (one extra update per ordinary one, i.e. 2 updates per env step for the
  model and compute-matched arms; target network synced on each run's gradient-step clock);
* ``utd4_updates``: 4 updates per env step (``model_gradient_steps=12``);
* ``utd2_env_clock``: the target network synced every 250 *env* steps for every arm (SB3's DQN), so extra updates
  no longer add sweeps of approximate value iteration;
* ``utd2_multi_step``: imagined transitions run to the end of their rollout (model value expansion, Feinberg et al.
  2018), so a rollout of K steps carries value K steps per backup.

If the true simulator cannot beat compute-matched K = 0 in a variant, no learned model can pass the gate there.

    OMP_NUM_THREADS=1 python experiments/mbrl/gate_diagnosis.py --workers 2
    # -> experiments/mbrl/results/gate_diagnosis.json and gate_diagnosis.md (one gate summary per variant beside them)
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.mbrl.gate_protocol import GateSettings, gate_report, gate_table, parse_gate_arm, run_gate
from rolloutlab.checkpoint import atomic_write_json, atomic_write_text

RESULTS = Path(__file__).resolve().parent / "results"

#: name -> (GateSettings overrides, arms)
VARIANTS: dict[str, tuple[dict[str, Any], str]] = {
    "utd2_updates": ({}, "fixed:0,fixed:0+compute,fixed:1+true,fixed:8+true"),
    "utd4_updates": ({"model_gradient_steps": 12}, "fixed:0+compute,fixed:8+true"),
    "utd2_env_clock": ({"target_clock": "env_steps"}, "fixed:0,fixed:0+compute,fixed:8+true"),
    "utd2_multi_step": ({"multi_step_targets": True}, "fixed:0+compute,fixed:2+true,fixed:8+true"),
}


@dataclass
class Args:
    runs: int = 10
    """paired runs per arm in every variant"""
    runs_per_slice: int = GateSettings.runs_per_slice
    """runs per saved slice (a killed run resumes at the next unsaved slice)"""
    workers: int = 2
    """slices run side by side"""
    variants: str = ",".join(VARIANTS)
    """comma-separated variants to run (all by default)"""
    out_dir: str = str(RESULTS / "gate_diagnosis")
    """one gate summary and its slices per variant"""
    out: str = str(RESULTS / "gate_diagnosis.json")
    """the combined summary (and a .md table beside it)"""


def table(combined: dict[str, Any]) -> str:
    """One row per (variant, arm): IQM with its interval, solved fraction, paired IQM difference to compute-matched."""
    lines = [
        "| variant | arm | IQM [95% CI] | solved | IQM − fixed:0+compute (paired s.e.) |",
        "|---|---|---|---|---|",
    ]
    for name, summary in combined["variants"].items():
        for arm, entry in summary["arms"].items():
            lo, hi = entry["iqm_ci95"]
            vs = summary["paired_iqm_vs_k0"].get(arm, {}).get("fixed:0+compute")
            diff = "—" if vs is None else f"{vs['iqm_diff']:+.1f} ({vs['se']:.1f})"
            iqm = f"{entry['iqm']:.1f} [{lo:.1f}, {hi:.1f}]"
            lines.append(f"| {name} | {arm} | {iqm} | {entry['solved_fraction']:.2f} | {diff} |")
    return "\n".join(lines) + "\n"


def main(args: Args) -> dict[str, Any]:
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; known: {sorted(VARIANTS)}")
    combined: dict[str, Any] = {"variants": {}, "ceiling_beats_compute": {}}
    for name in names:
        overrides, arms = VARIANTS[name]
        settings = GateSettings(arms=arms, runs_per_slice=args.runs_per_slice, **overrides)
        print(f"== {name}: {overrides or 'gate defaults'}; arms {arms}", flush=True)
        summary = run_gate(settings, args.runs, Path(args.out_dir) / name, workers=args.workers)
        summary["command"] = f"OMP_NUM_THREADS=1 python experiments/mbrl/gate_diagnosis.py --variants {name}"
        out = Path(args.out_dir) / f"{name}.json"
        atomic_write_json(out, summary)
        atomic_write_text(out.with_suffix(".md"), gate_table(summary))
        print(gate_report(summary))
        summary["variant_overrides"] = overrides
        combined["variants"][name] = summary
        true_arms = [a for a in summary["arms"] if parse_gate_arm(a)[2]]
        combined["ceiling_beats_compute"][name] = {
            a: summary["paired_iqm_vs_k0"][a]["fixed:0+compute"]["z"] > 2.0 for a in true_arms
        }
    combined["command"] = f"OMP_NUM_THREADS=1 python experiments/mbrl/gate_diagnosis.py --workers 2 --runs {args.runs}"
    atomic_write_json(args.out, combined)
    atomic_write_text(Path(args.out).with_suffix(".md"), table(combined))
    print(table(combined))
    return combined


if __name__ == "__main__":
    main(tyro.cli(Args))
