"""How MBPO's SAC updates run: SB3's own ``SAC.train``, the same update with less overhead per step, or SBX.

MBPO makes ``updates_per_step`` SAC updates per env step (10 at the project's settings), so on a CPU the update is
half of a run's time. A 256x256 SAC update on HalfCheetah's dimensions is about 0.65 GFLOP, a few ms of arithmetic
on one core; SB3's update spends as much again on overhead: Adam's per-parameter loop of small ops, the critic's
weight gradients computed by the actor loss's backward pass and thrown away, a Polyak update of one op pair per
parameter, and four host synchronizations (``.item()``) per step. :class:`FusedSAC` removes those and nothing else:

* Adam with its fused kernel for actor, critics and the entropy coefficient (``fused=True``, the same update rule);
* the actor loss backpropagates into the actions only (the critics' parameters are frozen around it), which is all
  the actor's gradient needs;
* the target critics move by one ``torch._foreach_lerp_`` (``target + tau (param - target)``, SB3's formula);
* the logged losses stay tensors until the end of ``train``.

It is SB3's ``SAC`` class (a subclass overriding ``train``), so ``predict``, ``save``/``load`` and the run
checkpoints (:func:`rolloutlab.run_state.capture_sac`) work unchanged, and a resumed run continues exactly when it
is rebuilt with the same backend. Results equal SB3's to float32 rounding, not bit for bit (fused Adam and the lerp
round differently), so the backend is a recorded config field (``MBPOConfig.sac_backend``) and ``"sb3"`` stays the
default: every committed MBPO result was made with it. ``docs/mbrl.md`` gives the measured speeds.

``"sbx"`` is SBX's JAX SAC (:class:`mbrl.algorithms.sbx_backend.SBXSAC`, the optional ``sbx`` extra): the same
algorithm with the whole call of ``G`` updates compiled by XLA, the fastest on a CPU, but other arithmetic and random
streams than SB3's (a different run for the same seed) and not an SB3 ``SAC`` object; :func:`learner_state`,
:func:`load_learner_state` and :func:`td_terms` are what MBPO needs from a learner on any backend.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from stable_baselines3 import SAC
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.utils import polyak_update

from rolloutlab.run_state import capture_sac, restore_sac

#: ``"sb3"``: SB3's ``SAC`` as it is; ``"fused"``: :class:`FusedSAC`; ``"sbx"``: SBX's JAX ``SAC``
#: (:class:`mbrl.algorithms.sbx_backend.SBXSAC`, needs the ``sbx`` extra).
SAC_BACKENDS = ("sb3", "fused", "sbx")


class FusedSAC(SAC):
    """SB3's ``SAC`` with the lower-overhead update described in the module docstring (same arguments)."""

    def _setup_model(self) -> None:
        # Fused Adam for actor and critics through SB3's own optimizer_kwargs, before the policy is built.
        kwargs = dict(self.policy_kwargs.get("optimizer_kwargs") or {})
        kwargs.setdefault("fused", True)
        self.policy_kwargs["optimizer_kwargs"] = kwargs
        super()._setup_model()
        if self.ent_coef_optimizer is not None:
            lr = self.ent_coef_optimizer.param_groups[0]["lr"]
            assert self.log_ent_coef is not None
            self.ent_coef_optimizer = torch.optim.Adam([self.log_ent_coef], lr=lr, fused=True)
        self._critic_params: list[torch.Tensor] = list(self.critic.parameters())
        self._target_params: list[torch.Tensor] = list(self.critic_target.parameters())

    def train(self, gradient_steps: int, batch_size: int = 64) -> None:
        """``gradient_steps`` SAC updates on batches of ``batch_size`` (SB3's ``SAC.train``, restated)."""
        self.policy.set_training_mode(True)
        optimizers = [self.actor.optimizer, self.critic.optimizer]
        if self.ent_coef_optimizer is not None:
            optimizers += [self.ent_coef_optimizer]
        self._update_learning_rate(optimizers)
        logs: dict[str, list[torch.Tensor]] = {"ent_coef": [], "ent_coef_loss": [], "actor_loss": [], "critic_loss": []}
        for gradient_step in range(gradient_steps):
            data = self.replay_buffer.sample(batch_size, env=self._vec_normalize_env)  # type: ignore[union-attr]
            discounts = data.discounts if data.discounts is not None else self.gamma
            if self.use_sde:
                self.actor.reset_noise()
            actions_pi, log_prob = self.actor.action_log_prob(data.observations)
            log_prob = log_prob.reshape(-1, 1)
            if self.ent_coef_optimizer is not None and self.log_ent_coef is not None:
                ent_coef = torch.exp(self.log_ent_coef.detach())
                assert isinstance(self.target_entropy, float)
                ent_coef_loss = -(self.log_ent_coef * (log_prob + self.target_entropy).detach()).mean()
                logs["ent_coef_loss"].append(ent_coef_loss.detach())
                self.ent_coef_optimizer.zero_grad()
                ent_coef_loss.backward()
                self.ent_coef_optimizer.step()
            else:
                ent_coef = self.ent_coef_tensor
            logs["ent_coef"].append(ent_coef.detach().reshape(()))

            with torch.no_grad():
                next_actions, next_log_prob = self.actor.action_log_prob(data.next_observations)
                next_q = torch.cat(self.critic_target(data.next_observations, next_actions), dim=1)
                next_q, _ = torch.min(next_q, dim=1, keepdim=True)
                next_q = next_q - ent_coef * next_log_prob.reshape(-1, 1)
                target_q = data.rewards + (1 - data.dones) * discounts * next_q
            current_q = self.critic(data.observations, data.actions)
            critic_loss = 0.5 * sum(F.mse_loss(q, target_q) for q in current_q)
            assert isinstance(critic_loss, torch.Tensor)
            logs["critic_loss"].append(critic_loss.detach())
            self.critic.optimizer.zero_grad()
            critic_loss.backward()
            self.critic.optimizer.step()

            # The actor's gradient flows through the critics into the actions; their own weight gradients would be
            # computed and discarded (the next critic step zeroes them), so they are not computed at all.
            for p in self._critic_params:
                p.requires_grad_(False)
            q_pi = torch.cat(self.critic(data.observations, actions_pi), dim=1)
            for p in self._critic_params:
                p.requires_grad_(True)
            min_q_pi, _ = torch.min(q_pi, dim=1, keepdim=True)
            actor_loss = (ent_coef * log_prob - min_q_pi).mean()
            logs["actor_loss"].append(actor_loss.detach())
            self.actor.optimizer.zero_grad()
            actor_loss.backward()
            self.actor.optimizer.step()

            if gradient_step % self.target_update_interval == 0:
                with torch.no_grad():
                    torch._foreach_lerp_(self._target_params, self._critic_params, self.tau)
                polyak_update(self.batch_norm_stats, self.batch_norm_stats_target, 1.0)

        self._n_updates += gradient_steps
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        for key, values in logs.items():
            if values:
                self.logger.record(f"train/{key}", float(torch.stack(values).float().mean()))


