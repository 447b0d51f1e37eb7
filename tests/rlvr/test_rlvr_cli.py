"""``rolloutlab rlvr``: commands are mounted, and sft + train run end to end at a tiny size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from meta.rlvr.cli import app


def test_help_lists_commands() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("sft", "train", "bench"):
        assert command in result.output


def test_sft_then_train(tmp_path: Path) -> None:
    runner = CliRunner()
    ckpt = tmp_path / "sft.pt"
    result = runner.invoke(app, ["sft", "--steps", "5", "--out", str(ckpt)])
    assert result.exit_code == 0, result.output
    assert ckpt.is_file() and "overall" in result.output
    args = ["--allocator", "ar3po:2,2", "--steps", "2", "--prompts-per-step", "4", "--no-progress"]
    result = runner.invoke(app, ["train", "--checkpoint", str(ckpt), *args, "--out", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    assert "step 2: held-out accuracy" in result.output
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert run_dir.name.startswith("rlvr-ar3po-2-2__0__")
    for name in ("config.yaml", "progress.csv", "checkpoint.pt", "result.json"):
        assert (run_dir / name).is_file(), name
    assert list(run_dir.glob("events.out.tfevents.*"))
    result_json = json.loads((run_dir / "result.json").read_text())
    assert result_json["steps"] == 2 and [p["step"] for p in result_json["evals"]] == [0, 2]


def test_train_rejects_unknown_allocator(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["train", "--checkpoint", str(tmp_path / "missing.pt"), "--allocator", "nope", "--out", str(tmp_path)]
    )
    assert result.exit_code != 0
    assert "unknown allocator" in result.output
    assert not any(tmp_path.iterdir())  # refused before a run directory was made
    for args, message in (
        (["--checkpoint", str(tmp_path / "missing.pt")], "checkpoint not found"),
        (["--minibatches", "0"], "Invalid value for '--minibatches'"),
    ):
        result = CliRunner().invoke(app, ["train", *args, "--out", str(tmp_path)])
        assert result.exit_code == 2 and message in " ".join(result.output.replace("│", " ").split()), result.output
        assert not any(tmp_path.iterdir())


def test_quick_bench_contract(tmp_path: Path) -> None:
    from experiments.rlvr.quick import quick_bench

    lines = quick_bench(tmp_path / "bench", steps=3, sft_steps=20, checkpoint=tmp_path / "missing.pt", seeds=(0,))
    assert [line.pillar for line in lines] == ["rlvr", "rlvr"]
    assert all(line.command.startswith("OMP_NUM_THREADS=1 python experiments/rlvr/benchmark.py") for line in lines)
    assert (tmp_path / "bench" / "quick_summary.json").is_file()
    assert (tmp_path / "bench" / "sft.pt").is_file()  # the missing checkpoint was trained first
    # 20 SFT steps leave held-out accuracy at 0, so uniform G=8 "reaches" its target at step 0: no ratio (not 0/0 = 1).
    summary = json.loads((tmp_path / "bench" / "quick_summary.json").read_text())["summary"]
    assert summary["arms"]["uniform_g8"]["tokens_to_target"] == [0]
    assert all(line.value is None and line.target.startswith("not measured") for line in lines)


@pytest.mark.parametrize("spec", ["hapo:0.2,1", "eepo:0.01", "ehpo:1,0.1"])
def test_train_with_a_token_controller_checkpoints_its_state(tmp_path: Path, spec: str) -> None:
    from meta.rlvr.trainers.run import GRPORun

    runner = CliRunner()
    ckpt = tmp_path / "sft.pt"
    assert runner.invoke(app, ["sft", "--steps", "5", "--out", str(ckpt)]).exit_code == 0
    args = ["--token-controller", spec, "--steps", "2", "--prompts-per-step", "4", "--no-progress"]
    result = runner.invoke(app, ["train", "--checkpoint", str(ckpt), *args, "--out", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert spec.split(":")[0] in run_dir.name
    assert f"token_controller: {spec}" in (run_dir / "config.yaml").read_text()
    trainer = GRPORun.resume(run_dir).trainer  # the controller's state comes back from the checkpoint
    if spec.startswith("hapo"):
        assert trainer.token_controller is not None and trainer.token_controller.updates == 2
        assert trainer.eepo is None
    elif spec.startswith("ehpo"):  # no ';' in the arithmetic alphabet: no units to branch at, all budget whole
        assert trainer.branching is not None and trainer.branching.supplemented > 0
        assert trainer.branching.branch_responses == 0 and trainer.eepo is None
    else:
        assert trainer.eepo is not None and trainer.eepo.decisions == 2  # one stage per step (uniform)
        assert trainer.token_controller is None
    result = runner.invoke(app, ["train", "--resume", str(run_dir), "--token-controller", spec, "--no-progress"])
    assert result.exit_code == 2 and "--token-controller" in result.output
