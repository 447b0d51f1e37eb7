"""The headroom gate end to end at a tiny size: units, summary fields, verdict, resume."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from experiments.meta import headroom
from experiments.sweep import Unit

TINY = {
    "arms": "fixed:0,fixed:2,dec:4",
    "bins": "0:0,-0.6:-0.5",
    "budget": 300,
    "phase_length": 100,
    "learning_starts": 50,
    "batch_size": 16,
    "net_arch": "16",
    "eval_episodes": 1,
    "score_evals": 2,
    "seeds_per_unit": 2,
    "rollout_freq": 100,
    "num_model_rollouts": 16,
}


def _args(tmp_path: Path) -> headroom.Args:
    return headroom.Args(
        **TINY,  # type: ignore[arg-type]
        seeds=2,
        workers=1,
        bootstrap_reps=50,
        out_dir=str(tmp_path / "units"),
        out=str(tmp_path / "headroom.json"),
    )


def test_headroom_gate_end_to_end_and_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = headroom.main(_args(tmp_path))
    saved = json.loads((tmp_path / "headroom.json").read_text())
    assert saved["verdict"] == summary["verdict"] in ("PASS", "FAIL")
    for key in (
        "best_fixed_k_differs",
        "oracle_beats_single_by_2se",
        "cross_fitted_oracle_beats_single",
        "best_arm_differs",
        "verdict_rule",
        "best_fixed_arm_by_bin",
        "single_best_arm",
        "oracle_minus_single",
        "oracle_minus_single_cross_fitted",
        "model_one_step_rmse_by_bin",
        "k0_mean_by_bin",
        "k0_flat",
        "cost",
    ):
        assert key in saved
    assert {"mean_diff", "se", "ci95"} <= set(saved["oracle_minus_single"])
    assert len(saved["bins"]) == 2
    for entry in saved["bins"]:
        assert set(entry["arms"]) == {"fixed:0", "fixed:2", "dec:4"}
        assert {"mean", "mean_ci95", "iqm", "iqm_ci95", "scores"} <= set(entry["arms"]["fixed:0"])
    # K = 0 never uses the model: its runs are the same in every bin; the wrong model's error shows in the RMSE.
    assert saved["k0_flat"] is True
    assert saved["bins"][0]["arms"]["fixed:0"]["scores"] == saved["bins"][1]["arms"]["fixed:0"]["scores"]
    rmse = saved["model_one_step_rmse_by_bin"]
    assert rmse[0] < 1e-5 < 0.05 < rmse[1]
    assert saved["cost"]["core_seconds_per_run"] > 0
    assert len(list((tmp_path / "units").glob("*.json"))) == 2

    def must_not_run(settings: headroom.Settings, unit: Unit) -> dict[str, object]:
        raise AssertionError(f"unit {unit} was saved and must be kept")

    monkeypatch.setattr(headroom, "run_unit", must_not_run)
    again = headroom.main(_args(tmp_path))
    assert again["oracle_minus_single"] == summary["oracle_minus_single"]


def test_bins_and_seed_slices_are_checked() -> None:
    assert headroom.parse_bins("0:0, -0.2:-0.1") == [(0.0, 0.0), (-0.2, -0.1)]
    for bad in ("0.1", "0.2:0.1", "-1:-0.5", ""):
        with pytest.raises(ValueError):
            headroom.parse_bins(bad)
    with pytest.raises(ValueError, match="multiple"):
        headroom.units(headroom.Settings(seeds_per_unit=5), 7, Path("x"))
    # Deltas are drawn per (seed, bin, run): the same for every arm, inside the bin.
    settings = headroom.Settings(bins="0:0,-0.3:-0.2")
    deltas = headroom.run_deltas(settings, 1, 0, 4)
    assert deltas == headroom.run_deltas(settings, 1, 0, 4)
    assert all(-0.3 <= d <= -0.2 for d in deltas) and len(set(deltas)) == 4
    assert headroom.run_deltas(settings, 0, 0, 3) == [0.0, 0.0, 0.0]


def test_cross_fitted_oracle_picks_each_half_on_the_other() -> None:
    """Hand-computed: in bin 0 arm "b" wins on the odd runs only, so the even runs (picked on the odd ones) are scored
    with "b" and the odd runs (picked on the even ones) with "a"; in bin 1 "b" wins on both halves."""
    scores = [
        {"a": np.array([0.0, 0.0, 0.0, 0.0]), "b": np.array([-1.0, 5.0, -1.0, 5.0])},
        {"a": np.array([0.0, 0.0]), "b": np.array([2.0, 4.0])},
    ]
    room = headroom.cross_fitted_oracle(scores, ["a", "b"], "a", seed=0, reps=200)
    # bin 0: evens scored with b (-1, -1), odds with a (0, 0); bin 1: b on both (2, 4); baseline a = 0 everywhere.
    assert room.value == pytest.approx((-1 - 1 + 0 + 0 + 2 + 4) / 6)


def test_the_verdict_needs_the_cross_fitted_margin() -> None:
    """An in-sample oracle that wins only by picking on the runs it scores fails the gate."""
    rng = np.random.default_rng(0)
    settings = headroom.Settings(arms="fixed:0,fixed:2", bins="0:0.1,0.5:0.6")
    records = []
    for b in range(2):
        noise = {arm: rng.normal(0.0, 50.0, size=10) for arm in ("fixed:0", "fixed:2")}
        records.append(
            {
                "bin": b,
                "first_run": 0,
                "runs": 10,
                "deltas": [0.0] * 10,
                "arms": {
                    arm: {"scores": (-200.0 + noise[arm]).tolist(), "one_step_rmse": [[0.0]] * 10}
                    for arm in ("fixed:0", "fixed:2")
                },
                "seconds": 1.0,
                "core_seconds": 1.0,
            }
        )
    summary = headroom.summarize(settings, records, reps=200)
    assert summary["cross_fitted_oracle_beats_single"] is (summary["oracle_minus_single_cross_fitted"]["ci95"][0] > 0)
    assert summary["verdict"] == "FAIL"


def test_protocol_names_compute_matching_only_when_it_is_off() -> None:
    """Units saved before the setting existed were compute-matched and stay reusable; unmatched units never are."""
    matched = headroom.protocol(headroom.Settings())
    assert "compute_matched" not in matched
    assert headroom.protocol(headroom.Settings(compute_matched=False)) == {**matched, "compute_matched": False}


def test_arms_split_between_specs_not_inside_them() -> None:
    settings = headroom.Settings(arms="fixed:0, linear:2,3,32,0,dec:32")
    assert headroom.arm_list(settings) == ["fixed:0", "linear:2,3,32,0", "dec:32"]


def test_acrobot_unit_uses_its_simulator_with_the_error_and_names_the_env(tmp_path: Path) -> None:
    settings = headroom.Settings(
        **{**TINY, "arms": "fixed:0,fixed:2", "bins": "0:0,0.8:0.8", "budget": 200, "seeds_per_unit": 1},  # type: ignore[arg-type]
        env="Acrobot-v1",
    )
    exact = headroom.run_unit(settings, Unit("0", 0, tmp_path / "a.json", group="bin"))
    wrong = headroom.run_unit(settings, Unit("1", 0, tmp_path / "b.json", group="bin"))
    assert exact["protocol"]["env"] == "Acrobot-v1"
    assert "env" not in headroom.protocol(headroom.Settings())  # the discrete Pendulum's units keep their protocol
    # K = 0 never calls the model; K = 2 learns from a model that is exact in bin 0 and off by 0.8 rad in bin 1.
    assert exact["arms"]["fixed:0"]["scores"] == wrong["arms"]["fixed:0"]["scores"]
    assert (
        max(exact["arms"]["fixed:2"]["one_step_rmse"][0])
        < 1e-5
        < 0.05
        < min(wrong["arms"]["fixed:2"]["one_step_rmse"][0])
    )
    with pytest.raises(ValueError, match="exact simulators"):
        headroom.nominal_model("MountainCar-v0")
