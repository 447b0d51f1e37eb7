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

from meta.rlvr.trl_distributed import generate_and_score, rank_share

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


def test_a_stage_without_requests_is_refused_before_any_collective() -> None:
    # Every rank must run the same stages; an empty global request would leave nothing to keep them in step.
    with pytest.raises(ValueError, match="at least one request"):
        generate_and_score(None, [], [])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="2 prompts, 1 rows"):
        generate_and_score(None, ["a", "b"], [{}])  # type: ignore[arg-type]


def test_two_processes_decide_and_train_as_one_process_on_the_same_global_batch(tmp_path: Path) -> None:
    import trl_data_parallel as worker

    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
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
    # The two ranks run while this process runs the single-process references.
    launched = subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        single = {spec: worker.run(tmp_path / "single" / spec, 1, spec) for spec in worker.ALLOCATORS}
        output, _ = launched.communicate(timeout=420)
    finally:
        launched.kill()
    assert launched.returncode == 0, output[-4000:]
    initial = worker.initial_parameters()

    for spec, one in single.items():
        ranks: list[dict[str, Any]] = [torch.load(tmp_path / f"{spec}.rank{r}.pt", weights_only=True) for r in (0, 1)]
        assert one["processes"] == 1 and [r["processes"] for r in ranks] == [2, 2]
        steps = ranks[0]["steps"]
        # The runs exercised what makes data parallelism hard: stages whose rows do not divide over the ranks, training
        # batches split unevenly, AR3PO's reuse pool, DAPO's dropped groups and refill generator.
        if spec == "ar3po":
            assert any(s["stage_padding"] > 0 for s in steps)
            assert any(s["rank_rows"][1] % 2 for s in ranks[1]["steps"]), "every batch divided evenly over the ranks"
            assert sum(s["reused"] for s in steps) > 0
        elif spec == "dapo":
            assert one["ledger"]["dropped_responses"] > 0 and sum(s["refill_rounds"] for s in steps) > 0
        else:
            # The row budget is global (per process x processes) and cut on the global allocation: the same cuts as
            # one process with the whole budget, on both ranks; each rank's share is padded for 2 slices.
            assert any(s["rows_cut"] > 0 for s in steps), "the row budget never cut, the comparison is empty"
        # Every rank ran the global allocation of one process: same decisions, statistics, reuse pool and ledger.
        for key in ("ledger", "stats", "buffer"):
            assert ranks[0][key] == ranks[1][key] == one[key], f"{spec}: {key}"
        for ours, other, theirs in zip(steps, ranks[1]["steps"], one["steps"], strict=True):
            for key in ("allocation", "group_sizes", "reused", "groups_kept", "refill_rounds", "rows_cut"):
                assert ours[key] == other[key] == theirs[key], f"{spec}: {key}"
            assert ours["rank_rows"][1] == other["rank_rows"][0]  # rank 0 trains the first rows, rank 1 the rest
        # Same parameters: identical on both ranks (DDP), equal to one process's to float tolerance, and moved.
        moved = False
        for name, value in one["params"].items():
            assert torch.equal(ranks[0]["params"][name], ranks[1]["params"][name]), name
            torch.testing.assert_close(ranks[0]["params"][name], value, atol=1e-5, rtol=1e-4, msg=f"{spec}: {name}")
            moved |= not torch.allclose(value, initial[name], atol=1e-4)
        assert moved, f"{spec}: training did not move the parameters, the comparison is empty"
