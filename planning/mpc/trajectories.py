"""Scoring action sequences in a learned ensemble: particles, trajectory sampling and known rewards (PETS).

:class:`TrajectoryEvaluator` simulates every candidate sequence from the current state with ``num_particles``
particles and returns the mean of their returns, in one batched model call per step for all candidates and particles
together (``P x C`` rows), in float32 torch. How a particle moves through the ensemble is the *propagation* of Chua
et al. 2018 (sec. 5):

* ``"tsinf"`` (TS-inf): each particle follows one elite for the whole horizon; particle ``p`` of ``P`` of every
  candidate uses elite ``floor(p K / P)`` (the particles spread evenly over the ``K`` elites), so all candidates are
  scored against the same members (a common-random-numbers comparison);
* ``"ts1"`` (TS-1): each particle draws a fresh elite at every step;
* ``"expectation"``: one particle moves by the elites' mean prediction, without sampling (PETS's "E" baseline).

The members' weights are gathered once per plan (:meth:`TrajectoryEvaluator.objective`, a
:class:`~mbrl.models.MemberPropagator`), and every candidate of every optimizer iteration is scored on them. With
``sample_noise`` the members' Gaussians are sampled (aleatoric noise, PETS's default) from the planner's
``torch.Generator``; without it each member moves by its mean, which makes the scores a deterministic function of the
sequences. Rewards come from a known reward function of ``(obs, action, next_obs)`` (``mbrl.rewards``, numpy, called
once per step on all rows) or, when none is given, from the model's own reward output. A particle that terminates
collects no reward after the terminating step; a non-finite prediction scores the particle :data:`NONFINITE_RETURN`
(as mbrl-lib does), so such a sequence is never chosen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch

from mbrl.rewards import RewardFn
from mbrl.termination import TerminationFn, never, takes_tensors

PROPAGATIONS = ("tsinf", "ts1", "expectation")
#: Return given to a particle whose prediction became NaN or infinite.
NONFINITE_RETURN = -1e10

#: Scores candidate sequences ``[C, H, act_dim]`` (float32) with one value each, ``[C]`` (higher is better).
Objective = Callable[[torch.Tensor], torch.Tensor]


class Propagator(Protocol):
    """One model step of many rows, slot by slot (``mbrl.models.MemberPropagator`` provides it)."""

    device: torch.device

    def forward(
        self, state: torch.Tensor, action: torch.Tensor, spread: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Each slot's Gaussian ``(mean, std)``, ``[S, N, obs_dim + 1]`` in environment units (``std`` only with
        ``spread``)."""

    def step(
        self, state: torch.Tensor, action: torch.Tensor, noise: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(next_state [S, N, obs_dim], reward [S, N])`` of every row through its slot's member."""

    def terminated_prob(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor | None:
        """Learned termination probability ``[S, N]``, or ``None`` without a termination head."""


class EnsemblePredictor(Protocol):
    """What the evaluator needs from a world model (``mbrl.models.DynamicsModel`` provides it)."""

    obs_dim: int
    action_dim: int

    @property
    def num_elites(self) -> int:
        """Number of members particles can follow."""

    def propagator(self, members: Any = None) -> Propagator:
        """The given elites' weights (``[S]`` elite indices, ``None``: every elite once), frozen for one plan."""


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

    def objective(self, obs: np.ndarray, generator: torch.Generator) -> Objective:
        """The scoring function of one plan from ``obs``: the members' weights are gathered here, once.

        Args:
            obs: ``[obs_dim]`` the state to plan from.
            generator: CPU generator for member draws (TS-1) and sampling noise.

        Returns:
            ``fn(sequences [C, H, act_dim]) -> [C]`` mean returns (float32, on the model's device).
        """
        obs = np.asarray(obs, dtype=np.float64).reshape(-1)
        if obs.shape[0] != self.model.obs_dim:
            raise ValueError(f"the model expects {self.model.obs_dim}-dim observations, got {obs.shape[0]}")
        k, p = self.model.num_elites, self.num_particles
        if self.propagation == "tsinf":
            # Slot p is particle p, on elite floor(p K / P): the weights of a member filling several slots are
            # repeated, which keeps every step one batched matmul whatever P and K.
            propagator = self.model.propagator((np.arange(p) * k) // p)
        else:
            propagator = self.model.propagator(None)
        start = torch.as_tensor(obs, dtype=torch.float32, device=propagator.device)

        def score(sequences: torch.Tensor) -> torch.Tensor:
            return self._returns(propagator, start, sequences, generator)

        return score

    def returns(self, obs: np.ndarray, sequences: np.ndarray | torch.Tensor, generator: torch.Generator) -> np.ndarray:
        """Mean return over particles of each candidate sequence (one plan's :meth:`objective`, called once).

        Args:
            obs: ``[obs_dim]`` the state to plan from.
            sequences: ``[C, H, act_dim]`` candidate action sequences (already inside the action bounds).
            generator: CPU generator for member draws (TS-1) and sampling noise.

        Returns:
            ``[C]`` mean returns.
        """
        seqs = torch.as_tensor(np.asarray(sequences), dtype=torch.float32)
        return self.objective(obs, generator)(seqs).double().cpu().numpy()

    def _returns(
        self, prop: Propagator, obs: torch.Tensor, sequences: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        if sequences.dim() != 3:
            raise ValueError(f"sequences must have shape [C, H, act_dim], got {tuple(sequences.shape)}")
        if sequences.shape[2] != self.model.action_dim:
            raise ValueError(f"the model expects {self.model.action_dim}-dim actions, got {sequences.shape[2]}")
        sequences = sequences.to(device=prop.device, dtype=torch.float32)
        c, h, act_dim = sequences.shape
        p, k, out = self.num_particles, self.model.num_elites, self.model.obs_dim + 1
        # The whole horizon's random numbers in one call each (fewer, larger draws than one per step).
        noise = None
        if self.sample_noise:
            noise = torch.randn((h, p, c, out), generator=generator).to(prop.device)
        picks = None
        if self.propagation == "ts1":
            picks = torch.randint(0, k, (h, p * c), generator=generator).to(prop.device)
        # Rows [P, C]: particle-major, so that slot p of the propagator is particle p. The loop only moves the
        # particles; rewards, finiteness and the alive masks are computed once on the whole trajectory afterwards
        # (one call each instead of one per step: the per-step cost is then the model's alone). Every value is the
        # one a step-by-step evaluation computes: the element-wise operations do not depend on the batch's shape.
        state = obs.expand(p, c, obs.shape[0])
        actions = sequences.transpose(0, 1).unsqueeze(1).expand(h, p, c, act_dim)  # [H, P, C, act_dim], no copy
        states, model_rewards, dones = [state], [], []
        can_end = self.termination_fn is not never
        ended: torch.Tensor | None = None
        for t in range(h):
            action = actions[t]
            step_noise = None if noise is None else noise[t]
            if self.propagation == "tsinf":
                next_obs, reward = prop.step(state, action, step_noise)
                prob = prop.terminated_prob(state, action) if self.termination_fn is None else None
            else:
                next_obs, reward, prob = self._mixed_step(prop, state, action, step_noise, picks, t)
            states.append(next_obs)
            model_rewards.append(reward)
            if can_end:
                done = self._terminated(state, action, next_obs, prob)
                if done is not None:
                    dones.append(done)
                    # Once every particle has ended, later steps cannot add anything: stop simulating.
                    ended = done if ended is None else ended | done
                    if bool(ended.all()):
                        break
            state = next_obs
        return self._mean_returns(actions, states, model_rewards, dones)

    def _mean_returns(
        self,
        actions: torch.Tensor,
        states: list[torch.Tensor],
        model_rewards: list[torch.Tensor],
        dones: list[torch.Tensor],
    ) -> torch.Tensor:
        """Each candidate's mean return ``[C]`` over its particles from a simulated trajectory.

        Args:
            actions: ``[H, P, C, act_dim]`` the candidates' actions, step-major.
            states: ``T + 1`` states ``[P, C, obs_dim]`` (the start, then one per simulated step, ``T <= H``).
            model_rewards: ``T`` model rewards ``[P, C]`` (used without a known reward function).
            dones: ``T`` termination flags ``[P, C]``, or none where nothing can end.
        """
        steps = len(states) - 1
        trajectory = torch.stack(states)  # [T + 1, P, C, obs_dim]
        prev, nxt = trajectory[:-1], trajectory[1:]
        if self.reward_fn is not None:
            reward = self._known(self.reward_fn, prev, actions[:steps], nxt).float()
        else:
            reward = torch.stack(model_rewards)
        # Two sums tell whether every value is finite (a NaN or infinity makes its sum non-finite; an overflow only
        # sends us down the exact path below), which spares the masks in the common case.
        if not dones and bool(torch.isfinite(nxt.sum() + reward.sum())):
            return self._sum_steps(reward).mean(dim=0)
        finite = torch.isfinite(nxt).all(dim=-1) & torch.isfinite(reward)  # [T, P, C]
        ok = finite if not dones else finite & ~torch.stack(dones)
        # A particle collects step t's reward while every earlier step was finite and did not end it, and t's own is
        # finite; one whose prediction broke scores NONFINITE_RETURN (its later NaN values are masked out).
        alive = torch.ones_like(ok)
        alive[1:] = (~ok[:-1]).cumsum(dim=0) == 0
        broken = (alive & ~finite).any(dim=0)
        total = self._sum_steps(torch.where(alive & finite, reward, 0.0))
        return torch.where(broken, NONFINITE_RETURN, total).mean(dim=0)

    def _sum_steps(self, collected: torch.Tensor) -> torch.Tensor:
        """The discounted sum over steps of ``collected`` ``[T, P, C]`` -> ``[P, C]``."""
        steps = collected.shape[0]
        if self.discount != 1.0:
            weights = [1.0]
            for _ in range(steps - 1):
                weights.append(weights[-1] * self.discount)
            scale = torch.tensor(weights, dtype=torch.float32, device=collected.device)
            collected = collected * scale.reshape(-1, 1, 1)
        # Summed step by step, in the order a step-by-step evaluation adds them (float32 addition is not associative).
        total = torch.zeros(collected.shape[1:], device=collected.device)
        for t in range(steps):
            total += collected[t]
        return total

    def _mixed_step(
        self,
        prop: Propagator,
        state: torch.Tensor,
        action: torch.Tensor,
        noise: torch.Tensor | None,
        picks: torch.Tensor | None,
        t: int,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """TS-1 (a fresh elite per row) or the expectation: every elite on every row, then one picked or averaged."""
        p, c, d = state.shape
        k = self.model.num_elites
        rows_state = state.reshape(1, p * c, d).expand(k, -1, -1)
        rows_action = action.reshape(1, p * c, -1).expand(k, -1, -1)
        mean, std = prop.forward(rows_state, rows_action, spread=noise is not None)
        probs = prop.terminated_prob(rows_state, rows_action) if self.termination_fn is None else None
        if picks is None:
            # The expectation: the elites' average prediction (their means are in environment units already).
            y = mean.mean(dim=0)
            prob = None if probs is None else probs.mean(dim=0)
        else:
            pick = picks[t].reshape(1, -1, 1)
            y = mean.gather(0, pick.expand(1, -1, mean.shape[-1]))[0]
            if noise is not None and std is not None:
                spread = std.gather(0, pick.expand(1, -1, std.shape[-1]))[0]
                y = torch.addcmul(y, spread, noise.reshape(p * c, -1))
            prob = None if probs is None else probs.gather(0, pick[..., 0])[0]
        y = y.reshape(p, c, -1)
        return state + y[..., 1:], y[..., 0], None if prob is None else prob.reshape(p, c)

    @staticmethod
    def _known(
        fn: Callable[..., Any], state: torch.Tensor, action: torch.Tensor, next_obs: torch.Tensor
    ) -> torch.Tensor:
        """A known reward or termination function on ``[P, C, d]`` tensors: directly where it takes tensors (the
        ``mbrl`` functions), else on numpy rows."""
        if takes_tensors(fn):
            return torch.as_tensor(fn(state, action, next_obs))
        value = np.asarray(fn(*_as_rows(state, action, next_obs)))
        return torch.as_tensor(value).reshape(state.shape[:-1]).to(state.device)

    def _terminated(
        self, state: torch.Tensor, action: torch.Tensor, next_obs: torch.Tensor, prob: torch.Tensor | None
    ) -> torch.Tensor | None:
        """Which particles this step ends, ``[P, C]`` bool; ``None`` where nothing can end (no check needed)."""
        if self.termination_fn is never:
            return None
        if self.termination_fn is not None:
            return self._known(self.termination_fn, state, action, next_obs).bool()
        return None if prob is None else prob > 0.5


def _as_rows(*tensors: torch.Tensor) -> list[np.ndarray]:
    """``[P, C, d]`` tensors as ``[P * C, d]`` numpy arrays: the batch layout of ``mbrl.rewards`` functions."""
    return [t.reshape(-1, t.shape[-1]).cpu().numpy() for t in tensors]
