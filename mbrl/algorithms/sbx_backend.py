"""MBPO's SAC learner on SBX (SB3's JAX sibling): the same SAC, its update loop compiled by XLA.

SBX (``pip install 'rolloutlab[sbx]'``) restates SB3's SAC in JAX/Flax: twin critics, a squashed-Gaussian actor,
a learned entropy coefficient (initial value 1, target entropy ``-act_dim``), Adam everywhere and Polyak-averaged
target critics, with SB3's defaults and its ``learn``/``predict``/``train`` API (``sbx.SAC`` subclasses SB3's
``OffPolicyAlgorithm``). Its ``train`` runs all ``gradient_steps`` updates of a call as one jitted ``fori_loop``, so
on a CPU an update costs little more than its arithmetic; SB3's torch update pays Python and op-dispatch overhead on
every small op instead.

:class:`SBXSAC` changes three things for MBPO, none of them the update's math:

* **batches**: each update's batch is drawn on its own, as SB3's ``train`` draws it (``replay_buffer.sample(B)``
  per update; :meth:`~mbrl.buffers.MixedReplayBuffer.sample_arrays` for MBPO's mixed buffer), so every batch holds
  ``real_ratio`` real data. SBX's own ``train`` draws ``G * B`` rows at once, which from the mixed buffer would put
  all real rows into the first updates.
* **state**: :meth:`SBXSAC.state_dict` / :meth:`SBXSAC.load_state_dict` hold the actor, critic, target-critic and
  entropy-coefficient parameters, the Adam states and the JAX random keys as torch tensors (plain data for
  ``torch.load(weights_only=True)``), so a killed MBPO run resumes exactly on this backend too.
* **batched prediction**: ``predict`` on a batch pads it to a few fixed sizes, since every new batch shape is a new
  XLA compilation and imagined rollouts shrink as samples terminate.

The arithmetic differs from SB3's (other initialization, other random streams, XLA's kernels, and within a step
SBX updates the critics, then the actor and the entropy coefficient, where SB3 updates the coefficient first), so a
run on this backend is a different run from the ``sb3`` one with the same seed: the same algorithm, not the same
values; which is why the backend is a recorded config field. It computes on JAX's default device (the CPU with the
``sbx`` extra's wheels) whatever ``MBPOConfig.device`` says, on one XLA thread unless ``ROLLOUTLAB_THREADS`` or
``XLA_FLAGS`` say otherwise (importing this module sets the flags).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

#: XLA's CPU flags for one intra-op thread: the setting of every rolloutlab entry point for torch
#: (:func:`rolloutlab.threads.set_torch_threads`), for the same reason (small networks, small shared CPUs).
XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def _pin_xla_threads() -> None:
    """One XLA CPU thread unless ``ROLLOUTLAB_THREADS`` asks for more or ``XLA_FLAGS`` already sets it; read when
    JAX starts its CPU backend, so it applies where this module is imported before JAX's first computation."""
    flags = os.environ.get("XLA_FLAGS", "")
    if os.environ.get("ROLLOUTLAB_THREADS", "1") == "1" and "xla_cpu_multi_thread_eigen" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {XLA_ONE_THREAD}".strip()


_pin_xla_threads()

import jax  # noqa: E402  (after the thread flags)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from sbx import SAC as _SBX_SAC  # noqa: E402
from sbx.common.policies import BaseJaxPolicy  # noqa: E402
from sbx.common.type_aliases import ReplayBufferSamplesNp  # noqa: E402

from mbrl.buffers import MixedReplayBuffer  # noqa: E402

#: Batches up to this size are padded to the next power of two, larger ones to a multiple of it: at most about
#: ``log2(PAD_STEP) + N / PAD_STEP`` compiled shapes for batches up to ``N`` rows.
PAD_STEP = 4096


