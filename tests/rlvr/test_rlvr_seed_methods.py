"""The seed-method benchmark: a tiny run of the whole script, resuming, equal token budgets, every arm's wiring and
the headline rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.rlvr.headroom import GATES
from experiments.rlvr.seed_methods import (
    GATE_NAMES,
    METHOD_TESTBEDS,
    Args,
    build_trainer,
    find_testbed,
    headline_met,
    main,
    summarize,
    units_of,
    warm_start,
)

PER_STEP_TOKENS_MAX = 2 * 8 * 56 * 4  # prompts x G x carry's max_new_tokens x (1 + DAPO's 3 refills)


def tiny(tmp_path: Path, **overrides: object) -> Args:
    settings: dict[str, object] = {
        "methods": ["alp", "hbpo"],
        "seeds": [0, 1],
        "tokens_budget": 300,
        "eval_every": 1,
        "prompts_per_step": 2,
        "pool_per_bucket": 2,
        "held_out_per_bucket": 1,
        "pass_k": 2,
        "sft_steps": 2,
        "checkpoint_dir": str(tmp_path / "ckpt"),
        "out": str(tmp_path),
        "headroom": str(tmp_path / "no_gate.json"),
    }
    return Args(**{**settings, **overrides})  # type: ignore[arg-type]


def refuse(name: str) -> None:
    raise ValueError(f"{name} is not strict JSON")


def test_every_method_has_its_gate_testbed() -> None:
    assert set(GATE_NAMES.values()) <= set(GATES)
    assert METHOD_TESTBEDS["alp"] == METHOD_TESTBEDS["hbpo"] == "carry"
    assert METHOD_TESTBEDS["arpo"] == "toolmix" and METHOD_TESTBEDS["guide"] == "countdown"
    with pytest.raises(ValueError, match="unknown method 'bapo' in --methods; known: alp, "):
        Args(methods=["bapo"])


def test_units_bring_their_testbeds_references(tmp_path: Path) -> None:
    units = units_of(Args(methods=["arpo", "alp"], seeds=[0], out=str(tmp_path)))
    assert [(u.group, u.arm) for u in units] == [
        ("toolmix", "uniform"),
        ("toolmix", "dapo"),
        ("toolmix", "arpo"),
        ("carry", "uniform"),
        ("carry", "dapo"),
        ("carry", "alp"),
    ]
    assert units[0].path == tmp_path / "seed_methods" / "toolmix__uniform__0.json"


def test_tiny_run_matches_budgets_and_resumes(tmp_path: Path) -> None:
    args = tiny(tmp_path)
    summary = main(args)
    folder = tmp_path / "seed_methods"
    files = sorted(p.name for p in folder.iterdir())
    assert files == [f"carry__{a}__{s}.json" for a in ("alp", "dapo", "hbpo", "uniform") for s in (0, 1)]
    # Equal generated-token budgets: every arm stops at the first step that reaches the same budget.
    for path in folder.iterdir():
        record = json.loads(path.read_text())
        assert record["tokens_budget"] == 300
        tokens = [p["completion_tokens"] for p in record["curve"]]
        assert tokens[-1] >= 300 and tokens[-2] < 300, path.name
        assert tokens[-1] < 300 + PER_STEP_TOKENS_MAX
    assert summary["token_budgets"] == {"carry": 300}
    assert set(summary["methods"]) == {"alp", "hbpo"}
    alp = summary["methods"]["alp"]
    assert alp["headline_measure"]["name"] == "length_ratio" and isinstance(alp["headline_met"], bool)
    assert len(alp["measures"]["accuracy_delta"]["ci"]) == 2 and "accuracy_delta_vs_dapo" in alp
    assert set(summary["references"]["carry"]) == {"uniform", "dapo"}
    assert set(summary["warm_starts"]["carry"]) == {"accuracy", "answer_length", "tool_calls", "entropy"}
    text = (tmp_path / "seed_methods.json").read_text()
    json.loads(text, parse_constant=refuse)
    assert "| alp | carry | length_ratio" in (tmp_path / "seed_methods.md").read_text()

    # Resuming: a record on disk is kept (a marked one keeps its mark), a missing one alone is run again.
    marked = folder / "carry__alp__1.json"
    marked.write_text(json.dumps({**json.loads(marked.read_text()), "marker": 1}))
    (folder / "carry__hbpo__0.json").unlink()
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    main(args)
    after = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    assert json.loads(marked.read_text())["marker"] == 1
    assert set(after) == set(before) | {"carry__hbpo__0.json"}
    assert all(after[name] == mtime for name, mtime in before.items())

    # Summarizing only reads the records, and refuses arms of one testbed on different budgets.
    again = main(tiny(tmp_path, summarize_only=True))
    assert again["methods"]["alp"]["final_accuracy"] == summary["methods"]["alp"]["final_accuracy"]
    record = json.loads(marked.read_text())
    marked.write_text(json.dumps({**record, "tokens_budget": 999}))
    with pytest.raises(ValueError, match=r"testbed carry has records at token budgets \[300, 999\]"):
        main(tiny(tmp_path, summarize_only=True))


@pytest.mark.parametrize("arm", sorted(GATE_NAMES))
def test_every_arm_trains_a_step(tmp_path_factory: pytest.TempPathFactory, arm: str) -> None:
    ckpt = tmp_path_factory.getbasetemp() / "seed_methods_ckpt"  # one tiny warm start per testbed for all arms
    args = Args(methods=[arm], prompts_per_step=2, pool_per_bucket=2, sft_steps=2, checkpoint_dir=str(ckpt))
    bed, path = warm_start(find_testbed(METHOD_TESTBEDS[arm]), args)
    trainer = build_trainer(arm, bed, path, args, seed=0)
    trainer.step()
    assert trainer.costs.completion_tokens > 0


def _m(value: float, low: float, high: float) -> dict[str, object]:
    return {"value": value, "ci": [low, high]}


def test_headline_rules() -> None:
    flat = _m(0.0, -0.01, 0.01)
    shorter = {"accuracy_delta": flat, "length_ratio": _m(0.6, 0.5, 0.7)}
    assert headline_met("alp", shorter) and headline_met("hbpo", shorter)
    assert not headline_met("alp", {**shorter, "length_ratio": _m(0.8, 0.7, 0.9)})  # less than 30% shorter
    assert not headline_met("alp", {**shorter, "accuracy_delta": _m(-0.02, -0.03, -0.01)})  # more than a point lost
    assert not headline_met("hbpo", {**shorter, "accuracy_delta": _m(-0.005, -0.009, -0.001)})  # below uniform
    assert headline_met("arpo", {"accuracy_delta": flat, "tool_calls_ratio": _m(0.4, 0.3, 0.5)})
    assert not headline_met("arpo", {"accuracy_delta": flat, "tool_calls_ratio": _m(0.4, 0.3, None)})  # type: ignore[arg-type]
    up = {"accuracy_delta": _m(0.02, 0.01, 0.03), "entropy_retention_ratio": _m(1.5, 1.2, 1.8)}
    assert headline_met("hapo", up) and not headline_met("eepo", {**up, "accuracy_delta": flat})
    assert headline_met("guide", {"accuracy_delta": flat, "hard_accuracy_delta": _m(0.1, 0.05, 0.15)})
    assert not headline_met("seele", {"accuracy_delta": flat, "hard_accuracy_delta": flat})
    assert not headline_met("dars_b", {"accuracy_delta": flat})  # no pass@k measured


def test_summary_needs_every_seed_of_a_comparison() -> None:
    empty = {"seeds": [0], "token_budgets": {}, "warm_starts": {}, "references": {}, "methods": {}}
    assert summarize([], [0], {}) == empty
