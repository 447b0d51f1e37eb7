r"""Do the speed options change what the learners learn? Short re-runs under the options against the committed results.

* **Pendulum MBPO** (``sample_efficiency_Pendulum-v1_fast.json``: the ``mbpo:fixed:1`` arm with ``sac.backend: sbx``,
  fused model fits and ``min_train_epochs: 20``, 10 seeds) against the committed default arm
  (``sample_efficiency_Pendulum-v1.json``, the same seeds): steps to the -200 threshold, the paired difference per seed
  (fast minus default) with a paired-bootstrap 95% interval of its median, and each arm's median with its interval.
* **bf16 on Pendulum MBPO** (``sample_efficiency_Pendulum-v1_fast_bf16.json``: the same fast options plus
  ``model.precision: bf16``) against the fast options alone, paired the same way.
* **The Dyna gate at 8k steps** (``gate_8k_converged_batched.json``: the committed gate's command with
  ``--batched-models``, its first 20 runs) against the committed per-run gate's first 20 runs (``gate_8k_converged``,
  the same run seeds): per arm the IQM with its interval for both, the paired difference in IQM with its interval, and
  the verdict (best learned-model arm two paired standard errors above both K = 0 arms) of each on the same 20 runs.

The float32 PETS re-run is committed on its own (``pets_float32.json``). The verdict per comparison is "unchanged" when
the interval of the paired difference contains 0.

    python experiments/mbrl/speed_options_check.py     # -> experiments/mbrl/results/speed_options_check.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.mbrl.gate_protocol import summarize_gate
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.statistics import iqm, paired_difference

RESULTS = Path(__file__).resolve().parent / "results"
REPS = 9999


def _interval(estimate: Any) -> list[float]:
    return [float(estimate.low), float(estimate.high)]


def pendulum_mbpo(committed: dict[str, Any], fast: dict[str, Any], arm: str = "mbpo:fixed:1") -> dict[str, Any]:
    """Steps to threshold of ``arm`` in a reference file (``committed``) and a file under options (``fast``), paired
    by seed; ``options`` are the MBPO overrides of the latter."""
    seeds = sorted(s for s in fast["entry"]["seeds"] if s in committed["entry"]["seeds"])
    a = dict(zip(committed["entry"]["seeds"], committed["entry"]["arms"][arm]["steps_to_threshold"], strict=True))
    b = dict(zip(fast["entry"]["seeds"], fast["entry"]["arms"][arm]["steps_to_threshold"], strict=True))
    default = np.array([a[s] for s in seeds], dtype=float)
    options = np.array([b[s] for s in seeds], dtype=float)
    diff = paired_difference(options, default, statistic=np.median, rng=0, n_resamples=REPS)
    return {
        "arm": arm,
        "seeds": seeds,
        "options": fast["settings"]["mbpo"],
        "default_steps": default.tolist(),
        "options_steps": options.tolist(),
        "default_median": float(np.median(default)),
        "options_median": float(np.median(options)),
        "median_difference": float(diff.value),
        "median_difference_ci95": _interval(diff),
        "unchanged": bool(diff.low <= 0 <= diff.high),
    }


def dyna_gate(committed: dict[str, Any], batched: dict[str, Any], seed: int, reps: int) -> dict[str, Any]:
    """The batched gate against the committed gate's runs with the same indices (the first ``n``)."""
    arms = list(batched["arms"])
    n = len(batched["arms"][arms[0]]["finals"])
    per_run = {arm: np.asarray(committed["arms"][arm]["finals"][:n]) for arm in arms}
    with_axis = {arm: np.asarray(batched["arms"][arm]["finals"]) for arm in arms}
    before, after = summarize_gate(per_run, seed, reps), summarize_gate(with_axis, seed, reps)
    rows: dict[str, Any] = {}
    for arm in arms:
        diff = paired_difference(with_axis[arm], per_run[arm], statistic=iqm, rng=seed, n_resamples=reps)
        rows[arm] = {
            "per_run_iqm": before["arms"][arm]["iqm"],
            "per_run_iqm_ci95": before["arms"][arm]["iqm_ci95"],
            "batched_iqm": after["arms"][arm]["iqm"],
            "batched_iqm_ci95": after["arms"][arm]["iqm_ci95"],
            "iqm_difference": float(diff.value),
            "iqm_difference_ci95": _interval(diff),
            "unchanged": bool(diff.low <= 0 <= diff.high),
        }
    return {
        "runs": n,
        "arms": rows,
        "per_run_verdict": {"best_model_arm": before["best_model_arm"], "gate_passed": before["gate_passed"]},
        "batched_verdict": {"best_model_arm": after["best_model_arm"], "gate_passed": after["gate_passed"]},
        "per_run_paired_iqm_vs_k0": before["paired_iqm_vs_k0"],
        "batched_paired_iqm_vs_k0": after["paired_iqm_vs_k0"],
    }


def main() -> dict[str, Any]:
    read = lambda name: json.loads((RESULTS / name).read_text())  # noqa: E731
    gate = read("gate_8k_converged.json")
    report = {
        "command": "python experiments/mbrl/speed_options_check.py",
        "pendulum_mbpo": pendulum_mbpo(
            read("sample_efficiency_Pendulum-v1.json"), read("sample_efficiency_Pendulum-v1_fast.json")
        ),
        # bf16 on top of the fast options, against the fast options alone: the effect of the precision by itself.
        "pendulum_mbpo_bf16": pendulum_mbpo(
            read("sample_efficiency_Pendulum-v1_fast.json"), read("sample_efficiency_Pendulum-v1_fast_bf16.json")
        ),
        "dyna_gate_8k": dyna_gate(gate, read("gate_8k_converged_batched.json"), seed=2, reps=2000),
        "pets_float32": "experiments/mbrl/results/pets_float32.json",
    }
    atomic_write_json(RESULTS / "speed_options_check.json", report)
    return report


if __name__ == "__main__":
    out = main()
    print(json.dumps({k: v for k, v in out["pendulum_mbpo"].items() if "steps" not in k}, indent=1))
