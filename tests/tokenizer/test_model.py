"""The recurrent encoder-decoder: patch geometry, finite scalar quantization, the token schedule of the recurrence,
and decoding from any number of latent tokens."""

from __future__ import annotations

import pytest
import torch

from meta.tokenizer.config import TokenizerConfig
from meta.tokenizer.model import AdaptiveTokenizer, fsq

TINY = TokenizerConfig(
    image_size=8, patch_size=4, d_model=16, n_heads=2, encoder_layers=1, decoder_hidden=32, iterations=3
)


def test_patchify_is_row_major_and_inverted_by_unpatchify() -> None:
    model = AdaptiveTokenizer(TokenizerConfig(image_size=4, patch_size=2, d_model=8, n_heads=2, iterations=1))
    image = torch.arange(16.0).reshape(1, 4, 4)
    patches = model.patchify(image)
    # Patch 0 is the top-left 2x2 block, patch 1 the top-right one.
    assert patches[0, 0].tolist() == [0.0, 1.0, 4.0, 5.0]
    assert patches[0, 1].tolist() == [2.0, 3.0, 6.0, 7.0]
    assert patches[0, 3].tolist() == [10.0, 11.0, 14.0, 15.0]
    assert torch.equal(model.unpatchify(patches), image)


def test_fsq_rounds_to_the_level_grid_and_passes_gradients() -> None:
    z = torch.tensor([[0.0, 0.3, 10.0]], requires_grad=True)
    q = fsq(z, [3, 5, 5])
    # Channel 1 of 5 levels: tanh(0.3) * 2 = 0.583 rounds to 1, scaled by 1/2 to 0.5; channel 2 saturates at 1.
    assert q.tolist() == [[0.0, 0.5, 1.0]]
    q.sum().backward()
    assert z.grad is not None and (z.grad[0, :2] > 0).all()


def test_each_iteration_holds_the_scheduled_number_of_tokens() -> None:
    torch.manual_seed(0)
    model = AdaptiveTokenizer(TINY).eval()
    codes = model.encode(torch.rand(5, 8, 8))
    assert [tuple(c.shape) for c in codes] == [(5, 2, 3), (5, 4, 3), (5, 6, 3)]
    # Every token is one of the 5x5x5 codes: each channel on the grid {-1, -0.5, 0, 0.5, 1}.
    assert torch.all(torch.isin(torch.cat([c.flatten() for c in codes]), torch.tensor([-1.0, -0.5, 0.0, 0.5, 1.0])))
    assert len(model.encode(torch.rand(5, 8, 8), iterations=2)) == 2
    with pytest.raises(ValueError, match=r"iterations must lie in 1\.\.3, got 4"):
        model.encode(torch.rand(1, 8, 8), iterations=4)


def test_the_decoder_reads_any_prefix_of_tokens() -> None:
    torch.manual_seed(0)
    model = AdaptiveTokenizer(TINY).eval()
    tokens = model.encode(torch.rand(2, 8, 8))[-1]
    for m in range(1, 7):
        out = model.decode(tokens[:, :m])
        assert out.shape == (2, 8, 8) and bool(((out >= 0) & (out <= 1)).all())
    with pytest.raises(ValueError, match=r"reads 1\.\.6 latent tokens, got 7"):
        model.decode(torch.zeros(1, 7, 3))


def test_reconstruction_errors_have_one_column_per_iteration() -> None:
    torch.manual_seed(0)
    model = AdaptiveTokenizer(TINY)
    images = torch.rand(4, 8, 8)
    errors = model.reconstruction_errors(images)
    assert errors.shape == (4, 3)
    loss, per_iteration = model.loss(images)
    # The loss averages the per-image errors over images and iterations.
    assert torch.allclose(per_iteration, errors.mean(dim=0), atol=1e-6)
    assert torch.allclose(loss, errors.mean(), atol=1e-6)


def test_bad_sizes_are_refused_in_one_sentence() -> None:
    with pytest.raises(ValueError, match="image_size must be a positive multiple of patch_size"):
        TokenizerConfig(image_size=10, patch_size=4)
    with pytest.raises(ValueError, match="fsq_levels must be odd numbers >= 3"):
        TokenizerConfig(fsq_levels=[4, 5])
