"""The commands that time ``make test`` and ``make run``: pytest's summary parsed, the JSON written, a fresh clone used
(with a fake command standing in for the real suite)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from experiments.cli.make_test_time import Args, main, pytest_summary


def test_pytest_summary_reads_the_last_summary_line() -> None:
    output = "\n".join(
        [
            "tests/test_a.py ....",
            "==== 3 passed in 1.00s ====",  # an earlier pytest run in the same log
            "===== 867 passed, 3 skipped, 1 xfailed, 12 warnings in 812.31s (0:13:32) =====",
        ]
    )
    assert pytest_summary(output) == {
        "passed": 867,
        "skipped": 3,
        "xfailed": 1,
        "warnings": 12,
        "seconds": 812.31,
    }
    failing = "== 2 failed, 860 passed, 1 error, 1 warning in 5.5s =="
    assert pytest_summary(failing) == {"failed": 2, "passed": 860, "errors": 1, "warnings": 1, "seconds": 5.5}
    quiet = "1 failed, 1453 passed, 8 deselected, 121 warnings in 702.83s (0:11:42)"  # pytest -q: no = rules
    assert pytest_summary(quiet) == {"failed": 1, "passed": 1453, "deselected": 8, "warnings": 121, "seconds": 702.83}
    assert pytest_summary("make: *** [Makefile:30: lint] Error 1") == {}  # the suite never ran


def _repo(path: Path) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "--quiet"], cwd=path, check=True)
    (path / "committed.txt").write_text("in HEAD\n")
    subprocess.run(["git", "add", "committed.txt"], cwd=path, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "one"], cwd=path, check=True
    )
    (path / "untracked.txt").write_text("not in a fresh clone\n")
    return path


def test_main_times_the_command_in_a_fresh_clone_and_writes_the_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path / "repo")
    # Stands in for `make test`: proves it runs in a clone of HEAD (the committed file is there, the untracked one
    # is not) and prints a pytest summary line; exits 1 like a failing suite.
    fake = (
        "sh -c 'test -f committed.txt && test ! -f untracked.txt && "
        'echo "==== 5 passed, 1 failed in 2.50s ====" && exit 1\''
    )
    out = tmp_path / "results" / "make_test.json"
    record = main(Args(command=fake, repo=repo, out=out))
    written = json.loads(out.read_text())
    assert written == record
    assert written["exit_code"] == 1 and written["pytest"] == {"passed": 5, "failed": 1, "seconds": 2.5}
    assert written["fresh_clone"] and written["installs_environment"] and written["command"] == fake
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    assert written["commit"] == head and written["wall_seconds"] >= 0
    assert written["machine"]["cpus"] >= 1 and len(written["machine"]["load_average_before"]) == 3
    assert "5 passed, 1 failed" in (out.parent / "make_test.log").read_text()
    assert "5 passed, 1 failed" in capsys.readouterr().out  # streamed to the terminal as it ran


def test_main_passes_an_installed_environment_to_make(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".installed-dev").touch()
    out = tmp_path / "make_test.json"
    main(Args(command="echo", venv=venv, repo=repo, out=out))
    written = json.loads(out.read_text())
    assert not written["installs_environment"] and written["exit_code"] == 0
    log = (tmp_path / "make_test.log").read_text()
    assert f"VENV={venv}" in log and f"--assume-old={venv / '.installed-dev'}" in log


def _minutes(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


def test_readme_quotes_the_committed_timings() -> None:
    """The README's times for `make run` and `make test` are the committed JSON's, and name the command that made
    them."""
    root = Path(__file__).resolve().parents[2]
    readme = " ".join((root / "README.md").read_text().split())  # line breaks aside
    results = root / "experiments" / "cli" / "results"
    make_run = json.loads((results / "make_run.json").read_text())
    assert f"`make run` took {_minutes(make_run['wall_seconds'])}" in readme
    assert "`experiments/cli/make_run_time.py` → `experiments/cli/results/make_run.json`" in readme
    assert "`experiments/cli/make_test_time.py` → `experiments/cli/results/make_test.json`" in readme
    fresh = json.loads((results / "make_run_fresh.json").read_text())
    assert fresh["command"] == "make run" and fresh["fresh_clone"] and fresh["installs_environment"]
    assert f"{_minutes(fresh['wall_seconds'])} on a fresh clone" in readme
    assert "--out experiments/cli/results/make_run_fresh.json" in readme
    if (results / "make_test.json").is_file():
        make_test = json.loads((results / "make_test.json").read_text())
        assert f"`make test` took {_minutes(make_test['wall_seconds'])}" in readme


def test_make_run_time_records_the_suite_it_ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`make_run_time.py` reads the per-pillar seconds of the bench folder the run made (`make run` faked)."""
    from experiments.cli import make_run_time

    calls: list[list[str]] = []

    def fake_make_run(command: list[str], cwd: Path, log_path: Path, env: dict[str, str]) -> tuple[int, float, str]:
        calls.append(command)
        bench = cwd / "runs" / "bench-20260101-000000"
        bench.mkdir(parents=True)
        line = {"pillar": "mbrl", "metric": "m", "value": 1.0, "target": "report", "passed": None, "seconds": 2.0}
        summary = {"seconds": {"mbrl": 2.0}, "passed": True, "lines": [line], "errors": {}}
        (bench / "summary.json").write_text(json.dumps(summary))
        return 0, 321.0, ""

    monkeypatch.setattr(make_run_time, "ROOT", tmp_path)
    monkeypatch.setattr(make_run_time, "run_streamed", fake_make_run)
    out = tmp_path / "make_run.json"
    make_run_time.main(make_run_time.Args(venv=tmp_path / "venv", out=out))
    written = json.loads(out.read_text())
    assert calls[0][:2] == ["make", "run"] and written["wall_seconds"] == 321.0 and not written["within_target"]
    assert written["pillar_seconds"] == {"mbrl": 2.0} and written["suite_passed"] is True
    assert written["rows"][0]["pillar"] == "mbrl" and written["machine"]["cpus"] >= 1
