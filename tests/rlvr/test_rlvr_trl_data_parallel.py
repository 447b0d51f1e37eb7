"""The TRL adapter data parallel: 2 CPU processes (gloo, ``torch.distributed.run``) against 1, same global batch."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

import torch

from meta.rlvr.trl_distributed import rank_share

REPO = Path(__file__).resolve().parents[2]
WORKER = REPO / "tests" / "trl_data_parallel.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_rank_shares_tile_the_rows_in_order_and_differ_by_at_most_one() -> None:
    for n in range(0, 12):
        for world in (1, 2, 3, 5):
            shares = [rank_share(n, r, world) for r in range(world)]
            assert [i for a, b in shares for i in range(a, b)] == list(range(n))
            sizes = [b - a for a, b in shares]
            assert max(sizes) - min(sizes) <= 1
    assert [rank_share(5, r, 2) for r in range(2)] == [(0, 3), (3, 5)]
    assert [rank_share(1, r, 2) for r in range(2)] == [(0, 1), (1, 1)]
    with pytest.raises(ValueError, match="rank=2, world=2"):
        rank_share(4, 2, 2)


def test_two_processes_decide_and_train_as_one_process_on_the_same_global_batch(tmp_path: Path) -> None:
    import trl_data_parallel as worker

    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={_free_port()}",
        str(WORKER),
        str(tmp_path),
    ]
    # The two ranks start while this process runs the single-process reference.
    launched = subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        one = worker.run(tmp_path / "single", processes=1)
        output, _ = launched.communicate(timeout=240)
    finally:
        launched.kill()
    assert launched.returncode == 0, output[-4000:]
    ranks: list[dict[str, Any]] = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2)]

    assert one["processes"] == 1 and [r["processes"] for r in ranks] == [2, 2]
    # The run exercised what makes data parallelism hard: a stage whose rows do not divide over the ranks, a training
    # batch split unevenly, response reuse.
    steps = ranks[0]["steps"]
    assert any(s["stage_padding"] > 0 for s in steps)
    assert any(s["rank_rows"][1] % 2 for s in ranks[1]["steps"]), "every training batch divided evenly over the ranks"
    assert sum(s["reused"] for s in steps) > 0
    # Every rank ran the same global allocation as one process: same counts, groups, reuse, statistics, pool, ledger.
    for key in ("ledger", "stats", "buffer"):
        assert ranks[0][key] == ranks[1][key] == one[key], key
    for ours, theirs in zip(steps, one["steps"], strict=True):
        for key in ("allocation", "group_sizes", "reused"):
            assert ours[key] == theirs[key], key
    assert [ranks[1]["steps"][i]["allocation"] for i in range(len(steps))] == [s["allocation"] for s in steps]
    # Rank 0 trains the first rows, rank 1 the rest.
    assert all(r1["rank_rows"][0] == r0["rank_rows"][1] for r0, r1 in zip(steps, ranks[1]["steps"], strict=True))
    # Same parameters: identical on both ranks (DDP), equal to one process's to float tolerance, and moved.
    initial = worker.initial_parameters()
    moved = False
    for name, value in one["params"].items():
        assert torch.equal(ranks[0]["params"][name], ranks[1]["params"][name]), name
        torch.testing.assert_close(ranks[0]["params"][name], value, atol=1e-5, rtol=1e-4, msg=name)
        moved |= not torch.allclose(value, initial[name], atol=1e-4)
    assert moved, "training did not move the parameters: the comparison is empty"
