"""Dyna-DQN (Bhatia, Thomas & Zilberstein 2022, Algorithm 1), many independent runs advanced together in one process.

One run: a DQN agent acts in the real environment and learns from its replay buffer ``D`` at every step, exactly as
SB3's DQN does with rl-zoo's hyperparameters (epsilon-greedy with a linear schedule, ``train_freq`` /
``gradient_steps``, Huber loss, hard target updates, gradient-norm clip 10). Every ``P`` env steps (one *phase*) it
retrains its world model on ``D``, takes a rollout length ``K`` from its controller, runs ``M`` imagined rollouts of
``K`` steps from states drawn uniformly from ``D`` into a fresh buffer ``D'``, and does ``G'`` extra DQN updates on
minibatches from ``D'``. ``K = 0`` is plain DQN (the model is still trained, so its errors can be reported).

:class:`BatchedDynaDQN` keeps ``B`` such runs in lockstep: the Q-networks, target networks and Adam states of all runs
are single tensors with a leading run axis (:mod:`mbrl.algorithms.batched_q`), so acting and learning cost one batched
forward/backward for all runs instead of ``B`` small ones. Each run keeps its own environment, world model, replay
buffer and random generators, and run ``i`` behaves the same whether it is batched with others or alone (up to float
rounding in batched matmuls). The meta-controller drives it phase by phase through :meth:`BatchedDynaDQN.run_phase`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from mbrl.algorithms.batched_q import BatchedAdam, BatchedQNetwork, clip_grad_norm_per_run
from mbrl.model_env import ModelEnv
from mbrl.models import DynamicsModel, ModelConfig
from mbrl.termination import TerminationFn, termination_fn

#: rl-zoo's tuned DQN hyperparameters (rl-baselines3-zoo ``hyperparams/dqn.yml``); ``gradient_steps = -1`` means
#: "as many as env steps collected" (``train_freq``), as in SB3.
#: Feedback keys :meth:`BatchedDynaDQN.run_phase` returns for every run (the meta-controller's raw observation).
FEEDBACK_KEYS: tuple[str, ...] = (
    "mean_return",
    "model_return_error",
    "model_length_error",
    "model_holdout_loss",
    "disagreement_mean",
    "env_steps",
    "budget_fraction",
)

ZOO_DQN: dict[str, dict[str, Any]] = {
    "MountainCar": {
        "learning_rate": 4e-3,
        "batch_size": 128,
        "buffer_size": 10_000,
        "learning_starts": 1000,
        "gamma": 0.98,
        "target_update_interval": 600,
        "train_freq": 16,
        "gradient_steps": 8,
        "exploration_fraction": 0.2,
        "exploration_final_eps": 0.07,
        "net_arch": [256, 256],
    },
    "Acrobot": {
        "learning_rate": 6.3e-4,
        "batch_size": 128,
        "buffer_size": 50_000,
        "learning_starts": 0,
        "gamma": 0.99,
        "target_update_interval": 250,
        "train_freq": 4,
        "gradient_steps": -1,
        "exploration_fraction": 0.12,
        "exploration_final_eps": 0.1,
        "net_arch": [256, 256],
    },
    "CartPole": {
        "learning_rate": 2.3e-3,
        "batch_size": 64,
        "buffer_size": 100_000,
        "learning_starts": 1000,
        "gamma": 0.99,
        "target_update_interval": 10,
        "train_freq": 256,
        "gradient_steps": 128,
        "exploration_fraction": 0.16,
        "exploration_final_eps": 0.04,
        "net_arch": [256, 256],
    },
}


def dyna_model_config() -> ModelConfig:
    """A smaller, faster ensemble than MBPO's default, sized for the low-dimensional classic-control tasks."""
    return ModelConfig(ensemble_size=5, num_elites=3, hidden_size=64, num_layers=3, max_epochs=25, batch_size=256)


