"""A tiny vision-language policy that answers a question about an image or first calls the zoom tool.

The policy reads visual tokens and one query token and emits a response of one or two tokens from one action
vocabulary: an answer character (:data:`envs.vision.zoom_queries.ANSWERS`), or a tool call ``<zoom X Y>`` (one
token per cell of the zoom grid) followed, once the tool's crop has been fed back, by an answer. The decision "call
the tool or answer" is therefore the policy's first token, and a gate (:mod:`meta.rlvr.vision.arms`) may force or
forbid it by masking the tool tokens.

Network (:class:`PixelPolicy`): a small CNN encodes a ``3 x VIEW x VIEW`` image into ``(VIEW/4)^2`` spatial tokens
and one summary token (a crop's spatial tokens pooled 2x2; learned position and view embeddings); a transformer reads
``[global view tokens, query token]`` and, after a call, ``[..., call token, crop tokens]``. The first decision is
read at the query token and the answer after a call at the call token; a call's logit is a "call" score at the
reading position plus the score of the global-view token over that cell (the tokens and the zoom cells are the same
grid), a pointer that makes *where* to zoom easy to learn and leaves *when* to the reading position. A block mask keeps
the first part from attending to the second, so one forward pass over the whole response gives exactly the logits
each decision was sampled from (what the policy-gradient ratio needs).

:func:`encode_queries` turns a query set into tensors once (global views and every cell's crop), so sampling never
resamples images.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from envs.vision.zoom_queries import ANSWERS, GRID, KINDS, VIEW, ZoomQuery, global_view, zoom, zoom_call

#: Number of answer tokens; tool-call tokens follow them (cell ``(x, y)`` is token ``N_ANSWERS + y * grid + x``).
N_ANSWERS = len(ANSWERS)


@dataclass
class PixelPolicyConfig:
    """Architecture of :class:`PixelPolicy`.

    Attributes:
        width: Token width (CNN output channels and transformer model width).
        layers: Transformer layers.
        heads: Attention heads (must divide ``width``).
        view: Side of the encoder's input image, pixels (a multiple of 4).
        grid: Zoom cells per side (tool-call tokens: ``grid**2``).
    """

    width: int = 32
    layers: int = 1
    heads: int = 4
    view: int = VIEW
    grid: int = GRID

    def __post_init__(self) -> None:
        if self.width < 1 or self.layers < 1 or self.heads < 1 or self.width % self.heads:
            raise ValueError(f"need width, layers, heads >= 1 with heads dividing width, got {self}")
        if self.view < 4 or self.view % 4 or self.grid != self.view // 4:
            raise ValueError(
                f"need view a multiple of 4 and grid = view / 4 (one visual token per zoom cell), got view={self.view},"
                f" grid={self.grid}"
            )

    @property
    def actions(self) -> int:
        """Size of the action vocabulary: answers, then one call token per cell."""
        return N_ANSWERS + self.grid * self.grid


def is_call(token: int) -> bool:
    """Whether an action token is a tool call."""
    return token >= N_ANSWERS


def call_cell(token: int, grid: int = GRID) -> tuple[int, int]:
    """``(x, y)`` of a call token's cell."""
    if not is_call(token):
        raise ValueError(f"token {token} is an answer, not a tool call")
    cell = token - N_ANSWERS
    return cell % grid, cell // grid


def response_text(tokens: Sequence[int], grid: int = GRID) -> str:
    """The text of a response, e.g. ``"<zoom 1 2>7"`` or ``"r"`` (what the verifier reads)."""
    return "".join(zoom_call(*call_cell(t, grid)) if is_call(t) else ANSWERS[t] for t in tokens)


@dataclass
class EncodedQueries:
    """A query set as tensors (``N`` queries, ``C = grid**2`` cells, ``V`` the view side).

    Attributes:
        views: ``(N, 3, V, V)`` global views.
        crops: ``(N, C, 3, V, V)`` the zoom tool's output for every cell.
        kinds: ``(N,)`` query-kind ids (index in :data:`envs.vision.zoom_queries.KINDS`).
        queries: The queries themselves (for the verifier).
    """

    views: torch.Tensor
    crops: torch.Tensor
    kinds: torch.Tensor
    queries: list[ZoomQuery]

    def __len__(self) -> int:
        return len(self.queries)


def encode_queries(queries: Sequence[ZoomQuery], view: int = VIEW, grid: int = GRID) -> EncodedQueries:
    """Global views and every cell's zoom of ``queries``, once."""
    views = np.stack([global_view(q.image, view) for q in queries])
    crops = np.stack([[zoom(q.image, x, y, view, grid) for y in range(grid) for x in range(grid)] for q in queries])
    kinds = torch.as_tensor([KINDS.index(q.kind) for q in queries], dtype=torch.long)
    return EncodedQueries(torch.from_numpy(views), torch.from_numpy(crops), kinds, list(queries))


