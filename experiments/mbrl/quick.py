"""The mbrl pillar's line in ``rolloutlab bench``: the sample-efficiency comparison at a small size."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from experiments.mbrl.arms import SAC_SAME_UTD, SAC_UTD1, ArmSettings, run_arm
from experiments.mbrl.sample_efficiency_stats import summarize_threshold
from rolloutlab.bench import BenchLine
from rolloutlab.checkpoint import atomic_write_json

#: One seed keeps the suite inside its five minutes: the line has no target (it records the number only), so a second
#: seed would buy a bootstrap interval for a number nothing judges.
QUICK_SEEDS = (0,)
#: The point mass's threshold per 30-step episode.
QUICK_THRESHOLD = -5.0
QUICK_ARMS = ("mbpo:fixed:3", SAC_SAME_UTD, SAC_UTD1)
FULL_COMMAND = "OMP_NUM_THREADS=1 nice -n 5 python experiments/mbrl/sample_efficiency.py --env-id Pendulum-v1"
#: Wall seconds on an idle 2-core machine (the progress bar's estimate): three runs of 300 steps.
EXPECTED_SECONDS = 35.0


def quick_settings(budget: int = 300) -> ArmSettings:
    """The quick benchmark's arm settings: the protocol's, on the point mass, with a small MBPO model and data scale.

    The evaluation period, warm-up, MBPO epoch and rollout batch are scaled to the 30-step point mass; every other
    setting is :class:`ArmSettings`'s.
    """
    return ArmSettings(
        env_id="rolloutlab/PointMass-v0",
        budget=budget,
        eval_every=30,
        initial_random_steps=60,
        mbpo={
            "epoch_length": 30,
            "model_train_freq": 30,
            "rollout_batch_size": 400,
            "model": {"ensemble_size": 5, "num_elites": 3, "hidden_size": 64, "num_layers": 2, "max_epochs": 30},
        },
    )


def quick_bench(out_dir: Path) -> list[BenchLine]:
    """``rolloutlab bench --only mbrl``: MBPO vs SAC on the point mass (1 seed x 3 arms, 300 env steps).

    The full benchmark (Pendulum-v1, InvertedPendulum-v5, 10 seeds) takes far longer than a bench slot, so the quick
    version runs three arms (``mbpo:fixed:3``, SAC at the same updates per step, SAC at one update per step) on the
    point-mass toy (``rolloutlab/PointMass-v0``). It reports the measured ratio of steps-to-threshold (best SAC arm /
    MBPO); the targets (SAC at one update per step / MBPO >= 5, best SAC / MBPO >= 1) are for the full benchmark, so
    this line only records the number.
    """
    started = time.perf_counter()
    settings = quick_settings()
    runs = [run_arm(arm, settings, seed) for seed in QUICK_SEEDS for arm in QUICK_ARMS]
    entry = summarize_threshold(settings.env_id, QUICK_THRESHOLD, settings.budget, runs, np.random.default_rng(0))
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out_dir / "quick_sample_efficiency.json", {"entry": entry, "runs": runs})
    best = entry["ratio_best_sac_over_mbpo"]
    utd1 = entry["ratio_sac_utd1_over_mbpo"]
    return [
        BenchLine(
            pillar="mbrl",
            benchmark=f"PointMass-v0 {settings.budget} steps, seed(s) {list(QUICK_SEEDS)}: MBPO vs SAC "
            f"(G={settings.updates_per_step})",
            metric="steps-to-threshold ratio best SAC / MBPO",
            value=best["value"] if best else None,
            target="full benchmark on Pendulum/InvertedPendulum: sac_utd1 / MBPO >= 5, best SAC / MBPO >= 1 "
            "(quick size records the number only)",
            passed=None,
            seconds=time.perf_counter() - started,
            command=FULL_COMMAND,
            details={
                "ratio_ci": best["ci"] if best else None,
                "ratio_sac_utd1_over_mbpo": {"value": utd1["value"], "ci": utd1["ci"]} if utd1 else None,
                "median_steps": {arm: entry["arms"][arm]["median_steps"] for arm in entry["arms"]},
                "final_return": {arm: entry["arms"][arm]["final_return"] for arm in entry["arms"]},
            },
        )
    ]
