"""Hand-computed values of the rollout-length heuristics: INC / DEC / INC-DEC, the UP/DOWN/NOOP rule, uncertainty."""

from __future__ import annotations

import numpy as np
import pytest

from meta.controllers import (
    BudgetLinear,
    StepAction,
    UncertaintyTruncation,
    available_controllers,
    make_controller,
    step_rollout_length,
)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        # budget fractions 0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0 with K_max = 32
        ("inc:32", [0, 3, 8, 16, 24, 29, 32]),
        ("dec:32", [32, 29, 24, 16, 8, 3, 0]),
        ("incdec:32", [0, 6, 16, 32, 16, 6, 0]),
    ],
)
def test_budget_linear_schedules(spec: str, expected: list[int]) -> None:
    controller = make_controller(spec)
    fractions = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]
    assert [controller.decide({"budget_fraction": f}) for f in fractions] == expected


def test_budget_linear_rounding_and_errors() -> None:
    # 0.15 * 10 = 1.4999999999999998 in floats; the schedule must still round half up to 2.
    assert BudgetLinear("inc", 10).decide({"budget_fraction": 0.15}) == 2
    assert BudgetLinear("inc", 32).decide({"budget_fraction": 1.7}) == 32  # clipped to [0, 1]
    with pytest.raises(KeyError, match="budget_fraction"):
        BudgetLinear("dec", 8).decide({})
    with pytest.raises(ValueError):
        BudgetLinear("sideways", 8)
    with pytest.raises(ValueError):
        make_controller("incdec:a")


@pytest.mark.parametrize(
    ("k", "up", "down"),
    [(0, 1, 0), (1, 2, 0), (2, 3, 1), (3, 5, 1), (5, 8, 2), (21, 32, 10), (22, 32, 11), (32, 32, 16)],
)
def test_up_down_rule_matches_paper(k: int, up: int, down: int) -> None:
    # UP: ceil(1.5 K) or 1 from 0; DOWN: floor(K / 2); capped at K_max = 32 (Bhatia et al. 2022, section 4).
    assert step_rollout_length(k, StepAction.UP, 32) == up
    assert step_rollout_length(k, StepAction.DOWN, 32) == down
    assert step_rollout_length(k, StepAction.NOOP, 32) == k


def test_up_chain_from_zero() -> None:
    k, chain = 0, []
    for _ in range(10):
        k = step_rollout_length(k, StepAction.UP, 32)
        chain.append(k)
    assert chain == [1, 2, 3, 5, 8, 12, 18, 27, 32, 32]
    with pytest.raises(ValueError):
        step_rollout_length(-1, StepAction.UP, 32)


def test_uncertainty_truncation() -> None:
    controller = make_controller("uncertainty:75")
    assert isinstance(controller, UncertaintyTruncation)
    assert controller.decide({}) == 32
    first = np.array([0.1, 0.2, 0.3, 0.4, 0.5])  # 75th percentile (linear interpolation) = 0.4
    np.testing.assert_array_equal(controller.keep(0, first), [True, True, True, True, False])
    assert controller.threshold == pytest.approx(0.4)
    # Later steps use the step-0 threshold.
    np.testing.assert_array_equal(controller.keep(3, np.array([0.39, 0.41, 5.0])), [True, False, False])
    saved = controller.state_dict()
    restored = UncertaintyTruncation(75)
    restored.load_state_dict(saved)
    np.testing.assert_array_equal(restored.keep(1, np.array([0.35, 0.45])), [True, False])
    # A new batch recalibrates at its step 0.
    controller.keep(0, np.array([1.0, 2.0, 3.0]))
    assert controller.threshold == pytest.approx(2.5)
    assert make_controller("uncertainty:95,16").decide({}) == 16
    with pytest.raises(ValueError):
        make_controller("uncertainty:0")


def test_registered_names() -> None:
    assert {"inc", "dec", "incdec", "uncertainty"} <= set(available_controllers())
