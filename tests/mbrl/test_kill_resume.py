"""Exact resume: a run SIGKILLed in a subprocess right after a checkpoint and resumed with ``--resume`` ends with the
same results, bit for bit, as the uninterrupted run with the same seed (MBPO on Pendulum-v1, Dyna-DQN on CartPole-v1,
PETS on the point mass).

Only the killed run needs a process of its own; the uninterrupted run and the resume go through the same CLI in this
process. A fresh interpreter pays the imports of torch and SB3 again (about as much CPU time as a whole tiny run), and
on a loaded machine three of them per test ran past the subprocess time limits.

The checkpoints fall inside an episode, so the resumed run has to put the episode in progress back
(:class:`rolloutlab.run_state.EpisodeReplay`; for PETS also the planner's warm start) besides every RNG, optimizer and
buffer.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch
import yaml
from typer.testing import CliRunner

import planning.mpc.cli  # noqa: F401  (registers --algo pets with the mbrl app, as the rolloutlab command does)
from mbrl.algorithms.dyna.run import CHECKPOINT_KIND as DYNA_CHECKPOINT_KIND
from mbrl.algorithms.mbpo import CHECKPOINT_KIND
from mbrl.cli import app
from planning.mpc.pets import CHECKPOINT_KIND as PETS_CHECKPOINT_KIND
from rolloutlab.checkpoint import load_checkpoint

REPO = Path(__file__).resolve().parents[2]
#: Pendulum episodes are 200 steps, so the checkpoints at 150 and 300 lie inside the first and second episodes.
MBPO_TINY = {
    "controller": "fixed:2",
    "initial_random_steps": 100,
    "epoch_length": 100,
    "model_train_freq": 100,
    "rollout_batch_size": 200,
    "updates_per_step": 1,
    "eval_every": 100,
    "eval_episodes": 1,
    "log_every": 100,
    "sac": {"batch_size": 64, "net_arch": [32, 32]},
    "model": {"ensemble_size": 3, "num_elites": 2, "hidden_size": 32, "num_layers": 2, "max_epochs": 5},
}
DYNA_TINY = {
    "phase_length": 200,
    "learning_starts": 100,
    "buffer_size": 1000,
    "train_freq": 4,
    "gradient_steps": 1,
    "target_update_interval": 50,
    "net_arch": [32, 32],
    "num_model_rollouts": 40,
    "model_train_freq": 100,
    "rollout_freq": 50,
    "eval_episodes": 1,
    "model": {"ensemble_size": 3, "num_elites": 2, "hidden_size": 16, "num_layers": 2, "max_epochs": 3},
}
#: Point-mass episodes are 30 steps, so the checkpoints at 40 and 80 lie inside the second and third episodes.
PETS_TINY = {
    "num_particles": 3,
    "initial_random_steps": 30,
    "model_train_freq": 30,
    "eval_every": 50,
    "eval_episodes": 1,
    "log_every": 50,
    "cem": {"population": 40, "iterations": 2},
    "model": {"ensemble_size": 3, "num_elites": 3, "hidden_size": 32, "num_layers": 2, "min_train_steps": 300},
}
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}


def _train(*args: str) -> list[str]:
    return [sys.executable, "-m", "mbrl.cli", "train", *args]


def _train_pets(*args: str) -> list[str]:
    # PETS registers itself with the mbrl app when the rolloutlab command mounts the pillars.
    return [sys.executable, "-m", "rolloutlab.cli", "mbrl", "train", "--algo", "pets", *args]


def _only_run_dir(parent: Path) -> Path:
    (run_dir,) = parent.glob("*")
    return run_dir


def _kill_after_first_checkpoint(command: list[str], out: Path) -> Path:
    """Start ``command``, SIGKILL it as soon as a checkpoint exists under ``out``; return the run directory."""
    proc = subprocess.Popen(command, cwd=REPO, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and not list(out.glob("*/checkpoint.pt")):
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "training exited early"
            time.sleep(0.01)
        assert list(out.glob("*/checkpoint.pt")), "no checkpoint appeared"
        assert proc.poll() is None, "the run finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    run_dir = _only_run_dir(out)
    assert not (run_dir / "result.json").exists()
    return run_dir


def _train_here(*args: str) -> str:
    """Run ``mbrl train ARGS`` in this process through the CLI; return what it printed."""
    result = CliRunner().invoke(app, ["train", *args])
    assert result.exit_code == 0, f"{result.output[-2000:]}{result.exception!r}"
    return result.output


def _resume(run_dir: Path, *extra: str) -> dict[str, Any]:
    _assert_resumed_in_one_log(run_dir, _train_here(*extra, "--resume", str(run_dir)))
    return dict(json.loads((run_dir / "result.json").read_text()))


def _assert_resumed_in_one_log(run_dir: Path, stdout: str) -> None:
    """The resumed session said where it resumed and continued the one progress.csv, no step written twice."""
    assert re.search(r"resumed .* at step \d+", stdout), stdout[-2000:]
    assert sorted(p.name for p in run_dir.glob("progress*.csv")) == ["progress.csv"]
    with (run_dir / "progress.csv").open() as f:
        steps = [int(float(row["step"])) for row in csv.DictReader(f)]
    assert steps and all(a < b for a, b in itertools.pairwise(steps)), steps


def _checkpoint(run_dir: Path, kind: str) -> dict[str, Any]:
    return dict(load_checkpoint(run_dir / "checkpoint.pt", kind=kind)["state"])


def _assert_same_tensors(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_mbpo_killed_mid_episode_resumes_exactly(tmp_path: Path) -> None:
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(MBPO_TINY))
    args = ["--env", "Pendulum-v1", "--steps", "400", "--checkpoint-every", "150", "--seed", "3"]
    _train_here(*args, "--config", str(config), "--out", str(tmp_path / "reference"))
    run_dir = _kill_after_first_checkpoint(
        _train(*args, "--config", str(config), "--out", str(tmp_path / "killed")), tmp_path / "killed"
    )
    killed = _checkpoint(run_dir, CHECKPOINT_KIND)
    assert killed["counters"]["env_steps"] in (150, 300)
    assert killed["episode"] is not None and len(killed["episode"]["replay"]["actions"]) in (150, 100)

    resumed = _resume(run_dir)
    expected = json.loads((_only_run_dir(tmp_path / "reference") / "result.json").read_text())
    exact = ("env_steps", "episodes", "eval", "episode_returns", "final_eval_return", "imagined_transitions")
    assert {k: resumed[k] for k in (*exact, "model_fits")} == {k: expected[k] for k in (*exact, "model_fits")}
    assert resumed["env_steps"] == 400 and resumed["episodes"] == 2  # the original budget, no episode dropped
    assert [s for s, _ in resumed["eval"]] == [100, 200, 300, 400]
    reference_final = _checkpoint(_only_run_dir(tmp_path / "reference"), CHECKPOINT_KIND)
    _assert_same_tensors(_checkpoint(run_dir, CHECKPOINT_KIND)["sac"]["policy"], reference_final["sac"]["policy"])


def test_dyna_killed_mid_episode_resumes_exactly(tmp_path: Path) -> None:
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(DYNA_TINY))
    args = ["--algo", "dyna", "--env", "CartPole-v1", "--steps", "600", "--controller", "fixed:2", "--seed", "4"]
    _train_here(*args, "--config", str(config), "--out", str(tmp_path / "reference"))
    run_dir = _kill_after_first_checkpoint(
        _train(*args, "--config", str(config), "--out", str(tmp_path / "killed")), tmp_path / "killed"
    )
    killed = _checkpoint(run_dir, DYNA_CHECKPOINT_KIND)["algo"]
    assert killed["steps_done"] in (200, 400)
    (in_progress,) = killed["episodes_in_progress"]
    # Inside an episode that began with an unseeded reset: replay has to restore the env's generator as well.
    assert in_progress["actions"] is not None and in_progress["seed"] is None

    resumed = _resume(run_dir, "--algo", "dyna")
    expected = json.loads((_only_run_dir(tmp_path / "reference") / "result.json").read_text())
    assert resumed == expected
    assert resumed["env_steps"] == 600 and resumed["episodes"] > 1
    reference_final = _checkpoint(_only_run_dir(tmp_path / "reference"), DYNA_CHECKPOINT_KIND)["algo"]
    _assert_same_tensors(_checkpoint(run_dir, DYNA_CHECKPOINT_KIND)["algo"]["q"], reference_final["q"])


def test_pets_killed_mid_episode_resumes_exactly(tmp_path: Path) -> None:
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(PETS_TINY))
    args = ["--env", "rolloutlab/PointMass-v0", "--steps", "150", "--controller", "fixed:8", "--seed", "2"]
    args += ["--checkpoint-every", "40", "--config", str(config)]
    _train_here("--algo", "pets", *args, "--out", str(tmp_path / "reference"))
    run_dir = _kill_after_first_checkpoint(_train_pets(*args, "--out", str(tmp_path / "killed")), tmp_path / "killed")
    killed = _checkpoint(run_dir, PETS_CHECKPOINT_KIND)
    assert killed["counters"]["env_steps"] in (40, 80)
    assert killed["episode"] is not None and len(killed["episode"]["replay"]["actions"]) in (10, 20)
    assert killed["episode"]["planner"]["plan"] is not None  # the warm start of the next step

    resumed = _resume(run_dir, "--algo", "pets")
    expected = json.loads((_only_run_dir(tmp_path / "reference") / "result.json").read_text())
    exact = ("env_steps", "episodes", "eval", "episode_returns", "final_eval_return", "model_fits", "horizons")
    assert {k: resumed[k] for k in exact} == {k: expected[k] for k in exact}
    assert resumed["env_steps"] == 150 and resumed["episodes"] == 5  # the original budget, no episode dropped
    reference_final = _checkpoint(_only_run_dir(tmp_path / "reference"), PETS_CHECKPOINT_KIND)
    final = _checkpoint(run_dir, PETS_CHECKPOINT_KIND)
    _assert_same_tensors(final["model"]["ensemble"], reference_final["model"]["ensemble"])


def test_cli_validates_input(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["train", "--controller", "nonsense:1", "--out", str(tmp_path)])
    assert result.exit_code != 0 and "unknown controller" in result.output
    result = runner.invoke(app, ["train", "--resume", str(tmp_path / "missing")])
    assert result.exit_code != 0 and "checkpoint not found" in result.output
    result = runner.invoke(app, ["train", "--algo", "ppo"])
    assert result.exit_code != 0 and "unknown algorithm" in result.output
