"""The parts of a run's state that are not ``state_dict``s: random streams, the episode in progress, an SB3 SAC.

Every checkpoint in rolloutlab that must let a resumed run continue *exactly* (the same random draws, the same
episode, the same optimizer trajectory) saves these through this one module:

* :func:`capture_rng` / :func:`restore_rng`: Python's ``random``, numpy's legacy global state, torch's global CPU
  RNG (and its CUDA ones, once CUDA is in use) and any named generators of the run; :func:`generator_state` /
  :func:`set_generator_state` for one generator on its own (numpy :class:`~numpy.random.Generator` or
  :class:`torch.Generator`), for code that must not touch the global streams (a learner inside a larger program).
* :class:`EpisodeReplay`: the environment's episode in progress, saved as how it was reset and the actions taken
  since, and put back by replaying them (see the class for why replay rather than the env's internal state).
* :func:`capture_sac` / :func:`restore_sac`: networks, optimizers, entropy coefficient and counters of SB3's SAC.

Everything is returned as plain data (tensors, ints, floats, strings, lists, tuples, dicts), so
:func:`rolloutlab.checkpoint.save_checkpoint` stores it and ``weights_only`` loading reads it back (numpy's 128-bit
generator states stay Python ints, which ``weights_only`` accepts).
"""

from __future__ import annotations

import copy
import json
import random
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

__all__ = [
    "EpisodeReplay",
    "capture_rng",
    "capture_sac",
    "generator_state",
    "restore_rng",
    "restore_sac",
    "set_generator_state",
]

Generator = np.random.Generator | torch.Generator


# --- random streams -------------------------------------------------------------------------------------------


def generator_state(gen: Generator) -> Any:
    """One generator's state as plain data: a dict for numpy (PCG64 and the like), a byte tensor for torch."""
    if isinstance(gen, torch.Generator):
        return gen.get_state()
    return copy.deepcopy(dict(gen.bit_generator.state))


def set_generator_state(gen: Generator, saved: Any) -> None:
    """Put a state from :func:`generator_state` back into ``gen`` (in place).

    Also reads the layouts that checkpoints written before this module hold: a numpy state as JSON text (Dyna-DQN,
    the toy learner, the in-context trainer) or as ``{"json": text}`` (the world model).
    """
    if isinstance(gen, torch.Generator):
        gen.set_state(saved)
        return
    if isinstance(saved, Mapping) and set(saved) == {"json"}:
        saved = saved["json"]
    gen.bit_generator.state = json.loads(saved) if isinstance(saved, str) else dict(saved)


def capture_rng(generators: Mapping[str, Generator] | None = None) -> dict[str, Any]:
    """Snapshot Python's ``random``, numpy's legacy global state, torch's global CPU RNG and the named generators.

    Once the process has used CUDA, torch's global CUDA generators (one per GPU) are saved too, under
    ``"torch_cuda"``: a trainer on a GPU (SB3's SAC) samples from them. A process that never touched CUDA saves no
    such key, so CPU runs write the same snapshot on every machine.

    Args:
        generators: Generators owned by the run, by name (numpy or torch); restored by name.
    """
    legacy: tuple[Any, ...] = tuple(np.random.get_state())
    cuda: dict[str, Any] = {}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        cuda["torch_cuda"] = torch.cuda.get_rng_state_all()
    return {
        "python": random.getstate(),
        "numpy_legacy": {
            "name": str(legacy[0]),
            "keys": torch.as_tensor(np.asarray(legacy[1], dtype=np.int64)),
            "pos": int(legacy[2]),
            "has_gauss": int(legacy[3]),
            "cached_gaussian": float(legacy[4]),
        },
        "torch": torch.get_rng_state(),
        **cuda,
        "generators": {name: generator_state(gen) for name, gen in (generators or {}).items()},
    }


def restore_rng(state: Mapping[str, Any], generators: Mapping[str, Generator] | None = None) -> None:
    """Restore a snapshot from :func:`capture_rng` into the global streams and the named generators (in place).

    Saved CUDA generator states are restored where this process sees the same number of GPUs, and otherwise left
    out (a run saved on a GPU and resumed on the CPU has no CUDA stream to continue).

    Raises:
        KeyError: The snapshot holds no state for one of ``generators``.
    """
    python = state["python"]
    # Meta-training checkpoints written before this module hold Python's state as JSON text (lists, not tuples).
    version, internal, gauss = json.loads(python) if isinstance(python, str) else python
    random.setstate((version, tuple(internal), gauss))
    legacy = state["numpy_legacy"]
    keys = legacy["keys"].numpy().astype(np.uint32)
    np.random.set_state(
        (legacy.get("name", "MT19937"), keys, legacy["pos"], legacy["has_gauss"], legacy["cached_gaussian"])
    )
    torch.set_rng_state(state["torch"])
    cuda = state.get("torch_cuda")
    if cuda is not None and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)
    # Those older meta-training checkpoints also keep their one named generator at the top level.
    saved = state.get("generators", state)
    missing = sorted(set(generators or {}) - set(saved))
    if missing:
        raise KeyError(f"checkpoint has no RNG state for {missing}")
    for name, gen in (generators or {}).items():
        set_generator_state(gen, saved[name])


# --- the episode in progress ----------------------------------------------------------------------------------


