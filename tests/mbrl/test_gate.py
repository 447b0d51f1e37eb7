"""The gate (``experiments/mbrl/gate_protocol.py`` and ``gate.py``): arm parsing, the paired IQM verdict
on hand-made scores, a tiny end-to-end slice, and the committed gate tables agreeing with their JSON."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from script_modules import load_script

from experiments.mbrl.gate_protocol import GateSettings, gate_learner_config, gate_table, parse_gate_arm, summarize_gate

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "mbrl" / "results"
GATE = RESULTS.parent / "gate.py"
DIAGNOSIS = RESULTS.parent / "gate_diagnosis.py"


def test_arm_names() -> None:
    assert parse_gate_arm("fixed:4") == ("fixed:4", False, False)
    assert parse_gate_arm("fixed:0+compute") == ("fixed:0", True, False)
    assert parse_gate_arm("fixed:8+true") == ("fixed:8", False, True)
    with pytest.raises(ValueError, match="modifier"):
        parse_gate_arm("fixed:8+perfect")


def test_verdict_needs_the_best_model_arm_two_paired_errors_above_both_k0_arms() -> None:
    rng = np.random.default_rng(0)
    base = rng.normal(-300.0, 60.0, size=20)
    finals = {
        "fixed:0": base,
        "fixed:0+compute": base + rng.normal(0.0, 5.0, size=20),
        "fixed:4": base + 120.0 + rng.normal(0.0, 5.0, size=20),  # clearly better on every paired seed
        "fixed:16": base - 50.0,
        "fixed:8+true": base + 200.0,  # the ceiling arm never counts as the best *model* arm
    }
    summary = summarize_gate(finals, seed=0, reps=300)
    assert summary["best_model_arm"] == "fixed:4" and summary["gate_passed"]
    assert summary["paired_iqm_vs_k0"]["fixed:4"]["fixed:0"]["z"] > 2.0
    assert summary["arms"]["fixed:8+true"]["solved_fraction"] == pytest.approx(np.mean(base + 200.0 >= -100.0))
    finals["fixed:4"] = base + rng.normal(0.0, 30.0, size=20)  # now only noise
    assert not summarize_gate(finals, seed=0, reps=300)["gate_passed"]
    rows = gate_table(summary).splitlines()
    assert len(rows) == 2 + len(finals) and rows[4].startswith("| fixed:4 |")
    # A run without one of the two K = 0 arms gives no verdict, however far ahead the model arm is.
    one_baseline = {"fixed:0+compute": finals["fixed:0+compute"], "fixed:4": base + 120.0}
    assert not summarize_gate(one_baseline, seed=0, reps=300)["gate_passed"]


def test_tiny_slice_runs_every_kind_of_arm(tmp_path: Path) -> None:
    gate = load_script(GATE)
    args = gate.Args(
        budget=200,
        phase_length=100,
        arms="fixed:0,fixed:0+compute,fixed:2,fixed:2+true",
        runs=1,
        runs_per_slice=1,
        final_episodes=1,
        net_arch="16,16",
        model_train_freq=100,
        rollout_freq=50,
        num_model_rollouts=20,
        model_min_train_steps=5,
        model_patience_steps=5,
        model_max_train_steps=10,
        bootstrap_reps=50,
        out_dir=str(tmp_path / "slices"),
        out=str(tmp_path / "gate.json"),
    )
    summary = gate.main(args)
    assert set(summary["arms"]) == {"fixed:0", "fixed:0+compute", "fixed:2", "fixed:2+true"}
    saved = json.loads((tmp_path / "slices" / "slice_000_001.json").read_text())
    k0, matched = saved["arms"]["fixed:0"], saved["arms"]["fixed:0+compute"]
    assert matched["updates"][0] > k0["updates"][0] and k0["model_updates"][0] == 0
    assert saved["arms"]["fixed:2"]["model_updates"][0] > 0
    assert (tmp_path / "gate.md").read_text() == gate_table(summary)
    # A rerun with the same protocol reuses the saved slice instead of training again.
    again = gate.main(dataclasses.replace(args))
    assert again["arms"]["fixed:0"]["finals"] == summary["arms"]["fixed:0"]["finals"]


@pytest.mark.skipif(not (RESULTS / "gate.json").exists(), reason="the gate has not been run")
def test_committed_gate_table_is_generated_from_its_json() -> None:
    summary = json.loads((RESULTS / "gate.json").read_text())
    assert (RESULTS / "gate.md").read_text() == gate_table(summary)


@pytest.mark.skipif(not (RESULTS / "gate.md").exists(), reason="the gate has not been run")
def test_results_page_quotes_the_gate_table() -> None:
    table = (RESULTS / "gate.md").read_text()
    assert table in (ROOT / "docs" / "results" / "mbrl.md").read_text()


def test_diagnosis_variants_are_valid_gate_settings_with_a_ceiling_arm() -> None:
    diagnosis = load_script(DIAGNOSIS)
    fields = {f.name for f in dataclasses.fields(GateSettings)}
    for name, (overrides, arms) in diagnosis.VARIANTS.items():
        assert set(overrides) <= fields, name
        parsed = [parse_gate_arm(a) for a in arms.split(",")]
        assert "fixed:0+compute" in arms.split(",") and any(true for _, _, true in parsed), name
        gate_learner_config(GateSettings(**overrides))  # the learner accepts the settings


@pytest.mark.skipif(not (RESULTS / "gate_diagnosis.json").exists(), reason="the diagnosis has not been run")
def test_committed_diagnosis_table_is_generated_from_its_json() -> None:
    diagnosis = load_script(DIAGNOSIS)
    combined = json.loads((RESULTS / "gate_diagnosis.json").read_text())
    assert (RESULTS / "gate_diagnosis.md").read_text() == diagnosis.table(combined)
    for name, summary in combined["variants"].items():
        for arm, beats in combined["ceiling_beats_compute"][name].items():
            assert beats == (summary["paired_iqm_vs_k0"][arm]["fixed:0+compute"]["z"] > 2.0)


@pytest.mark.skipif(not (RESULTS / "gate_multi_step.json").exists(), reason="the multi-step gate has not been run")
def test_multi_step_gate_and_diagnosis_tables_are_generated_and_quoted() -> None:
    summary = json.loads((RESULTS / "gate_multi_step.json").read_text())
    table = (RESULTS / "gate_multi_step.md").read_text()
    assert table == gate_table(summary)
    assert summary["protocol"]["multi_step_targets"] and summary["protocol"]["deterministic_rollouts"]
    docs = (ROOT / "docs" / "results" / "mbrl.md").read_text()
    assert table in docs and (RESULTS / "gate_diagnosis.md").read_text() in docs
    lookahead = json.loads((RESULTS / "gate_lookahead.json").read_text())
    assert lookahead["protocol"]["model_use"] == "lookahead"
    assert (RESULTS / "gate_lookahead.md").read_text() == gate_table(lookahead)
    assert gate_table(lookahead) in docs


def test_recorded_command_names_every_changed_setting() -> None:
    gate = load_script(GATE)
    assert gate.command_line(gate.Args(runs=10)).endswith("gate.py --workers 2 --runs 10")
    cmd = gate.command_line(gate.Args(runs=4, multi_step_targets=True, real_ratio=0.25, arms="fixed:0,fixed:2"))
    assert "--multi-step-targets" in cmd and "--real-ratio 0.25" in cmd and "--arms fixed:0,fixed:2" in cmd


def test_the_meta_preset_is_the_gates_learner() -> None:
    """experiments/meta/presets/acrobot_gate_lookahead_10k.yaml builds the DynaConfig the gate ran (10k, lookahead)."""
    from meta.control.training import MetaTrainConfig
    from meta.rollout_length.env import MetaEnvConfig
    from rolloutlab.config import load_yaml

    preset = load_yaml(MetaTrainConfig, ROOT / "experiments" / "meta" / "presets" / "acrobot_gate_lookahead_10k.yaml")
    env: MetaEnvConfig = preset.env
    args = GateSettings(budget=env.budget, phase_length=env.phase_length, model_use="lookahead")
    expected = dataclasses.replace(gate_learner_config(args), k_cap=env.k_cap, train_model_when_k0=True)
    assert env.inner_factory().config() == expected


def test_the_8k_meta_preset_is_the_learner_of_the_8k_gate() -> None:
    """experiments/meta/presets/acrobot_gate_8k_converged.yaml builds the DynaConfig of gate_8k_converged.json."""
    from meta.control.training import MetaTrainConfig
    from rolloutlab.config import load_yaml

    protocol = json.loads((RESULTS / "gate_8k_converged.json").read_text())["protocol"]
    fields = {f.name for f in dataclasses.fields(GateSettings)}
    args = GateSettings(**{k: v for k, v in protocol.items() if k in fields})
    preset = load_yaml(MetaTrainConfig, ROOT / "experiments" / "meta" / "presets" / "acrobot_gate_8k_converged.yaml")
    expected = dataclasses.replace(gate_learner_config(args), k_cap=preset.env.k_cap, train_model_when_k0=True)
    assert preset.env.budget == args.budget and preset.env.phase_length == args.phase_length
    assert preset.env.inner_factory().config() == expected


def test_the_10k_lookahead_gate_is_generated_and_quoted() -> None:
    summary = json.loads((RESULTS / "gate_lookahead_10k.json").read_text())
    assert summary["protocol"]["budget"] == 10_000 and summary["protocol"]["model_use"] == "lookahead"
    assert summary["protocol"]["runs"] == 20 and not summary["gate_passed"]
    table = (RESULTS / "gate_lookahead_10k.md").read_text()
    assert table == gate_table(summary)
    assert table.strip() in (ROOT / "docs" / "results" / "mbrl.md").read_text()
    dec = json.loads((RESULTS / "gate_lookahead_10k_dec.json").read_text())
    # Paired runs: the compute-matched arm's runs 0-9 are bit-identical in the two batches.
    assert dec["arms"]["fixed:0+compute"]["finals"] == summary["arms"]["fixed:0+compute"]["finals"][:10]


def test_the_fresh_seed_confirmation_is_generated_and_quoted() -> None:
    summary = json.loads((RESULTS / "gate_trust_confirm.json").read_text())
    protocol = summary["protocol"]
    assert protocol["seed"] == 1 and protocol["runs"] == 20 and protocol["lookahead_trust"] == 2.0
    assert protocol["lookahead_expectation"] and not summary["gate_passed"]
    table = (RESULTS / "gate_trust_confirm.md").read_text()
    assert table == gate_table(summary) and table.strip() in (ROOT / "docs" / "results" / "mbrl.md").read_text()


def test_the_8k_gate_passed_and_is_generated_and_quoted() -> None:
    summary = json.loads((RESULTS / "gate_8k_converged.json").read_text())
    protocol = summary["protocol"]
    assert protocol["seed"] == 2 and protocol["runs"] == 40 and protocol["budget"] == 8000
    assert protocol["model_max_train_steps"] >= 100_000 and protocol["model_min_train_steps"] == 1000
    assert summary["gate_passed"] and summary["best_model_arm"] == "fixed:2"
    paired = summary["paired_iqm_vs_k0"]["fixed:2"]
    assert paired["fixed:0"]["z"] > 2 and paired["fixed:0+compute"]["z"] > 2
    table = (RESULTS / "gate_8k_converged.md").read_text()
    assert table == gate_table(summary)
    assert table.strip() in (ROOT / "docs" / "results" / "mbrl.md").read_text()


def test_the_fit_convergence_figures_quoted_are_the_committed_ones() -> None:
    fits = json.loads((RESULTS / "fit_convergence.json").read_text())["fits"]
    assert fits["patience2000"]["state_delta_nmse_vs_reference"] == 1.0
    docs = (ROOT / "docs" / "results" / "mbrl.md").read_text()
    for name in ("cap600", "uncapped"):
        ratio = f"{fits[name]['state_delta_nmse_vs_reference']:.1f}"
        assert f"| {ratio} |" in docs
    assert f"{fits['cap600']['state_delta_nmse_vs_reference']:.0f}×" in docs
    assert f"{fits['uncapped']['state_delta_nmse_vs_reference']:.1f}×" in docs


def test_the_committed_8k_gate_is_what_its_saved_slices_give() -> None:
    """gate_protocol recomputes the committed summary from the slices it was made of, number for number."""
    from experiments.mbrl.gate_protocol import gate_arms, gate_protocol, gate_slice_path, gate_summary

    summary = json.loads((RESULTS / "gate_8k_converged.json").read_text())
    protocol = summary["protocol"]
    fields = {f.name for f in dataclasses.fields(GateSettings)}
    settings = GateSettings(**{k: v for k, v in protocol.items() if k in fields})
    assert {**gate_protocol(settings), "runs": protocol["runs"]} == protocol
    firsts = range(0, protocol["runs"], settings.runs_per_slice)
    slices = [
        json.loads(gate_slice_path(RESULTS / "gate_8k_converged", first, settings.runs_per_slice).read_text())
        for first in firsts
    ]
    assert all(s["protocol"] == gate_protocol(settings) for s in slices)
    again = gate_summary(slices, gate_arms(settings), settings.seed, reps=2_000)
    assert json.dumps(again) == json.dumps({k: summary[k] for k in again})


def test_batched_models_reach_the_learner_and_keep_older_slices_reusable() -> None:
    from experiments.mbrl.gate_protocol import gate_protocol

    assert gate_learner_config(GateSettings(batched_models=True)).batched_models
    assert not gate_learner_config(GateSettings()).batched_models
    assert "batched_models" not in gate_protocol(GateSettings())
    assert gate_protocol(GateSettings(batched_models=True))["batched_models"] is True
