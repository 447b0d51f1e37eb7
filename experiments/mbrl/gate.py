"""The gate: do imagined rollouts help Dyna-DQN at all?

Before any meta-controller is trained to choose the rollout length K, some K > 0 must beat K = 0. On Acrobot-v1 with a
20k env-step budget and phases of 2k steps, every arm below trains ``runs`` paired inner runs (run i of every arm
shares its seed: network init, env resets, exploration stream) in batched Dyna-DQN learners, all driven through the
one rollout-length driver (:class:`mbrl.phases.RolloutLengthDriver`):

* ``fixed:K`` for K in {0, 1, 2, 4, 8, 16}: K = 0 is plain DQN (rl-zoo settings); K > 0 mixes imagined data into
  every minibatch and makes the extra updates on it;
* ``incdec:16``: INC-DEC (Bhatia, Thomas & Zilberstein 2022) up to 16;
* ``fixed:0+compute``: K = 0 given the same extra gradient updates as the model arms, on real data (compute-matched);
* ``fixed:8+true``: K = 8 with the environment's own dynamics as the "model" (the ceiling of what a perfect model
  gives this learner).

Every arm is scored at the same point of its cycle: the greedy policy after the last env step, over
``final_episodes`` episodes. Reported per arm (rliable): mean, median, IQM and the fraction of runs that solve the
task (mean greedy return >= -100, gymnasium's reward threshold for Acrobot), with 95% stratified-bootstrap
intervals; and for every K > 0 arm the paired difference in IQM against both K = 0 arms with its paired-bootstrap
standard error. The gate passes when the best K > 0 arm beats *both* K = 0 arms by more than two paired standard
errors in IQM. Model error per horizon is recorded (disagreement at each rollout step, model-vs-real return error).

Runs are split into slices (``--runs-per-slice``) saved to ``results/gate/`` one by one, so a killed run loses only
the slice in progress and a rerun skips finished slices; ``--workers`` runs slices side by side. The gate's logic
(settings, arms, slices, summary, table) is :mod:`experiments.mbrl.gate_protocol`'s; this script is its command line
and its files.

    OMP_NUM_THREADS=1 python experiments/mbrl/gate.py --workers 2     # -> experiments/mbrl/results/gate.json
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.mbrl.gate_protocol import GateSettings, gate_report, gate_table, run_gate
from experiments.mbrl.sample_efficiency_stats import BOOTSTRAP_REPS
from rolloutlab.checkpoint import atomic_write_json, atomic_write_text

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Args(GateSettings):
    """The gate's command line: the protocol (:class:`~experiments.mbrl.gate_protocol.GateSettings`) and what does not
    change a run."""

    runs: int = 20
    """paired runs per arm"""
    workers: int = 1
    """slices run side by side in worker processes"""
    bootstrap_reps: int = BOOTSTRAP_REPS
    """bootstrap resamples for intervals and paired standard errors"""
    out_dir: str = str(RESULTS / "gate")
    """where slices are saved"""
    out: str = str(RESULTS / "gate.json")
    """the summary"""


def command_line(args: Args) -> str:
    """The command that reproduces ``args``: the settings that differ from the defaults, as tyro's flags."""
    parts = ["OMP_NUM_THREADS=1 python experiments/mbrl/gate.py --workers 2", f"--runs {args.runs}"]
    for field in dataclasses.fields(Args):
        value, default = getattr(args, field.name), field.default
        if field.name in ("runs", "workers") or value == default:
            continue
        flag = "--" + field.name.replace("_", "-")
        if isinstance(value, bool):
            parts.append(flag if value else "--no-" + field.name.replace("_", "-"))
        else:
            out = str(value)
            root = str(RESULTS.parent.parent.parent) + "/"
            parts.append(f"{flag} {out[len(root) :] if out.startswith(root) else out}")
    return " ".join(parts)


def main(args: Args) -> dict[str, Any]:
    """Run (or resume) the gate; write ``--out`` (the summary) and the table beside it (``.md``)."""
    summary = run_gate(args, args.runs, Path(args.out_dir), workers=args.workers, bootstrap_reps=args.bootstrap_reps)
    summary["command"] = command_line(args)
    atomic_write_json(args.out, summary)
    atomic_write_text(Path(args.out).with_suffix(".md"), gate_table(summary))
    print(gate_report(summary))
    return summary


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
