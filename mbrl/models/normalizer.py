"""Running mean / standard deviation over a feature dimension, saved with the model's weights."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch


class Normalizer:
    """Running per-feature mean and standard deviation, combined batch by batch (Chan et al. 1979).

    A feature whose standard deviation is (numerically) zero, such as a constant or a never-seen one-hot entry, is
    left unscaled (std 1) so that normalizing never divides by zero.

    Args:
        dim: Number of features (the last axis of every input).
        eps: Standard deviations below this are treated as zero.
    """

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.dim = int(dim)
        self.eps = float(eps)
        self.reset()

    def reset(self) -> None:
        """Forget all statistics (mean 0, std 1, count 0)."""
        self.count = 0
        self._mean = np.zeros(self.dim, dtype=np.float64)
        self._m2 = np.zeros(self.dim, dtype=np.float64)

    def update(self, x: np.ndarray) -> None:
        """Fold a batch ``x`` of shape ``[N, dim]`` (or ``[dim]``) into the running statistics."""
        batch = np.asarray(x, dtype=np.float64).reshape(-1, self.dim)
        n = batch.shape[0]
        if n == 0:
            return
        batch_mean = batch.mean(axis=0)
        batch_m2 = ((batch - batch_mean) ** 2).sum(axis=0)
        total = self.count + n
        delta = batch_mean - self._mean
        self._mean = self._mean + delta * n / total
        self._m2 = self._m2 + batch_m2 + delta**2 * self.count * n / total
        self.count = total

    @property
    def mean(self) -> np.ndarray:
        """Per-feature mean, shape ``[dim]``."""
        return self._mean.copy()

    @property
    def std(self) -> np.ndarray:
        """Per-feature standard deviation (population), shape ``[dim]``; 1 where it is below ``eps``."""
        if self.count == 0:
            return np.ones(self.dim)
        std = np.sqrt(self._m2 / self.count)
        return np.where(std < self.eps, 1.0, std)

    def _tensors(self, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean = torch.as_tensor(self._mean, dtype=like.dtype, device=like.device)
        std = torch.as_tensor(self.std, dtype=like.dtype, device=like.device)
        return mean, std

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """``(x - mean) / std`` over the last axis of ``x`` (any leading shape)."""
        mean, std = self._tensors(x)
        return (x - mean) / std

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        """Inverse of :meth:`normalize`: ``x * std + mean``."""
        mean, std = self._tensors(x)
        return x * std + mean

    def state_dict(self) -> dict[str, Any]:
        """Statistics as tensors (float64), loadable with ``weights_only=True``."""
        return {
            "count": torch.tensor(self.count, dtype=torch.int64),
            "mean": torch.as_tensor(self._mean, dtype=torch.float64).clone(),
            "m2": torch.as_tensor(self._m2, dtype=torch.float64).clone(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore statistics saved by :meth:`state_dict`."""
        mean = torch.as_tensor(state["mean"]).double().numpy()
        if mean.shape != (self.dim,):
            raise ValueError(f"Normalizer of dim {self.dim} cannot load statistics of shape {tuple(mean.shape)}")
        self.count = int(torch.as_tensor(state["count"]).item())
        self._mean = mean.copy()
        self._m2 = torch.as_tensor(state["m2"]).double().numpy().copy()
