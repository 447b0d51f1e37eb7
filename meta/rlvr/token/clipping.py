"""BAPO adaptive clip bounds (Xi et al. 2025, "BAPO: Stabilizing Off-Policy RL for LLMs via Balanced Policy
Optimization with Adaptive Clipping", Alg. 1).

PPO-style clipping with ratio bounds ``[c_low, c_high]`` keeps a token's gradient only while its ratio ``r`` is inside
the bound on the side its advantage pushes: a positive-advantage token contributes while ``r ≤ c_high``, a
negative-advantage token while ``r ≥ c_low``. BAPO measures the positive share of the contributing loss,

``ρ = Σ_{A>0, r≤c_high} |A·r| / (Σ_{A>0, r≤c_high} |A·r| + Σ_{A<0, r≥c_low} |A·r|)``,

and, starting each step from ``(a⁻, a⁺)``, raises ``c_low`` (clipping more negative tokens) and then ``c_high``
(admitting more positive tokens) in ``δ = 0.05`` steps, within ``[a⁻, b⁻]`` and ``[a⁺, b⁺]``, until ``ρ ≥ ρ₀``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from meta.control import Controller, Feedback


def positive_share(ratios: np.ndarray, advantages: np.ndarray, c_low: float, c_high: float) -> float:
    """``ρ`` above for flat arrays of per-token ratios and advantages (1.0 when nothing contributes)."""
    contrib = np.abs(advantages * ratios)
    pos = float(contrib[(advantages > 0) & (ratios <= c_high)].sum())
    neg = float(contrib[(advantages < 0) & (ratios >= c_low)].sum())
    return 1.0 if pos + neg == 0 else pos / (pos + neg)


class BalancedClip(Controller):
    """Adaptive clip-bound controller.

    Args:
        target: ``ρ₀``, the wanted positive share.
        low_range: ``(a⁻, b⁻)`` for ``c_low``.
        high_range: ``(a⁺, b⁺)`` for ``c_high``.
        step: ``δ``.
    """

    def __init__(
        self,
        target: float = 0.4,
        low_range: tuple[float, float] = (0.6, 0.9),
        high_range: tuple[float, float] = (1.2, 3.0),
        step: float = 0.05,
    ) -> None:
        if not (0 < target < 1 and low_range[0] <= low_range[1] and high_range[0] <= high_range[1] and step > 0):
            raise ValueError("need 0 < target < 1, ordered ranges and step > 0")
        self.target = float(target)
        self.low_range = (float(low_range[0]), float(low_range[1]))
        self.high_range = (float(high_range[0]), float(high_range[1]))
        self.step = float(step)
        self.bounds = (self.low_range[0], self.high_range[0])

    def decide(self, feedback: Feedback) -> tuple[float, float]:
        """``feedback["ratios"]`` and ``feedback["advantages"]`` (per token, same shape) -> ``(c_low, c_high)``."""
        ratios = np.asarray(feedback["ratios"], dtype=float).ravel()
        adv = np.asarray(feedback["advantages"], dtype=float).ravel()
        c_low, c_high = self.low_range[0], self.high_range[0]
        eps = 1e-9  # bounds are compared after repeated float additions of step
        while positive_share(ratios, adv, c_low, c_high) < self.target:
            if c_low + self.step <= self.low_range[1] + eps:
                c_low = round(c_low + self.step, 10)
            elif c_high + self.step <= self.high_range[1] + eps:
                c_high = round(c_high + self.step, 10)
            else:
                break
        self.bounds = (c_low, c_high)
        return self.bounds

    def state_dict(self) -> dict[str, Any]:
        return {"bounds": self.bounds}
