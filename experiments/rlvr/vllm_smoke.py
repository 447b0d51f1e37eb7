"""The TRL adapter with real vLLM generation, server or colocate mode: a smoke run for a GPU machine, not for CI.

Two AR3PO steps of ``AllocatingGRPOTrainer`` on reversed-digit arithmetic prompts with a small instruct model, then
checks what the CPU tests cannot: that vLLM itself served every stage, that each step logged TRL's
importance-sampling metrics with finite values, and that vLLM's log-probabilities are close to the policy's (the mean
absolute difference per token under ``--max-logp-difference``; vLLM samples in bf16, so not to float precision).
Prints the ledger and the sampling metrics; exits with a message on failure. ``experiments/gpu_smoke.sh`` runs it
(``VLLM=1``) in colocate mode, and in server mode when a second GPU can hold the server.

    python experiments/rlvr/vllm_smoke.py --mode colocate
    python experiments/rlvr/vllm_smoke.py --mode server --server-url http://127.0.0.1:8000   # a running vllm serve
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import tyro
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig

from envs.reasoning import make_prompt_set
from meta.rlvr import make_allocator
from meta.rlvr.trl import AllocatingGRPOTrainer


@dataclass
class Args:
    mode: str = "colocate"
    """vLLM mode: colocate (vLLM inside the training process) or server (a running vllm serve at --server-url)"""
    model: str = "Qwen/Qwen2.5-0.5B-Instruct"
    """Hugging Face model id or local path (the server must serve the same model)"""
    server_url: str = "http://127.0.0.1:8000"
    """base URL of the vLLM server (server mode)"""
    allocator: str = "ar3po:2,4"
    """rolloutlab allocator spec"""
    max_steps: int = 2
    """GRPO steps"""
    max_logp_difference: float = 0.1
    """largest accepted mean |log p_policy - log p_vLLM| per token (nats)"""
    output_dir: str = "runs/vllm_smoke"
    """TRL's output directory (nothing is saved)"""


def main(args: Args) -> None:
    if args.mode not in ("colocate", "server"):
        sys.exit(f"--mode must be colocate or server, got {args.mode!r}")
    tasks = make_prompt_set(16, np.random.default_rng(0), difficulties=[1, 2])
    dataset = Dataset.from_dict({"prompt": [t.prompt for t in tasks], "answer": [t.answer for t in tasks]})

    def exact_match(prompts: list[str], completions: list[str], answer: list[str], **kwargs: Any) -> list[float]:
        return [float(str(a) in c) for a, c in zip(answer, completions, strict=True)]

    config = GRPOConfig(
        output_dir=args.output_dir,
        per_device_train_batch_size=4 * 4,
        num_generations=4,
        max_completion_length=16,
        max_steps=args.max_steps,
        learning_rate=1e-6,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        bf16=True,
        use_vllm=True,
        vllm_mode=args.mode,
        vllm_server_base_url=args.server_url if args.mode == "server" else None,
        vllm_gpu_memory_utilization=0.3,
    )
    trainer = AllocatingGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(args.model),
        reward_funcs=[exact_match],
        args=config,
        train_dataset=dataset,
        processing_class=AutoTokenizer.from_pretrained(args.model),
        allocator=make_allocator(args.allocator),
    )
    trainer.train()
    steps = [entry for entry in trainer.state.log_history if "loss" in entry]
    print("ledger:", trainer.ledger.as_dict())
    for i, entry in enumerate(steps):
        print(f"step {i}:", {k: v for k, v in entry.items() if k.startswith("sampling/")})
    if len(steps) != args.max_steps:
        sys.exit(f"expected {args.max_steps} logged steps, got {len(steps)}")
    for i, entry in enumerate(steps):
        values = [entry.get(f"sampling/importance_sampling_ratio/{k}") for k in ("min", "mean", "max")]
        if any(v is None or not math.isfinite(v) for v in values):
            sys.exit(f"step {i}: TRL's importance-sampling metrics missing or not finite: {values}")
        difference = entry["sampling/sampling_logp_difference/mean"]
        if not difference <= args.max_logp_difference:
            sys.exit(
                f"step {i}: vLLM's log-probabilities differ from the policy's by {difference:.3g} nats per token "
                f"(> --max-logp-difference {args.max_logp_difference}): weights not synced, or rows mispaired"
            )
    print(f"vllm_smoke: {args.mode} mode passed ({args.max_steps} steps, {trainer.ledger.responses} responses)")


if __name__ == "__main__":
    main(tyro.cli(Args))
