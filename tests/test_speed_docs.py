"""The speed figures the docs quote are the ones in ``experiments/results/speed.json`` (and the MBPO cost summary)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEED = json.loads((ROOT / "experiments" / "results" / "speed.json").read_text())["parts"]


def test_the_pets_plan_row_is_the_measured_one() -> None:
    pets = SPEED["pets"]
    row = (
        f"| PETS CEM, Pendulum | {pets['a_ms']:.1f} | {pets['b_ms']:.1f} | {pets['ratio']:.2f} "
        f"(CPU time {pets['cpu_ratio']:.2f}) |"
    )
    assert row in (ROOT / "docs" / "mpc.md").read_text()
    assert pets["met"] == (pets["ratio"] <= 0.6 and pets["b_ms"] <= 16.0)


def test_the_two_worker_rounds_are_quoted_as_measured() -> None:
    workers = SPEED["meta_workers"]
    docs = " ".join((ROOT / "docs" / "mbrl.md").read_text().split())
    assert f"{workers['a_s_per_meta_episode']:.1f} s per meta-episode in one process" in docs
    assert f"{workers['b_s_per_meta_episode']:.1f} s on two worker processes" in docs
    assert f"{workers['speedup']:.2f}×" in docs and not workers["met"]


def test_the_mbpo_cost_is_quoted_as_measured() -> None:
    cost = json.loads((ROOT / "experiments" / "mbrl" / "results" / "mbpo_cost.json").read_text())
    fast = cost["arms"]["fast"]["cpu_ratio_to_baseline"]
    docs = " ".join((ROOT / "docs" / "mbrl.md").read_text().split())
    assert f"The fast options cost {fast['median']:.2f}× the baseline's CPU seconds" in docs
    assert "(paired by seed: " + ", ".join(f"{r:.2f}" for r in fast["ratios"]) + ")" in docs
    assert cost["met"] == (fast["median"] <= cost["target_ratio"]) and SPEED["mbpo_end_to_end"]["met"] == cost["met"]