@dataclass
class DynaConfig:
    """Dyna-DQN settings. DQN fields default to rl-zoo's Acrobot-v1 values; use :meth:`for_env` for other envs.

    Attributes:
        budget: Real env steps per run.
        phase_length: ``P``, env steps between model retraining / Dyna bursts (a meta-controller decision point).
        num_model_rollouts: ``M``, imagined rollouts per burst.
        planning_updates: ``G'``, DQN updates on imagined data per burst.
        k_cap: Largest rollout length a controller may ask for.
        learning_rate: Adam learning rate.
        batch_size: Minibatch size (real and imagined updates).
        buffer_size: Capacity of the real replay buffer ``D`` (per run).
        learning_starts: Env steps of uniformly random actions before learning.
        gamma: Discount.
        target_update_interval: Env steps between hard target-network updates.
        train_freq: Env steps between training rounds.
        gradient_steps: Updates per training round (-1: ``train_freq``).
        exploration_fraction: Fraction of the budget over which epsilon decays linearly.
        exploration_initial_eps: Starting epsilon.
        exploration_final_eps: Final epsilon.
        max_grad_norm: Per-run gradient-norm clip.
        net_arch: Hidden widths of the Q-network.
        model: World-model settings.
        eval_episodes: Greedy real episodes per phase for ``mean_return`` and the model-error feedback.
        train_model_when_k0: Retrain the model even when ``K = 0`` (the feedback then still reports model errors).
        deterministic_rollouts: Imagined rollouts use the chosen elite's mean instead of sampling.
    """

    budget: int = 50_000
    phase_length: int = 5_000
    num_model_rollouts: int = 1_000
    planning_updates: int = 500
    k_cap: int = 32
    learning_rate: float = 6.3e-4
    batch_size: int = 128
    buffer_size: int = 50_000
    learning_starts: int = 0
    gamma: float = 0.99
    target_update_interval: int = 250
    train_freq: int = 4
    gradient_steps: int = -1
    exploration_fraction: float = 0.12
    exploration_initial_eps: float = 1.0
    exploration_final_eps: float = 0.1
    max_grad_norm: float = 10.0
    net_arch: list[int] = field(default_factory=lambda: [256, 256])
    model: ModelConfig = field(default_factory=dyna_model_config)
    eval_episodes: int = 3
    train_model_when_k0: bool = True
    deterministic_rollouts: bool = False

    @classmethod
    def for_env(cls, env_id: str, **overrides: Any) -> DynaConfig:
        """rl-zoo's DQN hyperparameters for ``env_id``'s family (MountainCar, Acrobot, CartPole), then ``overrides``."""
        from mbrl.termination import base_name

        name = base_name(env_id)
        if name not in ZOO_DQN:
            raise ValueError(f"no rl-zoo DQN hyperparameters for {env_id!r}; known: {sorted(ZOO_DQN)}")
        values: dict[str, Any] = {**ZOO_DQN[name], **overrides}
        return cls(**values)


class RolloutTruncator(Protocol):
    """Per-step truncation of imagined rollouts (``meta.controllers.UncertaintyTruncation`` provides it)."""

    def keep(self, step: int, disagreement: Any) -> Any:
        """``[N]`` bool: which rollouts may continue, given their disagreement at ``step`` (step 0 calibrates)."""

    @property
    def threshold(self) -> float | None:
        """The calibrated threshold."""


EnvFn = Callable[[], gym.Env]


def _rng_state(rng: np.random.Generator) -> str:
    return json.dumps(rng.bit_generator.state)


def _set_rng_state(rng: np.random.Generator, state: str) -> None:
    rng.bit_generator.state = json.loads(state)


def _time_limit(env: gym.Env) -> gym.wrappers.TimeLimit | None:
    current: Any = env
    while current is not None:
        if isinstance(current, gym.wrappers.TimeLimit):
            return current
        current = getattr(current, "env", None)
    return None


