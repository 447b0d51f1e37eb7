"""planning.rollout on a problem that is not Wordle: find a hidden number by guessing, told higher / lower / right.

The belief is a tuple of candidate numbers; guessing q splits it into the numbers below and above q. Linear search
(guess the smallest candidate) is the base policy; one-step rollout over all candidates must improve on it, and on N
numbers the optimum total is the binary-search cost sum_d d * 2^(d-1) (for N = 2^D - 1).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from functools import cache

import numpy as np
import pytest

from planning.rollout import PolicyEvaluator, RolloutPolicy, profile_overruns, profile_total

Belief = tuple[int, ...]


class GuessNumber:
    def key(self, belief: Belief) -> Hashable:
        return belief

    def size(self, belief: Belief) -> int:
        return len(belief)

    def step(self, belief: Belief, action: int) -> tuple[int, list[Belief]]:
        below = tuple(x for x in belief if x < action)
        above = tuple(x for x in belief if x > action)
        return int(action in belief), [b for b in (below, above) if b]


class LinearSearch:
    depth_dependent = False

    def act(self, belief: Belief, depth: int) -> int:
        return belief[0]

    def ranked(self, belief: Belief, k: int, depth: int) -> Sequence[int]:
        return list(belief[:k])


@cache
def optimum(n: int) -> int:
    """Least total guesses to find any of n ordered numbers (brute-force DP)."""
    if n == 0:
        return 0
    return n + min(optimum(i) + optimum(n - 1 - i) for i in range(n))


def play_one(policy: object, model: GuessNumber, belief: Belief, hidden: int) -> int:
    depth = 0
    while True:
        action = policy.act(belief, depth)  # type: ignore[attr-defined]
        depth += 1
        if action == hidden:
            return depth
        belief = tuple(x for x in belief if x != action and (x < action) == (hidden < action))


@pytest.mark.parametrize("n", [1, 2, 7, 15, 20])
def test_rollout_improves_linear_search_to_the_optimum(n: int) -> None:
    model = GuessNumber()
    root = tuple(range(n))
    base = PolicyEvaluator(model, LinearSearch())
    assert profile_total(base.profile(root)) == n * (n + 1) // 2
    rollout = RolloutPolicy(model, LinearSearch(), top_k=n)
    total = profile_total(PolicyEvaluator(model, rollout).profile(root))
    assert optimum(n) <= total <= n * (n + 1) // 2
    # With every action a contender, one step of lookahead over linear search finds the balanced split here.
    assert total == optimum(n)


def test_tree_evaluation_equals_one_by_one_play() -> None:
    model = GuessNumber()
    root = tuple(range(0, 40, 3))
    rollout = RolloutPolicy(model, LinearSearch(), top_k=4)
    profile = PolicyEvaluator(model, rollout).profile(root)
    lengths = [play_one(rollout, model, root, h) for h in root]
    assert profile_total(profile) == sum(lengths)
    assert np.bincount(lengths, minlength=len(profile)).tolist() == profile.tolist()


def test_horizon_is_minimized_first() -> None:
    model = GuessNumber()
    root = tuple(range(12))
    # With only 2 contenders (the two smallest), linear-ish play needs up to 11 guesses; with a horizon the rollout
    # still cannot do better than its contenders allow, but it must never be worse than its base on overruns.
    base_profile = PolicyEvaluator(model, LinearSearch()).profile(root)
    rollout = RolloutPolicy(model, LinearSearch(), top_k=2, horizon=6)
    assert rollout.depth_dependent
    profile = PolicyEvaluator(model, rollout).profile(root)
    assert profile_overruns(profile, 0, 6) <= profile_overruns(base_profile, 0, 6)
    wide = RolloutPolicy(model, LinearSearch(), top_k=2, horizon=4, widen_k=12)
    assert profile_overruns(PolicyEvaluator(model, wide).profile(root), 0, 4) == 0


def test_uninformative_policy_is_caught() -> None:
    class Stuck:
        depth_dependent = False

        def act(self, belief: Belief, depth: int) -> int:
            return -1  # below every candidate: learns nothing

    with pytest.raises(RuntimeError, match="gains no information"):
        PolicyEvaluator(GuessNumber(), Stuck()).profile((1, 2, 3))


def test_rollout_of_rollout_is_no_worse() -> None:
    model = GuessNumber()
    root = tuple(range(30))
    once = RolloutPolicy(model, LinearSearch(), top_k=3)
    twice = RolloutPolicy(model, once, top_k=3)
    total_once = profile_total(PolicyEvaluator(model, once).profile(root))
    total_twice = profile_total(PolicyEvaluator(model, twice).profile(root))
    assert optimum(30) <= total_twice <= total_once


def test_depth_top_k_widens_only_its_depth() -> None:
    model = GuessNumber()
    root = tuple(range(15))
    narrow = RolloutPolicy(model, LinearSearch(), top_k=1)
    wide = RolloutPolicy(model, LinearSearch(), top_k=1, depth_top_k={1: 14})
    assert wide.depth_dependent and (wide.contenders(0), wide.contenders(1), wide.contenders(2)) == (1, 14, 1)
    child = root[1:]  # the first guess is 0 either way (one contender at depth 0): 14 numbers left above it
    assert wide.act(root, 0) == narrow.act(root, 0) == 0
    assert len(wide.scores(child, 1)) == 14 and len(wide.scores(child, 2)) == 1
    # Linear search after every second guess q over 1..14 costs sum_i i over both sides; the best q splits evenly.
    assert wide.act(child, 1) in (7, 8) and narrow.act(child, 1) == 1
    total_wide = profile_total(PolicyEvaluator(model, wide).profile(root))
    assert total_wide < profile_total(PolicyEvaluator(model, narrow).profile(root))
    with pytest.raises(ValueError, match="depth_top_k"):
        RolloutPolicy(model, LinearSearch(), top_k=1, depth_top_k={1: 0})
