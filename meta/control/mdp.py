"""The meta-level MDP over any inner learner with one knob: ``MetaEnv`` (one run) and ``MetaVecEnv`` (B runs).

One meta-episode is one inner training run under a fixed budget (Bhatia, Thomas & Zilberstein 2022, sec. 4); one
meta-step is one decision on the inner learner's knob (UP / DOWN / NOOP on the value in force, or the value itself
from a grid: :class:`meta.rollout_length.actions.MetaActions`), after which the inner learner runs one phase; the
meta-reward is ``(J' - J) / reward_scale``, the change in the inner learner's evaluated performance J on a fixed
scale. Undiscounted, the meta-return telescopes to ``(J_final - J_0) / reward_scale``, and ``J_0`` does not depend on
the meta-agent's actions, so maximizing the meta-return maximizes the final J.

What differs between inner learners lives in a :class:`MetaProblem`:

* :class:`meta.rollout_length.env.RolloutLengthProblem` — batched Dyna-DQN, knob: the model rollout length K, budget
  in real env steps, J the episode return (configured by :class:`meta.rollout_length.env.MetaEnvConfig`);
* :class:`meta.rlvr.meta_mdp.GroupSizeProblem` — the compact GRPO trainer, knob: responses per prompt G, budget in
  generated completion tokens, J the held-out accuracy (configured by :class:`meta.rlvr.meta_mdp.RLVRMetaConfig`).

Everything else (the bookkeeping of J, the rewards, the episode end, the infos, SB3's vector-env protocol and the
per-round seeding that makes meta-training resumable) is here, once. A problem's config is plain data with a
``problem()`` method, so worker processes (:mod:`meta.control.parallel`) rebuild it from a pickle.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvStepReturn

from meta.control.protocol import Feedback


class KnobActions(Protocol):
    """How a meta-action changes the knob (:class:`meta.rollout_length.actions.MetaActions` for K,
    :class:`meta.rlvr.meta_mdp.GroupSizeActions` for G)."""

    @property
    def kind(self) -> str: ...

    @property
    def n(self) -> int: ...

    def space(self) -> spaces.Discrete: ...

    def apply(self, knob: int, action: int) -> int: ...

    def name(self, action: int) -> str: ...


class MetaProblem(ABC):
    """B inner runs advanced one phase per decision, with one knob the meta-agent sets.

    Attributes:
        actions: How a meta-action changes the knob.
        horizon: Decisions per meta-episode.
        reward_scale: The divisor of the meta-reward (the range of J).
        observation_space: The meta-observation space.
    """

    actions: KnobActions
    horizon: int
    reward_scale: float
    observation_space: spaces.Box

    @abstractmethod
    def start(
        self, num_runs: int, rng: np.random.Generator, runs: range | None = None
    ) -> tuple[np.ndarray, list[dict[str, Any]], np.ndarray]:
        """Begin the runs ``runs`` of a round of ``num_runs`` new inner runs.

        The domains (physics, task mix, ...) and seeds of *all* ``num_runs`` runs are drawn from ``rng`` in one fixed
        order, then only the runs in ``runs`` are built, so run ``i`` is the same run whichever share of the round a
        worker holds (:mod:`meta.control.parallel`).

        Args:
            num_runs: B, the round's runs over all workers.
            rng: The round's generator.
            runs: The run indices to build, a sub-range of ``range(num_runs)``; ``None``: all.

        Returns:
            ``(observations [R, F], reset infos, J_0 [R])`` for the ``R = len(runs)`` runs built.
        """

    @abstractmethod
    def run_phase(self, actions: np.ndarray, t: int) -> tuple[list[Feedback], np.ndarray]:
        """Apply one meta-action per run, then advance every run by phase ``t`` (0-based).

        On the last phase (``t == horizon - 1``) the feedback's performance may be a final evaluation.

        Returns:
            ``(feedback per run, knob values in force during the phase [B])``.

        Raises:
            ValueError: an action outside the action set.
        """

    @abstractmethod
    def performance(self, feedback: Feedback) -> float:
        """J of a run after a phase, from its feedback (NaN when the phase measured none)."""

    @abstractmethod
    def observe(self, feedback: Feedback, knob: int, j: float, j_prev: float) -> np.ndarray:
        """The meta-observation after a phase (``knob`` in force, J and the previous J)."""

    def episode_info(self, run: int) -> dict[str, Any]:
        """Extra info of run ``run`` at its episode's end (e.g. its physics)."""
        return {}

    def close(self) -> None:  # noqa: B027  (optional hook: most problems hold nothing to release)
        """Drop the inner learners."""


