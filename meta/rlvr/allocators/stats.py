"""Per-prompt statistics: attempts, successes, solve-rate estimates and response lengths.

Allocators read these to decide how many responses a prompt deserves. Two solve-rate estimates are kept:

* the Beta-Bernoulli posterior mean ``p̂ = (α0 + s) / (α0 + β0 + n)`` after ``s`` successes in ``n`` attempts
  (conjugate update, e.g. Gelman et al., *Bayesian Data Analysis*, §2.4), used by the Knapsack allocator;
* an exponential moving average of per-step group accuracy, ``m ← (1 − λ)·m + λ·acc`` (the running estimate that tracks
  a moving policy, as in GRESO / AR3PO-style bookkeeping).

numpy-free plain Python: importable anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class PromptStats:
    """Running record of one prompt.

    Attributes:
        attempts: Responses sampled so far (all steps).
        successes: Sum of rewards in {0, 1} (rewards are clipped to [0, 1] before adding).
        ema: EMA of the per-step accuracy; ``None`` before the first update.
        mean_length: Running mean completion length in tokens (over all attempts).
        last_accuracy: Accuracy of the most recent group.
    """

    attempts: int = 0
    successes: float = 0.0
    ema: float | None = None
    mean_length: float = 0.0
    last_accuracy: float | None = None


class StatsTable:
    """Statistics for every prompt seen, keyed by a string (the prompt text).

    Args:
        alpha0: Beta prior pseudo-successes (α0 > 0).
        beta0: Beta prior pseudo-failures (β0 > 0).
        ema_rate: EMA step λ in (0, 1].
    """

    def __init__(self, alpha0: float = 1.0, beta0: float = 1.0, ema_rate: float = 0.5) -> None:
        if alpha0 <= 0 or beta0 <= 0:
            raise ValueError(f"Beta prior parameters must be > 0, got α0={alpha0}, β0={beta0}")
        if not 0 < ema_rate <= 1:
            raise ValueError(f"ema_rate must be in (0, 1], got {ema_rate}")
        self.alpha0 = float(alpha0)
        self.beta0 = float(beta0)
        self.ema_rate = float(ema_rate)
        self.table: dict[str, PromptStats] = {}

    def __contains__(self, key: str) -> bool:
        return key in self.table

    def __len__(self) -> int:
        return len(self.table)

    def get(self, key: str) -> PromptStats:
        """The record of ``key`` (a fresh empty one if unseen; not stored)."""
        return self.table.get(key, PromptStats())

    def update(self, key: str, rewards: Sequence[float], lengths: Sequence[int] | None = None) -> None:
        """Add one group of responses for ``key``.

        Args:
            key: Prompt identifier.
            rewards: One reward per response; values are clipped to [0, 1] for the success count.
            lengths: Optional completion lengths in tokens, one per response.
        """
        if not rewards:
            return
        rec = self.table.setdefault(key, PromptStats())
        clipped = [min(max(float(r), 0.0), 1.0) for r in rewards]
        acc = sum(clipped) / len(clipped)
        if lengths is not None:
            if len(lengths) != len(rewards):
                raise ValueError("lengths must have one entry per reward")
            total = rec.mean_length * rec.attempts + float(sum(lengths))
            rec.mean_length = total / (rec.attempts + len(lengths))
        rec.attempts += len(clipped)
        rec.successes += sum(clipped)
        rec.ema = acc if rec.ema is None else (1 - self.ema_rate) * rec.ema + self.ema_rate * acc
        rec.last_accuracy = acc

    def posterior_mean(self, key: str) -> float:
        """Beta posterior mean solve rate ``(α0 + s) / (α0 + β0 + n)``; the prior mean for an unseen prompt."""
        rec = self.get(key)
        return (self.alpha0 + rec.successes) / (self.alpha0 + self.beta0 + rec.attempts)

    def solve_rate(self, key: str, default: float | None = None) -> float:
        """EMA solve rate if the prompt was seen, else ``default`` (the prior mean if ``None``)."""
        rec = self.get(key)
        if rec.ema is not None:
            return rec.ema
        return self.alpha0 / (self.alpha0 + self.beta0) if default is None else default

    def state_dict(self) -> dict[str, Any]:
        """Plain-data snapshot."""
        return {
            "alpha0": self.alpha0,
            "beta0": self.beta0,
            "ema_rate": self.ema_rate,
            "table": {k: asdict(v) for k, v in self.table.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` snapshot."""
        self.alpha0 = float(state["alpha0"])
        self.beta0 = float(state["beta0"])
        self.ema_rate = float(state["ema_rate"])
        self.table = {k: PromptStats(**v) for k, v in state["table"].items()}

    def keys(self) -> Iterable[str]:
        """Prompt keys seen so far."""
        return self.table.keys()
