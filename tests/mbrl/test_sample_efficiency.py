"""The sample-efficiency benchmark of "The model must pay off": arm names, steps to threshold, the two target ratios and
their ``met`` flags, HalfCheetah's paired difference, round one's mapping, resumable collection and the script's
settings (pure functions on hand-made curves, plus tiny real runs on the point mass and, ``slow``, HalfCheetah)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from script_modules import load_script

from experiments.mbrl.arms import (
    PROTOCOL,
    ArmSettings,
    ArmStorage,
    arm_settings,
    collect_runs,
    mbpo_config,
    mbpo_controller,
    parse_arms,
    run_arm,
    run_file,
)
from experiments.mbrl.sample_efficiency_stats import (
    bootstrap_ratio,
    final_return_difference,
    median_censored,
    median_steps,
    steps_to_threshold,
    summarize_final,
    summarize_threshold,
)
from experiments.mbrl.summary import build_summary, markdown, round_one_runs
from mbrl.algorithms.mbpo import MBPOConfig

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ROOT / "experiments" / "mbrl"
ROUND_ONE_FILE = EXPERIMENTS / "results" / "sample_efficiency_Pendulum-v1_g10.json"


def _curve(reached_at: int | None, budget: int, every: int = 100, low: float = -1000.0, high: float = -100.0):
    """An eval curve below the threshold (-200) until ``reached_at`` and above it from there (never if ``None``)."""
    return [[s, high if reached_at is not None and s >= reached_at else low] for s in range(every, budget + 1, every)]


def _run(arm: str, seed: int, reached_at: int | None, budget: int = 5000, seconds: float = 10.0) -> dict[str, Any]:
    curve = _curve(reached_at, budget)
    return {
        "arm": arm,
        "seed": seed,
        "eval": curve,
        "final_step": curve[-1][0],
        "final_return": curve[-1][1],
        "seconds": seconds,
        "eval_seconds": 1.0,
        "seconds_per_1k_steps": 1000.0 * seconds / budget,
    }


# --- arm names --------------------------------------------------------------------------------------------------


def test_parse_arms_keeps_controller_specs_whole() -> None:
    assert parse_arms("mbpo:fixed:1,mbpo:fixed:3,sac_same_utd,sac_utd1") == [
        "mbpo:fixed:1",
        "mbpo:fixed:3",
        "sac_same_utd",
        "sac_utd1",
    ]
    assert parse_arms("mbpo:linear:20,100,1,15, sac_utd1") == ["mbpo:linear:20,100,1,15", "sac_utd1"]
    assert mbpo_controller("mbpo:linear:20,100,1,15") == "linear:20,100,1,15"
    assert ":" not in run_file(Path("p"), "mbpo:fixed:1", 3).name
    assert run_file(Path("p"), "mbpo:fixed:1", 3) != run_file(Path("p"), "mbpo:fixed:3", 1)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mbpo,sac_same_utd", "mbpo is now mbpo:fixed:1"),  # round one's names are refused with the new ones
        ("sac_default", "sac_default is sac_utd1"),
        ("mbpo:nosuch:1", "nosuch"),
        ("mbpo:fixed:1,sac_utd1,mbpo:fixed:1", "twice"),
        ("sac", "unknown arm"),
        ("", "no arms"),
    ],
)
def test_parse_arms_rejects(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_arms(text)


# --- steps to threshold and the two target ratios ---------------------------------------------------------------


def test_steps_to_threshold_and_medians() -> None:
    evals = [[100, -900.0], [200, -210.0], [300, -200.0], [400, -150.0]]
    assert steps_to_threshold(evals, -200.0) == 300
    assert steps_to_threshold(evals, -100.0) is None
    assert median_steps([500, None, 1000], budget=5000) == 1000.0
    assert median_steps([None, None, 1000], budget=5000) == 5000.0
    assert median_censored([None, None, 1000]) and median_censored([None, 100]) and not median_censored([None, 1, 2])


def test_bootstrap_ratio_rechooses_the_best_arm_and_spreads_with_the_seeds() -> None:
    rng = np.random.default_rng(0)
    ratio, (low, high) = bootstrap_ratio(
        {"a": [3000, 3000, 3000], "b": [4000, None, 5000]}, {"m": [1000, 1000, 1000]}, 5000, rng, 500
    )
    assert ratio == pytest.approx(3.0) and low == pytest.approx(3.0) and high == pytest.approx(3.0)
    ratio, (low, high) = bootstrap_ratio({"a": [2000, 4000, 6000]}, {"m": [1000, 2000, 3000]}, 10_000, rng, 2000)
    assert ratio == pytest.approx(2.0) and low < 2.0 < high
    # The best denominator arm is chosen again in every resample: with two MBPO arms the ratio can only fall.
    one, _ = bootstrap_ratio({"a": [2000] * 3}, {"m": [1000, 2000, 3000]}, 10_000, rng, 200)
    two, interval = bootstrap_ratio({"a": [2000] * 3}, {"m": [1000, 2000, 3000], "n": [500] * 3}, 10_000, rng, 200)
    assert one == pytest.approx(1.0) and two == pytest.approx(4.0) and interval == pytest.approx([4.0, 4.0])


def test_target_ratios_and_met_flags_from_hand_made_curves() -> None:
    reached: dict[str, int | None] = {"mbpo:fixed:1": 500, "mbpo:fixed:3": 800, "sac_same_utd": 400, "sac_utd1": 3000}
    runs = [_run(arm, seed, at) for seed in range(3) for arm, at in reached.items()]
    entry = summarize_threshold("Pendulum-v1", -200.0, 5000, runs, np.random.default_rng(0))
    assert list(entry["arms"]) == list(reached)
    assert entry["arms"]["sac_utd1"]["steps_to_threshold"] == [3000, 3000, 3000]
    assert entry["mbpo_arm"] == "mbpo:fixed:1"  # the lower median of the two MBPO arms
    utd1 = entry["ratio_sac_utd1_over_mbpo"]
    assert utd1["value"] == pytest.approx(6.0) and utd1["ci"] == pytest.approx([6.0, 6.0])
    assert utd1["target"] == 5.0 and utd1["met"] is True and utd1["ci_low_meets_target"] is True
    assert utd1["mbpo_arm"] == "mbpo:fixed:1" and utd1["sac_arm"] == "sac_utd1"
    best = entry["ratio_best_sac_over_mbpo"]
    assert best["value"] == pytest.approx(0.8) and best["sac_arm"] == "sac_same_utd"
    assert best["target"] == 1.0 and best["met"] is False
    # Every MBPO arm alone as well: fixed:3 misses the 5x target that fixed:1 meets.
    by_arm = entry["ratios_by_mbpo_arm"]["mbpo:fixed:3"]
    assert by_arm["ratio_sac_utd1_over_mbpo"]["value"] == pytest.approx(3.75)
    assert by_arm["ratio_sac_utd1_over_mbpo"]["met"] is False
    assert by_arm["ratio_best_sac_over_mbpo"]["value"] == pytest.approx(0.5)
    assert entry["arms"]["mbpo:fixed:1"]["seconds"] == [10.0, 10.0, 10.0]
    assert entry["arms"]["mbpo:fixed:1"]["seconds_median"] == 10.0

    # SAC at one update never gets there and the same-UTD SAC is slower than MBPO: both targets met, the first one as
    # a lower bound (its median is the budget).
    reached.update(sac_same_utd=600, sac_utd1=None)
    runs = [_run(arm, seed, at) for seed in range(3) for arm, at in reached.items()]
    entry = summarize_threshold("Pendulum-v1", -200.0, 5000, runs, np.random.default_rng(0))
    utd1, best = entry["ratio_sac_utd1_over_mbpo"], entry["ratio_best_sac_over_mbpo"]
    assert utd1["value"] == pytest.approx(10.0) and utd1["met"] and utd1["censored"] == {"sac": True, "mbpo": False}
    assert best["value"] == pytest.approx(1.2) and best["met"] is True
    assert entry["arms"]["sac_utd1"]["never_reached"] == 3


def test_met_reads_the_point_ratio_and_the_interval_is_reported_beside_it() -> None:
    runs = [_run("mbpo:fixed:1", s, at) for s, at in enumerate([400, 500, 1500])]
    runs += [_run("sac_utd1", s, at) for s, at in enumerate([1000, 2500, 4000])]
    entry = summarize_threshold("Pendulum-v1", -200.0, 5000, runs, np.random.default_rng(0))
    utd1 = entry["ratio_sac_utd1_over_mbpo"]
    assert utd1["value"] == pytest.approx(5.0) and utd1["met"] is True
    assert utd1["ci"][0] < 5.0 and utd1["ci_low_meets_target"] is False


def test_only_seeds_every_arm_has_are_compared() -> None:
    runs = [_run("mbpo:fixed:1", s, 500) for s in (0, 1, 2)] + [_run("sac_utd1", s, 1000) for s in (0, 1)]
    entry = summarize_threshold("Pendulum-v1", -200.0, 5000, runs, np.random.default_rng(0))
    assert entry["seeds"] == [0, 1] and entry["arms"]["mbpo:fixed:1"]["steps_to_threshold"] == [500, 500]
    assert entry["ratio_sac_same_utd_over_mbpo"] is None  # no such arm: no ratio, no error
    with pytest.raises(ValueError, match="round_one_runs"):
        summarize_threshold("Pendulum-v1", -200.0, 5000, [_run("mbpo", 0, 500)], np.random.default_rng(0))


# --- HalfCheetah: paired difference of final returns ------------------------------------------------------------


def test_final_return_difference() -> None:
    rng = np.random.default_rng(0)
    one = final_return_difference([1700.0], [40.0], rng)
    assert one["mean"] == 1660.0 and not one["met"] and "too few seeds" in one["verdict"]
    up = final_return_difference([110.0, 120.0, 130.0], [100.0, 100.0, 100.0], rng)
    assert up["differences"] == [10.0, 20.0, 30.0] and up["mean"] == pytest.approx(20.0)
    assert 10.0 <= up["ci"][0] < 20.0 < up["ci"][1] <= 30.0 and up["met"] is True
    mixed = final_return_difference([100.0, 130.0, 95.0], [100.0, 100.0, 100.0], rng)
    assert mixed["mean"] > 0 and mixed["ci"][0] < 0 < mixed["ci"][1] and mixed["met"] is False
    down = final_return_difference([80.0, 85.0, 90.0], [100.0, 100.0, 100.0], rng)
    assert down["ci"][1] < 0 and down["met"] is False  # excludes zero, but on the wrong side


def test_summarize_final_pairs_by_seed_and_picks_the_best_mbpo_arm() -> None:
    def run(arm: str, seed: int, final: float, step: int = 30_000) -> dict[str, Any]:
        curve = [[15_000, 0.0], [step, final]]
        return {"arm": arm, "seed": seed, "eval": curve, "final_step": step, "final_return": final, "seconds": 60.0}

    finals = {
        "mbpo:fixed:1": {0: 5000.0, 1: 3000.0, 2: 4000.0},
        "mbpo:fixed:3": {0: 2000.0, 1: 2000.0, 2: 2000.0},
        "sac_same_utd": {0: 4000.0, 1: 1000.0, 2: 3000.0},
    }
    # Records in an order where pairing by position would pair other seeds.
    runs = [run(arm, seed, finals[arm][seed]) for arm in finals for seed in ((2, 0, 1) if "sac" in arm else (0, 1, 2))]
    for r in runs:
        r["seconds_per_1k_steps"] = 2.0
    entry = summarize_final("HalfCheetah-v5", 30_000, runs, np.random.default_rng(0))
    assert entry["mode"] == "final_return" and entry["seeds"] == [0, 1, 2] and entry["final_eval_at_budget"] is True
    assert entry["mbpo_arm"] == "mbpo:fixed:1"
    diff = entry["mbpo_minus_sac_same_utd"]
    assert diff["differences"] == [1000.0, 2000.0, 1000.0] and diff["mean"] == pytest.approx(4000.0 / 3)
    assert diff["ci"][0] >= 1000.0 and diff["met"] is True and diff["mbpo_arm"] == "mbpo:fixed:1"
    other = entry["mbpo_minus_sac_same_utd_by_mbpo_arm"]["mbpo:fixed:3"]
    assert other["differences"] == [-2000.0, 1000.0, -1000.0] and other["met"] is False
    runs[0] = run("mbpo:fixed:1", 0, 5000.0, step=29_000)
    runs[0]["seconds_per_1k_steps"] = 2.0
    assert summarize_final("HalfCheetah-v5", 30_000, runs, np.random.default_rng(0))["final_eval_at_budget"] is False
    assert "mbpo_minus_sac_utd1" not in entry  # no sac_utd1 arm, no context entry
    utd1 = {0: 4500.0, 1: 2500.0, 2: 4200.0}
    runs += [{**run("sac_utd1", seed, final), "seconds_per_1k_steps": 1.0} for seed, final in utd1.items()]
    context = summarize_final("HalfCheetah-v5", 30_000, runs, np.random.default_rng(0))["mbpo_minus_sac_utd1"]
    # Paired by seed against the best MBPO arm; context only, so no target verdict.
    assert context["mbpo_arm"] == "mbpo:fixed:1" and context["differences"] == [500.0, 500.0, -200.0]
    assert "met" not in context and context["ci"][0] < 0 < context["ci"][1]


# --- round one --------------------------------------------------------------------------------------------------


def test_round_one_mapping_keeps_the_old_numbers_under_new_names() -> None:
    data = json.loads(ROUND_ONE_FILE.read_text())
    assert "protocol" not in data  # round one's file, committed before this protocol
    runs = round_one_runs(data["runs"], data["args"]["controller"])
    assert {r["arm"] for r in runs} == {"mbpo:fixed:1", "sac_same_utd", "sac_utd1"}
    assert {r["round_one_arm"] for r in runs} == {"mbpo", "sac_same_utd", "sac_default"}
    a = data["args"]
    entry = summarize_threshold(a["env_id"], a["threshold"], a["budget"], runs, np.random.default_rng(0), targets=False)
    old = data["entry"]["arms"]
    assert entry["arms"]["mbpo:fixed:1"]["steps_to_threshold"] == old["mbpo"]["steps_to_threshold"]
    assert entry["arms"]["sac_utd1"]["median_steps"] == old["sac_default"]["median_steps"]
    for key in ("ratio_sac_utd1_over_mbpo", "ratio_best_sac_over_mbpo"):
        assert "met" not in entry[key] and "target" not in entry[key]  # never read against this protocol's targets
    with pytest.raises(ValueError, match="round-one arm"):
        round_one_runs([{"arm": "sac_utd1"}], "fixed:1")


def test_summary_keeps_round_one_apart_from_this_protocol(tmp_path: Path) -> None:
    shutil.copy(ROUND_ONE_FILE, tmp_path / ROUND_ONE_FILE.name)
    settings = {"env_id": "Pendulum-v1", "budget": 5000}
    new_runs = [_run(arm, s, at) for s in range(2) for arm, at in (("mbpo:fixed:1", 500), ("sac_utd1", 3000))]
    new = {"protocol": PROTOCOL, "mode": "threshold", "threshold": -200.0, "command": "python x", "settings": settings}
    (tmp_path / "sample_efficiency_Pendulum-v1.json").write_text(json.dumps({**new, "runs": new_runs}))
    hc_runs = [
        {**_run(arm, s, None, budget=1000), "final_return": final}
        for s in range(2)
        for arm, final in (("mbpo:fixed:1", 10.0 + s), ("sac_same_utd", 5.0))
    ]
    hc = {**new, "mode": "final_return", "threshold": None, "settings": {"env_id": "HalfCheetah-v5", "budget": 1000}}
    (tmp_path / "sample_efficiency_HalfCheetah-v5.json").write_text(json.dumps({**hc, "runs": hc_runs}))

    summary = build_summary(tmp_path, bootstrap_reps=50)
    assert set(summary) == {
        "protocol",
        "sample_efficiency",
        "halfcheetah",
        "costs",
        "aggregate_iqm_final_return",
        "round_one",
        "sources",
    }
    (entry,) = summary["sample_efficiency"]
    assert entry["source"] == "sample_efficiency_Pendulum-v1.json" and entry["seeds"] == [0, 1]
    assert entry["ratio_sac_utd1_over_mbpo"]["value"] == pytest.approx(6.0) and entry["ratio_sac_utd1_over_mbpo"]["met"]
    assert summary["halfcheetah"]["mbpo_minus_sac_same_utd"]["differences"] == [5.0, 6.0]
    assert ROUND_ONE_FILE.name not in summary["sources"] and set(summary["costs"]) == {"Pendulum-v1", "HalfCheetah-v5"}
    (old,) = summary["round_one"]["sample_efficiency"]
    assert "superseded" in summary["round_one"]["label"] and old["source"] == ROUND_ONE_FILE.name
    assert old["round_one_arm_names"] == {
        "mbpo": "mbpo:fixed:1",
        "sac_same_utd": "sac_same_utd",
        "sac_default": "sac_utd1",
    }
    assert old["seeds"] == [0, 1, 2, 3, 4] and "met" not in old["ratio_sac_utd1_over_mbpo"]
    md = markdown(summary)
    assert md.index("## Round one") > md.index("HalfCheetah-v5")  # round one comes last, under its own heading

    # Two files of this protocol for one env: the summary refuses to choose.
    shutil.copy(tmp_path / "sample_efficiency_Pendulum-v1.json", tmp_path / "sample_efficiency_Pendulum-v1_b.json")
    with pytest.raises(ValueError, match="pick one"):
        build_summary(tmp_path, bootstrap_reps=50)


# --- resumable collection ---------------------------------------------------------------------------------------


def test_collect_runs_resumes_after_the_last_finished_run(tmp_path: Path) -> None:
    settings = ArmSettings(env_id="Pendulum-v1", budget=300)
    calls: list[tuple[str, int]] = []
    kill_at = {("sac_utd1", 1)}

    def fake(arm: str, s: ArmSettings, seed: int) -> dict[str, Any]:
        if (arm, seed) in kill_at:
            kill_at.clear()
            raise KeyboardInterrupt  # the benchmark is killed in the middle of seed 1
        calls.append((arm, seed))
        return {**_run(arm, seed, 200, budget=300), "protocol": PROTOCOL, "settings": arm_settings(s, arm)}

    arms = ["mbpo:fixed:1", "sac_utd1"]
    with pytest.raises(KeyboardInterrupt):
        collect_runs(arms, [0, 1], settings, tmp_path, run=fake)
    assert calls == [("mbpo:fixed:1", 0), ("sac_utd1", 0), ("mbpo:fixed:1", 1)]
    assert len(list(tmp_path.glob("*.json"))) == 3  # each finished run was saved at once
    calls.clear()
    seen: list[int] = []
    runs = collect_runs(arms, [0, 1, 2], settings, tmp_path, run=fake, on_run=lambda r, rs: seen.append(len(rs)))
    assert calls == [("sac_utd1", 1), ("mbpo:fixed:1", 2), ("sac_utd1", 2)]  # finished runs are not run again
    assert seen == [4, 5, 6] and [(r["arm"], r["seed"]) for r in runs][:3] == [
        ("mbpo:fixed:1", 0),
        ("sac_utd1", 0),
        ("mbpo:fixed:1", 1),
    ]


def test_collect_runs_refuses_runs_of_other_settings(tmp_path: Path) -> None:
    settings = ArmSettings(env_id="Pendulum-v1", budget=300)

    def fake(arm: str, s: ArmSettings, seed: int) -> dict[str, Any]:
        return {**_run(arm, seed, 200, budget=300), "protocol": PROTOCOL, "settings": arm_settings(s, arm)}

    collect_runs(["mbpo:fixed:1", "sac_utd1"], [0], settings, tmp_path, run=fake)
    # An MBPO-only setting does not touch the SAC arm's runs, but does the MBPO arm's.
    other = ArmSettings(env_id="Pendulum-v1", budget=300, mbpo={"rollout_batch_size": 10})
    collect_runs(["sac_utd1"], [0], other, tmp_path, run=fake)
    with pytest.raises(ValueError, match="settings"):
        collect_runs(["mbpo:fixed:1"], [0], other, tmp_path, run=fake)
    # A run of round one (no protocol) under the same file name is never taken for this protocol's.
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "sac_same_utd__0.json").write_text(json.dumps({"arm": "sac_same_utd", "seed": 0, "eval": []}))
    with pytest.raises(ValueError, match="protocol"):
        collect_runs(["sac_same_utd"], [0], settings, legacy, run=fake)


# --- MBPO settings and the script -------------------------------------------------------------------------------


def test_mbpo_arm_takes_the_library_defaults_unless_overridden() -> None:
    defaults = MBPOConfig()
    cfg = mbpo_config(ArmSettings(env_id="Pendulum-v1", budget=1000, net_arch=[32, 32]), "mbpo:fixed:3", 7)
    assert cfg.controller == "fixed:3" and cfg.seed == 7 and cfg.sac.net_arch == [32, 32]
    assert cfg.rollout_batch_size == defaults.rollout_batch_size
    assert cfg.model_retain_epochs == defaults.model_retain_epochs
    assert cfg.model == defaults.model
    over = ArmSettings(env_id="Pendulum-v1", budget=1000, mbpo={"model": {"max_train_steps": 50}})
    cfg = mbpo_config(over, "mbpo:fixed:1", 0)
    assert cfg.model.max_train_steps == 50 and cfg.model.max_epochs == defaults.model.max_epochs  # merged, not reset
    with pytest.raises(ValueError, match="arm name"):
        mbpo_config(ArmSettings(env_id="Pendulum-v1", budget=1000, mbpo={"controller": "fixed:2"}), "mbpo:fixed:1", 0)


def test_script_settings_follow_the_protocol() -> None:
    script = load_script(EXPERIMENTS / "sample_efficiency.py")
    args = script.Args()
    settings = script.settings_from_args(args)
    assert settings.mbpo == {} and settings.eval_every == 100 and settings.initial_random_steps == 200
    assert args.seeds.split(",") == [str(s) for s in range(10)]
    assert not hasattr(args, "model_max_epochs") and args.model_max_train_steps is None
    capped = script.settings_from_args(script.Args(model_max_train_steps=500, model_train_freq=100))
    assert capped.mbpo == {"model": {"max_train_steps": 500}, "model_train_freq": 100, "epoch_length": 100}
    hc = script.Args(env_id="HalfCheetah-v5", budget=30_000, seeds="0,1,2", arms="mbpo:fixed:1,sac_same_utd")
    hc.final_only = True
    assert script.settings_from_args(hc).eval_every == 1000
    assert script.command_line(hc) == (
        "python experiments/mbrl/sample_efficiency.py --env-id HalfCheetah-v5 --budget 30000 --seeds 0,1,2 "
        "--arms mbpo:fixed:1,sac_same_utd --final-only"
    )
    fast = script.settings_from_args(
        script.Args(sac_backend="sbx", model_fused_optimizer=True, model_min_train_epochs=20.0)
    )
    assert fast.mbpo == {"model": {"fused_optimizer": True, "min_train_epochs": 20.0}, "sac": {"backend": "sbx"}}
    cfg = mbpo_config(fast, "mbpo:fixed:1", 0)
    assert cfg.sac.backend == "sbx" and cfg.model.fused_optimizer and cfg.model.min_train_epochs == 20.0
    assert script.settings_from_args(script.Args(model_precision="bf16")).mbpo == {"model": {"precision": "bf16"}}
    # The shared SAC settings still come from the protocol, not from the backend override.
    assert cfg.sac.learning_rate == fast.learning_rate and cfg.sac.net_arch == fast.net_arch
    with pytest.raises(SystemExit):
        script.settings_from_args(script.Args(initial_random_steps=250))
    with pytest.raises(SystemExit):
        script.settings_from_args(script.Args(budget=1050))


# --- tiny real runs ---------------------------------------------------------------------------------------------

TINY_FLAGS = dict(
    threshold=-5.0,
    budget=200,
    seeds="0,1",
    eval_every=100,
    eval_episodes=2,
    initial_random_steps=100,
    updates_per_step=2,
    net_arch="32,32",
    batch_size=64,
    rollout_batch_size=100,
    model_train_freq=100,
    model_max_train_steps=20,
)


def test_script_runs_and_resumes_on_the_point_mass(tmp_path: Path) -> None:
    script = load_script(EXPERIMENTS / "sample_efficiency.py")
    args = script.Args(env_id="rolloutlab/PointMass-v0", arms="mbpo:fixed:1,sac_utd1", **TINY_FLAGS)
    entry = script.main(args, results=tmp_path)
    assert entry["seeds"] == [0, 1] and set(entry["arms"]) == {"mbpo:fixed:1", "sac_utd1"}
    data = json.loads((tmp_path / "sample_efficiency_rolloutlab-PointMass-v0.json").read_text())
    assert data["protocol"] == PROTOCOL and data["mode"] == "threshold" and len(data["runs"]) == 4
    mbpo = next(r for r in data["runs"] if r["arm"] == "mbpo:fixed:1")
    assert [s for s, _ in mbpo["eval"]] == [100, 200] and mbpo["final_step"] == 200 and mbpo["seconds"] > 0
    assert mbpo["mbpo_config"]["model"]["max_train_steps"] == 20
    assert mbpo["mbpo_config"]["model_retain_epochs"] == MBPOConfig().model_retain_epochs
    assert "--model-max-train-steps 20" in data["command"]
    partial = tmp_path / "partial" / "rolloutlab-PointMass-v0"
    stamps = {f.name: f.stat().st_mtime_ns for f in partial.glob("*.json")}
    assert len(stamps) == 4
    # Resume: the finished runs are read back and none is run (or written) again.
    again = script.main(args, results=tmp_path)
    assert {f.name: f.stat().st_mtime_ns for f in partial.glob("*.json")} == stamps
    assert again["arms"] == entry["arms"]


def test_sac_arm_counts_the_same_warm_up_and_evaluations() -> None:
    settings = ArmSettings(
        env_id="rolloutlab/PointMass-v0",
        budget=200,
        updates_per_step=3,
        eval_every=100,
        eval_episodes=2,
        initial_random_steps=100,
    )
    out = run_arm("sac_same_utd", settings, 0)
    assert out["gradient_steps"] == settings.updates_per_step and [s for s, _ in out["eval"]] == [100, 200]
    assert out["settings"] == arm_settings(settings, "sac_same_utd") and "mbpo" not in out["settings"]
    assert 0 < out["eval_seconds"] < out["seconds"]


@pytest.mark.slow
def test_halfcheetah_final_only_path(tmp_path: Path) -> None:
    script = load_script(EXPERIMENTS / "sample_efficiency.py")
    flags = {**TINY_FLAGS, "threshold": None, "eval_episodes": 1}
    args = script.Args(env_id="HalfCheetah-v5", arms="mbpo:fixed:1,sac_same_utd", final_only=True, **flags)
    entry = script.main(args, results=tmp_path)
    assert entry["mode"] == "final_return" and entry["final_eval_at_budget"] is True
    diff = entry["mbpo_minus_sac_same_utd"]
    assert len(diff["differences"]) == 2 and isinstance(diff["met"], bool) and entry["mbpo_arm"] == "mbpo:fixed:1"
    summary = build_summary(tmp_path, bootstrap_reps=50)
    assert summary["halfcheetah"]["mbpo_minus_sac_same_utd"]["differences"] == diff["differences"]


@pytest.mark.parametrize("arm", ["sac_utd1", "mbpo:fixed:1"])
def test_a_run_stops_at_the_threshold_with_the_full_runs_first_evaluations(arm: str) -> None:
    full = ArmSettings(
        env_id="rolloutlab/PointMass-v0",
        budget=300,
        eval_every=100,
        eval_episodes=2,
        initial_random_steps=100,
        updates_per_step=2,
        mbpo={"model": {"max_train_steps": 20}, "rollout_batch_size": 50},
    )
    whole = run_arm(arm, full, 0)
    assert not whole["stopped_at_threshold"] and whole["steps_done"] == 300
    # A threshold the second evaluation reaches: the stopped run ends there, with the full run's first two evaluations.
    threshold = whole["eval"][1][1]
    stopped = run_arm(arm, dataclasses.replace(full, stop_at=threshold), 0)
    first = next(i for i, (_, r) in enumerate(whole["eval"]) if r >= threshold)
    assert stopped["eval"] == whole["eval"][: first + 1]
    assert stopped["stopped_at_threshold"] == (first + 1 < len(whole["eval"]))
    assert stopped["steps_done"] == whole["eval"][first][0]
    # The stop is not part of the settings a kept run is matched on.
    assert stopped["settings"] == whole["settings"]


def _killable_settings() -> ArmSettings:
    return ArmSettings(
        env_id="rolloutlab/PointMass-v0",
        budget=400,
        eval_every=100,
        eval_episodes=2,
        initial_random_steps=100,
        updates_per_step=2,
        mbpo={"model": {"max_train_steps": 20}, "rollout_batch_size": 50, "model_train_freq": 100, "epoch_length": 100},
    )


def _kill_at(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    """Make the next MBPO run die at its evaluation of env step ``step`` (after the checkpoint before it)."""
    from mbrl.algorithms.mbpo import MBPO

    evaluate = MBPO.evaluate

    def dying(self: MBPO) -> float:
        if self.env_steps == step:
            raise KeyboardInterrupt("killed")
        return evaluate(self)

    monkeypatch.setattr(MBPO, "evaluate", dying)


def test_mbpo_arm_killed_mid_run_continues_exactly_from_its_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _killable_settings()
    whole = run_arm("mbpo:fixed:1", settings, 0)
    storage = ArmStorage(work_dir=tmp_path / "work", carry_dir=tmp_path / "carry", checkpoint_every=200)
    with monkeypatch.context() as patch:
        _kill_at(patch, 300)
        with pytest.raises(KeyboardInterrupt):
            run_arm("mbpo:fixed:1", settings, 0, storage)
    assert (tmp_path / "work" / "mbpo%3Afixed%3A1__0" / "checkpoint.pt").exists()
    again = run_arm("mbpo:fixed:1", settings, 0, storage)
    assert again["eval"] == whole["eval"] and again["resumed"] == [[200, "checkpoint"]]
    assert again["imagined_transitions"] == whole["imagined_transitions"]
    # Wall seconds add the killed session's, up to its last checkpoint.
    assert again["seconds"] > 0 and again["mbpo_config"] == whole["mbpo_config"]


def test_mbpo_arm_continues_on_a_new_machine_from_its_carry_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rolloutlab.checkpoint import load_checkpoint

    settings = _killable_settings()
    storage = ArmStorage(work_dir=tmp_path / "work", carry_dir=tmp_path / "carry", checkpoint_every=200)
    with monkeypatch.context() as patch:
        _kill_at(patch, 300)
        with pytest.raises(KeyboardInterrupt):
            run_arm("mbpo:fixed:1", settings, 0, storage)
    carry = tmp_path / "carry" / "mbpo%3Afixed%3A1__0.pt"
    saved = load_checkpoint(carry)["state"]
    # The carry file holds no imagined data, only which epochs it had: the checkpoint after env step 200 comes before
    # that step's round, so only the round of step 100 (epoch 1 of 100 steps) is in the pool.
    assert saved["model_buffer"]["chunks"] == [] and saved["model_buffer"]["dropped_epochs"] == [1]
    assert saved["counters"]["env_steps"] == 200
    shutil.rmtree(tmp_path / "work")  # a new machine: only the committed carry file is there
    again = run_arm("mbpo:fixed:1", settings, 0, storage)
    assert again["resumed"] == [[200, "carry"]] and again["steps_done"] == 400
    assert [s for s, _ in again["eval"]] == [100, 200, 300, 400]
    # Rounds of 50 one-step rollouts at steps 100, 200 and 300, plus one refill round for the dropped chunk.
    assert again["imagined_transitions"] == 50 * (3 + 1)


def test_mbpo_arm_refuses_a_checkpoint_of_other_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _killable_settings()
    storage = ArmStorage(work_dir=tmp_path / "work", checkpoint_every=200)
    with monkeypatch.context() as patch:
        _kill_at(patch, 300)
        with pytest.raises(KeyboardInterrupt):
            run_arm("mbpo:fixed:1", settings, 0, storage)
    with pytest.raises(ValueError, match="another MBPOConfig"):
        run_arm("mbpo:fixed:1", dataclasses.replace(settings, learning_rate=3e-4), 0, storage)


def test_sac_arm_killed_mid_run_continues_from_its_carry_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stable_baselines3.common import evaluation

    from rolloutlab.checkpoint import load_checkpoint

    settings = dataclasses.replace(_killable_settings(), updates_per_step=1)
    storage = ArmStorage(work_dir=tmp_path / "work", carry_dir=tmp_path / "carry", checkpoint_every=200)
    evaluate = evaluation.evaluate_policy
    calls = {"n": 0}

    def dying(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:  # the evaluation of step 300, after the checkpoint of step 200
            raise KeyboardInterrupt("killed")
        return evaluate(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(evaluation, "evaluate_policy", dying)
        with pytest.raises(KeyboardInterrupt):
            run_arm("sac_utd1", settings, 0, storage)
    carry = tmp_path / "carry" / "sac_utd1__0.pt"
    saved = load_checkpoint(carry, kind="sac-arm-run")["state"]
    assert saved["sac"]["num_timesteps"] == 200 and len(saved["replay"]["observations"]) == 200
    assert [s for s, _ in saved["eval_history"]] == [100, 200]
    shutil.rmtree(tmp_path / "work")  # a new machine
    again = run_arm("sac_utd1", settings, 0, storage)
    assert again["resumed"] == [[200, "carry"]] and again["steps_done"] == 400
    assert [s for s, _ in again["eval"]] == [100, 200, 300, 400]
    assert again["eval"][:2] == [[int(s), r] for s, r in saved["eval_history"]]
    # One update per step after the warm-up of 100 steps, across both sessions.
    assert again["seconds"] > 0 and again["gradient_steps"] == 1
