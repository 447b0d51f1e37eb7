"""Epsilon-greedy exploration: one annealed epsilon per parallel actor (Ape-X style), or AMAGO's bilevel schedule."""

from __future__ import annotations

import numpy as np


class PerActorEpsilon:
    """Epsilon of actor ``i`` after ``t`` env steps: linear from ``start`` to its own final value over ``anneal_steps``.

    Final values are spaced geometrically from ``end_low`` (actor 0) to ``end_high`` (last actor), so some actors keep
    exploring while others act almost greedily.

    Args:
        n_actors: Parallel actors (vector-env copies).
        start: Epsilon of every actor at step 0.
        end_low: Final epsilon of the least exploratory actor.
        end_high: Final epsilon of the most exploratory actor.
        anneal_steps: Env steps (all actors together) of the linear anneal.
    """

    def __init__(self, n_actors: int, start: float, end_low: float, end_high: float, anneal_steps: int) -> None:
        if not 0.0 < end_low <= end_high <= 1.0 or not 0.0 <= start <= 1.0:
            raise ValueError("need 0 < end_low <= end_high <= 1 and 0 <= start <= 1")
        self.start = start
        self.ends = np.geomspace(end_low, end_high, n_actors) if n_actors > 1 else np.array([end_low])
        self.anneal_steps = max(int(anneal_steps), 1)

    def __call__(self, env_steps: int) -> np.ndarray:
        """Epsilons ``(n_actors,)`` after ``env_steps`` collected steps."""
        frac = min(env_steps / self.anneal_steps, 1.0)
        return self.start + (self.ends - self.start) * frac


class BilevelEpsilon:
    """AMAGO's bilevel epsilon (Grigsby et al., 2024, App. B and Fig. 13; ``BilevelEpsilonGreedy`` in its code).

    Exploration decays on two clocks. Over a trial (meta-rollout) of ``horizon`` steps epsilon falls linearly from
    ``e_start(g)`` at the first step to ``e_end(g)`` at the last, as a meta-RL agent should explore early in a new task
    and exploit late; over training (``g`` env steps, all actors together) both ends anneal linearly, then stay at
    their floors:

        ``e_start(g) = max(start_begin - (start_begin - start_final) g / anneal_steps, start_final)``
        ``e_end(g)   = max(end_begin - (end_begin - end_final) g / anneal_steps, end_final)``
        ``eps_i(g, t) = m_i (e_start(g) - (e_start(g) - e_end(g)) t / horizon)``

    ``m_i`` is actor ``i``'s multiplier, drawn uniform in ``[0, 1)`` for every new trial (AMAGO's ``randomize_eps``:
    the schedule is a ceiling, and the spread of multipliers replaces tuning ``anneal_steps``); with
    ``randomize=False`` every multiplier is 1.

    Args:
        horizon: Steps of one trial.
        anneal_steps: Env steps of the training-time anneal.
        start_begin: Epsilon at a trial's first step at the start of training (AMAGO 1.0).
        start_final: ... at the end of training (AMAGO 0.05).
        end_begin: Epsilon at a trial's last step at the start of training (AMAGO 0.8).
        end_final: ... at the end of training (AMAGO 0.01).
        randomize: Draw per-actor multipliers (AMAGO's default) instead of using 1.
    """

    def __init__(
        self,
        horizon: int,
        anneal_steps: int,
        start_begin: float = 1.0,
        start_final: float = 0.05,
        end_begin: float = 0.8,
        end_final: float = 0.01,
        randomize: bool = True,
    ) -> None:
        values = (start_begin, start_final, end_begin, end_final)
        if horizon < 1 or not all(0.0 <= v <= 1.0 for v in values):
            raise ValueError(f"need horizon >= 1 and every epsilon in [0, 1], got {horizon}, {values}")
        self.horizon = int(horizon)
        self.anneal_steps = max(int(anneal_steps), 1)
        self.start_begin, self.start_final, self.end_begin, self.end_final = values
        self.randomize = randomize

    def ends(self, env_steps: int) -> tuple[float, float]:
        """``(e_start, e_end)``: epsilon at a trial's first and last step after ``env_steps`` of training."""
        frac = env_steps / self.anneal_steps
        start = max(self.start_begin - (self.start_begin - self.start_final) * frac, self.start_final)
        end = max(self.end_begin - (self.end_begin - self.end_final) * frac, self.end_final)
        return start, end

    def multipliers(self, n_actors: int, rng: np.random.Generator) -> np.ndarray:
        """Per-actor multipliers ``(n_actors,)`` for the next trial (drawn from ``rng`` only when randomizing)."""
        return rng.random(n_actors) if self.randomize else np.ones(n_actors)

    def __call__(self, env_steps: int, step_in_trial: int, multipliers: np.ndarray) -> np.ndarray:
        """Epsilons ``(n_actors,)`` at step ``step_in_trial`` (0-based) of a trial begun after ``env_steps``."""
        start, end = self.ends(env_steps)
        return multipliers * (start - (start - end) * step_in_trial / self.horizon)


def first_visits(obs: np.ndarray, n_dims: int) -> np.ndarray:
    """1.0 at each step of a trajectory whose next observation is new to its trial, else 0.0, shape ``(T,)``.

    An observation is its first ``n_dims`` entries (the task env's own observation, before the RL^2 inputs), so on
    the key-door a step is new when it enters a cell the trial has not seen with that key state: a within-trial
    count bonus with a count of one, as in episodic novelty bonuses (Badia et al., 2020, "Never Give Up").

    Args:
        obs: The trajectory's inputs ``(T + 1, D)``; ``obs[0]`` (the first observation) counts as seen.
        n_dims: Leading entries that make an observation, ``1 <= n_dims <= D``.
    """
    if obs.ndim != 2 or not 1 <= n_dims <= obs.shape[1]:
        raise ValueError(f"need obs of shape (T + 1, D) and 1 <= n_dims <= D, got {obs.shape} and {n_dims}")
    keys = np.ascontiguousarray(obs[:, :n_dims])
    seen = {keys[0].tobytes()}
    new = np.zeros(len(obs) - 1, dtype=np.float32)
    for t in range(1, len(obs)):
        key = keys[t].tobytes()
        if key not in seen:
            seen.add(key)
            new[t - 1] = 1.0
    return new


def novelty_coefficient(bonus: float, anneal_steps: int | None, env_steps: int) -> float:
    """The first-visit bonus after ``env_steps`` of training: ``bonus`` falling linearly to 0 at ``anneal_steps``
    (constant when ``anneal_steps`` is ``None``)."""
    if anneal_steps is None:
        return float(bonus)
    return float(bonus) * max(1.0 - env_steps / max(int(anneal_steps), 1), 0.0)
