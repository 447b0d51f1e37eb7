"""The run around a model-based learner on a real continuous-action environment, shared by MBPO and PETS.

Both drivers do the same thing between their own decisions: step a real env (uniform-random actions first, then the
learner's), fill a :class:`~mbrl.buffers.TransitionBuffer`, fit a :class:`~mbrl.models.DynamicsModel`, let a
rollout-length controller (:class:`~mbrl.phases.RolloutLengthDriver`) decide, evaluate, log, checkpoint and resume
exactly. :class:`ModelBasedRun` owns that loop and that state; a subclass supplies what differs:

* :meth:`~ModelBasedRun._act`: the learner's action in the real env (SAC's policy, the MPC planner);
* :meth:`~ModelBasedRun._before_env_step` / :meth:`~ModelBasedRun._after_env_step`: the model rounds and updates
  that fall between env steps;
* :meth:`~ModelBasedRun.evaluate` and :meth:`~ModelBasedRun.result`;
* the extra state it checkpoints (:meth:`~ModelBasedRun._extra_state` and the hooks beside it).

The episode in progress is checkpointed as its reset seed and actions (:class:`rolloutlab.run_state.EpisodeReplay`)
and replayed on resume, so a run killed at a checkpoint and resumed ends as the uninterrupted run does.

Every learner's run (Dyna-DQN's too) is built from an environment, given as a registered id or as a
``gymnasium.Env`` object, and a rollout-length controller, given as a spec string or as a
:class:`~meta.control.RolloutLengthController` object; :func:`config_with_inputs`, :func:`eval_env_factory` and
:func:`check_resume_inputs` are the rules they share:

* an env id is made with :func:`make_env`, for training and again for every evaluation; an env object is trained on
  as it is, and evaluations use ``eval_env`` if one is given, else a second env made with ``gym.make(env.spec)`` (the
  same id, keyword arguments and recorded wrappers), else (no spec) the run refuses to start;
* the config records the env's id (``env.spec.id``, or the class name of an unregistered env) and the controller's
  spec, or ``repr`` of a controller object;
* a run built from objects records which ones in its checkpoint, and resuming it needs them again (fresh ones built
  the same way): ``resume(run_dir, env=..., controller=...)``; the checkpoint restores their state.
"""

from __future__ import annotations

import abc
import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.logger import Logger

from mbrl.buffers import TransitionBuffer
from mbrl.models import DynamicsModel, ModelConfig
from mbrl.phases import RolloutLengthDriver
from mbrl.termination import termination_fn
from meta.control import RolloutLengthController, make_controller
from rolloutlab.checkpoint import load_checkpoint, save_checkpoint
from rolloutlab.config import from_dict, save_yaml, to_dict
from rolloutlab.device import resolve_device
from rolloutlab.logs import announce_resume, make_logger, progress_bar
from rolloutlab.run_state import EpisodeReplay, capture_rng, restore_rng
from rolloutlab.runs import make_run_dir, write_result
from rolloutlab.seeding import seed_everything

__all__ = [
    "CHECKPOINT_NAME",
    "ControllerInput",
    "EnvInput",
    "ModelBasedRun",
    "RunConfig",
    "check_resume_inputs",
    "config_with_inputs",
    "env_id_of",
    "episode_seed",
    "episode_step_limit",
    "eval_env_factory",
    "given_objects",
    "make_env",
]

CHECKPOINT_NAME = "checkpoint.pt"

#: What a run's environment is built from: a registered id or the env itself.
EnvInput = str | gym.Env
#: What a run's rollout-length controller is built from: a spec such as ``fixed:5`` or the controller itself.
ControllerInput = str | RolloutLengthController


def make_env(env_id: str) -> gym.Env:
    """``gym.make(env_id)``, importing rolloutlab's own envs first so their ids resolve."""
    import envs  # noqa: F401  (registers the rolloutlab/ ids)

    return gym.make(env_id)


def env_id_of(env: gym.Env) -> str:
    """The id an env object was made from (``env.spec.id``), or its class name when it was not made by ``gym.make``.

    Runs look up the env's known termination and reward functions by this id and name their directories after it.
    """
    spec = env.spec
    return spec.id if spec is not None else type(env.unwrapped).__name__


