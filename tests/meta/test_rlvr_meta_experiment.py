"""``experiments/meta/rlvr_meta.py`` end to end at a tiny size: meta-training, the paired test arms and the summary."""

from __future__ import annotations

import json
from pathlib import Path

from kill_resume import tiny_mul_sft
from script_modules import REPO, load_script

SCRIPT = REPO / "experiments" / "meta" / "rlvr_meta.py"


def test_the_experiment_runs_resumes_and_summarizes(tmp_path: Path) -> None:
    script = load_script(SCRIPT)
    sft = tiny_mul_sft(tmp_path / "sft.pt")
    args = script.Args(
        out_dir=str(tmp_path / "out"),
        summary=str(tmp_path / "rlvr_meta.json"),
        checkpoint=str(sft),
        token_budget=600,
        meta_episodes=2,
        runs_per_round=2,
        test_units=2,
        trl_summary="none",
    )
    script.main(args)
    out = json.loads((tmp_path / "rlvr_meta.json").read_text())
    assert out["meta_training"]["finished"] and out["meta_training"]["meta_transitions"] == 2 * 6
    assert out["meta_training"]["value_check"]["transitions"] == 12
    compact = out["compact"]
    assert set(compact["arms"]) == {f"fixed:{g}" for g in (2, 4, 8, 16)} | {"ar3po", "dars", "knapsack", "e3"} | {
        "random",
        "meta",
    }
    assert compact["best_other_arm"] != "meta" and 0.0 <= compact["prob_improvement_vs_best"]["point"] <= 1.0
    for entry in compact["arms"].values():
        assert entry["completion_tokens_mean"] >= 600
    runs = sorted((tmp_path / "out" / "runs_heldout_mix").glob("*.json"))
    assert len(runs) == 2 * 10
    # Paired: every arm of a unit starts from the same accuracy on the same held-out set.
    starts = {json.loads(p.read_text())["curve"][0]["accuracy"] for p in runs if p.name.endswith("__0.json")}
    assert len(starts) == 1
    assert (tmp_path / "rlvr_meta.md").read_text() == script.table(out)
    # A rerun finds everything done: no new run, the same summary.
    stamps = [p.stat().st_mtime_ns for p in runs]
    script.main(args)
    assert [p.stat().st_mtime_ns for p in runs] == stamps
    again = json.loads((tmp_path / "rlvr_meta.json").read_text())
    assert again["compact"] == compact
