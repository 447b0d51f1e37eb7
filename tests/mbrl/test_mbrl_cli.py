"""``rolloutlab mbrl train``: MBPO and Dyna dispatch through the Typer app, with YAML configs and resume."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import yaml
from tiny_presets import DYNA_TINY
from typer.testing import CliRunner

from mbrl.cli import app


def test_dyna_dispatch_and_resume(tmp_path: Path) -> None:
    config = tmp_path / "dyna.yaml"
    config.write_text(yaml.safe_dump(DYNA_TINY))
    runner = CliRunner()
    args = ["train", "--algo", "dyna", "--env", "CartPole-v1", "--steps", "200", "--controller", "fixed:2"]
    result = runner.invoke(app, [*args, "--config", str(config), "--out", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "result.json").read_text())
    assert summary["env_steps"] == 200 and [s for s, _ in summary["eval"]] == [100, 200]
    assert summary["controller"] == "fixed:2"
    with (run_dir / "progress.csv").open() as f:
        rows = list(csv.DictReader(f))
    logged = set(rows[-1])
    assert {"meta/disagreement_h1", "meta/disagreement_h2", "model/real_samples", "model/model_samples"} <= logged
    assert float(rows[-1]["model/real_samples"]) == 200 and float(rows[-1]["model/model_samples"]) > 0
    # Resuming a finished run is a no-op that still reports the same budget.
    again = runner.invoke(app, ["train", "--algo", "dyna", "--resume", str(run_dir)])
    assert again.exit_code == 0 and "200 env steps" in again.output


def test_dyna_rejects_continuous_env(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["train", "--algo", "dyna", "--env", "Pendulum-v1", "--out", str(tmp_path)])
    assert result.exit_code != 0 and "rl-zoo" in result.output
