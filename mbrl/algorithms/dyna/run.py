"""One Dyna-DQN run on a real environment: the driver behind ``rolloutlab mbrl train --algo dyna``.

:class:`DynaDQN` is a :class:`~mbrl.algorithms.dyna.batched.BatchedDynaDQN` with a single run, whose rollout length
``K`` the controller sets before every phase (:class:`mbrl.phases.RolloutLengthDriver`). After each phase it logs the
greedy evaluation, the per-horizon disagreement and the sample counts (the same keys as MBPO, ``docs/mbrl.md``) and
checkpoints the whole run atomically; :meth:`DynaDQN.resume` continues a killed run exactly (each episode in progress
is replayed, :class:`rolloutlab.run_state.EpisodeReplay`). The run directory holds ``config.yaml``, ``progress.csv``,
TensorBoard events, ``checkpoint.pt`` and, at the end, ``result.json``, as MBPO's and PETS's do.

The environment is an id or a ``gymnasium.Env`` object and the controller a spec or a controller object, by the rules
of :mod:`mbrl.algorithms.base` (evaluation envs, what resuming a run built from objects needs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Self

import gymnasium as gym
from stable_baselines3.common.logger import Logger

from mbrl.algorithms.base import (
    CHECKPOINT_NAME,
    ControllerInput,
    EnvInput,
    check_resume_inputs,
    env_id_of,
    eval_env_factory,
    given_objects,
    make_env,
)
from mbrl.algorithms.dyna.batched import BatchedDynaDQN
from mbrl.algorithms.dyna.config import DynaConfig
from mbrl.phases import RolloutLengthDriver
from meta.control import RolloutLengthController, make_controller
from rolloutlab.checkpoint import load_checkpoint, save_checkpoint
from rolloutlab.config import from_dict, save_yaml, to_dict
from rolloutlab.device import resolve_device
from rolloutlab.logs import DEFAULT_FORMATS, announce_resume, make_logger, progress_bar
from rolloutlab.runs import make_run_dir, write_result

__all__ = ["CHECKPOINT_KIND", "DynaDQN"]

#: v2: the rollout-length driver state replaces "controller"; v3: the episode in progress is replayed on resume.
CHECKPOINT_KIND = "dyna-cli-run-v3"


class DynaDQN:
    """One Dyna-DQN run: build it, call :meth:`learn`; :meth:`resume` continues a checkpointed run.

    ::

        run = DynaDQN("CartPole-v1", DynaConfig.for_env("CartPole-v1", budget=20_000), controller="fixed:2").learn()
        print(run.eval_history)  # [(env_steps, greedy mean return), ...] at the end of every phase

    Args:
        env: The env to train on: a registered id (made with :func:`mbrl.algorithms.base.make_env`, and again for
            every evaluation) or a ``gymnasium.Env`` object with discrete actions, trained on as it is; its
            evaluations then use ``eval_env``, else ``gym.make(env.spec)``.
        cfg: The learner's settings; default: rl-zoo's DQN values for the env's family (:meth:`DynaConfig.for_env`).
        seed: Seed of the run's networks, env resets, world model and generator.
        controller: The rollout-length controller: a spec such as ``fixed:2`` or a
            :class:`~meta.control.RolloutLengthController` object used as it is (its state is checkpointed).
        eval_env: An env object to evaluate on (reset with the evaluation seeds each time).
        run_dir: Where logs, checkpoints and ``result.json`` go; ``None`` creates ``runs/dyna-<env>__<seed>__<time>``.
        logger: An SB3 logger; ``None`` makes one writing ``log_formats`` into ``run_dir``.
        log_formats: Formats for the default logger.

    Attributes:
        cfg: The learner's settings.
        env_id: The env's id (an object's ``spec.id``, or its class name when unregistered).
        seed: The run's seed.
        controller_spec: The controller's spec, or ``repr`` of a controller object.
        learner: The batched learner holding the one run (networks, buffers, world model, counters).
        driver: The one owner of the controller's decisions.
        eval_history: ``(env_steps, greedy mean return)`` at the end of every phase.
        given_objects: Which inputs were objects (``"env"``, ``"controller"``): resuming needs them again.
        stop_requested: Set (by a hook) to end :meth:`learn` after the current phase.
        on_phase: Optional hook called with the run after every phase (after its checkpoint).

    Raises:
        ValueError: ``cfg`` is ``None`` and the env's family has no rl-zoo values, or an env object cannot be made
            again for evaluation and no ``eval_env`` was given.
        TypeError: The env's action space is not discrete, or its observation space not a flat Box.
        rolloutlab.device.DeviceError: ``cfg.device`` is not available here.
    """

    name: ClassVar[str] = "dyna"
    checkpoint_kind: ClassVar[str] = CHECKPOINT_KIND

    def __init__(
        self,
        env: EnvInput,
        cfg: DynaConfig | None = None,
        *,
        seed: int = 0,
        controller: ControllerInput = "fixed:1",
        eval_env: gym.Env | None = None,
        run_dir: str | Path | None = None,
        logger: Logger | None = None,
        log_formats: tuple[str, ...] = DEFAULT_FORMATS,
    ) -> None:
        self.env_id = env if isinstance(env, str) else env_id_of(env)
        if cfg is None:
            try:
                cfg = DynaConfig.for_env(self.env_id)
            except ValueError as exc:
                raise ValueError(f"{exc}; pass cfg=DynaConfig(...)") from exc
        self.cfg = cfg
        self.seed = int(seed)
        resolve_device(cfg.device)  # before the run directory: a refused device leaves nothing behind
        rollout_controller = (
            controller if isinstance(controller, RolloutLengthController) else make_controller(controller)
        )
        self.controller_spec = controller if isinstance(controller, str) else repr(controller)
        self.given_objects = given_objects(env, controller)
        make_eval_env = eval_env_factory(env, eval_env)
        train_env: Callable[[], gym.Env] = (lambda: make_env(env)) if isinstance(env, str) else (lambda: env)
        self.run_dir = (
            Path(run_dir)
            if run_dir is not None
            else make_run_dir(f"{self.name}-{self.env_id}", self.seed, config=self.config_dict())
        )
        if not (self.run_dir / "config.yaml").exists():
            self.run_dir.mkdir(parents=True, exist_ok=True)
            save_yaml(self.config_dict(), self.run_dir / "config.yaml")
        self.learner = BatchedDynaDQN(
            [train_env], cfg, seed=self.seed, run_seeds=[self.seed], eval_env_fns=[make_eval_env]
        )
        self.logger = logger if logger is not None else make_logger(self.run_dir, log_formats)
        self.driver = RolloutLengthDriver([rollout_controller], k_cap=cfg.k_cap, logger=self.logger)
        self.eval_history: list[tuple[int, float]] = []
        self.stop_requested = False
        self.on_phase: Callable[[Self], None] | None = None

    @property
    def env_steps(self) -> int:
        """Real env steps taken so far."""
        return int(self.learner.steps_done)

    @property
    def episodes(self) -> int:
        """Finished training episodes."""
        return int(self.learner.episodes[0])

    def config_dict(self) -> dict[str, Any]:
        """What ``config.yaml`` and every checkpoint record: env id, seed, controller spec and the learner's settings
        (``dyna``)."""
        return {"env_id": self.env_id, "seed": self.seed, "controller": self.controller_spec, "dyna": to_dict(self.cfg)}

    # --- the loop ---------------------------------------------------------------------------------------------

    def learn(self) -> Self:
        """Run phases until ``cfg.budget`` env steps (or :attr:`stop_requested`), checkpointing after each, then
        write ``result.json``."""
        bar = progress_bar(self.cfg.budget, self.env_steps, desc=self.name, unit="env step")
        try:
            while not self.learner.done and not self.stop_requested:
                before = self.env_steps
                feedback = self.driver.run_phase(self.learner)
                self._after_phase(feedback[0])
                bar.update(self.env_steps - before)
                if self.on_phase is not None:
                    self.on_phase(self)
        finally:
            bar.close()
        write_result(self.run_dir, self.result())
        return self

    def _after_phase(self, feedback: dict[str, float]) -> None:
        learner, logger = self.learner, self.logger
        self.eval_history.append((int(learner.steps_done), float(feedback["mean_return"])))
        logger.record("eval/mean_reward", feedback["mean_return"])
        # The same per-horizon disagreement and sample-count keys as MBPO logs (docs/mbrl.md).
        for h, value in enumerate(learner.last_disagreement_by_step[0]):
            logger.record(f"meta/disagreement_h{h + 1}", value)
        logger.record("model/real_samples", len(learner.real))
        logger.record("model/model_samples", len(learner.model_buffers[0]))
        logger.dump(int(learner.steps_done))
        self.save()

    def result(self) -> dict[str, Any]:
        """Summary written to ``result.json``: env, seed, controller, env steps, episodes and the evaluation curve."""
        return {
            "algo": self.name,
            "env_id": self.env_id,
            "seed": self.seed,
            "controller": self.controller_spec,
            "env_steps": self.env_steps,
            "episodes": self.episodes,
            "eval": [[s, r] for s, r in self.eval_history],
        }

    # --- persistence ------------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The whole run as plain data: the learner (:meth:`BatchedDynaDQN.state_dict`), the controller's driver,
        the evaluation curve and which inputs were objects."""
        return {
            "algo": self.learner.state_dict(),
            "driver": self.driver.state_dict(),
            "evals": [[s, r] for s, r in self.eval_history],
            "given_objects": list(self.given_objects),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output into this (identically configured) run."""
        self.learner.load_state_dict(state["algo"])
        self.driver.load_state_dict(state["driver"])
        self.eval_history = [(int(s), float(r)) for s, r in state["evals"]]

    def save(self, path: str | Path | None = None) -> Path:
        """Atomically write the whole-run checkpoint (default ``run_dir/checkpoint.pt``)."""
        target = Path(path) if path is not None else self.run_dir / CHECKPOINT_NAME
        return save_checkpoint(target, self.state_dict(), kind=self.checkpoint_kind, config=self.config_dict())

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
            device: Continue on this device instead of the saved one; the checkpoints written from here on say so.
            env: The env, needed again if the run was built from an env object (a fresh one made the same way);
                default: the saved ``env_id``.
            eval_env: As for the constructor.
            controller: The controller, needed again if the run was built from a controller object (a fresh one;
                its saved state is restored into it); default: the saved spec.

        Raises:
            rolloutlab.checkpoint.CheckpointError: No readable checkpoint of this kind in ``run_dir``.
            ValueError: The run was built from an env or controller object and none is passed here.
            rolloutlab.device.DeviceError: The run's device is not available here.
        """
        run_dir = Path(run_dir)
        envelope = load_checkpoint(run_dir / CHECKPOINT_NAME, kind=cls.checkpoint_kind)
        check_resume_inputs(run_dir, envelope["state"].get("given_objects", []), env, controller)
        saved = envelope["config"]
        cfg = from_dict(DynaConfig, saved["dyna"])
        if device is not None:
            cfg = dataclasses.replace(cfg, device=device)
        if logger is None:
            # One progress.csv: the rows the interrupted session wrote after its checkpoint are dropped, then appended.
            logger = make_logger(run_dir, resume_step=int(envelope["state"]["algo"]["steps_done"]))
        run = cls(
            str(saved["env_id"]) if env is None else env,
            cfg,
            seed=int(saved["seed"]),
            controller=str(saved["controller"]) if controller is None else controller,
            eval_env=eval_env,
            run_dir=run_dir,
            logger=logger,
        )
        run.load_state_dict(envelope["state"])
        announce_resume(run_dir, run.env_steps, cfg.budget)
        return run
