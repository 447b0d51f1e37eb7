"""Package names that load on first use (PEP 562), so that importing a package stays cheap.

``rolloutlab --help`` imports every pillar's command-line module, and an LLM training script imports ``meta.rlvr`` for
its numpy-only allocators: neither should pay for torch, SB3 or transformers until a name that needs them is used.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``package`` that imports ``name`` from ``homes[name]`` on first use.

    The value is then stored on the package, so later lookups are plain attribute reads.

    Args:
        package: The package's ``__name__``.
        homes: Exported name -> the module that defines it, e.g. ``{"MBPO": "mbrl.algorithms.mbpo"}``.

    Returns:
        The function to bind as ``__getattr__`` in the package's ``__init__``.
    """

    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(homes[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
