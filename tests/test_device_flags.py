"""Every trainer's ``--device`` flag on the CPU: ``--device cpu`` is the default computation bit for bit, the config
records where the run ran, and a run saved for a GPU resumes on a machine without one only when told where.

The GPU side of the flag runs in ``experiments/gpu_smoke.sh`` (it needs a GPU; these tests need none).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from tiny_presets import DYNA_TINY
from typer.testing import CliRunner

from rolloutlab.checkpoint import load_checkpoint, save_checkpoint
from rolloutlab.cli import app

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="resuming a GPU run where there is no GPU")

MBPO_TINY = {
    "initial_random_steps": 100,
    "epoch_length": 100,
    "model_train_freq": 100,
    "rollout_batch_size": 100,
    "updates_per_step": 1,
    "eval_every": 100,
    "eval_episodes": 1,
    "log_every": 100,
    "sac": {"batch_size": 32, "net_arch": [16, 16]},
    "model": {"ensemble_size": 2, "num_elites": 1, "hidden_size": 16, "num_layers": 1, "max_epochs": 3},
}
PETS_TINY = {
    "initial_random_steps": 60,
    "model_train_freq": 30,
    "eval_every": 30,
    "eval_episodes": 1,
    "log_every": 30,
    "num_particles": 2,
    "cem": {"population": 20, "iterations": 1},
    "model": {"ensemble_size": 2, "num_elites": 2, "hidden_size": 16, "num_layers": 1, "min_train_steps": 50},
}
INCONTEXT_TINY = {
    "n_arms": 2,
    "horizon": 10,
    "n_envs": 2,
    "batch_size": 4,
    "window": 16,
    "updates_per_step": 0.05,
    "learning_starts": 0,
    "eval_tasks": 4,
    "eval_every_steps": 10**9,
    "checkpoint_every": 1,
    "agent": {"d_model": 16, "n_layers": 1, "n_heads": 2, "head_hidden": 16, "context_len": 32},
}


def _invoke(*args: str, code: int = 0) -> str:
    result = CliRunner(env={"COLUMNS": "250"}).invoke(app, list(args))
    assert result.exit_code == code, result.output
    return " ".join(result.output.replace("│", " ").split())


def _preset(tmp_path: Path, name: str, values: dict[str, Any]) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(values))
    return str(path)


def _tensors_equal(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_tensors_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return isinstance(b, list | tuple) and len(a) == len(b) and all(map(_tensors_equal, a, b))
    return True  # plain data (counters, timings): compared where it matters, below


def _run_twice(tmp_path: Path, command: list[str]) -> tuple[Path, Path]:
    """``command`` once as given and once with ``--device cpu``, each into its own parent; the two run dirs."""
    dirs = []
    for name, extra in (("default", []), ("cpu", ["--device", "cpu"])):
        _invoke(*command, *extra, "--out" if command[0] != "incontext" else "--runs-root", str(tmp_path / name))
        (run_dir,) = (tmp_path / name).iterdir()
        assert yaml.safe_load((run_dir / "config.yaml").read_text()) is not None
        dirs.append(run_dir)
    return dirs[0], dirs[1]


def _mark_saved_on_cuda(checkpoint: Path, where: tuple[str, ...]) -> None:
    """Rewrite a checkpoint's config as if the run had been made with ``--device cuda``."""
    envelope = load_checkpoint(checkpoint)
    config = envelope["config"]
    for key in where:
        config = config[key]
    config["device"] = "cuda"
    save_checkpoint(checkpoint, envelope["state"], kind=envelope["kind"], config=envelope["config"])


@pytest.mark.parametrize("algo", ["mbpo", "pets"])
def test_mbpo_and_pets_device_cpu_is_the_default(algo: str, tmp_path: Path) -> None:
    env, steps, preset = (
        ("Pendulum-v1", "200", MBPO_TINY) if algo == "mbpo" else ("rolloutlab/PointMass-v0", "90", PETS_TINY)
    )
    command = [
        "mbrl",
        "train",
        "--algo",
        algo,
        "--env",
        env,
        "--steps",
        steps,
        "--config",
        _preset(tmp_path, algo, preset),
    ]
    default, cpu = _run_twice(tmp_path, command)
    a, b = (load_checkpoint(d / "checkpoint.pt") for d in (default, cpu))
    assert a["config"]["device"] == b["config"]["device"] == "cpu"
    assert _tensors_equal(a["state"], b["state"])
    assert a["state"]["eval_history"] == b["state"]["eval_history"] and a["state"]["eval_history"]
    assert yaml.safe_load((cpu / "config.yaml").read_text())["device"] == "cpu"


