from __future__ import annotations

import csv
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from rolloutlab.logs import make_logger
from rolloutlab.runs import OutputPathError, check_output_path, make_run_dir, run_dir_kept_on_success, write_result
from rolloutlab.seeding import seed_everything
from rolloutlab.threads import set_torch_threads


@dataclass
class _Cfg:
    lr: float = 0.1


def test_seed_everything_is_reproducible() -> None:
    def draw() -> tuple:
        rng = seed_everything(123)
        return random.random(), np.random.rand(), torch.rand(1).item(), rng.random()

    assert draw() == draw()
    with pytest.raises(ValueError, match="non-negative"):
        seed_everything(-1)


def test_run_dir_layout(tmp_path: Path) -> None:
    run = make_run_dir("mbpo/Pendulum v1", 3, root=tmp_path, config=_Cfg())
    assert run.name.startswith("mbpo-Pendulum-v1__3__")
    assert yaml.safe_load((run / "config.yaml").read_text()) == {"lr": 0.1}
    again = make_run_dir("mbpo/Pendulum v1", 3, root=tmp_path)
    assert again != run and again.exists()
    write_result(run, {"return": -150.0})
    assert (run / "result.json").exists()


def test_threads() -> None:
    assert set_torch_threads(1) == 1
    with pytest.raises(ValueError):
        set_torch_threads(0)


def test_logger_writes_csv_and_tensorboard(tmp_path: Path) -> None:
    logger = make_logger(tmp_path, formats=("csv", "tensorboard"))
    logger.record("model/holdout_nll", 1.5)
    logger.record("meta/rollout_length", 4)
    logger.dump(step=10)
    logger.close()
    csv = (tmp_path / "progress.csv").read_text()
    assert "model/holdout_nll" in csv and "meta/rollout_length" in csv
    assert any(p.name.startswith("events.out.tfevents") for p in tmp_path.rglob("*"))


def test_logger_keeps_previous_sessions_csv(tmp_path: Path) -> None:
    for step in (1, 2, 3):
        logger = make_logger(tmp_path, formats=("csv",))
        logger.record("train/step", step)
        logger.dump(step=step)
        logger.close()
    assert "1" in (tmp_path / "progress.1.csv").read_text()
    assert "2" in (tmp_path / "progress.2.csv").read_text()
    assert (tmp_path / "progress.csv").read_text().splitlines()[-1] == "3,3"


def test_logger_resumed_continues_one_csv(tmp_path: Path) -> None:
    logger = make_logger(tmp_path, formats=("csv",))
    for step in (1, 2, 3):  # the interrupted session wrote step 3 after its checkpoint at step 2
        logger.record("train/loss", step / 10)
        logger.dump(step=step)
    logger.close()
    logger = make_logger(tmp_path, formats=("csv",), resume_step=2)
    for step in (3, 4):
        logger.record("train/loss", step / 10)
        logger.record("train/new_key", step)
        logger.dump(step=step)
    logger.close()
    assert sorted(p.name for p in tmp_path.glob("progress*.csv")) == ["progress.csv"]
    with (tmp_path / "progress.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == [1, 2, 3, 4]
    assert [r["train/new_key"] for r in rows] == ["", "", "3", "4"]


def test_output_paths_are_checked_without_writing_anything(tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_text("x")
    assert check_output_path(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    assert check_output_path(tmp_path / "file.txt", "file") == tmp_path / "file.txt"
    assert check_output_path(tmp_path / "new" / "result.json", "file") == tmp_path / "new" / "result.json"
    for path, kind, message in [
        ("/proc/rolloutlab-x", "dir", "cannot write /proc/rolloutlab-x"),
        ("/proc/rolloutlab-x.json", "file", "cannot write"),
        (tmp_path / "file.txt", "dir", "exists and is not a directory"),
        (tmp_path, "file", "is a directory, not a file"),
        (tmp_path / "file.txt" / "inside.json", "file", "file.txt is not a directory"),
    ]:
        with pytest.raises(OutputPathError, match=message):
            check_output_path(path, kind)  # type: ignore[arg-type]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]


def test_a_run_refused_while_it_is_built_leaves_no_directory(tmp_path: Path) -> None:
    root = tmp_path / "runs" / "nested"
    with pytest.raises(ValueError, match="refused"), run_dir_kept_on_success("x", 0, root=root):
        raise ValueError("refused")
    assert not (tmp_path / "runs").exists()
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "other").mkdir()
    with pytest.raises(ValueError), run_dir_kept_on_success("x", 0, root=tmp_path / "kept"):
        raise ValueError("refused")
    assert [p.name for p in (tmp_path / "kept").iterdir()] == ["other"]
    with run_dir_kept_on_success("x", 0, root=tmp_path / "kept") as run_dir:
        pass
    assert run_dir.is_dir()