def episode_step_limit(env: gym.Env, default: int = 1000) -> int:
    """The number of steps after which ``env`` truncates an episode: its outermost ``TimeLimit`` wrapper's limit, else
    its spec's ``max_episode_steps``, else ``default``.

    The wrapper comes first because an env object wrapped by hand (``gym.wrappers.TimeLimit(MyEnv(), 200)``) has no
    spec; model episodes that are compared with real ones must stop where the real ones do.
    """
    current: Any = env
    while isinstance(current, gym.Wrapper):
        if isinstance(current, gym.wrappers.TimeLimit):
            return int(current._max_episode_steps)
        current = current.env
    spec = env.spec
    return int(spec.max_episode_steps) if spec is not None and spec.max_episode_steps else int(default)


class _KeepOpen(gym.Wrapper[Any, Any, Any, Any]):
    """A caller's evaluation env, handed out for every evaluation: evaluations close the envs they are given, and
    this one is used again by the next."""

    def close(self) -> None:
        """Leave the wrapped env open."""


def eval_env_factory(env: EnvInput, eval_env: gym.Env | None = None) -> Callable[[], gym.Env]:
    """How a run makes the environments it evaluates on (see the module docstring for the rules).

    Args:
        env: The training env's id or object.
        eval_env: An env object to evaluate on (reset with the evaluation's seeds every time, never closed).

    Returns:
        A factory called once per evaluation (MBPO: once for SB3's evaluation env, and per controller decision for
        the model-error episodes).

    Raises:
        ValueError: ``env`` is an object that ``gym.make`` cannot make again (no spec, or wrappers gymnasium cannot
            rebuild) and no ``eval_env`` was given.
    """
    if eval_env is not None:
        return lambda: _KeepOpen(eval_env)
    if isinstance(env, str):
        return lambda: make_env(env)
    spec = env.spec
    advice = "pass eval_env=<a second env made the same way> for evaluation"
    if spec is None:
        raise ValueError(f"{type(env.unwrapped).__name__} was not made by gym.make (it has no spec); {advice}")
    try:
        gym.make(spec).close()  # refuse now rather than at the first evaluation
    except Exception as exc:
        raise ValueError(f"gym.make cannot make {spec.id} again from its spec ({exc}); {advice}") from exc
    return lambda: gym.make(spec)


def given_objects(env: EnvInput | None, controller: ControllerInput | None) -> list[str]:
    """Which of a run's inputs were objects (``"env"``, ``"controller"``): resuming the run needs them again."""
    objects = [] if env is None or isinstance(env, str) else ["env"]
    return objects + ([] if controller is None or isinstance(controller, str) else ["controller"])


def check_resume_inputs(
    run_dir: str | Path, objects: Sequence[str], env: EnvInput | None, controller: ControllerInput | None
) -> None:
    """Refuse to resume a run built from an env or controller object without one passed again.

    Raises:
        ValueError: The checkpoint in ``run_dir`` lists an object in ``objects`` that is ``None`` here.
    """
    missing = [name for name, given in (("env", env), ("controller", controller)) if name in objects and given is None]
    if missing:
        wanted = ", ".join(f"{name}=..." for name in missing)
        raise ValueError(
            f"the run in {run_dir} was built from {' and '.join(missing)} object(s), which a checkpoint does not "
            f"hold; resume it with resume(run_dir, {wanted}), passing fresh ones made the same way (their saved "
            "state is restored into them)"
        )


def config_with_inputs(cfg: Any, env: EnvInput | None, controller: ControllerInput | None) -> Any:
    """``cfg`` (a run config with ``env_id`` and ``controller`` fields) with those fields set from the run's inputs:
    an id or spec as given, an env object's :func:`env_id_of`, a controller object's ``repr``; ``None`` keeps the
    config's value."""
    changes: dict[str, str] = {}
    if env is not None:
        changes["env_id"] = env if isinstance(env, str) else env_id_of(env)
    if controller is not None:
        changes["controller"] = controller if isinstance(controller, str) else repr(controller)
    return dataclasses.replace(cfg, **changes) if changes else cfg