class BatchedDynaDQN:
    """``B`` independent Dyna-DQN runs in lockstep with Q-networks batched over runs.

    Args:
        env_fns: One environment factory per run (runs may use differently perturbed physics). Discrete actions and a
            flat Box observation are required.
        cfg: Settings shared by all runs.
        seed: Base seed; run ``i`` uses ``run_seeds[i]`` (default ``seed * 10_000 + i``) for its networks, env,
            world model and generators.
        run_seeds: Explicit per-run seeds (e.g. to reproduce run 3 of a batch on its own).
        termination: Known termination function for the imagined rollouts; default: looked up from the env id
            (:func:`mbrl.termination.termination_fn`), else the model's learned termination head.

    Attributes:
        steps_done: Real env steps taken by every run.
        budget: ``cfg.budget``.
        phase: Number of completed phases.
    """

    def __init__(
        self,
        env_fns: Sequence[EnvFn],
        cfg: DynaConfig,
        seed: int,
        run_seeds: Sequence[int] | None = None,
        termination: TerminationFn | None = None,
    ) -> None:
        if not env_fns:
            raise ValueError("need at least one env factory")
        self.cfg = cfg
        self.num_runs = len(env_fns)
        default_seeds = [seed * 10_000 + i for i in range(self.num_runs)]
        self.run_seeds = [int(s) for s in run_seeds] if run_seeds is not None else default_seeds
        if len(self.run_seeds) != self.num_runs:
            raise ValueError(f"need {self.num_runs} run seeds, got {len(self.run_seeds)}")
        self.env_fns = list(env_fns)
        self.envs = [fn() for fn in self.env_fns]
        space = self.envs[0].action_space
        if not isinstance(space, gym.spaces.Discrete):
            raise TypeError(f"Dyna-DQN needs a Discrete action space, got {space}")
        obs_space = self.envs[0].observation_space
        if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 1:
            raise TypeError(f"Dyna-DQN needs a flat Box observation space, got {obs_space}")
        self.num_actions = int(space.n)
        self.obs_dim = int(obs_space.shape[0])
        spec = self.envs[0].spec
        self.env_id = spec.id if spec is not None else type(self.envs[0].unwrapped).__name__
        self.max_episode_steps = int(spec.max_episode_steps) if spec is not None and spec.max_episode_steps else 1000
        learned = termination is None and termination_fn(self.env_id) is None
        self.termination = termination if termination is not None else termination_fn(self.env_id)
        model_cfg = ModelConfig(
            **{**asdict(cfg.model), "learned_termination": learned or cfg.model.learned_termination}
        )
        self.models = [DynamicsModel(self.obs_dim, self.num_actions, True, model_cfg, seed=s) for s in self.run_seeds]
        self.rngs = [np.random.default_rng(s) for s in self.run_seeds]
        self.q = BatchedQNetwork(self.num_runs, self.obs_dim, self.num_actions, cfg.net_arch, self.run_seeds)
        self.q_target = BatchedQNetwork(self.num_runs, self.obs_dim, self.num_actions, cfg.net_arch, self.run_seeds)
        self.q_target.load_state_dict(self.q.state_dict())
        self.q_target.requires_grad_(False)
        self.optimizer = BatchedAdam(list(self.q.parameters()), lr=cfg.learning_rate)
        b, cap = self.num_runs, int(cfg.buffer_size)
        self.buf_obs = np.zeros((b, cap, self.obs_dim), np.float32)
        self.buf_next_obs = np.zeros((b, cap, self.obs_dim), np.float32)
        self.buf_action = np.zeros((b, cap), np.int64)
        self.buf_reward = np.zeros((b, cap), np.float32)
        self.buf_terminated = np.zeros((b, cap), np.float32)
        self.buf_pos, self.buf_size = 0, 0
        self.steps_done, self.phase = 0, 0
        self.budget = int(cfg.budget)
        self.obs = np.stack([env.reset(seed=s)[0] for env, s in zip(self.envs, self.run_seeds, strict=True)])
        for env, s in zip(self.envs, self.run_seeds, strict=True):
            env.action_space.seed(s)
        self.episode_return = np.zeros(b)
        self.episode_length = np.zeros(b, np.int64)
        self.model_fitted = [False] * b
        self.num_real_updates = 0
        self.num_model_updates = 0
        #: Mean ensemble disagreement at each step of the last burst's imagined rollouts, per run (for logging).
        self.last_disagreement_by_step: list[list[float]] = [[] for _ in range(self.num_runs)]

    # --- DQN pieces -------------------------------------------------------------------------------------------

    def exploration_rate(self) -> float:
        """SB3's linear epsilon schedule at the current step."""
        cfg = self.cfg
        progress = self.steps_done / max(cfg.exploration_fraction * self.budget, 1e-12)
        return cfg.exploration_initial_eps + min(progress, 1.0) * (
            cfg.exploration_final_eps - cfg.exploration_initial_eps
        )

    @torch.no_grad()
    def _greedy(self, obs: np.ndarray) -> np.ndarray:
        """Greedy actions ``[B]`` for one observation per run, ``obs [B, obs_dim]``."""
        q = self.q(torch.as_tensor(obs, dtype=torch.float32).unsqueeze(1))
        return q.argmax(dim=-1).squeeze(1).numpy()

    def _act(self) -> np.ndarray:
        eps = self.exploration_rate()
        random_phase = self.steps_done < self.cfg.learning_starts
        greedy = None if random_phase else self._greedy(self.obs)
        actions = np.empty(self.num_runs, np.int64)
        for i, rng in enumerate(self.rngs):
            if random_phase or rng.random() < eps:
                actions[i] = rng.integers(self.num_actions)
            else:
                assert greedy is not None
                actions[i] = greedy[i]
        return actions

    def _dqn_update(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
        mask: np.ndarray | None = None,
    ) -> None:
        """One DQN update of every run on its own minibatch (arrays ``[B, batch, ...]``); masked runs are untouched."""
        obs_t = torch.as_tensor(obs)
        next_t = torch.as_tensor(next_obs)
        with torch.no_grad():
            next_q = self.q_target(next_t).max(dim=-1).values
            target = torch.as_tensor(rewards) + (1.0 - torch.as_tensor(terminated)) * self.cfg.gamma * next_q
        q = self.q(obs_t).gather(-1, torch.as_tensor(actions).unsqueeze(-1)).squeeze(-1)
        per_run = F.smooth_l1_loss(q, target, reduction="none").mean(dim=1)
        mask_t = None if mask is None else torch.as_tensor(mask, dtype=torch.bool)
        loss = per_run.sum() if mask_t is None else (per_run * mask_t).sum()
        self.optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        clip_grad_norm_per_run(self.optimizer.params, self.cfg.max_grad_norm)
        self.optimizer.step(mask_t)

    def _sample_real(self, batch_size: int) -> tuple[np.ndarray, ...]:
        idx = np.stack([rng.integers(0, self.buf_size, size=batch_size) for rng in self.rngs])
        runs = np.arange(self.num_runs)[:, None]
        return (
            self.buf_obs[runs, idx],
            self.buf_action[runs, idx],
            self.buf_reward[runs, idx],
            self.buf_next_obs[runs, idx],
            self.buf_terminated[runs, idx],
        )

    def _env_step(self, phase_returns: list[list[float]]) -> None:
        actions = self._act()
        pos = self.buf_pos
        for i, env in enumerate(self.envs):
            next_obs, reward, terminated, truncated, _ = env.step(int(actions[i]))
            self.buf_obs[i, pos] = self.obs[i]
            self.buf_action[i, pos] = actions[i]
            self.buf_reward[i, pos] = reward
            self.buf_next_obs[i, pos] = next_obs
            self.buf_terminated[i, pos] = float(terminated)  # a time-limit cut still bootstraps
            self.episode_return[i] += float(reward)
            self.episode_length[i] += 1
            if terminated or truncated:
                phase_returns[i].append(float(self.episode_return[i]))
                self.episode_return[i], self.episode_length[i] = 0.0, 0
                next_obs, _ = env.reset()
            self.obs[i] = next_obs
        self.buf_pos = (pos + 1) % self.cfg.buffer_size
        self.buf_size = min(self.buf_size + 1, self.cfg.buffer_size)
        self.steps_done += 1
        cfg = self.cfg
        # SB3 DQN order: target sync is checked after every env step, training after every `train_freq` steps.
        if self.steps_done % max(cfg.target_update_interval, 1) == 0:
            self.q_target.load_state_dict(self.q.state_dict())
        if self.steps_done % cfg.train_freq == 0 and self.steps_done > cfg.learning_starts:
            steps = cfg.train_freq if cfg.gradient_steps < 0 else cfg.gradient_steps
            for _ in range(steps):
                self._dqn_update(*self._sample_real(cfg.batch_size))
                self.num_real_updates += 1

    # --- the model side -------------------------------------------------------------------------------------------

    def _policy(self, run: int, epsilon: float) -> Callable[[np.ndarray], np.ndarray]:
        rng = self.rngs[run]

        @torch.no_grad()
        def act(obs: np.ndarray) -> np.ndarray:
            q = self.q.forward_run(run, torch.as_tensor(obs, dtype=torch.float32))
            actions = q.argmax(dim=-1).numpy()
            if epsilon > 0:
                explore = rng.random(actions.shape[0]) < epsilon
                actions = np.where(explore, rng.integers(0, self.num_actions, size=actions.shape[0]), actions)
            return actions

        return act

    def _fit_models(self, ks: Sequence[int]) -> list[dict[str, float]]:
        data = slice(0, self.buf_size)
        metrics: list[dict[str, float]] = []
        for i, model in enumerate(self.models):
            if ks[i] == 0 and not self.cfg.train_model_when_k0:
                metrics.append({})
                continue
            metrics.append(
                model.fit(
                    self.buf_obs[i, data],
                    self.buf_action[i, data],
                    self.buf_reward[i, data],
                    self.buf_next_obs[i, data],
                    self.buf_terminated[i, data],
                )
            )
            self.model_fitted[i] = True
        return metrics

    def _model_env(self, run: int) -> ModelEnv:
        return ModelEnv(self.models[run], self.termination, self.obs_dim, (), np.int64)

    def _dyna_burst(self, ks: Sequence[int], truncators: Sequence[RolloutTruncator | None]) -> list[dict[str, float]]:
        """Imagined rollouts into a fresh ``D'`` per run, then ``G'`` batched updates on it (Algorithm 1, burst)."""
        cfg = self.cfg
        eps = self.exploration_rate()
        datasets: list[Any] = []
        info: list[dict[str, float]] = []
        for i in range(self.num_runs):
            k = min(int(ks[i]), cfg.k_cap)
            if k <= 0 or not self.model_fitted[i] or self.buf_size == 0:
                self.last_disagreement_by_step[i] = []
                datasets.append(None)
                info.append({"model_transitions": 0.0, "rollout_disagreement_mean": float("nan")})
                continue
            rng = self.rngs[i]
            start = self.buf_obs[i, rng.integers(0, self.buf_size, size=cfg.num_model_rollouts)]
            threshold = None
            truncator = truncators[i]
            if truncator is not None:
                # MACURA calibration: percentile of the disagreement at the first step, on real start states.
                probe = self.models[i].predict(start, self._policy(i, 0.0)(start), rng)
                truncator.keep(0, probe.disagreement)
                threshold = truncator.threshold
            result = self._model_env(i).rollout(start, self._policy(i, eps), k, rng, disagreement_threshold=threshold)
            if result.num_nonfinite:
                self.models[i].restore_last_good()
            datasets.append(result.transitions if len(result.transitions) else None)
            by_step = result.disagreement_by_step
            self.last_disagreement_by_step[i] = list(by_step)
            info.append(
                {
                    "model_transitions": float(len(result.transitions)),
                    "rollout_disagreement_mean": float(np.mean(by_step)) if by_step else float("nan"),
                    "rollout_nonfinite": float(result.num_nonfinite),
                    "rollout_uncertainty_cut": float(result.num_uncertainty_cut),
                    "rollout_seconds": result.seconds,
                }
            )
        mask = np.array([d is not None for d in datasets])
        if mask.any():
            for _ in range(cfg.planning_updates):
                parts: list[list[np.ndarray]] = [[], [], [], [], []]
                for i, data in enumerate(datasets):
                    if data is None:  # placeholder rows; the run's loss is masked out
                        idx = np.zeros(cfg.batch_size, np.int64)
                        src = (
                            self.buf_obs[i, idx],
                            self.buf_action[i, idx],
                            self.buf_reward[i, idx],
                            self.buf_next_obs[i, idx],
                            self.buf_terminated[i, idx],
                        )
                    else:
                        idx = self.rngs[i].integers(0, len(data), size=cfg.batch_size)
                        src = (
                            data.obs[idx],
                            data.action[idx],
                            data.reward[idx],
                            data.next_obs[idx],
                            data.terminated[idx].astype(np.float32),
                        )
                    for part, value in zip(parts, src, strict=True):
                        part.append(value)
                obs, actions, rewards, next_obs, terminated = (np.stack(p) for p in parts)
                self._dqn_update(obs, actions, rewards, next_obs, terminated, mask=mask)
                self.num_model_updates += 1
        return info

    @torch.no_grad()
    def _model_episode(self, run: int, start: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """Greedy episodes in run ``run``'s model (elite means) from start states ``[N, obs_dim]``.

        Returns:
            Returns ``[N]``, lengths ``[N]`` and the mean ensemble disagreement over all steps of all episodes.
        """
        model, n = self.models[run], start.shape[0]
        obs = start.astype(np.float64)
        alive = np.ones(n, bool)
        returns, lengths = np.zeros(n), np.zeros(n, np.int64)
        disagreement: list[np.ndarray] = []
        policy = self._policy(run, 0.0)
        rng = np.random.default_rng(self.run_seeds[run] + 7_919 * (self.phase + 1))
        for _ in range(self.max_episode_steps):
            actions = policy(obs)
            step = model.predict(obs, actions, rng, deterministic=True)
            nxt = np.where(np.isfinite(step.next_obs), step.next_obs, obs)
            if self.termination is not None:
                done = np.asarray(self.termination(obs, actions, nxt), bool)
            elif step.terminated_prob is not None:
                done = step.terminated_prob > 0.5
            else:
                done = np.zeros(n, bool)
            done |= ~step.finite
            disagreement.append(step.disagreement[alive])
            returns += np.where(alive, np.nan_to_num(step.reward), 0.0)
            lengths += alive
            alive &= ~done
            obs = nxt
            if not alive.any():
                break
        return returns, lengths, float(np.mean(np.concatenate(disagreement)))

    # --- evaluation -------------------------------------------------------------------------------------------

    @torch.no_grad()
    def _greedy_episodes(
        self, episodes: int, env_fns: Sequence[EnvFn] | None, seed_offset: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``episodes`` greedy episodes per run, runs in lockstep: returns, lengths ``[B, episodes]``, starts."""
        fns = self.env_fns if env_fns is None else list(env_fns)
        if len(fns) != self.num_runs:
            raise ValueError(f"need {self.num_runs} env factories, got {len(fns)}")
        envs = [fn() for fn in fns]
        b = self.num_runs
        returns, lengths = np.zeros((b, episodes)), np.zeros((b, episodes), np.int64)
        starts = np.zeros((b, episodes, self.obs_dim))
        obs = np.zeros((b, self.obs_dim), np.float32)
        for i, env in enumerate(envs):
            obs[i] = env.reset(seed=self.run_seeds[i] * 1_000 + seed_offset)[0]
            starts[i, 0] = obs[i]
        episode: np.ndarray = np.zeros(b, np.int64)
        while (episode < episodes).any():
            active = episode < episodes
            actions = self._greedy(obs)
            for i in np.flatnonzero(active).tolist():
                next_obs, reward, terminated, truncated, _ = envs[i].step(int(actions[i]))
                returns[i, episode[i]] += float(reward)
                lengths[i, episode[i]] += 1
                if terminated or truncated:
                    episode[i] += 1
                    if episode[i] < episodes:
                        next_obs, _ = envs[i].reset()
                        starts[i, episode[i]] = next_obs
                obs[i] = next_obs
        for env in envs:
            env.close()
        return returns, lengths, starts

    def evaluate(self, episodes: int, env_fns: Sequence[EnvFn] | None = None) -> np.ndarray:
        """Mean greedy return per run over ``episodes`` real episodes, ``[B]``.

        Args:
            episodes: Episodes per run.
            env_fns: Optional other environments (one per run), e.g. perturbed test envs; default: the training envs'
                factories.
        """
        returns, _, _ = self._greedy_episodes(episodes, env_fns, seed_offset=500 + self.phase)
        return returns.mean(axis=1)

    # --- the phase loop ---------------------------------------------------------------------------------------

    def run_phase(
        self, ks: Sequence[int], truncators: Sequence[RolloutTruncator | None] | None = None
    ) -> list[dict[str, float]]:
        """Advance every run by one phase: ``P`` real steps, model refit, Dyna burst with rollout length ``ks[i]``.

        Args:
            ks: Rollout length per run (capped at ``cfg.k_cap``; 0 = no model use).
            truncators: Optional per-run per-step truncation (MACURA-style uncertainty controller); rollouts then run
                up to ``ks[i]`` steps and stop where :meth:`RolloutTruncator.keep` says so.

        Returns:
            One feedback dict per run: ``mean_return`` (greedy evaluation after the phase's real steps, before the
            burst), ``train_return`` (mean return of training episodes finished in the phase, NaN if none),
            ``model_return_error`` / ``model_length_error`` (model episode from the evaluation's start states under
            the same greedy policy, minus the real one; signed), ``model_holdout_loss`` (holdout NLL),
            ``model_holdout_mse``, ``disagreement_mean`` (mean ensemble disagreement along those model episodes),
            ``rollout_disagreement_mean`` (along the burst's imagined rollouts), ``env_steps``,
            ``budget_fraction``, ``k``, ``model_transitions``, ``epsilon``, ``seconds``.
        """
        if len(ks) != self.num_runs:
            raise ValueError(f"need {self.num_runs} rollout lengths, got {len(ks)}")
        if any(int(k) < 0 for k in ks):
            raise ValueError(f"rollout lengths must be >= 0, got {list(ks)}")
        steps = min(self.cfg.phase_length, self.budget - self.steps_done)
        if steps <= 0:
            raise RuntimeError(f"budget of {self.budget} env steps is used up")
        truncs: Sequence[RolloutTruncator | None] = truncators if truncators is not None else [None] * self.num_runs
        started = time.perf_counter()
        phase_returns: list[list[float]] = [[] for _ in range(self.num_runs)]
        for _ in range(steps):
            self._env_step(phase_returns)
        model_metrics = self._fit_models(ks)
        returns, lengths, starts = self._greedy_episodes(self.cfg.eval_episodes, None, seed_offset=self.phase)
        feedback: list[dict[str, float]] = []
        for i in range(self.num_runs):
            fb: dict[str, float] = {
                "mean_return": float(returns[i].mean()),
                "train_return": float(np.mean(phase_returns[i])) if phase_returns[i] else float("nan"),
                "env_steps": float(self.steps_done),
                "budget_fraction": self.steps_done / self.budget,
                "k": float(min(int(ks[i]), self.cfg.k_cap)),
                "epsilon": self.exploration_rate(),
            }
            if self.model_fitted[i]:
                m_ret, m_len, fb["disagreement_mean"] = self._model_episode(i, starts[i])
                fb["model_return_error"] = float(np.mean(m_ret - returns[i]))
                fb["model_length_error"] = float(np.mean(m_len - lengths[i]))
            else:
                fb.update(
                    model_return_error=float("nan"), model_length_error=float("nan"), disagreement_mean=float("nan")
                )
            metrics = model_metrics[i]
            fb["model_holdout_loss"] = metrics.get("model/holdout_nll", float("nan"))
            fb["model_holdout_mse"] = metrics.get("model/holdout_mse", float("nan"))
            fb["model_restored_after_nan"] = metrics.get("model/restored_after_nan", 0.0)
            feedback.append(fb)
        burst = self._dyna_burst(ks, truncs)
        for fb, info in zip(feedback, burst, strict=True):
            fb.update(info)
        self.phase += 1
        elapsed = time.perf_counter() - started
        for fb in feedback:
            fb["seconds"] = elapsed
        return feedback

    @property
    def done(self) -> bool:
        """Whether the budget is used up."""
        return self.steps_done >= self.budget

    # --- persistence ------------------------------------------------------------------------------------------

    def _env_state(self, env: gym.Env) -> dict[str, Any] | None:
        base = env.unwrapped
        if not hasattr(base, "state"):
            return None
        limit = _time_limit(env)
        return {
            "state": torch.as_tensor(np.asarray(base.state, dtype=np.float64)),
            "elapsed": int(getattr(limit, "_elapsed_steps", 0) or 0),
            "np_random": _rng_state(base.np_random),
        }

    def _load_env_state(self, env: gym.Env, state: Mapping[str, Any] | None, index: int) -> None:
        if state is None:  # an env without a restorable `state`: start a fresh episode instead
            self.obs[index] = env.reset(seed=self.run_seeds[index] + 1_000_003 * self.phase)[0]
            self.episode_return[index], self.episode_length[index] = 0.0, 0
            return
        base: Any = env.unwrapped
        base.state = state["state"].numpy().copy()
        limit = _time_limit(env)
        if limit is not None:
            setattr(limit, "_elapsed_steps", int(state["elapsed"]))  # noqa: B010 - private counter of TimeLimit
        _set_rng_state(base.np_random, state["np_random"])

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly (for classic-control envs): networks, optimizer, buffers, models,
        generators, env states and counters; tensors and plain data only (``weights_only`` loading)."""
        filled = slice(0, self.buf_size)
        return {
            "q": self.q.state_dict(),
            "q_target": self.q_target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "buffer": {
                "obs": torch.as_tensor(self.buf_obs[:, filled]).clone(),
                "next_obs": torch.as_tensor(self.buf_next_obs[:, filled]).clone(),
                "action": torch.as_tensor(self.buf_action[:, filled]).clone(),
                "reward": torch.as_tensor(self.buf_reward[:, filled]).clone(),
                "terminated": torch.as_tensor(self.buf_terminated[:, filled]).clone(),
                "pos": self.buf_pos,
                "size": self.buf_size,
            },
            "models": [m.state_dict() for m in self.models],
            "model_fitted": list(self.model_fitted),
            "rngs": [_rng_state(r) for r in self.rngs],
            "envs": [self._env_state(env) for env in self.envs],
            "obs": torch.as_tensor(self.obs).clone(),
            "episode_return": torch.as_tensor(self.episode_return).clone(),
            "episode_length": torch.as_tensor(self.episode_length).clone(),
            "steps_done": self.steps_done,
            "phase": self.phase,
            "num_real_updates": self.num_real_updates,
            "num_model_updates": self.num_model_updates,
            "run_seeds": list(self.run_seeds),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot made by :meth:`state_dict` (same number of runs and config)."""
        if list(state["run_seeds"]) != self.run_seeds:
            raise ValueError(f"snapshot is for run seeds {state['run_seeds']}, this object has {self.run_seeds}")
        self.q.load_state_dict(state["q"])
        self.q_target.load_state_dict(state["q_target"])
        self.optimizer.load_state_dict(state["optimizer"])
        buf = state["buffer"]
        size = int(buf["size"])
        self.buf_obs[:, :size] = buf["obs"].numpy()
        self.buf_next_obs[:, :size] = buf["next_obs"].numpy()
        self.buf_action[:, :size] = buf["action"].numpy()
        self.buf_reward[:, :size] = buf["reward"].numpy()
        self.buf_terminated[:, :size] = buf["terminated"].numpy()
        self.buf_pos, self.buf_size = int(buf["pos"]), size
        for model, saved in zip(self.models, state["models"], strict=True):
            model.load_state_dict(saved)
        self.model_fitted = [bool(f) for f in state["model_fitted"]]
        for rng, saved in zip(self.rngs, state["rngs"], strict=True):
            _set_rng_state(rng, saved)
        self.steps_done, self.phase = int(state["steps_done"]), int(state["phase"])
        self.num_real_updates = int(state["num_real_updates"])
        self.num_model_updates = int(state["num_model_updates"])
        self.obs = state["obs"].numpy().astype(np.float32).copy()
        self.episode_return = state["episode_return"].numpy().copy()
        self.episode_length = state["episode_length"].numpy().copy()
        for i, (env, saved) in enumerate(zip(self.envs, state["envs"], strict=True)):
            self._load_env_state(env, saved, i)
