"""The known reward functions reproduce each environment's own reward on real transitions."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import envs  # noqa: F401  (registers rolloutlab/PointMass-v0)
from mbrl import rewards
from mbrl.rewards import known_env_names, register_reward_fn, reward_fn


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "InvertedPendulum-v5", "rolloutlab/PointMass-v0"])
def test_reward_fn_matches_the_env(env_id: str) -> None:
    env = gym.make(env_id)
    fn = reward_fn(env_id)
    assert fn is not None
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    rows, rewards = [], []
    for _ in range(300):
        # Actions past the bounds too: the function must clip as the env does.
        action = rng.uniform(-1.5, 1.5, size=env.action_space.shape) * env.action_space.high
        nxt, reward, terminated, truncated, _ = env.step(action.astype(np.float32))
        rows.append((obs, action, nxt))
        rewards.append(reward)
        obs = nxt
        if terminated or truncated:
            obs, _ = env.reset()
    o, a, n = (np.array([r[i] for r in rows], dtype=np.float64) for i in range(3))
    # The observations are float32 roundings of the env's float64 state.
    np.testing.assert_allclose(fn(o, a, n), np.array(rewards), rtol=1e-4, atol=1e-4)
    assert {0.0, 1.0} >= set(np.unique(fn(o, a, n))) or env_id != "InvertedPendulum-v5"


def test_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rewards, "_BY_NAME", dict(rewards._BY_NAME))  # registering below must not leak
    assert reward_fn("HalfCheetah-v5") is None
    assert {"Pendulum", "InvertedPendulum", "PointMass"} <= set(known_env_names())
    register_reward_fn("MyTask", lambda o, a, n: np.zeros(len(o)))
    fn = reward_fn("custom/MyTask-v3")
    assert fn is not None and fn(np.zeros((2, 1)), np.zeros((2, 1)), np.zeros((2, 1))).shape == (2,)
    with pytest.raises(ValueError, match="shape"):
        reward_fn("Pendulum-v1")(np.zeros(3), np.zeros(1), np.zeros(3))  # type: ignore[misc]


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "InvertedPendulum-v5", "rolloutlab/PointMass-v0"])
def test_known_functions_give_the_same_values_on_tensors_of_any_leading_shape(env_id: str) -> None:
    # The planner calls them on float32 [P, C, d] tensors; the numbers must be the numpy rows' to float32 rounding.
    from mbrl.termination import takes_tensors, termination_fn

    rng = np.random.default_rng(0)
    dims = {"Pendulum-v1": (3, 1), "InvertedPendulum-v5": (4, 1), "rolloutlab/PointMass-v0": (2, 1)}[env_id]
    obs, nxt = rng.normal(scale=0.3, size=(2, 6, 5, dims[0]))
    act = rng.uniform(-3, 3, size=(6, 5, dims[1]))
    nxt[0, 0, 0] = np.nan
    for fn in (reward_fn(env_id), termination_fn(env_id)):
        assert fn is not None and takes_tensors(fn)
        rows = fn(obs.reshape(30, -1), act.reshape(30, -1), nxt.reshape(30, -1))
        tensors = fn(*(torch.as_tensor(x, dtype=torch.float32) for x in (obs, act, nxt)))
        assert isinstance(tensors, torch.Tensor) and tuple(tensors.shape) == (6, 5)
        np.testing.assert_allclose(
            tensors.reshape(30).double().numpy(), np.asarray(rows, np.float64), rtol=1e-5, atol=1e-5
        )
