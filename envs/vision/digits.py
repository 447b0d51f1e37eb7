"""scikit-learn's bundled handwritten digits (1797 images of 8x8 pixels, 17 grey levels), as ``[0, 1]`` floats.

The data ship inside the scikit-learn package, so nothing is downloaded. Images are upsampled bilinearly to the side
the caller asks for, so that they share a patch grid with :mod:`envs.vision.shapes`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DIGITS_SIDE", "load_digit_images"]

#: Side of the bundled digit images, in pixels.
DIGITS_SIDE = 8


def load_digit_images(size: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """The 1797 bundled digits, scaled to ``[0, 1]`` and upsampled to ``size x size``.

    Args:
        size: Output side in pixels (at least 8; 8 keeps the originals).

    Returns:
        ``(images, labels)``: ``(1797, size, size)`` float32 in ``[0, 1]`` and ``(1797,)`` int64 digit classes.

    Raises:
        ValueError: ``size`` below 8.
        ImportError: scikit-learn is not installed (it is in the project's ``eval`` extra).
    """
    if size < DIGITS_SIDE:
        raise ValueError(f"digit image size must be at least {DIGITS_SIDE} pixels, got {size}")
    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:
        raise ImportError(
            "the digit images ship with scikit-learn, which is not installed: pip install 'rolloutlab[eval]'"
        ) from exc
    from scipy.ndimage import zoom

    bunch = load_digits()
    images = np.asarray(bunch.images, dtype=np.float64) / 16.0
    if size != DIGITS_SIDE:
        images = zoom(images, (1.0, size / DIGITS_SIDE, size / DIGITS_SIDE), order=1, grid_mode=True, mode="nearest")
    return np.clip(images, 0.0, 1.0).astype(np.float32), np.asarray(bunch.target, dtype=np.int64)
