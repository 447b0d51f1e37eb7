"""rolloutlab.run_state: RNG streams, episode replay and SB3 SAC state survive a weights_only checkpoint round trip."""

from __future__ import annotations

import json
import random
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3 import SAC

from rolloutlab.checkpoint import load_checkpoint, save_checkpoint
from rolloutlab.run_state import (
    EpisodeReplay,
    capture_rng,
    capture_sac,
    generator_state,
    restore_rng,
    restore_sac,
    set_generator_state,
)


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


def test_named_torch_generator_round_trip(tmp_path: Path) -> None:
    gen = torch.Generator().manual_seed(5)
    torch.rand(3, generator=gen)
    save_checkpoint(tmp_path / "rng.pt", {"rng": capture_rng({"g": gen})}, kind="test")
    expected = torch.rand(4, generator=gen)
    other = torch.Generator().manual_seed(0)
    restore_rng(load_checkpoint(tmp_path / "rng.pt")["state"]["rng"], {"g": other})
    assert torch.equal(torch.rand(4, generator=other), expected)
    with pytest.raises(KeyError, match="no RNG state for"):
        restore_rng(load_checkpoint(tmp_path / "rng.pt")["state"]["rng"], {"missing": other})


def test_generator_state_reads_older_layouts() -> None:
    gen = np.random.default_rng(9)
    gen.random(5)
    state = generator_state(gen)
    expected = gen.random(3)
    # Besides its own dict: JSON text (Dyna-DQN, toy learner, in-context trainer) and {"json": text} (world model),
    # as checkpoints written before rolloutlab.run_state hold them.
    for saved in (state, json.dumps(state), {"json": json.dumps(state)}):
        other = np.random.default_rng(0)
        set_generator_state(other, saved)
        np.testing.assert_array_equal(other.random(3), expected)


def test_restore_reads_meta_training_layout_from_before_the_helper() -> None:
    # What meta/control/training.py wrote before rolloutlab.run_state (committed checkpoints hold it).
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    space = np.random.default_rng(4)
    legacy = np.random.get_state()
    old = {
        "torch": torch.get_rng_state(),
        "numpy_legacy": {
            "keys": torch.as_tensor(np.asarray(legacy[1], dtype=np.int64)),
            "pos": int(legacy[2]),
            "has_gauss": int(legacy[3]),
            "cached_gaussian": float(legacy[4]),
        },
        "python": json.dumps(random.getstate()),
        "action_space": json.dumps(space.bit_generator.state),
    }
    expected = _draws(space)
    other = np.random.default_rng(0)
    restore_rng(old, {"action_space": other})
    assert _draws(other) == expected


def test_episode_replay_puts_the_env_back(tmp_path: Path) -> None:
    """Seeded (Pendulum, continuous) and unseeded (CartPole, discrete) resets, then replay in a fresh env."""
    for env_id, seed, policy in (
        ("Pendulum-v1", 7, lambda i: np.array([np.sin(i)], dtype=np.float32)),
        ("CartPole-v1", None, lambda i: i % 2),
    ):
        env, replay = gym.make(env_id), EpisodeReplay()
        env.reset(seed=3)  # the unseeded reset below then draws from this generator
        obs, _ = replay.reset(env, seed=seed)
        for i in range(9):
            obs = replay.step(env, policy(i))[0]
        save_checkpoint(tmp_path / "ep.pt", {"episode": replay.state_dict()}, kind="test")
        expected = [env.step(policy(i))[0] for i in range(9, 14)]
        fresh, restored = gym.make(env_id), EpisodeReplay()
        saved = load_checkpoint(tmp_path / "ep.pt")["state"]["episode"]
        assert np.array_equal(restored.restore(fresh, saved, np.asarray(obs)), obs)
        assert all(np.array_equal(fresh.step(policy(i))[0], o) for i, o in zip(range(9, 14), expected, strict=True))
        assert len(restored.actions) == 9
        # The env's own generator is back too: the next episode starts where the uninterrupted one does.
        assert np.array_equal(restored.reset(fresh)[0], replay.reset(env)[0])


def test_episode_replay_that_diverges_warns_and_gives_none() -> None:
    env, replay = gym.make("Pendulum-v1"), EpisodeReplay()
    obs, _ = replay.reset(env, seed=1)
    obs = replay.step(env, np.array([1.0], dtype=np.float32))[0]
    with pytest.warns(RuntimeWarning, match="not deterministic under replay"):
        assert replay.restore(gym.make("Pendulum-v1"), replay.state_dict(), obs + 1.0) is None


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
