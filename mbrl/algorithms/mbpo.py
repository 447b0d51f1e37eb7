"""MBPO: model-based policy optimization with SB3's SAC as the policy learner (Janner et al. 2019, Algorithm 2).

A thin driver that assembles the parts:

* the real environment fills a :class:`~mbrl.buffers.TransitionBuffer` (terminated and truncated kept apart);
* every ``model_train_freq`` env steps the :class:`~mbrl.models.DynamicsModel` is refit on all real data, the
  controller is asked for the rollout length ``h`` (once per epoch), and ``rollout_batch_size`` imagined rollouts of
  ``h`` steps from real start states go into a :class:`~mbrl.buffers.ModelBuffer` that keeps ``model_retain_epochs``
  epochs;
* after every env step SB3's ``SAC.train`` makes ``updates_per_step`` (G) gradient updates on batches from a
  :class:`~mbrl.buffers.MixedReplayBuffer` holding ``real_ratio`` real data;
* the whole run (policy, optimizers, model and normalizers, both buffers, controller state, RNG states, counters) is
  checkpointed atomically every ``checkpoint_every`` env steps, and :meth:`MBPO.resume` continues it to the same
  final budget. The episode in progress is saved as its reset seed and its actions
  (:class:`rolloutlab.run_state.EpisodeReplay`) and replayed on resume, so a run killed at a checkpoint and resumed
  ends exactly as the uninterrupted run does (on the same machine and thread count). Episodes are reset with seeds
  derived from the run seed and the episode index.

Non-finite model losses or predictions make the run fall back to the last good model weights, logged as
``model/restored_after_nan``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv

from mbrl.algorithms.base import ControllerInput, EnvInput, ModelBasedRun, config_with_inputs, episode_step_limit
from mbrl.algorithms.sac_backends import check_backend, learner_state, load_learner_state, make_sac, td_terms
from mbrl.buffers import MixedReplayBuffer, ModelBuffer
from mbrl.model_env import ModelEnv, RolloutResult
from mbrl.models import ModelConfig
from mbrl.phases import TD_SAMPLE
from rolloutlab.config import load_config_or_defaults, to_dict

CHECKPOINT_KIND = "mbpo-run"


@dataclass
class SACConfig:
    """SB3 SAC settings used by MBPO (SB3 defaults unless noted).

    Attributes:
        learning_rate: Adam step size of actor, critics and entropy coefficient.
        batch_size: Transitions per gradient update (real and model mixed).
        gamma: Discount factor.
        tau: Polyak coefficient of the target critics.
        net_arch: Hidden layer widths of actor and critics.
        ent_coef: ``"auto"`` (learned, target entropy ``-act_dim``) or a fixed float as a string.
        backend: How the updates run (``mbrl.algorithms.sac_backends``): ``"sb3"`` (SB3's ``SAC.train``, the
            default and the backend of every committed result) or ``"fused"`` (the same update with fused Adam, no
            discarded critic gradients and one-op Polyak averaging; equal to float32 rounding, faster per update) or
            ``"sbx"`` (SBX's JAX SAC, the ``sbx`` extra: the fastest update on a CPU, other arithmetic and random
            streams than SB3's, so a different run for the same seed; computes on JAX's default device).
    """

    learning_rate: float = 3e-4
    batch_size: int = 256
    gamma: float = 0.99
    tau: float = 0.005
    net_arch: list[int] = field(default_factory=lambda: [256, 256])
    ent_coef: str = "auto"
    backend: str = "sb3"


def _mbpo_model_config() -> ModelConfig:
    # MBPO's 7x4x200 ensemble, fit until the holdout stops improving (no small epoch cap: an earlier cap of 50 epochs
    # left the model far from converged while it supplied 95% of SAC's data).
    return ModelConfig()


@dataclass
class MBPOConfig:
    """One MBPO run. Env steps are the unit of every budget and period.

    Attributes:
        env_id: Gymnasium id; the ``rolloutlab/`` ids of :mod:`envs` resolve too.
        total_steps: Interaction budget in env steps; a resumed run stops at the same number.
        seed: Seeds numpy, torch, env resets, action sampling and the model.
        controller: Rollout-length controller spec, e.g. ``fixed:1`` or ``linear:20,100,1,15``.
        initial_random_steps: Uniform-random exploration steps before the first model fit and policy update.
        epoch_length: Env steps per epoch; the controller decides once per epoch and the model buffer retains
            ``model_retain_epochs`` epochs.
        model_train_freq: Env steps between model refits (each followed by a rollout round), MBPO's F.
        rollout_batch_size: Imagined rollouts started per round (start states drawn from the real buffer without
            replacement while it holds enough). MBPO's default (Janner et al. 2019, appendix C): 100k per round.
        updates_per_step: SAC gradient updates per env step, MBPO's G.
        real_ratio: Share of real transitions in each SAC batch.
        model_retain_epochs: Epochs of imagined data kept in the model buffer (4 epochs of 250 steps: MBPO's pool of
            one 1000-step epoch of rounds).
        model_error_episodes: Real episodes behind the ``model_return_error`` / ``model_length_error`` feedback at
            each decision (0: not computed, NaN).
        real_buffer_size: Capacity of the real buffer.
        eval_every: Env steps between deterministic evaluations (0: never).
        eval_episodes: Episodes per evaluation.
        checkpoint_every: Env steps between whole-run checkpoints (0: only at the end).
        log_every: Env steps between logger dumps.
        device: Where SAC's networks, the world model and the imagined rollouts compute: ``cpu`` (the default, the
            tested path of every committed result), ``cuda``, ``cuda:N`` or ``auto``
            (:func:`rolloutlab.device.resolve_device`). Buffers and environments stay on the CPU; SAC's batches are
            moved to the device by SB3.
        sac: Policy-learner settings.
        model: World-model settings.
    """

    env_id: str = "Pendulum-v1"
    total_steps: int = 10_000
    seed: int = 0
    controller: str = "fixed:1"
    initial_random_steps: int = 500
    epoch_length: int = 250
    model_train_freq: int = 250
    rollout_batch_size: int = 100_000
    updates_per_step: int = 10
    real_ratio: float = 0.05
    model_retain_epochs: int = 4
    model_error_episodes: int = 1
    real_buffer_size: int = 1_000_000
    eval_every: int = 500
    eval_episodes: int = 5
    checkpoint_every: int = 1_000
    log_every: int = 1_000
    device: str = "cpu"
    sac: SACConfig = field(default_factory=SACConfig)
    model: ModelConfig = field(default_factory=_mbpo_model_config)


class MBPO(ModelBasedRun[MBPOConfig]):
    """The MBPO driver. Build with a config, an env and a controller, call :meth:`learn`; :meth:`resume` continues a
    checkpointed run.

    ::

        run = MBPO(MBPOConfig(total_steps=5_000), env=gym.make("Pendulum-v1"), controller=Fixed(1)).learn()

    Args:
        cfg: The run's configuration (default: the config class's defaults).
        run_dir: Where logs, checkpoints and ``result.json`` go; ``None`` creates ``runs/mbpo-<env>__<seed>__<time>``.
        logger: An SB3 logger; ``None`` makes one writing stdout, CSV and TensorBoard into ``run_dir``.
        log_formats: Formats for the default logger.
        env: The env to train on, instead of ``cfg.env_id``: an id, or a ``gymnasium.Env`` object trained on as it
            is (``cfg.env_id`` becomes its id); evaluations then use ``eval_env``, else ``gym.make(env.spec)``.
        eval_env: An env object to evaluate on (reset with the evaluation seeds each time).
        controller: The rollout-length controller, instead of ``cfg.controller``: a spec, or a
            :class:`~meta.control.RolloutLengthController` object used as it is (its state is checkpointed).
            A run built from an env or controller object resumes with ``resume(run_dir, env=..., controller=...)``.

    Attributes:
        sac: SB3's SAC, trained on :attr:`real` and :attr:`model_buffer` mixed.
        model_buffer: The imagined transitions of the last ``model_retain_epochs`` epochs.
        rollout_length: The rollout length in force (the controller's last decision).

    The loop, the other counters and checkpoints are :class:`~mbrl.algorithms.base.ModelBasedRun`'s.
    """

    name = "mbpo"
    checkpoint_kind = CHECKPOINT_KIND
    config_type = MBPOConfig

    def __init__(
        self,
        cfg: MBPOConfig | None = None,
        run_dir: str | Path | None = None,
        logger: Logger | None = None,
        log_formats: tuple[str, ...] = ("stdout", "csv", "tensorboard"),
        *,
        env: EnvInput | None = None,
        eval_env: gym.Env | None = None,
        controller: ControllerInput | None = None,
    ) -> None:
        cfg = config_with_inputs(cfg if cfg is not None else MBPOConfig(), env, controller)
        if cfg.total_steps < 1 or cfg.updates_per_step < 0 or cfg.eval_every < 0 or cfg.checkpoint_every < 0:
            raise ValueError(
                "MBPO needs total_steps >= 1 and updates_per_step, eval_every, checkpoint_every >= 0; got "
                f"{cfg.total_steps}, {cfg.updates_per_step}, {cfg.eval_every}, {cfg.checkpoint_every}"
            )
        check_backend(cfg.sac.backend)
        super().__init__(cfg, run_dir, logger, log_formats, env=env, eval_env=eval_env, controller=controller)
        self.eval_env = DummyVecEnv([lambda: Monitor(self.make_eval_env())])
        self.model_env = ModelEnv(self.model, self.done_fn, self.obs_dim, (self.act_dim,), np.float32)
        self.model_buffer = ModelBuffer(cfg.model_retain_epochs, self.obs_dim, self.act_dim)

        ent_coef: str | float = cfg.sac.ent_coef if cfg.sac.ent_coef.startswith("auto") else float(cfg.sac.ent_coef)
        self.sac = make_sac(
            cfg.sac.backend,
            "MlpPolicy",
            self.env,
            learning_rate=cfg.sac.learning_rate,
            buffer_size=1,  # SB3's own storage is replaced by the mixed buffer below
            batch_size=cfg.sac.batch_size,
            gamma=cfg.sac.gamma,
            tau=cfg.sac.tau,
            ent_coef=ent_coef,
            policy_kwargs={"net_arch": list(cfg.sac.net_arch)},
            seed=cfg.seed,
            device=self.device,
            verbose=0,
        )
        self.sac.replay_buffer = MixedReplayBuffer(
            self.real,
            self.model_buffer,
            cfg.real_ratio,
            self.env.observation_space,
            self.env.action_space,
            self.rng,
            device=self.device,
        )
        self.sac.set_logger(self.logger)

        # MBPO's own counters (saved in checkpoints).
        self.rollout_length = 0
        self.decided_epoch = -1
        self.imagined_total = 0
        self.rollout_seconds = 0.0
        self.nan_restores = 0
        self.train_seconds = 0.0
        self.last_rollout: RolloutResult | None = None
        # What the next decision's feedback reads from the last rollout round (checkpointed; ``last_rollout``,
        # transitions and all, is not).
        self._last_disagreement_by_step: list[float] = []
        self._last_first_step_disagreement = np.zeros(0)

    # --- the loop ---------------------------------------------------------------------------------------------

    def _before_env_step(self) -> None:
        cfg = self.cfg
        if self.env_steps >= cfg.initial_random_steps and self.env_steps % cfg.model_train_freq == 0:
            self._model_round()

    def _after_env_step(self) -> None:
        cfg = self.cfg
        self.sac.num_timesteps = self.env_steps
        if self.env_steps > cfg.initial_random_steps:
            t0 = time.perf_counter()
            self.sac.train(gradient_steps=cfg.updates_per_step, batch_size=cfg.sac.batch_size)
            self.train_seconds += time.perf_counter() - t0

    def _policy_actions(self, obs: np.ndarray) -> np.ndarray:
        action, _ = self.sac.predict(obs, deterministic=False)
        return np.asarray(action, dtype=np.float32)

    def _act(self, obs: np.ndarray) -> np.ndarray:
        return self._policy_actions(obs[None])[0]

    def _feedback(self) -> dict[str, Any]:
        """The shared feedback vocabulary (:data:`mbrl.phases.FEEDBACK_KEYS`) at an epoch's decision point."""
        by_step = list(self._last_disagreement_by_step)
        feedback = self._feedback_from_model_and_returns(self.last_model_metrics)
        feedback |= {
            "rollout_disagreement_mean": float(np.mean(by_step)) if by_step else math.nan,
            "disagreement_by_step": by_step,
            "first_step_disagreement": self._last_first_step_disagreement,
        }
        feedback["td_error_mean"] = self._td_error()
        feedback.update(self._model_errors())
        return feedback

    @torch.no_grad()
    def _td_error(self) -> float:
        """Mean absolute one-step TD error of SAC's first critic against its target critics on up to ``TD_SAMPLE``
        real transitions, bootstrapping with the deterministic action (``td_error_mean``; the entropy term is left
        out so that no policy sample is drawn). The sample comes from its own generator; training is untouched."""
        size = len(self.real)
        if size == 0:
            return math.nan
        rng = np.random.default_rng([self.cfg.seed, 104_729, self.decided_epoch])
        batch = self.real.take(rng.choice(size, min(size, TD_SAMPLE), replace=False))

        def tensor(array: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(array, dtype=torch.float32, device=self.device)

        action = self.sac.policy.scale_action(batch.action.astype(np.float32))
        q, next_q = td_terms(self.sac, batch.obs.astype(np.float32), action, batch.next_obs.astype(np.float32))
        not_done = 1.0 - tensor(batch.terminated)
        target = tensor(batch.reward) + not_done * self.cfg.sac.gamma * tensor(next_q)
        return float((tensor(q) - target).abs().mean())

    def _model_errors(self) -> dict[str, float]:
        """Model-vs-real return and length of the deterministic policy from the same start states.

        ``model_error_episodes`` real episodes (seeded apart from training and evaluation) and model episodes from
        their first states; the errors are model minus real, signed (Bhatia, Thomas & Zilberstein 2022, section 4).
        """
        cfg = self.cfg
        nan = math.nan
        if not self.model.fitted or cfg.model_error_episodes <= 0:
            return {
                "model_return_error": nan,
                "model_length_error": nan,
                "disagreement_mean": nan,
                "disagreement_at_k": nan,
            }
        env = self.make_eval_env()
        max_steps = episode_step_limit(env)
        starts, returns, lengths = [], [], []
        for e in range(cfg.model_error_episodes):
            obs, _ = env.reset(seed=cfg.seed + 20_000 + 1_000 * e + self.decided_epoch)
            starts.append(np.asarray(obs, dtype=np.float32))
            total, steps, done = 0.0, 0, False
            while not done:
                obs, reward, terminated, truncated, _ = env.step(self.sac.predict(obs, deterministic=True)[0])
                total, steps, done = total + float(reward), steps + 1, bool(terminated or truncated)
            returns.append(total)
            lengths.append(steps)
        env.close()

        def policy(obs: np.ndarray) -> np.ndarray:
            return np.asarray(self.sac.predict(obs, deterministic=True)[0], dtype=np.float32)

        rng = np.random.default_rng([cfg.seed, 7_919, self.decided_epoch])
        episodes = self.model_env.episodes(np.stack(starts), policy, max_steps, rng)
        return {
            "model_return_error": float(np.mean(episodes.returns - np.asarray(returns))),
            "model_length_error": float(np.mean(episodes.lengths - np.asarray(lengths))),
            "disagreement_mean": episodes.disagreement,
            "disagreement_at_k": episodes.disagreement_within(self.rollout_length),
        }

    def _model_round(self) -> None:
        """Refit the model, let the controller choose ``h`` (once per epoch), roll out into the model buffer."""
        cfg = self.cfg
        data = self.real.all()
        metrics = self.model.fit(data.obs, data.action, data.reward, data.next_obs, data.terminated)
        self.model_fits += 1
        restored = metrics.get("model/restored_after_nan", 0.0) > 0 or not math.isfinite(metrics["model/holdout_nll"])
        if restored:
            self.model.restore_last_good()
            self.nan_restores += 1
            self.logger.log(f"model: non-finite training loss at step {self.env_steps}; restored last good weights")
        self.last_model_metrics = metrics
        for key, value in metrics.items():
            self.logger.record(key, value)
        self.logger.record("model/restored_after_nan", float(restored))

        epoch = self.env_steps // cfg.epoch_length
        if epoch != self.decided_epoch:
            self.decided_epoch = epoch
            budget_fraction = self.env_steps / cfg.total_steps
            self.rollout_length = self.driver.decide(budget_fraction, [self._feedback()], epoch=epoch)[0]
        self.logger.record("meta/rollout_length", self.rollout_length)
        self._rollout_round(epoch)

    def _rollout_round(self, epoch: int) -> None:
        """``rollout_batch_size`` imagined rollouts of the current length from real start states, stored in the
        model buffer under ``epoch``."""
        cfg = self.cfg
        truncator = self.driver.truncators[0]
        if self.rollout_length <= 0:
            return
        # Start states without replacement while the buffer holds enough (MBPO samples its pool the same way).
        size = len(self.real)
        idx = self.rng.choice(size, size=cfg.rollout_batch_size, replace=size < cfg.rollout_batch_size)
        start = self.real.take(idx).obs
        result = self.model_env.rollout(
            start,
            self._policy_actions,
            self.rollout_length,
            self.rng,
            keep_fn=None if truncator is None else truncator.keep,
        )
        if result.num_nonfinite:
            self.model.restore_last_good()
            self.nan_restores += 1
            self.logger.log(
                f"model: {result.num_nonfinite} non-finite predictions at step {self.env_steps}; "
                "dropped them and restored the last good weights"
            )
        self.logger.record("model/nonfinite_predictions", result.num_nonfinite)
        self.model_buffer.add_batch(result.transitions, epoch)
        self.last_rollout = result
        self._last_disagreement_by_step = list(result.disagreement_by_step)
        self._last_first_step_disagreement = result.first_step_disagreement
        self.imagined_total += len(result.transitions)
        self.rollout_seconds += result.seconds
        for h, value in enumerate(result.disagreement_by_step):
            self.logger.record(f"meta/disagreement_h{h + 1}", value)
        self.logger.record("meta/uncertainty_cut", result.num_uncertainty_cut)
        self.logger.record("model/imagined_transitions", len(result.transitions))
        self.logger.record("model/rollout_seconds", result.seconds)

    def refill_model_buffer(self, epochs: list[int]) -> int:
        """Refill an emptied model buffer with one rollout round per epoch in ``epochs`` from the current model,
        policy and rollout length.

        Used when a run continues from a checkpoint saved without its imagined data (the model buffer is derived data,
        tens of MB on HalfCheetah, that ``save_carry`` in ``experiments/mbrl/arms.py`` leaves out so that a checkpoint
        can be kept between machines). The refilled pool comes from the latest model rather than the models of the
        rounds it replaces, so such a continuation is not bit-identical to the uninterrupted run.

        Returns:
            The number of imagined transitions added.
        """
        before = len(self.model_buffer)
        for epoch in epochs:
            self._rollout_round(int(epoch))
        return len(self.model_buffer) - before

    def evaluate(self) -> float:
        """Mean return of the deterministic policy over ``eval_episodes`` episodes with fixed seeds."""
        from stable_baselines3.common.evaluation import evaluate_policy

        self.eval_env.seed(self.cfg.seed + 10_000)
        result = evaluate_policy(self.sac, self.eval_env, n_eval_episodes=self.cfg.eval_episodes, deterministic=True)
        mean = float(np.mean(result[0]))
        self.eval_history.append((self.env_steps, mean))
        self.logger.record("eval/mean_reward", mean)
        return mean

    def _record_progress(self) -> None:
        self.logger.record("model/model_samples", len(self.model_buffer))
        self.logger.record("meta/rollout_length", self.rollout_length)

    # --- results and persistence ------------------------------------------------------------------------------

    def result(self) -> dict[str, Any]:
        """Summary written to ``result.json``: counters, eval curve, episode returns and costs."""
        return {
            "algo": "mbpo",
            "env_id": self.cfg.env_id,
            "seed": self.cfg.seed,
            "env_steps": self.env_steps,
            "episodes": self.episodes,
            "eval": [[s, r] for s, r in self.eval_history],
            "episode_returns": [[s, r] for s, r in self.episode_returns],
            "final_eval_return": self.eval_history[-1][1] if self.eval_history else None,
            "imagined_transitions": self.imagined_total,
            "rollout_seconds": self.rollout_seconds,
            "model_fits": self.model_fits,
            "nan_restores": self.nan_restores,
            "sac_train_seconds": self.train_seconds,
            "config": to_dict(self.cfg),
        }

    def _counters(self) -> dict[str, int | float]:
        return {
            "rollout_length": self.rollout_length,
            "decided_epoch": self.decided_epoch,
            "imagined_total": self.imagined_total,
            "rollout_seconds": self.rollout_seconds,
            "nan_restores": self.nan_restores,
            "train_seconds": self.train_seconds,
        }

    def _load_counters(self, counters: dict[str, Any]) -> None:
        self.rollout_length = int(counters["rollout_length"])
        self.decided_epoch = int(counters["decided_epoch"])
        self.imagined_total = int(counters["imagined_total"])
        self.rollout_seconds = float(counters["rollout_seconds"])
        self.nan_restores = int(counters["nan_restores"])
        self.train_seconds = float(counters["train_seconds"])

    def _extra_state(self) -> dict[str, Any]:
        """SAC (networks, optimizers, entropy coefficient), the model buffer and the last rollout round's feedback."""
        return {
            "sac": learner_state(self.sac),
            "model_buffer": self.model_buffer.state_dict(),
            "last_rollout_feedback": {
                "disagreement_by_step": list(self._last_disagreement_by_step),
                "first_step_disagreement": torch.as_tensor(self._last_first_step_disagreement),
            },
        }

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        load_learner_state(self.sac, state["sac"])
        self.model_buffer.load_state_dict(state["model_buffer"])
        last = state.get("last_rollout_feedback", {"disagreement_by_step": [], "first_step_disagreement": None})
        self._last_disagreement_by_step = [float(v) for v in last["disagreement_by_step"]]
        first = last["first_step_disagreement"]
        self._last_first_step_disagreement = np.zeros(0) if first is None else first.numpy().copy()
        self.sac.num_timesteps = self.env_steps


def load_config(path: str | Path | None, overrides: dict[str, Any]) -> MBPOConfig:
    """An :class:`MBPOConfig` from an optional YAML preset plus command-line overrides (overrides win)."""
    return load_config_or_defaults(MBPOConfig, path, overrides)
