"""The vision images: generated shapes with complexity known by construction, and the bundled digits."""

from __future__ import annotations

import numpy as np
import pytest

from envs.vision.shapes import _contrasting_level, draw_image, edge_pixels, make_shape_images


def test_shape_images_are_reproducible_and_in_range() -> None:
    a = make_shape_images(50, size=16, seed=3)
    b = make_shape_images(50, size=16, seed=3)
    assert np.array_equal(a.images, b.images) and np.array_equal(a.complexity, b.complexity)
    assert a.images.shape == (50, 16, 16) and a.images.dtype == np.float32
    assert float(a.images.min()) >= 0.0 and float(a.images.max()) <= 1.0
    assert not np.array_equal(a.images, make_shape_images(50, size=16, seed=4).images)


def test_complexity_counts_shapes_and_textures() -> None:
    images = make_shape_images(200, max_shapes=6, texture_prob=0.5, seed=0)
    assert np.array_equal(images.complexity, images.n_shapes + images.n_textured)
    assert set(images.n_shapes.tolist()) == set(range(7))
    assert (images.n_textured <= images.n_shapes).all()
    # An image without shapes is one grey level: no edges.
    blank = images.n_shapes == 0
    assert (images.edge_pixels[blank] == 0).all()
    assert all(len(np.unique(img)) == 1 for img in images.images[blank])
    # More shapes, more edges on average (the pixel-level measure follows the known count).
    means = [images.edge_pixels[images.n_shapes == k].mean() for k in range(7)]
    assert means[0] < means[2] < means[6]


def test_every_shape_stands_out_from_the_background() -> None:
    rng = np.random.default_rng(0)
    for background in (0.0, 0.2, 0.5, 0.9, 1.0):
        levels = [_contrasting_level(rng, background) for _ in range(200)]
        assert min(abs(level - background) for level in levels) >= 0.3 - 1e-12
        assert min(levels) >= 0.0 and max(levels) <= 1.0
    one = draw_image(np.random.default_rng(1), 16, [False])
    assert len(np.unique(one)) == 2 and edge_pixels(one) > 0


def test_textured_shapes_add_edges() -> None:
    flat = [edge_pixels(draw_image(np.random.default_rng(s), 16, [False])) for s in range(100)]
    textured = [edge_pixels(draw_image(np.random.default_rng(s), 16, [True])) for s in range(100)]
    assert np.mean(textured) > 1.5 * np.mean(flat)


def test_edge_pixels_by_hand() -> None:
    image = np.zeros((4, 4), dtype=np.float32)
    image[1, 1] = 1.0
    # (1, 1) differs from its right and lower neighbours; (0, 1) from its lower one and (1, 0) from its right one.
    assert edge_pixels(image) == 3


def test_bad_arguments_are_refused_in_one_sentence() -> None:
    with pytest.raises(ValueError, match="texture_prob must lie in"):
        make_shape_images(1, texture_prob=1.5)
    with pytest.raises(ValueError, match="at least 4 pixels"):
        draw_image(np.random.default_rng(0), 3, [])


def test_digits_are_upsampled_into_the_unit_range() -> None:
    pytest.importorskip("sklearn")
    from envs.vision.digits import load_digit_images

    images, labels = load_digit_images(16)
    assert images.shape == (1797, 16, 16) and labels.shape == (1797,)
    assert float(images.min()) >= 0.0 and float(images.max()) <= 1.0
    original, _ = load_digit_images(8)
    assert original.shape == (1797, 8, 8)
    # Bilinear upsampling keeps each image's mean grey level close to the original's.
    assert np.allclose(images.mean(axis=(1, 2)), original.mean(axis=(1, 2)), atol=0.03)
    with pytest.raises(ValueError, match="at least 8 pixels"):
        load_digit_images(4)
