"""The seed-method benchmark: a tiny run of the whole script, resuming, equal token budgets, every arm's wiring (BAPO
and its fixed-clip baseline on the same stale updates, DART and its synchronous baseline) and the headline rules."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from envs.reasoning import Task
from envs.reasoning.registry import family_spec
from experiments.rlvr import seed_methods
from experiments.rlvr.headroom import GATES
from experiments.rlvr.seed_methods import (
    GATE_NAMES,
    METHOD_BASELINES,
    METHOD_TESTBEDS,
    METHODS,
    Args,
    build_trainer,
    find_testbed,
    headline_met,
    main,
    summarize,
    units_of,
    update_stats,
    warm_start,
)
from meta.rlvr.token.clipping import BalancedClip
from meta.rlvr.trainers.dart import DARTTrainer
from meta.rlvr.trainers.grpo_config import GRPOConfig

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
    assert METHOD_TESTBEDS["bapo"] == METHOD_TESTBEDS["dart"] == "countdown"  # BAPO's gate reads countdown
    with pytest.raises(ValueError, match=r"unknown method 'ppo' in --methods; known: alp, .*, bapo, dart$"):
        Args(methods=["ppo"])
    with pytest.raises(ValueError, match="dart_backend must be one of inline, process, ray, got 'mpi'"):
        Args(dart_backend="mpi")
    with pytest.raises(ValueError, match="need stale_epochs >= 1"):
        Args(stale_epochs=0)


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
    # BAPO and DART bring their own matched baselines, once each, before the methods.
    units = units_of(Args(methods=["dart", "bapo", "hapo"], seeds=[0], out=str(tmp_path)))
    assert [u.arm for u in units] == ["uniform", "dapo", "dart_sync", "clip_fixed", "dart", "bapo", "hapo"]


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
    assert "| alp | carry | uniform | length_ratio" in (tmp_path / "seed_methods.md").read_text()

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


def _tiny_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.getbasetemp() / "seed_methods_ckpt"  # one tiny warm start per testbed for all tests


@pytest.mark.parametrize("arm", sorted([*METHODS, *METHOD_BASELINES.values()]))
def test_every_arm_trains_a_step(tmp_path_factory: pytest.TempPathFactory, arm: str) -> None:
    method = next((m for m, b in METHOD_BASELINES.items() if b == arm), arm)
    args = Args(
        methods=[method],
        prompts_per_step=2,
        pool_per_bucket=2,
        sft_steps=2,
        checkpoint_dir=str(_tiny_ckpt(tmp_path_factory)),
        dart_backend="inline",
    )
    bed, path = warm_start(find_testbed(METHOD_TESTBEDS[method]), args)
    trainer = build_trainer(arm, bed, path, args, seed=0)
    try:
        trainer.step()
    finally:
        if isinstance(trainer, DARTTrainer):
            trainer.close()
    assert trainer.costs.completion_tokens > 0


def short_is_right(task: Task, completion: str) -> float:
    """A reward with a spread on any policy: the short answers are right, the long ones (most tokens) wrong, so the
    positive share of BAPO's loss starts below its target and its bounds must move."""
    return float(len(completion.rstrip("$")) <= 4)


def _stale_args(tmp_path_factory: pytest.TempPathFactory, **overrides: Any) -> Args:
    settings: dict[str, Any] = {
        "methods": ["bapo"],
        "prompts_per_step": 2,
        "pool_per_bucket": 2,
        "sft_steps": 2,
        "stale_epochs": 3,
        "checkpoint_dir": str(_tiny_ckpt(tmp_path_factory)),
    }
    return Args(**{**settings, **overrides})


def test_bapo_and_fixed_clip_train_on_the_same_stale_updates(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        seed_methods, "family_spec", lambda name: dataclasses.replace(family_spec(name), verify=short_is_right)
    )
    args = _stale_args(tmp_path_factory)
    bed, path = warm_start(find_testbed("countdown"), args)
    bapo = build_trainer("bapo", bed, path, args, seed=0)
    fixed = build_trainer("clip_fixed", bed, path, args, seed=0)
    uniform = build_trainer("uniform", bed, path, args, seed=0)
    # Matched: the same schedule and data (same seed, same prompts); only the clip bounds' rule differs.
    assert bapo.cfg == fixed.cfg and bapo.cfg.epochs == 3 and uniform.cfg.epochs == 1
    assert isinstance(bapo.clip_controller, BalancedClip) and fixed.clip_controller is None
    seen: list[tuple[Any, tuple[float, float]]] = []
    decide = bapo.clip_controller.decide

    def spy(feedback: Any) -> tuple[float, float]:
        bounds = decide(feedback)
        seen.append((feedback["ratios"].copy(), bounds))
        return bounds

    monkeypatch.setattr(bapo.clip_controller, "decide", spy)
    bapo_steps = [bapo.step() for _ in range(2)]
    fixed_steps = [fixed.step() for _ in range(2)]
    per_generation = GRPOConfig.minibatches * 3
    # Stale data: several optimizer steps per generated batch, and the ratio leaves 1 after the first.
    for metrics in (bapo_steps, fixed_steps):
        stats = update_stats(metrics)
        assert stats["updates_per_generation"] == per_generation
        assert stats["ratio_spread_mean"] > 0 and (stats["ratio_min"] < 1 or stats["ratio_max"] > 1)
    assert uniform.step()["optimizer_steps"] == GRPOConfig.minibatches
    # BAPO decides its bounds at every optimizer step from the stale ratios, and moves them off (a-, a+) ...
    assert len(seen) == 2 * per_generation
    assert any(abs(r - 1).max() > 0 for r, _ in seen)
    start = (bapo.clip_controller.low_range[0], bapo.clip_controller.high_range[0])
    assert any(bounds != start for _, bounds in seen)
    assert all(0.6 <= lo <= 0.9 and 1.2 <= hi <= 3.0 for _, (lo, hi) in seen)
    # ... while the fixed arm's bounds are the config's, at every step.
    fixed_stats = update_stats(fixed_steps)
    assert fixed_stats["clip_low_range"] == [pytest.approx(0.8)] * 2
    assert fixed_stats["clip_high_range"] == [pytest.approx(1.28)] * 2