def test_dyna_device_cpu_is_the_default(tmp_path: Path) -> None:
    preset = _preset(tmp_path, "dyna", DYNA_TINY)
    command = ["mbrl", "train", "--algo", "dyna", "--env", "CartPole-v1", "--steps", "200", "--config", preset]
    default, cpu = _run_twice(tmp_path, command)
    a, b = (load_checkpoint(d / "checkpoint.pt") for d in (default, cpu))
    assert a["config"]["dyna"]["device"] == b["config"]["dyna"]["device"] == "cpu"
    assert _tensors_equal(a["state"], b["state"]) and a["state"]["evals"] == b["state"]["evals"]


def test_incontext_device_cpu_is_the_default(tmp_path: Path) -> None:
    command = [
        "incontext",
        "train",
        "--task",
        "bandit",
        "--steps",
        "60",
        "--config",
        _preset(tmp_path, "ic", INCONTEXT_TINY),
    ]
    default, cpu = _run_twice(tmp_path, command)
    a, b = (load_checkpoint(d / "checkpoint.pt") for d in (default, cpu))
    assert a["config"]["device"] == b["config"]["device"] == "cpu"
    assert _tensors_equal(a["state"], b["state"]) and a["state"]["counters"]["updates"] > 0


@pytest.fixture(scope="module")
def sft_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sft") / "sft.pt"
    _invoke("rlvr", "sft", "--steps", "5", "--out", str(path))
    return path


def test_rlvr_device_cpu_is_the_default(sft_checkpoint: Path, tmp_path: Path) -> None:
    command = ["rlvr", "train", "--checkpoint", str(sft_checkpoint), "--allocator", "uniform:2", "--steps", "2"]
    default, cpu = _run_twice(tmp_path, [*command, "--prompts-per-step", "4", "--no-progress"])
    a, b = (load_checkpoint(d / "checkpoint.pt") for d in (default, cpu))
    assert a["config"]["grpo"]["device"] == b["config"]["grpo"]["device"] == "cpu"
    assert _tensors_equal(a["state"]["trainer"], b["state"]["trainer"])
    assert a["state"]["evals"] == b["state"]["evals"]


@no_cuda
def test_auto_resolves_to_cpu_and_is_recorded(tmp_path: Path) -> None:
    preset = _preset(tmp_path, "dyna", DYNA_TINY)
    _invoke("mbrl", "train", "--algo", "dyna", "--env", "CartPole-v1", "--steps", "100", "--config", preset,
            "--device", "auto", "--out", str(tmp_path / "runs"))  # fmt: skip
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert load_checkpoint(run_dir / "checkpoint.pt")["config"]["dyna"]["device"] == "cpu"


@no_cuda
def test_a_run_saved_on_cuda_resumes_here_only_with_device(sft_checkpoint: Path, tmp_path: Path) -> None:
    """Checkpoints load on any device; the saved device is refused with the way out named, and ``--device cpu``
    continues the run (here each run is finished, so resuming re-writes its result)."""
    mbpo = _preset(tmp_path, "mbpo", MBPO_TINY)
    _invoke("mbrl", "train", "--env", "Pendulum-v1", "--steps", "100", "--config", mbpo, "--out", str(tmp_path / "m"))
    dyna = _preset(tmp_path, "dyna", DYNA_TINY)
    _invoke("mbrl", "train", "--algo", "dyna", "--env", "CartPole-v1", "--steps", "100", "--config", dyna,
            "--out", str(tmp_path / "d"))  # fmt: skip
    _invoke("rlvr", "train", "--checkpoint", str(sft_checkpoint), "--allocator", "uniform:2", "--steps", "1",
            "--prompts-per-step", "2", "--no-progress", "--out", str(tmp_path / "r"))  # fmt: skip
    ic = _preset(tmp_path, "ic", INCONTEXT_TINY)
    _invoke("incontext", "train", "--steps", "20", "--config", ic, "--runs-root", str(tmp_path / "i"))
    (m,), (d,), (r,), (i,) = ((tmp_path / p).iterdir() for p in "mdri")
    # (run, where the device sits in its config, command, whether resuming a finished run writes a checkpoint)
    cases = [
        (m, (), ["mbrl", "train", "--resume", str(m)], True),
        (d, ("dyna",), ["mbrl", "train", "--algo", "dyna", "--resume", str(d)], False),
        (r, ("grpo",), ["rlvr", "train", "--no-progress", "--resume", str(r)], False),
        (i, (), ["incontext", "train", "--run-dir", str(i)], True),
    ]
    for run_dir, where, command, rewrites in cases:
        _mark_saved_on_cuda(run_dir / "checkpoint.pt", where)
        refused = _invoke(*command, code=2)
        assert "CUDA is not available" in refused and "--device" in refused and "Traceback" not in refused
        _invoke(*command, "--device", "cpu")
        config = load_checkpoint(run_dir / "checkpoint.pt")["config"]
        for key in where:
            config = config[key]
        assert config["device"] == ("cpu" if rewrites else "cuda"), command  # where it went on is what it says now
    result = _invoke("incontext", "eval", str(i / "checkpoint.pt"), "--tasks", "2", "--device", "cpu")
    assert "mean return" in result
