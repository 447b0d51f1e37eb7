"""Hand-computed cases for every allocator, including all-solved, none-solved and budget < number of prompts."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from meta.rlvr import (
    AR3PO,
    DARS,
    DynamicSampling,
    E3Budget,
    Knapsack,
    ResponseBuffer,
    StatsTable,
    Uniform,
    cumulative_advantage_factor,
    is_mixed,
    make_allocator,
    p_mixed,
    solve_knapsack,
)
from meta.rlvr.allocators.reuse import StoredResponse


def test_package_imports_without_torch() -> None:
    code = (
        "import sys; sys.modules['torch'] = None; sys.modules['transformers'] = None; sys.modules['trl'] = None\n"
        "import meta.rlvr, meta.rlvr.allocators, meta.rlvr.allocators.ar3po, meta.rlvr.allocators.dars\n"
        "import meta.rlvr.allocators.e3, meta.rlvr.allocators.knapsack, meta.rlvr.allocators.dars_breadth\n"
        "import meta.rlvr.token, meta.rlvr.token.temperature, meta.rlvr.token.length_penalty\n"
        "import meta.rlvr.token.clipping, meta.rlvr.allocators.reuse, meta.rlvr.allocators.stats, meta.rlvr.guidance\n"
        "assert meta.rlvr.make_allocator('knapsack:8,16').initial(['a', 'b'], meta.rlvr.StatsTable()) == [8, 8]\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_stats_posterior_and_ema() -> None:
    stats = StatsTable(alpha0=1.0, beta0=1.0, ema_rate=0.5)
    assert stats.posterior_mean("x") == 0.5
    stats.update("x", [1, 0, 0, 0], [3, 4, 5, 4])
    assert stats.posterior_mean("x") == pytest.approx(2 / 6)
    assert stats.solve_rate("x") == pytest.approx(0.25)
    stats.update("x", [1, 1], [2, 2])
    assert stats.solve_rate("x") == pytest.approx(0.5 * 0.25 + 0.5 * 1.0)
    assert stats.get("x").attempts == 6
    assert stats.get("x").mean_length == pytest.approx(20 / 6)
    clone = StatsTable()
    clone.load_state_dict(stats.state_dict())
    assert clone.posterior_mean("x") == stats.posterior_mean("x")


def test_uniform_and_dapo_keep() -> None:
    assert Uniform(4).initial(["a", "b", "c"], StatsTable()) == [4, 4, 4]
    dapo = DynamicSampling(4, max_rounds=2)
    assert dapo.refill
    # all solved, none solved, mixed, a single response
    assert dapo.keep([[1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 0, 0], [1]]) == [False, False, True, False]
    assert is_mixed([0.0, 0.5]) and not is_mixed([])


def test_ar3po_stages() -> None:
    ar = AR3PO(stage_size=2, max_stages=3)
    keys = ["solved", "unsolved", "late"]
    assert ar.initial(keys, StatsTable()) == [2, 2, 2]
    assert ar.extra(keys, [[1, 0], [0, 0], [0, 0]], stage=1) == [0, 2, 2]
    assert ar.extra(keys, [[1, 0], [0, 0, 0, 0], [0, 0, 1, 0]], stage=2) == [0, 2, 0]
    assert ar.extra(keys, [[1, 0], [0] * 6, [0, 0, 1, 0]], stage=3) == [0, 0, 0]  # S stages reached
    # every prompt solved in stage 1 -> no second stage
    assert ar.extra(keys, [[1, 1], [0, 1], [1, 0]], stage=1) == [0, 0, 0]


def test_response_buffer() -> None:
    buf = ResponseBuffer(capacity=2)
    assert buf.get("p") is None
    assert buf.add("p", [[1, 2], [3], [4]], [1.0, 0.0, 0.75]) == 2
    assert buf.get("p") == StoredResponse([4], 0.75)  # the verifier's reward is stored with the response
    buf.add("p", [[5]], [3.0])
    assert len(buf) == 2 and buf.get("p") == StoredResponse([5], 3.0)
    clone = ResponseBuffer()
    clone.load_state_dict(buf.state_dict())
    assert clone.get("p") == StoredResponse([5], 3.0) and len(clone) == 2
    with pytest.raises(ValueError, match="no stored reward"):
        clone.load_state_dict({"capacity": 2, "store": {"p": [[5]]}})  # tokens without their reward


def test_dars_hand_cases() -> None:
    assert cumulative_advantage_factor(0.5) == pytest.approx(1.0)
    assert cumulative_advantage_factor(0.5, std_normalized=False) == pytest.approx(0.5)
    dars = DARS(base=4, max_total=16, schedule="et")
    # a = 0 is read as 0.5/N = 0.125: n = 4 / (2*sqrt(0.125*0.875)) = 6.047 -> 7 -> +3
    assert dars.extra_for(0.0) == 3
    # a = 0.25: n = 4 / (2*sqrt(0.1875)) = 4.619 -> 5 -> +1
    assert dars.extra_for(0.25) == 1
    assert dars.extra_for(0.5) == 0 and dars.extra_for(1.0) == 0  # all solved: nothing extra
    hw = DARS(base=4, max_total=16, schedule="hw")
    # hw at a = 0.125: target 2*0.875*4 = 7 -> n = 7 / 0.6614 = 10.58 -> 11 -> +7
    assert hw.extra_for(0.0) == 7
    no_std = DARS(base=4, max_total=8, std_normalized=False)
    # without std: n = 4*0.5 / (2*0.125*0.875) = 9.14 -> 10, capped at N_max = 8 -> +4
    assert no_std.extra_for(0.0) == 4
    assert dars.extra(["a", "b", "c"], [[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1]], stage=1) == [3, 1, 0]
    assert dars.extra(["a"], [[0] * 7], stage=2) == [0]


def test_e3_hand_cases() -> None:
    e3 = E3Budget(n_min=4, n_max=12, budget_per_prompt=8)
    # ranks (easy->hard) 1,2,3,4, spare 16: 4+1, 4+3, 4+4, 4+6 = [5, 7, 8, 10]; remainder 2 -> hardest, next hardest
    assert e3.allocate([0.9, 0.5, 0.1, 0.0], 32) == [5, 7, 9, 11]
    assert sum(e3.allocate([0.3, 0.2, 0.8, 0.4, 0.6], 40)) == 40
    # all solved (ties): later prompts count as harder, total still B
    assert e3.allocate([1.0, 1.0, 1.0, 1.0], 32) == [5, 7, 9, 11]
    # none solved: spare 8 over ranks 1, 2 -> 4+2, 4+5 = [6, 9]; remainder 1 -> hardest
    assert e3.allocate([0.0, 0.0], 16) == [6, 10]
    # budget smaller than the number of prompts: floor drops to 0, remainder goes to the hardest
    assert e3.allocate([1.0, 1.0, 1.0, 1.0], 2) == [0, 0, 1, 1]
    e3.end_epoch()
    assert (e3.n_min, e3.n_max) == (2, 14)
    e3.end_epoch()
    e3.end_epoch()
    assert (e3.n_min, e3.n_max) == (2, 16)


def test_knapsack_hand_cases() -> None:
    assert p_mixed(2, 0.5) == pytest.approx(0.5)
    assert p_mixed(1, 0.5) == 0.0 and p_mixed(0, 0.3) == 0.0
    # equal solve rates: the concave value spreads the budget evenly
    assert solve_knapsack([0.5] * 4, 32, 32) == [8, 8, 8, 8]
    # budget 3 < 4 prompts: one group of 3 (value 0.75) beats a pair and a single (0.5)
    assert solve_knapsack([0.5] * 4, 3, 8) == [3, 0, 0, 0]
    # all solved / none solved (p at the boundary): no group can be mixed; total still spent, nothing to gain
    none = solve_knapsack([0.0, 0.0], 4, 8)
    assert sum(none) == 4
    # an almost-solved prompt gets nothing when budget is scarce; medium prompts get pairs first
    counts = solve_knapsack([0.99, 0.5, 0.5], 4, 8)
    assert counts == [0, 2, 2]
    # caps bind: total is n_max * batch
    assert solve_knapsack([0.5, 0.5], 20, 4) == [4, 4]
    # brute force agrees on a small case
    probs = [0.9, 0.5, 0.1]
    best = max(
        (float(sum(p_mixed(n, p) for n, p in zip(ns, probs, strict=True))), ns)
        for ns in ((a, b, 10 - a - b) for a in range(11) for b in range(11 - a))
    )
    got = solve_knapsack(probs, 10, 10)
    assert math.isclose(float(sum(p_mixed(n, p) for n, p in zip(got, probs, strict=True))), best[0], rel_tol=1e-9)
    stats = StatsTable()
    stats.update("easy", [1] * 20)
    assert Knapsack(budget_per_prompt=4, n_max=8).initial(["easy", "new"], stats)[1] > 4


def test_make_allocator_specs() -> None:
    assert isinstance(make_allocator("uniform:16"), Uniform)
    assert make_allocator("dars:4,12").max_total == 12  # type: ignore[attr-defined]
    assert make_allocator("ar3po:3,2").stage_size == 3  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="unknown allocator"):
        make_allocator("nope:1")
    with pytest.raises(ValueError):
        make_allocator("uniform:x")


def test_decide_protocol() -> None:
    ar = AR3PO(2, 2)
    assert ar.decide({"keys": ["a"], "stats": StatsTable()}) == [2]
    assert ar.decide({"keys": ["a"], "rewards": [[0, 0]], "stage": 1}) == [2]
    assert np.isfinite(E3Budget().describe()["n_min"])


def test_allocator_specs_are_not_rollout_length_controllers() -> None:
    from meta.control import available_controllers, make_controller

    assert not {"uniform", "dapo", "ar3po", "dars", "e3", "knapsack"} & set(available_controllers())
    pointer = r"is an RLVR allocator spec, not a rollout-length controller.*meta\.rlvr\.allocators\.make_allocator"
    for spec in ("uniform:8", "uniform", "ar3po:3,2", "knapsack:8,16"):
        with pytest.raises(ValueError, match=pointer):
            make_controller(spec)
    ar = make_allocator("ar3po:3,2")  # the right builder, and still a controller (decide / state_dict)
    assert isinstance(ar, AR3PO) and ar.stage_size == 3 and ar.max_stages == 2


def test_rollout_length_specs_are_refused_by_make_allocator() -> None:
    pointer = r"is a rollout-length controller spec, not an RLVR allocator.*meta\.control\.make_controller"
    for spec in ("fixed:4", "linear:0,5,1,32", "inc:32", "uncertainty:95", "random:0,32"):
        with pytest.raises(ValueError, match=pointer):
            make_allocator(spec)
    with pytest.raises(
        ValueError, match=r"unknown allocator 'nope'.*ar3po, dapo, dars, (dars_b, )?e3, knapsack, uniform"
    ):
        make_allocator("nope:1")
