"""E3 temperature, ALP length penalty and BAPO clip bounds: hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from meta.rlvr import AdaptiveLengthPenalty, BalancedClip, EntropyTemperature, positive_share


def test_e3_temperature_formula() -> None:
    ctl = EntropyTemperature(target_entropy=1.0, vocab_size=1000, initial=1.0, t_min=0.1, t_max=2.0)
    scale = math.log(1000) + math.log(math.log(1000))
    assert ctl.scale == pytest.approx(scale)
    # entropy below target -> temperature rises by T * ln(H*/H) / scale
    t = ctl.decide({"entropy": 0.5})
    assert t == pytest.approx(1.0 * (1 + 1.0 * math.log(2.0) / scale))
    # at target -> unchanged
    assert ctl.decide({"entropy": 1.0}) == pytest.approx(t)
    # far above target -> lowered, clamped at t_min
    for _ in range(200):
        ctl.decide({"entropy": 50.0})
    assert ctl.temperature == pytest.approx(0.1)
    state = ctl.state_dict()
    ctl.reset()
    assert ctl.temperature == 1.0
    ctl.load_state_dict(state)
    assert ctl.temperature == pytest.approx(0.1)


def test_alp_shaping() -> None:
    alp = AdaptiveLengthPenalty(beta=0.5, max_length=10)
    # group solve rate 2/4 = 0.5 -> weight 0.5/10*0.5 = 0.025 per token
    assert alp.shape([1, 1, 0, 0], [4, 8, 2, 10]) == pytest.approx([1 - 0.1, 1 - 0.2, -0.05, -0.25])
    # none solved: floor 1/K = 1/4 -> weight 0.0125
    assert alp.shape([0, 0, 0, 0], [4, 4, 4, 4]) == pytest.approx([-0.05] * 4)
    # all solved: full weight 0.05
    assert alp.decide({"rewards": [1, 1], "lengths": [2, 4]}) == pytest.approx([0.9, 0.8])
    assert alp.shape([1, 0], [4, 4], solve_rate=0.0) == pytest.approx([1 - 0.1, -0.1])
    assert alp.shape([], []) == []


def test_bapo_bounds() -> None:
    ratios = np.array([1.0, 1.0, 0.7, 1.3])
    adv = np.array([1.0, -1.0, -2.0, 1.0])
    # at (0.6, 1.2): positive contrib 1.0 (the 1.3 token is clipped), negative 1.0 + 1.4 -> rho = 1/3.4
    assert positive_share(ratios, adv, 0.6, 1.2) == pytest.approx(1 / 3.4)
    ctl = BalancedClip(target=0.45, low_range=(0.6, 0.9), high_range=(1.2, 3.0), step=0.05)
    low, high = ctl.decide({"ratios": ratios, "advantages": adv})
    # raising c_low past 0.7 clips the -2 token: rho = 1/(1+1) = 0.5 >= 0.45 at c_low = 0.75; c_high untouched
    assert (low, high) == pytest.approx((0.75, 1.2))
    # a target only reachable by raising c_high too
    ctl = BalancedClip(target=0.6, low_range=(0.6, 0.9), high_range=(1.2, 3.0), step=0.05)
    low, high = ctl.decide({"ratios": ratios, "advantages": adv})
    # c_low saturates at 0.9 (rho 0.5); c_high reaches 1.3 -> positive 2.3, negative 1.0 -> rho 0.70
    assert (low, high) == pytest.approx((0.9, 1.3))
    # nothing contributes -> share 1.0, bounds stay at their starts
    assert BalancedClip().decide({"ratios": [1.0], "advantages": [0.0]}) == pytest.approx((0.6, 1.2))
