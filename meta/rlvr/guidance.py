"""Guidance controllers: what a prompt's responses are sampled *with* — a hint in the context (Guide, SEELE) or a token
budget stated in the prompt (HBPO) — and how the trainer learns from them.

A guidance controller is a :class:`meta.controllers.Controller` that the compact trainer
(:class:`meta.rlvr.grpo.GRPOTrainer` with ``guidance=``) hands each step's groups to. It drives the rollout through a
narrow interface of the trainer (:class:`GuidedTrainer`):

* ``default()`` runs the allocator's usual stages (Guide samples them first, then adds hinted responses to the groups
  that got nothing right; SEELE and HBPO sample the allocator's first-stage counts their own way instead);
* :meth:`GuidedTrainer.generate_for` samples one completion per context (a prompt with a hint or a budget), counting
  every token it generates and reads in the cost ledger, so a method's own rollouts cost what they cost;
* :meth:`GuidedTrainer.add_response` appends a scored response to a group, with the context it is trained under
  (``None``: the group's plain prompt), the number of leading tokens the sampler did not draw (``forced``: Guide's hint,
  whose behaviour probability is 1) and the condition it was sampled under (a hint length or a budget);
* :meth:`Guidance.advantages` may replace the group advantages (HBPO's two levels).

Specs (``rolloutlab rlvr train --guidance SPEC``, :class:`meta.rlvr.run.GRPORunConfig.guidance`), built by
:func:`make_guidance`: ``guide[:FRACTION[,N]]`` (:class:`meta.rlvr.guide.Guide`), ``seele[:ROUNDS[,TARGET]]``
(:class:`meta.rlvr.seele.SEELE`), ``hbpo[:ALPHA,B1,...,BK]`` (:class:`meta.rlvr.hbpo.HBPO`). Importing this module
declares the spec kind and registers the names; numpy only, like the rest of ``import meta.rlvr``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from meta.controllers import Controller, Feedback, build_spec, register_spec, register_spec_kind


class GroupLike(Protocol):
    """What a guidance controller reads of a group (:class:`meta.rlvr.grpo_groups.Group`)."""

    task: Any
    prompt_ids: list[int]
    responses: list[Any]

    @property
    def rewards(self) -> list[float]: ...


class GuidedTrainer(Protocol):
    """The part of :class:`meta.rlvr.grpo.GRPOTrainer` a guidance controller drives."""

    vocab: Any
    allocator: Any
    stats: Any

    def reward(self, task: Any, text: str) -> float:
        """The verifier's reward of a completion text."""
        ...

    def generate_for(self, contexts: Sequence[list[int]]) -> list[list[int]]:
        """One sampled completion (token ids) per context, its cost counted."""
        ...

    def add_response(
        self,
        group: Any,
        tokens: list[int],
        reward: float,
        *,
        context: list[int] | None = None,
        forced: int = 0,
        condition: int | None = None,
    ) -> None:
        """Append a scored response to ``group``."""
        ...


class Guidance(Controller):
    """Base of the guidance controllers (module docstring): subclasses implement :meth:`rollout`."""

    name = "base"

    def rollout(self, trainer: GuidedTrainer, groups: Sequence[GroupLike], default: Callable[[], None]) -> None:
        """Sample this step's responses of ``groups`` (``default()`` runs the allocator's stages)."""
        raise NotImplementedError

    def advantages(self, group: GroupLike, kind: str) -> list[float] | None:
        """The group's advantages, or ``None`` for the trainer's own (:func:`meta.rlvr.grpo_loss.group_advantages`)."""
        return None

    def decide(self, feedback: Feedback) -> Any:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """Name and settings, for result files."""
        return {"name": self.name, **{k: v for k, v in vars(self).items() if not k.startswith("_")}}


def split_evenly(total: int, parts: int) -> list[int]:
    """``total`` responses in ``parts`` near-equal shares, larger ones first: ``split_evenly(8, 3) == [3, 3, 2]``."""
    if parts < 1 or total < 0:
        raise ValueError(f"need parts >= 1 and total >= 0, got {parts}, {total}")
    base, extra = divmod(int(total), int(parts))
    return [base + (1 if i < extra else 0) for i in range(parts)]


#: Spec kind of the guidance controllers.
GUIDANCE_SPECS = "rlvr-guidance"

register_spec_kind(GUIDANCE_SPECS, "RLVR guidance", "an", "guidance controller", "meta.rlvr.guidance.make_guidance")


def _numbers(name: str, args: str) -> list[float]:
    try:
        return [float(p) for p in args.split(",") if p.strip()] if args else []
    except ValueError as exc:
        raise ValueError(f"guidance spec '{name}:{args}': arguments must be numbers") from exc


def _guide(args: str) -> Guidance:
    from meta.rlvr.guide import Guide

    nums = _numbers("guide", args)
    if len(nums) > 2:
        raise ValueError(f"guidance spec 'guide:{args}' takes FRACTION[,N], got {len(nums)} numbers")
    fraction = nums[0] if nums else 0.5
    count = nums[1] if len(nums) > 1 else 0
    if count != int(count):
        raise ValueError(f"guidance spec 'guide:{args}': N must be a whole number")
    return Guide(fraction=fraction, responses=int(count))


def _seele(args: str) -> Guidance:
    from meta.rlvr.seele import SEELE

    nums = _numbers("seele", args)
    if len(nums) > 2:
        raise ValueError(f"guidance spec 'seele:{args}' takes ROUNDS[,TARGET], got {len(nums)} numbers")
    rounds = nums[0] if nums else 2
    if rounds != int(rounds):
        raise ValueError(f"guidance spec 'seele:{args}': ROUNDS must be a whole number")
    return SEELE(rounds=int(rounds), target=nums[1] if len(nums) > 1 else 0.5)


def _hbpo(args: str) -> Guidance:
    from meta.rlvr.hbpo import HBPO

    nums = _numbers("hbpo", args)
    if len(nums) == 1:
        raise ValueError(f"guidance spec 'hbpo:{args}' takes ALPHA,B1,...,BK (at least one budget)")
    if not nums:
        return HBPO()
    if any(b != int(b) for b in nums[1:]):
        raise ValueError(f"guidance spec 'hbpo:{args}': budgets must be whole numbers of tokens")
    return HBPO(budgets=[int(b) for b in nums[1:]], alpha=nums[0])


register_spec(GUIDANCE_SPECS, "guide", _guide)
register_spec(GUIDANCE_SPECS, "seele", _seele)
register_spec(GUIDANCE_SPECS, "hbpo", _hbpo)


def make_guidance(spec: str) -> Guidance:
    """Build a guidance controller from a spec: ``guide:0.5``, ``seele:2``, ``hbpo:0.05,4,6,8,10``.

    Raises:
        ValueError: Unknown name (with the known ones), a spec of another kind, or bad arguments.
    """
    controller = build_spec(GUIDANCE_SPECS, spec)
    if not isinstance(controller, Guidance):
        raise TypeError(f"spec {spec!r} built {type(controller).__name__}, not a guidance controller")
    return controller
