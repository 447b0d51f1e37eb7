"""``rolloutlab rlvr``: commands are mounted, and sft + train run end to end at a tiny size."""

from __future__ import annotations

from pathlib import Path

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
    result = runner.invoke(
        app,
        ["train", "--checkpoint", str(ckpt), "--allocator", "ar3po:2,2", "--steps", "2", "--prompts-per-step", "4"],
    )
    assert result.exit_code == 0, result.output
    assert "step 2: held-out accuracy" in result.output


def test_train_rejects_unknown_allocator(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["train", "--checkpoint", str(tmp_path / "missing.pt"), "--allocator", "nope"])
    assert result.exit_code != 0
    assert "unknown allocator" in str(result.exception)


def test_quick_bench_contract(tmp_path: Path) -> None:
    from meta.rlvr.bench import quick_bench

    lines = quick_bench(tmp_path / "bench", steps=3, sft_steps=20, checkpoint=tmp_path / "missing.pt", seeds=(0,))
    assert [line.pillar for line in lines] == ["rlvr", "rlvr"]
    assert all(line.command.startswith("OMP_NUM_THREADS=1 python experiments/rlvr/benchmark.py") for line in lines)
    assert (tmp_path / "bench" / "quick_summary.json").is_file()
    assert (tmp_path / "bench" / "sft.pt").is_file()  # the missing checkpoint was trained first
