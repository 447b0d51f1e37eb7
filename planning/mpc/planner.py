"""Receding-horizon control: plan an action sequence in the model, apply its first action, re-plan next step.

:class:`MPCPlanner` turns an :class:`~planning.mpc.optimizers.ActionSequenceOptimizer` and a
:class:`~planning.mpc.trajectories.TrajectoryEvaluator` into a policy. Each call to :meth:`MPCPlanner.act`
optimizes a sequence of ``horizon`` actions from the current state, warm-started with the previous plan shifted by
one step (its tail padded with the middle of the action range), as PETS and mbrl-lib do, and returns the first
action. The horizon may change between calls (a controller decision, ``planning.mpc.pets``); the kept plan is cut or
padded to the new length. Every call's wall time is recorded (:attr:`MPCPlanner.latencies`). The kept plan is the
planner's only state besides its generator: :meth:`MPCPlanner.state_dict` saves it, so a resumed run warm-starts its
next step exactly as the uninterrupted one would.

A plan is float32 torch from the observation to the chosen sequence (the evaluator's members gathered once per plan,
the optimizer's samples and the model's noise drawn from one CPU ``torch.Generator``); only the first action comes
back as numpy.
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
        generator: CPU generator for the optimizer's samples and the evaluator's particles (see
            :func:`planner_generator` to seed one from integers).

    Attributes:
        latencies: Wall seconds of every :meth:`act` call.
    """

    def __init__(
        self,
        evaluator: TrajectoryEvaluator,
        optimizer: ActionSequenceOptimizer,
        horizon: int,
        generator: torch.Generator,
    ) -> None:
        model_dim = int(evaluator.model.action_dim)
        if model_dim != optimizer.action_dim:
            raise ValueError(
                f"the optimizer plans {optimizer.action_dim}-dim actions but the model takes {model_dim}-dim ones"
            )
        self.evaluator = evaluator
        self.optimizer = optimizer
        self.generator = generator
        self._horizon = 0
        self.horizon = horizon
        self._plan: torch.Tensor | None = None
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
    def middle(self) -> torch.Tensor:
        """The middle of the action range, ``[act_dim]`` float32 (the padding of a shifted plan)."""
        return torch.as_tensor((self.optimizer.lower + self.optimizer.upper) / 2.0, dtype=torch.float32)

    def reset(self) -> None:
        """Forget the kept plan (at the start of an episode)."""
        self._plan = None

    def initial_plan(self) -> torch.Tensor:
        """The warm start ``[horizon, act_dim]``: the kept plan shifted by one step, or the middle of the range."""
        pad = self.middle.expand(self.horizon, self.optimizer.action_dim)
        if self._plan is None:
            return pad.clone()
        shifted = self._plan[1 : 1 + self.horizon].cpu()
        return torch.cat([shifted, pad[shifted.shape[0] :]], dim=0)

    def plan(self, obs: np.ndarray) -> torch.Tensor:
        """Optimize and keep a sequence ``[horizon, act_dim]`` from ``obs`` (without the latency bookkeeping)."""
        # Inference mode: nothing here is differentiated, and skipping autograd's bookkeeping takes a measurable
        # share off each of a plan's thousands of small tensor operations.
        with torch.inference_mode():
            objective = self.evaluator.objective(obs, self.generator)
            plan = self.optimizer.optimize(objective, self.initial_plan(), self.generator)
        # A plain tensor (not an inference tensor), so callers may use it anywhere.
        self._plan = plan.clone()
        return self._plan

    def act(self, obs: np.ndarray) -> np.ndarray:
        """The first action ``[act_dim]`` (float32 numpy) of a fresh plan from ``obs``."""
        started = time.perf_counter()
        action = self.plan(obs)[0].cpu().numpy().astype(np.float32)
        self.latencies.append(time.perf_counter() - started)
        return action

    def state_dict(self) -> dict[str, Any]:
        """The kept plan (``None`` at the start of an episode) as a tensor; the generator is saved by its owner."""
        return {"plan": None if self._plan is None else self._plan.detach().cpu().clone()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output: the next :meth:`act` warm-starts from the saved plan."""
        plan = state["plan"]
        self._plan = None if plan is None else torch.as_tensor(plan, dtype=torch.float32).clone()


def planner_generator(*seed: int) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded from a tuple of integers (through numpy's ``SeedSequence``, so that nearby
    tuples such as ``(seed, 10_000, 0)`` and ``(seed, 10_000, 1)`` give unrelated streams)."""
    state = np.random.SeedSequence(list(seed)).generate_state(2, np.uint32)
    return torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))
