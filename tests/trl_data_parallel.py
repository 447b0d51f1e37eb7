"""Short runs of the TRL adapter (AR3PO, DAPO), for comparing a 1-process run with a multi-process one.

Imported by ``tests/rlvr/test_rlvr_trl_data_parallel.py`` (the 1-process runs, in the test's process) and launched by
it as a script under ``python -m torch.distributed.run --nproc_per_node 2`` (gloo on CPU); each rank saves
``<run>.rank<R>.pt`` for every run of :data:`RUNS` in the output folder given as the only argument.

Sampling is made independent of how rows are spread over ranks: every row is generated alone, seeded with its place in
the step's global request (prompt, which of that prompt's responses, stage call, step). The model, the reward and
TRL's generation are otherwise the real ones, so allocation decisions follow real rewards.
"""

from __future__ import annotations

import os
import sys
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import torch
from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig

from envs.reasoning import make_prompt_set
from meta.rlvr import make_allocator
from meta.rlvr.lm.charlm import CharLMConfig, build_model
from meta.rlvr.lm.tokenizer import CharTokenizer
from meta.rlvr.trl import AllocatingGRPOTrainer
from meta.rlvr.trl_distributed import rank_rows

#: Responses per prompt in TRL's sampler (the groups the data loader hands out).
G = 2
#: Prompts per global batch.
PROMPTS = 4
#: Steps; the dataset holds 2 * PROMPTS prompts, so every prompt comes back (AR3PO's reuse pool gets used).
STEPS = 4
#: Runs: AR3PO (stages, response reuse; a row budget above its largest step, so nothing is cut), DAPO (dropped groups,
#: refill from the training set), and AR3PO under a global row budget of 6 rows with one generation sliced into
#: ``steps_per_generation=2`` micro-batches (the budget per process is 6 / processes).
RUNS: dict[str, dict[str, Any]] = {
    "ar3po": {"allocator": "ar3po:1,3", "global_row_budget": 64},
    "dapo": {"allocator": "dapo:2,2"},
    "ar3po_budget_sliced": {"allocator": "ar3po:1,3", "global_row_budget": 6, "steps_per_generation": 2},
}
ALLOCATORS = tuple(RUNS)


class RowSeededTrainer(AllocatingGRPOTrainer):
    """Generates each row alone, seeded by its place in the global request: the same sample whichever rank draws it."""

    _call: tuple[int, int] = (-1, 0)
    _local_rows: tuple[tuple[Any, ...], ...] = ()

    def _sample_stage(self, groups: list[Any], counts: list[int], stage: int) -> None:
        step, call = self._call
        self._call = (self.state.global_step, call + 1 if step == self.state.global_step else 0)
        seen: Counter[str] = Counter()
        rows = []
        for i, c in enumerate(counts):
            for _ in range(c):
                rows.append((groups[i].key, seen[groups[i].key], self._call))
                seen[groups[i].key] += 1
        if rows:
            # The rows this rank generates (meta.rlvr.trl_distributed.generate_and_score), pad row included.
            start, stop, width = rank_rows(len(rows), self.accelerator)
            local = list(range(start, stop)) + [min(start, len(rows) - 1)] * (width - (stop - start))
            self._local_rows = tuple(rows[i] for i in local)
        super()._sample_stage(groups, counts, stage)

    def _generate_single_turn(self, prompt_ids: Any, *a: Any, **kw: Any) -> tuple[list[list[int]], None]:
        # The arguments after prompt_ids differ between TRL releases (num_generations since 1.14): passed on as given.
        assert len(prompt_ids) == len(self._local_rows)
        completions: list[list[int]] = []
        for ids, row in zip(prompt_ids, self._local_rows, strict=True):
            torch.manual_seed(zlib.crc32(repr(row).encode()))
            out, _ = super()._generate_single_turn([ids], *a, **kw)
            completions += out
        return completions, None


class Record(TrainerCallback):
    """Keeps each step's allocation decisions and the rows each rank trained."""

    def __init__(self) -> None:
        self.trainer: AllocatingGRPOTrainer | None = None
        self.steps: list[dict[str, Any]] = []

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        trainer = self.trainer
        assert trainer is not None
        self.steps.append(
            {
                "allocation": list(trainer.last_allocation),
                "group_sizes": list(trainer.last_batch["group_sizes"]),
                "reused": int(sum(trainer.last_batch["reused"])),
                "groups_kept": trainer.last_step["groups_kept"],
                "refill_rounds": trainer.last_step["refill_rounds"],
                "rank_rows": list(trainer.last_batch["rank_rows"]),
                "stage_padding": trainer._stage_padding,
                "rows_cut": trainer._clock.rows_cut,
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


def run(out_dir: Path, processes: int, name: str) -> dict[str, Any]:
    """Train :data:`STEPS` steps of the run ``name`` (:data:`RUNS`) on a global batch of :data:`PROMPTS` prompts
    split over ``processes`` ranks."""
    settings = RUNS[name]
    slices = int(settings.get("steps_per_generation", 1))
    budget = settings.get("global_row_budget")
    tasks = make_prompt_set(2 * PROMPTS, np.random.default_rng(0), difficulties=[1])
    dataset = Dataset.from_dict({"prompt": [t.prompt for t in tasks], "answer": [t.answer for t in tasks]})
    config = GRPOConfig(
        output_dir=str(out_dir / "trl"),
        # One generation of PROMPTS * G rows globally, cut into `slices` micro-batches of one optimizer step.
        per_device_train_batch_size=PROMPTS * G // processes // slices,
        gradient_accumulation_steps=slices,
        steps_per_generation=slices,
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
        disable_tqdm=True,
    )
    record = Record()
    trainer = RowSeededTrainer(
        model=_model(),
        reward_funcs=[correct],
        args=config,
        train_dataset=dataset,
        processing_class=CharTokenizer(),
        allocator=make_allocator(settings["allocator"]),
        max_rows_per_step=None if budget is None else int(budget) // processes,
        callbacks=[record],
    )
    record.trainer = trainer
    trainer.train()
    unwrapped = trainer.accelerator.unwrap_model(trainer.model)
    buffer = trainer.response_buffer
    return {
        "processes": trainer.accelerator.num_processes,
        "steps": record.steps,
        "params": {k: v.detach().cpu().clone() for k, v in unwrapped.state_dict().items()},
        "ledger": trainer.ledger.as_dict(),
        "stats": trainer.rlvr_stats.state_dict(),
        "buffer": buffer.state_dict() if buffer is not None else None,
    }


if __name__ == "__main__":
    out = Path(sys.argv[1])
    for spec in ALLOCATORS:
        result = run(out / spec, int(os.environ["WORLD_SIZE"]), spec)
        torch.save(result, out / f"{spec}.rank{os.environ['RANK']}.pt")
