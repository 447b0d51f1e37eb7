"""Supervised warm start of the character model on mixed-difficulty arithmetic.

RL with verifiable rewards needs a policy that already solves *some* prompts (a group with no correct response has
zero advantage). This module trains the char model with teacher forcing on ``prompt → answer$`` pairs for a fixed
number of steps, measures the per-difficulty sampling solve rate, and saves a checkpoint every RL arm starts from.
The step count is the knob that lands the solve rate in the wanted mixed range (roughly 20–60% overall).

With ``families=["calc"]`` (the tool-use family, :mod:`envs.reasoning.tooluse`) the examples are reference traces
with and without calculator calls (:func:`envs.reasoning.tooluse.make_sft_set`, mixed by ``style_weights``;
``difficulties`` are numbers of operations), teacher-forced whole, the calculator's results included; the solve-rate
report samples with the calculator (:class:`meta.rlvr.trainers.tools.CalculatorTool`) and :func:`verify_calc`. The
model's alphabet must then be :data:`envs.reasoning.tooluse.TOOL_ALPHABET` (and ``max_positions`` long enough for a
trace). ``calc`` (:class:`envs.reasoning.tooluse.CalcOptions`) restricts the calculator and sets operand limits per
difficulty, for the traces, the held-out tasks and the report alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from envs.reasoning import Task, make_prompt_set, verify
from envs.reasoning.tooluse import (
    CALC_FAMILY,
    TOOL_ALPHABET,
    CalcOptions,
    make_calc_set,
    make_sft_set,
    verify_calc,
)
from meta.rlvr.lm.charlm import CharLMConfig, build_model, save_model
from meta.rlvr.lm.sampling import ToolHook, sample, sequence_logprobs
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.tools import CalculatorTool


@dataclass
class SFTConfig:
    """Warm-start settings.

    Attributes:
        seed: Seed for data, initialisation and sampling.
        steps: Optimizer steps.
        batch_size: Examples per step.
        lr: AdamW learning rate.
        families: Task families to train on.
        difficulties: Difficulties in the training mix.
        difficulty_weights: Relative frequency of each difficulty in the training mix.
        eval_per_difficulty: Held-out tasks per (family, difficulty) for the solve-rate report.
        style_weights: ``calc`` only: relative frequency of the trace styles ``direct``, ``scratch``, ``tool``,
            ``tool_once`` (:data:`envs.reasoning.tooluse.TRACE_STYLES`).
        max_new_tokens: Completion budget of the solve-rate report (8 fits add/mul; a ``calc`` trace needs ~64).
        model: Architecture.
        calc: ``calc`` only: the restricted calculator and operand limits per difficulty (default: off).
    """

    seed: int = 0
    steps: int = 1500
    batch_size: int = 64
    lr: float = 3e-3
    families: list[str] = field(default_factory=lambda: ["add", "mul"])
    difficulties: list[int] = field(default_factory=lambda: [1, 2, 3, 4, 5, 6])
    difficulty_weights: list[float] = field(default_factory=lambda: [1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    eval_per_difficulty: int = 50
    style_weights: list[float] = field(default_factory=lambda: [1.0, 1.0, 1.0, 1.0])
    max_new_tokens: int = 8
    model: CharLMConfig = field(default_factory=CharLMConfig)
    calc: CalcOptions = field(default_factory=CalcOptions)

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1 or not self.lr > 0:
            raise ValueError(
                f"SFT needs steps >= 1, batch_size >= 1 and lr > 0, got {self.steps}, {self.batch_size}, {self.lr}"
            )
        if CALC_FAMILY in self.families:
            if list(self.families) != [CALC_FAMILY]:
                raise ValueError(f"the {CALC_FAMILY!r} family is trained alone, got families {self.families}")
            missing = sorted(set(TOOL_ALPHABET) - set(self.model.alphabet))
            if missing:
                raise ValueError(
                    f"the {CALC_FAMILY!r} family needs model.alphabet to hold envs.reasoning.tooluse.TOOL_ALPHABET "
                    f"({TOOL_ALPHABET!r}); missing {''.join(missing)!r}"
                )
            self.calc.limits(self.difficulties)  # one operand limit per difficulty, if any
            self.calc.check_styles(self.style_weights, self.difficulties)

    @property
    def is_calc(self) -> bool:
        """Whether this is the tool-use warm start."""
        return list(self.families) == [CALC_FAMILY]


def suppressed_ids(vocab: CharVocab) -> tuple[int, ...]:
    """Ids a completion may never contain (pad, BOS): the sampler and the log-prob code both mask them."""
    return (vocab.pad_id, vocab.bos_id)


def solve_rate(
    model: torch.nn.Module,
    tasks: Sequence[Task],
    vocab: CharVocab,
    *,
    temperature: float,
    max_new_tokens: int = 8,
    generator: torch.Generator | None = None,
    reward_fn: Callable[[Task, str], float] = verify,
    tool: ToolHook | None = None,
) -> list[float]:
    """Reward of one sampled (or greedy, ``temperature=0``) completion per task, in task order."""
    prompts = [vocab.encode(t.prompt, bos=True) for t in tasks]
    out = sample(
        model,
        prompts,
        max_new_tokens=max_new_tokens,
        eos_id=vocab.eos_id,
        pad_id=vocab.pad_id,
        temperature=temperature,
        generator=generator,
        suppress=suppressed_ids(vocab),
        tool=tool,
    )
    return [reward_fn(t, vocab.decode(c)) for t, c in zip(tasks, out.completions, strict=True)]


def difficulty_report(
    model: torch.nn.Module,
    vocab: CharVocab,
    tasks: Sequence[Task],
    temperature: float,
    seed: int,
    max_new_tokens: int = 8,
    call_operations: int = 0,
) -> dict[str, float]:
    """Mean reward per ``family/difficulty`` plus ``overall`` (``calc`` tasks with the calculator and its verifier;
    ``call_operations``: :attr:`~envs.reasoning.tooluse.CalcOptions.call_operations`)."""
    gen = torch.Generator().manual_seed(seed)
    calc = bool(tasks) and all(t.family == CALC_FAMILY for t in tasks)
    rewards = solve_rate(
        model,
        tasks,
        vocab,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        generator=gen,
        reward_fn=verify_calc if calc else verify,
        tool=CalculatorTool(vocab, call_operations) if calc else None,
    )
    report: dict[str, list[float]] = {}
    for t, r in zip(tasks, rewards, strict=True):
        report.setdefault(f"{t.family}/{t.difficulty}", []).append(r)
    out = {k: float(np.mean(v)) for k, v in sorted(report.items())}
    out["overall"] = float(np.mean(rewards)) if rewards else 0.0
    return out


def eval_tasks(cfg: SFTConfig, seed: int) -> list[Task]:
    """Held-out tasks, ``eval_per_difficulty`` per (family, difficulty)."""
    rng = np.random.default_rng(seed)
    tasks: list[Task] = []
    if cfg.is_calc:
        for d, limit in zip(cfg.difficulties, cfg.calc.limits(cfg.difficulties), strict=True):
            tasks += make_calc_set(cfg.eval_per_difficulty, rng, operations=[d], max_operand=limit)
        return tasks
    for fam in cfg.families:
        for d in cfg.difficulties:
            tasks += make_prompt_set(cfg.eval_per_difficulty, rng, families=[fam], difficulties=[d])
    return tasks


def fit_sft(
    model: torch.nn.Module,
    vocab: CharVocab,
    make_batch: Callable[[int, np.random.Generator], Sequence[Task]],
    steps: int,
    batch_size: int,
    lr: float,
    rng: np.random.Generator,
    log: Callable[[str], None] | None = print,
) -> float:
    """Teacher-forced training on ``prompt → answer$`` pairs that ``make_batch(batch_size, rng)`` draws each step.

    Returns:
        The last step's loss (mean token negative log-likelihood).
    """
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    start = time.perf_counter()
    model.train()
    loss_value = float("nan")
    for step in range(steps):
        batch = make_batch(batch_size, rng)
        prompts = [vocab.encode(t.prompt, bos=True) for t in batch]
        targets = [[*vocab.encode(t.answer), vocab.eos_id] for t in batch]
        logp, mask = sequence_logprobs(model, prompts, targets, vocab.pad_id, suppress=suppressed_ids(vocab))
        loss = -(logp * mask).sum() / mask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_value = float(loss.detach())
        if log is not None and (step + 1) % max(steps // 10, 1) == 0:
            log(f"sft step {step + 1}/{steps} loss {loss_value:.3f} ({time.perf_counter() - start:.0f}s)")
    return loss_value


def train_sft(
    cfg: SFTConfig, out_path: Path | None = None, log: Callable[[str], None] | None = print
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Run the warm start; save to ``out_path`` if given.

    Returns:
        ``(model, metrics)`` with the per-difficulty sampling (T=1) and greedy solve rates.
    """
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    vocab = CharVocab(cfg.model.alphabet)
    model = build_model(cfg.model)
    start = time.perf_counter()

    def make_batch(n: int, gen: np.random.Generator) -> list[Task]:
        if cfg.is_calc:
            return make_sft_set(n, gen, style_weights=cfg.style_weights, operations=cfg.difficulties, options=cfg.calc)
        return make_prompt_set(
            n, gen, families=cfg.families, difficulties=cfg.difficulties, weights=cfg.difficulty_weights
        )

    loss_value = fit_sft(model, vocab, make_batch, cfg.steps, cfg.batch_size, cfg.lr, rng, log)
    held_out = eval_tasks(cfg, cfg.seed + 10_000)
    metrics = {
        "final_loss": loss_value,
        "seconds": time.perf_counter() - start,
        "sampled": difficulty_report(
            model, vocab, held_out, 1.0, cfg.seed, cfg.max_new_tokens, cfg.calc.call_operations
        ),
        "greedy": difficulty_report(
            model, vocab, held_out, 0.0, cfg.seed, cfg.max_new_tokens, cfg.calc.call_operations
        ),
        "config": asdict(cfg),
    }
    if out_path is not None:
        save_model(out_path, model, cfg.model, extra={"sft": metrics})
    return model, metrics
