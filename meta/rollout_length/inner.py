"""What the meta-MDP needs from an inner learner, and the factory that builds the real one (batched Dyna-DQN).

The inner learner is B independent model-based runs advanced together (``mbrl.algorithms.dyna.BatchedDynaDQN``, the
shared contract with the mbrl pillar). The meta-env only needs :class:`InnerLearner`'s three methods, so tests and the
toy benchmark substitute :class:`meta.rollout_length.toy.ToyInnerLearner`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

EnvFn = Callable[[], gym.Env]


class InnerLearner(Protocol):
    """B inner runs advanced together, one phase per meta-decision."""

    def run_phase(self, ks: Sequence[int], truncators: Sequence[Any] | None = None) -> list[dict[str, float]]:
        """Advance every run by one phase of real interaction with rollout length ``ks[i]`` (and, if given, per-run
        per-step truncation of its imagined rollouts).

        Returns:
            One feedback dict per run with at least the keys in :data:`mbrl.phases.FEEDBACK_KEYS`.
        """
        ...

    def evaluate(self, episodes: int, env_fns: Sequence[EnvFn] | None = None) -> np.ndarray:
        """Greedy return of each run's current policy, averaged over ``episodes`` episodes; shape ``[B]``."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Plain-data snapshot (tensors, numbers, strings) for exact resumption."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` snapshot."""
        ...


class InnerFactory(Protocol):
    """``factory(env_fns, seed, run_seeds=None, models=None) -> InnerLearner`` with one env factory per run.

    ``run_seeds`` (one per run) overrides the default per-run seeds derived from ``seed``, so that run i of several
    batched arms can share a seed. ``models`` (one per run) hands each run a ready world model (e.g. a simulator with
    a known error) instead of one it learns.
    """

    def __call__(
        self,
        env_fns: Sequence[EnvFn],
        seed: int,
        run_seeds: Sequence[int] | None = None,
        models: Sequence[Any] | None = None,
    ) -> InnerLearner: ...


@dataclass(frozen=True)
class DynaFactory:
    """Picklable factory for ``mbrl.algorithms.dyna.BatchedDynaDQN`` (so worker processes can build it).

    The inner config starts from ``DynaConfig.for_env(env_id)`` (rl-zoo's DQN hyperparameters for the env family;
    ``DynaConfig()``'s defaults for an env rl-zoo has no DQN values for, such as the discrete Pendulum), then sets the
    meta-MDP's budget, phase length and K cap, then applies ``overrides``.

    Attributes:
        env_id: Base environment id (``"MountainCar-v0"`` / ``"Acrobot-v1"`` / ``"rolloutlab/DiscretePendulum-v0"``).
        phase_length: Real env steps between decisions (P).
        k_cap: Largest rollout length.
        budget: Real env steps per inner run.
        overrides: Extra ``DynaConfig`` fields (plain data; the nested ``model`` config as a mapping, merged).
        compute_matched: Every run makes the same gradient updates per env step whatever its K (K = 0 makes them on
            real data), so that K changes only where the training data comes from.
    """

    env_id: str
    phase_length: int
    k_cap: int
    budget: int
    overrides: Mapping[str, Any] = field(default_factory=dict)
    compute_matched: bool = False

    def config(self) -> Any:
        """The resolved ``DynaConfig``."""
        from mbrl.algorithms.dyna import ZOO_DQN, DynaConfig
        from mbrl.termination import base_name
        from rolloutlab.config import from_dict, to_dict

        base = DynaConfig.for_env(self.env_id) if base_name(self.env_id) in ZOO_DQN else DynaConfig()
        data = to_dict(base)
        data.update(budget=self.budget, phase_length=self.phase_length, k_cap=self.k_cap)
        for key, value in self.overrides.items():
            if key == "model" and isinstance(value, Mapping):
                data["model"] = {**data["model"], **value}
            else:
                data[key] = value
        return from_dict(DynaConfig, data)

    def __call__(
        self,
        env_fns: Sequence[EnvFn],
        seed: int,
        run_seeds: Sequence[int] | None = None,
        models: Sequence[Any] | None = None,
    ) -> InnerLearner:
        from mbrl.algorithms.dyna import BatchedDynaDQN

        learner: InnerLearner = BatchedDynaDQN(
            list(env_fns),
            self.config(),
            seed,
            run_seeds=run_seeds,
            compute_matched=[self.compute_matched] * len(env_fns),
            models=models,
        )
        return learner
