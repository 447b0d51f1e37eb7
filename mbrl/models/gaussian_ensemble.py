"""A probabilistic ensemble of Gaussian MLPs, vectorized over members (PETS / MBPO world model).

Chua et al. 2018 (PETS) and Janner et al. 2019 (MBPO) model ``p(y | x)`` with ``E`` independently initialized MLPs, each
outputting a diagonal Gaussian. Every layer here holds the weights of all members in one tensor of shape
``[E, in, out]`` and applies them with one batched matmul, so an ensemble of 7 costs about as much Python overhead as
a single network.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

#: MBPO's initial soft bounds on the predicted log-variance and the weight of the penalty that tightens them
#: (Janner et al. 2019, reference implementation ``bnn.py``: ``max_logvar = 0.5``, ``min_logvar = -10``, ``0.01``).
MAX_LOGVAR_INIT = 0.5
MIN_LOGVAR_INIT = -10.0
LOGVAR_BOUND_PENALTY = 0.01
#: Arithmetic of the hidden layers: ``"float32"``, or ``"bf16"`` (bfloat16 under ``torch.autocast``, float32 weights).
PRECISIONS = ("float32", "bf16")


class EnsembleLinear(nn.Module):
    """``E`` independent affine layers applied in one batched matmul.

    Args:
        ensemble_size: Number of members ``E``.
        in_features: Input width.
        out_features: Output width.
        generator: Optional torch generator for the initialization (reproducible per run).
    """

    def __init__(
        self, ensemble_size: int, in_features: int, out_features: int, generator: torch.Generator | None = None
    ) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(ensemble_size, in_features, out_features))
        self.bias = nn.Parameter(torch.empty(ensemble_size, 1, out_features))
        # Same distribution as torch.nn.Linear's default init, U(-1/sqrt(in), 1/sqrt(in)), drawn for each member.
        bound = 1.0 / math.sqrt(in_features)
        with torch.no_grad():
            self.weight.uniform_(-bound, bound, generator=generator)
            self.bias.uniform_(-bound, bound, generator=generator)

    def forward(self, x: torch.Tensor, members: torch.Tensor | None = None) -> torch.Tensor:
        """Map ``x`` of shape ``[E, N, in]`` to ``[E, N, out]``; with ``members`` (``LongTensor[K]``), ``x`` is
        ``[K, N, in]`` and slot ``k`` goes through member ``members[k]`` only (no work for the other members)."""
        if members is None:
            return torch.baddbmm(self.bias, x, self.weight)
        return torch.baddbmm(self.bias[members], x, self.weight[members])


class GaussianEnsemble(nn.Module):
    """``E`` Gaussian MLPs (SiLU hidden layers), each predicting a mean and a bounded log-variance.

    Args:
        in_dim: Input width (normalized state and action features).
        out_dim: Output width (one mean and one log-variance per output).
        ensemble_size: Number of members ``E``.
        hidden_size: Width of every hidden layer.
        num_layers: Number of hidden layers (MBPO: 4 of 200).
        weight_decays: L2 coefficient per layer, ``num_layers + 1`` values (hidden layers then output layer), or
            ``None`` for no decay. MBPO uses ``[2.5e-5, 5e-5, 7.5e-5, 7.5e-5, 1e-4]``.
        num_elites: How many members :attr:`elite_idx` holds (set by training, by holdout error).
        seed: Optional seed for the initialization.
        precision: ``"float32"``, or ``"bf16"``: the hidden layers (nearly all the FLOPs) run under
            ``torch.autocast`` in bfloat16, forward and backward, on float32 master weights; the output layer and the
            log-variance bounds stay float32, so a predicted mean is not rounded to bfloat16's 8 bits. On a CPU with
            bfloat16 matmul units (AVX-512 BF16, AMX) a step costs less; the predictions differ from float32's by
            bfloat16 rounding, so it is an opt-in.

    Attributes:
        elite_idx: ``LongTensor[num_elites]``, indices of the members used for prediction (a buffer, so it is saved).
        max_logvar, min_logvar: Learned soft bounds, shape ``[1, 1, out_dim]``.
    """

    elite_idx: torch.Tensor

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        ensemble_size: int = 7,
        hidden_size: int = 200,
        num_layers: int = 4,
        weight_decays: Sequence[float] | None = None,
        num_elites: int = 5,
        seed: int | None = None,
        precision: str = "float32",
    ) -> None:
        super().__init__()
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        self.precision = precision
        if not 1 <= num_elites <= ensemble_size:
            raise ValueError(f"need 1 <= num_elites <= ensemble_size, got {num_elites} and {ensemble_size}")
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        if weight_decays is not None and len(weight_decays) != num_layers + 1:
            raise ValueError(f"weight_decays needs num_layers + 1 = {num_layers + 1} values, got {len(weight_decays)}")
        self.in_dim, self.out_dim = int(in_dim), int(out_dim)
        self.ensemble_size, self.num_elites = int(ensemble_size), int(num_elites)
        generator = None if seed is None else torch.Generator().manual_seed(int(seed))
        widths = [in_dim] + [hidden_size] * num_layers
        self.hidden = nn.ModuleList(
            EnsembleLinear(ensemble_size, a, b, generator) for a, b in itertools.pairwise(widths)
        )
        self.output = EnsembleLinear(ensemble_size, hidden_size, 2 * out_dim, generator)
        self.weight_decays = [0.0] * (num_layers + 1) if weight_decays is None else [float(w) for w in weight_decays]
        self.max_logvar = nn.Parameter(torch.full((1, 1, out_dim), MAX_LOGVAR_INIT))
        self.min_logvar = nn.Parameter(torch.full((1, 1, out_dim), MIN_LOGVAR_INIT))
        self.register_buffer("elite_idx", torch.arange(num_elites, dtype=torch.long))

    def forward(self, x: torch.Tensor, members: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Predict per-member Gaussians.

        Args:
            x: ``[E, N, in_dim]`` (each member may see different rows, e.g. bootstrap batches) or ``[N, in_dim]``
                (broadcast to every member); with ``members``, ``[K, N, in_dim]`` or ``[N, in_dim]``.
            members: Optional ``LongTensor[K]``: run only these members, slot ``k`` of ``x`` through member
                ``members[k]`` (trajectory sampling in a planner, where each particle follows one member).

        Returns:
            ``(mean, logvar)``, each ``[E, N, out_dim]`` (``[K, N, out_dim]`` with ``members``); ``logvar`` softly
            clamped into ``[min_logvar, max_logvar]``.
        """
        slots = self.ensemble_size if members is None else int(members.numel())
        if x.dim() == 2:
            x = x.unsqueeze(0).expand(slots, -1, -1)
        if self.precision == "bf16":
            with torch.autocast(x.device.type, dtype=torch.bfloat16):
                h = self._hidden(x, members)
            h = h.float()
        else:
            h = self._hidden(x, members)
        mean, raw_logvar = self.output(h, members).chunk(2, dim=-1)
        # Soft clamp (PETS appendix A.1): differentiable everywhere, so the bounds themselves are learned.
        logvar = self.max_logvar - F.softplus(self.max_logvar - raw_logvar)
        logvar = self.min_logvar + F.softplus(logvar - self.min_logvar)
        return mean, logvar

    def _hidden(self, x: torch.Tensor, members: torch.Tensor | None) -> torch.Tensor:
        h = x
        for layer in self.hidden:
            h = F.silu(layer(h, members))
        return h

    def loss(self, x: torch.Tensor, target: torch.Tensor, weight_decay: bool = True) -> torch.Tensor:
        """Training loss: sum over members of the NLL, plus the log-variance bound penalty and per-layer weight decay.

        Args:
            x: ``[E, N, in_dim]``.
            target: ``[E, N, out_dim]``.
            weight_decay: Add :meth:`decay_penalty`. An optimizer that applies the same L2 terms itself (Adam's
                ``weight_decay`` per parameter group, :meth:`decay_groups`: the gradient ``wd * W`` of
                ``wd / 2 ||W||^2``) leaves it out and saves its small ops on every step.

        Returns:
            A scalar.
        """
        mean, logvar = self(x)
        loss = gaussian_nll(mean, logvar, target).sum()
        loss = loss + LOGVAR_BOUND_PENALTY * (self.max_logvar.sum() - self.min_logvar.sum())
        return loss + self.decay_penalty() if weight_decay else loss

    def decay_groups(self) -> list[dict[str, object]]:
        """Parameter groups for ``torch.optim.Adam`` whose ``weight_decay`` reproduces :meth:`decay_penalty`'s
        gradient: one group per decayed layer weight, one undecayed group for biases and log-variance bounds."""
        layers = [*self.hidden, self.output]
        groups: list[dict[str, object]] = []
        decayed: set[int] = set()
        for decay, layer in zip(self.weight_decays, layers, strict=True):
            if decay:
                groups.append({"params": [layer.weight], "weight_decay": float(decay)})
                decayed.add(id(layer.weight))
        rest = [p for p in self.parameters() if id(p) not in decayed]
        return [*groups, {"params": rest, "weight_decay": 0.0}]

    def decay_penalty(self) -> torch.Tensor:
        """``sum_l wd_l * 0.5 * ||W_l||^2`` over layers (biases are not decayed), summed over members."""
        layers = [*self.hidden, self.output]
        total = self.max_logvar.new_zeros(())
        for decay, layer in zip(self.weight_decays, layers, strict=True):
            if decay:
                total = total + decay * 0.5 * layer.weight.pow(2).sum()  # type: ignore[operator]
        return total


def gaussian_nll(mean: torch.Tensor, logvar: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Diagonal Gaussian NLL per member, ``[E, N, D] -> [E]`` (mean over ``N`` and ``D``, natural log units).

    Each entry is ``0.5 * [(target - mean)^2 / var + logvar + log(2 pi)]`` with ``var = exp(logvar)``.
    """
    per_entry = 0.5 * ((target - mean) ** 2 * torch.exp(-logvar) + logvar + math.log(2.0 * math.pi))
    return per_entry.mean(dim=(1, 2))
