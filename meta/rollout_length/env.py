"""The meta-level MDP over an inner model-based run: ``RolloutLengthEnv`` (one run) and ``MetaVecEnv`` (B runs).

One meta-episode is one inner training run under a fixed interaction budget (Bhatia, Thomas & Zilberstein 2022,
sec. 4). Each meta-step the agent picks an action of its action set (:mod:`.actions`: UP / DOWN / NOOP on the K in
force, or K itself from a grid), the inner learner runs one phase of ``phase_length`` real env steps with the new K,
and the meta-reward is ``(J' - J) / reward_scale``, the change in the return J attributed to the phase (the inner
learner's ``mean_return``; after the last phase, optionally a greedy evaluation of the final policy) on a fixed scale.
Undiscounted, the meta-return therefore telescopes to ``(J_final - J_0) / reward_scale``; ``J_0`` is a constant (by
default minus the env's step limit, the return of a policy that never succeeds on MountainCar / Acrobot), so
maximizing the meta-return maximizes the final J.

Why a fixed scale: raw ``J' - J`` reaches +-400 on Acrobot, and round one's meta-DQN, with gamma = 1 and a few
thousand updates, never grew its Q-values to that size (they spanned -4..2 against Monte-Carlo returns of 132 +- 219).
Dividing by the env's return range (by default its step limit: 500 on Acrobot, 200 on MountainCar) puts every
meta-return in about [-1, 1], where a freshly initialized Q-network's outputs already are.

``RolloutLengthEnv`` is a plain :class:`gymnasium.Env` (it passes ``check_env``). Meta-training uses
:class:`MetaVecEnv` instead: an SB3 :class:`~stable_baselines3.common.vec_env.VecEnv` whose B meta-episodes advance in
lockstep through *one* batched inner learner (``BatchedDynaDQN`` batches its Q-networks over runs), which is what
makes hundreds of inner runs affordable on a small CPU. All B meta-episodes have the same length
(``budget // phase_length``), so they end together and the next B start together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvStepReturn

from envs.perturbed import NOMINAL_PHYSICS, PhysicsSampler, env_factory
from mbrl.phases import RolloutLengthDriver
from meta.controllers import Feedback, RolloutLengthController
from meta.rollout_length.actions import DEFAULT_K_GRID, MetaActions
from meta.rollout_length.features import CLIP, FEATURE_NAMES, FeatureScales, featurize
from meta.rollout_length.inner import DynaFactory, InnerFactory, InnerLearner
from meta.rollout_length.toy import ToyFactory


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

    def __post_init__(self) -> None:
        if self.env_id not in NOMINAL_PHYSICS:
            raise ValueError(f"env_id must be one of {sorted(NOMINAL_PHYSICS)}, got {self.env_id!r}")
        if self.phase_length < 1 or self.budget < self.phase_length:
            raise ValueError(f"need 1 <= phase_length <= budget, got {self.phase_length}, {self.budget}")
        if not 0 <= self.k_init <= self.k_cap:
            raise ValueError(f"need 0 <= k_init <= k_cap, got {self.k_init}, {self.k_cap}")
        if self.reward_scale is not None and not self.reward_scale > 0:
            raise ValueError(f"reward_scale must be > 0, got {self.reward_scale}")
        self.actions()  # refuses a bad action set or grid now, not at the first step

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
        )


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


class MetaRuns:
    """B meta-episodes sharing one batched inner learner; the logic behind both env classes.

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
        self.sampler = sampler if sampler is not None else PhysicsSampler(config.env_id)
        self.scales = config.scales()
        self.actions = config.actions()
        self.learner: InnerLearner | None = None
        self.driver: RolloutLengthDriver | None = None
        self.physics: list[dict[str, float]] = []
        self.k = np.zeros(0, dtype=np.int64)
        self.j = np.zeros(0)
        self.j_prev = np.zeros(0)
        self.t = 0
        self.episode_return = np.zeros(0)
        self.k_history: list[list[int]] = []

    def start(self, num_runs: int, rng: np.random.Generator) -> np.ndarray:
        """Begin ``num_runs`` new inner runs (physics and learner seed drawn from ``rng``).

        Returns:
            Observations, shape ``[num_runs, len(FEATURE_NAMES)]``.
        """
        cfg = self.config
        if cfg.randomize_physics:
            self.physics = [self.sampler.sample(rng) for _ in range(num_runs)]
        else:
            base = dict(NOMINAL_PHYSICS[cfg.env_id])
            base.update(cfg.physics or {})
            self.physics = [dict(base) for _ in range(num_runs)]
        seed = int(rng.integers(0, 2**31 - 1))
        self.learner = self.inner_factory([env_factory(cfg.env_id, p) for p in self.physics], seed)
        self.driver = RolloutLengthDriver(
            [MetaActionController(cfg.k_init, self.actions) for _ in range(num_runs)],
            k_cap=cfg.k_cap,
            k_init=cfg.k_init,
        )
        self.k = np.full(num_runs, cfg.k_init, dtype=np.int64)
        self.j = np.full(num_runs, cfg.initial_return)
        self.j_prev = self.j.copy()
        self.t = 0
        self.episode_return = np.zeros(num_runs)
        self.k_history = [[] for _ in range(num_runs)]
        start_feedback = {"budget_fraction": 0.0}
        return np.stack(
            [featurize(start_feedback, int(k), cfg.initial_return, cfg.initial_return, self.scales) for k in self.k]
        )

    def step(self, actions: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray, bool, list[dict[str, Any]]]:
        """Apply one meta-action per run, advance the inner learner by one phase.

        Returns:
            ``(observations [B, F], rewards [B], done, infos)``; ``done`` is shared by all runs (lockstep).
        """
        if self.learner is None or self.driver is None:
            raise RuntimeError("call start() (reset) before step()")
        actions = np.asarray(actions).reshape(-1)
        if actions.shape != self.k.shape:
            raise ValueError(f"expected {self.k.size} actions, got {actions.size}")
        for controller, action in zip(self.driver.controllers, actions, strict=True):
            assert isinstance(controller, MetaActionController)
            if not 0 <= int(action) < self.actions.n:
                raise ValueError(f"invalid meta-action {action!r} for the {self.actions.kind!r} action set")
            controller.pending = int(action)
        cfg = self.config
        feedback = self.driver.run_phase(self.learner, budget_fraction=self.t * cfg.phase_length / cfg.budget)
        self.k = np.asarray(self.driver.ks, dtype=np.int64)
        for history, k in zip(self.k_history, self.k, strict=True):
            history.append(int(k))
        self.t += 1
        done = self.t >= self.config.horizon
        if done and self.config.final_eval_episodes > 0:
            final = self.learner.evaluate(self.config.final_eval_episodes)
            for fb, j_final in zip(feedback, final, strict=True):
                fb["mean_return"] = float(j_final)
        observations, rewards, infos = [], [], []
        for i, fb in enumerate(feedback):
            j_new = float(fb.get("mean_return", np.nan))
            # A phase without a finished episode carries the previous J forward (reward 0), keeping the telescoping.
            if not np.isfinite(j_new):
                j_new = float(self.j[i])
            reward = (j_new - float(self.j[i])) / cfg.meta_reward_scale
            self.j_prev[i], self.j[i] = self.j[i], j_new
            self.episode_return[i] += reward
            observations.append(featurize(fb, int(self.k[i]), j_new, float(self.j_prev[i]), self.scales))
            rewards.append(reward)
            info: dict[str, Any] = {"k": int(self.k[i]), "j": j_new, "feedback": dict(fb), "phase": self.t}
            if done:
                info["final_j"] = j_new
                info["k_schedule"] = list(self.k_history[i])
                info["physics"] = dict(self.physics[i])
                info["episode"] = {"r": float(self.episode_return[i]), "l": self.t}
            infos.append(info)
        return np.stack(observations), np.asarray(rewards, dtype=np.float64), done, infos


