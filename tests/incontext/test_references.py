"""Reference policies: the DP against brute force, and the ordering of the Monte-Carlo references."""

from __future__ import annotations

from functools import cache

import pytest

from envs.metarl.references import bandit_monte_carlo, bayes_optimal_two_arm_value, keydoor_monte_carlo


def _brute_force_value(horizon: int) -> float:
    @cache
    def value(s1: int, f1: int, s2: int, f2: int, left: int) -> float:
        if left == 0:
            return 0.0
        best = 0.0
        for s, f, succ, fail in (
            (s1, f1, (s1 + 1, f1, s2, f2), (s1, f1 + 1, s2, f2)),
            (s2, f2, (s1, f1, s2 + 1, f2), (s1, f1, s2, f2 + 1)),
        ):
            p = (s + 1) / (s + f + 2)
            best = max(best, p * (1 + value(*succ, left - 1)) + (1 - p) * value(*fail, left - 1))
        return best

    return value(0, 0, 0, 0, horizon)


def test_two_arm_dp_matches_hand_values_and_brute_force() -> None:
    assert bayes_optimal_two_arm_value(1) == pytest.approx(0.5)
    assert bayes_optimal_two_arm_value(2) == pytest.approx(13 / 12)  # 1/2 + E[max(2/3, 1/2) ...] by hand
    for horizon in (3, 5, 8):
        assert bayes_optimal_two_arm_value(horizon) == pytest.approx(_brute_force_value(horizon))


def test_two_arm_dp_at_issue_reference() -> None:
    assert bayes_optimal_two_arm_value(100) == pytest.approx(64.9, abs=0.05)


def test_bandit_references_are_ordered() -> None:
    values = {p: bandit_monte_carlo(p, 5, 30, n_tasks=4000, seed=1)[0] for p in ("random", "thompson", "oracle")}
    assert values["random"] == pytest.approx(15.0, abs=0.4)
    assert values["random"] < values["thompson"] < values["oracle"]


def test_bayes_optimal_beats_heuristics_on_two_arms() -> None:
    dp = bayes_optimal_two_arm_value(20)
    for policy in ("ucb1", "thompson", "greedy"):
        mean, stderr = bandit_monte_carlo(policy, 2, 20, n_tasks=20_000, seed=2)
        assert mean < dp + 3 * stderr


def test_keydoor_oracle_far_above_random() -> None:
    random_mean, _ = keydoor_monte_carlo("random", n_tasks=20, seed=0)
    oracle_mean, _ = keydoor_monte_carlo("oracle", n_tasks=20, seed=0)
    assert random_mean < 15.0 < 80.0 < oracle_mean


def test_unknown_policy_rejected() -> None:
    with pytest.raises(ValueError, match="unknown"):
        bandit_monte_carlo("softmax", 2, 5)
    with pytest.raises(ValueError, match="unknown"):
        keydoor_monte_carlo("greedy", n_tasks=1)
