"""One pixel-reasoning run: query sets, operation-aware SFT, GRPO with a tool-use arm, evaluations, checkpoints.

:class:`PixelReasoningRun` builds everything from a :class:`PixelReasoningConfig` and :meth:`~PixelReasoningRun.learn`
runs the SFT warm start, then GRPO to ``steps``, evaluating the greedy policy on the held-out queries after SFT,
every ``eval_every`` steps and at the end. With a run directory it writes ``checkpoint.pt`` atomically
(:func:`rolloutlab.checkpoint.save_checkpoint`, kind :data:`CHECKPOINT_KIND`, loaded with ``weights_only``) after
SFT, every ``checkpoint_every`` steps and at the end (the resolved config, the trainer's ``state_dict``s and random
states, the SFT metrics and the evaluations so far), and ``result.json`` at the end. :meth:`PixelReasoningRun.resume`
continues a run from its checkpoint to the same result as an uninterrupted run (everything drawn from is in the
checkpoint, and CPU kernels are deterministic at a fixed thread count).
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from envs.vision.zoom_queries import make_query_set
from meta.rlvr.allocators import make_allocator
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.vision.arms import make_tool_arm
from meta.rlvr.vision.policy import EncodedQueries, PixelPolicy, PixelPolicyConfig, encode_queries
from meta.rlvr.vision.trainer import PixelSFTConfig, ZoomGRPOTrainer, evaluate, train_sft
from rolloutlab.checkpoint import load_checkpoint, save_checkpoint
from rolloutlab.config import from_dict
from rolloutlab.runs import write_result

CHECKPOINT_KIND = "rlvr-pixel-reasoning-run"
CHECKPOINT_NAME = "checkpoint.pt"
SFT_KIND = "rlvr-pixel-reasoning-sft"


def _default_grpo() -> GRPOConfig:
    # A response is at most two tokens (a call and an answer); eight responses per query, sixteen queries per step.
    return GRPOConfig(prompts_per_step=16, max_new_tokens=2, lr=1e-3, minibatches=2)


@dataclass
class PixelReasoningConfig:
    """Settings of one pixel-reasoning run.

    Attributes:
        arm: Tool-use arm spec (:func:`meta.rlvr.vision.arms.make_tool_arm`): ``always_zoom``, ``never_zoom``,
            ``free_zoom``, ``zoom_penalty:LAMBDA`` or ``rollout_guided:BONUS,MARGIN``.
        allocator: Allocator spec (:func:`meta.rlvr.allocators.make_allocator`), e.g. ``uniform:8``.
        seed: Seeds GRPO (prompt order and sampling; ``grpo.seed`` is replaced by it).
        sft_seed: Seeds the policy's initialisation and the SFT traces: the warm start, which the seeds of a
            benchmark may share.
        steps: GRPO steps.
        probes: Forced responses per query and tool choice that measure the success rates (rollout-guided arm only).
        eval_every: Held-out evaluation period in GRPO steps (also after SFT and at the end).
        checkpoint_every: GRPO steps between checkpoints (0: after SFT and at the end only).
        train_size: Training queries.
        held_out_size: Held-out queries (greedy evaluation).
        fine_share: Share of queries that need the zoom (``digit``).
        sft_checkpoint: Where the SFT warm start is kept: loaded when the file exists (its settings must match this
            run's), else trained and saved there; empty trains it in the run. Runs with the same ``sft_seed`` and
            SFT settings share it.
        pool_seed: Seed of the training queries.
        held_out_seed: Seed of the held-out queries.
        policy: Architecture.
        sft: Operation-aware SFT settings.
        grpo: GRPO settings (``max_new_tokens`` must be 2).
    """

    arm: str = "rollout_guided:0.2,0.1"
    allocator: str = "uniform:8"
    seed: int = 0
    sft_seed: int = 0
    steps: int = 40
    probes: int = 2
    eval_every: int = 20
    checkpoint_every: int = 10
    train_size: int = 1024
    held_out_size: int = 400
    fine_share: float = 0.3
    sft_checkpoint: str = ""
    pool_seed: int = 1
    held_out_seed: int = 2
    policy: PixelPolicyConfig = field(default_factory=PixelPolicyConfig)
    sft: PixelSFTConfig = field(default_factory=PixelSFTConfig)
    grpo: GRPOConfig = field(default_factory=_default_grpo)

    def __post_init__(self) -> None:
        if self.steps < 0 or self.eval_every < 1 or self.checkpoint_every < 0 or self.probes < 0:
            raise ValueError(
                f"need steps >= 0, eval_every >= 1, checkpoint_every >= 0 and probes >= 0, got {self.steps}, "
                f"{self.eval_every}, {self.checkpoint_every}, {self.probes}"
            )
        if self.train_size < 1 or self.held_out_size < 1:
            raise ValueError(
                f"need train_size >= 1 and held_out_size >= 1, got {self.train_size}, {self.held_out_size}"
            )


@functools.lru_cache(maxsize=4)
def query_tensors(n: int, seed: int, fine_share: float, view: int, grid: int) -> EncodedQueries:
    """:func:`~envs.vision.zoom_queries.make_query_set` encoded once per process (the runs of a sweep share the query
    sets; nothing writes to the tensors)."""
    return encode_queries(make_query_set(n, seed, fine_share), view, grid)


class PixelReasoningRun:
    """A pixel-reasoning run (module docstring); :meth:`learn` runs it, :meth:`resume` continues one.

    Args:
        cfg: Run settings.
        run_dir: Where ``checkpoint.pt`` and ``result.json`` go; ``None`` keeps everything in memory.
        progress: Show a tqdm bar over GRPO steps (stderr).

    Raises:
        ValueError: An unknown arm or allocator spec, or settings the parts refuse.
    """

    def __init__(self, cfg: PixelReasoningConfig, run_dir: str | Path | None = None, *, progress: bool = False) -> None:
        self.cfg = cfg
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.progress = progress
        self.arm = make_tool_arm(cfg.arm)
        torch.manual_seed(cfg.sft_seed)
        self.policy = PixelPolicy(cfg.policy)
        view, grid = cfg.policy.view, cfg.policy.grid
        self.train_data = query_tensors(cfg.train_size, cfg.pool_seed, cfg.fine_share, view, grid)
        self.held_out = query_tensors(cfg.held_out_size, cfg.held_out_seed, cfg.fine_share, view, grid)
        self.trainer = ZoomGRPOTrainer(
            self.policy,
            self.train_data,
            self.arm,
            make_allocator(cfg.allocator),
            replace(cfg.grpo, seed=cfg.seed),
            probes=cfg.probes,
        )
        self.sft_metrics: dict[str, float] | None = None
        self.evals: list[dict[str, float]] = []

    @classmethod
    def resume(cls, run_dir: str | Path, *, progress: bool = False) -> PixelReasoningRun:
        """Rebuild a run from ``run_dir/checkpoint.pt``.

        Raises:
            rolloutlab.checkpoint.CheckpointError: No readable checkpoint of this kind.
        """
        envelope = load_checkpoint(Path(run_dir) / CHECKPOINT_NAME, kind=CHECKPOINT_KIND)
        run = cls(from_dict(PixelReasoningConfig, envelope["config"]), run_dir, progress=progress)
        state = envelope["state"]
        run.trainer.load_state_dict(state["trainer"])
        run.sft_metrics = dict(state["sft"])
        run.evals = [dict(e) for e in state["evals"]]
        return run

    def _checkpoint(self) -> None:
        if self.run_dir is None:
            return
        state = {"trainer": self.trainer.state_dict(), "sft": self.sft_metrics, "evals": self.evals}
        save_checkpoint(self.run_dir / CHECKPOINT_NAME, state, kind=CHECKPOINT_KIND, config=asdict(self.cfg))

    def _evaluate(self) -> None:
        self.evals.append({"step": float(self.trainer.num_steps), **evaluate(self.policy, self.held_out, self.arm)})

    def _sft_settings(self) -> dict[str, Any]:
        """What the SFT warm start depends on (a shared checkpoint must match it)."""
        cfg = self.cfg
        return {
            "seed": cfg.sft_seed,
            "policy": asdict(cfg.policy),
            "sft": asdict(cfg.sft),
            "data": [cfg.train_size, cfg.fine_share, cfg.pool_seed],
        }

    def _warm_start(self) -> dict[str, float]:
        """Load the shared SFT checkpoint, or train the warm start (and save it when a path is set).

        Raises:
            ValueError: The checkpoint at ``sft_checkpoint`` was trained with other settings.
        """
        cfg = self.cfg
        path = Path(cfg.sft_checkpoint) if cfg.sft_checkpoint else None
        if path is not None and path.is_file():
            envelope = load_checkpoint(path, kind=SFT_KIND)
            if envelope["config"] != self._sft_settings():
                raise ValueError(
                    f"sft_checkpoint {str(path)!r} was trained with other settings ({envelope['config']}); "
                    "delete it or set another path"
                )
            self.policy.load_state_dict(envelope["state"]["policy"])
            return dict(envelope["state"]["metrics"])
        metrics = train_sft(self.policy, self.train_data, replace(cfg.sft, seed=cfg.sft_seed))
        if path is not None:
            state = {"policy": self.policy.state_dict(), "metrics": metrics}
            save_checkpoint(path, state, kind=SFT_KIND, config=self._sft_settings())
        return metrics

    def learn(self, stop_after: int | None = None) -> dict[str, Any]:
        """Run SFT (unless done), then GRPO to ``steps``.

        Args:
            stop_after: Stop once this many GRPO steps are done in total (a checkpoint is written there); ``None``
                runs to ``steps``. For tests of interruption and resume.

        Returns:
            :meth:`result`.
        """
        cfg = self.cfg
        if self.sft_metrics is None:
            self.sft_metrics = self._warm_start()
            self._evaluate()
            self._checkpoint()
        end = cfg.steps if stop_after is None else min(cfg.steps, stop_after)
        bar = tqdm(
            total=cfg.steps,
            initial=self.trainer.num_steps,
            desc=f"pixel {cfg.arm} seed {cfg.seed}",
            disable=not self.progress,
            dynamic_ncols=True,
        )
        while self.trainer.num_steps < end:
            metrics = self.trainer.step()
            step = self.trainer.num_steps
            if step % cfg.eval_every == 0 or step == cfg.steps:
                self._evaluate()
            if (cfg.checkpoint_every and step % cfg.checkpoint_every == 0) or step == end:
                self._checkpoint()
            bar.update(1)
            bar.set_postfix(acc=f"{metrics['accuracy']:.2f}", tool=f"{metrics['tool_ratio']:.2f}")
        bar.close()
        result = self.result()
        if self.run_dir is not None and self.trainer.num_steps == cfg.steps:
            write_result(self.run_dir, result)
        return result

    def result(self) -> dict[str, Any]:
        """The run's record: config, SFT metrics, the evaluation curve, the last evaluation and the rollout totals."""
        return {
            "config": asdict(self.cfg),
            "sft": self.sft_metrics,
            "evals": self.evals,
            "final": self.evals[-1] if self.evals else None,
            "steps": self.trainer.num_steps,
            "totals": dict(self.trainer.totals),
        }
