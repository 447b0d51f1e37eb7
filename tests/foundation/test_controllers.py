from __future__ import annotations

import pytest

from meta.control import Fixed, TruncatedLinear, available_controllers, make_controller


def test_fixed() -> None:
    controller = Fixed(5)
    assert [controller.decide({"epoch": e}) for e in range(3)] == [5, 5, 5]
    with pytest.raises(ValueError):
        Fixed(-1)


def test_truncated_linear_hand_computed() -> None:
    # MBPO Hopper schedule [20, 100, 1, 15]: h = 1 + (epoch - 20) / 80 * 14, truncated.
    schedule = TruncatedLinear(20, 100, 1, 15)
    expected = {0: 1, 20: 1, 21: 1, 26: 2, 60: 8, 99: 14, 100: 15, 500: 15}
    for epoch, h in expected.items():
        assert schedule.decide({"epoch": epoch}) == h, epoch
    with pytest.raises(KeyError, match="epoch"):
        schedule.decide({})
    with pytest.raises(ValueError):
        TruncatedLinear(10, 10, 1, 5)


def test_truncated_linear_decreasing() -> None:
    schedule = TruncatedLinear(0, 10, 10, 0)
    assert [schedule.decide({"epoch": e}) for e in (0, 5, 10, 11)] == [10, 5, 0, 0]


def test_specs() -> None:
    assert make_controller("fixed:3").decide({}) == 3
    assert make_controller("linear:20,150,1,15").decide({"epoch": 150}) == 15
    assert {"fixed", "linear", "inc", "dec", "incdec", "uncertainty", "random"} <= set(available_controllers())
    with pytest.raises(ValueError, match="unknown controller 'bogus'"):
        make_controller("bogus:1")
    with pytest.raises(ValueError, match="takes EPOCH_A,EPOCH_B,H_MIN,H_MAX \\(4 integers\\)"):
        make_controller("linear:1,2")
    with pytest.raises(ValueError, match="arguments must be numbers"):
        make_controller("fixed:x")


def test_state_round_trip() -> None:
    controller = Fixed(2)
    controller.load_state_dict(controller.state_dict())
    with pytest.raises(KeyError):
        controller.load_state_dict({"nonsense": 1})
