"""The two offline key-door checks: one fixed layout (memory taken out) and random layouts (exploration taken out)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from script_modules import REPO, load_script

from envs.metarl.keydoor import DarkKeyDoorEnv
from meta.incontext.config import AgentConfig, TrainConfig
from meta.incontext.replay import Trajectory

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


# --- keydoor_played_targets.py ------------------------------------------------------------------------------------


def test_played_targets_script_reads_a_units_checkpoint(tmp_path: Path) -> None:
    from meta.incontext.trainer import InContextTrainer

    script = load_script(REPO / "experiments" / "incontext" / "keydoor_played_targets.py")
    unit = "amago_keydoor_short+tiny_600"
    folder = tmp_path / "runs" / f"keydoor_5x5_{unit}_seed0"
    cfg = TrainConfig(
        task="keydoor", keydoor_size=5, keydoor_episode_steps=20, keydoor_trial_steps=100, previous_obs_input=True,
        total_env_steps=600, n_envs=2, learning_starts=200, full_trials=True, eval_every_steps=10_000,
        eval_tasks=2, agent=AgentConfig(d_model=8, head_hidden=8, context_len=101, n_heads=2),
    )  # fmt: skip
    InContextTrainer(cfg, run_dir=folder).learn()
    out = tmp_path / "played.json"
    result = script.main(script.Args(units=[unit], runs_root=str(tmp_path / "runs"), eval_tasks=3, out=str(out)))
    entry = result["units"][f"{unit}_seed0"]
    assert entry["eval_tasks"] == 3 and entry["previous_obs_input"] is True and entry["d_model"] == 8
    assert 0.0 <= entry["trials_key_found"] <= 1.0
    assert json.dumps(json.loads(out.read_text())) == json.dumps(result)  # (NaN where no target was known)
    with pytest.raises(SystemExit, match="no checkpoint"):
        script.main(script.Args(units=["missing_100"], runs_root=str(tmp_path / "runs"), out=str(out)))


def test_first_reward_step_tells_the_key_from_the_door() -> None:
    script = load_script(REPO / "experiments" / "incontext" / "keydoor_played_targets.py")
    obs = np.zeros((5, 3), dtype=np.float32)
    obs[2:4, 2] = 1.0  # holding the key before steps 2 and 3
    trajectory = Trajectory(obs, np.zeros(4, np.int64), np.array([0, 1, 0, 1], np.float32), np.zeros(4, np.float32))
    assert script.first_reward_step(trajectory, holding=False) == 1
    assert script.first_reward_step(trajectory, holding=True) == 3
    assert script.first_reward_step(Trajectory(obs, *(np.zeros(4) for _ in range(3))), holding=True) is None
