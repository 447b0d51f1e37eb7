"""DARS-B: difficulty-adaptive rollouts plus breadth (Yang et al. 2025, "Depth-Breadth Synergy in RLVR", §5).

Depth is DARS (:mod:`meta.rlvr.allocators.dars`): ``N`` responses per prompt, then extra ones for the prompts whose
stage-1 accuracy is below one half, until their cumulative advantage reaches the schedule's target. Breadth is the
paper's second axis: "we intensely scale batch size and replace PPO's mini-batch iterations with full-batch updates over
multiple epochs". DARS-Breadth combines the two; the paper reports gains in both Pass@K (from depth) and Pass@1
(from breadth, which keeps token entropy up and the gradient noise down).

In the compact trainer (:class:`~meta.rlvr.trainers.grpo.GRPOTrainer`) breadth is three settings of :class:`GRPOConfig`:

* ``prompts_per_step = B``, the large prompt batch (the paper's breadth; DARS's extra responses come on top);
* ``minibatches = 1``: the whole generated batch is one optimizer step (no mini-batch iterations), so every sample
  of the batch enters every step;
* ``epochs = E``: ``E`` such full-batch steps per generated batch. The first is on-policy (ratio 1); from the second
  on the ratio to the sampling policy moves and the clipped surrogate acts, as in PPO's epochs.

So one DARS-B step makes exactly ``E`` optimizer steps and each learning row is in each of them once.
:class:`~meta.rlvr.allocators.dars_breadth.DARSBreadth` is the allocator (DARS with the breadth settings attached),
:func:`breadth_config` applies them to a trainer config and
:class:`DARSBreadthTrainer` is the trainer that does both. The spec
``dars_b:N,N_max,EPOCHS,BREADTH`` (defaults 4, 16, 2, 64) builds the allocator from the CLI
(``rolloutlab rlvr train --allocator dars_b:4,16,2,64``); :class:`~meta.rlvr.trainers.run.GRPORun` applies the breadth
to the run's trainer settings (:func:`breadth_run_config`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from envs.reasoning import Task
from meta.rlvr.allocators import make_allocator
from meta.rlvr.allocators.dars_breadth import DARSBreadth
from meta.rlvr.lm.sampling import sample
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.grpo import GRPOTrainer
from meta.rlvr.trainers.grpo_config import GRPOConfig


def breadth_config(cfg: GRPOConfig, allocator: DARSBreadth) -> GRPOConfig:
    """``cfg`` with the allocator's breadth: ``prompts_per_step = B``, one minibatch (the full batch), ``epochs = E``.
    Everything else (learning rate, clip range, loss) is kept."""
    return replace(cfg, prompts_per_step=allocator.breadth, minibatches=1, epochs=allocator.epochs)


def breadth_run_config(cfg: Any) -> Any:
    """A :class:`~meta.rlvr.trainers.run.GRPORunConfig` whose ``allocator`` is a ``dars_b`` spec, with its trainer
    settings (``grpo``) set to the spec's breadth; any other config is returned unchanged. Idempotent, so a resumed run
    (whose saved config already holds the breadth) resolves to the same settings."""
    allocator = make_allocator(cfg.allocator)
    if not isinstance(allocator, DARSBreadth):
        return cfg
    return replace(cfg, grpo=breadth_config(cfg.grpo, allocator))


class DARSBreadthTrainer(GRPOTrainer):
    """The compact GRPO trainer run as DARS-B: the :class:`DARSBreadth` allocator, and its breadth applied to the
    config (:func:`breadth_config`), so one :meth:`step` samples ``B`` prompts with DARS's extra responses and makes
    ``E`` full-batch optimizer steps on them.

    Args:
        model: Causal LM (see :class:`~meta.rlvr.trainers.grpo.GRPOTrainer`).
        vocab: Encodes prompts, decodes completions.
        tasks: Training prompt pool.
        allocator: The DARS-B allocator.
        config: Trainer settings; its ``prompts_per_step``, ``minibatches`` and ``epochs`` are replaced by the
            allocator's breadth.
        **kwargs: :class:`~meta.rlvr.trainers.grpo.GRPOTrainer`'s keyword arguments (``reward_fn``, ...).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        vocab: CharVocab,
        tasks: Sequence[Task],
        allocator: DARSBreadth,
        config: GRPOConfig | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(allocator, DARSBreadth):
            raise TypeError(f"DARS-B needs a DARSBreadth allocator, got {type(allocator).__name__}")
        super().__init__(model, vocab, tasks, allocator, breadth_config(config or GRPOConfig(), allocator), **kwargs)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimate from ``n`` samples with ``c`` correct: ``1 − C(n−c, k)/C(n, k)`` (Chen et al.
    2021, "Evaluating Large Language Models Trained on Code", eq. 1).

    Raises:
        ValueError: Unless ``0 <= c <= n`` and ``1 <= k <= n``.
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def sampled_pass_rates(
    trainer: GRPOTrainer, tasks: Sequence[Task], n: int, ks: Sequence[int], seed: int = 0, batch_size: int = 512
) -> dict[str, float]:
    """Held-out pass@k for each ``k`` of ``ks`` (the paper's Pass@1 and Pass@K), from ``n`` responses per task
    sampled at the trainer's temperature with a generator of its own (``seed``), so training's streams are untouched.

    Returns:
        ``{"pass@1": ..., "pass@8": ...}``, each the mean over ``tasks`` of :func:`pass_at_k`.
    """
    generator = torch.Generator().manual_seed(seed)
    correct: list[int] = []
    for start in range(0, len(tasks), max(1, batch_size // n)):
        chunk = list(tasks[start : start + max(1, batch_size // n)])
        prompts = [trainer.vocab.encode(t.prompt, bos=True) for t in chunk for _ in range(n)]
        out = sample(
            trainer.model,
            prompts,
            max_new_tokens=trainer.cfg.max_new_tokens,
            eos_id=trainer.vocab.eos_id,
            pad_id=trainer.vocab.pad_id,
            temperature=trainer.temperature,
            generator=generator,
            suppress=trainer.suppress,
        )
        for i, task in enumerate(chunk):
            texts = [trainer.vocab.decode(c) for c in out.completions[i * n : (i + 1) * n]]
            correct.append(int(sum(trainer.reward_fn(task, t) >= 0.5 for t in texts)))
    return {f"pass@{k}": float(np.mean([pass_at_k(n, c, k) for c in correct])) for k in ks}
