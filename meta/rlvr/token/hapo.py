"""HAPO token-level controller (Liu et al. 2025, "HAPO: Heterogeneous Adaptive Policy Optimization").

HAPO treats tokens differently by their entropy. Every rule works on a per-token **normalised log-entropy** ``ĥ``:

``ℓ = ln max(H, ε)``, ``h = (ℓ − c) / (s + ε)``, ``ĥ = clip(h · (k₊ if h > 0 else k₋), −1, 1)``,

where ``H`` is the token's next-token entropy (nats), ``c`` the ``q``-quantile of the batch's log-entropies (the
median for ``q = 0.5``, as in the authors' code), ``s`` their standard deviation, and ``k₊ = 1/max(h⁺)``,
``k₋ = 1/max(−h⁻)`` rescale each side to reach ±1 on the batch's most extreme token (rolloutlab's reading: the
public code passes ``scale_pos`` / ``scale_neg`` in with the statistics without saying how they are set). The
statistics come from the *previous* batch (:meth:`HAPO.decide`), since sampling needs them before the current
batch exists.

**Sign convention** (checked in ``tests/rlvr/test_rlvr_hapo.py``): ``ĥ > 0`` is a token *more* uncertain than the
batch's centre. Then

* sampling temperature ``T_t = T · (1 + τ·ĥ)`` (adaptive temperature sampling): hotter on high-entropy tokens, cooler
  on low-entropy ones;
* clip bounds (asymmetric adaptive clipping), the ratio kept in ``[1 − ε_low,t, 1 + ε_high,t]``: with
  ``one_sided=True`` (the default, as in the authors' ``ada_clip``) a high-entropy token gets
  ``ε_high,t = ε_high·(1 + αĥ)`` (more room to *raise* its probability) and a low-entropy token
  ``ε_low,t = ε_low·(1 − αĥ)`` (more room to *lower* it), the other bound unchanged, so both only ever widen; with
  ``one_sided=False`` both formulas apply to every token (the issue's reading), which also narrows ``ε_low`` on
  high-entropy tokens and ``ε_high`` on low-entropy ones;
* token-level group-average advantage (:func:`token_group_advantages`): a response's reward is normalised by the
  mean and std over the group's *tokens* (every token carries its response's reward), so a long response weighs
  more in the group's statistics, as in a token-mean loss; a group with any ``|A| ≥ fallback`` uses plain GRPO
  advantages instead (the authors' "smooth score").

Everything here is numpy; the trainer applies the per-token values. The spec ``hapo:TAU,ALPHA[,QUANTILE]`` builds it
(:func:`meta.rlvr.token.make_token_controller`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from meta.control import Controller, Feedback

EPS = 1e-6


def entropy_statistics(entropies: Sequence[float] | np.ndarray, quantile: float = 0.5) -> dict[str, float]:
    """``{"center", "spread", "scale_pos", "scale_neg"}`` of a batch's per-token entropies (nats), see the module.

    An empty batch gives the neutral statistics (every ``ĥ`` then depends only on ``ℓ``; call :meth:`HAPO.decide`
    with data before relying on them).
    """
    h = np.asarray(entropies, dtype=float).ravel()
    if h.size == 0:
        return {"center": 0.0, "spread": 1.0, "scale_pos": 1.0, "scale_neg": 1.0}
    logh = np.log(np.maximum(h, EPS))
    center = float(np.quantile(logh, quantile))
    spread = float(logh.std())
    z = (logh - center) / (spread + EPS)
    pos, neg = z[z > 0], -z[z < 0]
    return {
        "center": center,
        "spread": spread,
        "scale_pos": float(1.0 / pos.max()) if pos.size else 1.0,
        "scale_neg": float(1.0 / neg.max()) if neg.size else 1.0,
    }


def normalized_log_entropy(entropies: Sequence[float] | np.ndarray, stats: Mapping[str, float]) -> np.ndarray:
    """``ĥ`` in ``[−1, 1]`` for each entropy (any shape), given :func:`entropy_statistics` of a batch."""
    logh = np.log(np.maximum(np.asarray(entropies, dtype=float), EPS))
    z = (logh - stats["center"]) / (stats["spread"] + EPS)
    return np.clip(np.where(z > 0, z * stats["scale_pos"], z * stats["scale_neg"]), -1.0, 1.0)


def token_temperatures(h_hat: np.ndarray, temperature: float, tau: float) -> np.ndarray:
    """``T_t = T · (1 + τ·ĥ_t)`` per token."""
    return temperature * (1.0 + tau * np.asarray(h_hat, dtype=float))


def token_clip_bounds(
    h_hat: np.ndarray, eps_low: float, eps_high: float, alpha: float, one_sided: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Per-token ``(ε_low,t, ε_high,t)``; the ratio is clipped to ``[1 − ε_low,t, 1 + ε_high,t]`` (see the module)."""
    h = np.asarray(h_hat, dtype=float)
    low = eps_low * (1.0 - alpha * h)
    high = eps_high * (1.0 + alpha * h)
    if one_sided:
        low = np.where(h <= 0, low, eps_low)
        high = np.where(h > 0, high, eps_high)
    return low, high