def sbx_available() -> bool:
    """Whether the ``sbx`` backend can be built here (SBX and JAX importable)."""
    import importlib.util

    return all(importlib.util.find_spec(name) is not None for name in ("sbx", "jax", "flax", "optax"))


def check_backend(backend: str) -> None:
    """Refuse, in one sentence naming ``sac.backend``, a backend that is unknown or not installed here.

    Raises:
        ValueError: ``backend`` is not in :data:`SAC_BACKENDS`, or is ``"sbx"`` without the ``sbx`` extra.
    """
    if backend not in SAC_BACKENDS:
        raise ValueError(f"unknown sac.backend {backend!r}; choose one of {', '.join(SAC_BACKENDS)}")
    if backend == "sbx" and not sbx_available():
        raise ValueError(
            "sac.backend 'sbx' needs SBX and JAX, which are not installed here: pip install 'rolloutlab[sbx]'"
        )


def make_sac(backend: str, *args: Any, **kwargs: Any) -> OffPolicyAlgorithm:
    """A SAC learner built with SB3 ``SAC``'s ``args``/``kwargs`` on the given backend (:data:`SAC_BACKENDS`).

    Raises:
        ValueError: an unknown backend, or ``"sbx"`` without the ``sbx`` extra installed.
    """
    check_backend(backend)
    if backend == "sbx":
        from mbrl.algorithms.sbx_backend import SBXSAC

        kwargs.pop("device", None)  # JAX computes on its default device
        return SBXSAC(*args, **kwargs)
    cls = FusedSAC if backend == "fused" else SAC
    return cls(*args, **kwargs)


def learner_state(sac: OffPolicyAlgorithm) -> dict[str, Any]:
    """A SAC learner's networks, optimizer states, random keys and counters as plain data (checkpointable)."""
    if isinstance(sac, SAC):
        return capture_sac(sac)
    return {"sbx": sac.state_dict()}  # type: ignore[attr-defined]


def load_learner_state(sac: OffPolicyAlgorithm, state: dict[str, Any]) -> None:
    """Load a :func:`learner_state` snapshot into a learner built with the same configuration and backend.

    Raises:
        ValueError: the snapshot was taken on the other kind of backend (SB3's torch SAC against SBX).
    """
    torch_learner, saved_on_sbx = isinstance(sac, SAC), "sbx" in state
    if torch_learner and saved_on_sbx:
        raise ValueError("the checkpoint's SAC was saved on sac.backend 'sbx' and this run's backend is an SB3 one")
    if not torch_learner and not saved_on_sbx:
        raise ValueError("the checkpoint's SAC was saved on an SB3 sac.backend and this run's backend is 'sbx'")
    if torch_learner:
        restore_sac(sac, state)
    else:
        sac.load_state_dict(state["sbx"])  # type: ignore[attr-defined]


@torch.no_grad()
def td_terms(
    sac: OffPolicyAlgorithm, obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The first critic's ``Q(obs, action)`` and the target critics' ``min_j Q'_j(next_obs, mu(next_obs))`` under
    the deterministic action ``mu``, both ``[N]`` float arrays.

    Args:
        sac: A learner from :func:`make_sac`.
        obs: ``[N, obs_dim]``.
        action: ``[N, act_dim]`` in the policy's ``[-1, 1]`` units (``policy.scale_action``).
        next_obs: ``[N, obs_dim]``.
    """
    if not isinstance(sac, SAC):
        return sac.td_terms(obs, action, next_obs)  # type: ignore[attr-defined,no-any-return]

    def tensor(array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(array, dtype=torch.float32, device=sac.device)

    q = sac.critic(tensor(obs), tensor(action))[0].squeeze(-1)
    next_action = sac.actor(tensor(next_obs), deterministic=True)
    next_q = torch.min(torch.cat(sac.critic_target(tensor(next_obs), next_action), dim=1), dim=1).values
    return q.cpu().numpy(), next_q.cpu().numpy()
