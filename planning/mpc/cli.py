"""Registers PETS as ``rolloutlab mbrl train --algo pets`` (same flags as MBPO; ``--controller`` sets the horizon).

The ``rolloutlab`` command imports this module when it mounts the pillars, so ``mbrl`` never imports ``planning``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mbrl.cli import register_trainer


def _pets_trainer() -> tuple[Any, Callable[..., Any]]:
    from planning.mpc.pets import PETS, load_config

    return PETS, load_config


register_trainer("pets", _pets_trainer)
