"""Reference policies and their values: the yardsticks an in-context learner is measured against.

Bandits (Bernoulli arms, means ~ U[0, 1], uniform Beta(1, 1) prior): random, UCB1 (Auer et al., 2002), Thompson
sampling, greedy posterior mean, the oracle that knows the means, and the exact Bayes-optimal value for two arms by
dynamic programming over the Beta posteriors. The Monte-Carlo estimates are vectorised over tasks; they follow the
same rules as :class:`~envs.metarl.bandit.BernoulliBanditEnv`.

Dark key-door: a uniformly random policy and an oracle that knows the key and door cells and walks the Manhattan
path, both run on :class:`~envs.metarl.keydoor.DarkKeyDoorEnv` itself.

Standard errors are ``scipy.stats.sem``, as in :mod:`rolloutlab.statistics`, which ``envs/`` (the ground floor) does
not import.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.stats

from envs.metarl.keydoor import MOVES, DarkKeyDoorEnv

BANDIT_POLICIES = ("random", "ucb1", "thompson", "greedy", "oracle")


def _argmax_random_ties(scores: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Row-wise argmax with ties broken uniformly at random. ``scores``: (tasks, arms)."""
    noise = rng.random(scores.shape) * 1e-9
    return np.argmax(scores + noise, axis=1)


def bandit_monte_carlo(
    policy: str, n_arms: int, horizon: int, n_tasks: int = 20_000, seed: int = 0
) -> tuple[float, float]:
    """Mean and standard error of the total reward of a reference bandit policy over ``n_tasks`` random tasks.

    Args:
        policy: One of :data:`BANDIT_POLICIES`.
        n_arms: Arms per task.
        horizon: Pulls per task.
        n_tasks: Monte-Carlo tasks (all simulated at once).
        seed: Seed of the task and reward draws.

    Returns:
        ``(mean total reward, standard error)``, both in rewards per task.
    """
    if policy not in BANDIT_POLICIES:
        raise ValueError(f"unknown bandit policy {policy!r}; known: {BANDIT_POLICIES}")
    rng = np.random.default_rng(seed)
    means = rng.uniform(0.0, 1.0, size=(n_tasks, n_arms))
    successes = np.zeros((n_tasks, n_arms))
    pulls = np.zeros((n_tasks, n_arms))
    total = np.zeros(n_tasks)
    rows = np.arange(n_tasks)
    for t in range(horizon):
        if policy == "random":
            arm = rng.integers(0, n_arms, size=n_tasks)
        elif policy == "oracle":
            arm = np.argmax(means, axis=1)
        elif policy == "thompson":
            arm = np.argmax(rng.beta(1.0 + successes, 1.0 + pulls - successes), axis=1)
        elif policy == "greedy":
            arm = _argmax_random_ties((successes + 1.0) / (pulls + 2.0), rng)
        elif t < n_arms:  # UCB1 pulls every arm once first
            arm = np.full(n_tasks, t)
        else:
            bonus = np.sqrt(2.0 * np.log(t) / pulls)
            arm = _argmax_random_ties(successes / pulls + bonus, rng)
        reward = (rng.random(n_tasks) < means[rows, arm]).astype(np.float64)
        successes[rows, arm] += reward
        pulls[rows, arm] += 1.0
        total += reward
    return float(total.mean()), float(scipy.stats.sem(total))


def bayes_optimal_two_arm_value(horizon: int) -> float:
    """Exact expected total reward of the Bayes-optimal policy on a 2-armed Bernoulli bandit with U[0, 1] priors.

    Backward induction over posterior states ``(s1, f1, s2, f2)`` (successes and failures per arm, Beta(1, 1) prior):
    ``V_t = max_a [p_a (1 + V_{t+1}(success)) + (1 - p_a) V_{t+1}(failure)]`` with ``p_a = (s_a + 1) / (n_a + 2)``.
    The states of one level ``t = s1 + f1 + s2 + f2`` are a cube indexed by ``(s1, f1, s2)``; ``f2`` is implied, so
    the memory is O(H^3) and the time O(H^4).

    Args:
        horizon: Number of pulls H.

    Returns:
        The value of the empty posterior with H pulls to go.
    """
    if horizon < 0:
        raise ValueError(f"horizon must be >= 0, got {horizon}")
    nxt = np.zeros((horizon + 2, horizon + 2, horizon + 2))  # V at level horizon: nothing left to earn
    for t in range(horizon - 1, -1, -1):
        idx = np.arange(t + 1)
        s1, f1, s2 = np.meshgrid(idx, idx, idx, indexing="ij")
        n2 = t - s1 - f1
        valid = s2 <= n2  # f2 = n2 - s2 >= 0
        p1 = (s1 + 1.0) / (s1 + f1 + 2.0)
        p2 = (s2 + 1.0) / (np.maximum(n2, 0) + 2.0)
        up = nxt[: t + 2, : t + 2, : t + 2]
        q1 = p1 * (1.0 + up[1:, :-1, :-1]) + (1.0 - p1) * up[:-1, 1:, :-1]
        q2 = p2 * (1.0 + up[:-1, :-1, 1:]) + (1.0 - p2) * up[:-1, :-1, :-1]
        level = np.where(valid, np.maximum(q1, q2), 0.0)
        nxt = np.zeros((t + 1, t + 1, t + 1))
        nxt[...] = level
    return float(nxt[0, 0, 0])


def keydoor_oracle_action(env: DarkKeyDoorEnv) -> int:
    """The oracle's move: one step of a shortest (Manhattan) path to the key, or to the door once the key is held
    (it reads the env's hidden ``key`` and ``door`` cells)."""
    target = env.door if env.has_key else env.key
    delta = target - env.pos
    step = np.array([np.sign(delta[0]), 0]) if delta[0] != 0 else np.array([0, np.sign(delta[1])])
    return int(np.flatnonzero((step == MOVES).all(axis=1))[0])


def keydoor_monte_carlo(policy: str, n_tasks: int = 1000, seed: int = 0, **env_kwargs: Any) -> tuple[float, float]:
    """Mean and standard error of the total reward per meta-rollout of ``"random"`` or ``"oracle"`` on dark key-door.

    The oracle knows the key and door cells and walks a shortest (Manhattan) path to the key, then to the door; it is
    an upper bound for any in-context learner, which must first find both cells.

    Args:
        policy: ``"random"`` or ``"oracle"``.
        n_tasks: Tasks (meta-rollouts) simulated.
        seed: Seed of the tasks and of the random policy.
        **env_kwargs: Passed to :class:`DarkKeyDoorEnv` (``size``, ``episode_steps``, ``rollout_steps``).

    Returns:
        ``(mean total reward, standard error)`` per meta-rollout.
    """
    rng = np.random.default_rng(seed)
    choose: Callable[[DarkKeyDoorEnv], int]
    if policy == "random":
        choose = lambda env: int(rng.integers(0, 4))  # noqa: E731
    elif policy == "oracle":
        choose = keydoor_oracle_action
    else:
        raise ValueError(f"unknown key-door policy {policy!r}; expected 'random' or 'oracle'")
    env = DarkKeyDoorEnv(**env_kwargs)
    totals = np.zeros(n_tasks)
    for task in range(n_tasks):
        env.reset(seed=seed * 1_000_003 + task)
        done = False
        while not done:
            _, reward, done, _, _ = env.step(choose(env))
            totals[task] += reward
    return float(totals.mean()), float(scipy.stats.sem(totals))
