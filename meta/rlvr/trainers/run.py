"""One ``rolloutlab rlvr train`` run in a run directory: resolved config, logger, checkpoints, kill-and-resume.

A run lives in ``runs/rlvr-<allocator>__<seed>__<time>/`` (:func:`rolloutlab.runs.make_run_dir`):

* ``config.yaml`` — the resolved :class:`GRPORunConfig` (the trainer's :class:`~meta.rlvr.trainers.grpo.GRPOConfig`
  nested);
* ``progress.csv`` and TensorBoard events — an SB3 logger, one row per GRPO step (``rollout/``, ``train/``,
  ``eval/``, ``meta/`` and ``time/`` keys); a resumed session continues the one file from its checkpoint step. Issue
  21's measures are in every row (``rollout/tool_calls``, ``rollout/answer_length``, ``rollout/slow_share``,
  ``rollout/entropy``, ``rollout/completion_tokens``: the step's generated responses and the cumulative tokens) and
  every evaluation (``eval/accuracy``, ``eval/tool_calls``, ``eval/answer_length``, ``eval/slow_share``,
  ``eval/entropy``: greedy answers on the held-out set, :meth:`~meta.rlvr.trainers.grpo.GRPOTrainer.evaluate_details`;
  also in ``result.json``'s ``evals``);
* ``checkpoint.pt`` — written atomically every ``checkpoint_every`` steps and at the end
  (:func:`rolloutlab.checkpoint.save_checkpoint`, kind :data:`CHECKPOINT_KIND`, loaded with ``weights_only``): the
  trainer's :meth:`~meta.rlvr.trainers.grpo.GRPOTrainer.state_dict` (model and optimizer ``state_dict``s, reference
  model, RNG states, prompt order, counters, statistics, response buffer, controller states), the model architecture,
  the evaluation history and the session count;
* ``result.json`` — at the end: the evaluation curve, final held-out accuracy, costs and the config.

:meth:`GRPORun.resume` rebuilds the run from its checkpoint and continues to the original step budget. Every source of
randomness the run draws from is in the checkpoint and CPU kernels are deterministic at a fixed thread count
(:func:`rolloutlab.threads.set_torch_threads`), so a run killed with SIGKILL and resumed ends bit-identical to an
uninterrupted one, having redone at most the ``checkpoint_every`` steps after its last checkpoint. A run killed before
its first checkpoint restarts from step 0 with its ``config.yaml``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.logger import Logger
from tqdm import tqdm

from envs.reasoning import FAMILIES, Task, make_prompt_set, verify
from envs.reasoning.registry import family_spec
from envs.reasoning.scratchpad import SCRATCH_FAMILY, make_scratch_set
from envs.reasoning.tooluse import CALC_FAMILY, CalcOptions, make_calc_set
from meta.rlvr.allocators import make_allocator
from meta.rlvr.guidance import make_guidance
from meta.rlvr.lm.charlm import CharLMConfig, build_model, load_model
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.token import make_token_controller
from meta.rlvr.token.arpo import BranchingRollout
from meta.rlvr.token.eepo import EEPO
from meta.rlvr.token.hapo import HAPO
from meta.rlvr.trainers.dars_breadth import breadth_run_config
from meta.rlvr.trainers.dart import DARTTrainer, make_dart_config
from meta.rlvr.trainers.grpo import GRPOTrainer
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.tools import CalculatorTool
from rolloutlab.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from rolloutlab.config import ConfigError, from_dict, load_yaml, to_dict
from rolloutlab.logs import make_logger
from rolloutlab.runs import make_run_dir, write_result
from rolloutlab.seeding import seed_everything

CHECKPOINT_KIND = "rlvr-grpo-run"
CHECKPOINT_NAME = "checkpoint.pt"
CONFIG_NAME = "config.yaml"
RESULT_NAME = "result.json"
#: Logger outputs: CSV and TensorBoard in the run directory; the console gets the evaluation lines and a progress bar.
LOG_FORMATS = ("csv", "tensorboard")


@dataclass
class GRPORunConfig:
    """Settings of one ``rolloutlab rlvr train`` run.

    Attributes:
        sft_checkpoint: SFT checkpoint (``rolloutlab rlvr sft``) the policy starts from.
        allocator: Allocator spec for :func:`meta.rlvr.allocators.make_allocator`, e.g. ``uniform:8``, ``ar3po:2,4``.
        token_controller: Token-level controller spec for :func:`meta.rlvr.token.make_token_controller`,
            ``hapo:0.2,1`` (HAPO), ``eepo:0.001`` (EEPO's two-stage rollout) or ``arpo:0.5,1`` (ARPO's branches
            after tool results; the ``calc`` family only) or ``ehpo:1,0.1`` (EHPO); empty for none (the default).
        guidance: Guidance controller spec for :func:`meta.rlvr.guidance.make_guidance`: ``guide:0.5`` (Guide's
            hinted resampling of all-wrong groups), ``seele:2`` (SEELE's fitted hint lengths) or
            ``hbpo:0.05,4,6,8,10`` (HBPO's budget subgroups; the ``scratch`` family); empty for none (the default).
        dart: DART spec for :func:`meta.rlvr.trainers.dart.make_dart_config`, ``dart:1,4,8,1,process`` (asynchronous
            rollout workers, bounded staleness) or ``dart_sync:4,8,1,process`` (the synchronous baseline); its
            per-task counts replace ``allocator``; empty for the plain trainer (the default). A ``dars_b``
            allocator sets ``grpo``'s breadth (:func:`meta.rlvr.trainers.dars_breadth.breadth_run_config`).
        steps: GRPO steps in the whole run (a resumed run stops at the same number).
        eval_every: Held-out evaluation period in steps (also at step 0 and at the end).
        checkpoint_every: Steps between checkpoints (0: only at the end); a killed run loses at most this many.
        pool_size: Training prompts, visited in shuffled epochs.
        held_out_size: Held-out prompts (greedy accuracy).
        families: Task families of both prompt sets; ``["calc"]`` alone is the tool-use family (calculator calls
            executed while sampling, :func:`envs.reasoning.tooluse.verify_calc`; the SFT checkpoint must have been
            trained on it, and ``grpo.max_new_tokens`` must fit a trace); ``["scratch"]`` alone is addition with an
            optional scratchpad (:mod:`envs.reasoning.scratchpad`, :func:`~envs.reasoning.scratchpad.verify_scratch`);
            ``["countdown"]`` or ``["carry"]`` alone are those families (:mod:`envs.reasoning.registry`: their
            prompt sets and verifiers).
        difficulties: Digits of the long operand in both prompt sets (``calc``: numbers of operations).
        pool_seed: Seed of the training prompt set.
        held_out_seed: Seed of the held-out set.
        grpo: Trainer settings (``grpo.seed`` seeds the run).
        calc: ``calc`` only: the restricted calculator and operand limits per difficulty
            (:class:`envs.reasoning.tooluse.CalcOptions`; default: off).
    """

    sft_checkpoint: str = "runs/rlvr/sft.pt"
    allocator: str = "uniform:8"
    token_controller: str = ""
    guidance: str = ""
    dart: str = ""
    steps: int = 100
    eval_every: int = 10
    checkpoint_every: int = 10
    pool_size: int = 256
    held_out_size: int = 600
    families: list[str] = field(default_factory=lambda: list(FAMILIES))
    difficulties: list[int] = field(default_factory=lambda: [1, 2, 3])
    pool_seed: int = 1
    held_out_seed: int = 2
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    calc: CalcOptions = field(default_factory=CalcOptions)

    def __post_init__(self) -> None:
        if self.steps < 1 or self.eval_every < 1 or self.checkpoint_every < 0:
            raise ValueError(
                f"need steps >= 1, eval_every >= 1 and checkpoint_every >= 0, got {self.steps}, {self.eval_every}, "
                f"{self.checkpoint_every}"
            )
        if self.pool_size < 1 or self.held_out_size < 1:
            raise ValueError(f"need pool_size >= 1 and held_out_size >= 1, got {self.pool_size}, {self.held_out_size}")


def load_run_config(path: str | Path | None, overrides: Mapping[str, Any]) -> GRPORunConfig:
    """A :class:`GRPORunConfig` from an optional YAML preset plus overrides (overrides win; ``grpo`` merged by key).

    Raises:
        rolloutlab.config.ConfigError: An unknown or mistyped field, or a value the config refuses.
    """
    try:
        data = to_dict(load_yaml(GRPORunConfig, path)) if path is not None else {}
        merged = {**data, **{k: v for k, v in overrides.items() if k != "grpo"}}
        merged["grpo"] = {**data.get("grpo", {}), **dict(overrides.get("grpo", {}))}
        return from_dict(GRPORunConfig, merged)
    except ConfigError:
        raise
    except ValueError as exc:  # the configs' own range checks (__post_init__) raise plain ValueError
        raise ConfigError(str(exc)) from exc


def _on_device(cfg: GRPORunConfig, device: str | None) -> GRPORunConfig:
    """``cfg`` with the trainer moved to ``device`` (``None``: as saved)."""
    if device is None:
        return cfg
    return replace(cfg, grpo=replace(cfg.grpo, device=device))


def _check_arpo(cfg: GRPORunConfig, token: object) -> None:
    """ARPO branches where a tool result ends: refuse it on families without the calculator."""
    if isinstance(token, BranchingRollout) and token.needs_tool and list(cfg.families) != [CALC_FAMILY]:
        raise ValueError(f"ARPO branches after tool results: it needs families [{CALC_FAMILY}], got {cfg.families}")


class GRPORun:
    """A GRPO training run: the trainer, its prompt sets, evaluations, logger and checkpoints.

    Build a new run with :meth:`start` (creates the run directory) or continue one with :meth:`resume`; then call
    :meth:`learn`.

    Args:
        cfg: Run settings.
        model: The policy (loaded from ``cfg.sft_checkpoint`` by :meth:`start`).
        model_config: Its architecture (saved in checkpoints so a resume does not need the SFT file).
        run_dir: Where logs, checkpoints and ``result.json`` go; ``None`` keeps everything in memory.
        progress: Show a tqdm bar over steps (stderr).
        echo: Called with one line per evaluation (e.g. ``typer.echo``); ``None`` is silent.

    Raises:
        ValueError: An unknown allocator spec or task family, or an invalid prompt-set size.
    """

    def __init__(
        self,
        cfg: GRPORunConfig,
        model: torch.nn.Module,
        model_config: CharLMConfig,
        run_dir: str | Path | None = None,
        *,
        progress: bool = False,
        echo: Callable[[str], None] | None = None,
    ) -> None:
        self.cfg = cfg = breadth_run_config(cfg)  # DARS-B's breadth is part of the resolved config
        self.model_config = model_config
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.progress = progress
        self.echo = echo
        seed_everything(cfg.grpo.seed)
        allocator = make_allocator(cfg.allocator)
        token = make_token_controller(cfg.token_controller) if cfg.token_controller else None
        calc = CALC_FAMILY in cfg.families
        if calc and list(cfg.families) != [CALC_FAMILY]:
            raise ValueError(f"the {CALC_FAMILY!r} family is trained alone, got families {cfg.families}")
        _check_arpo(cfg, token)
        scratch = SCRATCH_FAMILY in cfg.families
        if scratch and list(cfg.families) != [SCRATCH_FAMILY]:
            raise ValueError(f"the {SCRATCH_FAMILY!r} family is trained alone, got families {cfg.families}")
        own = sorted(set(cfg.families) - set(FAMILIES))  # families with their own alphabet and verifier
        if own and len(cfg.families) != 1:
            raise ValueError(f"the {own[0]!r} family is trained alone, got families {cfg.families}")
        guidance = make_guidance(cfg.guidance) if cfg.guidance else None
        pool, self.held_out = (
            self._prompt_set(cfg, cfg.pool_size, cfg.pool_seed),
            self._prompt_set(cfg, cfg.held_out_size, cfg.held_out_seed),
        )
        vocab = CharVocab(model_config.alphabet)
        self.trainer = GRPOTrainer(
            model,
            vocab,
            pool,
            allocator,
            cfg.grpo,
            reward_fn=family_spec(cfg.families[0]).verify if own else verify,
            token_controller=token if isinstance(token, HAPO) else None,
            eepo=token if isinstance(token, EEPO) else None,
            branching=token if isinstance(token, BranchingRollout) else None,
            tool=CalculatorTool(vocab, cfg.calc.call_operations) if calc else None,
            guidance=guidance,
        )
        if cfg.dart:
            if cfg.allocator != GRPORunConfig.allocator or cfg.token_controller or getattr(cfg, "guidance", "") or calc:
                raise ValueError("DART sets its own per-task counts: no allocator, token controller, guidance, tool")
            self.trainer = DARTTrainer(
                model, vocab, pool, make_dart_config(cfg.dart), cfg.grpo, reward_fn=self.trainer.reward_fn
            )
        self.evals: list[dict[str, float]] = []
        self.sessions = 1
        self.wall_seconds = 0.0

    @staticmethod
    def _prompt_set(cfg: GRPORunConfig, n: int, seed: int) -> list[Task]:
        rng = np.random.default_rng(seed)
        if list(cfg.families) == [CALC_FAMILY]:
            return make_calc_set(n, rng, cfg.difficulties, operand_limits=cfg.calc.limits(cfg.difficulties))
        if list(cfg.families) == [SCRATCH_FAMILY]:
            return make_scratch_set(n, rng, difficulties=cfg.difficulties)
        if len(cfg.families) == 1 and cfg.families[0] not in FAMILIES:
            return family_spec(cfg.families[0]).make_set(n, rng, cfg.difficulties)  # countdown, carry
        return make_prompt_set(n, rng, families=cfg.families, difficulties=cfg.difficulties)

    # --- construction ----------------------------------------------------------------------------------------------
    @classmethod
    def start(cls, cfg: GRPORunConfig, root: str | Path = "runs", **kwargs: Any) -> GRPORun:
        """A fresh run in a new ``root/rlvr-<allocator>__<seed>__<time>/`` with ``config.yaml`` written.

        Everything that can fail on bad input (allocator spec, SFT checkpoint, prompt sets) is checked before the
        directory is created, so a refused run leaves nothing behind.

        Raises:
            ValueError: See the class.
            rolloutlab.checkpoint.CheckpointError: The SFT checkpoint is missing or not an rlvr character model.
        """
        make_allocator(cfg.allocator)  # the cheapest check first: no model load for a typo in the spec
        if cfg.dart:
            make_dart_config(cfg.dart)
        if cfg.token_controller:
            _check_arpo(cfg, make_token_controller(cfg.token_controller))
        if cfg.guidance:
            make_guidance(cfg.guidance)
        model, model_config, _ = load_model(cfg.sft_checkpoint)
        run = cls(cfg, model, model_config, **kwargs)
        name = f"rlvr-{cfg.allocator}" + (f"-{cfg.token_controller}" if cfg.token_controller else "")
        name += f"-{cfg.guidance}" if cfg.guidance else ""
        name += f"-{cfg.dart}" if cfg.dart else ""
        run.run_dir = make_run_dir(name, cfg.grpo.seed, root=root, config=run.cfg)
        return run

    @classmethod
    def resume(cls, run_dir: str | Path, device: str | None = None, **kwargs: Any) -> GRPORun:
        """Rebuild a run from ``run_dir``; :meth:`learn` then continues it to its original step budget.

        Args:
            run_dir: The run's directory.
            device: Continue on this device instead of the saved ``grpo.device`` (a run checkpointed on a GPU
                continues on a machine without one). The random draws are the same on every device, the arithmetic
                is not: the resumed run is exact on the device it was saved from.
            **kwargs: The constructor's keyword arguments (``progress``, ``echo``).

        Raises:
            rolloutlab.checkpoint.CheckpointError: ``run_dir`` is not an rlvr train run directory (no directory, a
                checkpoint of another kind or format, a foreign ``config.yaml``, or neither file).
        """
        directory = Path(run_dir)
        if not directory.is_dir():
            raise CheckpointError(f"run directory not found: {directory}")
        checkpoint = directory / CHECKPOINT_NAME
        if checkpoint.is_file():
            envelope = load_checkpoint(checkpoint, kind=CHECKPOINT_KIND)
            state = envelope["state"]
            try:
                cfg = _on_device(from_dict(GRPORunConfig, envelope["config"]), device)
                model_config = from_dict(CharLMConfig, state["model_config"])
            except (ValueError, KeyError) as exc:
                raise CheckpointError(f"{checkpoint} does not hold a readable rlvr run: {exc}") from exc
            run = cls(cfg, build_model(model_config), model_config, directory, **kwargs)
            try:
                run.load_state_dict(state)
            except (ValueError, KeyError, RuntimeError) as exc:  # RuntimeError: torch's load_state_dict mismatch
                raise CheckpointError(f"{checkpoint} does not fit its own config: {exc}") from exc
            return run
        config = directory / CONFIG_NAME
        if not config.is_file():
            raise CheckpointError(
                f"{directory} is not an rlvr train run: it has neither {CHECKPOINT_NAME} nor {CONFIG_NAME}"
            )
        # Killed before its first checkpoint: nothing to restore, so the run starts over from its saved config.
        try:
            cfg = _on_device(load_yaml(GRPORunConfig, config), device)
        except ValueError as exc:
            raise CheckpointError(f"{directory} is not an rlvr train run ({exc})") from exc
        model, model_config, _ = load_model(cfg.sft_checkpoint)
        return cls(cfg, model, model_config, directory, **kwargs)

    # --- the loop --------------------------------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        """Whether the step budget is spent."""
        return self.trainer.num_steps >= self.cfg.steps

    def learn(self) -> GRPORun:
        """Train to ``cfg.steps`` steps, checkpointing as configured, then write ``result.json``; returns ``self``.

        A finished run whose ``result.json`` exists is left untouched.
        """
        if self.finished and self.run_dir is not None and (self.run_dir / RESULT_NAME).is_file():
            return self
        cfg = self.cfg
        # One progress.csv across sessions: a resumed run keeps the rows up to its checkpoint step and appends (a run
        # restarted before any evaluation keeps none: it logs step 0 again).
        resume_step = self.trainer.num_steps if self.evals else -1
        logger = make_logger(self.run_dir, LOG_FORMATS, resume_step=resume_step) if self.run_dir is not None else None
        started, wall_before = time.perf_counter(), self.wall_seconds
        bar = tqdm(
            total=cfg.steps, initial=self.trainer.num_steps, desc="rlvr train", unit="step", disable=not self.progress
        )
        try:
            if not self.evals:
                self._evaluate(logger)
                if logger is not None:
                    logger.dump(0)
            while not self.finished:
                metrics = self.trainer.step()
                step = self.trainer.num_steps
                if step % cfg.eval_every == 0 or step == cfg.steps:
                    point = self._evaluate(logger)
                    bar.set_postfix(accuracy=f"{point['accuracy']:.3f}")
                    self._say(
                        f"step {step}: held-out accuracy {point['accuracy']:.3f}, "
                        f"tokens {metrics['cost/completion_tokens']}, responses {metrics['cost/responses']}, "
                        f"mixed groups {metrics['groups_mixed']}/{metrics['groups_generated']}"
                    )
                self.wall_seconds = wall_before + time.perf_counter() - started
                if logger is not None:
                    self._record(logger, metrics)
                    logger.dump(step)
                if cfg.checkpoint_every and step % cfg.checkpoint_every == 0 and not self.finished:
                    self.save()
                bar.update(1)
        finally:
            bar.close()
            close = getattr(self.trainer, "close", None)  # DART: stop the rollout workers
            if close is not None:
                close()
            if logger is not None:
                logger.close()
        self.wall_seconds = wall_before + time.perf_counter() - started
        if self.run_dir is not None:
            self.save()
            write_result(self.run_dir, self.result())
        return self

    def _evaluate(self, logger: Logger | None) -> dict[str, float]:
        costs = self.trainer.costs
        details = self.trainer.evaluate_details(self.held_out)
        point = {
            "step": self.trainer.num_steps,
            **details,
            "completion_tokens": costs.completion_tokens,
            "responses": costs.responses,
        }
        self.evals.append(point)
        if logger is not None:
            for key, value in details.items():
                logger.record(f"eval/{key}", value)
        if point["step"] == 0:
            self._say(f"step 0: held-out accuracy {point['accuracy']:.3f}")
        return point

    def _say(self, line: str) -> None:
        if self.echo is None:
            return
        # Clear the progress bar while the line is written, so lines and bar do not interleave on a terminal.
        with tqdm.external_write_mode():
            self.echo(line)

    def _record(self, logger: Logger, metrics: Mapping[str, Any]) -> None:
        """SB3 namespaces: what the rollout cost and saw, what the update did, what the controllers decided."""
        for key in (
            "reward_mean",
            "entropy",
            "tool_calls",
            "answer_length",
            "slow_share",
            "groups_generated",
            "groups_mixed",
            "groups_kept",
            "refill_rounds",
        ):
            logger.record(f"rollout/{key}", metrics[key])
        for key, value in metrics.items():
            if key.startswith("cost/"):
                logger.record(f"rollout/{key.removeprefix('cost/')}", value)
        for key, value in metrics.items():
            if key.startswith("async/"):  # DART: learner idle time and staleness
                logger.record(key, value)
        for key in ("loss", "optimizer_steps", "clip_fraction", "ratio_min", "ratio_max"):
            logger.record(f"train/{key}", metrics[key])
        for key in ("temperature", "clip_low", "clip_high"):
            logger.record(f"meta/{key}", metrics[key])
        logger.record("time/steps", self.trainer.num_steps)
        logger.record("time/wall_seconds", self.wall_seconds)

    # --- state -----------------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The trainer's state plus the model architecture, evaluation history, session count and wall time."""
        return {
            "trainer": self.trainer.state_dict(),
            "model_config": asdict(self.model_config),
            "evals": [dict(p) for p in self.evals],
            "sessions": self.sessions,
            "wall_seconds": self.wall_seconds,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output; counts this as one more session."""
        self.trainer.load_state_dict(state["trainer"])
        self.evals = [{str(k): v for k, v in p.items()} for p in state["evals"]]
        self.sessions = int(state["sessions"]) + 1
        self.wall_seconds = float(state["wall_seconds"])

    def save(self) -> Path:
        """Atomically write ``run_dir/checkpoint.pt``."""
        if self.run_dir is None:
            raise ValueError("this run has no run directory to save into")
        return save_checkpoint(
            self.run_dir / CHECKPOINT_NAME, self.state_dict(), kind=CHECKPOINT_KIND, config=to_dict(self.cfg)
        )

    def result(self) -> dict[str, Any]:
        """What ``result.json`` holds."""
        return {
            "steps": self.trainer.num_steps,
            "final_accuracy": self.evals[-1]["accuracy"] if self.evals else None,
            "evals": [dict(p) for p in self.evals],
            "costs": self.trainer.costs.as_dict(),
            "sessions": self.sessions,
            "wall_seconds": self.wall_seconds,
            "config": to_dict(self.cfg),
        }
