"""An optional learned termination classifier for environments without a known termination function."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from mbrl.models.gaussian_ensemble import EnsembleLinear


class TerminationHead(nn.Module):
    """``E`` small MLP classifiers of ``P(terminated | normalized state, action)``, vectorized like the ensemble.

    Trained with binary cross-entropy next to the dynamics ensemble on the same bootstrap batches.

    Args:
        ensemble_size: Number of members ``E`` (the same as the dynamics ensemble, so member ``i`` pairs with ``i``).
        in_dim: Input width.
        hidden_size: Width of the two hidden layers.
        generator: Optional torch generator for the initialization.
    """

    def __init__(
        self, ensemble_size: int, in_dim: int, hidden_size: int = 64, generator: torch.Generator | None = None
    ) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            [
                EnsembleLinear(ensemble_size, in_dim, hidden_size, generator),
                EnsembleLinear(ensemble_size, hidden_size, hidden_size, generator),
                EnsembleLinear(ensemble_size, hidden_size, 1, generator),
            ]
        )

    def forward(self, x: torch.Tensor, members: torch.Tensor | None = None) -> torch.Tensor:
        """Logits ``[E, N]`` for inputs ``[E, N, in_dim]``; with ``members`` (``LongTensor[K]``), ``x`` is
        ``[K, N, in_dim]``, slot ``k`` runs through member ``members[k]`` only and the logits are ``[K, N]``."""
        h = x
        for layer in self.layers[:-1]:
            h = F.silu(layer(h, members))
        return self.layers[-1](h, members).squeeze(-1)

    def loss(self, x: torch.Tensor, terminated: torch.Tensor) -> torch.Tensor:
        """Binary cross-entropy per member, ``[E]``, for inputs ``[E, N, in_dim]`` and 0/1 targets ``[E, N]``."""
        return F.binary_cross_entropy_with_logits(self(x), terminated, reduction="none").mean(dim=1)
