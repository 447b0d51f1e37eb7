"""Receding-horizon control: plan an action sequence in the model, apply its first action, re-plan next step.

:class:`MPCPlanner` turns an :class:`~planning.mpc.optimizers.ActionSequenceOptimizer` and a
:class:`~planning.mpc.trajectories.TrajectoryEvaluator` into a policy. Each call to :meth:`MPCPlanner.act`
optimizes a sequence of ``horizon`` actions from the current state, warm-started with the previous plan shifted by
one step (its tail padded with the middle of the action range), as PETS and mbrl-lib do, and returns the first
action. The horizon may change between calls (a controller decision, ``planning.mpc.pets``); the kept plan is cut or
padded to the new length. Every call's wall time is recorded (:attr:`MPCPlanner.latencies`). The kept plan is the
planner's only state besides its generator: :meth:`MPCPlanner.state_dict` saves it, so a resumed run warm-starts its
next step exactly as the uninterrupted one would.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from planning.mpc.optimizers import ActionSequenceOptimizer
from planning.mpc.trajectories import TrajectoryEvaluator


class MPCPlanner:
    """A model-predictive controller (see the module docstring).

    Args:
        evaluator: Scores candidate sequences in the model.
        optimizer: Chooses the sequence (CEM or MPPI); its bounds are the action bounds.
        horizon: Planning horizon ``H >= 1`` in env steps.
        rng: Generator for the optimizer's samples and the evaluator's particles.

    Attributes:
        latencies: Wall seconds of every :meth:`act` call.
    """

    def __init__(
        self,
        evaluator: TrajectoryEvaluator,
        optimizer: ActionSequenceOptimizer,
        horizon: int,
        rng: np.random.Generator,
    ) -> None:
        model_dim = int(evaluator.model.action_dim)
        if model_dim != optimizer.action_dim:
            raise ValueError(
                f"the optimizer plans {optimizer.action_dim}-dim actions but the model takes {model_dim}-dim ones"
            )
        self.evaluator = evaluator
        self.optimizer = optimizer
        self.rng = rng
        self._horizon = 0
        self.horizon = horizon
        self._plan: np.ndarray | None = None
        self.latencies: list[float] = []

    @property
    def horizon(self) -> int:
        """The planning horizon in env steps."""
        return self._horizon

    @horizon.setter
    def horizon(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 1:
            raise ValueError(f"the planning horizon must be an int >= 1, got {value!r}")
        self._horizon = int(value)

    @property
    def middle(self) -> np.ndarray:
        """The middle of the action range, ``[act_dim]`` (the padding of a shifted plan)."""
        return (self.optimizer.lower + self.optimizer.upper) / 2.0

    def reset(self) -> None:
        """Forget the kept plan (at the start of an episode)."""
        self._plan = None

    def initial_plan(self) -> np.ndarray:
        """The warm start ``[horizon, act_dim]``: the kept plan shifted by one step, or the middle of the range."""
        pad = np.broadcast_to(self.middle, (self.horizon, self.optimizer.action_dim))
        if self._plan is None:
            return pad.copy()
        shifted = self._plan[1 : 1 + self.horizon]
        return np.concatenate([shifted, pad[shifted.shape[0] :]], axis=0)

    def plan(self, obs: np.ndarray) -> np.ndarray:
        """Optimize and keep a sequence ``[horizon, act_dim]`` from ``obs`` (without the latency bookkeeping)."""
        obs = np.asarray(obs, dtype=np.float64).reshape(-1)
        plan = self.optimizer.optimize(
            lambda seqs: self.evaluator.returns(obs, seqs, self.rng), self.initial_plan(), self.rng
        )
        self._plan = plan
        return plan

    def act(self, obs: np.ndarray) -> np.ndarray:
        """The first action ``[act_dim]`` (float32) of a fresh plan from ``obs``."""
        started = time.perf_counter()
        action = self.plan(obs)[0].astype(np.float32)
        self.latencies.append(time.perf_counter() - started)
        return action

    def state_dict(self) -> dict[str, Any]:
        """The kept plan (``None`` at the start of an episode) as a tensor; the generator is saved by its owner."""
        return {"plan": None if self._plan is None else torch.as_tensor(self._plan).clone()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output: the next :meth:`act` warm-starts from the saved plan."""
        plan = state["plan"]
        self._plan = None if plan is None else plan.numpy().copy()
