"""The adaptive-length tokenizer: a recurrent encoder that distils 2D patch tokens into a growing set of 1D latent
tokens, and a decoder that reconstructs the image from however many latent tokens it is given.

After Duggal, Isola, Torralba & Freeman, "Adaptive Length Image Tokenization via Recurrent Allocation" (ICLR 2025,
ALIT). Iteration ``t`` (``1..T``) runs one shared Transformer encoder over ``[iteration token, 2D tokens, latents]``,
where the latents are the previous iteration's (updated again here) followed by the new ones this iteration adds
(:func:`meta.tokenizer.config.tokens_after`); its outputs are the refined 2D tokens and the updated latents fed to
iteration ``t + 1``. A new latent starts from a learned vector of its slot plus its own linear read of the whole image.
Each latent is projected to a few channels and quantized with finite scalar quantization, so a token is one of
``prod(fsq_levels)`` codes and more tokens carry more information. The decoder, an MLP, reads every token in its own
slot with a flag saying the slot is filled (empty slots are zero), so the reconstruction from the tokens of every
iteration, and from any prefix of them, comes from one network.

Training minimizes the mean over iterations of the reconstruction MSE, so every token count is a usable code; how many
iterations one image gets is a separate decision, made by a halting controller (:mod:`meta.tokenizer.halting`).
"""

from __future__ import annotations

import torch
from torch import nn

from meta.tokenizer.config import TokenizerConfig

__all__ = ["AdaptiveTokenizer", "fsq"]


def fsq(z: torch.Tensor, levels: list[int]) -> torch.Tensor:
    """Finite scalar quantization of the last axis: channel ``i`` bounded by ``tanh`` to ``(L_i - 1) / 2`` grid steps
    either side of 0, rounded, and scaled back into ``[-1, 1]``; the straight-through estimator passes gradients.

    Args:
        z: ``(..., len(levels))`` unbounded values.
        levels: Odd level counts, one per channel.

    Returns:
        ``(..., len(levels))`` values on the grid ``{-1, ..., 1}`` of ``L_i`` points per channel.
    """
    half = torch.tensor([(level - 1) / 2.0 for level in levels], dtype=z.dtype, device=z.device)
    bounded = torch.tanh(z) * half
    rounded = bounded + (torch.round(bounded) - bounded).detach()
    return rounded / half


def _transformer(config: TokenizerConfig, layers: int) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(
        config.d_model,
        config.n_heads,
        dim_feedforward=config.ff_mult * config.d_model,
        dropout=0.0,
        activation="gelu",
        batch_first=True,
        norm_first=True,
    )
    # The nested-tensor fast path is for inference with padding masks; we pass none, and it warns with norm_first.
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


