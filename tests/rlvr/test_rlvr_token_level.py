"""Issue 21's measures and benchmark: the step-log metrics of a calc run (tool calls, answer length, slow share,
entropy, tokens), the token-level summary's ratios and headlines on hand-made runs, and
``experiments/rlvr/token_level.py`` end to end at a tiny size, resumed."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from script_modules import REPO, load_script
from tiny_grpo import tiny_calc_sft

from experiments.rlvr.token_level_protocol import TOKEN_ARMS, token_level_summary, token_level_table
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.grpo_groups import response_measures

MEASURES = ("tool_calls", "answer_length", "slow_share")


def test_response_measures_by_hand() -> None:
    texts = ["#86$", "45*2=90;3+90=93;#93$", "<calc>3+4</calc>7;<calc>7*2</calc>14;#14$"]
    out = response_measures(texts, [4, 17, 20])
    assert out == pytest.approx({"tool_calls": 2 / 3, "answer_length": 41 / 3, "slow_share": 2 / 3})
    assert response_measures([], []) == {"tool_calls": 0.0, "answer_length": 0.0, "slow_share": 0.0}
    with pytest.raises(ValueError, match="one length per text"):
        response_measures(["#1$"], [])


def test_calc_run_logs_the_measures(tmp_path: Path) -> None:
    from meta.rlvr.trainers.run import GRPORun, GRPORunConfig

    tiny_calc_sft(tmp_path / "sft.pt", difficulties=[1], eval_per_difficulty=2)
    cfg = GRPORunConfig(
        sft_checkpoint=str(tmp_path / "sft.pt"),
        steps=2,
        eval_every=1,
        pool_size=4,
        held_out_size=3,
        families=["calc"],
        difficulties=[1],
        token_controller="ehpo:1,0.1",
        grpo=GRPOConfig(prompts_per_step=2, max_new_tokens=24),
    )
    run = GRPORun.start(cfg, root=tmp_path / "runs").learn()
    assert run.run_dir is not None
    rows = list(csv.DictReader((run.run_dir / "progress.csv").open()))
    assert len(rows) == 3  # step 0 (evaluation only) and two steps
    for key in (*MEASURES, "entropy", "completion_tokens"):
        assert all(row[f"rollout/{key}"] != "" for row in rows[1:]), key
    for key in (*MEASURES, "entropy", "accuracy"):
        assert all(row[f"eval/{key}"] != "" for row in rows), key
    last = rows[-1]
    assert 0.0 <= float(last["rollout/slow_share"]) <= 1.0
    assert 0 < float(last["rollout/answer_length"]) <= 24
    assert float(last["rollout/completion_tokens"]) == run.trainer.costs.completion_tokens
    evals = json.loads((run.run_dir / "result.json").read_text())["evals"]
    assert [p["step"] for p in evals] == [0, 1, 2]
    assert all(set(MEASURES) | {"entropy", "accuracy"} <= set(p) for p in evals)
    assert evals[0]["entropy"] > 0
    details = run.trainer.evaluate_details(run.held_out)
    assert details["accuracy"] == run.trainer.evaluate(run.held_out) == evals[-1]["accuracy"]


def _run(arm: str, seed: int, accuracy: float, tool_calls: float, length: float, entropy: tuple[float, float]) -> Any:
    curve = [
        {
            "step": s,
            "accuracy": accuracy,
            "tool_calls": tool_calls,
            "answer_length": length,
            "slow_share": 0.5,
            "entropy": e,
            "completion_tokens": 100 * s,
            "responses": 8 * s,
        }
        for s, e in enumerate([entropy[0], entropy[1], entropy[1], entropy[1]])
    ]
    return {"arm": arm, "seed": seed, "curve": curve, "costs": {"completion_tokens": 300}, "steps": 3, "seconds": 1.0}


def test_token_level_summary_headlines_by_hand() -> None:
    seeds = [0, 1, 2]
    runs = []
    for s in seeds:
        runs += [
            _run("uniform_g8", s, 0.5, 2.0, 20.0, (1.0, 0.4)),
            _run("arpo", s, 0.5 + 0.01 * s, 1.0, 20.0, (1.0, 0.4)),  # half the calls, accuracy not lower: met
            _run("ehpo", s, 0.5, 2.0, 18.0, (1.0, 0.4)),  # 10% shorter only: missed
            _run("hapo", s, 0.5, 2.0, 20.0, (1.0, 0.9)),  # retention 0.9 vs 0.4: met
            _run("eepo", s, 0.5, 2.0, 20.0, (1.0, 0.4)),  # as uniform: missed
        ]
    summary = token_level_summary(runs, seeds, list(TOKEN_ARMS))
    m = summary["methods"]
    assert m["arpo"]["tool_calls_ratio"] == pytest.approx(0.5)
    assert m["arpo"]["accuracy_delta"] == pytest.approx(0.01)
    assert m["ehpo"]["length_ratio"] == pytest.approx(0.9)
    assert m["hapo"]["entropy_retention_ratio"] == pytest.approx(0.9 / 0.4)
    assert m["uniform_g8"]["tokens_ratio"] == pytest.approx(1.0)
    assert {k: m[k]["headline_met"] for k in m} == {
        "uniform_g8": None,
        "arpo": True,
        "ehpo": False,
        "hapo": True,
        "eepo": False,
    }
    for entry in m.values():
        assert {"tokens_ratio", "accuracy_delta", "tool_calls_ratio", "length_ratio", "headline_met"} <= set(entry)
    assert "**met**" in token_level_table(summary) and "**missed**" in token_level_table(summary)
    with pytest.raises(ValueError, match="uniform_g8 run for every seed"):
        token_level_summary([r for r in runs if r["arm"] != "uniform_g8"], seeds, ["arpo"])


def test_token_level_script_end_to_end_and_resume(tmp_path: Path) -> None:
    script = load_script(REPO / "experiments" / "rlvr" / "token_level.py")
    tiny_calc_sft(tmp_path / "sft.pt", difficulties=[1, 2, 3], eval_per_difficulty=1)
    args = script.Args(
        seeds=[0, 1],
        checkpoint=str(tmp_path / "sft.pt"),
        tokens_budget=200,
        max_steps=2,
        eval_every=1,
        prompts_per_step=2,
        pool_size=4,
        held_out_size=3,
        out=str(tmp_path / "results"),
    )
    first = script.main(args)
    partial = tmp_path / "results" / "token_level_partial"
    assert sorted(p.name for p in partial.iterdir()) == sorted(f"{a}__{s}.json" for a in TOKEN_ARMS for s in (0, 1))
    written = json.loads((tmp_path / "results" / "token_level.json").read_text())
    for name in TOKEN_ARMS:
        entry = written["methods"][name]
        assert {"tokens_ratio", "accuracy_delta", "tool_calls_ratio", "length_ratio", "headline_met"} <= set(entry)
        assert "accuracy_delta_ci" in entry and "tool_calls_ratio_ci" in entry
    assert (tmp_path / "results" / "token_level.md").read_text().startswith("target accuracy")
    # Resume: the finished runs are read back, the missing one is trained again and comes out the same.
    kept = {p.name: p.stat().st_mtime_ns for p in partial.iterdir()}
    (partial / "arpo__1.json").unlink()
    second = script.main(args)
    assert {p.name: p.stat().st_mtime_ns for p in partial.iterdir() if p.name != "arpo__1.json"} == {
        k: v for k, v in kept.items() if k != "arpo__1.json"
    }
    for name in TOKEN_ARMS:
        for key in ("final_accuracy", "tool_calls", "answer_length", "total_tokens", "accuracy_delta"):
            assert second["methods"][name][key] == first["methods"][name][key], (name, key)


def test_cli_trains_arpo_from_the_calc_preset(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from meta.rlvr.cli import app

    tiny_calc_sft(tmp_path / "sft.pt", difficulties=[1, 2, 3], eval_per_difficulty=1)
    preset = REPO / "experiments" / "rlvr" / "presets" / "calc_grpo.yaml"
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--no-progress",
            "--config",
            str(preset),
            "--checkpoint",
            str(tmp_path / "sft.pt"),
            "--token-controller",
            "arpo:0.5,1",
            "--steps",
            "1",
            "--prompts-per-step",
            "2",
            "--out",
            str(tmp_path / "runs"),
        ],
    )
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "runs").iterdir()
    rows = list(csv.DictReader((run_dir / "progress.csv").open()))
    assert rows[-1]["rollout/tool_calls"] != "" and rows[-1]["eval/tool_calls"] != ""
