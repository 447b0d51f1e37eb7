"""Trajectory encoders: a causal pre-norm Transformer with a KV cache, a GRU, and a memory-free MLP.

All three map per-timestep embeddings ``x`` of shape ``(batch, time, d_model)`` to outputs of the same shape and take
an optional recurrent state, so acting one step at a time (``time = 1``) and training on whole windows share one code
path. The Transformer deliberately has no attention mask at inner-episode boundaries (AMAGO, Sec. 4): the reset flag
in the input tells it where episodes start, and attending across them is how it learns from earlier episodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn


def sinusoidal_positions(positions: torch.Tensor, d_model: int) -> torch.Tensor:
    """Sinusoidal embeddings (Vaswani et al., 2017) of absolute timesteps.

    Args:
        positions: Integer timesteps, shape ``(time,)``.
        d_model: Embedding width (even).

    Returns:
        Float tensor of shape ``(time, d_model)``.
    """
    half = d_model // 2
    freqs = torch.exp(-math.log(10_000.0) * torch.arange(half, dtype=torch.float32, device=positions.device) / half)
    angles = positions.to(torch.float32)[:, None] * freqs[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)


class SigmaReparamLinear(nn.Linear):
    """A linear layer with spectrally reparametrized weights: ``W_hat = (gamma / sigma(W)) W`` (Zhai et al., 2023).

    ``W / sigma(W)`` is :func:`torch.nn.utils.parametrizations.spectral_norm` (one power-iteration step per
    training-mode access of ``weight``; eval mode reuses the stored singular vectors) and ``gamma`` a learned scalar.
    The network can only sharpen its attention by growing ``gamma``, which keeps the attention logits from saturating
    early (the paper's "attention entropy collapse"). AMAGO uses it in its Transformer for the same reason. Here the
    collapse showed on the passive T-maze: runs whose junction step had put exactly zero attention on the cue step
    never recovered (``docs/incontext.md``). ``gamma`` starts at ``sigma(W)`` of the initial weights, so the layer
    starts as the plain linear layer it replaces.

    ``self.weight`` is the *normalized* weight; the raw one is ``self.parametrizations.weight.original``. Checkpoints
    of the earlier hand-written version (``weight``, ``u``, ``v``, ``gamma``) load unchanged
    (:meth:`_load_from_state_dict`).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__(in_features, out_features, bias)
        torch.nn.utils.parametrizations.spectral_norm(self, n_power_iterations=1)
        with torch.no_grad():
            # spectral_norm's own estimate of sigma (its u, v after its warm-up iterations), so that W_hat = W exactly.
            weight = cast(Any, self).parametrizations.weight  # registered by spectral_norm just above
            norm, raw = weight[0], weight.original
            sigma = torch.vdot(norm._u, raw @ norm._v)
        self.gamma = nn.Parameter(sigma.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ W_hat.T + b``; a training-mode call first refines the singular-vector estimates."""
        return F.linear(x, self.gamma * self.weight, self.bias)

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any, **kwargs: Any) -> None:
        # The hand-written version stored the raw weight as ``weight`` and its singular vectors as ``u`` (left) and
        # ``v`` (right): the same quantities spectral_norm keeps as ``original``, ``_u`` and ``_v``.
        renames = {
            "weight": "parametrizations.weight.original",
            "u": "parametrizations.weight.0._u",
            "v": "parametrizations.weight.0._v",
        }
        for old, new in renames.items():
            if prefix + old in state_dict and prefix + new not in state_dict:
                state_dict[prefix + new] = state_dict.pop(prefix + old)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


def _linear(in_features: int, out_features: int, sigma_reparam: bool) -> nn.Linear:
    return SigmaReparamLinear(in_features, out_features) if sigma_reparam else nn.Linear(in_features, out_features)


@dataclass
class KVCache:
    """Keys and values of the past timesteps, per layer, each ``(batch, heads, past, head_dim)``.

    Attributes:
        keys: One tensor per layer (empty list before the first step).
        values: One tensor per layer.
        length: Timesteps seen so far (the absolute position of the next input).
    """

    keys: list[torch.Tensor] = field(default_factory=list)
    values: list[torch.Tensor] = field(default_factory=list)
    length: int = 0


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention over a sliding context of ``context_len`` timesteps."""

    def __init__(self, d_model: int, n_heads: int, context_len: int, sigma_reparam: bool = False) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.context_len = context_len
        self.qkv = _linear(d_model, 3 * d_model, sigma_reparam)
        self.out = _linear(d_model, d_model, sigma_reparam)

    def forward(
        self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Attend from ``x`` (``(B, T, d)``) to the past keys/values and to itself; return output and new keys/values.

        A query at absolute position ``i`` sees keys ``j`` with ``i - context_len < j <= i`` (causal, banded), so a
        whole-sequence pass and a one-step-at-a-time pass with a cache give the same numbers.
        """
        batch, steps, d_model = x.shape
        q, k, v = self.qkv(x).view(batch, steps, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if past is not None:
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        total = k.shape[2]
        query_pos = torch.arange(total - steps, total, device=x.device)[:, None]
        key_pos = torch.arange(total, device=x.device)[None, :]
        allowed = (key_pos <= query_pos) & (key_pos > query_pos - self.context_len)
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        out = self.out(attended.transpose(1, 2).reshape(batch, steps, d_model))
        # Only the last context_len - 1 keys can ever be attended to again.
        keep = self.context_len - 1
        return out, (k[:, :, -keep:], v[:, :, -keep:]) if keep > 0 else (k[:, :, :0], v[:, :, :0])


class TransformerBlock(nn.Module):
    """Pre-norm block: ``x + attn(LN(x))`` then ``x + FF(LN(x))`` with a leaky-ReLU feed-forward (AMAGO, App. A)."""

    def __init__(
        self, d_model: int, n_heads: int, context_len: int, dropout: float, sigma_reparam: bool = False
    ) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads, context_len, sigma_reparam)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(
            _linear(d_model, 4 * d_model, sigma_reparam),
            nn.LeakyReLU(),
            nn.Dropout(dropout),
            _linear(4 * d_model, d_model, sigma_reparam),
        )
        self.drop = nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        attended, new_past = self.attn(self.norm1(x), past)
        x = x + self.drop(attended)
        x = x + self.drop(self.ff(self.norm2(x)))
        return x, new_past


class TransformerTrajEncoder(nn.Module):
    """Causal pre-norm Transformer over a rollout, with absolute sinusoidal timestep embeddings and a KV cache.

    Args:
        d_model: Width.
        n_layers: Blocks.
        n_heads: Attention heads.
        context_len: Timesteps a query can see (itself included); inference with a cache keeps only this many.
        dropout: Dropout in the blocks (0 for RL by default).
        sigma_reparam: Use :class:`SigmaReparamLinear` for every linear layer of the blocks.
    """

    def __init__(
        self,
        d_model: int,
        n_layers: int,
        n_heads: int,
        context_len: int,
        dropout: float = 0.0,
        sigma_reparam: bool = False,
    ) -> None:
        super().__init__()
        self.d_model = d_model
        self.blocks = nn.ModuleList(
            TransformerBlock(d_model, n_heads, context_len, dropout, sigma_reparam) for _ in range(n_layers)
        )
        self.norm = nn.LayerNorm(d_model)

    def init_state(self, batch: int) -> KVCache:
        """An empty cache for ``batch`` rollouts starting at timestep 0."""
        return KVCache()

    def forward(
        self, x: torch.Tensor, state: KVCache | None = None, start: torch.Tensor | int = 0
    ) -> tuple[torch.Tensor, KVCache]:
        """Encode ``x`` of shape ``(B, T, d_model)``.

        Args:
            x: Timestep embeddings.
            state: A cache from earlier steps of the same rollouts, or ``None`` for a fresh pass.
            start: Absolute timestep of ``x[:, 0]`` when ``state`` is ``None`` (a window cut from the middle of a
                rollout), an int or a ``(B,)`` tensor; ignored when ``state`` is given (the cache knows its length).

        Returns:
            Outputs ``(B, T, d_model)`` and the updated cache.
        """
        steps = x.shape[1]
        offset: torch.Tensor | int = state.length if state is not None else start
        if isinstance(offset, torch.Tensor):
            positions = offset.to(x.device)[:, None] + torch.arange(steps, device=x.device)[None, :]
            x = x + sinusoidal_positions(positions.reshape(-1), self.d_model).view(*positions.shape, -1)
        else:
            x = x + sinusoidal_positions(torch.arange(offset, offset + steps, device=x.device), self.d_model)
        new_state = KVCache(length=(state.length if state is not None else 0) + steps)
        for layer, block in enumerate(self.blocks):
            past = (state.keys[layer], state.values[layer]) if state is not None and state.keys else None
            x, (keys, values) = block(x, past)
            new_state.keys.append(keys)
            new_state.values.append(values)
        return self.norm(x), new_state


class GRUTrajEncoder(nn.Module):
    """A GRU over the rollout: the recurrent drop-in for the Transformer (state: ``(1, B, d_model)`` hidden)."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.gru = nn.GRU(d_model, d_model, batch_first=True)
        self.norm = nn.LayerNorm(d_model)

    def init_state(self, batch: int) -> torch.Tensor:
        """A zero hidden state for ``batch`` rollouts (on the GRU's device)."""
        return torch.zeros(1, batch, self.gru.hidden_size, device=self.norm.weight.device)

    def forward(
        self, x: torch.Tensor, state: torch.Tensor | None = None, start: torch.Tensor | int = 0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Encode ``(B, T, d_model)``; ``start`` is unused (a window mid-rollout starts from a zero state)."""
        out, hidden = self.gru(x, state)
        return self.norm(out), hidden


class MemoryFreeTrajEncoder(nn.Module):
    """No memory at all: an MLP per timestep. The control that shows what memory buys (e.g. 0.5 on the T-maze)."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(d_model, d_model), nn.LeakyReLU(), nn.LayerNorm(d_model))

    def init_state(self, batch: int) -> None:
        """Nothing to keep between steps."""
        return None

    def forward(self, x: torch.Tensor, state: Any = None, start: torch.Tensor | int = 0) -> tuple[torch.Tensor, None]:
        """Encode ``(B, T, d_model)`` timestep by timestep."""
        return self.mlp(x), None


TRAJ_ENCODERS = ("transformer", "gru", "memory_free")


def make_traj_encoder(kind: str, d_model: int, **transformer_options: Any) -> nn.Module:
    """Build a trajectory encoder by name (one of :data:`TRAJ_ENCODERS`).

    Args:
        kind: ``transformer``, ``gru`` or ``memory_free``.
        d_model: Width.
        **transformer_options: :class:`TransformerTrajEncoder` arguments (``n_layers``, ``n_heads``, ``context_len``,
            ``dropout``, ``sigma_reparam``); the other encoders ignore them.
    """
    if kind == "transformer":
        return TransformerTrajEncoder(d_model, **transformer_options)
    if kind == "gru":
        return GRUTrajEncoder(d_model)
    if kind == "memory_free":
        return MemoryFreeTrajEncoder(d_model)
    raise ValueError(f"unknown trajectory encoder {kind!r}; known: {TRAJ_ENCODERS}")
