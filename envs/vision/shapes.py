"""Procedurally drawn greyscale images whose complexity is known by construction.

Each image is a flat background with ``n_shapes`` shapes (rectangles, ellipses, triangles) painted over it in order,
later shapes over earlier ones. A shape is either flat or textured (stripes or a checkerboard of two grey levels), so
an image's *complexity* is counted, not estimated: ``n_shapes + n_textured`` (a textured shape counts twice: its
outline and its texture). An image with no shape is one grey level. The count of edge pixels (pixels whose right or
lower neighbour differs) is measured after drawing, as a second, pixel-level measure of the same thing.

Randomness comes only from the ``numpy`` generator passed in (or seeded from ``seed``), so the same seed draws the
same images on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SHAPE_KINDS", "ShapeImages", "draw_image", "edge_pixels", "make_shape_images"]

#: The shapes an image may hold.
SHAPE_KINDS: tuple[str, ...] = ("rectangle", "ellipse", "triangle")

# A shape's grey level differs from the background by at least this much, so every drawn shape shows.
_MIN_CONTRAST = 0.3


@dataclass(frozen=True)
class ShapeImages:
    """A batch of drawn images and what each was drawn with.

    Attributes:
        images: ``(n, size, size)`` float32 grey levels in ``[0, 1]``.
        n_shapes: ``(n,)`` shapes drawn in each image.
        n_textured: ``(n,)`` of those, the textured ones.
        edge_pixels: ``(n,)`` pixels whose right or lower neighbour differs by more than 0.05 (:func:`edge_pixels`).
    """

    images: np.ndarray
    n_shapes: np.ndarray
    n_textured: np.ndarray
    edge_pixels: np.ndarray

    @property
    def complexity(self) -> np.ndarray:
        """``(n,)`` known complexity of each image: shapes drawn plus textured shapes."""
        return self.n_shapes + self.n_textured

    def __len__(self) -> int:
        return len(self.images)


def _contrasting_level(rng: np.random.Generator, background: float) -> float:
    """A grey level at least ``_MIN_CONTRAST`` away from ``background`` (uniform over the allowed part of [0, 1])."""
    low, high = background - _MIN_CONTRAST, background + _MIN_CONTRAST
    below, above = max(low, 0.0), max(1.0 - high, 0.0)
    pick = rng.uniform(0.0, below + above)
    return float(pick if pick < below else high + (pick - below))


def _shape_mask(rng: np.random.Generator, kind: str, size: int) -> np.ndarray:
    """A ``(size, size)`` boolean mask of one shape, its extent a fifth to a half of the image side."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64) + 0.5
    lo, hi = max(size / 5.0, 2.0), size / 2.0
    height, width = rng.uniform(lo, hi, size=2)
    cy, cx = rng.uniform(height / 2, size - height / 2), rng.uniform(width / 2, size - width / 2)
    if kind == "rectangle":
        return (np.abs(yy - cy) <= height / 2) & (np.abs(xx - cx) <= width / 2)
    if kind == "ellipse":
        return ((yy - cy) / (height / 2)) ** 2 + ((xx - cx) / (width / 2)) ** 2 <= 1.0
    if kind == "triangle":
        # Apex at the top centre, base along the bottom of the bounding box; a pixel is inside when it lies on the
        # same side of each edge as the triangle's centroid.
        top, bottom, left, right = cy - height / 2, cy + height / 2, cx - width / 2, cx + width / 2
        corners = np.array([[top, cx], [bottom, right], [bottom, left]])
        centroid = corners.mean(axis=0)
        inside = np.ones((size, size), dtype=bool)
        for i in range(3):
            (y0, x0), (y1, x1) = corners[i], corners[(i + 1) % 3]
            side = (x1 - x0) * (yy - y0) - (y1 - y0) * (xx - x0)
            inside &= side * np.sign((x1 - x0) * (centroid[0] - y0) - (y1 - y0) * (centroid[1] - x0)) >= 0.0
        return inside
    raise ValueError(f"shape kind must be one of {SHAPE_KINDS}, got {kind!r}")


