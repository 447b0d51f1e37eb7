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


#: How far apart the base seeds of two batches of runs keep their runs' seeds (runs per base seed before overlap).
RUNS_PER_SEED = 10_000


def run_seed(seed: int, run: int) -> int:
    """The seed of run ``run`` of a batch of runs with base seed ``seed``: ``seed * 10_000 + run``.

    The one rule every batched learner uses for its runs' default seeds, so that a share of a batch (runs ``a..b``,
    built in another process) gets the seeds those runs have in the whole batch.
    """
    return int(seed) * RUNS_PER_SEED + int(run)
