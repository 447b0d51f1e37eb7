"""The one owner of the model-rollout length: ask the controller, apply the decision, log it, save its state.

Every model-based learner in rolloutlab is cut into *decision points* (Dyna-DQN's phases, MBPO's epochs). At each one
:class:`RolloutLengthDriver` builds the feedback a controller sees (the learner's last report plus the progress keys
below), asks each run's controller for ``K``, checks and caps it, records the schedule, logs it under ``meta/`` and
hands it to the learner. The CLI, the meta-MDP, the arm evaluation and the experiments all go through it, so a
controller sees the same feedback vocabulary whichever learner or caller drives it, and a run resumed from a
checkpoint (:meth:`RolloutLengthDriver.state_dict`) decides as the uninterrupted run would have.

Feedback vocabulary (:data:`FEEDBACK_KEYS`, reported by MBPO and Dyna-DQN alike; NaN where not yet known):

* ``mean_return``: mean greedy / deterministic return of the latest evaluation.
* ``model_return_error`` / ``model_length_error``: return and length of model episodes from the evaluation's start
  states under the same policy, minus the real ones (signed; Bhatia, Thomas & Zilberstein 2022, section 4). Model
  episodes stop at the real env's step limit, read off its ``TimeLimit`` wrapper when it has no spec
  (:func:`mbrl.algorithms.base.episode_step_limit`): model episodes that ran longer than the real ones would make even
  an exact model's error a large negative number. With an exact model both are 0 up to the float32 rounding of the
  start state, which the closed loop can amplify: the greedy policy may act differently on states 1e-7 apart, and on
  chaotic dynamics the episodes then part. They measure the policy's sensitivity as much as the model; the open-loop
  keys below measure the model alone.
* ``model_holdout_loss`` / ``model_holdout_mse``: world-model holdout NLL and MSE of the latest fit.
* ``disagreement_mean``: mean ensemble disagreement along those model episodes.
* ``disagreement_at_k``: the same over their first ``max(K, 1)`` steps, the horizon the current ``K`` uses.
* ``td_error_mean``: mean absolute one-step TD error of the value function against its target network on
  :data:`TD_SAMPLE` real transitions (Dyna: the Q-network; MBPO: SAC's first critic, bootstrapping with the
  deterministic action, no entropy term), drawn from its own generator so that training is untouched.
* ``env_steps``, ``budget_fraction``: interaction used so far.

Measured on the run's own training data only (real transitions, imagined rollouts, training episodes; never an
evaluation episode): :data:`TRAINING_DATA_KEYS`, reported by Dyna-DQN (:mod:`mbrl.algorithms.dyna.feedback`), not by
MBPO:

* ``model_one_step_rmse``: one-step next-observation RMSE on the run's latest real transitions (Dyna-DQN with
  ``controller_feedback="training"``).
* ``model_rmse_h1``, ``model_rmse_h2``, ..., ``model_rmse_h32``: open-loop ``h``-step next-observation RMSE on
  segments of the latest real transitions inside one training episode, the model fed the actions really taken
  (:func:`mbrl.model_error.open_loop_rmse`; NaN for ``h`` above the learner's ``k_cap``).
* ``model_rmse_at_k``: their mean over ``h = 1 .. max(K, 1)``, the horizons the current ``K`` uses.
* ``rollout_disagreement_h1``, ..., ``rollout_disagreement_h32``: mean ensemble disagreement at step ``h`` of the
  phase's imagined rollouts (NaN where none reached step ``h``; an exact simulator reports 0).
* ``td_error_imagined``: ``td_error_mean`` on the imagined transitions the run trains on (NaN without any).
* ``train_return``: mean return of the training episodes finished in the phase (NaN if none);
  ``train_return_trend``: its change since the previous phase.

Progress keys added by the driver at each decision: ``epoch`` (decision index from 0), ``budget_fraction`` and
``current_length`` (the ``K`` in force before this decision).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
from stable_baselines3.common.logger import Logger

from mbrl.model_error import RMSE_HORIZONS
from meta.control import Controller, RolloutLengthController, UncertaintyTruncation

#: Keys every model-based learner reports at each decision point (see the module docstring).
FEEDBACK_KEYS: tuple[str, ...] = (
    "mean_return",
    "model_return_error",
    "model_length_error",
    "model_holdout_loss",
    "model_holdout_mse",
    "disagreement_mean",
    "disagreement_at_k",
    "td_error_mean",
    "env_steps",
    "budget_fraction",
)
#: Keys measured on the run's own training data only (see the module docstring), reported by Dyna-DQN.
TRAINING_DATA_KEYS: tuple[str, ...] = (
    "model_one_step_rmse",
    *(f"model_rmse_h{h}" for h in RMSE_HORIZONS),
    "model_rmse_at_k",
    *(f"rollout_disagreement_h{h}" for h in RMSE_HORIZONS),
    "td_error_imagined",
    "train_return",
    "train_return_trend",
)
#: Real transitions behind the ``td_error_mean`` feedback (per run).
TD_SAMPLE = 1_000


class RolloutTruncator(Protocol):
    """Per-step truncation of imagined rollouts (:class:`meta.control.UncertaintyTruncation` provides it)."""

    def keep(self, step: int, disagreement: Any) -> Any:
        """``[N]`` bool: which rollouts may continue, given their disagreement at ``step`` (step 0 calibrates)."""


class PhasedLearner(Protocol):
    """Runs advanced one decision point at a time (``mbrl.algorithms.dyna.BatchedDynaDQN``, the meta-MDP's fakes)."""

    def run_phase(
        self, ks: Sequence[int], truncators: Sequence[RolloutTruncator | None] | None = None
    ) -> list[dict[str, float]]:
        """Advance every run by one phase with rollout length ``ks[i]``; one feedback dict per run."""


class BudgetedLearner(PhasedLearner, Protocol):
    """A :class:`PhasedLearner` that knows its interaction budget (what :meth:`RolloutLengthDriver.run` needs)."""

    budget: int
    steps_done: int

    @property
    def done(self) -> bool:
        """Whether the interaction budget is used up."""


def truncator_of(controller: Controller) -> RolloutTruncator | None:
    """The per-step rollout truncation a controller asks for, if any (the one place that detects it)."""
    return controller if isinstance(controller, UncertaintyTruncation) else None


class RolloutLengthDriver:
    """Asks one controller per run for the rollout length at every decision point and applies it.

    Args:
        controllers: One rollout-length controller per run.
        k_cap: Largest rollout length; larger decisions are capped (``None``: no cap).
        k_init: ``current_length`` shown at the first decision.
        logger: SB3 logger for ``meta/`` keys (``None``: no logging).

    Attributes:
        ks: The rollout length in force per run.
        schedules: Every decision so far, per run.
        feedback: The learner's last report per run (what the next decision sees).
    """

    def __init__(
        self,
        controllers: Sequence[Controller],
        k_cap: int | None = None,
        k_init: int = 0,
        logger: Logger | None = None,
    ) -> None:
        if not controllers:
            raise ValueError("need at least one controller")
        for c in controllers:
            if not isinstance(c, RolloutLengthController):
                raise TypeError(f"{c!r} is not a rollout-length controller (meta.control.RolloutLengthController)")
        self.controllers = list(controllers)
        self.k_cap = k_cap
        self.logger = logger
        self.ks = [int(k_init)] * len(self.controllers)
        self.schedules: list[list[int]] = [[] for _ in self.controllers]
        self.feedback: list[dict[str, Any]] = [{} for _ in self.controllers]
        for c in self.controllers:
            c.reset()

    @property
    def num_runs(self) -> int:
        """Number of runs (controllers)."""
        return len(self.controllers)

    @property
    def truncators(self) -> list[RolloutTruncator | None]:
        """Per-run per-step truncation, for the learner's imagined rollouts."""
        return [truncator_of(c) for c in self.controllers]

    def decide(
        self, budget_fraction: float, feedback: Sequence[Mapping[str, Any]] | None = None, epoch: int | None = None
    ) -> list[int]:
        """One decision per run: ask each controller, cap, record and log the result.

        Args:
            budget_fraction: Fraction of the interaction budget used so far.
            feedback: The learner's latest report per run (default: the one :meth:`run_phase` stored).
            epoch: Decision index (default: the number of decisions made so far).

        Returns:
            The rollout length per run, now in force (:attr:`ks`).
        """
        if feedback is not None:
            if len(feedback) != self.num_runs:
                raise ValueError(f"need {self.num_runs} feedback dicts, got {len(feedback)}")
            self.feedback = [dict(fb) for fb in feedback]
        index = len(self.schedules[0]) if epoch is None else int(epoch)
        ks = []
        for i, (controller, fb) in enumerate(zip(self.controllers, self.feedback, strict=True)):
            progress = {"epoch": index, "budget_fraction": float(budget_fraction), "current_length": self.ks[i]}
            k = controller.decide({**fb, **progress})
            if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or int(k) < 0:
                raise ValueError(f"{controller!r} returned {k!r}; a rollout length must be an int >= 0")
            ks.append(int(k) if self.k_cap is None else min(int(k), self.k_cap))
        self.ks = ks
        for schedule, k in zip(self.schedules, ks, strict=True):
            schedule.append(k)
        if self.logger is not None:
            self.logger.record("meta/rollout_length", float(np.mean(ks)))
            self.logger.record("meta/epoch", index)
        return ks

    def run_phase(self, learner: PhasedLearner, budget_fraction: float | None = None) -> list[dict[str, float]]:
        """Decide ``K`` for every run from its last feedback, then advance the learner by one phase.

        Args:
            learner: The runs to advance (one per controller).
            budget_fraction: Fraction of the budget used before this phase (default ``steps_done / budget``).

        Returns:
            The learner's feedback per run (also kept for the next decision).
        """
        if budget_fraction is None:
            budget = getattr(learner, "budget", None)
            if budget is None:
                raise TypeError(f"{type(learner).__name__} has no budget: pass budget_fraction explicitly")
            budget_fraction = learner.steps_done / budget  # type: ignore[attr-defined]
        ks = self.decide(budget_fraction)
        truncators = self.truncators
        feedback = (
            learner.run_phase(ks, truncators) if any(t is not None for t in truncators) else learner.run_phase(ks)
        )
        if len(feedback) != self.num_runs:
            raise ValueError(f"learner returned {len(feedback)} feedback dicts for {self.num_runs} controllers")
        self.feedback = [dict(fb) for fb in feedback]
        if self.logger is not None:
            self._log_feedback(feedback)
        return feedback

    def run(
        self, learner: BudgetedLearner, on_phase: Callable[[list[dict[str, float]]], None] | None = None
    ) -> list[dict[str, float]]:
        """Run phases until the learner's budget is used up; ``on_phase(feedback)`` after each (e.g. checkpoint)."""
        feedback = self.feedback
        while not learner.done:
            feedback = self.run_phase(learner)
            if on_phase is not None:
                on_phase(feedback)
        return feedback

    def _log_feedback(self, feedback: Sequence[Mapping[str, float]]) -> None:
        assert self.logger is not None
        for key in (*FEEDBACK_KEYS, *TRAINING_DATA_KEYS, "rollout_disagreement_mean", "model_transitions"):
            values = [float(fb[key]) for fb in feedback if key in fb and math.isfinite(float(fb[key]))]
            if values:
                prefix = "model/" if key.startswith("model_") else "meta/"
                name = key.removeprefix("model_") if prefix == "model/" else key
                self.logger.record(f"{prefix}{name}", float(np.mean(values)))

    def state_dict(self) -> dict[str, Any]:
        """Controller states, lengths in force, schedules and the last feedback (plain data)."""
        return {
            "controllers": [c.state_dict() for c in self.controllers],
            "ks": list(self.ks),
            "schedules": [list(s) for s in self.schedules],
            "feedback": [{k: _plain(v) for k, v in fb.items()} for fb in self.feedback],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output (same number of runs)."""
        if len(state["controllers"]) != self.num_runs:
            raise ValueError(f"snapshot has {len(state['controllers'])} controllers, driver has {self.num_runs}")
        for controller, saved in zip(self.controllers, state["controllers"], strict=True):
            controller.load_state_dict(saved)
        self.ks = [int(k) for k in state["ks"]]
        self.schedules = [[int(k) for k in s] for s in state["schedules"]]
        self.feedback = [{str(k): _plain(v) for k, v in fb.items()} for fb in state["feedback"]]


def _plain(value: Any) -> float | list[float]:
    """A feedback value as checkpoint-safe plain data: a float, or a list of floats for per-step values."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return [float(v) for v in np.asarray(value, dtype=np.float64).reshape(-1)]
    return float(value)
