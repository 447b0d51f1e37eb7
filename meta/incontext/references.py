"""Reference policies scored on exactly the agent's evaluation tasks (paired: same reset seeds, same tasks).

Against references computed on other tasks (20k of them), the gap on 200 evaluation tasks can be as large as the
shortfall being measured. Here every reference plays the tasks that
:func:`~meta.incontext.trainer.evaluate_agent` plays, task ``i`` being the env reset with
:data:`~meta.incontext.tasks.EVAL_SEED_BASE` ``+ i``, and returns one total per task, so differences are paired.

* Bandits (vectorised, but drawing each task exactly as :class:`~envs.metarl.bandit.BernoulliBanditEnv` does: arm
  means then one uniform per pull from the seeded ``np_random``, a pull paying 1 when its uniform is below the arm's
  mean; so a reference and the agent that pull the same arm at step ``t`` of task ``i`` get the same reward): random,
  UCB1, Thompson sampling, greedy posterior mean, the oracle that knows the means, and for two arms the Bayes-optimal
  policy itself (its actions from the backward induction of
  :func:`~envs.metarl.references.bayes_optimal_two_arm_value`, played on the tasks).
* Dark key-door (played on the env itself): random, the oracle that knows the key and door, and ``explorer``, a
  hand-written in-context learner that only remembers what it has seen: it walks to the nearest cell not yet ruled
  out as the key (then the door), and once it has found them walks straight to them in every later episode.
* T-maze: the oracle (always right, 1.0) and the best memory-free policy (always turn up).

Every function takes the number of tasks and an optional seed of the policies' own randomness (Thompson's draws,
random tie-breaks), never of the tasks.
"""

from __future__ import annotations

import numpy as np
from gymnasium.utils import seeding

from envs.metarl.keydoor import MOVES, DarkKeyDoorEnv
from meta.incontext.tasks import eval_task_seeds

BANDIT_REFERENCES = ("random", "ucb1", "thompson", "greedy", "oracle")
KEYDOOR_REFERENCES = ("random", "explorer", "oracle")
TMAZE_REFERENCES = ("memory_free", "oracle")


