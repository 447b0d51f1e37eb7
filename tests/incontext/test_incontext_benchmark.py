"""The in-context benchmark (``experiments.incontext.benchmark_parts``): what is kept and what is rerun, the agent's
settings per part, and the committed results agreeing with the code (their configs, summary and table)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import experiments.incontext.benchmark_parts as bench
from experiments.incontext.benchmark_parts import (
    AgentRunSettings,
    config_changed,
    summarize_parts,
    summary_table,
    train_config,
)
from rolloutlab.config import to_dict

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "incontext" / "results"


def _fakes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    calls: list[tuple[str, Any]] = []

    def run_agent(cfg: Any, run_dir: Path) -> dict[str, Any]:
        calls.append(("agent", cfg.seed))
        return {"config": to_dict(cfg), "eval": {"mean": 1.0}, "env_steps": 100 + cfg.seed, "wall_seconds": 1.0}

    def recurrent_ppo(task: str, env_steps: int, seed: int, eval_tasks: int, **kwargs: Any) -> dict[str, Any]:
        calls.append(("ppo", env_steps))
        return {"eval": {"mean": 0.5}, "env_steps": env_steps}

    monkeypatch.setattr(bench, "run_agent", run_agent)
    monkeypatch.setattr(bench, "_recurrent_ppo", recurrent_ppo)
    return calls


def test_seeded_part_keeps_finished_runs_and_reruns_other_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fakes(monkeypatch)
    part: dict[str, Any] = {}
    saves: list[int] = []
    settings = AgentRunSettings(minutes_per_run=1.0)
    bench.run_seeded_part("bandit_2x100", part, settings, range(2), Path("unused"), lambda: saves.append(1))
    # RecurrentPPO gets the agent's env steps for the same seed; every new run is saved at once.
    assert calls == [("agent", 0), ("ppo", 100), ("agent", 1), ("ppo", 101)] and len(saves) == 4
    bench.run_seeded_part("bandit_2x100", part, settings, range(2), Path("unused"), lambda: saves.append(1))
    assert len(calls) == 4  # nothing to redo
    del part["recurrent_ppo"]["1"]  # the run in progress when the benchmark was killed
    bench.run_seeded_part("bandit_2x100", part, settings, range(2), Path("unused"), lambda: None)
    assert calls[4:] == [("ppo", 101)]
    longer = dataclasses.replace(settings, minutes_per_run=2.0)  # another benchmark: both runs of each seed again
    bench.run_seeded_part("bandit_2x100", part, longer, range(1), Path("unused"), lambda: None)
    assert calls[5:] == [("agent", 0), ("ppo", 100)] and part["agent"]["0"]["config"]["max_minutes"] == 2.0


def test_train_config_per_part() -> None:
    settings = AgentRunSettings()
    assert [train_config(f"bandit_{n}x100", 0, settings).n_arms for n in (5, 2)] == [5, 2]
    maze = train_config("tmaze", 1, settings, corridor=25)
    assert maze.corridor_length == 25 and maze.window == 26 and maze.stop_at_return == 0.99
    assert train_config("tmaze", 0, settings, encoder="memory_free").stop_at_return is None  # trained to the budget
    assert train_config("keydoor", 0, dataclasses.replace(settings, eval_tasks=500)).eval_tasks == 100
    assert not train_config("keydoor", 0, dataclasses.replace(settings, sigma_reparam=False)).agent.sigma_reparam
    with pytest.raises(ValueError, match="unknown part"):
        train_config("references", 0, settings)


@pytest.mark.parametrize("name", ["bandit_5x100", "bandit_2x100", "keydoor", "tmaze"])
def test_committed_runs_are_the_settings_of_their_recorded_command(name: str) -> None:
    """Rerunning a part with the arguments it records keeps every committed run (none counts as other settings)."""
    part = json.loads((RESULTS / f"{name}.json").read_text())
    fields = {f.name for f in dataclasses.fields(AgentRunSettings)}
    settings = AgentRunSettings(**{k: v for k, v in part["args"].items() if k in fields})
    if name == "tmaze":
        runs = [(int(length), int(seed), run) for length, per in part["agent"].items() for seed, run in per.items()]
        assert runs and not any(
            config_changed(run["config"], train_config(name, seed, settings, corridor=length), ignore_time_cap=True)
            for length, seed, run in runs
        )
    else:
        runs = part["agent"].items()
        assert runs and not any(config_changed(run["config"], train_config(name, int(s), settings)) for s, run in runs)


def test_committed_summary_and_table_are_generated_from_the_part_files() -> None:
    """Issue 7's summary (``summary_issue7.*``) and its table in docs/history.md."""
    summary = summarize_parts(RESULTS)
    assert json.dumps(summary) == json.dumps(json.loads((RESULTS / "summary_issue7.json").read_text()))
    table = (RESULTS / "summary_issue7.md").read_text()
    assert table == summary_table(summary)
    assert table.strip() in (ROOT / "docs" / "history.md").read_text()


def test_committed_second_round_summary_is_generated_from_the_matched_pieces() -> None:
    """The matched benchmark's ``summary.json`` and ``summary.md`` are ``matched.py --summarize-only``'s (the table,
    then a line per pre-registered headline with a plan), and the results page quotes them."""
    from experiments.incontext.headline import HEADLINES, headline_line, headline_summary
    from experiments.incontext.matched_protocol import summarize
    from experiments.incontext.matched_protocol import summary_table as matched_table

    committed = json.loads((RESULTS / "summary.json").read_text())
    summary = summarize(RESULTS / "matched_partial", committed["seeds"])
    assert json.dumps(summary["tasks"]) == json.dumps(committed["tasks"])
    expected = matched_table(summary)
    for headline in HEADLINES.values():
        result = headline_summary(headline.folder)
        assert (result is None) == (headline.summary_key not in committed)
        if result is not None:
            assert json.dumps(committed[headline.summary_key]) == json.dumps(result)
            expected += "\n" + headline_line(result)
    assert "tmaze_headline" in committed
    table = (RESULTS / "summary.md").read_text()
    assert table == expected
    assert table.strip() in (ROOT / "docs" / "results" / "incontext.md").read_text()


def test_quick_bench_contract(tmp_path: Path) -> None:
    """`rolloutlab bench --only incontext` at a few seconds of training: two lines and the JSON beside them."""
    from experiments.incontext import quick

    lines = quick.quick_bench(tmp_path, env_steps=400)
    assert [line.pillar for line in lines] == ["incontext", "incontext"]
    assert lines[0].command == quick.FULL_COMMAND and isinstance(lines[0].passed, bool)
    data = json.loads((tmp_path / "incontext_quick.json").read_text())
    assert data["agent_return"] == lines[0].value and set(data["references"]) >= {"random", "thompson", "oracle"}
    assert data["env_steps"] == 400 and "400 env steps" in lines[0].benchmark  # a step budget, not minutes