class AdaptiveTokenizer(nn.Module):
    """The recurrent encoder-decoder; images are ``(batch, image_size, image_size)`` grey levels in ``[0, 1]``.

    Args:
        config: Sizes of the network and of the token schedule.
    """

    def __init__(self, config: TokenizerConfig) -> None:
        super().__init__()
        self.config = config
        d, p2 = config.d_model, config.patch_size**2
        self.patch_embed = nn.Linear(p2, d)
        self.patch_pos = nn.Parameter(torch.randn(config.n_patches, d) * 0.02)
        # The learned start of each latent slot: iteration t appends slots [tokens_after(t - 1), tokens_after(t)).
        self.new_latents = nn.Parameter(torch.randn(config.max_tokens, d) * 0.02)
        # Each new slot also starts from its own linear read of the whole image, so that a latent carries image
        # content before attention has learned where to look (attention alone starts at the image's mean and learns
        # slowly on a CPU budget).
        self.image_to_slots = nn.Linear(config.image_size**2, config.max_tokens * d)
        # One token per iteration tells the shared encoder which iteration it is running.
        self.iteration_tokens = nn.Parameter(torch.randn(config.iterations, d) * 0.02)
        self.encoder = _transformer(config, config.encoder_layers)
        self.encoder_norm = nn.LayerNorm(d)
        self.to_latent = nn.Linear(d, config.channels)
        hidden, pixels = config.decoder_hidden, config.image_size**2
        self.decoder = nn.Sequential(
            nn.Linear(config.max_tokens * (config.channels + 1), hidden),
            nn.GELU(),
            nn.Linear(hidden, hidden),
            nn.GELU(),
            nn.Linear(hidden, pixels),
        )

    # ------------------------------------------------------------------------------------------------- patches
    def patchify(self, images: torch.Tensor) -> torch.Tensor:
        """``(B, S, S)`` images -> ``(B, P, p*p)`` patches in row-major patch order."""
        b, p = images.shape[0], self.config.patch_size
        g = self.config.image_size // p
        return images.reshape(b, g, p, g, p).permute(0, 1, 3, 2, 4).reshape(b, g * g, p * p)

    def unpatchify(self, patches: torch.Tensor) -> torch.Tensor:
        """``(B, P, p*p)`` patches -> ``(B, S, S)`` images (the inverse of :meth:`patchify`)."""
        b, p = patches.shape[0], self.config.patch_size
        g = self.config.image_size // p
        return patches.reshape(b, g, g, p, p).permute(0, 1, 3, 2, 4).reshape(b, g * p, g * p)

    # ---------------------------------------------------------------------------------------------- encoding
    def quantize(self, latents: torch.Tensor) -> torch.Tensor:
        """Encoder states ``(B, n, d)`` -> latent tokens ``(B, n, channels)`` (quantized unless ``fsq_levels`` is
        empty)."""
        z = self.to_latent(self.encoder_norm(latents))
        return fsq(z, self.config.fsq_levels) if self.config.fsq_levels else z

    def encode(self, images: torch.Tensor, iterations: int | None = None) -> list[torch.Tensor]:
        """Run the recurrence for ``iterations`` iterations (default ``T``).

        Args:
            images: ``(B, S, S)`` grey levels in ``[0, 1]``.
            iterations: How many iterations to run, ``1..T``.

        Returns:
            One ``(B, n_t, channels)`` tensor of latent tokens per iteration, ``n_t = tokens_after(t)``.
        """
        cfg = self.config
        iterations = cfg.iterations if iterations is None else iterations
        if not 1 <= iterations <= cfg.iterations:
            raise ValueError(f"iterations must lie in 1..{cfg.iterations}, got {iterations}")
        b = images.shape[0]
        grid = self.patch_embed(self.patchify(images) - 0.5) + self.patch_pos
        latents = images.new_zeros(b, 0, cfg.d_model)
        starts = self.new_latents + self.image_to_slots(images.flatten(1) - 0.5).view(b, cfg.max_tokens, cfg.d_model)
        counts = cfg.token_counts()
        codes: list[torch.Tensor] = []
        for t in range(iterations):
            start = counts[t - 1] if t > 0 else 0
            fresh = starts[:, start : counts[t]]
            step = self.iteration_tokens[t].expand(b, 1, -1)
            out = self.encoder(torch.cat([step, grid, latents, fresh], dim=1))
            grid, latents = out[:, 1 : 1 + cfg.n_patches], out[:, 1 + cfg.n_patches :]
            codes.append(self.quantize(latents))
        return codes

    # ---------------------------------------------------------------------------------------------- decoding
    def decoder_input(self, tokens: torch.Tensor) -> torch.Tensor:
        """``(B, m, channels)`` tokens -> ``(B, max_tokens * (channels + 1))``: each token in its own slot with a flag
        saying it is present, the slots past ``m`` zero (so a prefix of any length is a valid input)."""
        b, m, c = tokens.shape
        if not 1 <= m <= self.config.max_tokens:
            raise ValueError(f"the decoder reads 1..{self.config.max_tokens} latent tokens, got {m}")
        slots = tokens.new_zeros(b, self.config.max_tokens, c + 1)
        slots[:, :m, :c] = tokens
        slots[:, :m, c] = 1.0
        return slots.flatten(1)

    def decode(self, tokens: torch.Tensor) -> torch.Tensor:
        """Reconstruct images from latent tokens.

        Args:
            tokens: ``(B, m, channels)`` latent tokens, ``1 <= m <= max_tokens``: the tokens of an iteration or any
                prefix of them.

        Returns:
            ``(B, S, S)`` reconstructions in ``[0, 1]``.
        """
        size = self.config.image_size
        return torch.sigmoid(self.decoder(self.decoder_input(tokens))).reshape(-1, size, size)

    def forward(self, images: torch.Tensor, iterations: int | None = None) -> torch.Tensor:
        """Reconstructions after each iteration: ``(iterations, B, S, S)`` (decoded in one batch)."""
        codes = self.encode(images, iterations)
        size = self.config.image_size
        flat = torch.cat([self.decoder_input(tokens) for tokens in codes])
        return torch.sigmoid(self.decoder(flat)).reshape(len(codes), images.shape[0], size, size)

    def loss(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Training loss: the reconstruction MSE averaged over images, pixels and all ``T`` iterations.

        Returns:
            ``(loss, per_iteration)``: the scalar loss and the ``(T,)`` MSE of each iteration (detached).
        """
        errors = ((self(images) - images.unsqueeze(0)) ** 2).mean(dim=(1, 2, 3))
        return errors.mean(), errors.detach()

    @torch.no_grad()
    def reconstruction_errors(self, images: torch.Tensor) -> torch.Tensor:
        """Per-image reconstruction MSE after every iteration, ``(B, T)`` (the halting controllers' feedback)."""
        return ((self(images) - images.unsqueeze(0)) ** 2).mean(dim=(2, 3)).T