def test_bapo_and_dart_units_and_summary(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        seed_methods, "family_spec", lambda name: dataclasses.replace(family_spec(name), verify=short_is_right)
    )
    args = tiny(
        tmp_path,
        methods=["bapo", "dart"],
        tokens_budget=400,
        stale_epochs=2,
        dart_backend="inline",
        checkpoint_dir=str(_tiny_ckpt(tmp_path_factory)),
    )
    summary = main(args)
    folder = tmp_path / "seed_methods"
    arms = ("uniform", "dapo", "dart_sync", "clip_fixed", "dart", "bapo")
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"countdown__{a}__{s}.json" for a in arms for s in (0, 1))
    records = {p.stem: json.loads(p.read_text()) for p in folder.iterdir()}
    for name, record in records.items():
        assert record["train_seconds"] > 0 and record["steps_per_second"] > 0, name
        assert record["updates"]["updates_per_generation"] > 0, name
    # The unit JSON shows the staleness: 4 minibatches x 2 passes, ratios off 1, and only BAPO's bounds move.
    for seed in (0, 1):
        for arm in ("bapo", "clip_fixed"):
            updates = records[f"countdown__{arm}__{seed}"]["updates"]
            assert updates["updates_per_generation"] == GRPOConfig.minibatches * 2
            assert updates["ratio_spread_mean"] > 0
        assert records[f"countdown__clip_fixed__{seed}"]["updates"]["clip_low_range"] == [pytest.approx(0.8)] * 2
        assert records[f"countdown__bapo__{seed}"]["updates"]["clip_low_range"][1] > 0.6
        assert records[f"countdown__uniform__{seed}"]["updates"]["updates_per_generation"] <= GRPOConfig.minibatches
        assert set(records[f"countdown__dart__{seed}"]["async"]) >= {"idle_seconds", "mean_staleness"}
    bapo, dart = summary["methods"]["bapo"], summary["methods"]["dart"]
    assert bapo["baseline"] == "clip_fixed" and dart["baseline"] == "dart_sync"
    assert bapo["headline_measure"]["name"] == "accuracy_delta"
    assert dart["headline_measure"]["name"] == "steps_per_second_ratio"
    assert dart["gate"] is None and isinstance(dart["headline_met"], bool)
    assert set(bapo["updates"]) == {"bapo", "clip_fixed"} and bapo["updates"]["clip_fixed"]["clip_fraction"] >= 0
    assert set(summary["references"]["countdown"]) == set(arms) - {"bapo", "dart"}
    table = (tmp_path / "seed_methods.md").read_text()
    assert "| bapo | countdown | clip_fixed | accuracy_delta" in table
    assert "| dart | countdown | dart_sync | steps_per_second_ratio" in table and table.rstrip().endswith("| — |")


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
    assert headline_met("bapo", up) and not headline_met("bapo", {**up, "entropy_retention_ratio": _m(1.1, 0.9, 1.3)})
    faster = {"accuracy_delta": flat, "steps_per_second_ratio": _m(1.6, 1.4, 1.8)}
    assert headline_met("dart", faster)
    assert not headline_met("dart", {**faster, "accuracy_delta": _m(-0.05, -0.08, -0.02)})  # accuracy worse
    assert not headline_met("dart", {**faster, "steps_per_second_ratio": _m(1.1, 0.9, 1.3)})
    assert not headline_met("dart", {"accuracy_delta": flat})  # no step rates on record


def test_summary_needs_every_seed_of_a_comparison() -> None:
    empty = {"seeds": [0], "token_budgets": {}, "warm_starts": {}, "references": {}, "methods": {}}
    assert summarize([], [0], {}) == empty