def padded_rows(n: int) -> int:
    """The batch size a batch of ``n`` rows is padded to for prediction (``n`` itself for ``n <= 1``)."""
    if n <= 1:
        return n
    if n <= PAD_STEP:
        return 1 << (n - 1).bit_length()
    return -(-n // PAD_STEP) * PAD_STEP


def _tree_tensors(tree: Any) -> dict[str, torch.Tensor]:
    """The leaves of a JAX pytree as ``{key path: tensor}`` (unsigned integers, i.e. PRNG keys, as int64)."""
    out = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        array = np.array(leaf)  # a copy: the checkpoint must not alias the run's buffers
        if array.dtype.kind == "u":
            array = array.astype(np.int64)
        out[jax.tree_util.keystr(path)] = torch.from_numpy(array)
    return out


def _tree_from_tensors(like: Any, saved: dict[str, torch.Tensor], name: str) -> Any:
    """A pytree shaped as ``like`` with the leaves of ``saved`` (from :func:`_tree_tensors`), in ``like``'s dtypes.

    Raises:
        ValueError: ``saved`` does not hold exactly ``like``'s leaves with their shapes (another configuration).
    """
    leaves, treedef = jax.tree_util.tree_flatten_with_path(like)
    keys = [jax.tree_util.keystr(path) for path, _ in leaves]
    if set(keys) != set(saved):
        raise ValueError(f"the checkpoint's SBX {name} does not match this run's network (another configuration?)")
    restored: list[Any] = []
    for key, (_, leaf) in zip(keys, leaves, strict=True):
        value = saved[key].numpy()
        if isinstance(leaf, (bool, int, float)):
            restored.append(type(leaf)(value.item()))
            continue
        if value.shape != tuple(np.shape(leaf)):
            raise ValueError(f"the checkpoint's SBX {name} {key} has shape {value.shape}, this run's {np.shape(leaf)}")
        restored.append(jnp.asarray(value.astype(np.asarray(leaf).dtype)))
    return jax.tree_util.tree_unflatten(treedef, restored)


class SBXSAC(_SBX_SAC):
    """SBX's ``SAC`` with per-update batches, a plain-data state and padded batched prediction (module docstring).

    Built with ``sbx.SAC``'s arguments (SB3's ``SAC`` arguments, ``MlpPolicy`` with ``net_arch``).
    """

    def train(self, gradient_steps: int, batch_size: int) -> None:
        """``gradient_steps`` SAC updates on batches of ``batch_size``, each batch drawn on its own; the updates run
        as one compiled loop (SBX's ``_train``)."""
        if gradient_steps <= 0:
            return
        buffer = self.replay_buffer
        assert buffer is not None
        parts: list[tuple[np.ndarray, ...]] = []
        for _ in range(gradient_steps):
            if isinstance(buffer, MixedReplayBuffer):
                parts.append(buffer.sample_arrays(batch_size))
            else:
                data = buffer.sample(batch_size, env=self._vec_normalize_env)
                fields = (data.observations, data.actions, data.next_observations, data.dones, data.rewards)
                parts.append(tuple(t.detach().cpu().numpy() for t in fields))  # type: ignore[union-attr]
        obs, actions, next_obs, dones, rewards = (
            np.concatenate([p[i] for p in parts]).astype(np.float32) for i in range(5)
        )
        samples = ReplayBufferSamplesNp(
            obs.reshape(len(obs), -1),
            actions.reshape(len(actions), -1),
            next_obs.reshape(len(next_obs), -1),
            dones.reshape(-1),
            rewards.reshape(-1),
            np.full(len(obs), self.gamma, dtype=np.float32),
        )
        progress = self._current_progress_remaining
        self._update_learning_rate(
            self.policy.actor_state.opt_state, self.lr_schedule(progress), name="learning_rate_actor"
        )
        self._update_learning_rate(
            self.policy.qf_state.opt_state,
            self.initial_qf_learning_rate or self.lr_schedule(progress),
            name="learning_rate_critic",
        )
        (
            self.policy.qf_state,
            self.policy.actor_state,
            self.ent_coef_state,
            self.key,
            (actor_loss, critic_loss, ent_coef_loss, ent_coef),
        ) = self._train(
            self.tau,
            self.target_entropy,
            gradient_steps,
            samples,
            self.policy_delay,
            (self._n_updates + 1) % self.policy_delay,
            self.policy.qf_state,
            self.policy.actor_state,
            self.ent_coef_state,
            self.key,
        )
        self._n_updates += gradient_steps
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        # The last update's values (SBX logs these rather than means over the call).
        self.logger.record("train/actor_loss", float(actor_loss))
        self.logger.record("train/critic_loss", float(critic_loss))
        self.logger.record("train/ent_coef_loss", float(ent_coef_loss))
        self.logger.record("train/ent_coef", float(ent_coef))

    def predict(  # type: ignore[override]
        self,
        observation: np.ndarray,
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        """SB3's ``predict``; a batch ``[N, obs_dim]`` is padded to :func:`padded_rows` rows and cut back."""
        obs = np.asarray(observation)
        n = obs.shape[0] if obs.ndim == 2 else 0
        target = padded_rows(n)
        if target == n:
            return super().predict(observation, state, episode_start, deterministic)  # type: ignore[no-any-return]
        padded = np.concatenate([obs, np.zeros((target - n, obs.shape[1]), dtype=obs.dtype)])
        actions, state = super().predict(padded, state, episode_start, deterministic)
        return actions[:n], state

    def td_terms(self, obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The first critic's ``Q(obs, action)`` and the target critics' ``min_j Q'_j(next_obs, mu(next_obs))`` with
        the deterministic action ``mu``, both ``[N]`` (``action`` ``[N, act_dim]`` in ``[-1, 1]``)."""
        qf, actor = self.policy.qf_state, self.policy.actor_state
        q = qf.apply_fn(qf.params, jnp.asarray(obs), jnp.asarray(action))  # [n_critics, N, 1]
        next_action = BaseJaxPolicy.select_action(actor, jnp.asarray(next_obs))
        next_q = jnp.min(qf.apply_fn(qf.target_params, jnp.asarray(next_obs), next_action), axis=0)
        return np.array(q[0, :, 0]), np.array(next_q[:, 0])  # copies: arrays of JAX buffers are read-only

    # --- exact resume -----------------------------------------------------------------------------------------

    def _states(self) -> dict[str, tuple[Callable[[], Any], Callable[[Any], None]]]:
        policy = self.policy

        def setter(owner: Any, attr: str) -> Callable[[Any], None]:
            return lambda value: setattr(owner, attr, value)

        return {
            "actor_state": (lambda: policy.actor_state, setter(policy, "actor_state")),
            "qf_state": (lambda: policy.qf_state, setter(policy, "qf_state")),
            "ent_coef_state": (lambda: self.ent_coef_state, setter(self, "ent_coef_state")),
            "key": (lambda: self.key, setter(self, "key")),
            "policy_key": (lambda: policy.key, setter(policy, "key")),
            "policy_noise_key": (lambda: policy.noise_key, setter(policy, "noise_key")),
        }

    def state_dict(self) -> dict[str, Any]:
        """Parameters (actor, critics, target critics, entropy coefficient), Adam states, random keys and counters
        as ``{name: {key path: tensor}}`` plus ints: plain data for ``torch.save`` / ``weights_only`` loading."""
        state: dict[str, Any] = {name: _tree_tensors(get()) for name, (get, _) in self._states().items()}
        state["n_updates"] = int(self._n_updates)
        state["num_timesteps"] = int(self.num_timesteps)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load a :meth:`state_dict` into a learner built with the same configuration.

        Raises:
            ValueError: The state belongs to another network configuration.
        """
        for name, (get, set_) in self._states().items():
            set_(_tree_from_tensors(get(), state[name], name))
        self._n_updates = int(state["n_updates"])
        self.num_timesteps = int(state["num_timesteps"])
