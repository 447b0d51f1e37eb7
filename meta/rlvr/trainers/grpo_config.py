"""Settings of the compact GRPO trainer (:class:`~meta.rlvr.trainers.grpo.GRPOTrainer`): :class:`GRPOConfig` and the
names of the loss normalisers (:func:`meta.rlvr.trainers.grpo_loss.loss_normaliser`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LossKind = Literal["sequence", "dapo", "dr_grpo"]
LOSS_KINDS: tuple[str, ...] = ("sequence", "dapo", "dr_grpo")


@dataclass
class GRPOConfig:
    """Trainer settings.

    The update defaults, ``minibatches=4`` and ``epochs=1``, make four optimizer steps per generated batch, each on a
    quarter of it (with the default 16 prompts, four groups per minibatch), and use every sample once. That is the
    regime real GRPO/DAPO trainers run in: DAPO splits each 512-prompt rollout batch into 16 mini-batches of 32
    prompts, and TRL exposes it as ``steps_per_generation``, both with one pass (``num_iterations=1``). Why not one
    step per batch (the earlier default): the ratio is then exactly 1, so clip-higher and BAPO's bounds never act and
    the "clipped surrogate" is a plain policy gradient. Why not more passes: every extra pass re-fits the same batch
    and makes later steps more off-policy; one pass keeps the staleness at most ``minibatches − 1`` optimizer steps,
    which the clip range is meant for. Each minibatch's loss uses the batch normaliser divided by the number of
    minibatches, so with one minibatch and one pass this is exactly the single full-batch step (bit for bit the
    trainer's update before minibatches existed).

    The learning rate goes with the schedule: AdamW moves the weights by about ``lr`` per optimizer step whatever the
    gradient's scale, so four steps per batch move the policy about four times as far per generated batch as one.
    The default ``lr=1e-4`` is sized for four steps; at 3e-4 (the rate tuned for one step per batch, which the
    benchmark keeps with ``minibatches=1``) the character model overshoots and its held-out accuracy falls back
    within the slow "it learns" test's 75 steps. Scale ``lr`` with ``1/minibatches`` when changing the schedule.

    Attributes:
        prompts_per_step: Prompts (groups) per step.
        max_new_tokens: Most tokens per response (EOS included); also Dr. GRPO's constant normaliser per response.
        temperature: Sampling temperature (a temperature controller may change it).
        lr: AdamW learning rate per optimizer step (see above for the default).
        advantage: ``"grpo"`` (std-normalised) or ``"dr_grpo"`` (mean-centred only).
        loss: ``"sequence"`` (per-sequence mean, GRPO), ``"dapo"`` (token-level, DAPO) or ``"dr_grpo"`` (token sum over
            the constant ``max_new_tokens × responses``); ``None`` picks ``"dr_grpo"`` for ``advantage="dr_grpo"``
            (Dr. GRPO removes both the std and the length normalisation) and ``"dapo"`` otherwise.
        clip_low: ``ε_low``, in ``[0, 1]``.
        clip_high: ``ε_high`` (clip-higher when larger than ``ε_low``), ``>= 0``.
        kl_coef: ``β`` of the KL penalty to the initial policy (0 disables it and the reference copy).
        minibatches: Optimizer steps per pass over a generated batch; the batch's learning rows are split into this
            many contiguous minibatches (fewer if it has fewer rows). See above for the default.
        epochs: Passes over each generated batch (TRL's ``num_iterations``, PPO's epochs).
        max_grad_norm: Gradient clipping.
        reuse_capacity: Correct responses kept per prompt when the allocator asks for reuse.
        seed: Seed for prompt order and sampling.
        device: Where the policy (and the KL reference) runs and trains: ``cpu`` (the default, the tested path of
            every committed result), ``cuda``, ``cuda:N`` or ``auto`` (:func:`rolloutlab.device.resolve_device`).
            The trainer moves the model there. Tokens are still drawn from the trainer's CPU generator, so the
            sampling stream, and the checkpointed generator state, do not depend on the device.
    """

    prompts_per_step: int = 16
    max_new_tokens: int = 8
    temperature: float = 1.0
    lr: float = 1e-4
    advantage: Literal["grpo", "dr_grpo"] = "grpo"
    loss: LossKind | None = None
    clip_low: float = 0.2
    clip_high: float = 0.28
    kl_coef: float = 0.0
    minibatches: int = 4
    epochs: int = 1
    max_grad_norm: float = 1.0
    reuse_capacity: int = 4
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.advantage not in ("grpo", "dr_grpo"):
            raise ValueError(f"advantage must be 'grpo' or 'dr_grpo', got {self.advantage!r}")
        if self.loss is not None and self.loss not in LOSS_KINDS:
            raise ValueError(f"loss must be one of {list(LOSS_KINDS)} or None, got {self.loss!r}")
        for name in ("prompts_per_step", "max_new_tokens", "minibatches", "epochs", "reuse_capacity"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.clip_low <= 1.0 or self.clip_high < 0.0:
            raise ValueError(f"need 0 <= clip_low <= 1 and clip_high >= 0, got {self.clip_low}, {self.clip_high}")
        if self.lr <= 0 or self.kl_coef < 0 or self.max_grad_norm <= 0 or self.temperature < 0:
            raise ValueError("need lr > 0, kl_coef >= 0, max_grad_norm > 0 and temperature >= 0")

    @property
    def loss_kind(self) -> str:
        """The loss normaliser in effect (``loss``, or the advantage's own when ``loss`` is ``None``)."""
        if self.loss is not None:
            return self.loss
        return "dr_grpo" if self.advantage == "dr_grpo" else "dapo"
