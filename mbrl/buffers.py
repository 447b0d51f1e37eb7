"""Replay buffers for model-based RL: real transitions, imagined transitions, and SAC batches that mix the two.

* :class:`TransitionBuffer` is a circular numpy buffer of ``(obs, action, reward, next_obs, terminated, truncated)``.
  ``terminated`` (the MDP ended: no bootstrap) and ``truncated`` (a time limit or a model-rollout horizon cut:
  bootstrap from ``next_obs``) are stored apart, so a horizon cut is never learned as a terminal state.
* :class:`ModelBuffer` holds imagined transitions grouped by the epoch that produced them and keeps only the last
  ``retain_epochs`` epochs (MBPO's ``model_retain_epochs``, Janner et al. 2019, appendix C): data from a model that has
  since been retrained ages out as a whole.
* :class:`MixedReplayBuffer` is an SB3 :class:`~stable_baselines3.common.buffers.ReplayBuffer` whose ``sample`` draws
  a fixed share ``real_ratio`` of every batch from the real buffer and the rest from the model buffer (MBPO's
  ``real_ratio``), so SB3's ``SAC.train`` consumes mixed data unchanged.

Actions are stored in the environment's own units; :class:`MixedReplayBuffer` rescales Box actions to SB3's
``[-1, 1]`` convention when it hands a batch to SAC.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.type_aliases import ReplayBufferSamples
from stable_baselines3.common.vec_env import VecNormalize

_FIELDS = ("obs", "action", "reward", "next_obs", "terminated", "truncated")


@dataclass
class Transitions:
    """A batch of transitions, all arrays with leading dimension ``N``.

    Attributes:
        obs: ``[N, obs_dim]`` float32.
        action: ``[N, act_dim]`` float32 (continuous) or ``[N]`` int64 (discrete).
        reward: ``[N]`` float32.
        next_obs: ``[N, obs_dim]`` float32.
        terminated: ``[N]`` bool, the episode really ended (no bootstrapping).
        truncated: ``[N]`` bool, cut by a time limit or rollout horizon (bootstrap from ``next_obs``).
        steps: ``[N]`` int64, env steps between ``obs`` and ``next_obs``: 1 for a real transition, ``n`` for an
            imagined multi-step one whose ``reward`` is the discounted sum of ``n`` rewards (its value target
            bootstraps with ``gamma ** n``). ``None`` (the default) means all ones.
    """

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    next_obs: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    steps: np.ndarray = None  # type: ignore[assignment]  # filled in __post_init__

    def __post_init__(self) -> None:
        if self.steps is None:
            self.steps = np.ones(np.shape(self.terminated), np.int64)

    def __len__(self) -> int:
        return int(self.obs.shape[0])

    @staticmethod
    def empty(obs_dim: int, action_shape: tuple[int, ...], action_dtype: Any) -> Transitions:
        """A batch of no transitions, with the shapes and dtypes of a non-empty one (so it concatenates)."""
        return Transitions(**_zero_fields((0,), obs_dim, action_shape, action_dtype))

    @staticmethod
    def concatenate(parts: list[Transitions]) -> Transitions:
        """Stack several batches along the first axis (at least one part)."""
        return Transitions(*(np.concatenate([getattr(p, f) for p in parts], axis=0) for f in (*_FIELDS, "steps")))

    def take(self, idx: np.ndarray) -> Transitions:
        """The sub-batch at indices ``idx``."""
        return Transitions(*(getattr(self, f)[idx] for f in (*_FIELDS, "steps")))


def _zero_fields(
    leading: tuple[int, ...], obs_dim: int, action_shape: tuple[int, ...], action_dtype: Any
) -> dict[str, np.ndarray]:
    """Zeroed arrays for the six stored fields (:data:`_FIELDS`), each with leading dimensions ``leading``."""
    return {
        "obs": np.zeros((*leading, obs_dim), np.float32),
        "action": np.zeros((*leading, *action_shape), action_dtype),
        "reward": np.zeros(leading, np.float32),
        "next_obs": np.zeros((*leading, obs_dim), np.float32),
        "terminated": np.zeros(leading, bool),
        "truncated": np.zeros(leading, bool),
    }


def _action_layout(action_dim: int, discrete: bool) -> tuple[tuple[int, ...], type]:
    return ((), np.int64) if discrete else ((action_dim,), np.float32)


class _TransitionStore:
    """Base of the buffers: the layout of one stored transition (arguments as in :class:`TransitionBuffer`)."""

    def __init__(self, obs_dim: int, action_dim: int, discrete_actions: bool) -> None:
        self.obs_dim = int(obs_dim)
        self.action_dim = int(action_dim)
        self.discrete_actions = bool(discrete_actions)

    def _zeros(self, *leading: int) -> dict[str, np.ndarray]:
        """Zeroed arrays for the six stored fields in this layout, each with leading dimensions ``leading``."""
        return _zero_fields(leading, self.obs_dim, *_action_layout(self.action_dim, self.discrete_actions))


class _CircularStore(_TransitionStore):
    """Base of the circular buffers: the six field arrays, shaped ``[*runs, capacity, ...]``, and the write position.

    Every run axis in ``runs`` is written in lockstep, so ``pos`` and ``size`` are shared.
    """

    def __init__(
        self, runs: tuple[int, ...], capacity: int, obs_dim: int, action_dim: int, discrete_actions: bool
    ) -> None:
        super().__init__(obs_dim, action_dim, discrete_actions)
        self.capacity = int(capacity)
        zeros = self._zeros(*runs, self.capacity)
        self.obs, self.action, self.reward, self.next_obs, self.terminated, self.truncated = (zeros[n] for n in _FIELDS)
        self.pos = 0
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def _oldest_first(self) -> np.ndarray:
        """Storage indices of the ``size`` stored slots, oldest first."""
        if self.size < self.capacity:
            return np.arange(self.size)
        return (self.pos + np.arange(self.capacity)) % self.capacity


class TransitionBuffer(_CircularStore):
    """Circular buffer of transitions with uniform sampling.

    Args:
        capacity: Maximum number of transitions; the oldest are overwritten.
        obs_dim: Observation size.
        action_dim: Action size (the number of actions for discrete spaces; actions are then stored as indices).
        discrete_actions: Whether actions are integer indices.
    """

    def __init__(self, capacity: int, obs_dim: int, action_dim: int, discrete_actions: bool = False) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        super().__init__((), capacity, obs_dim, action_dim, discrete_actions)

    def add(
        self,
        obs: np.ndarray,
        action: np.ndarray | int,
        reward: float,
        next_obs: np.ndarray,
        terminated: bool,
        truncated: bool,
    ) -> None:
        """Store one transition (shapes without the batch dimension)."""
        self.add_batch(
            Transitions(
                obs=np.asarray(obs, dtype=np.float32)[None],
                action=np.asarray(action)[None],
                reward=np.asarray([reward], dtype=np.float32),
                next_obs=np.asarray(next_obs, dtype=np.float32)[None],
                terminated=np.asarray([terminated], dtype=bool),
                truncated=np.asarray([truncated], dtype=bool),
            )
        )

    def add_batch(self, batch: Transitions) -> None:
        """Store a batch; if it is larger than the capacity only its last ``capacity`` rows are kept."""
        n = len(batch)
        if n == 0:
            return
        if n > self.capacity:
            batch = batch.take(np.arange(n - self.capacity, n))
            n = self.capacity
        idx = (self.pos + np.arange(n)) % self.capacity
        for name in _FIELDS:
            getattr(self, name)[idx] = getattr(batch, name)
        self.pos = int((self.pos + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def all(self) -> Transitions:
        """Every stored transition, oldest first."""
        return self.take(self._oldest_first())

    def take(self, idx: np.ndarray) -> Transitions:
        """Transitions at storage indices ``idx``."""
        return Transitions(*(getattr(self, name)[idx] for name in _FIELDS))

    def sample(self, n: int, rng: np.random.Generator) -> Transitions:
        """``n`` transitions drawn uniformly with replacement."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty buffer")
        return self.take(rng.integers(0, self.size, size=n))

    def state_dict(self) -> dict[str, Any]:
        """Stored data as tensors (only the filled part) plus the write position."""
        state: dict[str, Any] = {name: torch.as_tensor(getattr(self, name)[: self.size].copy()) for name in _FIELDS}
        state.update(pos=self.pos, size=self.size, capacity=self.capacity)
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot from :meth:`state_dict` (the capacity must match)."""
        if int(state["capacity"]) != self.capacity:
            raise ValueError(f"buffer capacity mismatch: checkpoint {state['capacity']}, buffer {self.capacity}")
        size = int(state["size"])
        for name in _FIELDS:
            getattr(self, name)[:size] = state[name].numpy()
        self.size = size
        self.pos = int(state["pos"])


def _chunk_transitions(chunk: Mapping[str, Any]) -> Transitions:
    """A saved :class:`ModelBuffer` chunk back as transitions; snapshots written before multi-step imagined
    transitions existed have no ``steps`` and are all one-step."""
    fields = {name: chunk[name].numpy() for name in _FIELDS}
    steps = chunk["steps"].numpy() if "steps" in chunk else np.ones(len(fields["terminated"]), np.int64)
    return Transitions(**fields, steps=steps)


class ModelBuffer(_TransitionStore):
    """Imagined transitions grouped by epoch; only the last ``retain_epochs`` epochs are kept.

    Args:
        retain_epochs: How many epochs of model data to keep (MBPO's ``model_retain_epochs``).
        obs_dim: Observation size.
        action_dim: Action size (number of actions if discrete).
        discrete_actions: Whether actions are integer indices.
    """

    def __init__(self, retain_epochs: int, obs_dim: int, action_dim: int, discrete_actions: bool = False) -> None:
        if retain_epochs < 1:
            raise ValueError(f"retain_epochs must be >= 1, got {retain_epochs}")
        super().__init__(obs_dim, action_dim, discrete_actions)
        self.retain_epochs = int(retain_epochs)
        self._chunks: list[tuple[int, Transitions]] = []
        self._cache: Transitions | None = None

    def __len__(self) -> int:
        return sum(len(chunk) for _, chunk in self._chunks)

    @property
    def epochs(self) -> list[int]:
        """Epochs whose data is currently held, oldest first."""
        return sorted({epoch for epoch, _ in self._chunks})

    def add_batch(self, batch: Transitions, epoch: int) -> None:
        """Add imagined transitions produced in ``epoch`` and drop epochs older than the retention window."""
        if len(batch):
            self._chunks.append((int(epoch), batch))
        keep = set(sorted({e for e, _ in self._chunks})[-self.retain_epochs :])
        self._chunks = [(e, c) for e, c in self._chunks if e in keep]
        self._cache = None

    def all(self) -> Transitions:
        """Every held transition (an empty batch if none)."""
        if self._cache is None:
            if self._chunks:
                self._cache = Transitions.concatenate([c for _, c in self._chunks])
            else:
                self._cache = Transitions(**self._zeros(0))
        return self._cache

    def sample(self, n: int, rng: np.random.Generator) -> Transitions:
        """``n`` transitions drawn uniformly with replacement over all retained epochs."""
        data = self.all()
        if len(data) == 0:
            raise ValueError("cannot sample from an empty model buffer")
        return data.take(rng.integers(0, len(data), size=n))

    def clear(self) -> None:
        """Drop all imagined data."""
        self._chunks = []
        self._cache = None

    def state_dict(self) -> dict[str, Any]:
        """Chunks as tensors with their epochs."""
        return {
            "retain_epochs": self.retain_epochs,
            "chunks": [
                {
                    "epoch": e,
                    **{name: torch.as_tensor(np.ascontiguousarray(getattr(c, name))) for name in (*_FIELDS, "steps")},
                }
                for e, c in self._chunks
            ],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot from :meth:`state_dict`."""
        self.retain_epochs = int(state["retain_epochs"])
        self._chunks = [(int(chunk["epoch"]), _chunk_transitions(chunk)) for chunk in state["chunks"]]
        self._cache = None


class MixedReplayBuffer(ReplayBuffer):
    """An SB3 replay buffer whose batches hold a fixed share of real data, the rest imagined (MBPO's ``real_ratio``).

    SB3's ``SAC.train`` calls ``replay_buffer.sample(batch_size)``; with this buffer installed as ``sac.replay_buffer``
    each batch has ``round(real_ratio * batch_size)`` real transitions and the rest model transitions (all real while
    the model buffer is empty). ``dones`` in the returned samples are the ``terminated`` flags only, so time-limit and
    horizon cuts bootstrap. The SB3 storage arrays of the parent class are allocated at size 1 and never used.

    Args:
        real: The real-transition buffer (also where :meth:`add` writes, if SB3 code calls it).
        model: The imagined-transition buffer.
        real_ratio: Share of real data in each batch, in ``[0, 1]``.
        observation_space: The environment's observation space.
        action_space: The environment's action space.
        rng: Generator for sampling (saved with the run so that a resumed run draws the same batches).
        device: Torch device of the returned tensors.
    """

    def __init__(
        self,
        real: TransitionBuffer,
        model: ModelBuffer,
        real_ratio: float,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        rng: np.random.Generator,
        device: torch.device | str = "cpu",
    ) -> None:
        super().__init__(1, observation_space, action_space, device=device, n_envs=1)
        if not 0.0 <= real_ratio <= 1.0:
            raise ValueError(f"real_ratio must be in [0, 1], got {real_ratio}")
        self.real = real
        self.model = model
        self.real_ratio = float(real_ratio)
        self.rng = rng
        self._low: np.ndarray | None = None
        self._span: np.ndarray | None = None
        if isinstance(action_space, spaces.Box):
            self._low = action_space.low.astype(np.float32)
            self._span = (action_space.high - action_space.low).astype(np.float32)

    def size(self) -> int:
        return len(self.real) + len(self.model)

    def add(
        self,
        obs: np.ndarray,
        next_obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        done: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> None:
        """SB3-style add of one vectorized step (``n_envs == 1``) into the real buffer.

        ``done`` and ``infos[0]["TimeLimit.truncated"]`` are split back into terminated / truncated.
        """
        truncated = bool(infos[0].get("TimeLimit.truncated", False)) if infos else False
        terminated = bool(np.asarray(done).reshape(-1)[0]) and not truncated
        reward_value = float(np.asarray(reward).reshape(-1)[0])
        flat_action = np.asarray(action).reshape(-1)
        stored_action = flat_action[0] if self.real.discrete_actions else flat_action
        obs_row, next_row = np.asarray(obs).reshape(-1), np.asarray(next_obs).reshape(-1)
        self.real.add(obs_row, stored_action, reward_value, next_row, terminated, truncated)

    def split(self, batch_size: int) -> tuple[int, int]:
        """How many real and model samples a batch of ``batch_size`` holds now."""
        if len(self.model) == 0:
            return batch_size, 0
        n_real = round(self.real_ratio * batch_size)
        return n_real, batch_size - n_real

    def sample_transitions(self, batch_size: int) -> Transitions:
        """A mixed batch as numpy :class:`Transitions` (actions in environment units)."""
        n_real, n_model = self.split(batch_size)
        parts = []
        if n_real:
            parts.append(self.real.sample(n_real, self.rng))
        if n_model:
            parts.append(self.model.sample(n_model, self.rng))
        return Transitions.concatenate(parts)

    def sample_arrays(self, batch_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A mixed batch as numpy arrays in SB3's layout: ``obs [B, obs_dim]``, ``action [B, act_dim]`` (Box actions
        rescaled to ``[-1, 1]``; discrete ones ``[B, 1]``), ``next_obs [B, obs_dim]``, ``dones [B, 1]`` (terminated
        only, float32) and ``rewards [B, 1]``. What :meth:`sample` wraps in tensors; a learner that computes outside
        torch (the SBX backend) takes it as it is."""
        batch = self.sample_transitions(batch_size)
        action = batch.action.astype(np.float32)
        if self._low is not None and self._span is not None:
            action = 2.0 * (action - self._low) / self._span - 1.0
        else:
            action = action.reshape(-1, 1)
        return (
            batch.obs,
            action,
            batch.next_obs,
            batch.terminated.astype(np.float32).reshape(-1, 1),
            batch.reward.reshape(-1, 1),
        )

    def sample(self, batch_size: int, env: VecNormalize | None = None) -> ReplayBufferSamples:
        """A mixed batch as SB3 samples: Box actions rescaled to ``[-1, 1]``, ``dones`` = terminated only."""
        if env is not None:
            # The model is trained on raw observations; a VecNormalize wrapper would silently disagree with it.
            raise ValueError("MixedReplayBuffer does not support VecNormalize environments")
        return ReplayBufferSamples(*tuple(map(self.to_torch, self.sample_arrays(batch_size))))


class RunBatchedBuffer(_CircularStore):
    """``B`` circular transition buffers written in lockstep: one transition per run at every env step.

    The storage for ``B`` independent runs advanced together (Dyna-DQN batched over runs): arrays carry a leading run
    axis, so one minibatch per run is one fancy-indexing call. Run ``i``'s content depends only on what run ``i``
    stored, so runs stay independent.

    Args:
        num_runs: ``B``.
        capacity: Transitions kept per run; the oldest are overwritten.
        obs_dim: Observation size.
        action_dim: Action size (the number of actions for discrete spaces; actions are then stored as indices).
        discrete_actions: Whether actions are integer indices.
    """

    def __init__(
        self, num_runs: int, capacity: int, obs_dim: int, action_dim: int, discrete_actions: bool = False
    ) -> None:
        if num_runs < 1 or capacity < 1:
            raise ValueError(f"need num_runs >= 1 and capacity >= 1, got {num_runs} and {capacity}")
        self.num_runs = int(num_runs)
        super().__init__((self.num_runs,), capacity, obs_dim, action_dim, discrete_actions)

    def add(
        self,
        obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
    ) -> None:
        """Store one transition per run (arrays with leading dimension ``B``)."""
        values = (obs, action, reward, next_obs, terminated, truncated)
        for name, value in zip(_FIELDS, values, strict=True):
            getattr(self, name)[:, self.pos] = value
        self.pos = (self.pos + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def run(self, i: int) -> Transitions:
        """Every transition of run ``i``, oldest first."""
        idx = self._oldest_first()
        return Transitions(*(getattr(self, name)[i, idx] for name in _FIELDS))

    def gather(self, idx: np.ndarray) -> Transitions:
        """Transitions at per-run storage indices ``idx [B, n]``; every result array has shape ``[B, n, ...]``."""
        runs = np.arange(self.num_runs)[:, None]
        return Transitions(*(getattr(self, name)[runs, idx] for name in _FIELDS))

    def state_dict(self) -> dict[str, Any]:
        """Stored data as tensors (only the filled part) plus the write position."""
        state: dict[str, Any] = {
            name: torch.as_tensor(np.ascontiguousarray(getattr(self, name)[:, : self.size])) for name in _FIELDS
        }
        state.update(pos=self.pos, size=self.size, capacity=self.capacity, num_runs=self.num_runs)
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot from :meth:`state_dict` (capacity and number of runs must match)."""
        if (int(state["capacity"]), int(state["num_runs"])) != (self.capacity, self.num_runs):
            raise ValueError(
                f"buffer shape mismatch: checkpoint {state['num_runs']} runs x {state['capacity']}, "
                f"buffer {self.num_runs} x {self.capacity}"
            )
        size = int(state["size"])
        for name in _FIELDS:
            getattr(self, name)[:, :size] = state[name].numpy()
        self.size, self.pos = size, int(state["pos"])
