"""The allocation benchmark through TRL: which allocator reaches uniform G=8's accuracy on fewer generated tokens
when it runs inside TRL's ``GRPOTrainer`` (``meta.rlvr.trl.AllocatingGRPOTrainer``)?

Run from the repository root (one thread per worker, resumable at run granularity):

    OMP_NUM_THREADS=1 nice -n 10 python experiments/rlvr/trl_benchmark.py --workers 2

Two task families:

* ``arith`` — the shipped one (``envs.reasoning``): reversed-digit addition and multiplication with 1–3 digits, the
  compact benchmark's pool and held-out set, from its SFT checkpoint (``runs/rlvr/sft.pt``, trained if missing);
* ``sort`` — defined only here, used nowhere else in the repository: sort the digits of a 2–5 digit string
  (``"3142=" → "1234"``), from its own short SFT warm start.

Every arm of a family starts from the same checkpoint, with the same prompt pool, prompts per step (16), TRL settings
and steps; seeds 0–4 (TRL's seed: prompt order and sampling). Held-out greedy accuracy every ``eval_every`` steps,
against the adapter's ledger of generated tokens. Each finished run is written to
``results/trl/per_run/<family>__<arm>__<seed>.json`` at once; the summary goes to ``results/trl_summary.json`` with
the key ``families.<name>.best_adaptive.ratio_tokens_vs_uniform_g8``. The summary and its table are
:mod:`experiments.rlvr.trl_summary`'s (:func:`~experiments.rlvr.trl_summary.summarize_trl`,
:func:`~experiments.rlvr.trl_summary.trl_table`).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from envs.reasoning import Task, verify
from experiments.rlvr.allocator_benchmark import (
    ARMS,
    BENCHMARK_LR,
    DEFAULT_CHECKPOINT,
    EVAL_EVERY,
    HELD_OUT_SIZE,
    POOL_SIZE,
    TRL_ARMS,
    prompt_sets,
    run_record,
)
from experiments.rlvr.trl_summary import summarize_trl, trl_table
from experiments.sweep import Unit, grid, run_sweep
from meta.rlvr.lm.charlm import build_model, load_model, save_model
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.grpo_config import GRPOConfig as CompactGRPOConfig
from meta.rlvr.trainers.sft import SFTConfig, fit_sft, solve_rate, train_sft
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.threads import set_torch_threads

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Args:
    families: list[str] = field(default_factory=lambda: ["arith", "sort"])
    """task families (arith: shipped; sort: defined only in this script)"""
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    """RL seeds (TRL's seed: prompt order and sampling)"""
    arms: list[str] = field(default_factory=lambda: list(TRL_ARMS))
    """arms (names from allocator_benchmark.ARMS)"""
    steps: int = 90
    """GRPO steps per run"""
    eval_every: int = EVAL_EVERY
    """held-out evaluation period in steps"""
    prompts_per_step: int = CompactGRPOConfig.prompts_per_step
    """prompts per step (TRL's batch: this times num_generations=8 rows)"""
    lr: float = BENCHMARK_LR
    """AdamW learning rate (the compact benchmark's, for its one optimizer step per generated batch)"""
    max_new_tokens: int = CompactGRPOConfig.max_new_tokens
    """TRL's max_completion_length (the compact trainer's max_new_tokens)"""
    arith_checkpoint: str = DEFAULT_CHECKPOINT
    """the compact benchmark's SFT checkpoint (trained with SFTConfig's defaults, experiments/rlvr/sft.yaml, if
    missing)"""
    sort_checkpoint: str = "runs/rlvr/sft_sort.pt"
    """the sort family's SFT checkpoint (trained with sort_sft_steps if missing)"""
    sort_sft_steps: int = 100
    """supervised steps of the sort family's warm start"""
    pool_size: int = POOL_SIZE
    """training prompts per family"""
    held_out_size: int = HELD_OUT_SIZE
    """held-out prompts per family"""
    workers: int = 1
    """runs side by side in worker processes"""
    out: str = str(RESULTS / "trl")
    """per-run results folder"""
    summary: str = str(RESULTS / "trl_summary.json")
    """summary file"""


def sort_tasks(n: int, rng: np.random.Generator, digits: tuple[int, ...] = (4, 5, 6, 7)) -> list[Task]:
    """``n`` digit-sorting tasks: a string of 4–7 random digits, answer its digits in ascending order."""
    out = []
    for d in rng.choice(digits, size=n):
        s = "".join(str(int(x)) for x in rng.integers(0, 10, size=int(d)))
        out.append(Task(f"{s}=", "".join(sorted(s)), "sort", int(d)))
    return out


def family_tasks(family: str, args: Args) -> tuple[list[Task], list[Task]]:
    """The family's training pool and held-out set (fixed generators, the same for every arm and seed)."""
    if family == "arith":
        return prompt_sets(args.pool_size, args.held_out_size)
    if family == "sort":
        return sort_tasks(args.pool_size, np.random.default_rng(11)), sort_tasks(
            args.held_out_size, np.random.default_rng(12)
        )
    raise ValueError(f"unknown family {family!r}; known: arith, sort")


def ensure_checkpoint(family: str, args: Args) -> str:
    """The family's SFT checkpoint path, trained first if missing."""
    if family == "arith":
        path = Path(args.arith_checkpoint)
        if not path.is_file():
            train_sft(SFTConfig(), out_path=path)
        return str(path)
    path = Path(args.sort_checkpoint)
    if not path.is_file():
        torch.manual_seed(0)
        architecture = SFTConfig().model
        model = build_model(architecture)
        loss = fit_sft(
            model, CharVocab(architecture.alphabet), sort_tasks, args.sort_sft_steps, 64, 3e-3, np.random.default_rng(0)
        )
        save_model(
            path,
            model,
            architecture,
            extra={"sft": {"family": "sort", "steps": args.sort_sft_steps, "final_loss": loss}},
        )
    return str(path)


def greedy_accuracy(model: torch.nn.Module, tasks: list[Task], max_new_tokens: int, chunk: int = 200) -> float:
    """Held-out greedy accuracy with the compact trainer's sampler (the compact benchmark's measure), in chunks."""
    vocab = CharVocab()
    model.eval()
    correct = 0.0
    for start in range(0, len(tasks), chunk):
        part = tasks[start : start + chunk]
        correct += sum(solve_rate(model, part, vocab, temperature=0.0, max_new_tokens=max_new_tokens))
    return correct / len(tasks)


#: Rows per prompt a benchmark step may hold (the largest per-prompt count of any arm, 16, plus one reused response).
MAX_ROWS_PER_PROMPT = 17


def make_trainer(
    model: torch.nn.Module,
    pool: list[Task],
    allocator: Any,
    family: str,
    output_dir: str,
    seed: int,
    *,
    prompts_per_step: int,
    max_new_tokens: int,
    lr: float,
    max_steps: int,
    callbacks: list[Any] | None = None,
    **config: Any,
) -> Any:
    """The benchmark's ``AllocatingGRPOTrainer`` on ``pool`` with an exact-match verifier (also used by
    ``experiments/meta/rlvr_meta_trl.py``); ``config`` overrides or adds TRL ``GRPOConfig`` settings."""
    from datasets import Dataset
    from trl import GRPOConfig

    from meta.rlvr.lm.tokenizer import CharTokenizer
    from meta.rlvr.trl import AllocatingGRPOTrainer

    def exact_match(prompts: list[str], completions: list[str], answer: list[str], **kwargs: Any) -> list[float]:
        return [verify(Task(p, a, family, 0), c) for p, c, a in zip(prompts, completions, answer, strict=True)]

    settings: dict[str, Any] = dict(
        output_dir=output_dir,
        per_device_train_batch_size=prompts_per_step * 8,
        num_generations=8,
        max_completion_length=max_new_tokens,
        max_steps=max_steps,
        learning_rate=lr,
        loss_type="dapo",
        epsilon=0.2,
        epsilon_high=0.28,  # the compact trainer's clip-higher bounds
        beta=0.0,
        temperature=1.0,
        logging_steps=max_steps,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=seed,
        disable_tqdm=True,
    )
    settings.update(config)
    return AllocatingGRPOTrainer(
        model=model,
        reward_funcs=[exact_match],
        args=GRPOConfig(**settings),
        train_dataset=Dataset.from_dict({"prompt": [t.prompt for t in pool], "answer": [t.answer for t in pool]}),
        processing_class=CharTokenizer(),
        allocator=allocator,
        correctness_reward="exact_match",
        callbacks=callbacks,
        # The benchmark measures each allocator's own decisions, so it opts out of cutting a step to the batch's
        # rows: the most any arm asks per prompt (DARS, E3, knapsack and the meta-policy's grid: 16) plus one reuse.
        max_rows_per_step=prompts_per_step * MAX_ROWS_PER_PROMPT,
    )


def run_one(family: str, arm: str, seed: int, checkpoint: str, args: Args) -> dict[str, Any]:
    """Train one arm through TRL with the adapter; returns the curve of accuracy against the ledger."""
    set_torch_threads()
    from transformers import TrainerCallback

    pool, held_out = family_tasks(family, args)
    torch.manual_seed(seed)
    model, _, _ = load_model(checkpoint)
    allocator = ARMS[arm]()

    curve: list[dict[str, Any]] = []

    class Evaluate(TrainerCallback):
        def on_step_end(self, targs: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step % args.eval_every == 0 or state.global_step == args.steps:
                curve.append(
                    {
                        "step": state.global_step,
                        "accuracy": greedy_accuracy(model, held_out, args.max_new_tokens),
                        **trainer.ledger.as_dict(),
                    }
                )
                model.train()

    with tempfile.TemporaryDirectory() as tmp:
        trainer = make_trainer(
            model,
            pool,
            allocator,
            family,
            tmp,
            seed,
            prompts_per_step=args.prompts_per_step,
            max_new_tokens=args.max_new_tokens,
            lr=args.lr,
            max_steps=args.steps,
            callbacks=[Evaluate()],
        )
        curve.append(
            {"step": 0, "accuracy": greedy_accuracy(model, held_out, args.max_new_tokens), **trainer.ledger.as_dict()}
        )
        start = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - start
    return {"family": family, **run_record(arm, seed, curve, trainer.ledger.as_dict(), seconds, allocator)}


def run_unit(unit: Unit, checkpoints: dict[str, str], args: Args) -> dict[str, Any]:
    """One (family, arm, seed) run's record, with the script's arguments."""
    run = run_one(unit.group, unit.arm, unit.seed, checkpoints[unit.group], args)
    run["args"] = asdict(args)
    return run


def describe(unit: Unit, run: dict[str, Any]) -> str:
    return f"{unit.label}: final acc {run['curve'][-1]['accuracy']:.3f} ({run['seconds']:.0f} s)"


def main(args: Args) -> None:
    set_torch_threads()
    out = Path(args.out)
    (out / "per_run").mkdir(parents=True, exist_ok=True)
    checkpoints = {family: ensure_checkpoint(family, args) for family in args.families}
    units = [unit for family in args.families for unit in grid(args.arms, args.seeds, out / "per_run", group=family)]
    run_sweep(units, partial(run_unit, checkpoints=checkpoints, args=args), workers=args.workers, describe=describe)
    runs = [json.loads(p.read_text()) for p in sorted((out / "per_run").glob("*.json"))]
    summary = {
        **summarize_trl(runs, args.families, args.arms, args.seeds),
        "args": asdict(args),
        "command": "OMP_NUM_THREADS=1 python experiments/rlvr/trl_benchmark.py",
    }
    atomic_write_json(Path(args.summary), summary)
    text = trl_table(summary)
    Path(args.summary).with_suffix(".md").write_text(text)
    print(text)


if __name__ == "__main__":
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    main(tyro.cli(Args, description=__doc__))
