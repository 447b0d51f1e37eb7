"""Training driver of the adaptive-length tokenizer: AdamW on random batches, checkpoints that resume exactly.

``TokenizerTrainer(config, run_dir).learn()`` takes ``config.steps`` gradient steps on batches drawn from the
training images (:func:`meta.tokenizer.data.training_images`), the learning rate warmed up and then decayed along a
cosine. With a run directory it checkpoints atomically every ``checkpoint_every`` steps (network, optimizer, step,
random streams) and a new trainer on the same directory resumes from ``checkpoint.pt``, drawing the same batches and
ending with the same weights as a run that was never interrupted.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.logger import Logger

from meta.tokenizer.config import TrainConfig
from meta.tokenizer.data import training_images
from meta.tokenizer.model import AdaptiveTokenizer
from rolloutlab.checkpoint import load_checkpoint, save_checkpoint
from rolloutlab.config import from_dict, save_yaml, to_dict
from rolloutlab.logs import announce_resume, make_logger, progress_bar
from rolloutlab.run_state import capture_rng, restore_rng
from rolloutlab.seeding import seed_everything

CHECKPOINT_KIND = "adaptive-tokenizer"
CHECKPOINT_NAME = "checkpoint.pt"
__all__ = ["CHECKPOINT_KIND", "CHECKPOINT_NAME", "TokenizerTrainer", "learning_rate", "load_tokenizer"]


def learning_rate(step: int, config: TrainConfig) -> float:
    """The learning rate of step ``step`` (0-based): linear warm-up to ``lr``, then a cosine down to ``lr / 10``."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    progress = min((step - config.warmup_steps) / max(config.steps - config.warmup_steps, 1), 1.0)
    return config.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


