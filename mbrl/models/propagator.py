"""Many particles stepped through chosen ensemble members in float32 torch: the inner loop of a model-based planner.

A planner (PETS's CEM over action sequences, ``planning.mpc``) runs thousands of model steps per decision on the same
weights. :class:`MemberPropagator` gathers the weights of the members it will use (and the normalizer statistics) once,
as float32 tensors on the model's device, so that each step is a handful of batched matmuls with no numpy round trip
and no per-step indexing of the ensemble. Slot ``s`` of a ``[S, N, ...]`` batch runs through member ``members[s]``;
a member may fill several slots (PETS's TS-inf spreads ``P`` particles over ``K < P`` elites).

The caller draws the noise (a planner draws a whole plan's at once, from a CPU ``torch.Generator`` so that a seeded
plan is the same on every device).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import torch
import torch.nn.functional as F

from mbrl.models.gaussian_ensemble import EnsembleLinear, GaussianEnsemble
from mbrl.models.normalizer import Normalizer
from mbrl.models.termination_head import TerminationHead


class PropagatedModel(Protocol):
    """What a propagator reads from a world model (``mbrl.models.DynamicsModel`` has it)."""

    obs_dim: int
    action_dim: int
    discrete_actions: bool
    device: torch.device
    ensemble: GaussianEnsemble
    termination: TerminationHead | None
    input_normalizer: Normalizer
    output_normalizer: Normalizer


class MemberPropagator:
    """The weights of the members in ``members`` and the model's normalizers, frozen as float32 tensors (the hidden
    layers of a ``"bf16"`` ensemble as bfloat16, the arithmetic autocast gives its forward).

    Build with :meth:`mbrl.models.DynamicsModel.propagator`. Later fits of the model do not change a propagator
    already built (the weights are copies), so build one per plan.

    Args:
        model: A fitted dynamics model with continuous actions.
        members: ``LongTensor[S]`` ensemble member (not elite) index of each slot.

    Attributes:
        obs_dim, action_dim: Widths of a state and an action.
        device: Where the weights live and every step computes.
    """

    def __init__(self, model: PropagatedModel, members: torch.Tensor) -> None:
        if model.discrete_actions:
            raise ValueError("MemberPropagator steps continuous actions; this model takes discrete ones")
        self.obs_dim, self.action_dim = model.obs_dim, model.action_dim
        self.device = model.device
        idx = members.to(device=self.device, dtype=torch.long).reshape(-1)
        self.slots = int(idx.numel())
        ens = model.ensemble

        def gather(
            layers: Iterable[EnsembleLinear], dtype: torch.dtype = torch.float32
        ) -> list[tuple[torch.Tensor, torch.Tensor]]:
            return [(layer.weight.detach()[idx].to(dtype), layer.bias.detach()[idx].to(dtype)) for layer in layers]

        # A bf16 ensemble's hidden layers as autocast runs them: weights, biases and activations rounded to bfloat16.
        self._bf16 = ens.precision == "bf16"
        self._hidden = gather(ens.hidden, torch.bfloat16 if self._bf16 else torch.float32)  # type: ignore[arg-type]
        out_weight, out_bias = gather([ens.output])[0]
        self._max_logvar = ens.max_logvar.detach().float().to(self.device)
        self._min_logvar = ens.min_logvar.detach().float().to(self.device)
        self._half = torch.tensor(0.5, device=self.device)
        self._term = None if model.termination is None else gather(model.termination.layers)  # type: ignore[arg-type]

        def stats(normalizer: Normalizer) -> tuple[torch.Tensor, torch.Tensor]:
            mean = torch.as_tensor(normalizer.mean, dtype=torch.float32, device=self.device)
            std = torch.as_tensor(normalizer.std, dtype=torch.float32, device=self.device)
            return mean, std

        self._in_mean, self._in_std = stats(model.input_normalizer)
        out_mean, self._out_std = stats(model.output_normalizer)
        # The output denormalization folded into the mean half of the last layer (an affine map of an affine map),
        # so a step's mean comes out in environment units with no extra ops; the log-variance half stays standardized.
        d = self.obs_dim + 1
        self._out_weight = torch.cat([out_weight[..., :d] * self._out_std, out_weight[..., d:]], dim=-1)
        self._out_bias = torch.cat([out_bias[..., :d] * self._out_std + out_mean, out_bias[..., d:]], dim=-1)

    def _inputs(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return (torch.cat([state, action], dim=-1) - self._in_mean) / self._in_std

    def forward(
        self, state: torch.Tensor, action: torch.Tensor, spread: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Each slot's Gaussian in environment units.

        Args:
            state: ``[S, N, obs_dim]`` float32.
            action: ``[S, N, action_dim]`` float32.
            spread: Also return the standard deviation (skipped when moving by the means).

        Returns:
            ``(mean, std)``, each ``[S, N, obs_dim + 1]`` (column 0 the reward, the rest the state change); ``std``
            is ``None`` without ``spread``.
        """
        h = self._inputs(state, action)
        if self._bf16:
            h = h.bfloat16()
        for weight, bias in self._hidden:
            h = F.silu(torch.baddbmm(bias, h, weight), inplace=True)
        if self._bf16:
            h = h.float()
        mean, raw_logvar = torch.baddbmm(self._out_bias, h, self._out_weight).chunk(2, dim=-1)
        if not spread:
            return mean, None
        # The same soft clamp as GaussianEnsemble.forward, in standardized units, then scaled to the environment's;
        # written into one fresh buffer (the same operations, without an allocation or a wrapped scalar per step).
        logvar = F.softplus(torch.sub(self._max_logvar, raw_logvar))
        torch.sub(self._max_logvar, logvar, out=logvar)
        logvar = F.softplus(logvar.sub_(self._min_logvar))
        std = torch.add(self._min_logvar, logvar, out=logvar).mul_(self._half).exp_()
        return mean, std.mul_(self._out_std)

    def terminated_prob(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor | None:
        """Each slot's learned termination probability ``[S, N]`` (``None`` for a model without the head)."""
        if self._term is None:
            return None
        h = self._inputs(state, action)
        for weight, bias in self._term[:-1]:
            h = F.silu(torch.baddbmm(bias, h, weight))
        weight, bias = self._term[-1]
        return torch.sigmoid(torch.baddbmm(bias, h, weight).squeeze(-1))

    def step(
        self, state: torch.Tensor, action: torch.Tensor, noise: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One model step of every row through its slot's member.

        Args:
            state: ``[S, N, obs_dim]`` float32.
            action: ``[S, N, action_dim]`` float32.
            noise: ``[S, N, obs_dim + 1]`` standard normal draws to sample each member's Gaussian with; ``None``
                moves by the member's mean.

        Returns:
            ``(next_state [S, N, obs_dim], reward [S, N])`` in environment units.
        """
        mean, std = self.forward(state, action, spread=noise is not None)
        y = mean if noise is None or std is None else torch.addcmul(mean, std, noise)
        return state + y[..., 1:], y[..., 0]
