"""The TRL adapter in vLLM server mode on every rank of a data-parallel run (a rank worker, and the test allocator).

Launched by ``tests/rlvr/test_rlvr_trl_vllm.py`` as a script under ``python -m torch.distributed.run
--nproc_per_node 2`` (gloo on CPU) with the base URL of a :class:`local_vllm_server.LocalVLLMServer` running in the
test's process and an output folder; each rank saves ``rank<R>.pt``: per training batch the largest difference
between vLLM's and the policy's log-probability of a trained token, the rows it trained, and its final parameters.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from datasets import Dataset
from local_vllm_server import patch_client_for_http
from trl import GRPOConfig

from envs.reasoning import make_prompt_set
from meta.rlvr import Allocator, StatsTable
from meta.rlvr.lm.charlm import CharLMConfig, build_model
from meta.rlvr.lm.tokenizer import CharTokenizer
from meta.rlvr.trl import AllocatingGRPOTrainer

#: Responses per prompt in TRL's sampler; prompts per global batch; steps.
G, PROMPTS, STEPS = 2, 4, 2
#: Stage counts per prompt of the global batch: 5 rows (3 + 2, a pad row on rank 1), then 1 (rank 1 pads only).
FIRST, SECOND = (1, 2, 1, 1), (1, 0, 0, 0)


class TwoStages(Allocator):
    """Test allocator: prompt i gets ``first[i]`` responses in stage 0 and ``second[i]`` more in stage 1."""

    name = "two-stages-test"
    max_stages = 2

    def __init__(self, first: Sequence[int], second: Sequence[int]) -> None:
        self.first, self.second = list(first), list(second)

    def initial(self, keys: Sequence[str], stats: StatsTable) -> list[int]:
        return list(self.first)

    def extra(self, keys: Sequence[str], rewards: Sequence[Sequence[float]], stage: int) -> list[int]:
        return list(self.second)


def tiny_model() -> torch.nn.Module:
    """The tiny Qwen2 model every test of the vLLM path trains and serves (same seed, same weights)."""
    torch.manual_seed(0)
    return build_model(CharLMConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2))


def varied_reward(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
    """A reward with variance inside groups: whether the completion's length is a multiple of 3."""
    return [float(len(c) % 3 == 0) for c in completions]


def run(url: str, out: Path) -> None:
    patch_client_for_http(pytest.MonkeyPatch())
    processes = int(os.environ["WORLD_SIZE"])
    tasks = make_prompt_set(PROMPTS, np.random.default_rng(0), difficulties=[1])
    config = GRPOConfig(
        output_dir=str(out / "trl"),
        per_device_train_batch_size=PROMPTS * G // processes,
        num_generations=G,
        max_completion_length=6,
        max_steps=STEPS,
        learning_rate=3e-2,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
        disable_tqdm=True,
        use_vllm=True,
        vllm_mode="server",
        vllm_server_base_url=url,
        vllm_server_timeout=10.0,
    )
    trainer = AllocatingGRPOTrainer(
        model=tiny_model(),
        reward_funcs=[varied_reward],
        args=config,
        train_dataset=Dataset.from_dict({"prompt": [t.prompt for t in tasks], "answer": [t.answer for t in tasks]}),
        processing_class=CharTokenizer(),
        allocator=TwoStages(FIRST, SECOND),
    )
    differences: list[float] = []
    rows: list[list[int]] = []
    build = trainer._build_batch

    def recording(*args: Any, **kwargs: Any) -> dict[str, Any]:
        batch = build(*args, **kwargs)
        mask = batch["completion_mask"].bool()
        difference = batch["sampling_per_token_logps"] - batch["old_per_token_logps"]
        differences.append(float(difference[mask].abs().max()) if mask.any() else 0.0)
        rows.append(list(trainer.last_batch["rank_rows"]))
        return batch

    trainer._build_batch = recording  # type: ignore[method-assign]
    trainer.train()
    unwrapped = trainer.accelerator.unwrap_model(trainer.model)
    result = {
        "differences": differences,
        "rank_rows": rows,
        "group_sizes": list(trainer.last_batch["group_sizes"]),
        "params": {k: v.detach().cpu().clone() for k, v in unwrapped.state_dict().items()},
    }
    torch.save(result, out / f"rank{os.environ['RANK']}.pt")


if __name__ == "__main__":
    run(sys.argv[1], Path(sys.argv[2]))
