"""Token-level RLVR controllers: what happens inside one group's sampling and loss (numpy only).

* :mod:`.hapo` (per-token advantages), :mod:`.eepo` (perturbed halves), :mod:`.arpo` (branching after tool results),
  :mod:`.ehpo` (branching at high-entropy units) — built from specs by :func:`make_token_controller` (:mod:`.specs`);
* :mod:`.temperature` (entropy-targeting temperature), :mod:`.length_penalty` (adaptive length penalty),
  :mod:`.clipping` (balanced clipping) — set on the trainer's config.
"""

from __future__ import annotations

from meta.rlvr.token.arpo import ARPO
from meta.rlvr.token.clipping import BalancedClip, positive_share
from meta.rlvr.token.eepo import EEPO
from meta.rlvr.token.ehpo import EHPO
from meta.rlvr.token.hapo import HAPO
from meta.rlvr.token.length_penalty import AdaptiveLengthPenalty
from meta.rlvr.token.specs import TokenController, make_token_controller
from meta.rlvr.token.temperature import EntropyTemperature

__all__ = [
    "ARPO",
    "EEPO",
    "EHPO",
    "HAPO",
    "AdaptiveLengthPenalty",
    "BalancedClip",
    "EntropyTemperature",
    "TokenController",
    "make_token_controller",
    "positive_share",
]
