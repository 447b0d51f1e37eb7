"""The rollout-length controllers: fixed and scheduled lengths, budget-linear heuristics, a random meta-policy and
MACURA-style uncertainty truncation, and :func:`make_controller`, which builds them from specs.

Specs (grammar and registry: :mod:`meta.control.spec`): ``fixed:K``, ``linear:EPOCH_A,EPOCH_B,H_MIN,H_MAX``,
``inc:K_MAX``, ``dec:K_MAX``, ``incdec:K_MAX``, ``uncertainty:PERCENTILE[,K_MAX[,XI]]``,
``random:K_INIT,K_CAP[,SEED]`` and ``learned:PATH`` (a trained meta-policy,
:class:`meta.rollout_length.learned.LearnedController`). Numpy only.

Feedback keys used by the rollout-length controllers here (all optional unless a controller says otherwise):

* ``epoch`` (int): index of the current epoch / decision point, from 0.
* ``budget_fraction`` (float in [0, 1]): fraction of the interaction budget already used.
* ``current_length`` (int): the rollout length in force before this decision.
"""

from __future__ import annotations

import math
from enum import IntEnum
from typing import Any

import numpy as np

from meta.control.protocol import Feedback, RolloutLengthController, require
from meta.control.spec import ROLLOUT_LENGTH, Spec, available_specs, build_spec


class Fixed(RolloutLengthController):
    """Always the same rollout length ``k``."""

    def __init__(self, k: int) -> None:
        if k < 0:
            raise ValueError(f"rollout length must be >= 0, got {k}")
        self.k = int(k)

    def decide(self, feedback: Feedback) -> int:
        return self.k

    def max_length(self) -> int:
        return self.k

    def __repr__(self) -> str:
        return f"Fixed({self.k})"


class TruncatedLinear(RolloutLengthController):
    """MBPO's rollout schedule ``[epoch_a, epoch_b, h_min, h_max]`` (Janner et al. 2019, appendix C).

    ``h = h_min`` up to ``epoch_a``, then linear in the epoch up to ``h_max`` at ``epoch_b``, then constant; the
    interpolated value is truncated to an int, as in the reference implementation. Needs ``feedback["epoch"]``.
    """

    def __init__(self, epoch_a: int, epoch_b: int, h_min: int, h_max: int) -> None:
        if epoch_b <= epoch_a:
            raise ValueError(f"need epoch_a < epoch_b, got [{epoch_a}, {epoch_b}]")
        if h_min < 0 or h_max < 0:
            raise ValueError(f"rollout lengths must be >= 0, got h_min={h_min}, h_max={h_max}")
        self.schedule = (int(epoch_a), int(epoch_b), int(h_min), int(h_max))

    def decide(self, feedback: Feedback) -> int:
        epoch = float(require(feedback, "epoch", "TruncatedLinear"))
        epoch_a, epoch_b, h_min, h_max = self.schedule
        fraction = min(max((epoch - epoch_a) / (epoch_b - epoch_a), 0.0), 1.0)
        return int(h_min + fraction * (h_max - h_min))

    def max_length(self) -> int:
        return max(self.schedule[2], self.schedule[3])

    def __repr__(self) -> str:
        return f"TruncatedLinear({list(self.schedule)})"


# --- rollout-length heuristics of Bhatia, Thomas & Zilberstein 2022 and MACURA (mbrl pillar) --------------------


class BudgetLinear(RolloutLengthController):
    """INC, DEC and INC-DEC: rollout length linear in the fraction ``f`` of the interaction budget used.

    Bhatia, Thomas & Zilberstein 2022 (section 5) compare against these schedules: INC ``K = f K_max`` (0 -> K_max),
    DEC ``K = (1 - f) K_max`` (K_max -> 0), INC-DEC up over the first half of the budget and down over the second,
    ``K = K_max (1 - |2 f - 1|)``. ``K`` is rounded to the nearest int (halves up, float noise ignored). Needs
    ``feedback["budget_fraction"]``.

    Args:
        kind: ``"inc"``, ``"dec"`` or ``"incdec"``.
        k_max: The longest rollout length.
    """

    KINDS = ("inc", "dec", "incdec")

    def __init__(self, kind: str, k_max: int) -> None:
        if kind not in self.KINDS:
            raise ValueError(f"kind must be one of {self.KINDS}, got {kind!r}")
        if k_max < 0:
            raise ValueError(f"k_max must be >= 0, got {k_max}")
        self.kind, self.k_max = kind, int(k_max)

    def decide(self, feedback: Feedback) -> int:
        f = min(max(float(require(feedback, "budget_fraction", f"BudgetLinear({self.kind})")), 0.0), 1.0)
        if self.kind == "inc":
            level = f
        elif self.kind == "dec":
            level = 1.0 - f
        else:
            level = 1.0 - abs(2.0 * f - 1.0)
        return math.floor(round(level * self.k_max, 9) + 0.5)  # round(., 9): 0.15 * 10 must give 2, not 1

    def max_length(self) -> int:
        return self.k_max

    def __repr__(self) -> str:
        return f"BudgetLinear({self.kind!r}, {self.k_max})"


