"""Adaptive rollouts in your own TRL GRPO training: copy this file and swap in your model, data and verifier.

Runs on a laptop CPU in about a minute: a tiny Qwen2 model built from a config (no download) and warm-started by a
few hundred supervised steps, rolloutlab's local character tokenizer, and reversed-digit arithmetic prompts with an
exact-match verifier. What changes against plain
TRL: ``AdaptiveRolloutConfig`` instead of ``GRPOConfig``, with an ``allocator`` spec (``uniform:8``, ``ar3po:2,4``,
``dars:4,16``, ``knapsack:8,32``, ``e3:4,12``, ``dapo:8,3``) and the name of the reward function that says whether an
answer is right (``correctness_reward``), and ``AllocatingGRPOTrainer`` instead of ``GRPOTrainer``. The trainer's
``ledger`` tells you what the rollouts cost; a step never trains more rows than ``per_device_train_batch_size``
unless the config's ``max_rows_per_step`` allows it.

    python examples/trl_adaptive_grpo.py --allocator ar3po:2,4 --max-steps 20
    python examples/trl_adaptive_grpo.py --allocator uniform:8 --max-steps 20   # the baseline, same seed

Results (the arguments, the ledger, held-out accuracy before and after) go to ``<output-dir>/result.json``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import tyro
from datasets import Dataset

from envs.reasoning import Task, make_prompt_set, verify
from meta.rlvr import EntropyTemperature
from meta.rlvr.lm.charlm import CharLMConfig, build_model
from meta.rlvr.lm.tokenizer import CharTokenizer
from meta.rlvr.trainers.sft import SFTConfig, train_sft
from meta.rlvr.trl import AdaptiveRolloutConfig, AllocatingGRPOTrainer, TemperatureCallback
from rolloutlab.checkpoint import atomic_write_json


@dataclass
class Args:
    allocator: str = "ar3po:2,4"
    """responses per prompt: a rolloutlab allocator spec (uniform:8 is plain GRPO)"""
    max_steps: int = 20
    """GRPO steps"""
    learning_rate: float = 3e-4
    """AdamW learning rate of the RL steps"""
    prompts_per_step: int = 8
    """prompts per step (TRL's batch is this times num_generations rows)"""
    num_generations: int = 8
    """TRL's group size G; the allocator may ask for fewer or more per prompt"""
    train_prompts: int = 64
    """training prompts (1-2 digit additions and multiplications)"""
    held_out_prompts: int = 64
    """held-out prompts for greedy accuracy"""
    sft_steps: int = 300
    """supervised warm-start steps before RL (RLVR needs a policy that solves some prompts); 0: none"""
    entropy_target: float = 0.0
    """> 0: E3 temperature control toward this mean token entropy (nats); 0: fixed temperature 1"""
    seed: int = 0
    """seed of the model, the data and TRL"""
    output_dir: str = "runs/trl_adaptive_grpo"
    """where TRL writes its checkpoints and this script its result.json"""


def tasks_to_dataset(tasks: list[Task]) -> Dataset:
    """TRL reads the ``prompt`` column; every other column reaches the reward functions as a keyword argument."""
    return Dataset.from_dict({"prompt": [t.prompt for t in tasks], "answer": [t.answer for t in tasks]})


def exact_match(prompts: list[str], completions: list[str], answer: list[str], **kwargs: Any) -> list[float]:
    """The verifier: 1.0 for the exact answer (up to the EOS character), else 0.0."""
    return [verify(Task(p, a, "", 0), c) for p, c, a in zip(prompts, completions, answer, strict=True)]


def greedy_accuracy(model: torch.nn.Module, tokenizer: CharTokenizer, tasks: list[Task], max_new_tokens: int) -> float:
    """Share of ``tasks`` the model answers exactly with greedy decoding."""
    model.eval()
    batch = tokenizer([t.prompt for t in tasks], return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(
            **batch,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    texts = tokenizer.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=False)
    return float(np.mean([verify(t, text.replace("<pad>", "")) for t, text in zip(tasks, texts, strict=True)]))


def main(args: Args) -> dict[str, Any]:
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    train = make_prompt_set(args.train_prompts, rng, difficulties=[1, 2])
    held_out = make_prompt_set(args.held_out_prompts, rng, difficulties=[1, 2])
    tokenizer = CharTokenizer()
    architecture = CharLMConfig(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4)
    if args.sft_steps > 0:
        sft = SFTConfig(seed=args.seed, steps=args.sft_steps, difficulties=[1, 2], difficulty_weights=[1.0, 1.0])
        sft.model = architecture
        model, _ = train_sft(sft, log=None)
    else:
        model = build_model(architecture)
    max_new_tokens = 4
    before = greedy_accuracy(model, tokenizer, held_out, max_new_tokens)

    config = AdaptiveRolloutConfig(
        allocator=args.allocator,
        correctness_reward="exact_match",
        output_dir=args.output_dir,
        per_device_train_batch_size=args.prompts_per_step * args.num_generations,
        num_generations=args.num_generations,
        max_completion_length=max_new_tokens,
        max_steps=args.max_steps,
        learning_rate=args.learning_rate,
        loss_type="dapo",
        logging_steps=max(1, args.max_steps // 10),
        save_strategy="steps",
        save_steps=max(1, args.max_steps // 2),
        report_to="none",
        use_cpu=True,
        seed=args.seed,
    )
    callbacks = []
    if args.entropy_target > 0:
        callbacks.append(TemperatureCallback(EntropyTemperature(args.entropy_target, tokenizer.vocab_size)))
    trainer = AllocatingGRPOTrainer(
        model=model,
        reward_funcs=[exact_match],
        args=config,
        train_dataset=tasks_to_dataset(train),
        processing_class=tokenizer,
        callbacks=callbacks,
    )
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    after = greedy_accuracy(trainer.model, tokenizer, held_out, max_new_tokens)

    result = {
        "args": asdict(args),
        "ledger": trainer.ledger.as_dict(),
        "held_out_accuracy": {"before": before, "after": after},
        "seconds": seconds,
    }
    out = Path(args.output_dir)
    atomic_write_json(out / "result.json", result)
    ledger = result["ledger"]
    print(
        f"{args.allocator}: {ledger['responses']} responses, {ledger['completion_tokens']} tokens generated, "
        f"{ledger['rows_trained']} rows trained, {ledger['reused_responses']} reused; held-out accuracy "
        f"{before:.3f} -> {after:.3f} in {seconds:.0f} s"
    )
    return result


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
