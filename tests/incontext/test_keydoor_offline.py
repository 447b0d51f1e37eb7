"""The two offline key-door checks: one fixed layout (memory taken out) and random layouts (exploration taken out)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from script_modules import REPO, load_script

from envs.metarl.keydoor import DarkKeyDoorEnv

SCRIPTS = REPO / "experiments" / "incontext"


def test_oracle_return_of_the_fixed_layout_by_hand() -> None:
    script = load_script(SCRIPTS / "keydoor_fixed_layout.py")
    env = DarkKeyDoorEnv(size=5, episode_steps=20, rollout_steps=100)
    env.reset(seed=123)
    start_to_key = int(np.abs(env.key - env.start).sum())
    key_to_door = int(np.abs(env.door - env.key).sum())
    cycle = start_to_key + key_to_door  # the oracle's episode, shorter than the 20-step limit on this layout
    assert cycle <= 20
    full, rest = divmod(100, cycle)
    expected = 2 * full + (1 if rest >= start_to_key else 0)
    fields = {"keydoor_size": 5, "keydoor_episode_steps": 20, "keydoor_trial_steps": 100}
    assert script.oracle_return(fields, 123) == expected


def test_fixed_layout_check_trains_every_variant_and_input_on_one_layout(tmp_path: Path) -> None:
    script = load_script(SCRIPTS / "keydoor_fixed_layout.py")
    out = tmp_path / "fixed.json"
    args = script.Args(
        replay_trials=12, updates=4, eval_every=2, variants=["twohot_actor", "scalar_argmax_q"], out=str(out)
    )
    script.main(args)
    result = json.loads(out.read_text())
    assert [(r["variant"], r["input"]) for r in result["runs"]] == [
        ("twohot_actor", "coordinates"),
        ("twohot_actor", "cell"),
        ("scalar_argmax_q", "coordinates"),
        ("scalar_argmax_q", "cell"),
    ]
    for run in result["runs"]:
        assert [p["updates"] for p in run["curve"]] == [2, 4]
        assert all(0 <= p["greedy"] <= result["oracle"] for p in run["curve"])
    assert result["runs"][2]["overrides"]["policy"] == "critic"
    table = out.with_suffix(".md").read_text()
    assert table.count("| `scalar_argmax_q` |") == 2 and f"Oracle on the layout: {result['oracle']:.0f}" in table


def test_offline_memory_check_probes_the_transformer_critic(tmp_path: Path) -> None:
    script = load_script(SCRIPTS / "keydoor_offline_memory.py")
    out = tmp_path / "memory.json"
    args = script.Args(
        replay_trials=50, updates=2, probe_every=1, probe_tasks=4, variants=["scalar_argmax_q"], out=str(out)
    )
    script.main(args)
    result = json.loads(out.read_text())
    (run,) = result["runs"]
    assert "encoder" not in run["overrides"] and run["input"] == "cell"
    assert [p["updates"] for p in run["probes"]] == [1, 2]
    assert all(0.0 <= p["critic_toward"] <= 1.0 and p["chance"] > 0 for p in run["probes"])
    assert out.with_suffix(".md").read_text().count("| `scalar_argmax_q` | cell |") == 2
