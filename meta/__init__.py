"""Meta-controllers: deciding how far and how much to roll out, from feedback about the learning process.

``import meta`` (and :mod:`meta.control`) needs numpy only, so an LLM training script can use a controller without
gymnasium, SB3 or TRL: ``from meta import make_controller``.
"""

from __future__ import annotations

from meta.control import make_controller

__all__ = ["make_controller"]
