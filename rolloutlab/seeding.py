"""One seed for everything: Python's ``random``, numpy, torch, an environment and its spaces."""

from __future__ import annotations

import random
from typing import Any

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


def seed_env(env: Any, seed: int) -> tuple[Any, dict[str, Any]]:
    """Reset a gymnasium env (or vector env) with ``seed`` and seed its action and observation spaces.

    Returns:
        What ``env.reset(seed=seed)`` returned: ``(observation, info)``.
    """
    result = env.reset(seed=seed)
    env.action_space.seed(seed)
    env.observation_space.seed(seed)
    return result
