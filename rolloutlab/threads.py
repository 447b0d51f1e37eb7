"""Thread settings for small networks on small CPUs.

Intra-op parallelism costs more than it gains for the small MLPs used throughout rolloutlab: measured on the project's
2-core machines, a 256x256 matmul loop ran about 12x faster on one thread than on two under load. So every entry point
pins torch to one thread unless told otherwise.
"""

from __future__ import annotations

import os

import torch


def set_torch_threads(num_threads: int | None = None) -> int:
    """Set torch's intra-op thread count.

    Args:
        num_threads: Threads to use. ``None`` reads ``ROLLOUTLAB_THREADS`` from the environment, defaulting to 1.

    Returns:
        The thread count now in effect.
    """
    if num_threads is None:
        num_threads = int(os.environ.get("ROLLOUTLAB_THREADS", "1"))
    if num_threads < 1:
        raise ValueError(f"num_threads must be >= 1, got {num_threads}")
    torch.set_num_threads(num_threads)
    return torch.get_num_threads()