class StepAction(IntEnum):
    """The meta-agent's actions on the rollout length (Bhatia, Thomas & Zilberstein 2022, section 4)."""

    DOWN = 0
    NOOP = 1
    UP = 2


def step_rollout_length(k: int, action: int, k_max: int) -> int:
    """Apply one UP / DOWN / NOOP action to the rollout length ``k``.

    UP: ``K <- ceil(1.5 K)``, or 1 from 0; DOWN: ``K <- floor(K / 2)`` (so 1 -> 0); NOOP: unchanged; the result is
    capped at ``k_max``. Integer arithmetic throughout (``ceil(3K/2) = (3K + 1) // 2``), so no float rounding.

    Args:
        k: Current rollout length, ``>= 0``.
        action: A :class:`StepAction` (or its int value).
        k_max: Cap on the rollout length.
    """
    if k < 0:
        raise ValueError(f"rollout length must be >= 0, got {k}")
    action = StepAction(int(action))
    if action == StepAction.UP:
        k = 1 if k == 0 else (3 * k + 1) // 2
    elif action == StepAction.DOWN:
        k //= 2
    return min(int(k), int(k_max))


class RandomMetaPolicy(RolloutLengthController):
    """UP / DOWN / NOOP uniformly at random at each decision, through :func:`step_rollout_length` (the sanity floor
    of the meta-level comparison, Bhatia, Thomas & Zilberstein 2022). Spec: ``random:K_INIT,K_CAP[,SEED]``.

    Args:
        k_init: Rollout length before the first decision.
        k_cap: Largest rollout length.
        seed: Seed of the controller's own generator. ``None`` (a spec without SEED) draws from seed 0 until a caller
            sets :attr:`seed`; the meta-level comparison gives every run its own.
    """

    def __init__(self, k_init: int, k_cap: int, seed: int | None = None) -> None:
        if not 0 <= k_init <= k_cap:
            raise ValueError(f"need 0 <= k_init <= k_cap, got {k_init}, {k_cap}")
        if seed is not None and seed < 0:
            raise ValueError(f"seed must be >= 0, got {seed}")
        self.k_init, self.k_cap = int(k_init), int(k_cap)
        self.seed = None if seed is None else int(seed)
        self.k = self.k_init
        self.draws = 0

    def reset(self) -> None:
        self.k, self.draws = self.k_init, 0

    def decide(self, feedback: Feedback) -> int:
        # A fresh generator keyed by (seed, draw index) makes the state two ints, trivially saved and restored.
        seed = 0 if self.seed is None else self.seed
        action = StepAction(int(np.random.default_rng([seed, self.draws]).integers(len(StepAction))))
        self.draws += 1
        self.k = step_rollout_length(self.k, action, self.k_cap)
        return self.k

    def max_length(self) -> int:
        return self.k_cap

    def state_dict(self) -> dict[str, Any]:
        return {"k": self.k, "draws": self.draws}

    def __repr__(self) -> str:
        return f"RandomMetaPolicy({self.k_init}, {self.k_cap}, seed={self.seed})"


