"""A compact GRPO trainer small enough for a unit test to step it in well under a second.

Importable from every test as ``tiny_grpo``: pytest puts ``tests/`` on ``sys.path`` for ``tests/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from envs.reasoning import make_prompt_set
from meta.rlvr import Uniform
from meta.rlvr.lm.charlm import CharLMConfig, build_model
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.grpo import GRPOTrainer
from meta.rlvr.trainers.grpo_config import GRPOConfig

#: A one-layer character LM of 32 units.
TINY_LM = CharLMConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2)


def tiny_grpo_trainer(group_size: int, **kwargs: Any) -> GRPOTrainer:
    """A trainer on 8 prompts (difficulties 1-2), 2 prompts per step in 2 minibatches, ``group_size`` responses per
    prompt, rewarded by the parity of the response's length (so groups are mixed without a trained model);
    ``kwargs`` go to :class:`GRPOTrainer` (``eepo=``, ``token_controller=``, ...). Torch's global seed is reset, so
    two trainers built alike start alike."""
    torch.manual_seed(0)
    pool = make_prompt_set(8, np.random.default_rng(0), difficulties=[1, 2])
    cfg = GRPOConfig(prompts_per_step=2, minibatches=2, lr=0.02)
    return GRPOTrainer(
        build_model(TINY_LM),
        CharVocab(),
        pool,
        Uniform(group_size),
        cfg,
        reward_fn=lambda t, s: float(len(s) % 2),
        **kwargs,
    )


def resumed_alongside(make: Callable[[], GRPOTrainer], steps: int = 3) -> tuple[GRPOTrainer, GRPOTrainer]:
    """``(full, resumed)``: ``full`` stepped ``steps`` times; ``resumed`` restored from a copy stopped after one step,
    then stepped the rest. Asserts the two policies are bit-identical; the caller checks the rest of the state."""
    full = make()
    for _ in range(steps):
        full.step()
    part = make()
    part.step()
    resumed = make()
    resumed.load_state_dict(part.state_dict())
    for _ in range(steps - 1):
        resumed.step()
    for p, q in zip(full.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(p, q)
    return full, resumed


def tiny_calc_sft(path: Path, difficulties: Sequence[int] = (1, 2), eval_per_difficulty: int = 3) -> dict[str, Any]:
    """Three SFT steps of a one-layer character LM on the ``calc`` traces, saved at ``path``; returns the metrics."""
    from envs.reasoning.tooluse import TOOL_ALPHABET
    from meta.rlvr.trainers.sft import SFTConfig, train_sft

    model_cfg = CharLMConfig(
        hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, alphabet=TOOL_ALPHABET, max_positions=96
    )
    sft_cfg = SFTConfig(
        steps=3,
        batch_size=8,
        families=["calc"],
        difficulties=list(difficulties),
        eval_per_difficulty=eval_per_difficulty,
        max_new_tokens=40,
        model=model_cfg,
    )
    return train_sft(sft_cfg, out_path=path, log=None)[1]


class EchoTool:
    """A tool hook that answers every ``1`` the model samples with a ``7``: frequent "calls" from an untrained model
    over the default alphabet, so tool-result points occur in every few responses."""

    def __init__(self, vocab: CharVocab) -> None:
        self.trigger = vocab.index["1"]
        self.answer = vocab.index["7"]

    def respond(self, completion: Sequence[int]) -> list[int]:
        return [self.answer]


def parity_reward(task: Any, completion: str) -> float:
    """The tiny trainers' reward (the parity of the completion's length) as a module-level function, so that it
    travels to rollout worker processes and Ray actors."""
    return float(len(completion) % 2)
