"""The framework-free controller protocol: ``decide(feedback) -> decision`` plus saveable state.

A controller is asked for a *decision* at each decision point and is shown *feedback* about the learning process
(the README's "Controllers" section shows the calls). It keeps its own state, which :meth:`Controller.state_dict` /
:meth:`Controller.load_state_dict` save and restore as plain data, so a resumed run decides exactly as the
uninterrupted one would have.

Each kind of controller fixes what its decision is:

* a rollout-length controller (:class:`RolloutLengthController`, :mod:`meta.control.rollout_length`) returns an int
  ``K >= 0``, the model-rollout length of the coming epoch;
* an RLVR allocator (:class:`AllocatorLike`, :mod:`meta.rlvr.allocators`) returns per-prompt response counts, one
  int ``>= 0`` per prompt of the step;
* the RLVR token-level and guidance controllers (:mod:`meta.rlvr.token`, :mod:`meta.rlvr.guidance`) act inside a
  group's sampling through their own calls; ``decide`` reports their current setting.
* a tokenizer halting controller (:class:`meta.tokenizer.halting.HaltingController`) returns ``True`` to stop
  after the current recurrent iteration of one image (its code is the latent tokens so far), ``False`` to add more.

This module imports the standard library only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

#: What a controller is shown at a decision point: named measurements of the learning process.
Feedback = Mapping[str, Any]


class Controller(ABC):
    """Base class of every controller: ``decide(feedback) -> decision`` plus saveable state.

    Subclasses keep all mutable state in attributes listed by :meth:`state_dict`; the default implementation saves
    nothing, which is right for stateless controllers.
    """

    @abstractmethod
    def decide(self, feedback: Feedback) -> Any:
        """Return the decision for this decision point, given the feedback."""

    def reset(self) -> None:  # noqa: B027 - optional hook: stateless controllers have nothing to reset
        """Forget any state from a previous run (called at the start of a run)."""

    def state_dict(self) -> dict[str, Any]:
        """Plain-data snapshot of the controller's mutable state."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot made by :meth:`state_dict`."""
        unexpected = set(state) - set(self.state_dict())
        if unexpected:
            raise KeyError(f"{type(self).__name__}.load_state_dict: unexpected keys {sorted(unexpected)}")
        for key, value in state.items():
            setattr(self, key, value)


class RolloutLengthController(Controller):
    """A controller whose decision is a model-rollout length ``h >= 0`` (an int)."""

    @abstractmethod
    def decide(self, feedback: Feedback) -> int:
        """Return the rollout length for the coming epoch."""

    def max_length(self) -> int | None:
        """The longest rollout length this controller can return, or ``None`` if it does not say."""
        return None


@runtime_checkable
class AllocatorLike(Protocol):
    """What a trainer needs of a per-prompt rollout allocator (:class:`meta.rlvr.allocators.Allocator` is one)."""

    max_stages: int
    refill: bool

    def initial(self, keys: Sequence[str], stats: Any) -> list[int]:
        """First-stage response counts, one int ``>= 0`` per prompt key."""
        ...

    def extra(self, keys: Sequence[str], rewards: Sequence[Sequence[float]], stage: int) -> list[int]:
        """More responses per prompt after ``stage`` completed stages; all zeros end the step."""
        ...

    def keep(self, rewards: Sequence[Sequence[float]]) -> list[bool]:
        """Which groups enter the loss, one flag per prompt."""
        ...


def require(feedback: Feedback, key: str, who: str) -> Any:
    """``feedback[key]``, or a ``KeyError`` that names the controller ``who`` and the keys it did get."""
    if key not in feedback:
        raise KeyError(f"{who} needs feedback[{key!r}]; got keys {sorted(feedback)}")
    return feedback[key]
