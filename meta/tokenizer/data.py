"""The tokenizer's image sets: generated shapes and bundled digits, split once into training and held-out images.

The sets do not depend on a run's seed, so every run trains on the same images and is evaluated on the same held-out
ones: training shapes are drawn with :data:`TRAIN_SHAPES_SEED`, held-out shapes with :data:`HELD_OUT_SHAPES_SEED`, and
the 1797 digits are split by one fixed permutation (:data:`DIGIT_SPLIT_SEED`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from envs.vision.shapes import ShapeImages, make_shape_images
from meta.tokenizer.config import TrainConfig

__all__ = ["DIGIT_SPLIT_SEED", "HELD_OUT_SHAPES_SEED", "TRAIN_SHAPES_SEED", "HeldOut", "held_out", "training_images"]

TRAIN_SHAPES_SEED = 0
HELD_OUT_SHAPES_SEED = 1_000_003
DIGIT_SPLIT_SEED = 12_345


def _digit_split(config: TrainConfig) -> tuple[np.ndarray, np.ndarray]:
    """``(train, held_out)`` digit images: the first ``digit_images`` of a fixed permutation, and the rest."""
    from envs.vision.digits import load_digit_images

    images, _ = load_digit_images(config.model.image_size)
    order = np.random.default_rng(DIGIT_SPLIT_SEED).permutation(len(images))
    return images[order[: config.digit_images]], images[order[config.digit_images :]]


def training_images(config: TrainConfig) -> np.ndarray:
    """The training set, ``(N, S, S)`` float32 in ``[0, 1]``: ``shape_images`` shapes then ``digit_images`` digits."""
    shapes = make_shape_images(
        config.shape_images, config.model.image_size, config.max_shapes, config.texture_prob, seed=TRAIN_SHAPES_SEED
    ).images
    if config.digit_images == 0:
        return shapes
    digits, _ = _digit_split(config)
    return np.concatenate([shapes, digits])


@dataclass(frozen=True)
class HeldOut:
    """Held-out images of both sources.

    Attributes:
        shapes: Generated shapes with their known complexity.
        digits: ``(M, S, S)`` digits not in the training set (``(0, S, S)`` when digits are not used).
    """

    shapes: ShapeImages
    digits: np.ndarray


def held_out(config: TrainConfig, n_shapes: int, with_digits: bool = True) -> HeldOut:
    """``n_shapes`` fresh shape images (drawn like the training ones, another seed) and the held-out digits."""
    size = config.model.image_size
    shapes = make_shape_images(n_shapes, size, config.max_shapes, config.texture_prob, seed=HELD_OUT_SHAPES_SEED)
    digits = _digit_split(config)[1] if with_digits else np.zeros((0, size, size), dtype=np.float32)
    return HeldOut(shapes=shapes, digits=digits)