class RolloutLengthEnv(gym.Env[np.ndarray, np.int64]):
    """The meta-MDP as a gymnasium env: one episode is one inner run (B = 1).

    Observation: :data:`~meta.rollout_length.features.FEATURE_NAMES` (normalized, see :mod:`.features`).
    Action: the config's action set (:mod:`.actions`): ``Discrete(3)`` (DOWN, NOOP, UP) or ``Discrete(len(k_grid))``.
    Reward: ``(J' - J) / reward_scale`` (undiscounted return = ``(J_final - J_0) / reward_scale``). The episode
    *terminates* when the budget is spent: remaining budget is part of the state, so the end is a true terminal state,
    not a time-limit cut.

    Args:
        config: The meta-MDP settings (inner env id, budget, phase length, K cap, ...).
        inner_factory: Builds the inner learner (default from ``config.inner``).
        sampler: Physics sampler for domain randomization (default ranges if ``None``).
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012  (gymnasium's class-attribute convention)

    def __init__(
        self,
        config: MetaEnvConfig | None = None,
        inner_factory: InnerFactory | None = None,
        sampler: PhysicsSampler | None = None,
    ) -> None:
        super().__init__()
        self.config = config or MetaEnvConfig()
        self.runs = MetaRuns(self.config, inner_factory, sampler)
        self.observation_space = observation_space()
        self.action_space = self.config.actions().space()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        obs = self.runs.start(1, self.np_random)
        return obs[0], {"k": int(self.runs.k[0]), "physics": dict(self.runs.physics[0])}

    def step(self, action: np.int64 | int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if not self.action_space.contains(int(action)):
            actions = self.config.actions()
            names = ", ".join(f"{a} ({actions.name(a)})" for a in range(actions.n))
            raise ValueError(f"invalid meta-action {action!r}; expected one of {names}")
        obs, rewards, done, infos = self.runs.step([int(action)])
        return obs[0], float(rewards[0]), done, False, infos[0]


class BatchedVecEnv(VecEnv):
    """Base of the meta vector envs: their B meta-episodes share one learner, so there are no per-run sub-envs and
    attribute / method access goes to the vector env itself."""

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        # The runs share one learner, so attributes live on this object.
        return [getattr(self, attr_name) for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        setattr(self, attr_name, value)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        return [getattr(self, method_name)(*method_args, **method_kwargs) for _ in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]


class MetaVecEnv(BatchedVecEnv):
    """B meta-episodes in lockstep over one batched inner learner, as an SB3 ``VecEnv``.

    Meta-episode rounds are numbered; round r draws its physics and learner seed from
    ``numpy.random.default_rng([seed, r])``, so a meta-training run resumed at a round boundary continues exactly.

    Args:
        config: The meta-MDP settings.
        num_runs: B, inner runs per round.
        seed: Base seed.
        inner_factory: Builds the inner learner (default from ``config.inner``).
        sampler: Physics sampler for domain randomization.
        round_index: Index of the first round (non-zero when resuming).
        stream: Extra seed key for a worker's share of the runs (``default_rng([seed, round, stream])``).
    """

    def __init__(
        self,
        config: MetaEnvConfig,
        num_runs: int,
        seed: int = 0,
        inner_factory: InnerFactory | None = None,
        sampler: PhysicsSampler | None = None,
        round_index: int = 0,
        stream: int | None = None,
    ) -> None:
        if num_runs < 1:
            raise ValueError(f"num_runs must be >= 1, got {num_runs}")
        self.config = config
        self.runs = MetaRuns(config, inner_factory, sampler)
        self.base_seed = int(seed)
        self.round_index = int(round_index)
        self.stream = stream
        self.render_mode = None
        self._actions: np.ndarray | None = None
        super().__init__(num_runs, observation_space(), config.actions().space())

    def reset(self) -> np.ndarray:
        key = [self.base_seed, self.round_index] + ([] if self.stream is None else [self.stream])
        rng = np.random.default_rng(key)
        obs = self.runs.start(self.num_envs, rng)
        self.reset_infos = [
            {"k": int(k), "physics": dict(p)} for k, p in zip(self.runs.k, self.runs.physics, strict=True)
        ]
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_async() must come before step_wait()")
        obs, rewards, done, infos = self.runs.step(self._actions)
        self._actions = None
        dones = np.full(self.num_envs, done, dtype=bool)
        if done:
            for i, info in enumerate(infos):
                info["terminal_observation"] = obs[i]
                info["TimeLimit.truncated"] = False
            self.round_index += 1
            obs = self.reset()
        return obs, rewards.astype(np.float32), dones, infos

    def close(self) -> None:
        self.runs.learner = None

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        if seed is not None:
            self.base_seed = int(seed)
        return [self.base_seed] * self.num_envs
