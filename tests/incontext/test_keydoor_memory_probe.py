"""The key-door memory probe: a linear read-out finds a target cell that the features hold, and not one they lack."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
from script_modules import REPO, load_script

from experiments.incontext.matched_protocol import agent_config
from meta.incontext.config import TrainConfig
from meta.incontext.references import KeyDoorExplorer
from meta.incontext.trainer import InContextTrainer

DIAGNOSE = REPO / "experiments" / "incontext" / "keydoor_diagnose.py"
PROBE = REPO / "experiments" / "incontext" / "keydoor_memory_probe.py"


def _explorer_trials(n: int) -> tuple[list, list[tuple[np.ndarray, np.ndarray]], TrainConfig]:
    """Explorer play of ``n`` 5x5 key-door tasks, and each task's true (key, door) cells."""
    diagnose = load_script(DIAGNOSE)
    cfg = agent_config("keydoor_qlearning", "keydoor_5x5", 0, 1000, None, n)
    seeds = list(range(1000, 1000 + n))
    explorer = KeyDoorExplorer(cfg.keydoor_size)
    layouts = []

    def act(raw: object, obs: np.ndarray) -> int:
        if not layouts or layouts[-1][0] is not raw.key:  # type: ignore[attr-defined]
            layouts.append((raw.key, raw.door.copy(), raw.key.copy()))  # type: ignore[attr-defined]
        return explorer.act(raw.pos, raw.has_key)  # type: ignore[attr-defined]

    trials = diagnose.play(act, cfg, seeds, explorer)
    return trials, [(key, door) for _, door, key in layouts], cfg


def test_readout_finds_cells_the_features_hold_and_not_others() -> None:
    probe = load_script(PROBE)
    trials, layouts, cfg = _explorer_trials(40)
    assert len(layouts) == len(trials)
    rng = np.random.default_rng(0)
    steps = len(trials[0])
    noise = rng.normal(size=(len(trials), steps, 6)) * 0.1
    planted = np.stack([np.broadcast_to(np.concatenate([key, door]), (steps, 4)) for key, door in layouts])
    positions = np.stack([t.obs[:-1, :2] for t in trials])
    holding = probe.target_features(np.concatenate([planted, noise[..., :2]], -1), trials, cfg.keydoor_size)
    lacking = probe.target_features(np.concatenate([positions, noise], -1), trials, cfg.keydoor_size)
    for name in ("key", "door"):
        x, y, g, cells = holding[name]
        assert len(y) > 100 and x.shape == (len(y), 6) and y.shape == (len(y), 4) and cells.shape == (len(y), 25)
        baseline = probe.readout_r2(cells, y, g, 28)["abs"]
        assert probe.readout_r2(x, y, g, 28)["abs"] > max(0.95, baseline + 0.3)
        x, y, g, _ = lacking[name]
        assert probe.readout_r2(x, y, g, 28)["abs"] < baseline + 0.1
    # The relative cell is partly the agent's own cell: read out from the position alone it is not zero.
    x, y, g, _ = lacking["door"]
    assert probe.readout_r2(x, y, g, 28)["rel"] > 0.2


def test_target_events_count_keys_doors_and_the_first_door() -> None:
    probe = load_script(PROBE)
    trials, _, _ = _explorer_trials(6)
    events = probe.target_events(trials)
    holding = [t.obs[:-1, 2] > 0.5 for t in trials]
    doors = [int(((t.rewards > 0) & h).sum()) for t, h in zip(trials, holding, strict=True)]
    assert events["trials"] == 6 and events["doors_per_trial"] == np.mean(doors) > 1
    assert events["keys_per_trial"] >= events["doors_per_trial"] and events["trials_with_door"] == 1.0
    assert 0 < events["first_door_step_median"] < len(trials[0])


def test_probe_script_reads_a_run_folder_and_skips_what_it_has(tmp_path: Path) -> None:
    probe = load_script(PROBE)
    cfg = agent_config("keydoor_qlearning", "keydoor_5x5", 0, 400, None, 2)
    agent = dataclasses.replace(cfg.agent, d_model=8, head_hidden=8, n_heads=2, lr_warmup_updates=1)
    cfg = dataclasses.replace(cfg, n_envs=2, batch_size=2, learning_starts=0, eval_every_steps=10_000, agent=agent)
    run = tmp_path / "run"
    InContextTrainer(cfg, run).learn()
    out = tmp_path / "probe.json"
    first = probe.main(probe.Args(runs=[str(run)], tasks=10, out=str(out)))
    entry = json.loads(out.read_text())["runs"]["run"]
    assert (
        json.dumps(entry) == json.dumps(first["runs"]["run"])
        and entry["keydoor_size"] == 5
        and entry["train_tasks"] == 7
    )
    assert {"key", "door", "played_toward_targets", "return_mean"} <= set(entry)
    assert entry["key"]["steps"] == entry["key"]["cell_only"]["steps"]
    assert entry["replay_events"]["trials"] == 4 and entry["played_events"]["trials"] == 10
    rows = out.with_suffix(".md").read_text().splitlines()
    assert len(rows) == 3 and rows[2].startswith("| `run` | 5x5, 100 | 400 |")
    roomed = probe.main(probe.Args(runs=[str(run)], tasks=10, room=3, out=str(out)))["runs"]["run@room3"]
    assert roomed["room"] == 3 and entry["room"] == 5
    assert "| `run@room3` | 3x3 room of 5x5, 100 |" in out.with_suffix(".md").read_text()
    again = probe.main(probe.Args(runs=[str(run)], tasks=10, out=str(out)))
    assert json.dumps(again["runs"]["run"]) == json.dumps(entry)