def token_group_advantages(
    rewards: Sequence[float], lengths: Sequence[int], std: bool = True, fallback: float = 5.0, eps: float = EPS
) -> list[float]:
    """Token-level group-average advantages of one group (one value per response, shared by its tokens).

    The group's mean and (population) std are over its tokens: response ``i`` contributes ``lengths[i]`` copies of
    ``rewards[i]``. ``A_i = (r_i − μ_tok) / (σ_tok + eps)`` (``std=False``: ``r_i − μ_tok``). When some
    ``|A_i| ≥ fallback`` the group gets sequence-level GRPO advantages instead. A group of one response, or whose
    responses have no tokens, gets zeros.
    """
    r = np.asarray(rewards, dtype=float)
    n = np.asarray(lengths, dtype=float)
    if r.shape != n.shape:
        raise ValueError(f"need one length per reward, got {r.shape} and {n.shape}")
    if r.size < 2 or n.sum() <= 0:
        return [0.0] * int(r.size)
    mean = float((r * n).sum() / n.sum())
    centred = r - mean
    if std:
        centred = centred / (float(np.sqrt((n * (r - mean) ** 2).sum() / n.sum())) + eps)
    if np.any(np.abs(centred) >= fallback):
        seq = r - r.mean()
        centred = seq / (r.std() + eps) if std else seq
    return [float(x) for x in centred]


class HAPO(Controller):
    """HAPO's token-level rules behind the controller protocol.

    :meth:`decide` takes the finished batch's per-token entropies and sets the statistics the next batch is
    normalised with; :meth:`h_hat`, :meth:`temperatures` and :meth:`clip_bounds` apply them to tokens.

    Args:
        tau: ``τ``, the temperature's range (the authors use 0.05 for Qwen models; the character LM tolerates more).
        alpha: ``α``, the clip bounds' range (1 in the paper).
        quantile: ``q`` of the centre (0.5: the median).
        one_sided: Widen only (the authors' code, default) or apply both clip formulas to every token.
        token_advantage: Use :func:`token_group_advantages` instead of sequence-level group advantages.
    """

    def __init__(
        self,
        tau: float = 0.2,
        alpha: float = 1.0,
        quantile: float = 0.5,
        one_sided: bool = True,
        token_advantage: bool = True,
    ) -> None:
        if not (0.0 <= tau < 1.0 and 0.0 <= alpha <= 1.0 and 0.0 < quantile < 1.0):
            raise ValueError(f"need 0 <= tau < 1, 0 <= alpha <= 1 and 0 < quantile < 1, got {tau}, {alpha}, {quantile}")
        self.tau = float(tau)
        self.alpha = float(alpha)
        self.quantile = float(quantile)
        self.one_sided = bool(one_sided)
        self.token_advantage = bool(token_advantage)
        self.stats = entropy_statistics([])
        self.updates = 0

    def decide(self, feedback: Feedback) -> dict[str, float]:
        """``feedback["entropies"]``: the batch's per-token entropies (nats) -> the statistics for the next batch."""
        if "entropies" not in feedback:
            raise KeyError(f"HAPO needs feedback['entropies']; got keys {sorted(feedback)}")
        values = np.asarray(feedback["entropies"], dtype=float).ravel()
        if values.size:
            self.stats = entropy_statistics(values, self.quantile)
            self.updates += 1
        return dict(self.stats)

    def h_hat(self, entropies: Sequence[float] | np.ndarray) -> np.ndarray:
        """``ĥ`` of ``entropies`` under the current statistics (zeros before the first :meth:`decide`)."""
        if self.updates == 0:
            return np.zeros(np.shape(entropies))
        return normalized_log_entropy(entropies, self.stats)

    def temperatures(self, entropies: Sequence[float] | np.ndarray, temperature: float) -> np.ndarray:
        """Per-token sampling temperatures for tokens with these entropies."""
        return token_temperatures(self.h_hat(entropies), temperature, self.tau)

    def clip_bounds(self, h_hat: np.ndarray, eps_low: float, eps_high: float) -> tuple[np.ndarray, np.ndarray]:
        """Per-token ``(ε_low,t, ε_high,t)`` for tokens with normalised log-entropies ``h_hat``."""
        return token_clip_bounds(h_hat, eps_low, eps_high, self.alpha, self.one_sided)

    def reset(self) -> None:
        self.stats = entropy_statistics([])
        self.updates = 0

    def state_dict(self) -> dict[str, Any]:
        return {"stats": dict(self.stats), "updates": self.updates}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.stats = {k: float(v) for k, v in self.stats.items()}
        self.updates = int(self.updates)

    def __repr__(self) -> str:
        return f"HAPO(tau={self.tau}, alpha={self.alpha}, quantile={self.quantile}, one_sided={self.one_sided})"
