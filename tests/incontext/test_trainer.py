"""Smoke runs of every task, checkpoint/resume, the RecurrentPPO baseline, the CLI and one "it learns" test."""

from __future__ import annotations

import csv
import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from meta.incontext.baseline import RecurrentPPOConfig, train_recurrent_ppo
from meta.incontext.config import AgentConfig, TrainConfig
from meta.incontext.trainer import InContextTrainer

TINY_AGENT = AgentConfig(d_model=16, n_layers=1, n_heads=2, head_hidden=16, context_len=64)


def _tiny(task: str, steps: int, **overrides: object) -> TrainConfig:
    base: dict[str, object] = {
        "task": task, "n_arms": 2, "horizon": 10, "corridor_length": 4, "total_env_steps": steps, "n_envs": 2,
        "batch_size": 4, "window": 16, "updates_per_step": 0.02, "learning_starts": 0, "eval_tasks": 4,
        "eval_every_steps": 10**9, "checkpoint_every": 1, "agent": TINY_AGENT,
    }  # fmt: skip
    base.update(overrides)
    return TrainConfig(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(("task", "steps"), [("bandit", 200), ("tmaze", 200), ("keydoor", 1000)])
def test_smoke_run_each_task(task: str, steps: int, tmp_path: Path) -> None:
    trainer = InContextTrainer(_tiny(task, steps), tmp_path)
    result = trainer.learn()
    assert result["env_steps"] >= steps
    assert result["updates"] == int(result["env_steps"] * 0.02)
    assert np.isfinite(result["eval"]["mean"]) and len(result["eval"]["returns"]) == 4
    assert (tmp_path / "checkpoint.pt").exists() and (tmp_path / "progress.csv").exists()
    assert result["act_steps_per_second"] > 0 and result["updates_per_second"] > 0


def test_keydoor_train_rooms_shape_the_actors_tasks_and_not_the_evaluation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from meta.incontext import trainer as trainer_module

    cfg = _tiny("keydoor", 1000, keydoor_size=6, keydoor_train_rooms=[3, 4])
    trainer = InContextTrainer(cfg, tmp_path)
    assert [env.unwrapped.room_sizes for env in trainer.venv.envs] == [[3, 4], [3, 4]]  # type: ignore[attr-defined]
    built: list[dict[str, object]] = []
    plain_fns = trainer_module.task_env_fns

    def recording(task: str, n: int, **kwargs: object) -> list:
        built.append(kwargs)
        return plain_fns(task, n, **kwargs)

    monkeypatch.setattr(trainer_module, "task_env_fns", recording)
    trainer.learn()
    assert built and all("keydoor_room_sizes" not in kwargs for kwargs in built)  # evaluation: the whole grid
    rooms = {int(np.rint(traj.obs[:, :2].max() * 5)) for traj in trainer.replay.trajectories}
    assert rooms and rooms <= {2, 3}  # the actors never left a 4x4 room of the 6x6 grid


def test_keydoor_train_rooms_until_returns_the_actors_to_the_whole_grid(tmp_path: Path) -> None:
    cfg = _tiny("keydoor", 2000, keydoor_size=6, keydoor_train_rooms=[3], keydoor_train_rooms_until=1000)
    trainer = InContextTrainer(cfg, tmp_path)
    trainer.learn()
    widest = [int(np.rint(traj.obs[:, :2].max() * 5)) for traj in trainer.replay.trajectories]
    # Two 500-step trials per collection: the first collection in 3x3 rooms, the second (from 1000 env steps on) on
    # the whole 6x6 grid.
    assert len(widest) == 4 and max(widest[:2]) <= 2 and min(widest[2:]) > 2
    assert all(env.unwrapped.room == 6 for env in trainer.venv.envs)  # type: ignore[attr-defined]


def test_novelty_bonus_reaches_the_critics_targets_and_not_the_logged_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _tiny("keydoor", 2000, keydoor_size=4, novelty_bonus=0.3, novelty_anneal_steps=4000, checkpoint_every=1)
    trainer = InContextTrainer(cfg, tmp_path)
    seen: list[float] = []
    plain_sample = trainer.replay.sample

    def recording(*args: object, **kwargs: object) -> object:
        seen.append(float(args[4]))  # type: ignore[arg-type]  # novelty_coef, passed positionally
        return plain_sample(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(trainer.replay, "sample", recording)
    trainer.learn()
    trajectories = trainer.replay.trajectories
    assert trajectories and all(traj.novelty is not None for traj in trajectories)
    for traj in trajectories:
        # At most the 4x4 grid's 16 cells times two key states, less the start: the observation is the env's own.
        assert 1 <= traj.novelty.sum() <= 31  # type: ignore[union-attr]
        assert set(np.unique(traj.rewards)) <= {0.0, 1.0}  # stored and logged: the env's rewards alone
    # 20 updates after each 1000-step collection, at the bonus of that moment (annealed from 0.3 to 0 at 4000).
    assert seen == pytest.approx([0.3 * (1 - 1000 / 4000)] * 20 + [0.3 * (1 - 2000 / 4000)] * 20)
    with open(tmp_path / "progress.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert all(float(row["rollout/first_visits_mean"]) > 0 for row in rows)
    resumed = InContextTrainer(cfg, tmp_path, resume=True)  # the novelty survives the checkpoint
    assert all(traj.novelty is not None for traj in resumed.replay.trajectories)


def test_resume_after_kill_continues_exactly(tmp_path: Path) -> None:
    straight = InContextTrainer(_tiny("bandit", 80, updates_per_step=0.1), None)
    straight.learn()

    first = InContextTrainer(_tiny("bandit", 40, updates_per_step=0.1), tmp_path)
    first.learn()  # "killed" after 40 steps, with its checkpoint on disk
    resumed = InContextTrainer(_tiny("bandit", 80, updates_per_step=0.1), tmp_path, resume=True)
    assert resumed.env_steps == 40 and resumed.updates == first.updates and len(resumed.replay) == 4
    resumed.learn()
    assert resumed.env_steps == straight.env_steps and resumed.updates == straight.updates
    for a, b in zip(straight.agent.state_dict().values(), resumed.agent.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b)


def test_recurrent_ppo_baseline_smoke() -> None:
    config = RecurrentPPOConfig(n_envs=2, n_steps=32, batch_size=32, n_epochs=1, lstm_hidden_size=16)
    result = train_recurrent_ppo("tmaze", 128, seed=0, eval_tasks=6, config=config, corridor_length=3)
    assert result["env_steps"] >= 128
    assert len(result["eval"]["returns"]) == 6
    assert set(result["eval"]["returns"]) <= {0.0, 1.0}


def test_cli_train_eval_and_resume(tmp_path: Path) -> None:
    from meta.incontext.cli import app  # mounted as `rolloutlab incontext` by rolloutlab/cli.py

    runner = CliRunner()
    run_dir = tmp_path / "run"
    result = runner.invoke(
        app, ["train", "--task", "tmaze", "--corridor", "3", "--steps", "64", "--run-dir", str(run_dir)]
    )
    assert result.exit_code == 0, result.output
    assert "tmaze: eval return" in result.output and (run_dir / "result.json").exists()
    # A new --run-dir gets what every trainer's run directory holds: the config and TensorBoard events.
    assert (run_dir / "config.yaml").is_file() and list(run_dir.glob("events.out.tfevents*"))
    result = runner.invoke(app, ["eval", str(run_dir / "checkpoint.pt"), "--tasks", "10"])
    assert result.exit_code == 0, result.output
    assert "over 10 tasks" in result.output
    bad = runner.invoke(app, ["eval", str(tmp_path / "missing.pt")])
    assert bad.exit_code != 0
    # Resuming continues the run with its saved settings (no --corridor now: a fresh config would say 10); only the
    # budget grows.
    again = runner.invoke(app, ["train", "--task", "tmaze", "--steps", "128", "--run-dir", str(run_dir)])
    assert again.exit_code == 0, again.output
    assert re.search(r"resumed .* at step \d+ of 128", again.output), again.output
    assert sorted(p.name for p in run_dir.glob("progress*.csv")) == ["progress.csv"]
    with (run_dir / "progress.csv").open() as f:
        steps = [int(float(row["step"])) for row in csv.DictReader(f)]
    assert steps == sorted(set(steps)) and steps[-1] >= 128
    saved = json.loads((run_dir / "result.json").read_text())
    assert saved["env_steps"] >= 128 and saved["config"]["corridor_length"] == 3


def test_agent_learns_a_tiny_bandit() -> None:
    """2 arms, 10 pulls: random scores 5.0, Thompson 5.73, Bayes-optimal 6.02; the agent must clearly beat random.

    1000 evaluation tasks put the standard error near 0.085, so 5.35 is four standard errors above random.
    """
    config = _tiny(
        "bandit", 10_000, n_envs=8, batch_size=16, updates_per_step=0.25, learning_starts=200, eps_anneal_steps=4_000,
        eval_tasks=1000, agent=AgentConfig(d_model=32, n_layers=1, n_heads=2, head_hidden=32, context_len=16,
                                          gammas=[0.5, 0.9], tau=0.02),
    )  # fmt: skip
    result = InContextTrainer(config).learn()
    assert result["eval"]["mean"] >= 5.35


def test_a_checkpoint_saved_before_sigma_reparam_existed_still_loads(tmp_path: Path) -> None:
    """Saved configs without ``sigma_reparam`` ran with plain layers; they must not load as today's default (on)."""
    from meta.incontext.trainer import CHECKPOINT_KIND, load_agent
    from rolloutlab.checkpoint import load_checkpoint, save_checkpoint

    assert AgentConfig().sigma_reparam
    plain = dataclasses.replace(TINY_AGENT, sigma_reparam=False)
    trainer = InContextTrainer(_tiny("bandit", 40, agent=plain), tmp_path)
    trainer.learn()
    envelope = load_checkpoint(tmp_path / "checkpoint.pt", kind=CHECKPOINT_KIND)
    del envelope["config"]["agent"]["sigma_reparam"]  # what the older code wrote
    save_checkpoint(tmp_path / "old.pt", envelope["state"], kind=CHECKPOINT_KIND, config=envelope["config"])
    agent, config = load_agent(tmp_path / "old.pt")
    assert not config.agent.sigma_reparam
    for a, b in zip(trainer.agent.state_dict().values(), agent.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b)
