"""Guidance controllers: what a prompt's responses are sampled *with* — a hint in the context (Guide, SEELE) or a token
budget stated in the prompt (HBPO) — and how the trainer learns from them.

A guidance controller is a :class:`meta.control.Controller` that the compact trainer
(:class:`meta.rlvr.trainers.grpo.GRPOTrainer` with ``guidance=``) hands each step's groups to. It drives the rollout
through a narrow interface of the trainer (:class:`GuidedTrainer`):

* ``default()`` runs the allocator's usual stages (Guide samples them first, then adds hinted responses to the groups
  that got nothing right; SEELE and HBPO sample the allocator's first-stage counts their own way instead);
* :meth:`GuidedTrainer.generate_for` samples one completion per context (a prompt with a hint or a budget), counting
  every token it generates and reads in the cost ledger, so a method's own rollouts cost what they cost;
* :meth:`GuidedTrainer.add_response` appends a scored response to a group, with the context it is trained under
  (``None``: the group's plain prompt), the number of leading tokens the sampler did not draw (``forced``: Guide's hint,
  whose behaviour probability is 1) and the condition it was sampled under (a hint length or a budget);
* :meth:`Guidance.advantages` may replace the group advantages (HBPO's two levels).

The controllers are :class:`~meta.rlvr.guidance.guide.Guide`, :class:`~meta.rlvr.guidance.seele.SEELE` and
:class:`~meta.rlvr.guidance.hbpo.HBPO`; :func:`meta.rlvr.guidance.make_guidance` (:mod:`.specs`) builds them from
specs. Numpy only, like the rest of ``import meta.rlvr``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from meta.control.protocol import Controller, Feedback


class GroupLike(Protocol):
    """What a guidance controller reads of a group (:class:`meta.rlvr.trainers.grpo.Group`)."""

    task: Any
    prompt_ids: list[int]
    responses: list[Any]

    @property
    def rewards(self) -> list[float]: ...


class GuidedTrainer(Protocol):
    """The part of :class:`meta.rlvr.trainers.grpo.GRPOTrainer` a guidance controller drives."""

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
        """The group's advantages, or ``None`` for the trainer's own
        (:func:`meta.rlvr.trainers.grpo.group_advantages`)."""
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
