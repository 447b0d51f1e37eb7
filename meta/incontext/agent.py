"""The AMAGO-style agent: timestep encoder -> trajectory encoder -> actor and critic-ensemble heads, one loss.

Shapes: ``B`` windows, ``T`` timesteps with an action (the window holds ``T + 1`` observations so the last step has a
next state), ``D`` RL^2 input width, ``d`` model width, ``K`` critics, ``G`` discounts, ``A`` actions, ``N`` bins (1
for the scalar critic).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from meta.incontext.config import AgentConfig
from meta.incontext.sequence import make_traj_encoder
from meta.incontext.value_scale import (
    bin_log_probs,
    expected_value,
    expected_value_real,
    symlog,
    twohot,
    twohot_real,
)


class EnsembleHead(nn.Module):
    """``K`` independent two-layer MLPs evaluated in one batched einsum: ``(..., d) -> (..., K, out)``."""

    def __init__(self, n_members: int, d_in: int, hidden: int, d_out: int) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.empty(n_members, d_in, hidden))
        self.b1 = nn.Parameter(torch.zeros(n_members, hidden))
        self.w2 = nn.Parameter(torch.empty(n_members, hidden, d_out))
        self.b2 = nn.Parameter(torch.zeros(n_members, d_out))
        # PyTorch's nn.Linear initialisation, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), per member.
        nn.init.uniform_(self.w1, -(d_in**-0.5), d_in**-0.5)
        # A small last layer starts every critic near a uniform distribution over the bins.
        nn.init.uniform_(self.w2, -0.1 * hidden**-0.5, 0.1 * hidden**-0.5)

    def forward(self, x: torch.Tensor, members: torch.Tensor | None = None) -> torch.Tensor:
        """Outputs ``(..., K, out)`` for inputs ``(..., d)``; ``members`` (indices) evaluates only those members."""
        w1: torch.Tensor = self.w1
        b1: torch.Tensor = self.b1
        w2: torch.Tensor = self.w2
        b2: torch.Tensor = self.b2
        if members is not None:
            w1, b1, w2, b2 = w1[members], b1[members], w2[members], b2[members]
        n_members, d_in, width = w1.shape
        flat = x.reshape(-1, d_in)
        # One wide matmul for the first layer, then one batched matmul over members (faster on CPU than einsum).
        wide = flat @ w1.transpose(0, 1).reshape(d_in, n_members * width)
        hidden = F.leaky_relu(wide.view(-1, n_members, width) + b1)
        out = torch.baddbmm(b2[:, None, :], hidden.transpose(0, 1), w2)  # (K, rows, out)
        return out.transpose(0, 1).reshape(*x.shape[:-1], n_members, w2.shape[-1])


@dataclass
class Batch:
    """A batch of replayed windows (tensors).

    Attributes:
        obs: RL^2 inputs ``(B, T + 1, D)``.
        actions: ``(B, T)`` long.
        rewards: ``(B, T)``.
        dones: ``(B, T)``, 1.0 where the step ended the task (no bootstrap).
        mask: ``(B, T)``, 1.0 on real steps, 0.0 on padding.
        start: ``(B,)`` long, absolute timestep of ``obs[:, 0]`` in its rollout.
    """

    obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    dones: torch.Tensor
    mask: torch.Tensor
    start: torch.Tensor

    def to(self, device: torch.device) -> Batch:
        """The same windows on ``device``."""
        return Batch(*(t.to(device) for t in (self.obs, self.actions, self.rewards, self.dones, self.mask, self.start)))


def multi_gamma_targets(
    rewards: torch.Tensor, dones: torch.Tensor, next_values: torch.Tensor, gammas: torch.Tensor
) -> torch.Tensor:
    """One-step TD targets for every discount at once: ``y[..., g] = r + gamma_g * (1 - done) * V_g(s')``.

    Args:
        rewards: ``(B, T)``.
        dones: ``(B, T)``.
        next_values: ``(B, T, G)``, the target value of the next state under each discount.
        gammas: ``(G,)``.

    Returns:
        ``(B, T, G)``.
    """
    return rewards[..., None] + gammas * (1.0 - dones[..., None]) * next_values


def n_step_targets(
    rewards: torch.Tensor,
    dones: torch.Tensor,
    mask: torch.Tensor,
    next_values: torch.Tensor,
    gammas: torch.Tensor,
    n_step: int,
) -> torch.Tensor:
    """``n_step``-step TD targets for every discount at once (uncorrected for the behaviour policy).

    ``y[t, g] = sum_{k<m} gamma_g^k r[t+k] + gamma_g^m V_g(s[t+m])`` with ``m = n_step``, cut short at the first task
    end (``dones``: no bootstrap after it) and at the last real step of the row (``mask``: it bootstraps from the
    state after that step, which the window holds). With ``n_step = 1`` this is :func:`multi_gamma_targets` on the
    real steps. Padded steps get 0.

    Args:
        rewards: ``(B, T)``.
        dones: ``(B, T)``.
        mask: ``(B, T)``, 1.0 on real steps; real steps come first in each row.
        next_values: ``(B, T, G)``, ``V_g(s[t+1])``.
        gammas: ``(G,)``.
        n_step: Rewards summed before bootstrapping (>= 1).

    Returns:
        ``(B, T, G)``.
    """
    if n_step < 1:
        raise ValueError(f"n_step must be >= 1, got {n_step}")

    def ahead(x: torch.Tensor, k: int) -> torch.Tensor:
        """``x[:, t + k]`` at position ``t`` (zeros past the row's end); ``x`` is ``(B, T, ...)``."""
        if k == 0:
            return x
        shifted = torch.zeros_like(x)
        if k < x.shape[1]:
            shifted[:, : x.shape[1] - k] = x[:, k:]
        return shifted

    targets = torch.zeros_like(next_values)
    alive = mask[..., None]  # (B, T, 1): the sum from t has not ended before step t + k
    discount = torch.ones_like(gammas)
    for k in range(n_step):
        reward, done = ahead(rewards, k)[..., None], ahead(dones, k)[..., None]
        targets = targets + alive * discount * reward
        discount = discount * gammas
        # Bootstrap after step t + k when the sum is full or the row has no real step t + k + 1.
        stop = torch.ones_like(alive) if k == n_step - 1 else 1.0 - ahead(mask, k + 1)[..., None]
        targets = targets + alive * stop * discount * (1.0 - done) * ahead(next_values, k)
        alive = alive * (1.0 - stop) * (1.0 - done)
    return targets


#: Floor of the advantages' scale in :func:`normalize_advantages` (env reward units): smaller differences are noise.
ADVANTAGE_FLOOR = 1e-3


def normalize_advantages(advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``advantages`` ``(B, T, G, A)`` divided by their root mean square per discount over the unpadded steps and the
    actions (``mask`` ``(B, T)``), floored at :data:`ADVANTAGE_FLOOR`; the scale is a constant (no gradient)."""
    weights = mask[..., None, None]
    mean_square = (advantages.detach() ** 2 * weights).sum(dim=(0, 1, 3)) / (
        weights.sum() * advantages.shape[-1]
    ).clamp_min(1.0)
    return advantages / mean_square.sqrt().clamp_min(ADVANTAGE_FLOOR)[:, None]


def target_spread(targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Standard deviation ``(G,)`` of TD targets ``(B, T, G)`` per discount over the unpadded steps (``mask``
    ``(B, T)``), floored at :data:`ADVANTAGE_FLOOR`: the scale AMAGO's PopArt divides its actor's Q-values by, taken
    from the batch instead of a running average."""
    weights = mask[..., None]
    count = weights.sum().clamp_min(1.0)
    mean = (targets * weights).sum(dim=(0, 1)) / count
    variance = (((targets - mean) ** 2) * weights).sum(dim=(0, 1)) / count
    return variance.sqrt().clamp_min(ADVANTAGE_FLOOR)


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (values * mask).sum() / mask.sum().clamp_min(1.0)


class InContextAgent(nn.Module):
    """Shared sequence model with an actor head and an ensemble of critic heads for several discounts.

    Args:
        input_dim: RL^2 input width ``D``.
        n_actions: Discrete actions ``A``.
        config: Network and loss settings.
    """

    gammas: torch.Tensor
    bins: torch.Tensor

    def __init__(self, input_dim: int, n_actions: int, config: AgentConfig) -> None:
        super().__init__()
        if not 1 <= config.critic_subset <= config.n_critics:
            raise ValueError("critic_subset must be between 1 and n_critics")
        self.config = config
        self.n_actions = n_actions
        self.n_gammas = len(config.gammas)
        d = config.d_model
        self.timestep_encoder = nn.Sequential(nn.Linear(input_dim, d), nn.LeakyReLU(), nn.Linear(d, d), nn.LayerNorm(d))
        self.traj_encoder = make_traj_encoder(
            config.encoder,
            d,
            n_layers=config.n_layers,
            n_heads=config.n_heads,
            context_len=config.context_len,
            dropout=config.dropout,
            sigma_reparam=config.sigma_reparam,
        )
        self.actor = nn.Sequential(
            nn.Linear(d, config.head_hidden), nn.LeakyReLU(), nn.Linear(config.head_hidden, self.n_gammas * n_actions)
        )
        if config.policy == "critic" and config.critic_target != "max":
            raise ValueError("policy='critic' needs critic_target='max' (there is no actor policy to value)")
        if config.policy == "critic" and not config.entropy_coef > 0:
            raise ValueError(f"policy='critic' needs entropy_coef > 0 (its temperature), got {config.entropy_coef}")
        if config.n_step < 1:
            raise ValueError(f"n_step must be >= 1, got {config.n_step}")
        if config.critic_head not in ("twohot", "scalar"):
            raise ValueError(f"unknown critic_head {config.critic_head!r}; known: twohot, scalar")
        if config.critic_head == "scalar" and config.critic_init != "uniform":
            raise ValueError("critic_init='lowest' shapes a two-hot critic's bins; the scalar critic starts near 0")
        # Outputs per action and discount: the bins' logits, or the value itself.
        self.n_outputs = config.n_bins if config.critic_head == "twohot" else 1
        self.critics = EnsembleHead(config.n_critics, d, config.head_hidden, self.n_gammas * n_actions * self.n_outputs)
        self.register_buffer("gammas", torch.tensor(config.gammas, dtype=torch.float32))
        low = -config.bin_range if config.bin_low is None else config.bin_low
        if not low < config.bin_range:
            raise ValueError(f"need bin_low < bin_range, got {low} and {config.bin_range}")
        self.register_buffer("bins", torch.linspace(low, config.bin_range, config.n_bins))
        if config.critic_init == "lowest":
            with torch.no_grad():
                start = -2.0 * (self.bins - self.bins[0])  # (N,) logits of the starting bin distribution
                self.critics.b2.copy_(start.repeat(self.n_gammas * n_actions).expand_as(self.critics.b2))
        # Polyak-averaged copy of the critic heads only; the sequence model has no target copy (AMAGO, Sec. 4.2).
        self.target_critics = copy.deepcopy(self.critics).requires_grad_(False)

    @property
    def device(self) -> torch.device:
        """Where the agent's parameters live."""
        return self.bins.device

    # ----------------------------------------------------------------------------------------------- forward passes
    def encode(self, obs: torch.Tensor, state: Any = None, start: torch.Tensor | int = 0) -> tuple[torch.Tensor, Any]:
        """Sequence outputs ``(B, T, d)`` for RL^2 inputs ``(B, T, D)``, plus the encoder's new state."""
        return self.traj_encoder(self.timestep_encoder(obs), state, start)

    def policy_logits(self, features: torch.Tensor) -> torch.Tensor:
        """Policy logits ``(..., G, A)`` from sequence outputs ``(..., d)``: the actor's, or with
        ``config.policy="critic"`` the ensemble-mean Q in env reward units over ``config.entropy_coef``."""
        if self.config.policy == "critic":
            return self.q_values(features).mean(dim=-3) / (self.config.reward_scale * self.config.entropy_coef)
        return self.actor(features).unflatten(-1, (self.n_gammas, self.n_actions))

    def _critic_logits(self, head_out: torch.Tensor) -> torch.Tensor:
        return head_out.unflatten(-1, (self.n_gammas, self.n_actions, self.n_outputs))

    def q_values(
        self, features: torch.Tensor, critics: EnsembleHead | None = None, members: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Q-values ``(..., K, G, A)`` from sequence outputs ``(..., d)`` (``K`` = len(members)), in the critics' units:
        the env's rewards times ``config.reward_scale``."""
        head = self.critics if critics is None else critics
        return self.read_values(self._critic_logits(head(features, members)))

    def read_values(self, logits: torch.Tensor) -> torch.Tensor:
        """Values ``(...)`` of critic outputs ``(..., N)``: the scalar critic's single output, or the two-hot critic's
        bin logits read under ``config.value_mean``."""
        if self.config.critic_head == "scalar":
            return logits[..., 0]
        if self.config.value_mean == "real":
            return expected_value_real(logits, self.bins)
        return expected_value(logits, self.bins)

    def encode_targets(self, targets: torch.Tensor) -> torch.Tensor:
        """Two-hot bin distributions ``(..., N)`` of value targets ``(...)`` under ``config.value_mean``."""
        if self.config.value_mean == "real":
            return twohot_real(targets, self.bins)
        return twohot(symlog(targets), self.bins)

    def init_state(self, batch: int) -> Any:
        """A fresh encoder state for ``batch`` rollouts (a :class:`~meta.incontext.sequence.KVCache` by default)."""
        return self.traj_encoder.init_state(batch)  # type: ignore[operator]

    @torch.no_grad()
    def act_logits(self, obs: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any]:
        """One incremental step: logits ``(B, A)`` of the last discount's policy for inputs ``(B, D)``, new state."""
        features, state = self.encode(obs[:, None, :], state)
        return self.policy_logits(features[:, 0])[:, -1], state

    # ------------------------------------------------------------------------------------------------------ the loss
    def loss(self, batch: Batch, generator: torch.Generator | None = None) -> tuple[torch.Tensor, dict[str, float]]:
        """AMAGO's single objective on a batch of windows (discrete actions).

        ``critic_coef * TD + actor_coef * actor + bc_coef * filtered BC``, each averaged over critics / discounts and
        over the unpadded steps:

        * TD: two-hot cross-entropy (``critic_head="scalar"``: Huber loss) of every critic against
          ``c r + gamma (1 - done) V'(s')`` (``c`` the config's ``reward_scale``), where
          ``V'(s') = sum_a pi_gamma(a|s') min_{2 random critics} Q_target(s', a)`` (``critic_target="max"``:
          ``max_a`` instead of the policy's expectation) uses the Polyak target heads on the online sequence output
          (detached). With ``n_step > 1`` the target sums ``n_step`` rewards before it bootstraps
          (:func:`n_step_targets`).
        * actor: ``-sum_a pi_gamma(a|s) A(s, a)`` with ``A`` (ensemble mean, divided by ``c``: in the env's reward
          units whatever the reward scale; ``actor_loss="amago"``: the minimum over the critics of ``Q`` over the
          batch's TD-target standard deviation instead) from the critics as a *frozen copy*:
          no gradient reaches the critic weights, so this term trains the actor and, through its logits, the shared
          sequence model, but never the critics. A small entropy bonus keeps the softmax from saturating
          before the critics are informative (the exact-expectation gradient vanishes at a one-hot policy).
        * filtered BC: ``-log pi_gamma(a_t|s)`` on replayed actions whose advantage is positive (AMAGO, Eq. 3).

        With ``policy="critic"`` there is no actor: the loss is the TD term alone.

        Returns:
            The scalar loss and a dict of its parts for logging.
        """
        cfg = self.config
        features, _ = self.encode(batch.obs, None, batch.start)  # (B, T+1, d)
        # The actor's logits (B, T+1, G, A); a critic policy has no actor to train.
        logits = self.policy_logits(features) if cfg.policy == "actor" else None
        mask = batch.mask

        # Critic TD loss.
        online = self._critic_logits(self.critics(features[:, :-1]))  # (B, T, K, G, A, N)
        index = batch.actions[:, :, None, None, None, None].expand(*online.shape[:4], 1, online.shape[-1])
        taken = online.gather(4, index).squeeze(4)  # (B, T, K, G, N)
        with torch.no_grad():
            # Drawn from the (CPU) generator, then moved: the same critics on every device.
            subset = torch.randperm(cfg.n_critics, generator=generator)[: cfg.critic_subset].to(features.device)
            next_q = self.q_values(features[:, 1:].detach(), self.target_critics, subset).min(dim=2).values
            if cfg.critic_target == "max":
                next_v = next_q.max(dim=-1).values  # (B, T, G)
            else:
                assert logits is not None  # critic_target="policy" comes with the actor (checked in __init__)
                next_pi = torch.softmax(logits[:, 1:].detach(), dim=-1)
                next_v = (next_pi * next_q).sum(-1)  # (B, T, G)
            # AMAGO's reward multiplier: the critics learn values of scaled rewards (the inputs keep the env's).
            rewards = batch.rewards * cfg.reward_scale
            if cfg.n_step == 1:
                targets = multi_gamma_targets(rewards, batch.dones, next_v, self.gammas)
            else:
                targets = n_step_targets(rewards, batch.dones, mask, next_v, self.gammas, cfg.n_step)
        if cfg.critic_head == "scalar":
            predicted = taken[..., 0]  # (B, T, K, G)
            td_error = F.huber_loss(predicted, targets[:, :, None].expand_as(predicted), reduction="none")
        else:
            target_probs = self.encode_targets(targets)  # (B, T, G, N)
            td_error = -(target_probs[:, :, None] * bin_log_probs(taken)).sum(-1)  # (B, T, K, G) cross-entropy
        critic_loss = _masked_mean(td_error.mean(dim=(2, 3)), mask)
        info = {"train/critic_loss": float(critic_loss.detach())}
        if logits is None:
            q_mean = self.read_values(online.detach()).mean(dim=2)[:, :, -1] / cfg.reward_scale  # (B, T, A)
            info["train/q_mean"] = float(_masked_mean(q_mean.mean(-1), mask))
            return cfg.critic_coef * critic_loss, info

        # Actor term through a frozen weight copy of the critics. With discrete actions the expectation over actions is
        # exact, so Q enters the actor term as a constant: the copy evaluated on detached features is numerically the
        # detached online output, which saves a second pass through the ensemble.
        # The reward scale is undone first: it is a numerical knob of the critic's targets (AMAGO normalizes the Q of
        # its actor loss with PopArt, so its reward multiplier never reaches the actor). Left in, a scale of 100 made
        # the entropy bonus 100x weaker beside the advantages and the actor term 100x stronger beside the critic's
        # (scale-free) cross-entropy in the shared sequence model's gradient.
        q_members = self.read_values(online.detach())  # (B, T, K, G, A), critic units
        q_copy = q_members.mean(dim=2) / cfg.reward_scale  # (B, T, G, A), env units
        log_pi = F.log_softmax(logits[:, :-1], dim=-1)  # (B, T, G, A)
        pi = log_pi.exp()
        advantages = q_copy - (pi.detach() * q_copy).sum(-1, keepdim=True)
        if cfg.advantage_norm:
            advantages = normalize_advantages(advantages, mask)
        entropy = -(pi * log_pi).sum(-1)  # (B, T, G)
        if cfg.actor_loss == "amago":
            # AMAGO's discrete online loss: the pessimistic (minimum) critic, in units of the targets' spread.
            q_low = q_members.min(dim=2).values / cfg.reward_scale  # (B, T, G, A), env units
            objective = (pi * (q_low / target_spread(targets / cfg.reward_scale, mask)[:, None])).sum(-1)
        else:
            objective = (pi * advantages).sum(-1)
        actor_loss = _masked_mean(-(objective + cfg.entropy_coef * entropy).mean(-1), mask)

        # Filtered behaviour cloning of replayed actions with positive advantage.
        act_index = batch.actions[:, :, None, None].expand(-1, -1, self.n_gammas, 1)
        taken_adv = advantages.gather(-1, act_index).squeeze(-1)  # (B, T, G)
        keep = (taken_adv > 0).float()
        bc_loss = _masked_mean(-(keep * log_pi.gather(-1, act_index).squeeze(-1)).mean(-1), mask)

        total = cfg.critic_coef * critic_loss + cfg.actor_coef * actor_loss + cfg.bc_coef * bc_loss
        info |= {
            "train/actor_loss": float(actor_loss.detach()),
            "train/entropy": float(_masked_mean(entropy[..., -1].detach(), mask)),
            "train/bc_loss": float(bc_loss.detach()),
            "train/bc_kept": float(_masked_mean(keep.mean(-1), mask)),
            "train/q_mean": float(_masked_mean(q_copy[..., -1, :].mean(-1), mask)),
        }
        return total, info

    @torch.no_grad()
    def update_targets(self) -> None:
        """Polyak-average the target critic heads: ``target <- (1 - tau) target + tau online``."""
        polyak_(self.target_critics, self.critics, self.config.tau)

    def optimized_parameters(self) -> list[nn.Parameter]:
        """Every trainable parameter (the target heads excluded), for the single AdamW optimizer."""
        return [p for name, p in self.named_parameters() if not name.startswith("target_critics.")]


@torch.no_grad()
def polyak_(target: nn.Module, online: nn.Module, rate: float) -> None:
    """``target <- (1 - rate) target + rate online`` for every parameter; buffers are copied.

    Buffers are not averaged: they hold state such as spectral norm's singular vectors, which must stay unit vectors
    of (nearly) the averaged weights, and the online ones are the freshest estimate.
    """
    # One multi-tensor op over every parameter: the EMA copy is averaged after every update, and a Python loop of
    # per-tensor lerps cost about as much as the optimizer step.
    torch._foreach_lerp_(list(target.parameters()), list(online.parameters()), rate)
    for buffer, fresh in zip(target.buffers(), online.buffers(), strict=True):
        buffer.copy_(fresh)
