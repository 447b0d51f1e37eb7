"""A compact GRPO trainer small enough for a unit test to step it in well under a second.

Importable from every test as ``tiny_grpo``: pytest puts ``tests/`` on ``sys.path`` for ``tests/conftest.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from envs.reasoning import make_prompt_set
from meta.rlvr import Uniform
from meta.rlvr.charlm import CharLMConfig, build_model
from meta.rlvr.grpo import GRPOConfig, GRPOTrainer
from meta.rlvr.vocab import CharVocab

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