class UncertaintyTruncation(RolloutLengthController):
    """MACURA-style adaptive length: stop each imagined rollout once the ensemble disagrees too much.

    Frauenknecht et al. 2024 (MACURA) cut every model rollout at the first step whose model uncertainty exceeds a
    threshold ``xi * P_zeta``, where ``P_zeta`` is the ``zeta``-th percentile of the uncertainty at the *first* step
    (where the model is queried on real states), recomputed for every batch of rollouts; MACURA uses ``xi = 2``,
    ``zeta = 95``. Here uncertainty is the ensemble disagreement reported by the world model (std across elites of
    the predicted mean, averaged over output dims). :meth:`decide` returns the longest allowed length ``k_max``; the
    rollout code calls :meth:`keep` at each step with that step's disagreement and stops the rollouts for which it
    returns ``False`` (their transition at that step is not stored). Only rollouts that make training data can be
    cut: Dyna-DQN with ``model_use="lookahead"`` refuses this controller.

    Args:
        percentile: ``zeta``, the percentile (0-100] of the first-step disagreement.
        k_max: Longest rollout length.
        xi: Multiplier of the percentile, ``> 0``. The default 1 (the threshold is the percentile itself) keeps the
            meaning of specs written before the multiplier existed (``uncertainty:95,8``); MACURA's is 2
            (``uncertainty:95,32,2``).
    """

    def __init__(self, percentile: float, k_max: int = 32, xi: float = 1.0) -> None:
        if not 0.0 < percentile <= 100.0:
            raise ValueError(f"percentile must be in (0, 100], got {percentile}")
        if k_max < 0:
            raise ValueError(f"k_max must be >= 0, got {k_max}")
        if not (math.isfinite(xi) and xi > 0):
            raise ValueError(f"the multiplier xi must be finite and > 0, got {xi}")
        self.percentile, self.k_max, self.xi = float(percentile), int(k_max), float(xi)
        self.threshold: float | None = None

    def decide(self, feedback: Feedback) -> int:
        return self.k_max

    def max_length(self) -> int:
        return self.k_max

    def keep(self, step: int, disagreement: Any) -> Any:
        """Which rollouts may continue past ``step`` (0-based) given their disagreement there.

        Args:
            step: Rollout step index; step 0 (re)calibrates the threshold to ``xi`` times the percentile.
            disagreement: ``[N]`` array of ensemble disagreement at this step.

        Returns:
            ``[N]`` boolean array, ``True`` where ``disagreement <= threshold``.
        """
        values = np.asarray(disagreement, dtype=np.float64)
        if step == 0 or self.threshold is None:
            self.threshold = self.xi * float(np.percentile(values, self.percentile)) if values.size else math.inf
        return values <= self.threshold

    def state_dict(self) -> dict[str, Any]:
        return {"threshold": self.threshold}

    def __repr__(self) -> str:
        xi = "" if self.xi == 1.0 else f", xi={self.xi:g}"
        return f"UncertaintyTruncation({self.percentile:g}, k_max={self.k_max}{xi})"


# --- spec factories (named in meta.control.spec.SPECS) ------------------------------------------------------------


def fixed_from_spec(spec: Spec) -> Fixed:
    """``fixed:K``."""
    return Fixed(*spec.integers("K (1 integer)", 1, 1))


def linear_from_spec(spec: Spec) -> TruncatedLinear:
    """``linear:EPOCH_A,EPOCH_B,H_MIN,H_MAX``."""
    return TruncatedLinear(*spec.integers("EPOCH_A,EPOCH_B,H_MIN,H_MAX (4 integers)", 4, 4))


def budget_linear_from_spec(spec: Spec) -> BudgetLinear:
    """``inc:K_MAX``, ``dec:K_MAX``, ``incdec:K_MAX``."""
    return BudgetLinear(spec.name, *spec.integers("K_MAX (1 integer)", 1, 1))


def uncertainty_from_spec(spec: Spec) -> UncertaintyTruncation:
    """``uncertainty:PERCENTILE[,K_MAX[,XI]]`` (K_MAX default 32, XI default 1; MACURA: ``uncertainty:95,32,2``)."""
    percentile, *rest = spec.numbers("PERCENTILE[,K_MAX[,XI]]", 1, 3, whole=(1,))
    k_max = int(rest[0]) if rest else 32
    xi = float(rest[1]) if len(rest) > 1 else 1.0
    try:
        return UncertaintyTruncation(percentile, k_max, xi)
    except ValueError as exc:
        raise ValueError(f"controller spec {spec.text!r}: {exc}") from exc


def random_from_spec(spec: Spec) -> RandomMetaPolicy:
    """``random:K_INIT,K_CAP[,SEED]``."""
    return RandomMetaPolicy(*spec.integers("K_INIT,K_CAP[,SEED] (2 or 3 integers)", 2, 3))


def make_controller(spec: str) -> RolloutLengthController:
    """Build a rollout-length controller from a spec such as ``fixed:5`` or ``linear:20,150,1,15``.

    The specs: ``fixed:K``, ``linear:EPOCH_A,EPOCH_B,H_MIN,H_MAX``, ``inc:K_MAX``, ``dec:K_MAX``, ``incdec:K_MAX``,
    ``uncertainty:PERCENTILE[,K_MAX[,XI]]``, ``random:K_INIT,K_CAP[,SEED]``, ``learned:PATH`` (a ``meta_policy.pt`` or
    the run directory holding it; loading it imports torch and SB3).

    Raises:
        ValueError: unknown name (with the list of known names), a name of another spec kind such as an RLVR
            allocator (with the function that builds it), or malformed arguments.
    """
    controller = build_spec(ROLLOUT_LENGTH, spec)
    if not isinstance(controller, RolloutLengthController):
        raise TypeError(f"spec {spec!r} built {type(controller).__name__}, not a RolloutLengthController")
    return controller


def available_controllers() -> list[str]:
    """Names accepted by :func:`make_controller`."""
    return available_specs(ROLLOUT_LENGTH)