class EpisodeReplay:
    """Record one environment's episode in progress so that a resumed run can put the environment back.

    Route the env's ``reset`` and ``step`` through :meth:`reset` and :meth:`step`; :meth:`state_dict` then holds how
    the episode began (the reset seed, or for an unseeded reset the state of the env's ``np_random`` just before
    it) and every action since, and :meth:`restore` resets a freshly made env the same way and replays the actions.

    Why replay instead of saving the env's internal state: what makes up that state differs by env (classic control
    keeps ``unwrapped.state``, MuJoCo ``qpos``/``qvel``/``time`` and its warm-start buffers, wrappers keep their own
    counters such as ``TimeLimit``'s), and saving any one of those misses the rest. Gymnasium envs are deterministic
    given the reset seed and the actions, so replay restores all of it at once, including the env's ``np_random``,
    for any env, at the cost of re-running at most one episode. :meth:`restore` checks the replayed observation
    against the saved one, so an env that is not deterministic under replay is caught rather than silently
    diverging.
    """

    def __init__(self) -> None:
        self.seed: int | None = None
        self.np_random: Any = None
        self.actions: list[np.ndarray] = []

    def reset(self, env: Any, seed: int | None = None) -> tuple[Any, dict[str, Any]]:
        """``env.reset(seed=seed)``, recorded as the start of a new episode."""
        self.seed = None if seed is None else int(seed)
        # An unseeded reset draws from the env's generator as it stands: record it to draw the same start again.
        self.np_random = None if seed is not None else generator_state(env.unwrapped.np_random)
        self.actions = []
        return env.reset(seed=seed)  # type: ignore[no-any-return]

    def step(self, env: Any, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """``env.step(action)``, with the action recorded."""
        self.actions.append(np.array(action, copy=True))
        return env.step(action)  # type: ignore[no-any-return]

    def state_dict(self) -> dict[str, Any]:
        """The episode's reset and actions as plain data."""
        actions = torch.as_tensor(np.stack(self.actions)) if self.actions else None
        return {"seed": self.seed, "np_random": self.np_random, "actions": actions}

    def restore(self, env: Any, state: Mapping[str, Any], expected_obs: np.ndarray) -> np.ndarray | None:
        """Reset ``env`` as the saved episode was reset and replay its actions; adopt the saved episode.

        Args:
            env: An environment made like the recorded one (any state; it is reset here).
            state: A :meth:`state_dict` snapshot.
            expected_obs: The observation the run held when the snapshot was taken.

        Returns:
            The replayed observation, equal to ``expected_obs``; ``None`` (with a warning) if the env did not replay
            to it, in which case the caller should start a new episode.
        """
        seed = state["seed"]
        if seed is None:
            set_generator_state(env.unwrapped.np_random, state["np_random"])
        obs, _ = env.reset(seed=seed)
        actions = state["actions"]
        for action in [] if actions is None else actions.numpy():
            # Discrete actions go back as the Python ints they were given as.
            obs = env.step(action.item() if action.ndim == 0 else action)[0]
        self.seed, self.np_random = seed, state["np_random"]
        self.actions = [] if actions is None else list(actions.numpy())
        expected = np.asarray(expected_obs)
        if not np.array_equal(np.asarray(obs, dtype=expected.dtype), expected):
            warnings.warn(
                f"replaying the saved episode ({len(self.actions)} actions) did not reproduce the saved observation: "
                "the environment is not deterministic under replay; starting a new episode instead",
                RuntimeWarning,
                stacklevel=2,
            )
            return None
        return np.asarray(obs)


# --- an SB3 SAC learner ---------------------------------------------------------------------------------------


def capture_sac(sac: Any) -> dict[str, Any]:
    """Networks, optimizers, entropy coefficient and counters of an SB3 ``SAC`` as plain data."""
    state: dict[str, Any] = {
        "policy": sac.policy.state_dict(),
        "actor_optimizer": sac.actor.optimizer.state_dict(),
        "critic_optimizer": sac.critic.optimizer.state_dict(),
        "n_updates": int(sac._n_updates),
        "num_timesteps": int(sac.num_timesteps),
    }
    if sac.log_ent_coef is not None:
        state["log_ent_coef"] = sac.log_ent_coef.detach().clone()
    if sac.ent_coef_optimizer is not None:
        state["ent_coef_optimizer"] = sac.ent_coef_optimizer.state_dict()
    return state


def restore_sac(sac: Any, state: Mapping[str, Any]) -> None:
    """Load a snapshot from :func:`capture_sac` into an SB3 ``SAC`` built with the same configuration."""
    sac.policy.load_state_dict(state["policy"])
    sac.actor.optimizer.load_state_dict(state["actor_optimizer"])
    sac.critic.optimizer.load_state_dict(state["critic_optimizer"])
    sac._n_updates = int(state["n_updates"])
    sac.num_timesteps = int(state["num_timesteps"])
    if "log_ent_coef" in state:
        # In place: the entropy optimizer holds a reference to this very tensor.
        with torch.no_grad():
            sac.log_ent_coef.copy_(state["log_ent_coef"])
    if "ent_coef_optimizer" in state:
        sac.ent_coef_optimizer.load_state_dict(state["ent_coef_optimizer"])
