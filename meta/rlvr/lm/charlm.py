"""A small character-level causal transformer: a tiny Hugging Face ``Qwen2ForCausalLM``.

Using the field's model class (rather than a home-made transformer) means the same network runs in the compact GRPO
trainer and in TRL's ``GRPOTrainer``, with KV caching handled by transformers. Sizes are in :class:`CharLMConfig`;
the default (2 layers, width 64, ~85k parameters) trains on one CPU core in minutes.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from envs.reasoning.tasks import ALPHABET
from meta.rlvr.lm.vocab import CharVocab
from rolloutlab.checkpoint import load_checkpoint, save_checkpoint

CHECKPOINT_KIND = "rlvr-charlm"


@dataclass
class CharLMConfig:
    """Architecture of the character model.

    Attributes:
        alphabet: Task characters (ids 3.. of the vocabulary).
        hidden_size: Model width.
        intermediate_size: MLP width.
        num_layers: Transformer blocks.
        num_heads: Attention heads (width must divide evenly).
        max_positions: Longest prompt + completion, in tokens.
    """

    alphabet: str = ALPHABET
    hidden_size: int = 64
    intermediate_size: int = 192
    num_layers: int = 2
    num_heads: int = 4
    max_positions: int = 32


def build_model(cfg: CharLMConfig) -> torch.nn.Module:
    """A freshly initialised ``Qwen2ForCausalLM`` for ``cfg`` (token ids as in :class:`CharVocab`)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    vocab = CharVocab(cfg.alphabet)
    config = Qwen2Config(
        vocab_size=len(vocab),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_heads,
        max_position_embeddings=cfg.max_positions,
        tie_word_embeddings=True,
        pad_token_id=vocab.pad_id,
        bos_token_id=vocab.bos_id,
        eos_token_id=vocab.eos_id,
    )
    return Qwen2ForCausalLM(config)


def save_model(
    path: str | os.PathLike[str], model: torch.nn.Module, cfg: CharLMConfig, extra: dict[str, Any] | None = None
) -> Path:
    """Atomically save weights + architecture (+ ``extra`` plain data such as SFT metrics)."""
    state = {"model": model.state_dict(), "extra": extra or {}}
    return save_checkpoint(path, state, kind=CHECKPOINT_KIND, config=asdict(cfg))


def load_model(path: str | os.PathLike[str]) -> tuple[torch.nn.Module, CharLMConfig, dict[str, Any]]:
    """Load a model saved by :func:`save_model` (weights-only loading).

    Returns:
        ``(model, config, extra)``.
    """
    envelope = load_checkpoint(path, kind=CHECKPOINT_KIND)
    cfg = CharLMConfig(**envelope["config"])
    model = build_model(cfg)
    model.load_state_dict(envelope["state"]["model"])
    return model, cfg, dict(envelope["state"].get("extra", {}))
