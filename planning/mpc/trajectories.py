"""Scoring action sequences in a learned ensemble: particles, trajectory sampling and known rewards (PETS).

:class:`TrajectoryEvaluator` simulates every candidate sequence from the current state with ``num_particles``
particles and returns the mean of their returns, in one batched model call per step for all candidates and particles
together (``C * P`` rows). How a particle moves through the ensemble is the *propagation* of Chua et al. 2018 (sec. 5):

* ``"tsinf"`` (TS-inf): each particle follows one elite for the whole horizon; particle ``p`` of ``P`` of every
  candidate uses elite ``floor(p K / P)`` (the particles spread evenly over the ``K`` elites), so all candidates are
  scored against the same members (a common-random-numbers comparison);
* ``"ts1"`` (TS-1): each particle draws a fresh elite at every step;
* ``"expectation"``: one particle moves by the elites' mean prediction, without sampling (PETS's "E" baseline).

With ``sample_noise`` the members' Gaussians are sampled (aleatoric noise, PETS's default); without it each member
moves by its mean, which makes the scores a deterministic function of the sequences. Rewards come from a known
reward function of ``(obs, action, next_obs)`` (``mbrl.rewards``) or, when none is given, from the model's own
reward output. A particle that terminates collects no reward after the terminating step; a non-finite prediction
scores the particle :data:`NONFINITE_RETURN` (as mbrl-lib does), so such a sequence is never chosen.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from mbrl.rewards import RewardFn
from mbrl.termination import TerminationFn

PROPAGATIONS = ("tsinf", "ts1", "expectation")
#: Return given to a particle whose prediction became NaN or infinite.
NONFINITE_RETURN = -1e10


class EnsemblePredictor(Protocol):
    """What the evaluator needs from a world model (``mbrl.models.DynamicsModel`` provides it)."""

    obs_dim: int
    action_dim: int

    @property
    def num_elites(self) -> int:
        """Number of members particles can follow."""

    def predict_members(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        members: np.ndarray,
        rng: np.random.Generator | None = None,
        deterministic: bool = False,
    ) -> Any:
        """One step per sample through the given elite: ``next_obs``, ``reward``, ``terminated_prob``, ``finite``."""

    def predict_expected(self, obs: np.ndarray, actions: np.ndarray) -> Any:
        """One step by the elites' mean prediction."""


class TrajectoryEvaluator:
    """Mean simulated return of candidate action sequences from one state.

    Args:
        model: The world model.
        reward_fn: Known reward ``fn(obs, action, next_obs) -> [N]``; ``None`` uses the model's reward output.
        termination_fn: Known termination ``fn(obs, action, next_obs) -> bool[N]``; ``None`` uses the model's
            learned termination probability (> 0.5) if it has one, otherwise nothing terminates.
        propagation: ``"tsinf"``, ``"ts1"`` or ``"expectation"`` (see the module docstring).
        num_particles: Particles per candidate (``"expectation"`` always uses one).
        sample_noise: Sample each member's Gaussian (PETS) or move by its mean.
        discount: Per-step discount of the simulated rewards (1: plain sum, as PETS).

    Raises:
        ValueError: unknown propagation, or fewer than one particle.
    """

    def __init__(
        self,
        model: EnsemblePredictor,
        reward_fn: RewardFn | None,
        termination_fn: TerminationFn | None,
        propagation: str = "tsinf",
        num_particles: int = 20,
        sample_noise: bool = True,
        discount: float = 1.0,
    ) -> None:
        if propagation not in PROPAGATIONS:
            raise ValueError(f"unknown propagation {propagation!r}; choose one of {', '.join(PROPAGATIONS)}")
        if num_particles < 1:
            raise ValueError(f"num_particles must be >= 1, got {num_particles}")
        if not 0.0 < discount <= 1.0:
            raise ValueError(f"discount must lie in (0, 1], got {discount}")
        self.model = model
        self.reward_fn = reward_fn
        self.termination_fn = termination_fn
        self.propagation = propagation
        self.num_particles = 1 if propagation == "expectation" else int(num_particles)
        self.sample_noise = bool(sample_noise) and propagation != "expectation"
        self.discount = float(discount)

    def returns(self, obs: np.ndarray, sequences: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Mean return over particles of each candidate sequence.

        Args:
            obs: ``[obs_dim]`` the state to plan from.
            sequences: ``[C, H, act_dim]`` candidate action sequences (already inside the action bounds).
            rng: Generator for member draws (TS-1) and sampling noise.

        Returns:
            ``[C]`` mean returns.
        """
        obs = np.asarray(obs, dtype=np.float64).reshape(-1)
        sequences = np.asarray(sequences, dtype=np.float64)
        if sequences.ndim != 3:
            raise ValueError(f"sequences must have shape [C, H, act_dim], got {sequences.shape}")
        if obs.shape[0] != self.model.obs_dim:
            raise ValueError(f"the model expects {self.model.obs_dim}-dim observations, got {obs.shape[0]}")
        if sequences.shape[2] != self.model.action_dim:
            raise ValueError(f"the model expects {self.model.action_dim}-dim actions, got {sequences.shape[2]}")
        c, h, _ = sequences.shape
        p = self.num_particles
        n = c * p
        state = np.broadcast_to(obs, (n, obs.shape[0])).copy()
        # Particle-major rows: row r is particle r // C of candidate r % C, so that the rows of one member form one
        # contiguous block (the model then runs each member on its block without regrouping).
        actions = np.tile(sequences, (p, 1, 1))
        members = np.repeat((np.arange(p) * self.model.num_elites) // p, c)
        total = np.zeros(n)
        alive = np.ones(n, dtype=bool)
        broken = np.zeros(n, dtype=bool)
        weight = 1.0
        for t in range(h):
            action = actions[:, t]
            if self.propagation == "expectation":
                step = self.model.predict_expected(state, action)
            else:
                if self.propagation == "ts1":
                    members = rng.integers(0, self.model.num_elites, size=n)
                step = self.model.predict_members(state, action, members, rng, deterministic=not self.sample_noise)
            next_obs = np.asarray(step.next_obs, dtype=np.float64)
            finite = np.isfinite(next_obs).all(axis=1)
            if self.reward_fn is not None:
                reward = np.asarray(self.reward_fn(state, action, next_obs), dtype=np.float64).reshape(-1)
            else:
                reward = np.asarray(step.reward, dtype=np.float64).reshape(-1)
            finite &= np.isfinite(reward)
            broken |= alive & ~finite
            next_obs = np.where(finite[:, None], next_obs, state)
            total += weight * np.where(alive & finite, reward, 0.0)
            alive &= finite & ~self._terminated(state, action, next_obs, step.terminated_prob)
            weight *= self.discount
            state = next_obs
            if not alive.any():
                break
        total = np.where(broken, NONFINITE_RETURN, total)
        return total.reshape(p, c).mean(axis=0)

    def _terminated(self, obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray, prob: Any) -> np.ndarray:
        if self.termination_fn is not None:
            return np.asarray(self.termination_fn(obs, action, next_obs), dtype=bool).reshape(-1)
        if prob is not None:
            return np.asarray(prob).reshape(-1) > 0.5
        return np.zeros(obs.shape[0], dtype=bool)
