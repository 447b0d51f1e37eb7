"""Optimizers over open-loop action sequences for model-predictive control: CEM and MPPI.

Both maximize an *objective* that scores a batch of candidate sequences ``[C, H, act_dim]`` with one value each
(the planner's simulated return), inside box bounds on the actions, starting from an initial mean sequence (the
warm start: the previous plan shifted by one step, :class:`planning.mpc.planner.MPCPlanner`).

* :class:`CEMOptimizer`: the cross-entropy method as PETS uses it (Chua et al. 2018, appendix; Botev et al. 2013):
  sample a Gaussian population around the mean, keep the best ``elite_fraction``, move the mean and standard
  deviation towards the elites' with momentum, and return the best sequence seen. Samples are drawn within two
  standard deviations and clipped into the box.
* :class:`MPPIOptimizer`: model-predictive path integral control (Williams et al. 2017), in the form of PDDM
  (Nagabandi et al. 2019): temporally smoothed Gaussian perturbations of the mean, averaged with weights
  ``exp((R - max R) / lambda)``; it returns the weighted mean.

Both run in float32 torch on the objective's device: sequences, noise (from a CPU ``torch.Generator``, so a seeded
plan is the same on every device), elite selection and updates never leave torch, and the only host synchronization
per iteration is CEM's best-so-far comparison.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

#: Scores candidate sequences ``[C, H, act_dim] -> [C]`` (float32 tensors; higher is better).
Objective = Callable[[torch.Tensor], torch.Tensor]


def _as_bounds(lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lo = np.asarray(lower, dtype=np.float64).reshape(-1)
    hi = np.asarray(upper, dtype=np.float64).reshape(-1)
    if lo.shape != hi.shape or lo.size == 0:
        raise ValueError(f"action bounds must be two non-empty vectors of one shape, got {lo.shape} and {hi.shape}")
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()) or np.any(hi <= lo):
        raise ValueError(f"action bounds must be finite with lower < upper, got {lo} and {hi}")
    return lo, hi


def _finite_scores(values: torch.Tensor, count: int) -> torch.Tensor:
    """The objective's values as ``[count]`` floats; NaN counts as the worst possible value."""
    values = torch.as_tensor(values).reshape(-1)
    if values.shape[0] != count:
        raise ValueError(f"the objective returned {values.shape[0]} values for {count} candidates")
    return torch.where(torch.isnan(values), -torch.inf, values)


def _noise(shape: tuple[int, ...], generator: torch.Generator, like: torch.Tensor) -> torch.Tensor:
    """Standard normal draws from the CPU ``generator``, moved to ``like``'s device."""
    return torch.randn(shape, generator=generator, dtype=torch.float32).to(like.device)


