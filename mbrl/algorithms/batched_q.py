"""Q-networks and an Adam optimizer batched over independent runs.

``B`` independent DQN learners share one set of tensors: every weight has shape ``[B, in, out]`` and is applied with
one batched matmul (the same :class:`~mbrl.models.gaussian_ensemble.EnsembleLinear` the world-model ensemble uses,
with runs in place of members). Each run's loss only touches its own slice, so gradients stay independent; what
would couple the runs is anything computed over all parameters at once. Hence a per-run gradient-norm clip and a
per-run Adam (its own step counter and an update mask, so a run that skips an update is left exactly as it was, moments
included, which ``torch.optim.Adam`` with a zero gradient would not do).

Independence is bitwise, not just mathematical: for a fixed ``B`` (and thread count), run ``i``'s Q-values, gradients,
clipped gradients, parameters and Adam moments are bit-identical whatever the other runs' weights, inputs, gradients,
masks and step counts are. Every op involved is either elementwise, a per-slice batched matmul, or a reduction within
one run's slice, and :meth:`BatchedAdam.step` takes one arithmetic path for every mask and every mix of step counts
(``torch.optim.Adam``'s single-tensor update with per-run bias corrections; with torch 2.13 each run's slice comes out
bit-identical to ``torch.optim.Adam(foreach=False)`` stepping that run alone, which the tests check). What is *not*
promised is equality across different ``B`` for the matmuls and reductions (kernels may be chosen by shape), or between
:meth:`BatchedQNetwork.forward` and :meth:`BatchedQNetwork.forward_run`, which use different kernels (``baddbmm`` vs
``addmm``) and may differ in the last bits.
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

    @torch.no_grad()
    def copy_runs_from(self, source: BatchedQNetwork, runs: torch.Tensor) -> None:
        """Copy the weights of the runs selected by ``runs`` (``[B]`` bool) from ``source`` (a target-network sync
        for those runs only; the others keep theirs)."""
        for mine, theirs in zip(self.parameters(), source.parameters(), strict=True):
            selected = runs.to(mine.device)
            mine[selected] = theirs.detach()[selected]


def clip_grad_norm_per_run(params: Sequence[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale each run's gradients so that their joint L2 norm is at most ``max_norm`` (``clip_grad_norm_`` per run).

    Returns:
        The per-run norms before clipping, ``[B]``.
    """
    grads = [p.grad for p in params if p.grad is not None]
    num_runs = grads[0].shape[0]
    total = torch.zeros(num_runs, dtype=grads[0].dtype, device=grads[0].device)
    for g in grads:
        total += g.pow(2).reshape(num_runs, -1).sum(dim=1)
    norms = total.sqrt()
    coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.view(-1, *([1] * (g.dim() - 1))))
    return norms


class BatchedAdam:
    """Adam (Kingma & Ba 2015, as in ``torch.optim.Adam``) over parameters whose first axis indexes runs.

    Each run has its own step count (``steps``, ``[B]`` float64, kept on the CPU whatever the parameters' device: the
    bias corrections are computed from it in Python), so runs that skipped updates get their own bias corrections.
    The update is elementwise with per-run scalars, which makes run ``i``'s trajectory independent of the other runs
    bit for bit (see :meth:`step`).

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
        # Scratch space for the denominator and the scaled first moment, so a step allocates no parameter-sized
        # temporaries: measured, their cost (allocator, page faults) ranged from nil to several times the arithmetic.
        self._denom = [torch.empty_like(p) for p in self.params]
        self._scaled = [torch.empty_like(p) for p in self.params]

    def zero_grad(self) -> None:
        """Drop every gradient."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, mask: torch.Tensor | None = None) -> None:
        """One Adam update of the runs selected by ``mask``; the others are left exactly as they were.

        Every call takes the same arithmetic path, whatever the mask and the runs' step counts: ``torch.optim.Adam``'s
        single-tensor update (``lerp_``, ``mul_``/``addcmul_``, ``sqrt``/``div_``/``add_``, ``addcdiv_``), with the
        bias corrections as per-run ``[B]`` tensors instead of scalars. All of these are elementwise, so run ``i``'s
        new parameters and moments are a function of its own gradient, moments and step count alone: bit-identical
        whatever the other runs in the batch do (and to ``torch.optim.Adam(foreach=False)`` on run ``i`` alone).
        Masked runs go through the same ops on the full tensors and are then restored from a copy of their slices
        taken before the update, so they stay bit-exact (moments and step count included) even if their gradient is
        not finite.

        Args:
            mask: ``[B]`` bool (on any device), the runs to update; ``None`` means every run.
        """
        num_runs = self.steps.shape[0]
        device = self.params[0].device
        if mask is None:
            active = torch.ones(num_runs, dtype=torch.bool)
        else:
            active = torch.as_tensor(mask, dtype=torch.bool, device="cpu").reshape(num_runs)
        self.steps += active.double()
        beta1, beta2 = self.betas
        # Per-run bias corrections computed in Python doubles from each run's own count, exactly as torch.optim.Adam
        # computes its scalars, then rounded to float32 as torch does when it applies a scalar to a float32 tensor.
        # A masked run still at step 0 gets step 1's values: finite, and only used for results that are discarded.
        counts = [max(c, 1.0) for c in self.steps.tolist()]
        step_size = torch.tensor([self.lr / (1 - beta1**c) for c in counts], dtype=torch.float32, device=device)
        bias2_sqrt = torch.tensor([(1 - beta2**c) ** 0.5 for c in counts], dtype=torch.float32, device=device)
        frozen = torch.nonzero(~active).flatten().to(device)
        for p, m, v, denom, scaled in zip(
            self.params, self.exp_avg, self.exp_avg_sq, self._denom, self._scaled, strict=True
        ):
            grad = p.grad
            if grad is None:
                continue
            saved = [t.index_select(0, frozen) for t in (p, m, v)] if frozen.numel() else []
            shape = (-1, *([1] * (p.dim() - 1)))
            m.lerp_(grad, 1 - beta1)
            v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            torch.sqrt(v, out=denom).div_(bias2_sqrt.view(shape)).add_(self.eps)
            # addcdiv_ computes p + value * t1 / t2: with t1 = step_size * m and value = -1 this rounds exactly like
            # torch.optim.Adam's p.addcdiv_(m, denom, value=-step_size) (the negation is exact).
            torch.mul(m, step_size.view(shape), out=scaled)
            p.addcdiv_(scaled, denom, value=-1.0)
            for t, old in zip((p, m, v), saved, strict=False):
                t.index_copy_(0, frozen, old)

    def state_dict(self) -> dict[str, Any]:
        """Moments and step counters as tensors."""
        return {
            "steps": self.steps.clone(),
            "exp_avg": [m.clone() for m in self.exp_avg],
            "exp_avg_sq": [v.clone() for v in self.exp_avg_sq],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a snapshot made by :meth:`state_dict` (moments copied onto the parameters' device)."""
        self.steps = state["steps"].to("cpu", torch.float64).clone()
        for m, saved in zip(self.exp_avg, state["exp_avg"], strict=True):
            m.copy_(saved)
        for v, saved in zip(self.exp_avg_sq, state["exp_avg_sq"], strict=True):
            v.copy_(saved)
