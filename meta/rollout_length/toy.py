"""An analytic stand-in for the inner learner: instant, seeded, and with a known best rollout-length schedule.

It exists for tests (the meta-env's contract, telescoping, training, resume and worker pools run in seconds) and as a
sanity check that a meta-agent can learn a schedule at all. It is *not* a model of any real learner's numbers.

Each run has a skill ``s`` in [0, 1] and a data count ``n``. The model's trustworthy horizon grows with data,
``h(n) = k_cap * (1 - exp(-n / data_scale))``. A phase with rollout length K improves the skill by
``rate * (1 - s) * (1 + bonus * min(K, h) / k_cap) - bias * max(0, K - h) / k_cap`` (model rollouts help up to the
trustworthy horizon and hurt beyond it), so the best schedule increases K as data accumulates. The return is
``J = -horizon * (1 - s)`` plus Gaussian noise; the model's signed return error grows with ``K - h``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from meta.rollout_length.inner import EnvFn
from rolloutlab.run_state import generator_state, set_generator_state
from rolloutlab.seeding import run_seed


@dataclass(frozen=True)
class ToyFactory:
    """Picklable ``InnerFactory`` building :class:`ToyInnerLearner` (see module docstring for the parameters).

    ``delay`` (seconds of sleep per phase) emulates a slow learner for kill-and-resume tests. The toy has no world
    model, so ``models`` must be ``None`` (:class:`~meta.rollout_length.env.MetaEnvConfig` refuses a simulator model
    with the toy inner learner).
    """

    phase_length: int
    budget: int
    k_cap: int = 32
    horizon: float = 200.0
    data_scale: float = 20_000.0
    rate: float = 0.08
    bonus: float = 2.0
    bias: float = 0.6
    noise: float = 2.0
    delay: float = 0.0

    def __call__(
        self,
        env_fns: Sequence[EnvFn],
        seed: int,
        run_seeds: Sequence[int] | None = None,
        models: Sequence[Any] | None = None,
    ) -> ToyInnerLearner:
        if models is not None:
            raise ValueError("the toy inner learner has no world model; it takes no models")
        seeds = list(run_seeds) if run_seeds is not None else [run_seed(seed, i) for i in range(len(env_fns))]
        return ToyInnerLearner(seeds, self)


class ToyInnerLearner:
    """B toy runs (one per seed); implements the :class:`~meta.rollout_length.inner.InnerLearner` protocol."""

    def __init__(self, run_seeds: Sequence[int], params: ToyFactory) -> None:
        if not run_seeds:
            raise ValueError("need at least one run")
        self.params = params
        self.rngs = [np.random.default_rng(s) for s in run_seeds]
        self.skill = np.zeros(len(run_seeds))
        self.steps_done = 0
        self.budget = params.budget

    def state_dict(self) -> dict[str, Any]:
        return {
            "skill": self.skill.tolist(),
            "steps_done": self.steps_done,
            "rngs": [generator_state(r) for r in self.rngs],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.skill = np.asarray(state["skill"], dtype=np.float64)
        self.steps_done = int(state["steps_done"])
        for rng, saved in zip(self.rngs, state["rngs"], strict=True):
            set_generator_state(rng, saved)

    def _trusted_horizon(self) -> float:
        p = self.params
        return p.k_cap * (1.0 - np.exp(-self.steps_done / p.data_scale))

    def run_phase(self, ks: Sequence[int], truncators: Sequence[Any] | None = None) -> list[dict[str, float]]:
        """One phase for every run (see the module docstring). ``truncators`` is accepted and ignored: the toy has
        no per-step model rollouts to cut."""
        p = self.params
        k = np.asarray(ks, dtype=np.float64)
        if k.shape != self.skill.shape:
            raise ValueError(f"expected {self.skill.shape[0]} rollout lengths, got {len(ks)}")
        if p.delay > 0:
            time.sleep(p.delay)  # emulate a slow learner, for kill-and-resume tests
        self.steps_done += p.phase_length
        h = self._trusted_horizon()
        gain = p.rate * (1.0 - self.skill) * (1.0 + p.bonus * np.minimum(k, h) / p.k_cap)
        gain -= p.bias * np.maximum(0.0, k - h) / p.k_cap
        self.skill = np.clip(self.skill + gain, 0.0, 1.0)
        noise = np.stack([rng.normal(0.0, p.noise, size=3) for rng in self.rngs], axis=1)
        j = -p.horizon * (1.0 - self.skill) + noise[0]
        excess = np.maximum(0.0, k - h)
        return [
            {
                "mean_return": float(j[i]),
                "model_return_error": float(5.0 * excess[i] + noise[1, i]),
                "model_length_error": float(-3.0 * excess[i] + noise[2, i]),
                "model_holdout_loss": float(1.0 - h / p.k_cap),
                "disagreement_mean": float((1.0 - h / p.k_cap) * k[i] / p.k_cap),
                "env_steps": float(self.steps_done),
                "budget_fraction": min(self.steps_done / self.budget, 1.0),
            }
            for i in range(k.size)
        ]

    def evaluate(self, episodes: int, env_fns: Sequence[EnvFn] | None = None) -> np.ndarray:
        """Noise-free return of each run's current skill (``episodes`` and ``env_fns`` are accepted and ignored)."""
        return -self.params.horizon * (1.0 - self.skill)
