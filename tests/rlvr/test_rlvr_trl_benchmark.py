"""The TRL allocation benchmark (``experiments/rlvr/trl_benchmark.py``, summarized by ``trl_summary``): the unseen
task families, the process-count dimension, the per-step log, the summary's keys (wall-clock to target, rows and
tokens, the 2-process comparison, the target part by part), and the committed summary agreeing with its runs and its
table."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from script_modules import load_script

from experiments.rlvr.trl_summary import summarize_trl, trl_table

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "rlvr" / "trl_benchmark.py"
RESULTS = ROOT / "experiments" / "rlvr" / "results"
#: The committed run of the benchmark with 1 and 2 processes and the three families, seeds 0-4.
SUMMARY = RESULTS / "trl_summary.json"
#: The earlier 1-process benchmark (6 arms, arith and sort, seeds 0-4), summarized by the summarizer of its time: its
#: records lack the per-step log and clocks the summary reads now, so only its quoted table is checked.
LEGACY = RESULTS / "trl_summary_one_process.json"


def _bench() -> ModuleType:
    pytest.importorskip("trl")
    return load_script(SCRIPT)


def test_sort_tasks_are_sorted_digit_strings() -> None:
    from envs.reasoning import verify

    tasks = _bench().sort_tasks(50, np.random.default_rng(0))
    for t in tasks:
        digits = t.prompt[:-1]
        assert t.prompt.endswith("=") and digits.isdigit() and 4 <= len(digits) <= 7
        assert t.answer == "".join(sorted(digits)) and t.difficulty == len(digits)
        assert verify(t, t.answer + "$") == 1.0
    again = _bench().sort_tasks(50, np.random.default_rng(0))
    assert again == tasks


def test_reverse_tasks_are_digit_strings_backwards_with_their_own_sets() -> None:
    from envs.reasoning import verify

    bench = _bench()
    tasks = bench.reverse_tasks(50, np.random.default_rng(0))
    for t in tasks:
        digits = t.prompt[:-1]
        assert t.prompt.endswith("=") and digits.isdigit() and 4 <= len(digits) <= 7
        assert t.answer == digits[::-1] and t.family == "reverse" and t.difficulty == len(digits)
        assert verify(t, t.answer + "$") == 1.0 and verify(t, digits + "$") == float(digits == digits[::-1])
    args = bench.Args(pool_size=30, held_out_size=20)
    pool, held_out = bench.family_tasks("reverse", args)
    assert len(pool) == 30 and len(held_out) == 20 and pool != bench.family_tasks("sort", args)[0]
    assert bench.family_tasks("reverse", args) == (pool, held_out)  # fixed generators
    with pytest.raises(ValueError, match="unknown family 'copy'"):
        bench.family_tasks("copy", args)


def test_run_files_name_their_process_count_and_the_launcher_passes_every_setting() -> None:
    import tyro

    bench = _bench()
    args = bench.Args(families=["sort", "reverse"], arms=["uniform_g8", "ar3po"], seeds=[3, 4], steps=7, lr=1e-3)
    units = bench.units_for(args, 2, Path("runs"))
    assert [u.path.name for u in units[:2]] == ["sort__uniform_g8__3__p2.json", "sort__ar3po__3__p2.json"]
    assert [u.seed for u in units] == [3, 3, 3, 3, 4, 4, 4, 4]  # seeds outermost
    assert {u.group for u in units} == {"sort p2", "reverse p2"}
    # The process group's members parse the launcher's options back to the same settings.
    again = tyro.cli(bench.Args, args=[*bench._cli(args), "--units", "sort:ar3po:3"])
    assert again == bench.Args(**{**vars(args), "units": ["sort:ar3po:3"]})
    # A member runs its units whatever ``run`` says; the flag is left out (torch.distributed.run would read it).
    assert "--no-run" not in bench._cli(bench.Args(run=False, seeds=[0]))


def test_torch_distributed_run_passes_every_launcher_option_to_the_script() -> None:
    """torch.distributed.run's parser matches abbreviations of its own options (``--run`` for ``--run-path``): every
    option the launcher gives the members must reach the script untouched."""
    from torch.distributed.run import get_args_parser

    bench = _bench()
    for args in (bench.Args(), bench.Args(run=False, seeds=[0])):
        options = [*bench._cli(args), "--units", "arith:uniform_g8:0"]
        parsed = get_args_parser().parse_args(["--nproc_per_node=2", "script.py", *options])
        assert parsed.training_script_args == options


def test_a_batch_that_does_not_split_over_the_processes_is_refused_with_both_settings() -> None:
    with pytest.raises(ValueError, match="prompts_per_step=3 does not split evenly over processes=2"):
        _bench().make_trainer(
            None, [], None, "sort", "unused", 0, prompts_per_step=3, max_new_tokens=8, lr=1e-3, max_steps=1, processes=2
        )


def test_step_log_keeps_every_steps_stage_fields_and_the_final_speeds() -> None:
    bench = _bench()
    history = [
        {"rlvr/stages": 4.0, "rlvr/stage_seconds": 0.25, "reward": 0.5, "rlvr/reward_per_prompt": 0.6, "step": 1},
        {"rlvr/stages": 2.0, "rlvr/stage_seconds": 0.5, "reward": 0.25, "rlvr/reward_per_prompt": 0.3, "step": 2},
        {"train_runtime": 9.0, "train_samples_per_second": 10.0, "train_rows_per_second": 6.0, "step": 2},
    ]
    steps, speeds = bench.step_log(history)
    assert steps["rlvr/stages"] == [4.0, 2.0] and steps["rlvr/stage_seconds"] == [0.25, 0.5]
    assert steps["rlvr/reward_per_prompt"] == [0.6, 0.3] and steps["reward"] == [0.5, 0.25]
    assert all(np.isnan(v) for v in steps["rlvr/rollout_seconds"])  # a field not logged is NaN, not dropped
    assert speeds == {"train_runtime": 9.0, "train_samples_per_second": 10.0, "train_rows_per_second": 6.0}


def _run(
    family: str, arm: str, seed: int, processes: int, reach_step: int, step_seconds: float, final: float = 0.5
) -> dict[str, Any]:
    """A run record as the benchmark writes it: accuracy 0.1 until ``reach_step``, then ``final``; 100 tokens and
    ``step_seconds`` seconds per step; ``arm`` uniform_g8 generates 8 rows a step, others 4 and 2 stages."""
    rows = 8 if arm == "uniform_g8" else 4
    steps = 6
    curve = []
    for step in range(0, steps + 1):
        tokens = 100 * step
        curve.append(
            {
                "step": step,
                "accuracy": final if step >= reach_step else 0.1,
                "train_seconds": step_seconds * step,
                "train_cpu_seconds": 0.5 * step,
                "completion_tokens": tokens,
                "responses": rows * step,
                "prompt_tokens": 0,
            }
        )
    return {
        "family": family,
        "arm": arm,
        "seed": seed,
        "processes": processes,
        "curve": curve,
        "costs": {
            "completion_tokens": 100 * steps,
            "responses": rows * steps,
            "prompt_tokens": 0,
            "reused_responses": 0,
            "dropped_tokens": 0,
            "rows_trained": rows * steps,
            "tokens_trained": 90 * steps,
        },
        "seconds": step_seconds * steps,
        "cpu_seconds": 0.5 * steps,
        "zero_variance_fraction": 0.0,
        "steps": {
            "reward": [0.25] * steps,
            "rlvr/reward_per_prompt": [0.5] * steps,
            "rlvr/stages": [1.0 if arm == "uniform_g8" else 2.0] * steps,
            "rlvr/rollout_seconds": [step_seconds / 2] * steps,
        },
        "speeds": {
            "train_samples_per_second": 8.0,
            "train_rows_per_second": float(rows),
            "train_generated_tokens_per_second": 100.0,
        },
        "load": [1.0, 3.0],
    }


def _runs(p2_reach: int = 2, p2_ar3po_seconds: float = 1.0) -> list[dict[str, Any]]:
    runs = []
    for seed in range(3):
        for processes, reach, seconds in ((1, 2, 1.0), (2, p2_reach, p2_ar3po_seconds)):
            runs.append(_run("f", "uniform_g8", seed, processes, 4, 1.0))
            runs.append(_run("f", "ar3po", seed, processes, reach, seconds))
    return runs


def test_summary_has_wall_clock_to_target_rows_tokens_stages_and_rewards_per_process_count() -> None:
    summary = summarize_trl(_runs(p2_ar3po_seconds=3.0), ["f"], ["uniform_g8", "ar3po"], [0, 1, 2], [1, 2])
    one, two = summary["families"]["f"], summary["processes"]["2"]["f"]
    ar3po = one["arms"]["ar3po"]
    assert one["start_accuracy"] == pytest.approx(0.1) and one["target_accuracy"] == pytest.approx(0.95 * 0.5)
    # uniform reaches the target at step 4 (400 tokens, 4 s), AR3PO at step 2 (200 tokens, 2 s; 6 s on 2 processes).
    assert ar3po["tokens_to_target"] == [200.0] * 3 and ar3po["ratio_tokens_vs_uniform_g8"] == 0.5
    assert ar3po["seconds_to_target"] == [2.0] * 3 and ar3po["ratio_seconds_vs_uniform_g8"] == 0.5
    assert two["arms"]["ar3po"]["ratio_seconds_vs_uniform_g8"] == 1.5
    assert two["best_adaptive"]["ratio_seconds_vs_uniform_g8"] == 1.5
    # CPU time (the same 0.5 s per step on every run) reads the tokens' ratio, whatever the wall-clock did.
    assert (
        two["arms"]["ar3po"]["ratio_cpu_seconds_vs_uniform_g8"] == 0.5 and ar3po["cpu_seconds_to_target"] == [1.0] * 3
    )
    assert ar3po["rows_trained"] == 24 and ar3po["tokens_trained"] == 540 and ar3po["total_responses"] == 24
    assert ar3po["stages_per_step"] == 2.0 and ar3po["seconds_per_stage"] == 0.25 and ar3po["seconds_per_step"] == 1.0
    assert ar3po["reward_per_prompt"] == 0.5 and ar3po["reward_row_mean"] == 0.25
    assert ar3po["train_rows_per_second"] == 4.0 and ar3po["load_average"] == 2.0
    parts = summary["target_parts"]
    assert parts["tokens_at_most_half_uniform"]["1"]["f"] == {
        "ran": True,
        "arm": "ar3po",
        "value": 0.5,
        "ci": [0.5, 0.5],
        "met": True,
    }
    assert parts["final_accuracy_not_below_uniform"]["2"]["f"]["met"]
    assert parts["wall_clock_at_most_uniform_on_2_processes"]["f"]["value"] == 1.5
    assert not parts["wall_clock_at_most_uniform_on_2_processes"]["f"]["met"]  # a miss is a miss
    assert parts["two_processes_equal_one_process"]["f"]["met"] and not summary["target_met"]
    table = trl_table(summary)
    assert "| 2 | f | ar3po | 0.50 [0.50, 0.50] | 1.50 [1.50, 1.50] | 0.50 [0.50, 0.50] |" in table
    assert (
        "- f, 2 processes: ar3po at 1.50x uniform G=8's wall-clock to target [1.50, 1.50] (<= 1.0x: **missed**); in "
        "CPU time of the busiest process 0.50x [0.50, 0.50] (not judged)." in table
    )


def test_two_processes_against_one_pairs_seeds_on_the_one_process_target() -> None:
    # Same runs on both process counts: every difference is 0 and the arms are equal within noise; the target is met.
    same = summarize_trl(_runs(), ["f"], ["uniform_g8", "ar3po"], [0, 1, 2], [1, 2])
    entry = same["two_vs_one_process"]["2"]["f"]["ar3po"]
    assert (
        entry["final_accuracy_diff"] == 0.0 and entry["tokens_to_target_diff"] == 0.0 and entry["ratio_tokens"] == 1.0
    )
    assert entry["equal_within_noise"] and entry["seeds"] == [0, 1, 2] and same["target_met"]
    # AR3PO needs 2 more steps on 2 processes on every seed: the interval excludes 0, part and target are missed.
    later = summarize_trl(_runs(p2_reach=4), ["f"], ["uniform_g8", "ar3po"], [0, 1, 2], [1, 2])
    entry = later["two_vs_one_process"]["2"]["f"]["ar3po"]
    assert entry["tokens_to_target_diff"] == 200.0 and entry["tokens_to_target_diff_ci"] == [200.0, 200.0]
    assert not entry["equal_within_noise"]
    assert later["target_parts"]["two_processes_equal_one_process"]["f"] == {
        "arms": ["ar3po", "uniform_g8"],
        "not_equal": ["ar3po"],
        "met": False,
    }
    assert not later["target_met"]
    # A family missing on 2 processes is a part not met, never a pass by absence.
    only_one = summarize_trl(
        [r for r in _runs() if r["processes"] == 1], ["f"], ["uniform_g8", "ar3po"], [0, 1, 2], [1, 2]
    )
    assert not only_one["target_parts"]["two_processes_equal_one_process"]["f"]["met"]
    assert only_one["target_parts"]["wall_clock_at_most_uniform_on_2_processes"]["f"]["arm"] is None
    assert not only_one["target_met"]
    assert "- f, 2 processes: not run: wall-clock **missed**." in trl_table(only_one)
    # One seed: no interval, so "equal" is undecided and the part is not met.
    one_seed = summarize_trl(_runs(), ["f"], ["uniform_g8", "ar3po"], [0], [1, 2])
    assert one_seed["two_vs_one_process"]["2"]["f"]["ar3po"]["equal_within_noise"] is None
    assert not one_seed["target_parts"]["two_processes_equal_one_process"]["f"]["met"]
    assert "| undecided (1 seed) |" in trl_table(one_seed)
    # A family without runs is said to be not run, not "no arm reached the target".
    assert "- g, 1 process(es): not run (no uniform G=8 run on these seeds): **missed**." in trl_table(
        summarize_trl(_runs(), ["f", "g"], ["uniform_g8", "ar3po"], [0, 1, 2], [1, 2])
    )


def test_committed_summary_has_the_issues_keys_and_its_table_is_quoted() -> None:
    summary = json.loads(SUMMARY.read_text())
    args = summary["args"]
    assert set(args["families"]) == {"arith", "sort", "reverse"} and args["processes"] == [1, 2]
    for count, fams in (("1", summary["families"]), ("2", summary["processes"]["2"])):
        assert fams, f"no family has a complete seed on {count} process(es)"
        for family in fams.values():
            assert family["seeds"] == args["seeds"] and {"uniform_g8", "ar3po"} <= set(family["arms"]) <= set(
                args["arms"]
            )
            for key in ("ratio_tokens_vs_uniform_g8", "ratio_seconds_vs_uniform_g8", "ratio_cpu_seconds_vs_uniform_g8"):
                assert key in family["best_adaptive"]
            for arm in family["arms"].values():
                for key in (
                    "rows_trained",
                    "tokens_trained",
                    "reward_per_prompt",
                    "stages_per_step",
                    "seconds_per_stage",
                ):
                    assert key in arm
    assert summary["two_vs_one_process"]["2"]
    assert isinstance(summary["target_met"], bool) and set(summary["target_parts"]) == {
        "tokens_at_most_half_uniform",
        "final_accuracy_not_below_uniform",
        "wall_clock_at_most_uniform_on_2_processes",
        "two_processes_equal_one_process",
    }
    table = SUMMARY.with_suffix(".md").read_text()
    assert table == trl_table(summary)
    page = (ROOT / "docs" / "results" / "rlvr.md").read_text()
    assert table.strip() in page
    assert LEGACY.with_suffix(".md").read_text().strip() in page


def test_committed_summary_is_what_its_per_run_records_give() -> None:
    """trl_summary recomputes the committed TRL summary from the committed runs, number for number."""
    summary = json.loads(SUMMARY.read_text())
    args = summary["args"]
    runs = [json.loads(p.read_text()) for p in sorted((RESULTS / "trl" / "per_run").glob("*__p[0-9]*.json"))]
    again = summarize_trl(runs, args["families"], args["arms"], args["seeds"], args["processes"])
    assert json.dumps(again) == json.dumps({k: summary[k] for k in again})
