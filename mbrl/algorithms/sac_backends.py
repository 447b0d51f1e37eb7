"""How MBPO's SAC updates run: SB3's own ``SAC.train``, or the same update with less overhead per step.

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
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from stable_baselines3 import SAC
from stable_baselines3.common.utils import polyak_update

#: ``"sb3"``: SB3's ``SAC`` as it is; ``"fused"``: :class:`FusedSAC`.
SAC_BACKENDS = ("sb3", "fused")


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


def make_sac(backend: str, *args: Any, **kwargs: Any) -> SAC:
    """An SB3 ``SAC`` built with ``args``/``kwargs`` on the given backend (:data:`SAC_BACKENDS`).

    Raises:
        ValueError: an unknown backend.
    """
    if backend not in SAC_BACKENDS:
        raise ValueError(f"unknown sac_backend {backend!r}; choose one of {', '.join(SAC_BACKENDS)}")
    cls = FusedSAC if backend == "fused" else SAC
    return cls(*args, **kwargs)
