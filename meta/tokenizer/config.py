"""Typed configuration of the adaptive-length tokenizer: the network (:class:`TokenizerConfig`) and a training run
(:class:`TrainConfig`)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["TokenizerConfig", "TrainConfig", "tokens_after"]


def tokens_after(iteration: int, initial_tokens: int, tokens_per_iteration: int) -> int:
    """Latent tokens held after ``iteration`` recurrent iterations (1-based): the first adds ``initial_tokens``, each
    later one ``tokens_per_iteration`` (ALIT: 32, then 32 more per iteration up to 256)."""
    if iteration < 1:
        raise ValueError(f"iterations are counted from 1, got {iteration}")
    return initial_tokens + (iteration - 1) * tokens_per_iteration


@dataclass
class TokenizerConfig:
    """The recurrent encoder-decoder.

    Attributes:
        image_size: Side of the square greyscale images, in pixels.
        patch_size: Side of one patch; the image is ``(image_size / patch_size)^2`` 2D tokens.
        d_model: Width of every token.
        n_heads: Attention heads.
        ff_mult: Width of each Transformer layer's feed-forward block, in multiples of ``d_model``.
        encoder_layers: Transformer layers of the encoder (shared by every iteration: the recurrence).
        decoder_hidden: Width of the decoder's two hidden layers.
        iterations: Most recurrent iterations, ``T``.
        initial_tokens: Latent tokens the first iteration creates.
        tokens_per_iteration: Latent tokens each later iteration adds.
        fsq_levels: Levels of each channel of a latent token's finite scalar quantization (Mentzer et al. 2023), all
            odd; a token is one of ``prod(fsq_levels)`` codes. An empty list keeps latents continuous (no bottleneck
            beyond their ``latent_channels``).
        latent_channels: Channels of a continuous latent (used only when ``fsq_levels`` is empty).
    """

    image_size: int = 16
    patch_size: int = 4
    d_model: int = 64
    n_heads: int = 4
    ff_mult: int = 2
    encoder_layers: int = 2
    decoder_hidden: int = 256
    iterations: int = 8
    initial_tokens: int = 2
    tokens_per_iteration: int = 2
    fsq_levels: list[int] = field(default_factory=lambda: [5, 5, 5])
    latent_channels: int = 3

    def __post_init__(self) -> None:
        if self.image_size < 1 or self.patch_size < 1 or self.image_size % self.patch_size:
            raise ValueError(
                f"image_size must be a positive multiple of patch_size, got image_size={self.image_size}, "
                f"patch_size={self.patch_size}"
            )
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model must be a multiple of n_heads, got d_model={self.d_model}, n_heads={self.n_heads}"
            )
        if self.iterations < 1 or self.initial_tokens < 1 or self.tokens_per_iteration < 0:
            raise ValueError(
                "need iterations >= 1, initial_tokens >= 1 and tokens_per_iteration >= 0, got "
                f"{self.iterations}, {self.initial_tokens}, {self.tokens_per_iteration}"
            )
        if any(level < 3 or level % 2 == 0 for level in self.fsq_levels):
            raise ValueError(f"fsq_levels must be odd numbers >= 3, got {self.fsq_levels}")
        if not self.fsq_levels and self.latent_channels < 1:
            raise ValueError(f"latent_channels must be >= 1, got {self.latent_channels}")

    @property
    def n_patches(self) -> int:
        """2D tokens per image."""
        return (self.image_size // self.patch_size) ** 2

    @property
    def channels(self) -> int:
        """Channels of one latent token."""
        return len(self.fsq_levels) if self.fsq_levels else self.latent_channels

    @property
    def max_tokens(self) -> int:
        """Latent tokens after the last iteration."""
        return tokens_after(self.iterations, self.initial_tokens, self.tokens_per_iteration)

    def token_counts(self) -> list[int]:
        """Latent tokens after each iteration ``1..T``."""
        return [tokens_after(t, self.initial_tokens, self.tokens_per_iteration) for t in range(1, self.iterations + 1)]


@dataclass
class TrainConfig:
    """One training run of the tokenizer on generated shapes and bundled digits.

    Attributes:
        seed: Seeds the network's initialization and the batch draws (the image sets do not depend on it).
        steps: Gradient steps.
        batch_size: Images per step.
        lr: Peak AdamW learning rate (linear warm-up over ``warmup_steps``, then a cosine decay to a tenth).
        warmup_steps: Steps of linear warm-up.
        weight_decay: AdamW weight decay.
        grad_clip: Global gradient-norm clip.
        shape_images: Generated shape images in the training set.
        digit_images: Bundled digits in the training set (the rest, up to 1797, are held out); 0 trains on shapes only
            (and needs no scikit-learn).
        max_shapes: Most shapes in one generated image.
        texture_prob: Probability that a generated shape is textured.
        checkpoint_every: Save a checkpoint every this many steps (with a run directory).
        log_every: Log the training MSE of every iteration every this many steps.
        max_minutes: Wall-clock cap; the run stops early (and says so). ``None``: no cap.
        model: The network.
    """

    seed: int = 0
    steps: int = 2000
    batch_size: int = 64
    lr: float = 2e-3
    warmup_steps: int = 100
    weight_decay: float = 1e-4
    grad_clip: float = 1.0
    shape_images: int = 8000
    digit_images: int = 1200
    max_shapes: int = 6
    texture_prob: float = 0.3
    checkpoint_every: int = 200
    log_every: int = 25
    max_minutes: float | None = None
    model: TokenizerConfig = field(default_factory=TokenizerConfig)

    def __post_init__(self) -> None:
        if min(self.steps, self.batch_size, self.checkpoint_every, self.log_every) < 1:
            raise ValueError(
                f"need steps, batch_size, checkpoint_every and log_every >= 1, got {self.steps}, {self.batch_size}, "
                f"{self.checkpoint_every}, {self.log_every}"
            )
        if self.shape_images < 0 or not 0 <= self.digit_images < 1797 or self.shape_images + self.digit_images < 1:
            raise ValueError(
                "need shape_images >= 0, 0 <= digit_images < 1797 (some digits are held out) and at least one image, "
                f"got shape_images={self.shape_images}, digit_images={self.digit_images}"
            )
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise ValueError(f"max_minutes must be > 0 or None, got {self.max_minutes}")
