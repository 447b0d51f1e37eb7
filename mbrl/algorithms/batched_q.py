"""Q-networks and an Adam optimizer batched over independent runs.

``B`` independent DQN learners share one set of tensors: every weight has shape ``[B, in, out]`` and is applied with
one batched matmul (the same :class:`~mbrl.models.gaussian_ensemble.EnsembleLinear` the world-model ensemble uses,
with runs in place of members). Each run's loss only touches its own slice, so gradients stay independent; what
would couple the runs is anything computed over all parameters at once. Hence a per-run gradient-norm clip and a
per-run Adam (its own step counter and an update mask, so a run that skips an update is left exactly as it was, moments
included, which ``torch.optim.Adam`` with a zero gradient would not do).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from mbrl.models.gaussian_ensemble import EnsembleLinear


class BatchedQNetwork(nn.Module):
    """``B`` ReLU MLPs ``obs -> Q(obs, .)`` (SB3's DQN ``MlpPolicy`` architecture), one per run.

    Args:
        num_runs: ``B``.
        obs_dim: Observation width.
        num_actions: Number of discrete actions.
        net_arch: Hidden layer widths (rl-zoo: ``[256, 256]``).
        seeds: One seed per run for the initialization, so run ``i`` starts the same whatever ``B`` is.
    """

    def __init__(self, num_runs: int, obs_dim: int, num_actions: int, net_arch: Sequence[int], seeds: Sequence[int]):
        super().__init__()
        if len(seeds) != num_runs:
            raise ValueError(f"need one seed per run, got {len(seeds)} for {num_runs} runs")
        widths = [obs_dim, *net_arch, num_actions]
        self.layers = nn.ModuleList(EnsembleLinear(num_runs, a, b) for a, b in itertools.pairwise(widths))
        with torch.no_grad():  # torch.nn.Linear's default init, drawn per run from that run's own generator
            for run, seed in enumerate(seeds):
                generator = torch.Generator().manual_seed(int(seed))
                for layer in self.linears():
                    bound = 1.0 / math.sqrt(layer.weight.shape[1])
                    layer.weight[run].uniform_(-bound, bound, generator=generator)
                    layer.bias[run].uniform_(-bound, bound, generator=generator)

    def linears(self) -> list[EnsembleLinear]:
        """The layers, typed."""
        return [cast(EnsembleLinear, layer) for layer in self.layers]

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Q-values ``[B, N, num_actions]`` for observations ``[B, N, obs_dim]``."""
        h = obs
        for layer in self.layers[:-1]:
            h = F.relu(layer(h))
        return self.layers[-1](h)

    def forward_run(self, run: int, obs: torch.Tensor) -> torch.Tensor:
        """Q-values ``[N, num_actions]`` of run ``run`` alone, for observations ``[N, obs_dim]``."""
        h = obs
        last = len(self.layers) - 1
        for i, layer in enumerate(self.linears()):
            h = torch.addmm(layer.bias[run], h, layer.weight[run])
            if i < last:
                h = F.relu(h)
        return h


def clip_grad_norm_per_run(params: Sequence[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale each run's gradients so that their joint L2 norm is at most ``max_norm`` (``clip_grad_norm_`` per run).

    Returns:
        The per-run norms before clipping, ``[B]``.
    """
    grads = [p.grad for p in params if p.grad is not None]
    num_runs = grads[0].shape[0]
    total = torch.zeros(num_runs, dtype=grads[0].dtype)
    for g in grads:
        total += g.pow(2).reshape(num_runs, -1).sum(dim=1)
    norms = total.sqrt()
    coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.view(-1, *([1] * (g.dim() - 1))))
    return norms


class BatchedAdam:
    """Adam (Kingma & Ba 2015, as in ``torch.optim.Adam``) over parameters whose first axis indexes runs.

    Args:
        params: Tensors of shape ``[B, ...]``.
        lr: Learning rate.
        betas: Moment decay rates.
        eps: Denominator epsilon.
    """

    def __init__(
        self, params: Sequence[torch.Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8
    ) -> None:
        self.params = list(params)
        self.lr, self.betas, self.eps = float(lr), betas, float(eps)
        num_runs = self.params[0].shape[0]
        self.steps = torch.zeros(num_runs, dtype=torch.float64)
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self) -> None:
        """Drop every gradient."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, mask: torch.Tensor | None = None) -> None:
        """One Adam update of the runs selected by ``mask`` (``[B]`` bool; ``None`` = all runs)."""
        beta1, beta2 = self.betas
        if mask is None:
            self.steps += 1
        else:
            self.steps += mask.double()
        if mask is None and bool((self.steps == self.steps[0]).all()):
            self._step_shared(int(self.steps[0]))
            return
        steps = self.steps.clamp(min=1)
        bias1 = (1 - beta1**steps).float()
        bias2_sqrt = (1 - beta2**steps).sqrt().float()
        for p, m, v in zip(self.params, self.exp_avg, self.exp_avg_sq, strict=True):
            if p.grad is None:
                continue
            shape = (-1, *([1] * (p.dim() - 1)))
            new_m = m * beta1 + p.grad * (1 - beta1)
            new_v = v * beta2 + p.grad * p.grad * (1 - beta2)
            denom = new_v.sqrt() / bias2_sqrt.view(shape) + self.eps
            update = (self.lr / bias1).view(shape) * new_m / denom
            if mask is None:
                m.copy_(new_m)
                v.copy_(new_v)
                p.sub_(update)
            else:
                keep = mask.view(shape)
                m.copy_(torch.where(keep, new_m, m))
                v.copy_(torch.where(keep, new_v, v))
                p.sub_(torch.where(keep, update, torch.zeros_like(update)))

    def _step_shared(self, step: int) -> None:
        # Every run at the same step count (the common case): torch.optim.Adam's in-place arithmetic, scalar biases.
        beta1, beta2 = self.betas
        bias1 = 1 - beta1**step
        bias2_sqrt = (1 - beta2**step) ** 0.5
        for p, m, v in zip(self.params, self.exp_avg, self.exp_avg_sq, strict=True):
            if p.grad is None:
                continue
            m.lerp_(p.grad, 1 - beta1)
            v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
            denom = (v.sqrt() / bias2_sqrt).add_(self.eps)
            p.addcdiv_(m, denom, value=-self.lr / bias1)

    def state_dict(self) -> dict[str, Any]:
        """Moments and step counters as tensors."""
        return {
            "steps": self.steps.clone(),
            "exp_avg": [m.clone() for m in self.exp_avg],
            "exp_avg_sq": [v.clone() for v in self.exp_avg_sq],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a snapshot made by :meth:`state_dict`."""
        self.steps = state["steps"].clone()
        for m, saved in zip(self.exp_avg, state["exp_avg"], strict=True):
            m.copy_(saved)
        for v, saved in zip(self.exp_avg_sq, state["exp_avg_sq"], strict=True):
            v.copy_(saved)
