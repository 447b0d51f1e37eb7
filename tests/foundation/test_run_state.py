"""RNG and SB3 SAC state capture survive a weights_only checkpoint round trip."""

from __future__ import annotations

import random
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import SAC

from mbrl.run_state import capture_rng, capture_sac, restore_rng, restore_sac
from rolloutlab.checkpoint import load_checkpoint, save_checkpoint


def _draws(gen: np.random.Generator) -> tuple[float, float, float, float]:
    return random.random(), float(np.random.rand()), float(torch.rand(1)), float(gen.random())


def test_rng_round_trip(tmp_path: Path) -> None:
    gen = np.random.default_rng(123)
    _draws(gen)
    np.random.randn()  # leave a cached gaussian in the legacy state
    save_checkpoint(tmp_path / "rng.pt", {"rng": capture_rng({"run": gen})}, kind="test")
    expected = [_draws(gen) for _ in range(3)]
    other = np.random.default_rng(0)
    restore_rng(load_checkpoint(tmp_path / "rng.pt")["state"]["rng"], {"run": other})
    assert [_draws(other) for _ in range(3)] == expected


def test_sac_round_trip(tmp_path: Path) -> None:
    def make() -> SAC:
        return SAC(
            "MlpPolicy",
            gym.make("Pendulum-v1"),
            learning_starts=0,
            batch_size=16,
            policy_kwargs={"net_arch": [8]},
            buffer_size=500,
            seed=0,
            device="cpu",
        )

    sac = make()
    sac.learn(40)
    save_checkpoint(tmp_path / "sac.pt", {"sac": capture_sac(sac)}, kind="test")
    fresh = make()
    restore_sac(fresh, load_checkpoint(tmp_path / "sac.pt")["state"]["sac"])
    for key, value in sac.policy.state_dict().items():
        torch.testing.assert_close(fresh.policy.state_dict()[key], value)
    assert fresh.log_ent_coef is not None and sac.log_ent_coef is not None
    assert float(fresh.log_ent_coef.detach()) == float(sac.log_ent_coef.detach())
    assert fresh._n_updates == sac._n_updates and fresh._n_updates > 0
    # The entropy optimizer still drives the (restored) coefficient tensor.
    assert fresh.ent_coef_optimizer is not None
    assert fresh.ent_coef_optimizer.param_groups[0]["params"][0] is fresh.log_ent_coef
    state = fresh.actor.optimizer.state_dict()["state"]
    torch.testing.assert_close(state[0]["exp_avg"], sac.actor.optimizer.state_dict()["state"][0]["exp_avg"])
