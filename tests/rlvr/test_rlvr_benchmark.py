"""Benchmark statistics: first crossing, bootstrap ratio, summary keys (on hand-made curves)."""

from __future__ import annotations

from typing import Any

import pytest

from experiments.rlvr.allocator_benchmark import (
    ARMS,
    accuracy_at,
    accuracy_interval,
    cost_ratio,
    final_accuracy,
    first_reaching,
    summarize,
)


def _run(arm: str, seed: int, accs: list[float], tokens_per_eval: int) -> dict[str, Any]:
    curve = [
        {"step": i, "accuracy": a, "completion_tokens": i * tokens_per_eval, "responses": i * 10}
        for i, a in enumerate(accs)
    ]
    costs = {
        "completion_tokens": curve[-1]["completion_tokens"],
        "responses": curve[-1]["responses"],
        "prompt_tokens": 0,
        "reused_responses": 0,
        "dropped_tokens": 0,
    }
    return {"arm": arm, "seed": seed, "curve": curve, "costs": costs, "zero_variance_fraction": 0.5}


def test_first_reaching_and_accuracy_at() -> None:
    run = _run("x", 0, [0.1, 0.3, 0.5, 0.4, 0.6], 100)
    assert first_reaching(run, 0.45) == 200
    assert first_reaching(run, 0.45, "responses") == 20
    assert first_reaching(run, 0.9) is None
    assert accuracy_at(run, 250) == 0.5
    assert final_accuracy(run) == pytest.approx((0.5 + 0.4 + 0.6) / 3)


def test_cost_ratio_and_accuracy_interval() -> None:
    same = cost_ratio([50, 50, 50], [100, 100, 100])
    assert same["value"] == pytest.approx(0.5) and same["ci"] == pytest.approx([0.5, 0.5])
    spread = cost_ratio([50, 100, 150], [100, 100, 100])
    assert spread["value"] == pytest.approx(1.0) and spread["ci"][0] < 1.0 < spread["ci"][1]
    # a seed that never reached the target makes the ratio infinite -> None
    never = cost_ratio([None, 50, 50], [100, 100, 100])
    assert never["value"] is None and never["ci"][1] is None and never["ci"][0] == pytest.approx(0.5)
    with pytest.raises(ValueError):
        cost_ratio([1.0], [1.0, 2.0])
    lo, hi = accuracy_interval([0.5, 0.5, 0.5])
    assert lo == hi == 0.5


def test_summary_has_the_issue_keys() -> None:
    runs = []
    for seed in (0, 1, 2):
        for arm in ARMS:
            cheap = arm == "ar3po"
            runs.append(_run(arm, seed, [0.2, 0.4, 0.6, 0.6, 0.6], 50 if cheap else 100))
    summary = summarize(runs, "toy", [0, 1, 2], list(ARMS))
    assert {"task", "seeds", "target_accuracy", "arms", "best_adaptive"} <= set(summary)
    for arm in ARMS:
        entry = summary["arms"][arm]
        assert {"tokens_to_target", "responses_to_target", "final_accuracy", "total_tokens"} <= set(entry)
        assert len(entry["tokens_to_target"]) == 3
    assert summary["target_accuracy"] == pytest.approx(0.57)
    best = summary["best_adaptive"]
    assert best["arm"] == "ar3po"
    assert best["ratio_tokens_vs_uniform_g8"] == pytest.approx(0.5)
    assert {"arm", "ratio_tokens_vs_uniform_g8", "ci", "final_accuracy_delta"} <= set(best)
    assert best["final_accuracy_delta"] == pytest.approx(0.0)


def test_committed_summary_is_what_its_per_run_records_give() -> None:
    """The committed compact summary recomputes from its committed runs, number for number (and its table renders)."""
    import json
    from pathlib import Path

    from experiments.rlvr.allocator_benchmark import benchmark_table

    results = Path(__file__).resolve().parents[2] / "experiments" / "rlvr" / "results"
    summary = json.loads((results / "summary.json").read_text())
    args = summary["args"]
    runs = [json.loads(p.read_text()) for p in sorted((results / "per_run").glob("*.json"))]
    arms = [a for a in args["arms"] if a in ARMS]
    again = summarize(runs, f"reversed-digit add/mul, digits {args['difficulties']}", args["seeds"], arms)
    assert json.dumps(again) == json.dumps({k: summary[k] for k in again})
    table = benchmark_table(again).splitlines()
    assert len(table) == 3 + len(arms) + 1 and table[-1].startswith("best adaptive: ")


def test_prompt_sets_are_fixed_and_disjoint_streams() -> None:
    from experiments.rlvr.allocator_benchmark import HELD_OUT_SIZE, POOL_SIZE, prompt_sets

    pool, held_out = prompt_sets()
    assert (len(pool), len(held_out)) == (POOL_SIZE, HELD_OUT_SIZE)
    assert prompt_sets() == (pool, held_out)  # the same prompts for every arm, seed and trainer
    assert {t.difficulty for t in pool} <= {1, 2, 3} and pool[:10] != held_out[:10]