def _texture(rng: np.random.Generator, size: int) -> np.ndarray:
    """A ``(size, size)`` boolean pattern: stripes (horizontal, vertical or diagonal) or a checkerboard, period 2-4."""
    yy, xx = np.mgrid[0:size, 0:size]
    period = int(rng.integers(2, 5))
    pattern = int(rng.integers(4))
    if pattern == 0:
        return (yy // max(period // 2, 1)) % 2 == 0
    if pattern == 1:
        return (xx // max(period // 2, 1)) % 2 == 0
    if pattern == 2:
        return ((yy + xx) // max(period // 2, 1)) % 2 == 0
    return ((yy // max(period // 2, 1)) + (xx // max(period // 2, 1))) % 2 == 0


def draw_image(rng: np.random.Generator, size: int, textured: list[bool] | tuple[bool, ...]) -> np.ndarray:
    """Draw one image with ``len(textured)`` shapes, shape ``i`` textured when ``textured[i]``.

    Args:
        rng: The only source of randomness (kinds, extents, positions, grey levels, textures).
        size: Image side in pixels (at least 4).
        textured: One flag per shape, in painting order.

    Returns:
        ``(size, size)`` float32 grey levels in ``[0, 1]``.
    """
    if size < 4:
        raise ValueError(f"image size must be at least 4 pixels, got {size}")
    background = float(rng.uniform(0.0, 1.0))
    image = np.full((size, size), background, dtype=np.float64)
    for flag in textured:
        kind = SHAPE_KINDS[int(rng.integers(len(SHAPE_KINDS)))]
        mask = _shape_mask(rng, kind, size)
        level = _contrasting_level(rng, background)
        if flag:
            # Two levels on either side of the shape's own, far enough apart that the texture shows.
            other = _contrasting_level(rng, level)
            fill = np.where(_texture(rng, size), level, other)
        else:
            fill = np.full((size, size), level)
        image = np.where(mask, fill, image)
    return image.astype(np.float32)


def edge_pixels(image: np.ndarray, tolerance: float = 0.05) -> int:
    """Pixels of a ``(size, size)`` image whose right or lower neighbour differs by more than ``tolerance``."""
    right = np.zeros(image.shape, dtype=bool)
    below = np.zeros(image.shape, dtype=bool)
    right[:, :-1] = np.abs(np.diff(image, axis=1)) > tolerance
    below[:-1, :] = np.abs(np.diff(image, axis=0)) > tolerance
    return int((right | below).sum())


def make_shape_images(
    n: int, size: int = 16, max_shapes: int = 6, texture_prob: float = 0.3, seed: int = 0
) -> ShapeImages:
    """Draw ``n`` images, each with a number of shapes uniform in ``0..max_shapes``.

    Args:
        n: Images to draw.
        size: Image side in pixels.
        max_shapes: Most shapes in one image.
        texture_prob: Probability that a shape is textured rather than flat.
        seed: Seeds the generator that draws everything.

    Returns:
        The images with their shape counts, textured counts and edge-pixel counts.
    """
    if n < 0 or max_shapes < 0:
        raise ValueError(f"need n >= 0 and max_shapes >= 0, got n={n}, max_shapes={max_shapes}")
    if not 0.0 <= texture_prob <= 1.0:
        raise ValueError(f"texture_prob must lie in [0, 1], got {texture_prob}")
    rng = np.random.default_rng(seed)
    images = np.empty((n, size, size), dtype=np.float32)
    n_shapes = rng.integers(0, max_shapes + 1, size=n)
    n_textured = np.zeros(n, dtype=np.int64)
    edges = np.zeros(n, dtype=np.int64)
    for i in range(n):
        flags = [bool(f) for f in rng.random(int(n_shapes[i])) < texture_prob]
        images[i] = draw_image(rng, size, flags)
        n_textured[i] = sum(flags)
        edges[i] = edge_pixels(images[i])
    return ShapeImages(images=images, n_shapes=n_shapes.astype(np.int64), n_textured=n_textured, edge_pixels=edges)