def episode_seed(seed: int, episode: int) -> int:
    """The reset seed of training episode ``episode`` of a run seeded ``seed`` (MBPO's and PETS's)."""
    # Fresh, reproducible randomness per episode, so a resumed run continues the same episode stream.
    return (seed * 1_000_003 + episode) % 2**31


class RunConfig(Protocol):
    """The fields of a run's config that :class:`ModelBasedRun` reads (:class:`~mbrl.algorithms.MBPOConfig` and
    :class:`~planning.mpc.pets.PETSConfig` have them)."""

    env_id: str
    total_steps: int
    seed: int
    controller: str
    initial_random_steps: int
    real_buffer_size: int
    eval_every: int
    checkpoint_every: int
    log_every: int
    device: str
    model: ModelConfig


ConfigT = TypeVar("ConfigT", bound=RunConfig)


class ModelBasedRun(abc.ABC, Generic[ConfigT]):
    """A model-based learner's run on a real env: the loop, its counters, checkpoints and resume.

    Args:
        cfg: The run's configuration.
        run_dir: Where logs, checkpoints and ``result.json`` go; ``None`` creates ``runs/<name>-<env>__<seed>__<time>``.
        logger: An SB3 logger; ``None`` makes one writing stdout, CSV and TensorBoard into ``run_dir``.
        log_formats: Formats for the default logger.
        env: The env to train on, an id or a ``gymnasium.Env`` object, instead of ``cfg.env_id`` (module docstring).
        eval_env: An env object to evaluate on (default: made like ``env``).
        controller: The rollout-length controller, a spec or an object, instead of ``cfg.controller``; an object is
            used as it is (its ``state_dict`` is checkpointed).

    Attributes:
        env_steps: Real env steps taken so far (the unit of every budget).
        episodes: Real episodes finished.
        model_fits: World-model fits so far.
        eval_history: ``(env_steps, mean return)`` per evaluation.
        episode_returns: ``(env_steps at its end, return)`` per finished training episode.
        real: The real transitions.
        model: The world model.
        driver: The one owner of the controller's decisions (rollout length, planning horizon).
        stop_requested: Set (by a hook or a subclass) to end :meth:`learn` after the current env step.
        on_step: Optional hook called with the run after every env step (after any checkpoint of that step).
    """

    #: Names the run: the default run folder, messages.
    name: ClassVar[str]
    #: The ``kind`` of its checkpoints (:func:`rolloutlab.checkpoint.save_checkpoint`).
    checkpoint_kind: ClassVar[str]
    #: Its config dataclass (to rebuild a run from a checkpoint).
    config_type: ClassVar[type[Any]]
    #: Named in the refusal of a non-continuous action space.
    action_space_need: ClassVar[str] = "a flat Box action space"

    def __init__(
        self,
        cfg: ConfigT,
        run_dir: str | Path | None = None,
        logger: Logger | None = None,
        log_formats: tuple[str, ...] = ("stdout", "csv", "tensorboard"),
        *,
        env: EnvInput | None = None,
        eval_env: gym.Env | None = None,
        controller: ControllerInput | None = None,
    ) -> None:
        cfg = config_with_inputs(cfg, env, controller)
        self.cfg = cfg
        self.device = resolve_device(cfg.device)  # before the run directory: a refused device leaves nothing behind
        #: Which inputs were objects (``"env"``, ``"controller"``), recorded in checkpoints for :meth:`resume`.
        self.given_objects = given_objects(env, controller)
        self.env = env if isinstance(env, gym.Env) else make_env(cfg.env_id)
        #: Makes the envs evaluations run on (:func:`eval_env_factory`).
        self.make_eval_env = eval_env_factory(env if isinstance(env, gym.Env) else cfg.env_id, eval_env)
        obs_space, act_space = self.env.observation_space, self.env.action_space
        if not isinstance(obs_space, spaces.Box) or len(obs_space.shape) != 1:
            raise ValueError(f"{self.name.upper()} needs a flat Box observation space, {cfg.env_id} has {obs_space}")
        if not isinstance(act_space, spaces.Box) or len(act_space.shape) != 1:
            raise ValueError(
                f"{self.name.upper()} needs {self.action_space_need}, {cfg.env_id} has {act_space}; "
                "use --algo dyna for discrete actions"
            )
        self.obs_dim, self.act_dim = int(obs_space.shape[0]), int(act_space.shape[0])
        self.action_low = act_space.low.astype(np.float32)
        self.action_high = act_space.high.astype(np.float32)
        self.run_dir = (
            Path(run_dir) if run_dir is not None else make_run_dir(f"{self.name}-{cfg.env_id}", cfg.seed, config=cfg)
        )
        if not (self.run_dir / "config.yaml").exists():
            self.run_dir.mkdir(parents=True, exist_ok=True)
            save_yaml(cfg, self.run_dir / "config.yaml")
        self.rng = seed_everything(cfg.seed)

        self.done_fn = termination_fn(cfg.env_id)
        model_cfg = cfg.model
        if self.done_fn is None and not model_cfg.learned_termination:
            # No known termination rule for this env: learn one with the model instead of assuming none.
            model_cfg = dataclasses.replace(model_cfg, learned_termination=True)
        self.model = DynamicsModel(self.obs_dim, self.act_dim, False, model_cfg, seed=cfg.seed, device=self.device)
        self.real = TransitionBuffer(cfg.real_buffer_size, self.obs_dim, self.act_dim)
        rollout_controller = (
            controller if isinstance(controller, RolloutLengthController) else make_controller(cfg.controller)
        )
        self.driver = RolloutLengthDriver([rollout_controller])
        self.logger = logger if logger is not None else make_logger(self.run_dir, log_formats)
        self.driver.logger = self.logger

        # Counters and history (all saved in checkpoints).
        self.env_steps = 0
        self.episodes = 0
        self.model_fits = 0
        self.eval_history: list[tuple[int, float]] = []
        self.episode_returns: list[tuple[int, float]] = []
        self.last_model_metrics: dict[str, float] = {}
        self.stop_requested = False
        self._obs: np.ndarray | None = None
        self._episode_return = 0.0
        self._episode = EpisodeReplay()
        self.on_step: Callable[[Self], None] | None = None

    # --- what a learner supplies ------------------------------------------------------------------------------

    @abc.abstractmethod
    def _act(self, obs: np.ndarray) -> np.ndarray:
        """The learner's action for one real observation (after the uniform-random steps)."""

    @abc.abstractmethod
    def evaluate(self) -> float:
        """Evaluate the learner, append ``(env_steps, mean)`` to :attr:`eval_history` and return the mean."""

    @abc.abstractmethod
    def result(self) -> dict[str, Any]:
        """Summary written to ``result.json``."""

    def _on_episode_start(self) -> None:
        """Called after each training episode's reset."""

    def _before_env_step(self) -> None:
        """Called before each env step (model fits and rounds go here)."""

    def _after_env_step(self) -> None:
        """Called after each env step, before evaluation and checkpoints (policy updates go here)."""

    def _after_evaluation(self, mean_return: float) -> None:
        """Called with each evaluation's mean return inside :meth:`learn`."""

    def _record_progress(self) -> None:
        """Record the learner's own values at each logger dump."""

    def _counters(self) -> dict[str, int | float]:
        """The learner's own counters for the checkpoint (restored by :meth:`_load_counters`)."""
        return {}

    def _load_counters(self, counters: dict[str, Any]) -> None:
        """Restore :meth:`_counters` output."""

    def _generators(self) -> dict[str, np.random.Generator | torch.Generator]:
        """The run's named generators, checkpointed with the global random streams."""
        return {"run": self.rng}

    def _episode_extra(self) -> dict[str, Any]:
        """What the learner keeps of the episode in progress besides the env's (e.g. a planner's warm start)."""
        return {}

    def _restore_episode_extra(self, episode: dict[str, Any]) -> None:
        """Restore :meth:`_episode_extra` output, once the episode is replayed."""

    def _extra_state(self) -> dict[str, Any]:
        """The learner's own checkpoint entries besides the shared ones (networks, buffers)."""
        return {}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`_extra_state` output (called last by :meth:`load_state_dict`)."""

    # --- the loop ---------------------------------------------------------------------------------------------

    def learn(self) -> Self:
        """Interact until ``cfg.total_steps`` env steps (or :attr:`stop_requested`), then write ``result.json``."""
        cfg = self.cfg
        started, steps_at_start = time.perf_counter(), self.env_steps
        bar = progress_bar(cfg.total_steps, self.env_steps, desc=self.name, unit="env step")
        try:
            self._learn_loop(started, steps_at_start, bar)
        finally:
            bar.close()
        self.save()
        write_result(self.run_dir, self.result())
        return self

    def _learn_loop(self: Self, started: float, steps_at_start: int, bar: Any) -> None:
        cfg = self.cfg
        while self.env_steps < cfg.total_steps and not self.stop_requested:
            if self._obs is None:
                self._obs, _ = self._episode.reset(self.env, seed=episode_seed(cfg.seed, self.episodes))
                self._episode_return = 0.0
                self._on_episode_start()
            self._before_env_step()
            self._env_step()
            self._after_env_step()
            if cfg.eval_every and self.env_steps % cfg.eval_every == 0:
                self._after_evaluation(self.evaluate())
            if self.env_steps % cfg.log_every == 0 or self.env_steps == cfg.total_steps or self.stop_requested:
                self._dump(started, steps_at_start)
            if cfg.checkpoint_every and self.env_steps % cfg.checkpoint_every == 0:
                self.save()
            bar.update(1)
            if self.on_step is not None:
                self.on_step(self)

    def _env_step(self) -> None:
        assert self._obs is not None
        if self.env_steps < self.cfg.initial_random_steps:
            action = self.rng.uniform(self.action_low, self.action_high).astype(np.float32)
        else:
            action = self._act(self._obs)
        next_obs, reward, terminated, truncated, _ = self._episode.step(self.env, action)
        self.real.add(self._obs, action, float(reward), next_obs, bool(terminated), bool(truncated))
        self._episode_return += float(reward)
        self.env_steps += 1
        self._obs = np.asarray(next_obs, dtype=np.float32)
        if terminated or truncated:
            self.episode_returns.append((self.env_steps, self._episode_return))
            self.logger.record_mean("rollout/ep_rew_mean", self._episode_return)
            self.episodes += 1
            self._obs = None

    def _feedback_from_model_and_returns(self, metrics: dict[str, float]) -> dict[str, Any]:
        """The controller feedback (:data:`mbrl.phases.FEEDBACK_KEYS`) that every learner has: progress through the
        budget, the evaluation curve and the world model's held-out errors from its last fit ``metrics``."""
        evals = [r for _, r in self.eval_history]
        nan = math.nan
        return {
            "env_steps": self.env_steps,
            "budget_fraction": self.env_steps / self.cfg.total_steps,
            "mean_return": evals[-1] if evals else nan,
            "eval_trend": (evals[-1] - evals[-2]) if len(evals) >= 2 else 0.0,
            "model_holdout_loss": metrics.get("model/holdout_nll", nan),
            "model_holdout_mse": metrics.get("model/holdout_mse", nan),
            "model_holdout_nmse": metrics.get("model/holdout_nmse", nan),
        }

    def _dump(self, started: float, steps_at_start: int) -> None:
        elapsed = max(time.perf_counter() - started, 1e-9)
        self.logger.record("time/total_timesteps", self.env_steps)
        self.logger.record("time/fps", (self.env_steps - steps_at_start) / elapsed)
        self.logger.record("model/real_samples", len(self.real))
        self._record_progress()
        self.logger.dump(self.env_steps)

    # --- persistence ------------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The whole run as plain data: model and normalizers, real buffer, controller, RNGs, counters, history,
        the episode in progress (its reset and actions, the observation and return so far) and the learner's own
        state (:meth:`_extra_state`)."""
        return {
            "model": self.model.state_dict(),
            "real_buffer": self.real.state_dict(),
            "driver": self.driver.state_dict(),
            "rng": capture_rng(self._generators()),
            "counters": {
                "env_steps": self.env_steps,
                "episodes": self.episodes,
                "model_fits": self.model_fits,
                **self._counters(),
            },
            "eval_history": [[s, r] for s, r in self.eval_history],
            "episode_returns": [[s, r] for s, r in self.episode_returns],
            "last_model_metrics": dict(self.last_model_metrics),
            # None between episodes: the next step resets with the next episode's seed.
            "episode": None
            if self._obs is None
            else {
                "replay": self._episode.state_dict(),
                "obs": torch.as_tensor(np.asarray(self._obs)).clone(),
                "return": self._episode_return,
                **self._episode_extra(),
            },
            "given_objects": list(self.given_objects),
            **self._extra_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output into this (identically configured) run.

        The episode in progress is replayed in the environment first (:class:`rolloutlab.run_state.EpisodeReplay`);
        a checkpoint written before episodes were saved resumes with a new episode.
        """
        self._obs, self._episode_return = None, 0.0
        episode = state.get("episode")
        if episode is not None:
            obs = self._episode.restore(self.env, episode["replay"], episode["obs"].numpy())
            if obs is not None:
                self._obs = np.asarray(obs, dtype=np.float32)
                self._episode_return = float(episode["return"])
                self._restore_episode_extra(episode)
        self.model.load_state_dict(state["model"])
        self.real.load_state_dict(state["real_buffer"])
        self.driver.load_state_dict(state["driver"])
        restore_rng(state["rng"], self._generators())
        counters = state["counters"]
        self.env_steps = int(counters["env_steps"])
        self.episodes = int(counters["episodes"])
        self.model_fits = int(counters["model_fits"])
        self._load_counters(counters)
        self.eval_history = [(int(s), float(r)) for s, r in state["eval_history"]]
        self.episode_returns = [(int(s), float(r)) for s, r in state["episode_returns"]]
        self.last_model_metrics = {str(k): float(v) for k, v in state["last_model_metrics"].items()}
        self._load_extra_state(state)

    def save(self, path: str | Path | None = None) -> Path:
        """Atomically write the whole-run checkpoint (default ``run_dir/checkpoint.pt``)."""
        target = Path(path) if path is not None else self.run_dir / CHECKPOINT_NAME
        return save_checkpoint(target, self.state_dict(), kind=self.checkpoint_kind, config=to_dict(self.cfg))

    @classmethod
    def resume(
        cls,
        run_dir: str | Path,
        logger: Logger | None = None,
        device: str | None = None,
        *,
        env: EnvInput | None = None,
        eval_env: gym.Env | None = None,
        controller: ControllerInput | None = None,
    ) -> Self:
        """Rebuild a run from its latest checkpoint; :meth:`learn` then continues it to the same budget.

        Args:
            run_dir: The run's directory.
            logger: As for the constructor.
            device: Continue on this device instead of the saved one (a run checkpointed on a GPU continues on a
                machine without one). The resumed run is exact on the device it was saved from; on another device
                the arithmetic (and draws from a device's own generator, such as SAC's action noise) differ.
            env: The env, needed again if the run was built from an env object (a fresh one made the same way);
                default: the saved ``env_id``.
            eval_env: As for the constructor.
            controller: The controller, needed again if the run was built from a controller object (a fresh one;
                its saved state is restored into it); default: the saved spec.

        Raises:
            rolloutlab.checkpoint.CheckpointError: No readable checkpoint of this kind in ``run_dir``.
            ValueError: The run was built from an env or controller object and none is passed here.
        """
        run_dir = Path(run_dir)
        envelope = load_checkpoint(run_dir / CHECKPOINT_NAME, kind=cls.checkpoint_kind)
        check_resume_inputs(run_dir, envelope["state"].get("given_objects", []), env, controller)
        cfg = from_dict(cls.config_type, envelope["config"])
        if device is not None:
            cfg = dataclasses.replace(cfg, device=device)
        step = int(envelope["state"]["counters"]["env_steps"])
        if logger is None:
            # One progress.csv: the rows the interrupted session wrote after its checkpoint are dropped, then appended.
            logger = make_logger(run_dir, resume_step=step)
        run = cls(cfg, run_dir=run_dir, logger=logger, env=env, eval_env=eval_env, controller=controller)
        run.load_state_dict(envelope["state"])
        announce_resume(run_dir, run.env_steps, cfg.total_steps)
        return run
