"""One seed for Python's ``random``, numpy and torch."""

from __future__ import annotations

import random

import numpy as np
import torch


def seed_everything(seed: int) -> np.random.Generator:
    """Seed Python's ``random``, numpy's legacy global state and torch from one integer.

    Args:
        seed: A non-negative integer.

    Returns:
        A fresh :class:`numpy.random.Generator` seeded with ``seed``, for code that takes an explicit generator.
    """
    if seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return np.random.default_rng(seed)