class TokenizerTrainer:
    """Trains an :class:`~meta.tokenizer.model.AdaptiveTokenizer`.

    Args:
        config: The run's configuration.
        run_dir: Where ``checkpoint.pt``, ``config.yaml`` and ``progress.csv`` go; ``None`` keeps everything in memory.
        resume: Continue from ``run_dir/checkpoint.pt`` if it exists.
        progress: Show a progress bar (on a terminal).
        images: The training images, ``(N, S, S)`` in ``[0, 1]``; ``None`` builds them from ``config``.
    """

    def __init__(
        self,
        config: TrainConfig,
        run_dir: Path | None = None,
        resume: bool = True,
        progress: bool = False,
        images: np.ndarray | None = None,
    ) -> None:
        self.config = config
        self.run_dir = run_dir
        self.progress = progress
        seed_everything(config.seed)
        self.images = torch.as_tensor(training_images(config) if images is None else images, dtype=torch.float32)
        self.model = AdaptiveTokenizer(config.model)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        self.rng = np.random.default_rng(config.seed)
        self.step = 0
        self.train_seconds = 0.0
        # CPU seconds of this process in the training steps: on a shared machine, the time on one core the run
        # needed, whatever the wall clock says.
        self.cpu_seconds = 0.0
        self.history: list[dict[str, float]] = []
        self.logger: Logger | None = None
        checkpoint = None if run_dir is None else run_dir / CHECKPOINT_NAME
        resuming = checkpoint is not None and resume and checkpoint.exists()
        if run_dir is not None:
            if resuming:
                assert checkpoint is not None
                self.load(checkpoint)
            run_dir.mkdir(parents=True, exist_ok=True)
            if not (run_dir / "config.yaml").exists():
                save_yaml(config, run_dir / "config.yaml")
            self.logger = make_logger(run_dir, ("csv",), resume_step=self.step if resuming else None)
            if resuming:
                announce_resume(run_dir, self.step, config.steps)

    def train_step(self) -> torch.Tensor:
        """One AdamW step on a fresh batch; returns the ``(T,)`` reconstruction MSE of each iteration on it."""
        cfg = self.config
        self.model.train()
        lr = learning_rate(self.step, cfg)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        index = torch.as_tensor(self.rng.integers(0, len(self.images), size=cfg.batch_size))
        loss, per_iteration = self.model.loss(self.images[index])
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        self.optimizer.step()
        self.step += 1
        return per_iteration

    def learn(self) -> dict[str, Any]:
        """Train until ``config.steps`` (or ``max_minutes``), checkpointing along the way.

        Returns:
            ``steps`` done, ``train_seconds`` and ``cpu_seconds`` (wall and CPU, this run's and any resumed part's),
            whether the time cap stopped it,
            the last logged per-iteration training MSE, and the history of logged losses.
        """
        cfg = self.config
        wall_start = time.perf_counter()
        stopped_by_time = False
        bar = progress_bar(cfg.steps, self.step, desc="tokenizer", enabled=self.progress or None)
        last: list[float] = []
        while self.step < cfg.steps:
            if cfg.max_minutes is not None and time.perf_counter() - wall_start > 60.0 * cfg.max_minutes:
                stopped_by_time = True
                break
            start, cpu_start = time.perf_counter(), time.process_time()
            per_iteration = self.train_step()
            self.train_seconds += time.perf_counter() - start
            self.cpu_seconds += time.process_time() - cpu_start
            bar.update(1)
            if self.step % cfg.log_every == 0 or self.step == cfg.steps:
                last = [float(v) for v in per_iteration]
                self.history.append({"step": self.step, "mse_first": last[0], "mse_last": last[-1]})
                bar.set_postfix(first=f"{last[0]:.4f}", last=f"{last[-1]:.4f}")
                self._log(last)
            if self.run_dir is not None and self.step % cfg.checkpoint_every == 0:
                self.save(self.run_dir / CHECKPOINT_NAME)
        bar.close()
        if self.run_dir is not None:
            self.save(self.run_dir / CHECKPOINT_NAME)
        return {
            "steps": self.step,
            "train_seconds": self.train_seconds,
            "cpu_seconds": self.cpu_seconds,
            "stopped_by_time_cap": stopped_by_time,
            "train_mse_per_iteration": last,
            "history": self.history,
            "config": to_dict(cfg),
        }

    def _log(self, per_iteration: list[float]) -> None:
        if self.logger is None:
            return
        self.logger.record("train/mse_first_iteration", per_iteration[0])
        self.logger.record("train/mse_last_iteration", per_iteration[-1])
        self.logger.record("train/lr", learning_rate(self.step - 1, self.config))
        self.logger.record("time/steps", self.step)
        self.logger.dump(self.step)

    # ---------------------------------------------------------------------------------------------- checkpointing
    def save(self, path: Path) -> Path:
        """Atomically checkpoint everything a resumed run needs to continue as this one would have."""
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "step": self.step,
            "train_seconds": self.train_seconds,
            "cpu_seconds": self.cpu_seconds,
            "history": self.history,
            "rng": capture_rng({"batches": self.rng}),
        }
        return save_checkpoint(path, state, kind=CHECKPOINT_KIND, config=to_dict(self.config))

    def load(self, path: Path) -> None:
        """Restore a checkpoint written by :meth:`save` (weights-only loading)."""
        state = load_checkpoint(path, kind=CHECKPOINT_KIND)["state"]
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step = int(state["step"])
        self.train_seconds = float(state["train_seconds"])
        self.cpu_seconds = float(state["cpu_seconds"])
        self.history = list(state["history"])
        restore_rng(state["rng"], {"batches": self.rng})


def load_tokenizer(path: Path) -> tuple[AdaptiveTokenizer, TrainConfig]:
    """The trained network (in eval mode) and its run's config from a trainer checkpoint.

    Raises:
        rolloutlab.checkpoint.CheckpointError: The file is missing, unreadable or not a tokenizer checkpoint.
    """
    envelope = load_checkpoint(path, kind=CHECKPOINT_KIND)
    config = from_dict(TrainConfig, envelope["config"])
    model = AdaptiveTokenizer(config.model)
    model.load_state_dict(envelope["state"]["model"])
    return model.eval(), config
