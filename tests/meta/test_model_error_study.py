"""The model-error study end to end at a tiny size: meta-training, paired test units, summary, resume."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from experiments.meta import model_error_study as study
from experiments.meta.headroom import Settings
from meta.control.training import CHECKPOINT_KIND, CHECKPOINT_NAME, POLICY_NAME
from rolloutlab.checkpoint import load_checkpoint, save_checkpoint

TINY_INNER = Settings(
    budget=300,
    phase_length=100,
    learning_starts=50,
    batch_size=16,
    net_arch="16",
    eval_episodes=1,
    score_evals=2,
    rollout_freq=100,
    num_model_rollouts=16,
)


def _args(tmp_path: Path, stage: str) -> study.Args:
    return study.Args(
        stage=stage,  # type: ignore[arg-type]
        episodes=2,
        runs_per_round=2,
        workers=1,
        schedules=("fixed:0", "fixed:32", "dec:32", "random:1,32"),
        seeds=2,
        seeds_per_unit=2,
        bootstrap_reps=50,
        final_eval_episodes=1,
        runs_dir=str(tmp_path / "runs"),
        out_dir=str(tmp_path / "units"),
        out=str(tmp_path / "summary.json"),
        inner=TINY_INNER,
    )


def test_study_trains_tests_and_summarizes(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="run the train stage first"):
        study.main(_args(tmp_path, "test"))
    study.main(_args(tmp_path, "train"))
    trained = json.loads((tmp_path / "units" / "train_direct.json").read_text())
    assert trained["episodes_done"] == 2
    assert {"correlation", "sign_agreement", "size_ratio"} <= set(trained["value_check"])
    assert all(0.0 <= h["model_error"]["angle_offset"] <= 0.8 for h in trained["history"])
    study.main(_args(tmp_path, "test"))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary["arms"]) == {"fixed:0", "fixed:32", "dec:32", "random:1,32", "meta_direct"}
    assert summary["runs_per_arm"] == 2
    for entry in summary["arms"].values():
        assert entry["iqm_ci95"][0] <= entry["iqm"] <= entry["iqm_ci95"][1]
    assert set(summary["probability_of_improvement"]["meta_direct"]) == {"fixed:0", "fixed:32", "dec:32", "random:1,32"}
    assert len(summary["arms"]["meta_direct"]["schedules"][0]) == 3  # one K per phase
    best = summary["best_schedule"]
    assert summary["versus_best_schedule"]["meta_direct"] == summary["probability_of_improvement"]["meta_direct"][best]
    assert (
        summary["paired_difference_vs_best_schedule"]["meta_direct"]["ci95"][0]
        <= (summary["arms"]["meta_direct"]["mean"] - summary["arms"][best]["mean"])
        <= summary["paired_difference_vs_best_schedule"]["meta_direct"]["ci95"][1]
    )
    assert len(summary["mean_by_offset_bin"]["fixed:0"]) == 5
    room = summary["headroom_on_test"]
    assert len(room["bins"]) == len(room["best_schedule_by_bin"]) == 5 and sum(room["runs_by_bin"]) == 2
    assert {"mean_diff", "se", "ci95"} <= set(room["oracle_minus_best_schedule_cross_fitted"])
    assert room["in_sample_oracle_mean"] >= summary["arms"][best]["mean"]  # the per-bin best never loses in-sample
    assert 0.0 <= room["in_sample_oracle_probability_of_improvement"]["p"] <= 1.0
    assert (tmp_path / "model_error_schedules.png").exists()
    rows = (tmp_path / "model_error_table.md").read_text().splitlines()
    assert len(rows) == 2 + 5 and rows[-1].startswith("| `meta_direct` | 2 |")
    # The same run seeds and offsets in every arm; the fixed arms hold their K.
    unit = json.loads((tmp_path / "units" / "test" / "runs000.json").read_text())
    assert unit["arms"]["fixed:32"]["schedules"] == [[32, 32, 32]] * 2
    assert unit["arms"]["fixed:0"]["schedules"] == [[0, 0, 0]] * 2
    # Resume: a second summary reads the saved units without running anything.
    first_mtime = (tmp_path / "units" / "test" / "runs000.json").stat().st_mtime
    study.main(_args(tmp_path, "summary"))
    assert (tmp_path / "units" / "test" / "runs000.json").stat().st_mtime == first_mtime
    # Every unit names the policy file it played; a half-trained policy is refused.
    policy = tmp_path / "runs" / "model_error_direct" / POLICY_NAME
    assert unit["policies"] == {"meta_direct": hashlib.sha256(policy.read_bytes()).hexdigest()[:16]}
    assert summary["policies"] == unit["policies"]
    # Other schedules on the same paired runs, merged into one summary; META's runs reproduce in the other batch.
    more = dataclasses.replace(
        _args(tmp_path, "test"), schedules=("fixed:4",), out_dir=str(tmp_path / "more"), out=str(tmp_path / "m.json")
    )
    study.main(more)
    merged = dataclasses.replace(_args(tmp_path, "summary"), extra_dirs=(str(tmp_path / "more"),))
    study.main(merged)
    both = json.loads((tmp_path / "summary.json").read_text())
    assert set(both["arms"]) == set(summary["arms"]) | {"fixed:4"}
    assert both["arms"]["meta_direct"]["scores"] == summary["arms"]["meta_direct"]["scores"]
    assert "fixed:4" in both["probability_of_improvement"]["meta_direct"]
    tampered = tmp_path / "more" / "test" / "runs000.json"
    unit_more = json.loads(tampered.read_text())
    unit_more["arms"]["meta_direct"]["scores"][0] += 1.0
    tampered.write_text(json.dumps(unit_more))
    with pytest.raises(SystemExit, match="scored differently"):
        study.main(merged)
    checkpoint = tmp_path / "runs" / "model_error_direct" / CHECKPOINT_NAME
    envelope = load_checkpoint(checkpoint, kind=CHECKPOINT_KIND)
    envelope["state"]["rounds_done"] = 0
    save_checkpoint(checkpoint, envelope["state"], kind=CHECKPOINT_KIND, config=envelope["config"])
    with pytest.raises(SystemExit, match="finished 0 of 1 rounds"):
        study.main(_args(tmp_path, "test"))


def test_held_out_offsets_are_paired_and_in_range() -> None:
    args = study.Args(stage="summary", test_error="0:1.0")  # type: ignore[arg-type]
    deltas = study.test_deltas(args, 0, 50)
    assert deltas[:5] == study.test_deltas(args, 0, 5)
    assert deltas[10:20] == study.test_deltas(args, 10, 10)
    assert all(0.0 <= d <= 1.0 for d in deltas) and max(deltas) > 0.8


@pytest.mark.parametrize("text", ["1:0", "0.5", "a:b"])
def test_bad_ranges_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        study.parse_range(text)


def test_stratified_offsets_cycle_through_the_strata() -> None:
    args = study.Args(stage="summary", test_error="0:2.0", test_strata=4)  # type: ignore[arg-type]
    deltas = study.test_deltas(args, 0, 40)
    assert [int(d // 0.5) for d in deltas] == [i % 4 for i in range(40)]
    assert deltas[8:12] == study.test_deltas(args, 8, 4)
    with pytest.raises(ValueError, match="test-strata"):
        study.test_units(dataclasses.replace(args, seeds=10, seeds_per_unit=5))


def test_strata_are_the_tasks_of_the_probability_of_improvement() -> None:
    """META wins every stratum by 10 but the strata differ by 100: within strata P = 1, pooled P < 1."""
    args = study.Args(
        stage="summary",  # type: ignore[arg-type]
        test_error="0:2.0",
        test_strata=4,
        seeds=8,
        seeds_per_unit=4,
        schedules=("fixed:0", "fixed:32"),
        bootstrap_reps=50,
    )
    records = []
    for first in (0, 4):
        base = [-100.0 * s - first for s in range(4)]
        records.append(
            {
                "first_run": first,
                "runs": 4,
                "deltas": study.test_deltas(args, first, 4),
                "core_seconds": 1.0,
                "arms": {
                    "fixed:0": {"scores": base},
                    "fixed:32": {"scores": [b - 5.0 for b in base]},
                    "meta_direct": {"scores": [b + 10.0 for b in base], "schedules": [[32, 0]] * 4},
                },
            }
        )
    summary = study.summarize(args, records)
    assert summary["probability_tasks"] == 4
    assert summary["versus_best_schedule"]["meta_direct"]["p"] == 1.0
    assert summary["versus_best_schedule_pooled"]["meta_direct"]["p"] < 0.75
    assert summary["headroom_on_test"]["runs_by_bin"] == [2, 2, 2, 2]
    assert summary["target_met"]["meta_direct"] is True
