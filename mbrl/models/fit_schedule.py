"""The bookkeeping of one world-model fit: its data split, and when it scores the holdout and stops.

:class:`FitData` is what a fit trains and scores on (the standardized splits and each member's bootstrap rows);
:class:`FitSchedule` counts a fit's steps and epochs and applies the early-stopping rule of
:class:`~mbrl.models.dynamics.ModelConfig` (score the holdout at the end of an epoch once enough steps have passed;
stop once no member has improved for ``patience`` epochs and ``patience_steps`` steps, never before
``min_train_steps``; ``max_epochs`` and ``max_train_steps`` are hard caps). :meth:`DynamicsModel.fit
<mbrl.models.dynamics.DynamicsModel.fit>` runs one schedule; :func:`mbrl.models.run_batched.fit_run_batched` runs one
per run, so that a run fitted beside others stops where it would have stopped alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["FitData", "FitSchedule"]


@dataclass
class FitData:
    """One fit's data, standardized with the statistics of its training split.

    Attributes:
        x_train: ``[n_train, in_dim]`` float32 inputs of the training split.
        y_train: ``[n_train, out_dim]`` float32 targets (reward, state change).
        t_train: ``[n_train]`` float32 termination flags.
        x_holdout, y_holdout, t_holdout: The holdout split alike (the training split where there is no holdout).
        member_rows: ``[E, n_train]`` each member's rows of the training split (a bootstrap resample, or every row);
            every epoch shuffles each member's row order.
        num_holdout: Rows held out (0: too few rows to hold any out).
        restandardize: Rebuilds ``(x, y, t)`` of the holdout (or, without one, the training split) with the model's
            current normalizers, for scoring after a fallback to the last good model.
    """

    x_train: torch.Tensor
    y_train: torch.Tensor
    t_train: torch.Tensor
    x_holdout: torch.Tensor
    y_holdout: torch.Tensor
    t_holdout: torch.Tensor
    member_rows: np.ndarray
    num_holdout: int
    restandardize: Callable[[], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]

    @property
    def num_train(self) -> int:
        """Rows in the training split."""
        return int(self.x_train.shape[0])


class FitSchedule:
    """Steps, epochs and the early-stopping decisions of one fit.

    A fit asks :meth:`wants_epoch` before each epoch and :meth:`may_step` before each minibatch, calls
    :meth:`begin_step` for each step it starts and :meth:`end_epoch` after each epoch; where that returns ``True`` it
    scores the holdout and hands the per-member MSE to :meth:`scored`, which says which members improved (their
    weights are the new best) and may end the fit.

    Args:
        min_train_steps, patience, patience_steps, improvement_threshold, score_every_steps, max_epochs,
            max_train_steps: As in :class:`~mbrl.models.dynamics.ModelConfig`.
        ensemble_size: ``E``.
        device: Where the best scores live (the model's device).

    Attributes:
        epochs: Epochs finished.
        steps: Gradient steps started (a step whose loss was not finite counts).
        restored: A loss or holdout score was not finite: the fit falls back to the last good model.
        stopped: The fit is over (stopped early, capped, or restored).
        last_loss: Mean training loss over the steps before the latest score (NaN before one).
    """

    def __init__(
        self,
        *,
        min_train_steps: int,
        patience: int,
        patience_steps: int,
        improvement_threshold: float,
        score_every_steps: int,
        max_epochs: int,
        max_train_steps: int | None,
        ensemble_size: int,
        device: torch.device,
    ) -> None:
        self.min_train_steps, self.patience, self.patience_steps = min_train_steps, patience, patience_steps
        self.improvement_threshold, self.score_every_steps = improvement_threshold, score_every_steps
        self.max_epochs = max_epochs
        self.step_cap: float = math.inf if max_train_steps is None else max_train_steps
        # Fresh best scores: the warm-started weights were trained under the previous normalizer, so their score is
        # no baseline for this fit; the first epoch's holdout score is (every member "improves" on +inf).
        self.best_mse = torch.full((ensemble_size,), math.inf, device=device)
        self.epochs, self.steps, self.last_loss = 0, 0, math.nan
        self.restored, self.stopped = False, False
        self._epochs_since_improved, self._steps_since_improved = 0, 0
        # Steps and epochs since the holdout was last scored.
        self._period_epochs, self._period_steps = 0, 0

    def wants_epoch(self) -> bool:
        """Whether another epoch starts."""
        return not self.stopped and self.epochs < self.max_epochs and self.steps < self.step_cap

    def may_step(self) -> bool:
        """Whether the epoch in progress may take another step (the step cap binds mid-epoch)."""
        return self.steps < self.step_cap

    def begin_step(self) -> None:
        """Count a step about to be taken."""
        self.steps += 1
        self._period_steps += 1

    def end_epoch(self) -> bool:
        """Count a finished epoch; ``True`` where the holdout is to be scored now."""
        self.epochs += 1
        self._period_epochs += 1
        if self.restored:
            self.stopped = True
            return False
        last_epoch = self.epochs >= self.max_epochs or self.steps >= self.step_cap
        if not self.wants_epoch():
            self.stopped = True
        # A small buffer's epoch is a step or two: score once enough steps have passed.
        return self._period_steps >= self.score_every_steps or last_epoch

    def scored(self, mse: torch.Tensor, period_loss: float) -> torch.Tensor | None:
        """Take the holdout MSE per member ``[E]`` and the mean training loss since the last score.

        Returns:
            ``[E]`` bool, the members that improved (their current weights are the new best), or ``None`` where none
            did or the score is not finite (then :attr:`restored`).
        """
        if not bool(torch.isfinite(mse).all()):
            self.restored = self.stopped = True
            return None
        self.last_loss = period_loss
        # A relative improvement, written so that the first score improves on the initial +inf.
        improved = mse < self.best_mse * (1.0 - self.improvement_threshold)
        result = None
        if bool(improved.any()):
            self._epochs_since_improved, self._steps_since_improved = 0, 0
            self.best_mse = torch.where(improved, mse, self.best_mse)
            result = improved
        else:
            self._epochs_since_improved += self._period_epochs
            self._steps_since_improved += self._period_steps
            if (
                self.steps >= self.min_train_steps
                and self._epochs_since_improved >= self.patience
                and self._steps_since_improved >= self.patience_steps
            ):
                self.stopped = True
        self._period_epochs, self._period_steps = 0, 0
        return result
