from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rolloutlab.bench
from rolloutlab import __version__
from rolloutlab.bench import NEEDS_CLONE, BenchLine, CheckoutMissing, PillarEntry, load_quick_bench, run_suite
from rolloutlab.cli import PILLARS, app

runner = CliRunner()


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"rolloutlab {__version__}"


def test_help_lists_bench_and_every_pillar() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "bench" in result.stdout
    for name, cli_module, _ in PILLARS:
        if cli_module is not None:
            assert name in result.stdout, f"pillar {name} missing from --help"
    bench_help = runner.invoke(app, ["bench", "--help"], terminal_width=200)
    assert bench_help.exit_code == 0
    assert ",".join(name for name, _, _ in PILLARS) in bench_help.stdout  # --only names every pillar, mpc included


def test_help_does_not_import_torch() -> None:
    # The top floor mounts every pillar and imports the registering extensions; none of that may load torch (about a
    # second), which only the commands themselves need.
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from rolloutlab.cli import app\n"
        "assert CliRunner().invoke(app, ['--help']).exit_code == 0\n"
        "print(sorted(m for m in ('torch', 'stable_baselines3', 'transformers') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_console_script_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "rolloutlab.cli", "--version"], capture_output=True, text=True, check=True
    )
    assert __version__ in result.stdout


def test_bench_rejects_unknown_pillar(tmp_path: Path) -> None:
    result = runner.invoke(app, ["bench", "--out", str(tmp_path), "--only", "chess"])
    assert result.exit_code != 0
    assert "unknown pillar" in result.output


def test_every_pillar_quick_bench_is_found_in_the_checkout() -> None:
    # Each PILLARS entry names a module of the clone's experiments/ with a quick_bench(out_dir) function.
    for _, _, module in PILLARS:
        assert callable(load_quick_bench(module)), module


def test_bench_needs_a_clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An installed wheel has no experiments/ beside the package: the bench commands say so in one line, exit 2.
    monkeypatch.setattr(rolloutlab.bench, "checkout_root", lambda: None)
    for command in (["bench"], ["mbrl", "bench"], ["rlvr", "bench"]):
        result = runner.invoke(app, [*command, "--out", str(tmp_path)])
        assert result.exit_code == 2, command
        assert result.output.strip() == NEEDS_CLONE
    with pytest.raises(CheckoutMissing):
        load_quick_bench("experiments.mbrl.quick")


def test_run_suite_reports_lines_and_errors(tmp_path: Path) -> None:
    def ok(out: Path) -> list[BenchLine]:
        return [BenchLine("wordle", "easy", "total", 7920.0, "= 7920", True, 1.0, "rolloutlab wordle bench")]

    def broken(out: Path) -> list[BenchLine]:
        raise RuntimeError("boom")

    summary = run_suite([PillarEntry("wordle", ok), PillarEntry("rlvr", broken)], tmp_path)
    assert summary["errors"] == {"rlvr": "RuntimeError: boom"}
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["lines"][0]["value"] == 7920.0
    md = (tmp_path / "summary.md").read_text()
    assert "| wordle | easy | total | 7920 |" in md
    assert "error: RuntimeError: boom" in md
    assert summary["passed"] is False and set(summary["seconds"]) == {"wordle", "rlvr"}


def test_bench_says_no_plainly_and_exits_non_zero(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def missed(out: Path) -> list[BenchLine]:
        return [
            BenchLine("mpc", "PETS", "median env steps", 1200.0, "<= 1000", False, 1.0, "x"),
            BenchLine("mpc", "PETS", "plan p50 ms", 53.0, "report", None, 1.0, "x"),
        ]

    import rolloutlab.cli

    monkeypatch.setattr(rolloutlab.cli, "load_quick_bench", lambda module: missed)
    result = runner.invoke(app, ["bench", "--out", str(tmp_path), "--only", "mpc"], terminal_width=200)
    assert result.exit_code == 1, result.output
    last = result.output.strip().splitlines()[-1]
    assert "NOT ALL TARGETS MET" in last and "mpc: median env steps" in last
    assert "mpc: done in" in result.output  # the pillar's rows as soon as it finished

    monkeypatch.setattr(rolloutlab.cli, "load_quick_bench", lambda module: lambda out: missed(out)[1:])
    result = runner.invoke(app, ["bench", "--out", str(tmp_path), "--only", "mpc"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "all targets met" in result.output.strip().splitlines()[-1]


def test_lazy_package_names_resolve() -> None:
    # planning.mpc and meta.rollout_length load some names on first use (PEP 562); each listed name must resolve.
    import meta.rollout_length
    import planning.mpc

    for package in (planning.mpc, meta.rollout_length):
        for name in package.__all__:
            assert getattr(package, name) is not None, f"{package.__name__}.{name}"
