"""``experiments/rlvr/breadth_async.py`` (issue 22, DARS-B and DART) end to end at a tiny size, resumed, and its
summaries' headlines on hand-made runs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from script_modules import REPO, load_script
from tiny_grpo import TINY_LM

SECTION_KEYS = {"headline_metric", "value", "baseline", "ci", "headline_met"}


def _script() -> Any:
    return load_script(REPO / "experiments" / "rlvr" / "breadth_async.py")


def test_summaries_by_hand() -> None:
    script = _script()
    seeds = [0, 1, 2]
    runs: dict[tuple[str, int], dict[str, Any]] = {}
    for s in seeds:
        for arm, p1, p8 in (("uniform_g8", 0.5, 0.7), ("dars", 0.5, 0.75), ("dars_b", 0.55 + 0.01 * s, 0.8)):
            runs[(arm, s)] = {
                "pass@1": p1,
                "pass@8": p8,
                "greedy_accuracy": 0.6,
                "steps": 10,
                "optimizer_steps": 10,
                "seconds": 1.0,
                "costs": {"completion_tokens": 100},
            }
    dars_b = script.summarize_dars_b(runs, seeds, 8)
    assert set(dars_b["section"]) == SECTION_KEYS
    assert dars_b["section"]["value"] == 0.56 and dars_b["section"]["baseline"] == 0.5
    assert dars_b["section"]["headline_met"] is True  # +0.05..0.07 pass@1 and +0.1 pass@8 in every seed
    assert dars_b["deltas"]["pass@8 dars_b - dars"]["value"] == 0.8 - 0.75
    timed: dict[tuple[str, int], dict[str, Any]] = {}
    for s in seeds:
        for arm, wall, idle in (("sync", 0.2, 0.12), ("dart", 0.15 + 0.001 * s, 0.14)):
            timed[(arm, s)] = {
                "seconds_per_step": wall,
                "idle_seconds_per_step": idle,
                "idle_share": idle / wall,
                "greedy_accuracy": 0.5,
                "load_average": 1.0,
                "steps": 10,
                "stale_responses": 0,
                "corrected_responses": 5,
                "seconds": 2.0,
                "costs": {"completion_tokens": 100},
            }
    dart = script.summarize_dart(timed, seeds)
    assert set(dart["section"]) == SECTION_KEYS
    assert dart["section"]["headline_met"] is False  # faster per step, but the learner idles more: a miss
    assert dart["section"]["ci"][1] < 0.0


def test_script_end_to_end_and_resume(tmp_path: Path) -> None:
    from meta.rlvr.trainers.sft import SFTConfig, train_sft

    script = _script()
    sft = SFTConfig(steps=3, batch_size=8, difficulties=[1], difficulty_weights=[1.0], eval_per_difficulty=1)
    train_sft(replace(sft, model=TINY_LM), tmp_path / "sft.pt", log=None)
    args = script.Args(
        seeds=[0],
        checkpoint=str(tmp_path / "sft.pt"),
        tokens_budget=300,
        dart_tokens_budget=300,
        prompts_per_step=2,
        breadth=4,
        pass_n=2,
        dart_backend="inline",
        dart_prompts_per_job=2,
        pool_size=8,
        held_out_size=3,
        out=str(tmp_path / "results"),
    )
    first = script.main(args)
    results = tmp_path / "results"
    partial = results / "hints_budgets_partial"
    expected = {f"dars_b__{a}__0.json" for a in script.DARS_B_ARMS} | {f"dart__{a}__0.json" for a in script.DART_ARMS}
    assert {p.name for p in partial.iterdir()} == expected
    for name in ("dars_b", "dart"):
        section = json.loads((results / "hints_budgets_parts" / f"{name}.json").read_text())
        assert set(section) == SECTION_KEYS and isinstance(section["headline_met"], bool)
    run = json.loads((partial / "dart__dart__0.json").read_text())
    assert run["costs"]["completion_tokens"] >= 300 and len(run["step_seconds"]) == run["steps"]
    # Resume: the finished runs are read back, the missing one is trained again and comes out the same.
    (partial / "dars_b__dars_b__0.json").unlink()
    second = script.main(args)
    assert second["dars_b"]["arms"] == first["dars_b"]["arms"] | {
        "dars_b": {**first["dars_b"]["arms"]["dars_b"], "seconds": second["dars_b"]["arms"]["dars_b"]["seconds"]}
    }
    assert (results / "breadth_async.md").read_text().startswith("| arm | pass@1")