def bandit_eval_tasks(n_arms: int, horizon: int, seeds: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The arm means ``(tasks, n_arms)`` and per-pull uniforms ``(tasks, horizon)`` of the bandit tasks ``seeds``.

    The same draws, in the same order, as ``BernoulliBanditEnv.reset(seed=s)`` followed by ``horizon`` steps.
    """
    means = np.empty((len(seeds), n_arms))
    coins = np.empty((len(seeds), horizon))
    for row, seed in enumerate(seeds):
        rng, _ = seeding.np_random(seed)
        means[row] = rng.uniform(0.0, 1.0, size=n_arms)
        coins[row] = rng.random(horizon)
    return means, coins


def _two_arm_bayes_actions(horizon: int) -> list[np.ndarray]:
    """Bayes-optimal arm (0/1) per posterior state, one cube ``[s1, f1, s2]`` per step ``t`` (ties: arm 0).

    The same backward induction as :func:`~envs.metarl.references.bayes_optimal_two_arm_value`, keeping the argmax.
    """
    nxt = np.zeros((horizon + 2, horizon + 2, horizon + 2))
    actions: list[np.ndarray] = [np.zeros(0, dtype=bool)] * horizon
    for t in range(horizon - 1, -1, -1):
        idx = np.arange(t + 1)
        s1, f1, s2 = np.meshgrid(idx, idx, idx, indexing="ij")
        n2 = t - s1 - f1
        valid = s2 <= n2
        p1 = (s1 + 1.0) / (s1 + f1 + 2.0)
        p2 = (s2 + 1.0) / (np.maximum(n2, 0) + 2.0)
        up = nxt[: t + 2, : t + 2, : t + 2]
        q1 = p1 * (1.0 + up[1:, :-1, :-1]) + (1.0 - p1) * up[:-1, 1:, :-1]
        q2 = p2 * (1.0 + up[:-1, :-1, 1:]) + (1.0 - p2) * up[:-1, :-1, :-1]
        actions[t] = valid & (q2 > q1)
        nxt = np.where(valid, np.maximum(q1, q2), 0.0)
    return actions


def bandit_references(
    n_arms: int, horizon: int, n_tasks: int, policy_seed: int = 0, seeds: list[int] | None = None
) -> dict[str, np.ndarray]:
    """Total reward per task ``(n_tasks,)`` of every bandit reference on the evaluation tasks.

    Args:
        n_arms: Arms.
        horizon: Pulls per task.
        n_tasks: Evaluation tasks (the first ``n_tasks`` of :func:`~meta.incontext.tasks.eval_task_seeds`).
        policy_seed: Seed of the policies' own randomness (random arm, Thompson draws, tie-breaks).
        seeds: Reset seeds to use instead of the evaluation tasks (tests).

    Returns:
        ``{policy: returns}`` for :data:`BANDIT_REFERENCES`, plus ``bayes_optimal`` when ``n_arms == 2``.
    """
    seeds = eval_task_seeds(n_tasks) if seeds is None else seeds
    means, coins = bandit_eval_tasks(n_arms, horizon, seeds)
    rows = np.arange(len(seeds))
    policies = [*BANDIT_REFERENCES, *(["bayes_optimal"] if n_arms == 2 else [])]
    bayes = _two_arm_bayes_actions(horizon) if n_arms == 2 else []
    out: dict[str, np.ndarray] = {}
    for policy in policies:
        rng = np.random.default_rng(policy_seed)
        successes = np.zeros((len(seeds), n_arms))
        pulls = np.zeros((len(seeds), n_arms))
        total = np.zeros(len(seeds))
        for t in range(horizon):
            if policy == "random":
                arm = rng.integers(0, n_arms, size=len(seeds))
            elif policy == "oracle":
                arm = np.argmax(means, axis=1)
            elif policy == "thompson":
                arm = np.argmax(rng.beta(1.0 + successes, 1.0 + pulls - successes), axis=1)
            elif policy == "greedy":
                arm = np.argmax((successes + 1.0) / (pulls + 2.0) + rng.random((len(seeds), n_arms)) * 1e-9, axis=1)
            elif policy == "bayes_optimal":
                s1, f1 = successes[:, 0].astype(int), (pulls[:, 0] - successes[:, 0]).astype(int)
                arm = bayes[t][s1, f1, successes[:, 1].astype(int)].astype(int)
            elif t < n_arms:  # UCB1 pulls every arm once first
                arm = np.full(len(seeds), t)
            else:
                bonus = np.sqrt(2.0 * np.log(t) / pulls)
                arm = np.argmax(successes / pulls + bonus + rng.random((len(seeds), n_arms)) * 1e-9, axis=1)
            reward = (coins[:, t] < means[rows, arm]).astype(np.float64)
            successes[rows, arm] += reward
            pulls[rows, arm] += 1.0
            total += reward
        out[policy] = total
    return out


def _toward(pos: np.ndarray, target: np.ndarray) -> int:
    """The move one step along a Manhattan path from ``pos`` to ``target`` (x first)."""
    delta = target - pos
    step = np.array([np.sign(delta[0]), 0]) if delta[0] != 0 else np.array([0, np.sign(delta[1])])
    return int(np.flatnonzero((step == MOVES).all(axis=1))[0])


class KeyDoorExplorer:
    """An in-context learner by hand for the dark key-door: remember what was seen, search the rest nearest-first.

    It uses only what the agent observes (its cell, whether it holds the key, the reward, episode resets). A cell
    visited without the key and without a key reward is not the key; a cell visited with the key and without a door
    reward is not the door. While the key (then the door) is unknown it walks to the nearest cell not yet ruled out;
    once known it walks the Manhattan path to it. Memory persists across the inner episodes of one task.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.reset()

    def reset(self, start: np.ndarray | None = None) -> None:
        """Forget everything (a new task); the ``start`` cell, where every episode begins, is neither key nor door."""
        self.not_key = np.zeros((self.size, self.size), dtype=bool)
        self.not_door = np.zeros((self.size, self.size), dtype=bool)
        self.key: np.ndarray | None = None
        self.door: np.ndarray | None = None
        if start is not None:
            self.not_key[tuple(start)] = self.not_door[tuple(start)] = True

    def observe(self, entered: np.ndarray, reward: float, was_holding: bool) -> None:
        """Learn from a step that entered cell ``entered`` holding the key (``was_holding``) or not."""
        if reward > 0 and not was_holding:
            self.key = entered.copy()
        elif reward > 0:
            self.door = entered.copy()  # the env then sends the agent back to the start
        elif not was_holding:
            self.not_key[tuple(entered)] = True
        else:
            self.not_door[tuple(entered)] = True

    def act(self, pos: np.ndarray, has_key: bool) -> int:
        """The move toward the current target (the known cell, else the nearest candidate)."""
        known, ruled_out = (self.door, self.not_door) if has_key else (self.key, self.not_key)
        if known is not None:
            target = known
        else:
            candidates = np.argwhere(~ruled_out)
            candidates = candidates[(candidates != pos).any(axis=1)]
            if len(candidates) == 0:
                return 0
            distance = np.abs(candidates - pos).sum(axis=1)
            target = candidates[int(np.argmin(distance))]
        return _toward(pos, target)


def keydoor_references(
    n_tasks: int,
    policy_seed: int = 0,
    seeds: list[int] | None = None,
    size: int = 8,
    episode_steps: int = 50,
    trial_steps: int = 500,
) -> dict[str, np.ndarray]:
    """Total reward per task ``(n_tasks,)`` of random, explorer and oracle on the key-door evaluation tasks (on a
    ``size`` x ``size`` grid, inner episodes of ``episode_steps``, trials of ``trial_steps``).

    Played on :class:`~envs.metarl.keydoor.DarkKeyDoorEnv` reset with the evaluation seeds: the task (start, key and
    door cells) is drawn at reset only, so these are the agent's tasks.
    """
    seeds = eval_task_seeds(n_tasks) if seeds is None else seeds
    out: dict[str, np.ndarray] = {}
    env = DarkKeyDoorEnv(size=size, episode_steps=episode_steps, rollout_steps=trial_steps)
    for policy in KEYDOOR_REFERENCES:
        rng = np.random.default_rng(policy_seed)
        explorer = KeyDoorExplorer(env.size)
        totals = np.zeros(len(seeds))
        for row, seed in enumerate(seeds):
            env.reset(seed=seed)
            explorer.reset(env.pos)
            done = False
            while not done:
                pos, holding = env.pos.copy(), env.has_key
                if policy == "random":
                    action = int(rng.integers(0, 4))
                elif policy == "explorer":
                    action = explorer.act(pos, holding)
                else:
                    action = _toward(pos, env.door if holding else env.key)
                entered = np.clip(pos + MOVES[action], 0, env.size - 1)
                _, reward, done, _, _ = env.step(action)
                if policy == "explorer":
                    explorer.observe(entered, reward, holding)
                totals[row] += reward
        out[policy] = totals
    return out


def tmaze_references(corridor_length: int, n_tasks: int, seeds: list[int] | None = None) -> dict[str, np.ndarray]:
    """Success per task ``(n_tasks,)`` of the oracle (1.0) and of the best memory-free policy (always up) on the
    T-maze evaluation tasks (cue drawn at reset as :class:`~envs.metarl.tmaze.PassiveTMazeEnv` does)."""
    seeds = eval_task_seeds(n_tasks) if seeds is None else seeds
    up = np.array([seeding.np_random(seed)[0].random() < 0.5 for seed in seeds], dtype=np.float64)
    return {"memory_free": up, "oracle": np.ones(len(seeds))}
