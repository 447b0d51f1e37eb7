"""The rollout-length meta-MDP: :class:`meta.control.mdp.MetaEnv` / ``MetaVecEnv`` over an inner model-based run.

One meta-episode is one inner training run under a fixed interaction budget (Bhatia, Thomas & Zilberstein 2022,
sec. 4). Each meta-step the agent picks an action of its action set (:mod:`.actions`: UP / DOWN / NOOP on the K in
force, or K itself from a grid), the inner learner runs one phase of ``phase_length`` real env steps with the new K,
and the meta-reward is ``(J' - J) / reward_scale``, the change in the return J attributed to the phase (the inner
learner's ``mean_return``; after the last phase, optionally a greedy evaluation of the final policy) on a fixed scale.
Undiscounted, the meta-return therefore telescopes to ``(J_final - J_0) / reward_scale``; ``J_0`` is a constant (by
default minus the env's step limit, the return of a policy that never succeeds on MountainCar / Acrobot), so
maximizing the meta-return maximizes the final J.

Why a fixed scale: raw ``J' - J`` reaches +-400 on Acrobot, and a meta-DQN with gamma = 1 and a few
thousand updates never grew its Q-values to that size (they spanned -4..2 against Monte-Carlo returns of 132 +- 219).
Dividing by the env's return range (by default its step limit: 500 on Acrobot, 200 on MountainCar) puts every
meta-return in about [-1, 1], where a freshly initialized Q-network's outputs already are.

The bookkeeping (J, rewards, episode end, vector-env protocol, seeding) is the generic meta-MDP's
(:mod:`meta.control.mdp`, which the RLVR meta-MDP of :mod:`meta.rlvr.meta_mdp` shares); this module holds the
rollout-length side, :class:`RolloutLengthProblem`, and its settings, :class:`MetaEnvConfig`.

``RolloutLengthEnv`` is a plain :class:`gymnasium.Env` (it passes ``check_env``). Meta-training uses
:class:`MetaVecEnv` instead: an SB3 :class:`~stable_baselines3.common.vec_env.VecEnv` whose B meta-episodes advance in
lockstep through *one* batched inner learner (``BatchedDynaDQN`` batches its Q-networks over runs), which is what
makes hundreds of inner runs affordable on a small CPU. All B meta-episodes have the same length
(``budget // phase_length``), so they end together and the next B start together.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces

import envs  # noqa: F401  (registers the rolloutlab/ env ids the config may name)
from envs.perturbed import NOMINAL_PHYSICS, PhysicsSampler, env_factory
from mbrl.phases import RolloutLengthDriver
from meta.control import Feedback, RolloutLengthController
from meta.control.mdp import BatchedVecEnv, MetaEnv, MetaProblem, MetaRuns, MetaVecEnv
from meta.rollout_length.actions import DEFAULT_K_GRID, MetaActions
from meta.rollout_length.features import CLIP, FEATURE_NAMES, FeatureScales, featurize
from meta.rollout_length.inner import DynaFactory, InnerFactory, InnerLearner
from meta.rollout_length.toy import ToyFactory
from rolloutlab.seeding import run_seed


@dataclass
class MetaEnvConfig:
    """The meta-MDP's settings.

    Attributes:
        env_id: Inner environment, ``"MountainCar-v0"`` or ``"Acrobot-v1"``.
        budget: Real env steps per inner run (the paper: 150k / 120k; the scaled protocol: 50k).
        phase_length: Real env steps between two decisions, P (paper: 10k; scaled: 5k).
        k_cap: Largest rollout length (paper: 32).
        k_init: Rollout length in force before the first decision (what the step actions start from; 1 by default,
            so that the agent sees the model used from the start and one DOWN turns it off).
        action_set: ``"step"`` (UP / DOWN / NOOP) or ``"direct"`` (K from ``k_grid``), see :mod:`.actions`.
        k_grid: The lengths of the direct choice.
        reward_scale: The meta-reward is ``(J' - J) / reward_scale``; ``None`` means the env's step limit (its
            return range on MountainCar and Acrobot).
        randomize_physics: Draw each inner run's physics from the domain-randomization sampler (else ``physics``).
        physics: Fixed physics when not randomizing; ``None`` is the nominal env.
        j_initial: J_0, the return attributed to the untrained learner; ``None`` means minus the env's step limit.
        final_eval_episodes: Greedy episodes (per run) scoring the final policy as the last J; 0 uses the last
            phase's ``mean_return``, which the inner learner measures before that phase's Dyna burst.
        inner: ``"dyna"`` (``mbrl``'s ``BatchedDynaDQN``) or ``"toy"`` (:mod:`meta.rollout_length.toy`).
        dyna: Overrides of the inner ``DynaConfig`` (plain data).
        toy: Overrides of :class:`~meta.rollout_length.toy.ToyFactory`'s parameters (``inner="toy"`` only).
        model: ``"learned"`` (each run fits its own world model, the default) or ``"simulator"``: each run's model is
            the env's exact simulator (:class:`~mbrl.models.true_dynamics.TruePendulumModel`, for
            ``rolloutlab/DiscretePendulum-v0``) with an error drawn per run from ``model_error``, while the real env
            stays nominal. The runs a meta-agent meets then differ in how wrong their model is, not in their task.
        model_error: ``model="simulator"`` only: ``{parameter: [low, high]}``, drawn uniformly per run:
            ``angle_offset`` in rad (an angle-sensor error, additive) or a physics parameter ``g``, ``m``, ``l``,
            ``dt``, ``max_speed`` as a factor ``1 + delta``.
        compute_matched: Every inner run makes the same gradient updates per env step whatever K (K = 0 makes them
            on real data), so that K changes only where the training data comes from.
    """

    env_id: str = "MountainCar-v0"
    budget: int = 50_000
    phase_length: int = 5_000
    k_cap: int = 32
    k_init: int = 1
    action_set: Literal["step", "direct"] = "step"
    k_grid: list[int] = field(default_factory=lambda: list(DEFAULT_K_GRID))
    reward_scale: float | None = None
    randomize_physics: bool = True
    physics: dict[str, float] | None = None
    j_initial: float | None = None
    final_eval_episodes: int = 0
    inner: Literal["dyna", "toy"] = "dyna"
    dyna: dict[str, Any] = field(default_factory=dict)
    toy: dict[str, float] = field(default_factory=dict)
    model: Literal["learned", "simulator"] = "learned"
    model_error: dict[str, list[float]] = field(default_factory=dict)
    compute_matched: bool = False

    def __post_init__(self) -> None:
        if self.model not in ("learned", "simulator"):
            raise ValueError(f"model must be 'learned' or 'simulator', got {self.model!r}")
        if self.model == "simulator":
            self._check_simulator()
        elif self.env_id not in NOMINAL_PHYSICS:
            raise ValueError(f"env_id must be one of {sorted(NOMINAL_PHYSICS)}, got {self.env_id!r}")
        elif self.model_error:
            raise ValueError("model_error needs model='simulator' (a learned model's error is its own)")
        if self.phase_length < 1 or self.budget < self.phase_length:
            raise ValueError(f"need 1 <= phase_length <= budget, got {self.phase_length}, {self.budget}")
        if not 0 <= self.k_init <= self.k_cap:
            raise ValueError(f"need 0 <= k_init <= k_cap, got {self.k_init}, {self.k_cap}")
        if self.reward_scale is not None and not self.reward_scale > 0:
            raise ValueError(f"reward_scale must be > 0, got {self.reward_scale}")
        self.actions()  # refuses a bad action set or grid now, not at the first step

    def _check_simulator(self) -> None:
        if self.env_id != SIMULATOR_ENV:
            raise ValueError(f"model='simulator' needs env_id {SIMULATOR_ENV!r}, got {self.env_id!r}")
        if self.inner != "dyna":
            raise ValueError("model='simulator' needs inner='dyna' (the toy learner has no model)")
        if self.randomize_physics or self.physics:
            raise ValueError(
                "model='simulator' keeps the real env nominal: set randomize_physics: false and no physics "
                "(the runs differ in their model's error, model_error)"
            )
        known = {ANGLE_OFFSET, "g", "m", "l", "dt", "max_speed"}
        for name, bounds in self.model_error.items():
            if name not in known:
                raise ValueError(f"model_error: unknown parameter {name!r}; known: {', '.join(sorted(known))}")
            if len(bounds) != 2 or not all(math.isfinite(float(b)) for b in bounds) or bounds[0] > bounds[1]:
                raise ValueError(f"model_error[{name!r}] must be [low, high] with low <= high, got {bounds!r}")
            if name != ANGLE_OFFSET and 1.0 + float(bounds[0]) <= 0.0:
                raise ValueError(f"model_error[{name!r}]: the factor 1 + low must be > 0, got low = {bounds[0]}")

    def draw_model_error(self, rng: np.random.Generator) -> dict[str, float]:
        """One run's model error, ``{parameter: delta}`` (uniform per parameter, in sorted name order)."""
        bounds = {name: [float(b) for b in self.model_error[name]] for name in sorted(self.model_error)}
        return {name: float(rng.uniform(low, high)) for name, (low, high) in bounds.items()}

    def actions(self) -> MetaActions:
        """The action set."""
        return MetaActions(self.action_set, self.k_cap, tuple(int(k) for k in self.k_grid))

    @property
    def meta_reward_scale(self) -> float:
        """The divisor of the meta-reward (``reward_scale``, or the step limit)."""
        return float(self.step_limit if self.reward_scale is None else self.reward_scale)

    @property
    def horizon(self) -> int:
        """Decisions per meta-episode, ``budget // phase_length``."""
        return self.budget // self.phase_length

    @property
    def step_limit(self) -> int:
        """The inner env's episode step limit (200 for MountainCar-v0, 500 for Acrobot-v1)."""
        spec = gym.spec(self.env_id)
        return int(spec.max_episode_steps or 1000)

    @property
    def initial_return(self) -> float:
        """J_0 (see ``j_initial``)."""
        return float(-self.step_limit if self.j_initial is None else self.j_initial)

    def scales(self) -> FeatureScales:
        """Observation normalization for this env (see :mod:`.features`)."""
        return FeatureScales(k_cap=self.k_cap, return_scale=float(self.step_limit), length_scale=float(self.step_limit))

    def feature_names(self) -> tuple[str, ...]:
        """The observation's feature names (:data:`~meta.rollout_length.features.FEATURE_NAMES`)."""
        return FEATURE_NAMES

    def observation_space(self) -> spaces.Box:
        """The meta-observation space (:func:`observation_space`)."""
        return observation_space()

    def problem(
        self, inner_factory: InnerFactory | None = None, sampler: PhysicsSampler | None = None
    ) -> RolloutLengthProblem:
        """The :class:`RolloutLengthProblem` these settings describe."""
        return RolloutLengthProblem(self, inner_factory, sampler)

    def inner_factory(self) -> InnerFactory:
        """The factory named by ``inner``."""
        if self.inner == "toy":
            return ToyFactory(phase_length=self.phase_length, budget=self.budget, k_cap=self.k_cap, **self.toy)
        return DynaFactory(
            env_id=self.env_id,
            phase_length=self.phase_length,
            k_cap=self.k_cap,
            budget=self.budget,
            overrides=self.dyna,
            compute_matched=self.compute_matched,
        )


#: The env whose exact simulator serves as a model with a chosen error (``MetaEnvConfig.model = "simulator"``).
SIMULATOR_ENV = "rolloutlab/DiscretePendulum-v0"
#: The one model error given in absolute units (rad), not as a factor ``1 + delta``.
ANGLE_OFFSET = "angle_offset"


def simulator_model(error: Mapping[str, float]) -> Any:
    """The discrete Pendulum's exact simulator with ``error`` (``{parameter: delta}``, see ``model_error``)."""
    from mbrl.models.true_dynamics import TruePendulumModel

    nominal = TruePendulumModel.from_env(gym.make(SIMULATOR_ENV))
    scales = {name: 1.0 + delta for name, delta in error.items() if name != ANGLE_OFFSET}
    return nominal.perturbed(scales, angle_offset=error.get(ANGLE_OFFSET))


def observation_space() -> spaces.Box:
    """The meta-observation space: ``len(FEATURE_NAMES)`` features in ``[-CLIP, CLIP]``."""
    return spaces.Box(-CLIP, CLIP, shape=(len(FEATURE_NAMES),), dtype=np.float32)


class MetaActionController(RolloutLengthController):
    """The meta-agent's latest action applied to the rollout length at the next decision.

    The meta-MDP's agent acts from outside the learner; this controller carries its action to
    :class:`mbrl.phases.RolloutLengthDriver`, which owns the rollout length. Without a pending action K stays.

    Args:
        k_init: Rollout length before the first decision.
        actions: The action set.
    """

    def __init__(self, k_init: int, actions: MetaActions) -> None:
        self.k_init, self.actions = int(k_init), actions
        self.k: int = self.k_init
        self.pending: int | None = None

    def reset(self) -> None:
        self.k, self.pending = self.k_init, None

    def decide(self, feedback: Feedback) -> int:
        if self.pending is not None:
            self.k = self.actions.apply(self.k, self.pending)
        self.pending = None
        return self.k

    def state_dict(self) -> dict[str, Any]:
        return {"k": self.k, "pending": self.pending}


class RolloutLengthProblem(MetaProblem):
    """The rollout-length meta-MDP's inner side: batched Dyna-DQN runs whose knob is the model rollout length K.

    Each decision sets a pending action on the run's :class:`MetaActionController`; the phase driver
    (:class:`mbrl.phases.RolloutLengthDriver`, the one owner of K) applies it and runs ``phase_length`` real env steps.
    J is the phase's ``mean_return`` (after the last phase, optionally a greedy evaluation of the final policy).

    Args:
        config: The meta-MDP settings.
        inner_factory: Builds the inner learner; defaults to ``config.inner_factory()``.
        sampler: Domain-randomization sampler; defaults to :class:`envs.perturbed.PhysicsSampler` with its default
            ranges when ``config.randomize_physics``.
    """

    def __init__(
        self, config: MetaEnvConfig, inner_factory: InnerFactory | None = None, sampler: PhysicsSampler | None = None
    ) -> None:
        self.config = config
        self.inner_factory = inner_factory or config.inner_factory()
        self.sampler = sampler if sampler is not None or config.model == "simulator" else PhysicsSampler(config.env_id)
        self.scales = config.scales()
        self.actions: MetaActions = config.actions()
        self.horizon = config.horizon
        self.reward_scale = config.meta_reward_scale
        self.observation_space = observation_space()
        self.learner: InnerLearner | None = None
        self.driver: RolloutLengthDriver | None = None
        self.physics: list[dict[str, float]] = []
        self.model_errors: list[dict[str, float]] = []

    def start(
        self, num_runs: int, rng: np.random.Generator, runs: range | None = None
    ) -> tuple[np.ndarray, list[dict[str, Any]], np.ndarray]:
        """Draw the physics (or model errors) of all ``num_runs`` runs and the round's inner seed from ``rng``, then
        build one learner for the runs ``runs`` (default all) with the per-run seeds those runs have in a learner of
        all ``num_runs`` (:func:`rolloutlab.seeding.run_seed`), so a worker's share of the round trains the same runs.
        """
        cfg = self.config
        runs = range(num_runs) if runs is None else runs
        physics: list[dict[str, float]]
        if cfg.model == "simulator":
            physics = [{} for _ in range(num_runs)]
            errors = [cfg.draw_model_error(rng) for _ in range(num_runs)]
        else:
            if cfg.randomize_physics:
                assert self.sampler is not None
                physics = [self.sampler.sample(rng) for _ in range(num_runs)]
            else:
                base = dict(NOMINAL_PHYSICS[cfg.env_id])
                base.update(cfg.physics or {})
                physics = [dict(base) for _ in range(num_runs)]
            errors = [{} for _ in range(num_runs)]
        seed = int(rng.integers(0, 2**31 - 1))
        self.physics = [physics[i] for i in runs]
        self.model_errors = [errors[i] for i in runs]
        run_seeds = [run_seed(seed, i) for i in runs]
        env_fns: list[Callable[[], gym.Env]]
        if cfg.model == "simulator":
            env_fns = [functools.partial(gym.make, cfg.env_id) for _ in runs]
            models = [simulator_model(error) for error in self.model_errors]
            self.learner = self.inner_factory(env_fns, seed, run_seeds=run_seeds, models=models)
        else:
            env_fns = [env_factory(cfg.env_id, p) for p in self.physics]
            self.learner = self.inner_factory(env_fns, seed, run_seeds=run_seeds)
        self.driver = RolloutLengthDriver(
            [MetaActionController(cfg.k_init, self.actions) for _ in runs],
            k_cap=cfg.k_cap,
            k_init=cfg.k_init,
        )
        start_feedback = {"budget_fraction": 0.0}
        j0 = cfg.initial_return
        obs = np.stack([featurize(start_feedback, cfg.k_init, j0, j0, self.scales) for _ in runs])
        infos = [
            {"k": int(cfg.k_init), "physics": dict(p), "model_error": dict(e)}
            for p, e in zip(self.physics, self.model_errors, strict=True)
        ]
        return obs, infos, np.full(len(runs), j0)

    def run_phase(self, actions: np.ndarray, t: int) -> tuple[list[Feedback], np.ndarray]:
        if self.learner is None or self.driver is None:
            raise RuntimeError("call start() (reset) before step()")
        for controller, action in zip(self.driver.controllers, actions, strict=True):
            assert isinstance(controller, MetaActionController)
            if not 0 <= int(action) < self.actions.n:
                raise ValueError(f"invalid meta-action {action!r} for the {self.actions.kind!r} action set")
            controller.pending = int(action)
        cfg = self.config
        feedback = self.driver.run_phase(self.learner, budget_fraction=t * cfg.phase_length / cfg.budget)
        if t + 1 >= self.horizon and cfg.final_eval_episodes > 0:
            final = self.learner.evaluate(cfg.final_eval_episodes)
            for fb, j_final in zip(feedback, final, strict=True):
                fb["mean_return"] = float(j_final)
        return list(feedback), np.asarray(self.driver.ks, dtype=np.int64)

    def performance(self, feedback: Feedback) -> float:
        return float(feedback.get("mean_return", np.nan))

    def observe(self, feedback: Feedback, knob: int, j: float, j_prev: float) -> np.ndarray:
        return featurize(feedback, knob, j, j_prev, self.scales)

    def episode_info(self, run: int) -> dict[str, Any]:
        return {"physics": dict(self.physics[run]), "model_error": dict(self.model_errors[run])}

    def close(self) -> None:
        self.learner = None


class RolloutLengthEnv(MetaEnv):
    """The rollout-length meta-MDP as a gymnasium env: one episode is one inner run (B = 1).

    Observation: :data:`~meta.rollout_length.features.FEATURE_NAMES` (normalized, see :mod:`.features`).
    Action: the config's action set (:mod:`.actions`): ``Discrete(3)`` (DOWN, NOOP, UP) or ``Discrete(len(k_grid))``.
    Reward: ``(J' - J) / reward_scale`` (undiscounted return = ``(J_final - J_0) / reward_scale``); see
    :class:`meta.control.mdp.MetaEnv`.

    Args:
        config: The meta-MDP settings (inner env id, budget, phase length, K cap, ...).
        inner_factory: Builds the inner learner (default from ``config.inner``).
        sampler: Physics sampler for domain randomization (default ranges if ``None``).
    """

    def __init__(
        self,
        config: MetaEnvConfig | None = None,
        inner_factory: InnerFactory | None = None,
        sampler: PhysicsSampler | None = None,
    ) -> None:
        self.config = config or MetaEnvConfig()
        super().__init__(RolloutLengthProblem(self.config, inner_factory, sampler))


__all__ = [
    "BatchedVecEnv",
    "MetaActionController",
    "MetaEnvConfig",
    "MetaRuns",
    "MetaVecEnv",
    "RolloutLengthEnv",
    "RolloutLengthProblem",
    "observation_space",
]
