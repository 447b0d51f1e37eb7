"""PETS: probabilistic ensembles with trajectory sampling (Chua et al. 2018), on the world model of ``mbrl``.

The driver alternates acting and fitting on the same :class:`~mbrl.models.DynamicsModel` and fitting rules as MBPO
(fit until the holdout stops improving, normalizers refit with the weights, ``model/holdout_nmse`` logged):

* ``initial_random_steps`` uniform-random env steps, then a model fit every ``model_train_freq`` env steps on every
  real transition so far (PETS refits after each trial; on a step clock the refits fall at the same points in every
  run whatever the episode lengths);
* at every fit the rollout-length controller (``mbrl.phases.RolloutLengthDriver``, the one owner of that decision)
  sets the *planning horizon*, with the same feedback vocabulary as MBPO and Dyna-DQN;
* every env step the :class:`~planning.mpc.planner.MPCPlanner` re-plans with CEM or MPPI over sequences scored by
  :class:`~planning.mpc.trajectories.TrajectoryEvaluator` (TS-inf by default) with the env's known reward
  (``mbrl.rewards``) and termination (``mbrl.termination``) functions.

Evaluation runs the planner on ``eval_episodes`` episodes of a separate environment, seeded as MBPO's evaluation, with
its own generator and an empty warm start, so evaluating never changes what training does. The run writes
``runs/pets-<env>__<seed>__<time>/`` like the other learners (``config.yaml``, ``progress.csv``, TensorBoard,
``checkpoint.pt`` every ``checkpoint_every`` env steps, ``result.json``); :meth:`PETS.resume` continues a killed run
to the same budget. The episode in progress is saved as its reset seed and its actions
(:class:`rolloutlab.run_state.EpisodeReplay`, as MBPO's) together with the planner's kept plan, and replayed on
resume, so a run killed at a checkpoint and resumed ends exactly as the uninterrupted run does (on the same device,
machine and thread count).
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.logger import Logger

from mbrl.algorithms.base import ControllerInput, EnvInput, ModelBasedRun, config_with_inputs
from mbrl.models import ModelConfig
from mbrl.phases import FEEDBACK_KEYS, truncator_of
from mbrl.rewards import known_env_names as known_reward_envs
from mbrl.rewards import reward_fn
from meta.control import RolloutLengthController, make_controller
from planning.mpc.optimizers import ActionSequenceOptimizer, CEMConfig, CEMOptimizer, MPPIConfig, MPPIOptimizer
from planning.mpc.planner import MPCPlanner, planner_generator
from planning.mpc.trajectories import PROPAGATIONS, TrajectoryEvaluator
from rolloutlab.config import load_config_or_defaults, to_dict

CHECKPOINT_KIND = "pets-run"
OPTIMIZERS = ("cem", "mppi")
REWARD_SOURCES = ("known", "model")


def _pets_model_config() -> ModelConfig:
    # PETS's ensemble of 5 probabilistic networks, narrower than MBPO's 7x4x200: the planner evaluates
    # population x particles rows per step, and 3 layers of 64 keep a CEM step near 20 ms on one CPU core while
    # fitting Pendulum and InvertedPendulum's smooth dynamics (see docs/pets.md for the measured cost). Fused Adam:
    # the fits of the float32 planner's committed runs (experiments/mbrl/results/pets_float32.json).
    return ModelConfig(ensemble_size=5, num_elites=5, hidden_size=64, num_layers=3, fused_optimizer=True)


@dataclass
class PETSConfig:
    """One PETS run. Env steps are the unit of every budget and period.

    Attributes:
        env_id: Gymnasium id with a flat Box observation space and a Box action space.
        total_steps: Interaction budget in env steps; a resumed run stops at the same number.
        seed: Seeds numpy, torch, env resets, the model and the planner.
        controller: Planning-horizon controller spec (the rollout-length registry, e.g. ``fixed:15``); every
            decision must be ``>= 1``.
        optimizer: ``"cem"`` or ``"mppi"``.
        propagation: ``"tsinf"``, ``"ts1"`` or ``"expectation"`` (``planning.mpc.trajectories``).
        num_particles: Particles per candidate sequence.
        sample_noise: Sample the members' Gaussians while planning (PETS) or use their means.
        reward: ``"known"`` (the env's reward function from ``mbrl.rewards``; an error if it has none) or
            ``"model"`` (the model's learned reward).
        initial_random_steps: Uniform-random env steps before the first fit.
        model_train_freq: Env steps between model fits (each one also a horizon decision).
        real_buffer_size: Capacity of the real buffer.
        eval_every: Env steps between evaluations (0: never).
        eval_episodes: Episodes per evaluation.
        stop_at_return: End the run early once an evaluation's mean return reaches this (``None``: never); a
            steps-to-threshold benchmark needs nothing after that point.
        checkpoint_every: Env steps between whole-run checkpoints (0: only at the end).
        log_every: Env steps between logger dumps.
        device: Where the world model fits and predicts (every planning step's batched model calls): ``cpu`` (the
            default, the tested path of every committed result), ``cuda``, ``cuda:N`` or ``auto``
            (:func:`rolloutlab.device.resolve_device`). The planner computes there too (float32 torch); the known
            rewards and terminations are numpy on the CPU, and the random draws come from a CPU generator.
        cem: CEM settings (used when ``optimizer == "cem"``).
        mppi: MPPI settings (used when ``optimizer == "mppi"``).
        model: World-model settings.
    """

    env_id: str = "Pendulum-v1"
    total_steps: int = 2_000
    seed: int = 0
    controller: str = "fixed:15"
    optimizer: str = "cem"
    propagation: str = "tsinf"
    num_particles: int = 5
    sample_noise: bool = True
    reward: str = "known"
    initial_random_steps: int = 200
    model_train_freq: int = 200
    real_buffer_size: int = 1_000_000
    eval_every: int = 500
    eval_episodes: int = 5
    stop_at_return: float | None = None
    checkpoint_every: int = 1_000
    log_every: int = 1_000
    device: str = "cpu"
    cem: CEMConfig = field(default_factory=CEMConfig)
    mppi: MPPIConfig = field(default_factory=MPPIConfig)
    model: ModelConfig = field(default_factory=_pets_model_config)


def check_config(cfg: PETSConfig, controller: RolloutLengthController | None = None) -> int:
    """Refuse a configuration that cannot run, before any work starts; returns the first planning horizon.

    Args:
        cfg: The run's configuration.
        controller: The run's controller object (default: built from ``cfg.controller``); a copy of it is asked
            for the first horizon, so the run's own controller starts untouched.

    Raises:
        ValueError: unknown optimizer / propagation / reward source, a non-positive period, or a controller whose
            first decision is a horizon below 1 (e.g. ``fixed:0``) or that truncates per step (``uncertainty``).
    """
    if cfg.optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {cfg.optimizer!r}; choose one of {', '.join(OPTIMIZERS)}")
    if cfg.propagation not in PROPAGATIONS:
        raise ValueError(f"unknown propagation {cfg.propagation!r}; choose one of {', '.join(PROPAGATIONS)}")
    if cfg.reward not in REWARD_SOURCES:
        raise ValueError(f"unknown reward source {cfg.reward!r}; choose one of {', '.join(REWARD_SOURCES)}")
    if cfg.reward == "known" and reward_fn(cfg.env_id) is None:
        raise ValueError(
            f"no known reward function for {cfg.env_id} (known: {', '.join(known_reward_envs())}); register one "
            "with mbrl.rewards.register_reward_fn or plan with the model's learned reward (reward: model)"
        )
    if cfg.total_steps < 1 or cfg.model_train_freq < 1 or cfg.initial_random_steps < 1:
        raise ValueError(
            "total_steps, model_train_freq and initial_random_steps must be >= 1 (the planner needs a fitted model), "
            f"got {cfg.total_steps}, {cfg.model_train_freq}, {cfg.initial_random_steps}"
        )
    controller = make_controller(cfg.controller) if controller is None else copy.deepcopy(controller)
    if truncator_of(controller) is not None:
        raise ValueError(f"{cfg.controller!r} truncates imagined rollouts per step; PETS needs a horizon controller")
    probe = {key: math.nan for key in FEEDBACK_KEYS}
    probe.update(env_steps=0, budget_fraction=0.0, epoch=0, current_length=0)
    first = int(controller.decide(probe))
    if first < 1:
        raise ValueError(f"controller {cfg.controller!r} sets a planning horizon of {first}; PETS needs >= 1")
    return first


class PETS(ModelBasedRun[PETSConfig]):
    """The PETS driver. Build with a config, an env and a horizon controller, call :meth:`learn`; :meth:`resume`
    continues a checkpointed run.

    ::

        run = PETS(PETSConfig(total_steps=1_000), env="Pendulum-v1", controller="fixed:15").learn()

    Args:
        cfg: The run's configuration (default: the config class's defaults) (checked by :func:`check_config`).
        run_dir: Where logs, checkpoints and ``result.json`` go; ``None`` creates ``runs/pets-<env>__<seed>__<time>``.
        logger: An SB3 logger; ``None`` makes one writing stdout, CSV and TensorBoard into ``run_dir``.
        log_formats: Formats for the default logger.
        env: The env to train on, instead of ``cfg.env_id``: an id, or a ``gymnasium.Env`` object trained on as it
            is (``cfg.env_id`` becomes its id); evaluations then use ``eval_env``, else ``gym.make(env.spec)``.
        eval_env: An env object to evaluate on (reset with the evaluation seeds each time).
        controller: The rollout-length controller, instead of ``cfg.controller``: a spec, or a
            :class:`~meta.control.RolloutLengthController` object used as it is (its state is checkpointed).
            A run built from an env or controller object resumes with ``resume(run_dir, env=..., controller=...)``.

    Attributes:
        planner: The training planner (its ``latencies`` are the per-step planning times).
        horizon: The planning horizon in force (the controller's last decision).
        stopped_early: An evaluation reached ``stop_at_return`` and the run ended there.

    The loop, the other counters and checkpoints are :class:`~mbrl.algorithms.base.ModelBasedRun`'s.
    """

    name = "pets"
    checkpoint_kind = CHECKPOINT_KIND
    config_type = PETSConfig
    action_space_need = "continuous actions (a flat Box action space)"

    def __init__(
        self,
        cfg: PETSConfig | None = None,
        run_dir: str | Path | None = None,
        logger: Logger | None = None,
        log_formats: tuple[str, ...] = ("stdout", "csv", "tensorboard"),
        *,
        env: EnvInput | None = None,
        eval_env: gym.Env | None = None,
        controller: ControllerInput | None = None,
    ) -> None:
        cfg = config_with_inputs(cfg if cfg is not None else PETSConfig(), env, controller)
        first_horizon = check_config(cfg, controller if isinstance(controller, RolloutLengthController) else None)
        super().__init__(cfg, run_dir, logger, log_formats, env=env, eval_env=eval_env, controller=controller)
        self.eval_env = self.make_eval_env()
        self.evaluator = TrajectoryEvaluator(
            self.model,
            reward_fn(cfg.env_id) if cfg.reward == "known" else None,
            self.done_fn,
            propagation=cfg.propagation,
            num_particles=cfg.num_particles,
            sample_noise=cfg.sample_noise,
        )
        self.horizon = first_horizon  # in force until the first fit's decision
        self.planner = MPCPlanner(self.evaluator, self._optimizer(), self.horizon, planner_generator(cfg.seed, 31_337))
        self.evaluations = 0
        self.eval_seconds = 0.0
        self.fit_seconds = 0.0
        self.stopped_early = False

    def _optimizer(self) -> ActionSequenceOptimizer:
        if self.cfg.optimizer == "cem":
            return CEMOptimizer(self.action_low, self.action_high, self.cfg.cem)
        return MPPIOptimizer(self.action_low, self.action_high, self.cfg.mppi)

    # --- the loop ---------------------------------------------------------------------------------------------

    def _on_episode_start(self) -> None:
        self.planner.reset()

    def _before_env_step(self) -> None:
        due = self.env_steps - self.cfg.initial_random_steps
        if due >= 0 and due % self.cfg.model_train_freq == 0:
            self._fit_and_decide()

    def _act(self, obs: np.ndarray) -> np.ndarray:
        return self.planner.act(obs)

    def _after_evaluation(self, mean_return: float) -> None:
        if self.cfg.stop_at_return is not None and mean_return >= self.cfg.stop_at_return:
            self.stopped_early = self.stop_requested = True

    def _fit_and_decide(self) -> None:
        """Refit the model on every real transition, then let the controller set the planning horizon."""
        t0 = time.perf_counter()
        data = self.real.all()
        metrics = self.model.fit(data.obs, data.action, data.reward, data.next_obs, data.terminated)
        self.fit_seconds += time.perf_counter() - t0
        if metrics.get("model/restored_after_nan", 0.0) > 0:
            self.logger.log(f"model: non-finite training loss at step {self.env_steps}; kept the last good weights")
        self.model_fits += 1
        self.last_model_metrics = metrics
        for key, value in metrics.items():
            self.logger.record(key, value)
        nan = math.nan
        feedback = self._feedback_from_model_and_returns(metrics)
        feedback |= {
            "model_return_error": nan,
            "model_length_error": nan,
            "disagreement_mean": nan,
        }
        decided = self.driver.decide(self.env_steps / self.cfg.total_steps, [feedback], epoch=self.model_fits - 1)[0]
        if decided < 1:
            raise ValueError(
                f"controller {self.cfg.controller!r} set a planning horizon of {decided} at env step {self.env_steps}; "
                "PETS needs >= 1"
            )
        self.horizon = int(decided)
        self.planner.horizon = self.horizon
        self.logger.record("meta/planning_horizon", self.horizon)

    def evaluate(self) -> float:
        """Mean return of the planner over ``eval_episodes`` episodes, seeded as MBPO's evaluation.

        The first episode resets with ``seed + 10_000`` and the rest continue that generator (what SB3's
        ``evaluate_policy`` on a reseeded ``DummyVecEnv`` does), so every arm of a comparison meets the same starts.
        """
        t0 = time.perf_counter()
        planner = MPCPlanner(
            self.evaluator,
            self.planner.optimizer,
            self.horizon,
            planner_generator(self.cfg.seed, 10_000, self.evaluations),
        )
        # Before the first fit the planner has no model: uniform actions from this evaluation's own generator.
        random_actions = np.random.default_rng([self.cfg.seed, 10_001, self.evaluations])
        returns = []
        for episode in range(self.cfg.eval_episodes):
            obs, _ = self.eval_env.reset(seed=self.cfg.seed + 10_000 if episode == 0 else None)
            planner.reset()
            total, done = 0.0, False
            while not done:
                if self.model.fitted:
                    action = planner.act(obs)
                else:
                    action = random_actions.uniform(self.action_low, self.action_high).astype(np.float32)
                obs, reward, terminated, truncated, _ = self.eval_env.step(action)
                total += float(reward)
                done = bool(terminated or truncated)
            returns.append(total)
        mean = float(np.mean(returns))
        self.evaluations += 1
        self.eval_history.append((self.env_steps, mean))
        self.eval_seconds += time.perf_counter() - t0
        self.logger.record("eval/mean_reward", mean)
        return mean

    def latency_ms(self) -> dict[str, float]:
        """Median and 95th percentile of the training planner's per-step wall time, in ms (NaN before any)."""
        lat = np.asarray(self.planner.latencies, dtype=np.float64) * 1000.0
        if lat.size == 0:
            return {"plan_ms_p50": math.nan, "plan_ms_p95": math.nan}
        return {"plan_ms_p50": float(np.percentile(lat, 50)), "plan_ms_p95": float(np.percentile(lat, 95))}

    def _record_progress(self) -> None:
        for key, value in self.latency_ms().items():
            self.logger.record(f"time/{key}", value)
        self.logger.record("meta/planning_horizon", self.horizon)

    # --- results and persistence ------------------------------------------------------------------------------

    def result(self) -> dict[str, Any]:
        """Summary written to ``result.json``: counters, evaluation curve, episode returns, latencies and costs."""
        return {
            "algo": "pets",
            "env_id": self.cfg.env_id,
            "seed": self.cfg.seed,
            "env_steps": self.env_steps,
            "episodes": self.episodes,
            "stopped_early": self.stopped_early,
            "eval": [[s, r] for s, r in self.eval_history],
            "episode_returns": [[s, r] for s, r in self.episode_returns],
            "final_eval_return": self.eval_history[-1][1] if self.eval_history else None,
            "model_fits": self.model_fits,
            "fit_seconds": self.fit_seconds,
            "eval_seconds": self.eval_seconds,
            "horizons": list(self.driver.schedules[0]),
            **self.latency_ms(),
            "config": to_dict(self.cfg),
        }

    def _generators(self) -> dict[str, np.random.Generator | torch.Generator]:
        return {"run": self.rng, "planner": self.planner.generator}

    def _counters(self) -> dict[str, int | float]:
        return {
            "evaluations": self.evaluations,
            "horizon": self.horizon,
            "eval_seconds": self.eval_seconds,
            "fit_seconds": self.fit_seconds,
            "stopped_early": int(self.stopped_early),
        }

    def _load_counters(self, counters: dict[str, Any]) -> None:
        self.evaluations = int(counters["evaluations"])
        self.horizon = int(counters["horizon"])
        self.planner.horizon = self.horizon
        self.eval_seconds = float(counters["eval_seconds"])
        self.fit_seconds = float(counters["fit_seconds"])
        self.stopped_early = self.stop_requested = bool(counters["stopped_early"])

    def _episode_extra(self) -> dict[str, Any]:
        return {"planner": self.planner.state_dict()}  # the kept plan that warm-starts the next step

    def _restore_episode_extra(self, episode: dict[str, Any]) -> None:
        self.planner.load_state_dict(episode["planner"])

    def _extra_state(self) -> dict[str, Any]:
        return {"latencies": [float(x) for x in self.planner.latencies]}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self.planner.latencies = [float(x) for x in state["latencies"]]


def load_config(path: str | Path | None, overrides: dict[str, Any]) -> PETSConfig:
    """A :class:`PETSConfig` from an optional YAML preset plus command-line overrides (overrides win)."""
    return load_config_or_defaults(PETSConfig, path, overrides)