class MetaProblemConfig(Protocol):
    """Plain-data settings of a meta-MDP that build its :class:`MetaProblem`."""

    @property
    def horizon(self) -> int: ...

    def actions(self) -> KnobActions: ...

    def feature_names(self) -> tuple[str, ...]: ...

    def observation_space(self) -> spaces.Box: ...

    def problem(self, inner_factory: Any = None, sampler: Any = None) -> MetaProblem: ...


def check_runs(num_runs: int, runs: range | None) -> range:
    """``runs`` (``None``: ``range(num_runs)``) after checking it is a non-empty, contiguous share of the round."""
    if runs is None:
        return range(num_runs)
    if not isinstance(runs, range) or runs.step != 1 or len(runs) < 1 or runs.start < 0 or runs.stop > num_runs:
        raise ValueError(f"runs must be a non-empty range inside range({num_runs}), got {runs!r}")
    return runs


class MetaRuns:
    """B meta-episodes over one :class:`MetaProblem`: the logic behind both env classes.

    Attributes:
        k: The knob in force per run (K, G, ...).
        j: The latest J per run; ``j_prev`` the one before.
        t: Decisions taken in the current meta-episode.
    """

    def __init__(self, problem: MetaProblem) -> None:
        self.problem = problem
        self.k = np.zeros(0, dtype=np.int64)
        self.j = np.zeros(0)
        self.j_prev = np.zeros(0)
        self.t = 0
        self.started = False
        self.episode_return = np.zeros(0)
        self.k_history: list[list[int]] = []
        self.reset_infos: list[dict[str, Any]] = []

    def start(self, num_runs: int, rng: np.random.Generator, runs: range | None = None) -> np.ndarray:
        """Begin the runs ``runs`` (default all) of a round of ``num_runs`` new inner runs (see
        :meth:`MetaProblem.start`); returns their observations ``[len(runs), F]``."""
        runs = check_runs(num_runs, runs)
        obs, self.reset_infos, j0 = self.problem.start(num_runs, rng, runs)
        self.k = np.asarray([int(info["k"]) for info in self.reset_infos], dtype=np.int64)
        self.j = np.asarray(j0, dtype=np.float64).copy()
        self.j_prev = self.j.copy()
        self.t = 0
        self.started = True
        self.episode_return = np.zeros(len(runs))
        self.k_history = [[] for _ in runs]
        return obs

    def step(self, actions: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray, bool, list[dict[str, Any]]]:
        """Apply one meta-action per run, advance the inner learner by one phase.

        Returns:
            ``(observations [B, F], rewards [B], done, infos)``; ``done`` is shared by all runs (lockstep).
        """
        if not self.started:
            raise RuntimeError("call start() (reset) before step()")
        actions = np.asarray(actions).reshape(-1)
        if actions.shape != self.k.shape:
            raise ValueError(f"expected {self.k.size} actions, got {actions.size}")
        problem = self.problem
        feedback, knobs = problem.run_phase(actions, self.t)
        self.k = np.asarray(knobs, dtype=np.int64)
        for history, k in zip(self.k_history, self.k, strict=True):
            history.append(int(k))
        self.t += 1
        done = self.t >= problem.horizon
        observations, rewards, infos = [], [], []
        for i, fb in enumerate(feedback):
            j_new = float(problem.performance(fb))
            # A phase without a measurement carries the previous J forward (reward 0), keeping the telescoping.
            if not np.isfinite(j_new):
                j_new = float(self.j[i])
            reward = (j_new - float(self.j[i])) / problem.reward_scale
            self.j_prev[i], self.j[i] = self.j[i], j_new
            self.episode_return[i] += reward
            observations.append(problem.observe(fb, int(self.k[i]), j_new, float(self.j_prev[i])))
            rewards.append(reward)
            info: dict[str, Any] = {"k": int(self.k[i]), "j": j_new, "feedback": dict(fb), "phase": self.t}
            if done:
                info["final_j"] = j_new
                info["k_schedule"] = list(self.k_history[i])
                info.update(problem.episode_info(i))
                info["episode"] = {"r": float(self.episode_return[i]), "l": self.t}
            infos.append(info)
        return np.stack(observations), np.asarray(rewards, dtype=np.float64), done, infos

    def close(self) -> None:
        """Drop the inner learners."""
        self.problem.close()
        self.started = False


