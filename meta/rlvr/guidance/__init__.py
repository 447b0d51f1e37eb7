"""Guidance controllers: what a prompt's responses are sampled *with* (a hint, a stated token budget), numpy only.

* :mod:`.base` — :class:`Guidance` and the trainer interface it drives (:class:`GuidedTrainer`);
* :mod:`.guide` (hints for groups that got nothing right), :mod:`.seele` (hint length searched per prompt),
  :mod:`.hbpo` (hierarchical token budgets);
* :mod:`.specs` — :func:`make_guidance`, which builds them from specs such as ``hbpo:0.05,4,6,8,10``.
"""

from __future__ import annotations

from meta.rlvr.guidance.base import GroupLike, Guidance, GuidedTrainer, split_evenly
from meta.rlvr.guidance.guide import Guide
from meta.rlvr.guidance.hbpo import HBPO
from meta.rlvr.guidance.seele import SEELE
from meta.rlvr.guidance.specs import make_guidance

__all__ = ["HBPO", "SEELE", "GroupLike", "Guidance", "Guide", "GuidedTrainer", "make_guidance", "split_evenly"]
