"""Several test processes filling one arms file (``experiments/meta/shared_arms.py``): no unit is claimed twice,
a dead process's claim is void, and no process overwrites another's finished units."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.meta.rollout_length_protocol import pending_units
from experiments.meta.shared_arms import SharedArmsFile, process_alive, process_start_time

ARMS = {"fixed:0": "fixed:0", "fixed:2": "fixed:2"}
PROTOCOL = {"test_runs": 6, "runs_per_unit": 2}


def _result(first: int, runs: int) -> dict[str, object]:
    finals = [float(10 * first + i) for i in range(runs)]
    return {"mean": 0.0, "se": 0.0, "finals": finals, "k_schedules": [[0]] * runs, "seconds": 1.0}


def _worker(path: str, scratch: str, queue: mp.Queue) -> None:
    # One test process: claims units until none is left and files each, as experiments/meta/rollout_length.py does.
    shared = SharedArmsFile(path, scratch, PROTOCOL)
    ran = []
    while (unit := shared.claim_next(ARMS, 6, 2)) is not None:
        ran.append(unit.name)
        shared.record(unit, _result(unit.first_run, unit.runs), 6)
    queue.put(ran)


def test_processes_share_the_units_and_every_result_survives(tmp_path: Path) -> None:
    path, scratch = tmp_path / "arms.json", tmp_path / "scratch"
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    workers = [ctx.Process(target=_worker, args=(str(path), str(scratch), queue)) for _ in range(3)]
    for w in workers:
        w.start()
    ran = [queue.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(timeout=60)
    names = [name for part in ran for name in part]
    assert sorted(names) == sorted(u.name for u in pending_units(ARMS, 6, 2, {}))  # each unit exactly once
    saved = json.loads(path.read_text())
    assert saved["protocol"] == PROTOCOL and "slices" not in saved
    for arm in ARMS:  # every slice of every arm survived, merged in run order
        assert saved["arms"][arm]["finals"] == [0.0, 1.0, 20.0, 21.0, 40.0, 41.0]


def test_a_live_claim_is_skipped_and_a_dead_one_is_taken_up(tmp_path: Path) -> None:
    path, scratch = tmp_path / "arms.json", tmp_path / "scratch"
    shared = SharedArmsFile(path, scratch, PROTOCOL)
    first = shared.claim_next(ARMS, 6, 2)
    second = shared.claim_next(ARMS, 6, 2)
    assert first is not None and second is not None and first.name != second.name
    assert shared.claimed_by_others(ARMS, 6, 2) == []  # both are this process's own
    # A claim by a process that has exited is void: its unit is the next one handed out.
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(done.stdout)
    claims = json.loads(shared.claims_path.read_text())
    claims[first.name] = {"pid": dead_pid, "started": None, "since": 0.0}
    shared.claims_path.write_text(json.dumps(claims))
    assert not process_alive(dead_pid, None)
    again = shared.claim_next(ARMS, 6, 2)
    assert again is not None and again.name == first.name
    # A released unit is free again; a recorded one is no longer pending.
    shared.release(second)
    assert shared.claim_next(ARMS, 6, 2) == second
    saved, complete = shared.record(first, _result(0, 2), 6)
    assert not complete and saved["slices"][first.arm]["0"]["finals"] == [0.0, 1.0]
    assert first.name not in json.loads(shared.claims_path.read_text())


def test_a_reused_pid_does_not_keep_a_claim() -> None:
    me = os.getpid()
    assert process_alive(me, process_start_time(me))
    assert not process_alive(me, "an earlier process with this pid")


def test_a_file_of_another_protocol_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "arms.json"
    path.write_text(json.dumps({"protocol": {"test_runs": 40}}))
    with pytest.raises(SystemExit, match="another protocol"):
        SharedArmsFile(path, tmp_path / "scratch", PROTOCOL)
