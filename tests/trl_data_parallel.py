"""One short AR3PO run of the TRL adapter, for comparing a 1-process run with a multi-process one.

Imported by ``tests/rlvr/test_rlvr_trl_data_parallel.py`` (the 1-process run, in the test's process) and launched by it
as a script under ``python -m torch.distributed.run --nproc_per_node 2`` (gloo on CPU); each rank saves
``rank<R>.pt`` in the output folder given as the only argument.

Sampling is made independent of how rows are spread over ranks: every row is generated alone, seeded with its prompt,
the step and the stage (AR3PO with one response per prompt and stage asks each prompt at most once per stage). The
model, the reward and TRL's generation are otherwise the real ones, so allocation decisions follow real rewards.
"""

from __future__ import annotations

import os
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import torch
from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig

from envs.reasoning import make_prompt_set
from meta.rlvr import AR3PO
from meta.rlvr.lm.charlm import CharLMConfig, build_model
from meta.rlvr.lm.tokenizer import CharTokenizer
from meta.rlvr.trl import AllocatingGRPOTrainer

#: Responses per prompt in TRL's sampler (the groups the data loader hands out).
G = 2
#: Prompts per global batch.
PROMPTS = 4
#: Steps; the dataset holds PROMPTS prompts, so every prompt comes back each step (AR3PO's reuse pool gets used).
STEPS = 4


class RowSeededTrainer(AllocatingGRPOTrainer):
    """Generates each row alone, seeded by (prompt ids, step, stage): the same sample whichever rank draws it."""

    _stage_key: tuple[int, int] = (-1, 0)

    def _generate_single_turn(
        self, prompt_ids: Any, images: Any, multimodal_fields: Any, num_generations: int, *a: Any
    ) -> tuple[list[list[int]], None]:
        step, calls = self._stage_key
        self._stage_key = (self.state.global_step, calls + 1 if step == self.state.global_step else 0)
        completions: list[list[int]] = []
        for ids in prompt_ids:
            torch.manual_seed(zlib.crc32(repr((list(ids), self._stage_key)).encode()))
            out, _ = super()._generate_single_turn([ids], images, multimodal_fields, num_generations, *a)
            completions += out
        return completions, None


class Record(TrainerCallback):
    """Keeps each step's allocation (responses generated per prompt) and trained group sizes."""

    def __init__(self) -> None:
        self.trainer: AllocatingGRPOTrainer | None = None
        self.steps: list[dict[str, Any]] = []

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        assert self.trainer is not None
        self.steps.append(
            {
                "allocation": list(self.trainer.last_allocation),
                "group_sizes": list(self.trainer.last_batch["group_sizes"]),
                "reused": int(sum(self.trainer.last_batch["reused"])),
                "rank_rows": list(self.trainer.last_batch["rank_rows"]),
                "stage_padding": self.trainer._stage_padding,
            }
        )


def correct(prompts: list[str], completion_ids: list[list[int]], **kwargs: Any) -> list[float]:
    """A verifier stand-in that reads the real completions: right when the token ids sum to a multiple of 3."""
    return [float(sum(c) % 3 == 0) for c in completion_ids]


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(CharLMConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2))


def initial_parameters() -> dict[str, torch.Tensor]:
    """The parameters every run starts from."""
    return {k: v.detach().clone() for k, v in _model().state_dict().items()}


def run(out_dir: Path, processes: int) -> dict[str, Any]:
    """Train :data:`STEPS` steps on a global batch of :data:`PROMPTS` prompts split over ``processes`` ranks."""
    tasks = make_prompt_set(PROMPTS, np.random.default_rng(0), difficulties=[1])
    dataset = Dataset.from_dict({"prompt": [t.prompt for t in tasks], "answer": [t.answer for t in tasks]})
    assert len(set(dataset["prompt"])) == len(dataset), "row seeding needs distinct prompts"
    config = GRPOConfig(
        output_dir=str(out_dir / "trl"),
        per_device_train_batch_size=PROMPTS * G // processes,
        num_generations=G,
        max_completion_length=6,
        max_steps=STEPS,
        learning_rate=1e-2,
        loss_type="dapo",
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
        ddp_backend="gloo" if processes > 1 else None,
    )
    model = _model()
    record = Record()
    trainer = RowSeededTrainer(
        model=model,
        reward_funcs=[correct],
        args=config,
        train_dataset=dataset,
        processing_class=CharTokenizer(),
        allocator=AR3PO(stage_size=1, max_stages=3),
        callbacks=[record],
    )
    record.trainer = trainer
    trainer.train()
    assert trainer.response_buffer is not None
    unwrapped = trainer.accelerator.unwrap_model(trainer.model)
    return {
        "processes": trainer.accelerator.num_processes,
        "steps": record.steps,
        "params": {k: v.detach().cpu().clone() for k, v in unwrapped.state_dict().items()},
        "ledger": trainer.ledger.as_dict(),
        "stats": trainer.rlvr_stats.state_dict(),
        "buffer": trainer.response_buffer.state_dict(),
    }


if __name__ == "__main__":
    out = Path(sys.argv[1])
    result = run(out, int(os.environ["WORLD_SIZE"]))
    torch.save(result, out / f"rank{os.environ['RANK']}.pt")