class ActionSequenceOptimizer(ABC):
    """Maximizes an :data:`Objective` over action sequences inside ``[lower, upper]`` (one vector per action dim).

    Args:
        lower: ``[act_dim]`` lower bounds.
        upper: ``[act_dim]`` upper bounds.
    """

    def __init__(self, lower: np.ndarray, upper: np.ndarray) -> None:
        self.lower, self.upper = _as_bounds(lower, upper)

    @property
    def action_dim(self) -> int:
        """Width of one action."""
        return int(self.lower.shape[0])

    def _check_initial(self, initial: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The clipped warm start (float32) and the bounds as tensors on its device."""
        initial = torch.as_tensor(initial, dtype=torch.float32)
        if initial.dim() != 2 or initial.shape[1] != self.action_dim or initial.shape[0] < 1:
            raise ValueError(
                f"initial sequence must have shape [H >= 1, {self.action_dim}], got {tuple(initial.shape)}"
            )
        lower = torch.as_tensor(self.lower, dtype=torch.float32, device=initial.device)
        upper = torch.as_tensor(self.upper, dtype=torch.float32, device=initial.device)
        return torch.clamp(initial, lower, upper), lower, upper

    @abstractmethod
    def optimize(self, objective: Objective, initial: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Return the chosen sequence ``[H, act_dim]`` (float32, ``H = len(initial)``), inside the bounds.

        Args:
            objective: Scores a batch of candidate sequences.
            initial: ``[H, act_dim]`` starting mean (the warm start), on the device the plan runs on.
            generator: CPU generator for the sampled candidates.
        """


@dataclass
class CEMConfig:
    """Cross-entropy method settings (PETS's, with a smaller population for a laptop CPU).

    Attributes:
        population: Candidate sequences sampled per iteration.
        elite_fraction: Share of the population kept as elites.
        iterations: Sampling rounds per plan.
        momentum: Weight of the previous mean and spread in each update (PETS/mbrl-lib's ``alpha``).
        initial_std_fraction: Initial standard deviation as a fraction of the action range (1/4: mbrl-lib's
            ``(upper - lower)^2 / 16`` variance).
        return_mean: Return the final mean (the elites' average, mbrl-lib's ``return_mean_elites``) instead of the
            best sample seen. Where many sequences tie (a survival reward: every candidate that stays up for the
            whole horizon scores the same), the best sample is an arbitrary one of them and the mean a smooth one.
    """

    population: int = 100
    elite_fraction: float = 0.1
    iterations: int = 3
    momentum: float = 0.1
    initial_std_fraction: float = 0.25
    return_mean: bool = False


class CEMOptimizer(ActionSequenceOptimizer):
    """The cross-entropy method over action sequences (see the module docstring).

    Args:
        lower: ``[act_dim]`` lower bounds.
        upper: ``[act_dim]`` upper bounds.
        cfg: Population, elites, iterations and momentum.
    """

    def __init__(self, lower: np.ndarray, upper: np.ndarray, cfg: CEMConfig | None = None) -> None:
        super().__init__(lower, upper)
        self.cfg = cfg if cfg is not None else CEMConfig()
        if self.cfg.population < 2 or self.cfg.iterations < 1:
            raise ValueError(f"CEM needs population >= 2 and iterations >= 1, got {self.cfg}")
        if not 0.0 < self.cfg.elite_fraction <= 1.0 or not 0.0 <= self.cfg.momentum < 1.0:
            raise ValueError(f"CEM needs 0 < elite_fraction <= 1 and 0 <= momentum < 1, got {self.cfg}")
        self.num_elites = max(1, round(self.cfg.elite_fraction * self.cfg.population))

    def optimize(self, objective: Objective, initial: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Iterate sample / select / refit; return the best sequence seen or the final mean (``return_mean``)."""
        cfg = self.cfg
        mean, lower, upper = self._check_initial(initial)
        std = (cfg.initial_std_fraction * (upper - lower)).expand_as(mean)
        best, best_value = mean, -math.inf
        for _ in range(cfg.iterations):
            # Gaussian draws cut at two standard deviations, then clipped into the box. PETS instead shrinks the
            # spread to half the distance to the nearer bound, which keeps samples inside but stalls the mean short
            # of a bound, where the optimum often lies (bang-bang torques on Pendulum): clipping reaches it.
            z = _noise((cfg.population, *mean.shape), generator, mean).clamp_(-2.0, 2.0)
            samples = torch.clamp(mean + std * z, lower, upper)
            values = _finite_scores(objective(samples), cfg.population).to(samples.device)
            top_values, elite_idx = torch.topk(values, self.num_elites)  # best first
            elites = samples[elite_idx]
            top = float(top_values[0])
            if top > best_value:
                best_value, best = top, elites[0]
            mean = cfg.momentum * mean + (1.0 - cfg.momentum) * elites.mean(dim=0)
            std = cfg.momentum * std + (1.0 - cfg.momentum) * elites.std(dim=0, unbiased=False)
        return mean if cfg.return_mean else best


@dataclass
class MPPIConfig:
    """MPPI settings.

    Attributes:
        population: Perturbed sequences per iteration.
        iterations: Refinement rounds per plan (1 is the classic single-shot MPPI).
        noise_std_fraction: Perturbation standard deviation as a fraction of the action range.
        temperature: ``lambda`` in ``exp((R - max R) / lambda)``, in units of the population's return standard
            deviation (our choice: one value then works for any reward scale; small values approach the argmax).
        smoothing: PDDM's ``beta``: each step's perturbation is ``beta * new + (1 - beta) * previous step's``.
    """

    population: int = 100
    iterations: int = 3
    noise_std_fraction: float = 0.25
    temperature: float = 0.1
    smoothing: float = 0.6


class MPPIOptimizer(ActionSequenceOptimizer):
    """Model-predictive path integral control over action sequences (see the module docstring).

    Args:
        lower: ``[act_dim]`` lower bounds.
        upper: ``[act_dim]`` upper bounds.
        cfg: Population, iterations, noise, temperature and smoothing.
    """

    def __init__(self, lower: np.ndarray, upper: np.ndarray, cfg: MPPIConfig | None = None) -> None:
        super().__init__(lower, upper)
        self.cfg = cfg if cfg is not None else MPPIConfig()
        if self.cfg.population < 2 or self.cfg.iterations < 1:
            raise ValueError(f"MPPI needs population >= 2 and iterations >= 1, got {self.cfg}")
        if self.cfg.temperature <= 0 or not 0.0 < self.cfg.smoothing <= 1.0:
            raise ValueError(f"MPPI needs temperature > 0 and 0 < smoothing <= 1, got {self.cfg}")

    def optimize(self, objective: Objective, initial: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Iterate perturb / score / reweight and return the weighted mean (see :class:`ActionSequenceOptimizer`)."""
        cfg = self.cfg
        mean, lower, upper = self._check_initial(initial)
        sigma = cfg.noise_std_fraction * (upper - lower)
        for _ in range(cfg.iterations):
            eps = _noise((cfg.population, *mean.shape), generator, mean) * sigma
            for t in range(1, mean.shape[0]):  # temporally correlated noise: smoother, more plausible controls
                eps[:, t] = cfg.smoothing * eps[:, t] + (1.0 - cfg.smoothing) * eps[:, t - 1]
            samples = torch.clamp(mean + eps, lower, upper)
            values = _finite_scores(objective(samples), cfg.population).to(samples.device)
            finite = torch.isfinite(values)
            if not bool(finite.any()):
                continue  # every candidate failed: keep the mean
            spread = float(values[finite].std(unbiased=False))
            scale = cfg.temperature * (spread if spread > 0 else 1.0)
            weights = torch.where(finite, torch.exp((values - values[finite].max()) / scale), 0.0)
            mean = torch.tensordot(weights / weights.sum(), samples, dims=1)
        return torch.clamp(mean, lower, upper)
