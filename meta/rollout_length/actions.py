"""The meta-agent's action sets on the rollout length, behind one interface.

``step`` is Bhatia, Thomas & Zilberstein's (2022, section 4): UP (``ceil(1.5 K)``, 1 from 0), DOWN (``floor(K / 2)``)
and NOOP, applied to the K in force (:func:`meta.control.step_rollout_length`). Starting from K = 0 the agent needs
one UP to use the model at all, and from K = 1 one DOWN to stop; a multiplicative step cannot reach every length
quickly, which is why ``direct`` exists.

``direct`` picks K itself from a grid (default the gate's lengths 0, 1, 2, 4, 8, 16): one decision reaches any
length, at the price of more actions to learn values for.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Literal

from gymnasium import spaces

from meta.control import StepAction, step_rollout_length

#: The names of the action sets.
ACTION_SETS = ("step", "direct")
#: The default grid of the direct choice: the gate's fixed rollout lengths.
DEFAULT_K_GRID: tuple[int, ...] = (0, 1, 2, 4, 8, 16)


@dataclass(frozen=True)
class MetaActions:
    """How a meta-action changes the rollout length.

    Args:
        kind: ``"step"`` (UP / DOWN / NOOP, :class:`meta.control.StepAction`) or ``"direct"`` (index into
            ``grid``).
        k_cap: Largest rollout length.
        grid: The lengths of the direct choice, strictly increasing, within ``[0, k_cap]`` (``direct`` only).

    Raises:
        ValueError: Unknown kind, or a grid that is empty, unsorted, repeated or outside ``[0, k_cap]``.
    """

    kind: Literal["step", "direct"] = "step"
    k_cap: int = 32
    grid: tuple[int, ...] = DEFAULT_K_GRID

    def __post_init__(self) -> None:
        if self.kind not in ACTION_SETS:
            raise ValueError(f"action set must be one of {ACTION_SETS}, got {self.kind!r}")
        if self.kind == "direct":
            grid = tuple(int(k) for k in self.grid)
            if not grid or any(b <= a for a, b in itertools.pairwise(grid)):
                raise ValueError(f"the K grid must be non-empty and strictly increasing, got {list(self.grid)}")
            if grid[0] < 0 or grid[-1] > self.k_cap:
                raise ValueError(f"the K grid {list(grid)} must lie within [0, k_cap={self.k_cap}]")

    @property
    def n(self) -> int:
        """Number of actions."""
        return len(StepAction) if self.kind == "step" else len(self.grid)

    def space(self) -> spaces.Discrete:
        """The action space of the meta-env."""
        return spaces.Discrete(self.n)

    def apply(self, k: int, action: int) -> int:
        """The rollout length after ``action`` when ``k`` is in force.

        Raises:
            ValueError: ``action`` is not in ``range(n)``.
        """
        action = int(action)
        if not 0 <= action < self.n:
            raise ValueError(f"invalid meta-action {action} for the {self.kind!r} action set ({self.n} actions)")
        if self.kind == "step":
            return step_rollout_length(k, action, self.k_cap)
        return int(self.grid[action])

    def name(self, action: int) -> str:
        """A readable name of ``action`` (``UP``, ``K=4``)."""
        return StepAction(int(action)).name if self.kind == "step" else f"K={self.grid[int(action)]}"
