"""Guidance specs: :func:`make_guidance` and the factories :data:`meta.control.spec.SPECS` names.

``rolloutlab rlvr train --guidance SPEC`` and :class:`meta.rlvr.trainers.run.GRPORunConfig.guidance` take
``guide[:FRACTION[,N]]`` (:class:`~meta.rlvr.guidance.guide.Guide`, defaults 0.5, 0), ``seele[:ROUNDS[,TARGET]]``
(:class:`~meta.rlvr.guidance.seele.SEELE`, defaults 2, 0.5) and ``hbpo[:ALPHA,B1,...,BK]``
(:class:`~meta.rlvr.guidance.hbpo.HBPO`, its defaults without arguments). This module imports the controller classes
directly; numpy only.
"""

from __future__ import annotations

from meta.control.spec import GUIDANCE, Spec, build_spec
from meta.rlvr.guidance.base import Guidance
from meta.rlvr.guidance.guide import Guide
from meta.rlvr.guidance.hbpo import HBPO
from meta.rlvr.guidance.seele import SEELE


def guide_from_spec(spec: Spec) -> Guide:
    """``guide[:FRACTION[,N]]`` (N a whole number)."""
    nums = spec.numbers("FRACTION[,N]", 0, 2, whole=(1,))
    fraction = nums[0] if nums else 0.5
    count = nums[1] if len(nums) > 1 else 0
    return Guide(fraction=fraction, responses=int(count))


def seele_from_spec(spec: Spec) -> SEELE:
    """``seele[:ROUNDS[,TARGET]]`` (ROUNDS a whole number)."""
    nums = spec.numbers("ROUNDS[,TARGET]", 0, 2, whole=(0,))
    rounds = nums[0] if nums else 2
    return SEELE(rounds=int(rounds), target=nums[1] if len(nums) > 1 else 0.5)


def hbpo_from_spec(spec: Spec) -> HBPO:
    """``hbpo[:ALPHA,B1,...,BK]`` (at least one budget, budgets whole numbers of tokens), or ``hbpo`` for defaults."""
    usage = "ALPHA,B1,...,BK (at least one budget, whole numbers of tokens)"
    nums = spec.numbers(usage, whole=range(1, len(spec.args)))
    if len(nums) == 1:
        raise ValueError(f"guidance spec {spec.text!r} takes {usage}")
    if not nums:
        return HBPO()
    return HBPO(budgets=[int(b) for b in nums[1:]], alpha=nums[0])


def make_guidance(spec: str) -> Guidance:
    """Build a guidance controller from a spec: ``guide:0.5``, ``seele:2``, ``hbpo:0.05,4,6,8,10``.

    Raises:
        ValueError: Unknown name (with the known ones), a spec of another kind, or bad arguments.
    """
    controller = build_spec(GUIDANCE, spec)
    if not isinstance(controller, Guidance):
        raise TypeError(f"spec {spec!r} built {type(controller).__name__}, not a guidance controller")
    return controller
