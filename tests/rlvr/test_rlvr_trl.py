"""The TRL adapter on CPU: a tiny Qwen2 model, the local character tokenizer, two short training steps."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

import torch
from datasets import Dataset
from trl import GRPOConfig

from envs.reasoning import Task, make_prompt_set
from meta.rlvr import AdaptiveLengthPenalty, Allocator, EntropyTemperature, StatsTable
from meta.rlvr.charlm import CharLMConfig, build_model
from meta.rlvr.tokenizer import CharTokenizer
from meta.rlvr.trl import AllocatingGRPOTrainer, LengthPenaltyReward, TemperatureCallback


class Alternating(Allocator):
    """Test allocator: prompt i gets (1, 3, 4, 0)[i % 4] responses; records its decisions."""

    name = "alternating"

    def __init__(self) -> None:
        self.decisions: list[list[int]] = []

    def initial(self, keys: Sequence[str], stats: StatsTable) -> list[int]:
        counts = [(1, 3, 4, 0)[i % 4] for i in range(len(keys))]
        self.decisions.append(counts)
        return counts


def _config(tmp_path: Path, loss_type: str = "dapo") -> GRPOConfig:
    return GRPOConfig(
        output_dir=str(tmp_path / "trl"),
        per_device_train_batch_size=16,
        num_generations=4,
        max_completion_length=6,
        max_steps=2,
        learning_rate=1e-3,
        loss_type=loss_type,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
        temperature=1.0,
    )


def _dataset(n: int = 16) -> Dataset:
    import numpy as np

    tasks: list[Task] = make_prompt_set(n, np.random.default_rng(0), difficulties=[1])
    return Dataset.from_dict({"prompt": [t.prompt for t in tasks], "answer": [t.answer for t in tasks]})


def test_adapter_applies_allocation_and_masks_dummies(tmp_path: Path) -> None:
    seen: list[int] = []

    def exact(prompts: list[str], completions: list[str], answer: list[str], **kwargs: Any) -> list[float]:
        seen.append(len(prompts))
        return [float(c.strip() == a) for c, a in zip(completions, answer, strict=True)]

    allocator = Alternating()
    stats = StatsTable()
    model = build_model(CharLMConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2))
    trainer = AllocatingGRPOTrainer(
        model=model,
        reward_funcs=[exact, LengthPenaltyReward(AdaptiveLengthPenalty(0.1, 6), stats, group_size=4)],
        args=_config(tmp_path),
        train_dataset=_dataset(),
        processing_class=CharTokenizer(),
        allocator=allocator,
        stats=stats,
    )
    temp = TemperatureCallback(EntropyTemperature(target_entropy=0.5, vocab_size=16)).attach(trainer)
    trainer.train()

    assert allocator.decisions, "the allocator was never asked"
    assert trainer.last_allocation == allocator.decisions[-1] == [1, 3, 4, 0]
    dummy = trainer.last_batch["dummy"]
    # the per-prompt count of real (non-dummy) rows equals the allocator's decision
    real_per_prompt = (~dummy).view(-1, 4).sum(dim=1).tolist()
    assert real_per_prompt == trainer.last_allocation
    # dummy rows carry exactly zero advantage
    advantages = trainer.last_batch["advantages"]
    assert torch.all(advantages[dummy] == 0)
    # statistics were updated with real rows only: 1 + 3 + 4 + 0 attempts for the four prompts of a batch
    assert sum(rec.attempts for rec in stats.table.values()) == 2 * 8
    assert len(temp.history) == 2 and trainer.temperature == temp.history[-1]


@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo"])
def test_adapter_refuses_inexact_losses(tmp_path: Path, loss_type: str) -> None:
    model = build_model(CharLMConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2))
    with pytest.raises(ValueError, match="loss_type"):
        AllocatingGRPOTrainer(
            model=model,
            reward_funcs=[lambda prompts, completions, **kw: [0.0] * len(prompts)],
            args=_config(tmp_path, loss_type),
            train_dataset=_dataset(),
            processing_class=CharTokenizer(),
            allocator=Alternating(),
        )


def test_trl_outside_the_tested_range_is_refused_with_the_range() -> None:
    from pathlib import Path

    import tomllib

    from meta.rlvr.trl import SUPPORTED_TRL, check_trl_version

    check_trl_version("1.16.0")
    check_trl_version("1.16.3")
    for version in ("1.15.2", "1.17.0", "2.0.0"):
        with pytest.raises(
            ImportError, match=r"supports TRL >=1\.16,<1\.17 .* found trl " + version.replace(".", r"\.")
        ):
            check_trl_version(version)
    # The package's llm extra pins the same range.
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    low, high = SUPPORTED_TRL
    assert f"trl>={low},<{high}" in pyproject["project"]["optional-dependencies"]["llm"]
