"""Measuring a trained tokenizer: reconstruction error after every iteration, the features the learned halting
controller reads, and the error threshold that meets a mean token budget."""

from __future__ import annotations

import numpy as np
import torch

from meta.tokenizer.halting import CountPredictor, ErrorThreshold, halting_iterations
from meta.tokenizer.model import AdaptiveTokenizer

__all__ = ["chosen", "count_features", "error_curves", "fit_count_predictor", "threshold_for_budget"]


def error_curves(model: AdaptiveTokenizer, images: np.ndarray, batch_size: int = 256) -> np.ndarray:
    """Per-image reconstruction MSE after each iteration.

    Args:
        model: The tokenizer (put in eval mode here).
        images: ``(N, S, S)`` grey levels in ``[0, 1]``.
        batch_size: Images per forward pass.

    Returns:
        ``(N, T)`` float64 errors; column ``t - 1`` is the error from the tokens of iteration ``t``.
    """
    model.eval()
    parts = [
        model.reconstruction_errors(torch.as_tensor(images[i : i + batch_size])).double().numpy()
        for i in range(0, len(images), batch_size)
    ]
    return np.concatenate(parts) if parts else np.zeros((0, model.config.iterations))


def count_features(images: np.ndarray, first_errors: np.ndarray) -> np.ndarray:
    """What :class:`~meta.tokenizer.halting.LearnedCount` reads after the first iteration, ``(N, 3)``: the log of the
    first iteration's reconstruction error, the image's grey-level standard deviation, and its mean absolute difference
    between neighbouring pixels (edges and texture)."""
    flat = images.reshape(len(images), -1)
    gradient = np.abs(np.diff(images, axis=1)).mean(axis=(1, 2)) + np.abs(np.diff(images, axis=2)).mean(axis=(1, 2))
    return np.stack([np.log(np.asarray(first_errors) + 1e-6), flat.std(axis=1), gradient], axis=1)


def fit_count_predictor(images: np.ndarray, errors: np.ndarray, threshold: float, ridge: float = 1.0) -> CountPredictor:
    """Fit a :class:`~meta.tokenizer.halting.CountPredictor` to the counts :class:`ErrorThreshold` gives ``images``.

    Args:
        images: ``(N, S, S)`` training images.
        errors: Their ``(N, T)`` error curves (:func:`error_curves`).
        threshold: The error threshold whose counts are the targets.
        ridge: L2 penalty on the standardized coefficients.
    """
    horizon = errors.shape[1]
    counts = halting_iterations(ErrorThreshold(threshold, horizon), errors)
    return CountPredictor.fit(count_features(images, errors[:, 0]), counts, horizon, threshold, ridge)


def chosen(errors: np.ndarray, iterations: np.ndarray) -> np.ndarray:
    """``(N,)`` error of each image at its own iteration count (``iterations`` in ``1..T``)."""
    return errors[np.arange(len(errors)), np.asarray(iterations) - 1]


def threshold_for_budget(errors: np.ndarray, mean_iterations: float) -> float:
    """The smallest error threshold whose :class:`ErrorThreshold` counts average at most ``mean_iterations``.

    Counts only fall as the threshold rises, so the candidates (every error on the curves, and infinity) are searched
    by bisection. This is rate control: the encoder has each image's own errors, so it can pick the one threshold that
    meets a mean budget over a set of images without labels.

    Args:
        errors: ``(N, T)`` error curves.
        mean_iterations: The budget, in iterations per image (``>= 1``).
    """
    if mean_iterations < 1:
        raise ValueError(f"a mean budget below one iteration per image cannot be met, got {mean_iterations}")
    horizon = errors.shape[1]
    candidates = np.unique(np.append(errors.ravel(), np.inf))

    def mean_count(threshold: float) -> float:
        # Vectorized ErrorThreshold: the first iteration at or below the threshold, else T.
        below = errors <= threshold
        return float(np.where(below.any(axis=1), below.argmax(axis=1) + 1, horizon).mean())

    lo, hi = 0, len(candidates) - 1  # mean_count(candidates[hi]) = 1 <= budget
    while lo < hi:
        mid = (lo + hi) // 2
        if mean_count(float(candidates[mid])) <= mean_iterations:
            hi = mid
        else:
            lo = mid + 1
    return float(candidates[lo])
