"""Test-wide settings: one torch thread (small nets run faster single-threaded) and a fixed seed per test."""

from __future__ import annotations

import os
import random

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np
import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed_everything() -> None:
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
