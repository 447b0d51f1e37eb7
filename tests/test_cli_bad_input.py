"""Every sub-command refuses bad input up front: exit code 2, the offending option or value named, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from rolloutlab.cli import app

CASES = [
    ("bench --only nope", "nope"),
    ("bench --only ,", "no pillar named"),
    ("meta eval --arms ,", "no arms given"),
    ("meta train --resume /nonexistent/run", "/nonexistent/run"),
    ("mbrl train --steps -5", "--steps"),
    ("mbrl train --algo nope", "nope"),
    ("mbrl train --env NoSuchEnv-v9 --steps 10", "NoSuchEnv"),
    ("mbrl train --controller learned:/nonexistent/meta_policy.pt", "checkpoint not found"),
    ("mbrl train --controller uniform:8", "meta.rlvr.allocators.make_allocator"),
    ("meta train --env NoSuchEnv-v9", "NoSuchEnv-v9"),
    ("meta train --budget -1", "--budget"),
    ("meta train --episodes 0", "--episodes"),
    ("meta train --algo nope", "nope"),
    ("meta train --action-set nope", "nope"),
    ("meta train --workers 3 --runs-per-round 2", "workers must be between 0 (one per core) and runs_per_round=2"),
    ("meta train --workers -1", "--workers"),
    ("meta eval --runs 0", "--runs"),
    ("meta eval --arms nope:1", "nope"),
    ("meta eval --arms learned:/nonexistent/meta_policy.pt", "checkpoint not found"),
    ("meta eval --physics nope=1", "nope"),
    ("meta eval --inner nope", "inner: expected one of ['dyna', 'toy']"),
    ("rlvr sft --steps -1", "--steps"),
    ("rlvr train --steps -1", "--steps"),
    ("rlvr train --allocator nope:1", "nope:1"),
    ("rlvr train --allocator fixed:4", "meta.control.make_controller"),
    ("rlvr train --token-controller nope:1", "nope:1"),
    ("rlvr train --token-controller uniform:8", "meta.rlvr.allocators.make_allocator"),
    ("rlvr train --token-controller hapo:x", "arguments must be numbers"),
    ("rlvr train --token-controller arpo:0.5,1", "ARPO branches after tool results"),
    ("rlvr train --token-controller arpo:0.5,1,0", "k >= 1"),
    ("rlvr train --token-controller ehpo:1,0.1,1.5", "BRANCHES must be a whole number"),
    ("incontext train --task nope", "nope"),
    ("incontext train --steps -3", "--steps"),
    ("incontext eval /nonexistent/checkpoint.pt", "checkpoint not found"),
    ("tokenizer train --steps -3", "--steps"),
    ("tokenizer eval /nonexistent/checkpoint.pt", "checkpoint not found"),
    ("tokenizer eval /nonexistent/checkpoint.pt --halting fixed:2", "meta.control.make_controller"),
    ("tokenizer eval /nonexistent/checkpoint.pt --halting halt_error:x", "arguments must be numbers"),
    ("wordle play --opener zzzzz", "zzzzz"),
    ("wordle solve qqqqq", "qqqqq"),
    ("wordle solve --heuristic nope crane", "nope"),
    ("wordle bench --mode nope", "nope"),
    ("wordle bench --top-k 0", "top_k"),
    ("wordle serve --port -1", "--port"),
    ("mbrl train --device tpu", "unknown device 'tpu'"),
    ("rlvr train --device cuda:x", "unknown device 'cuda:x'"),
]
#: Every trainer's ``--device cuda`` where torch has no CUDA: one line naming the reason. Left out where CUDA is
#: present, since there these commands would start training.
TRAINER_COMMANDS = [
    "mbrl train",
    "mbrl train --algo dyna --env CartPole-v1",
    "mbrl train --algo pets",
    "rlvr train",
    "incontext train",
    "incontext eval /nonexistent/checkpoint.pt",
]
#: Malformed YAML presets, written by :func:`_bad_configs` into the test's directory: (file name, what the refusal
#: names). Every trainer that takes ``--config`` reads them through the one loader, Dyna-DQN included.
BAD_CONFIGS = [
    ("list.yaml", "expected a mapping of settings at the top level, got list"),
    ("scalar.yaml", "expected a mapping of settings at the top level, got int"),
    ("latin1.yaml", "is not UTF-8 text"),
    ("folder.yaml", "is a directory, not a YAML file"),
    ("broken.yaml", "is not valid YAML"),
    ("intkey.yaml", "setting names must be strings"),
    ("missing.yaml", "config file not found"),
]
CONFIG_COMMANDS = [
    "mbrl train",
    "mbrl train --algo dyna",
    "mbrl train --algo pets",
    "rlvr sft",
    "rlvr train",
    "incontext train",
    "meta train",
    "tokenizer train",
]
CASES += [(f"{command} --config {name}", named) for command in CONFIG_COMMANDS for name, named in BAD_CONFIGS]
#: Every option naming an output file or directory is checked before any work starts: /proc takes no new files.
CASES += [
    ("bench --out /proc/rolloutlab-x", "cannot write /proc/rolloutlab-x"),
    ("mbrl train --out /proc/rolloutlab-x", "cannot write /proc/rolloutlab-x"),
    ("mbrl train --algo dyna --out /proc/rolloutlab-x", "cannot write /proc/rolloutlab-x"),
    ("mbrl bench --out /proc/rolloutlab-x", "cannot write /proc/rolloutlab-x"),
    ("meta train --out /proc/rolloutlab-x", "cannot write /proc/rolloutlab-x"),
    ("meta eval --out /proc/rolloutlab-x", "cannot write /proc/rolloutlab-x"),
    ("rlvr sft --out /proc/rolloutlab-x.pt", "cannot write /proc/rolloutlab-x.pt"),
    ("rlvr train --out /proc/rolloutlab-x", "cannot write /proc/rolloutlab-x"),
    ("rlvr bench --out /proc/rolloutlab-x", "cannot write /proc/rolloutlab-x"),
    ("incontext train --runs-root /proc/rolloutlab-x", "cannot write /proc/rolloutlab-x"),
    ("incontext train --run-dir /proc/rolloutlab-x", "cannot write /proc/rolloutlab-x"),
    ("tokenizer train --runs-root /proc/rolloutlab-x", "cannot write /proc/rolloutlab-x"),
    ("tokenizer train --run-dir /proc/rolloutlab-x", "cannot write /proc/rolloutlab-x"),
    ("wordle bench --json /proc/rolloutlab-x.json", "cannot write /proc/rolloutlab-x.json"),
    ("wordle bench --json folder.yaml", "is a directory, not a file"),
    ("rlvr sft --out list.yaml/sft.pt", "list.yaml is not a directory"),
    # Dyna-DQN on an env without rl-zoo DQN settings is refused in one line (its default env has them).
    ("mbrl train --algo dyna --env Pendulum-v1", "no rl-zoo DQN hyperparameters for 'Pendulum-v1'"),
]
if not torch.cuda.is_available():
    CASES += [
        (f"{command} --device cuda", "'--device': device 'cuda' asked for, but CUDA is not available")
        for command in TRAINER_COMMANDS
    ]


def _bad_configs(where: Path) -> set[Path]:
    """Write the files of :data:`BAD_CONFIGS` into ``where``; returns what is there afterwards."""
    (where / "list.yaml").write_text("- total_steps\n- 10\n", encoding="utf-8")
    (where / "scalar.yaml").write_text("42\n", encoding="utf-8")
    (where / "latin1.yaml").write_bytes("env_id: Pendule-\u00e9t\u00e9\n".encode("latin-1"))
    (where / "folder.yaml").mkdir()
    (where / "broken.yaml").write_text("total_steps: [1, 2\n", encoding="utf-8")
    (where / "intkey.yaml").write_text("1: 2\n", encoding="utf-8")
    return set(where.rglob("*"))


@pytest.mark.parametrize(("command", "named"), CASES, ids=[c for c, _ in CASES])
def test_bad_input_is_one_clear_refusal(
    command: str, named: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # nothing a refused command might write lands in the repository
    before = _bad_configs(tmp_path)
    result = CliRunner(env={"COLUMNS": "250"}).invoke(app, command.split(), input="")
    output = result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), output
    assert result.exit_code == 2, output
    assert "Traceback" not in output
    assert named in " ".join(line.strip("│ ") for line in output.splitlines()), output
    left = set(tmp_path.rglob("*")) - before
    assert not left, f"a refused command left files or directories behind: {sorted(left)}"
