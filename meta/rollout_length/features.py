"""The meta-agent's observation: a normalized feature vector built from the inner learner's phase feedback.

The first five features are the paper's (Bhatia et al. 2022, sec. 4): remaining budget, current K, the average return
J of the current policy over the last phase, and the model's signed errors in predicting an episode's return and
length (model rollout from the same start state under the same policy, minus the real episode). Five more are added
and documented here because they are cheap and say how far the model and the value function can be trusted: the
return trend (J minus the previous phase's J), the world model's holdout loss, the ensemble disagreement along model
episodes, the same disagreement over the first ``max(K, 1)`` steps only (the horizon the current K uses) and the
value function's mean absolute TD error on real transitions (``td_error_mean`` of :mod:`mbrl.phases`). The last is the
model's one-step prediction RMSE on the run's latest real training transitions (``model_one_step_rmse``), the model
error a controller can read without any real interaction beyond its budget.

Scales: returns and return errors are divided by ``return_scale`` (by default the env's episode step limit, so that
MountainCar's -200 and Acrobot's -500 both map to -1); length errors by ``length_scale`` (the step limit); the loss,
the disagreements and the TD error are squashed with ``sign(x) log(1 + |x|)``, the one-step RMSE after scaling by 10
(it is about 0.01-0.5 where it matters, observations being of order 1). Every feature is clipped to
``[-CLIP, CLIP]``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Names of the observation's entries, in order.
FEATURE_NAMES: tuple[str, ...] = (
    "budget_remaining",
    "k",
    "j",
    "model_return_error",
    "model_length_error",
    "j_trend",
    "model_holdout_loss",
    "disagreement",
    "disagreement_at_k",
    "td_error",
    "model_one_step_rmse",
)
#: Every feature is clipped to this magnitude (the ``Box`` bound of the meta-env's observation space).
CLIP = 10.0


def _finite(value: Any, default: float = 0.0) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return default
    return x if math.isfinite(x) else default


def _squash(x: float) -> float:
    return math.copysign(math.log1p(abs(x)), x)


@dataclass(frozen=True)
class FeatureScales:
    """Normalization constants of :func:`featurize`.

    Attributes:
        k_cap: Largest rollout length; K is observed as ``K / k_cap``.
        return_scale: Returns (J, return errors, trends) are divided by this (> 0).
        length_scale: Episode-length errors are divided by this (> 0).
    """

    k_cap: int
    return_scale: float
    length_scale: float

    def __post_init__(self) -> None:
        if self.k_cap < 1 or self.return_scale <= 0 or self.length_scale <= 0:
            raise ValueError(f"invalid feature scales {self}")


def featurize(feedback: Mapping[str, Any], k: int, j: float, j_prev: float, scales: FeatureScales) -> np.ndarray:
    """Build one observation.

    Args:
        feedback: The inner learner's phase feedback (keys ``budget_fraction``, ``model_return_error``,
            ``model_length_error``, ``model_holdout_loss``, ``disagreement_mean``, ``disagreement_at_k``,
            ``td_error_mean``, ``model_one_step_rmse``; missing or non-finite -> 0).
        k: The rollout length in force for the coming phase's decision (before the action).
        j: The return J the meta-agent attributes to the last phase (already made finite by the caller).
        j_prev: J of the phase before (for the trend).
        scales: Normalization constants.

    Returns:
        ``float32`` array of shape ``[len(FEATURE_NAMES)]``.
    """
    budget_fraction = min(max(_finite(feedback.get("budget_fraction"), 0.0), 0.0), 1.0)
    values = [
        1.0 - budget_fraction,
        k / scales.k_cap,
        j / scales.return_scale,
        _finite(feedback.get("model_return_error")) / scales.return_scale,
        _finite(feedback.get("model_length_error")) / scales.length_scale,
        (j - j_prev) / scales.return_scale,
        _squash(_finite(feedback.get("model_holdout_loss"))),
        _squash(_finite(feedback.get("disagreement_mean"))),
        _squash(_finite(feedback.get("disagreement_at_k"))),
        _squash(_finite(feedback.get("td_error_mean"))),
        _squash(10.0 * _finite(feedback.get("model_one_step_rmse"))),
    ]
    return np.clip(np.asarray(values, dtype=np.float32), -CLIP, CLIP)
