"""rolloutlab: model-based and planning RL around one question, how far and how much to roll out.

The ``rolloutlab`` package is the thin front door: the command line (:mod:`rolloutlab.cli`) and the plumbing every
pillar shares (run directories, seeding, thread settings, checkpoints, configs, loggers). The pillars live in the
top-level packages ``mbrl``, ``planning``, ``meta`` and ``envs``.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("rolloutlab")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