class PixelPolicy(nn.Module):
    """CNN encoder + transformer over visual, query and action tokens (see the module docstring).

    Args:
        cfg: Architecture.
    """

    def __init__(self, cfg: PixelPolicyConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg = cfg or PixelPolicyConfig()
        w = cfg.width
        self.encoder = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, w, 2, stride=2),
        )
        self.visual_tokens = (cfg.view // 4) ** 2
        # One summary token per image besides the spatial ones: a linear read of the whole feature map, which carries
        # a glyph's shape in one token (attention over the spatial tokens alone learns to read it far more slowly).
        self.summary = nn.Linear(w * self.visual_tokens, w)
        self.position = nn.Parameter(torch.randn(self.visual_tokens + 1, w) * 0.02)
        self.crop_position = nn.Parameter(torch.randn(self.visual_tokens // 4 + 1, w) * 0.02)
        self.view_kind = nn.Embedding(2, w)  # 0: the global view, 1: a zoomed crop
        self.query = nn.Embedding(len(KINDS), w)
        self.action = nn.Embedding(cfg.actions, w)
        layer = nn.TransformerEncoderLayer(w, cfg.heads, 2 * w, dropout=0.0, batch_first=True, norm_first=True)
        self.transformer = nn.TransformerEncoder(layer, cfg.layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(w)
        self.answer_head = nn.Linear(w, N_ANSWERS)
        self.call_head = nn.Linear(w, 1)
        self.cell_head = nn.Linear(w, 1)

    def _visual(self, images: torch.Tensor, crop: bool) -> torch.Tensor:
        """``(B, T + 1, w)`` tokens of the global view (``T`` spatial tokens, one per zoom cell, and the summary), or
        ``(B, T / 4 + 1, w)`` of a crop, whose spatial tokens are pooled 2x2 (the summary carries its detail, and the
        shorter sequence keeps the second decision cheap)."""
        features = self.encoder(images)  # (B, w, view/4, view/4)
        summary = self.summary(features.flatten(1)).unsqueeze(1)
        spatial = nn.functional.avg_pool2d(features, 2) if crop else features
        tokens = torch.cat([spatial.flatten(2).transpose(1, 2), summary], dim=1)
        return tokens + (self.crop_position if crop else self.position) + self.view_kind.weight[int(crop)]

    def forward(
        self,
        views: torch.Tensor,
        kinds: torch.Tensor,
        first: torch.Tensor | None = None,
        crops: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Action logits.

        Args:
            views: ``(B, 3, V, V)`` global views.
            kinds: ``(B,)`` query-kind ids.
            first: ``(B,)`` first action tokens, or ``None`` for the first decision only.
            crops: ``(B, 3, V, V)`` the tool's crop for rows whose first token is a call (any values elsewhere);
                needed with ``first``.

        Returns:
            ``(B, 1, A)`` logits of the first decision without ``first``; ``(B, 2, A)`` with it, the second row the
            decision after the first token (meaningful for call rows).
        """
        prefix = torch.cat([self._visual(views, crop=False), self.query(kinds).unsqueeze(1)], dim=1)
        p = prefix.shape[1]
        if first is None:
            hidden = self.norm(self.transformer(prefix))
            return self._logits(hidden[:, -1:, :], hidden[:, : self.visual_tokens, :])
        if crops is None:
            raise ValueError("the second decision needs the crops")
        seq = torch.cat([prefix, self.action(first).unsqueeze(1), self._visual(crops, crop=True)], dim=1)
        # The view and query tokens never see the call or the crop, so the first decision's logits here are the ones
        # it was sampled from (the crop did not exist yet).
        blocked = torch.zeros(seq.shape[1], seq.shape[1], dtype=torch.bool, device=seq.device)
        blocked[:p, p:] = True
        hidden = self.norm(self.transformer(seq, mask=blocked))
        return self._logits(hidden[:, p - 1 : p + 1, :], hidden[:, : self.visual_tokens, :])

    def _logits(self, read: torch.Tensor, cells: torch.Tensor) -> torch.Tensor:
        """Answer logits from the reading positions ``(B, S, w)``; call logits point at cells: a per-position "call"
        score plus each global-view token's score (visual token ``k`` covers zoom cell ``k``), ``(B, S, A)``."""
        calls = self.call_head(read) + self.cell_head(cells).squeeze(-1).unsqueeze(1)
        return torch.cat([self.answer_head(read), calls], dim=-1)
