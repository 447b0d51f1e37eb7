"""The headroom gate: its statistics on hand-made samples, the verdicts, and a seconds-long run of the whole gate."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from experiments.rlvr.headroom import (
    GATES,
    Args,
    hint_lift,
    judge,
    length_headroom,
    main,
    pass_gap,
    tool_call_rate,
    verdicts,
)
from experiments.rlvr.testbeds import TESTBEDS, find_testbed


def test_pass_gap_hand_computed() -> None:
    # Prompt 1: 1 of 4 correct -> pass@1 1/4, pass@2 1 - C(3,2)/C(4,2) = 1/2. Prompt 2: none correct.
    g = pass_gap([[1, 0, 0, 0], [0, 0, 0, 0]], k=2)
    assert g == pytest.approx({"pass@1": 0.125, "pass@k": 0.25, "gap": 0.125})
    assert pass_gap([[1, 1], [1, 1]], k=2)["gap"] == 0.0
    assert math.isnan(pass_gap([], k=2)["gap"])


def test_length_headroom_hand_computed() -> None:
    # Prompt 1: correct lengths 4 and 10 (the 20 is wrong), 6 tokens above its shortest of 14; prompt 2: 0 of 10.
    assert length_headroom([[4, 10, 20], [5, 5]], [[1, 1, 0], [1, 1]]) == pytest.approx(6 / 24)
    assert length_headroom([[7, 7]], [[1, 1]]) == 0.0
    assert math.isnan(length_headroom([[3, 9]], [[0, 0]]))


def test_tool_call_rate_hand_computed() -> None:
    rates = tool_call_rate([[0, 1], [1, 2], [0, 0]], [False, True, False])
    assert rates == {"no_tool": 0.25, "tool": 1.0}
    assert math.isnan(tool_call_rate([[1]], [True])["no_tool"])


def test_hint_lift_picks_the_best_hard_bucket() -> None:
    buckets = {
        "4": {"pass@k": 0.5, "hinted": {"0.5": 0.9}},  # not hard: ignored however much hints help
        "5": {"pass@k": 0.05, "hinted": {"0.25": 0.2, "0.5": 0.4, "0.75": 0.35}},
    }
    assert hint_lift(buckets, 0.1) == {"value": 0.4, "bucket": "5", "fraction": 0.5}
    assert hint_lift({"4": {"pass@k": 0.5, "hinted": {}}}, 0.1) == {"value": 0.0, "bucket": None, "fraction": None}


def test_judge_and_verdicts() -> None:
    assert judge(0.3, ">=", 0.3) and not judge(0.3, ">", 0.3) and not judge(math.nan, ">=", 0.0)
    with pytest.raises(ValueError, match="unknown gate comparison '<'"):
        judge(1.0, "<", 0.0)
    records = {
        "toolmix": {"tool_call_rate_no_tool": 0.45},
        "carry": {"length_headroom": 0.12},
    }
    v = verdicts(records)
    assert set(v) == {"ARPO", "HBPO", "ALP", "EHPO"}  # countdown's methods wait for its record
    assert v["ARPO"]["verdict"] == "PASS" and v["ARPO"]["conditions"][0]["value"] == 0.45
    assert v["HBPO"]["verdict"] == v["ALP"]["verdict"] == "FAIL"
    assert {g.testbed for gates in GATES.values() for g in gates} <= set(TESTBEDS)


def test_unknown_testbed_is_one_sentence() -> None:
    with pytest.raises(ValueError, match="unknown testbed 'nope'; known: countdown, carry, toolmix"):
        find_testbed("nope")
    with pytest.raises(ValueError, match="need 1 <= k <= samples"):
        Args(k=8, samples=4)


def test_gate_smoke_runs_resumes_and_writes_every_method(tmp_path: Path) -> None:
    args = Args(
        per_bucket=1,
        samples=2,
        k=2,
        hint_fractions=[0.5],
        hint_samples=1,
        bapo_steps=1,
        bapo_epochs=1,
        sft_steps=2,
        checkpoint_dir=str(tmp_path / "ckpt"),
        out=str(tmp_path),
    )
    summary = main(args)
    assert set(summary["methods"]) == set(GATES)

    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not strict JSON")

    # Two SFT steps solve nothing, so some statistic is undefined: it must be written as null, not NaN.
    strict = json.loads((tmp_path / "headroom.json").read_text(), parse_constant=refuse)
    assert strict["testbeds"]["carry"]["length_headroom"] is None
    for part in (tmp_path / "headroom_parts").iterdir():
        json.loads(part.read_text(), parse_constant=refuse)
    assert all(v["verdict"] in ("PASS", "FAIL") for v in summary["methods"].values())
    countdown = summary["testbeds"]["countdown"]
    assert countdown["on_policy_clip_fraction"] == 0.0  # one optimizer step per batch: the ratio is exactly 1
    assert set(countdown["buckets"]) == {"2", "3", "4", "5"}
    parts = sorted(p.name for p in (tmp_path / "headroom_parts").iterdir())
    assert parts == ["carry__0.json", "countdown__0.json", "toolmix__0.json"]
    # A rerun reads the records back instead of measuring again.
    (tmp_path / "headroom_parts" / "carry__0.json").write_text(
        json.dumps({**summary["testbeds"]["carry"], "length_headroom": 0.99})
    )
    again = main(args)
    assert again["methods"]["HBPO"]["verdict"] == "PASS"
    assert json.loads((tmp_path / "headroom.json").read_text())["methods"]["HBPO"]["conditions"][0]["value"] == 0.99
