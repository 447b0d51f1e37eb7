from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rolloutlab.bench
from rolloutlab import __version__
from rolloutlab.bench import (
    NEEDS_CLONE,
    BenchLine,
    CheckoutMissing,
    PillarEntry,
    expected_seconds,
    load_quick_bench,
    previous_seconds,
    run_suite,
)
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


def test_every_pillar_declares_how_long_its_quick_bench_takes() -> None:
    # The progress bar's estimate on a machine that has not run the suite yet.
    for _, _, module in PILLARS:
        load_quick_bench(module)
        seconds = expected_seconds(module)
        assert seconds is not None and 0 < seconds < 300, module


def test_run_suite_shows_a_progress_bar_with_an_eta_per_pillar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # FORCE_COLOR makes rich treat the captured stderr as a terminal, where the bar is drawn.
    monkeypatch.setenv("FORCE_COLOR", "1")

    def fake(out: Path) -> list[BenchLine]:
        return [BenchLine("fakepillar", "b", "m", 1.0, "report", None, 0.0, "x")]

    run_suite([PillarEntry("fakepillar", fake, 40.0), PillarEntry("unestimated", fake)], tmp_path)
    err = capsys.readouterr().err
    assert "fakepillar" in err and "ETA ~40 s" in err  # the bar runs against the 40 s estimate
    assert "unestimated" in err and "no estimate" in err


@pytest.mark.parametrize("pillar", ["mbrl", "rlvr"])
def test_pillar_bench_commands_show_the_same_bar(pillar: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")

    def fake(out: Path) -> list[BenchLine]:
        return [BenchLine(pillar, "b", "m", 1.0, "report", None, 0.0, "x")]

    monkeypatch.setattr(rolloutlab.bench, "load_quick_bench", lambda module: fake)
    result = runner.invoke(app, [pillar, "bench", "--out", str(tmp_path)], terminal_width=200)
    assert result.exit_code == 0, result.output
    estimate = expected_seconds(f"experiments.{pillar}.quick")
    assert estimate is not None and f"ETA ~{estimate:.0f} s" in result.stderr


def test_previous_seconds_reads_the_newest_readable_summary(tmp_path: Path) -> None:
    assert previous_seconds(tmp_path) == {}
    for name, text in [
        ("bench-20260101-000000", json.dumps({"seconds": {"mbrl": 50.0}})),
        (
            "bench-20260102-000000",
            json.dumps({"seconds": {"mbrl": 40.0, "mpc": 30.0, "rlvr": 0.1}, "errors": {"rlvr": "x"}}),
        ),
        ("bench-20260103-000000", "{cut short"),
    ]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(text)
    assert previous_seconds(tmp_path) == {"mbrl": 40.0, "mpc": 30.0}


def test_bench_estimates_each_pillar_from_the_last_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rolloutlab.cli

    seen: list[PillarEntry] = []

    def record(entries: list[PillarEntry], out_dir: Path) -> dict[str, object]:
        seen.extend(entries)
        return {"passed": True}

    monkeypatch.setattr(rolloutlab.cli, "run_suite", record)
    assert runner.invoke(app, ["bench", "--out", str(tmp_path), "--only", "mpc"]).exit_code == 0
    assert seen[-1].expected_seconds == expected_seconds("experiments.mbrl.pets_quick")  # no suite here yet
    (tmp_path / "bench-20260101-000000").mkdir()
    (tmp_path / "bench-20260101-000000" / "summary.json").write_text(json.dumps({"seconds": {"mpc": 12.5}}))
    assert runner.invoke(app, ["bench", "--out", str(tmp_path), "--only", "mpc"]).exit_code == 0
    assert seen[-1].expected_seconds == 12.5


def test_lazy_package_names_resolve() -> None:
    # planning.mpc and meta.rollout_length load some names on first use (PEP 562); each listed name must resolve.
    import meta.rollout_length
    import planning.mpc

    for package in (planning.mpc, meta.rollout_length):
        for name in package.__all__:
            assert getattr(package, name) is not None, f"{package.__name__}.{name}"
