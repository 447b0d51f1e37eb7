"""Capture and restore the pieces of a run's state that are not plain ``state_dict``s: RNGs and an SB3 learner.

A whole-run checkpoint (see :meth:`mbrl.algorithms.mbpo.MBPO.save`) must let a resumed run draw the same random
numbers and continue the same optimizer trajectories. Everything here returns plain data (tensors, ints, strings,
lists, dicts), so :func:`rolloutlab.checkpoint.save_checkpoint` can store it and ``weights_only`` loading reads it back.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch


def capture_rng(generators: Mapping[str, np.random.Generator]) -> dict[str, Any]:
    """Snapshot Python's ``random``, numpy's legacy global state, torch's CPU RNG and the given numpy generators.

    Args:
        generators: Named :class:`numpy.random.Generator` objects owned by the run.
    """
    legacy: tuple[Any, ...] = tuple(np.random.get_state())
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
        "generators": {name: dict(gen.bit_generator.state) for name, gen in generators.items()},
    }


def restore_rng(state: Mapping[str, Any], generators: Mapping[str, np.random.Generator]) -> None:
    """Restore a snapshot from :func:`capture_rng` into the global RNGs and the given generators (in place)."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    legacy = state["numpy_legacy"]
    np.random.set_state(
        (
            legacy["name"],
            legacy["keys"].numpy().astype(np.uint32),
            legacy["pos"],
            legacy["has_gauss"],
            legacy["cached_gaussian"],
        )
    )
    torch.set_rng_state(state["torch"])
    missing = set(generators) - set(state["generators"])
    if missing:
        raise KeyError(f"checkpoint has no RNG state for {sorted(missing)}")
    for name, gen in generators.items():
        gen.bit_generator.state = state["generators"][name]


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