class MetaEnv(gym.Env[np.ndarray, np.int64]):
    """A meta-MDP as a gymnasium env: one episode is one inner run (B = 1).

    The episode *terminates* when the budget is spent: the remaining budget is part of the state, so the end is a
    true terminal state, not a time-limit cut.

    Args:
        problem: The inner learner, its knob and its features.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012  (gymnasium's class-attribute convention)

    def __init__(self, problem: MetaProblem) -> None:
        super().__init__()
        self.runs = MetaRuns(problem)
        self.observation_space = problem.observation_space
        self.action_space = problem.actions.space()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        obs = self.runs.start(1, self.np_random)
        return obs[0], dict(self.runs.reset_infos[0])

    def step(self, action: np.int64 | int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if not self.action_space.contains(int(action)):
            actions = self.runs.problem.actions
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
    """B meta-episodes in lockstep over one problem, as an SB3 ``VecEnv``.

    All B meta-episodes have the same length (the problem's ``horizon``), so they end together and the next B start
    together. Meta-episode rounds are numbered; round r draws the domains and inner seeds of all its B runs from
    ``numpy.random.default_rng([seed, r])``, so a meta-training run resumed at a round boundary continues exactly.
    An env may hold only a share ``runs`` of each round (a worker of :mod:`meta.control.parallel`): it draws the same
    round and builds only those runs, so run ``i`` is the same whether one process holds all B runs or W workers
    share them.

    Args:
        config: The meta-MDP settings (:class:`MetaProblemConfig`: ``MetaEnvConfig``, ``RLVRMetaConfig``).
        num_runs: B, inner runs per round (over all workers).
        seed: Base seed.
        inner_factory: Passed to ``config.problem`` (the rollout-length problem's inner-learner override).
        sampler: Passed to ``config.problem`` (the rollout-length problem's physics sampler).
        round_index: Index of the first round (non-zero when resuming).
        runs: The run indices of each round this env holds (``None``: all ``num_runs``); its ``num_envs`` is
            ``len(runs)``.
    """

    def __init__(
        self,
        config: MetaProblemConfig,
        num_runs: int,
        seed: int = 0,
        inner_factory: Any = None,
        sampler: Any = None,
        round_index: int = 0,
        runs: range | None = None,
    ) -> None:
        if num_runs < 1:
            raise ValueError(f"num_runs must be >= 1, got {num_runs}")
        self.config = config
        problem = config.problem(inner_factory, sampler)
        self.runs = MetaRuns(problem)
        self.round_runs = int(num_runs)
        self.share = check_runs(self.round_runs, runs)
        self.base_seed = int(seed)
        self.round_index = int(round_index)
        self.render_mode = None
        self._actions: np.ndarray | None = None
        super().__init__(len(self.share), problem.observation_space, problem.actions.space())

    def reset(self) -> np.ndarray:
        rng = np.random.default_rng([self.base_seed, self.round_index])
        obs = self.runs.start(self.round_runs, rng, self.share)
        self.reset_infos = [dict(info) for info in self.runs.reset_infos]
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
        self.runs.close()

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        if seed is not None:
            self.base_seed = int(seed)
        return [self.base_seed] * self.num_envs
