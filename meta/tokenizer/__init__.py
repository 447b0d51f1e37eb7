"""An adaptive-length image tokenizer (after ALIT, Duggal et al., ICLR 2025): a recurrent encoder-decoder that gives
each image as many latent tokens as it needs, the count decided by a halting controller.

Modules: :mod:`.config` (typed configs, the token schedule), :mod:`.model` (the recurrent encoder-decoder, torch),
:mod:`.halting` (fixed, error-threshold and learned halting controllers, numpy only), :mod:`.data` (training and
held-out images), :mod:`.evaluate` (error curves, features, budget matching), :mod:`.trainer` (training with
checkpoints that resume exactly), :mod:`.cli` (``rolloutlab tokenizer``).

``import meta.tokenizer`` needs numpy only; the torch modules are imported by name.
"""

from __future__ import annotations

from meta.tokenizer.config import TokenizerConfig, TrainConfig, tokens_after
from meta.tokenizer.halting import (
    CountPredictor,
    ErrorThreshold,
    FixedCount,
    HaltingController,
    LearnedCount,
    halting_iterations,
    make_halting,
)

__all__ = [
    "CountPredictor",
    "ErrorThreshold",
    "FixedCount",
    "HaltingController",
    "LearnedCount",
    "TokenizerConfig",
    "TrainConfig",
    "halting_iterations",
    "make_halting",
    "tokens_after",
]
