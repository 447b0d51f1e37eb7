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
    ("meta eval --runs 0", "--runs"),
    ("meta eval --arms nope:1", "nope"),
    ("meta eval --arms learned:/nonexistent/meta_policy.pt", "checkpoint not found"),
    ("meta eval --physics nope=1", "nope"),
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
if not torch.cuda.is_available():
    CASES += [
        (f"{command} --device cuda", "'--device': device 'cuda' asked for, but CUDA is not available")
        for command in TRAINER_COMMANDS
    ]


@pytest.mark.parametrize(("command", "named"), CASES, ids=[c for c, _ in CASES])
def test_bad_input_is_one_clear_refusal(
    command: str, named: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # nothing a refused command might write lands in the repository
    result = CliRunner(env={"COLUMNS": "250"}).invoke(app, command.split(), input="")
    output = result.output
    assert result.exit_code == 2, output
    assert "Traceback" not in output
    assert named in output, output
    left = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert not left, f"a refused command left files behind: {left}"
