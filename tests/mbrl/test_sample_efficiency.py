"""Steps-to-threshold, medians with never-reached runs, the bootstrap ratio and the summary entry schema."""

from __future__ import annotations

import numpy as np
import pytest

from mbrl.sample_efficiency import median_steps, ratio_with_interval, steps_to_threshold, summarize_env


def test_steps_to_threshold() -> None:
    evals = [[250, -900.0], [500, -210.0], [750, -200.0], [1000, -150.0]]
    assert steps_to_threshold(evals, -200.0) == 750
    assert steps_to_threshold(evals, -100.0) is None
    assert median_steps([500, None, 1000], budget=5000) == 1000.0
    assert median_steps([None, None, 1000], budget=5000) == 5000.0


def test_ratio_and_interval() -> None:
    rng = np.random.default_rng(0)
    ratio, (low, high) = ratio_with_interval(
        {"sac_same_utd": [3000, 3000, 3000], "sac_default": [4000, None, 5000]}, [1000, 1000, 1000], 5000, rng, 500
    )
    assert ratio == pytest.approx(3.0)  # best SAC arm (3000) over MBPO (1000); identical seeds -> no spread
    assert low == pytest.approx(3.0) and high == pytest.approx(3.0)
    ratio, (low, high) = ratio_with_interval({"sac": [2000, 4000, 6000]}, [1000, 2000, 3000], 10_000, rng, 2000)
    assert ratio == pytest.approx(2.0) and low < 2.0 < high


def test_summary_entry_schema() -> None:
    runs = []
    for seed in (0, 1):
        runs.append(
            {
                "arm": "mbpo",
                "seed": seed,
                "eval": [[250, -300.0], [500, -150.0]],
                "final_return": -150.0,
                "seconds_per_1k_steps": 10.0,
            }
        )
        runs.append(
            {
                "arm": "sac_default",
                "seed": seed,
                "eval": [[250, -900.0], [500, -800.0]],
                "final_return": -800.0,
                "seconds_per_1k_steps": 2.0,
            }
        )
    runs.append({"arm": "mbpo", "seed": 2, "eval": [[250, 0.0]], "final_return": 0.0, "seconds_per_1k_steps": 1.0})
    entry = summarize_env("Pendulum-v1", -200.0, 500, runs, np.random.default_rng(0))
    assert entry["seeds"] == [0, 1]  # seed 2 lacks a SAC run, so it is left out of the comparison
    assert set(entry) >= {"env", "threshold", "budget", "seeds", "arms", "ratio_best_sac_over_mbpo", "ratio_ci"}
    mbpo, sac = entry["arms"]["mbpo"], entry["arms"]["sac_default"]
    assert mbpo["steps_to_threshold"] == [500, 500] and mbpo["median_steps"] == 500.0
    assert sac["steps_to_threshold"] == [None, None] and sac["median_steps"] == 500.0 and sac["never_reached"] == 2
    assert sac["final_return"] == [-800.0, -800.0]
    assert entry["ratio_best_sac_over_mbpo"] == pytest.approx(1.0)
    assert entry["never_reached_counts_as_budget"] is True


def test_ratio_by_sac_arm_reports_each_arm_next_to_the_best() -> None:
    def run(arm: str, seed: int, reached_at: int) -> dict[str, object]:
        return {"arm": arm, "seed": seed, "eval": [[reached_at, 0.0]], "final_return": 0.0, "seconds_per_1k_steps": 1.0}

    runs = [run("mbpo", s, 1000) for s in range(3)]
    runs += [run("sac_same_utd", s, 2000) for s in range(3)] + [run("sac_default", s, 6000) for s in range(3)]
    entry = summarize_env("Pendulum-v1", -1.0, 10_000, runs, np.random.default_rng(0))
    assert entry["ratio_best_sac_over_mbpo"] == pytest.approx(2.0)  # the faster SAC arm sets the headline
    by_arm = entry["ratio_by_sac_arm"]
    assert by_arm["sac_same_utd"]["ratio"] == pytest.approx(2.0)
    assert by_arm["sac_default"]["ratio"] == pytest.approx(6.0) and by_arm["sac_default"]["ci"] == [6.0, 6.0]
