"""E3 entropy-targeting temperature (Liao et al. 2025, "Enhancing Efficiency and Exploration in RL for LLMs", §3.3).

After each step the sampling temperature is nudged toward a target token entropy ``H*``:

``T ← T · (1 + T · ln(H*/H) / (ln V + ln ln V))``,

where ``H`` is the measured mean token entropy (nats) of the step's responses and ``V`` the vocabulary size
(``ln V + ln ln V`` is a scale for how strongly the temperature moves entropy). Entropy below target raises ``T``.
"""

from __future__ import annotations

import math
from typing import Any

from meta.control import Controller, Feedback


class EntropyTemperature(Controller):
    """Temperature controller.

    Args:
        target_entropy: ``H*`` in nats per token (> 0).
        vocab_size: ``V`` (>= 2); for tiny vocabularies the scale ``ln V + ln ln V`` is floored at 1.
        initial: Starting temperature.
        t_min: Lower clamp.
        t_max: Upper clamp.
    """

    def __init__(
        self, target_entropy: float, vocab_size: int, initial: float = 1.0, t_min: float = 0.1, t_max: float = 2.0
    ) -> None:
        if target_entropy <= 0 or vocab_size < 2 or not 0 < t_min <= initial <= t_max:
            raise ValueError("need target_entropy > 0, vocab_size >= 2 and 0 < t_min <= initial <= t_max")
        self.target_entropy = float(target_entropy)
        self.vocab_size = int(vocab_size)
        self.t_min = float(t_min)
        self.t_max = float(t_max)
        self.initial = float(initial)
        self.temperature = float(initial)

    @property
    def scale(self) -> float:
        """``ln V + ln ln V`` (floored at 1 for tiny vocabularies, where ``ln ln V`` is negative or undefined)."""
        log_v = math.log(self.vocab_size)
        return max(1.0, log_v + (math.log(log_v) if log_v > 0 else 0.0))

    def decide(self, feedback: Feedback) -> float:
        """Update from ``feedback["entropy"]`` (mean token entropy in nats) and return the new temperature."""
        entropy = float(feedback["entropy"])
        if entropy > 0:
            t = self.temperature
            t = t * (1.0 + t * math.log(self.target_entropy / entropy) / self.scale)
            self.temperature = min(max(t, self.t_min), self.t_max)
        return self.temperature

    def reset(self) -> None:
        self.temperature = self.initial

    def state_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature}
