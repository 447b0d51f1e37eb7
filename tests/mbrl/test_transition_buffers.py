"""Real/model buffers (terminated vs truncated, retention by epochs) and the SB3 mixed replay buffer."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from mbrl.buffers import MixedReplayBuffer, ModelBuffer, TransitionBuffer, Transitions


def _batch(n: int, start: float = 0.0, obs_dim: int = 2, act_dim: int = 1) -> Transitions:
    values = start + np.arange(n, dtype=np.float32)
    return Transitions(
        obs=np.repeat(values[:, None], obs_dim, axis=1),
        action=np.repeat(values[:, None], act_dim, axis=1),
        reward=values.copy(),
        next_obs=np.repeat(values[:, None] + 0.5, obs_dim, axis=1),
        terminated=(np.arange(n) % 3 == 0),
        truncated=(np.arange(n) % 3 == 1),
    )


def test_circular_buffer_keeps_latest_and_flags_apart() -> None:
    buf = TransitionBuffer(capacity=5, obs_dim=2, action_dim=1)
    buf.add(np.zeros(2), np.zeros(1), 1.0, np.ones(2), terminated=False, truncated=True)
    assert len(buf) == 1
    first = buf.all()
    assert not first.terminated[0] and first.truncated[0]
    buf.add_batch(_batch(7, start=10.0))
    assert len(buf) == 5
    data = buf.all()
    np.testing.assert_array_equal(data.reward, [12, 13, 14, 15, 16])  # oldest first, the 3 oldest overwritten
    np.testing.assert_array_equal(data.terminated, [False, True, False, False, True])
    np.testing.assert_array_equal(data.truncated, [False, False, True, False, False])
    assert not (data.terminated & data.truncated).any()


def test_buffer_state_dict_round_trip() -> None:
    buf = TransitionBuffer(capacity=8, obs_dim=2, action_dim=1)
    buf.add_batch(_batch(11))
    state = buf.state_dict()
    assert all(isinstance(state[k], torch.Tensor) for k in ("obs", "action", "reward", "terminated"))
    other = TransitionBuffer(capacity=8, obs_dim=2, action_dim=1)
    other.load_state_dict(state)
    assert (other.pos, other.size) == (buf.pos, buf.size)
    for name in ("obs", "action", "reward", "next_obs", "terminated", "truncated"):
        np.testing.assert_array_equal(getattr(other.all(), name), getattr(buf.all(), name))
    with pytest.raises(ValueError, match="capacity"):
        TransitionBuffer(capacity=9, obs_dim=2, action_dim=1).load_state_dict(state)


def test_discrete_actions_stored_as_indices() -> None:
    buf = TransitionBuffer(capacity=4, obs_dim=2, action_dim=3, discrete_actions=True)
    buf.add(np.zeros(2), 2, 0.0, np.zeros(2), False, False)
    assert buf.action.dtype == np.int64 and buf.all().action.tolist() == [2]


def test_model_buffer_retains_last_epochs() -> None:
    buf = ModelBuffer(retain_epochs=2, obs_dim=2, action_dim=1)
    buf.add_batch(_batch(3, start=0), epoch=0)
    buf.add_batch(_batch(4, start=100), epoch=1)
    buf.add_batch(_batch(2, start=200), epoch=1)  # a second round in the same epoch is kept with it
    assert buf.epochs == [0, 1] and len(buf) == 9
    buf.add_batch(_batch(5, start=300), epoch=2)
    assert buf.epochs == [1, 2] and len(buf) == 11
    assert buf.all().reward.min() >= 100  # epoch 0's data aged out as a whole
    restored = ModelBuffer(retain_epochs=1, obs_dim=2, action_dim=1)
    restored.load_state_dict(buf.state_dict())
    assert restored.epochs == [1, 2] and restored.retain_epochs == 2
    np.testing.assert_array_equal(restored.all().reward, buf.all().reward)
    buf.clear()
    assert len(buf) == 0 and len(buf.all()) == 0


def _mixed(real_ratio: float) -> MixedReplayBuffer:
    real = TransitionBuffer(100, 2, 1)
    real.add_batch(_batch(50, start=0))  # rewards 0..49
    model = ModelBuffer(1, 2, 1)
    model.add_batch(_batch(50, start=1000), epoch=0)  # rewards >= 1000
    obs_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
    act_space = spaces.Box(-2.0, 2.0, (1,), np.float32)
    return MixedReplayBuffer(real, model, real_ratio, obs_space, act_space, np.random.default_rng(0))


@pytest.mark.parametrize(("ratio", "batch", "expected_real"), [(0.05, 256, 13), (0.5, 10, 5), (1.0, 7, 7), (0.0, 8, 0)])
def test_mixed_batches_have_the_set_real_share(ratio: float, batch: int, expected_real: int) -> None:
    mixed = _mixed(ratio)
    for _ in range(3):
        samples = mixed.sample(batch)
        n_real = int((samples.rewards < 1000).sum())
        assert n_real == expected_real
        assert samples.observations.shape == (batch, 2) and samples.rewards.shape == (batch, 1)


def test_mixed_buffer_uses_real_data_until_model_data_exists() -> None:
    mixed = _mixed(0.05)
    mixed.model.clear()
    assert mixed.split(64) == (64, 0)
    assert (mixed.sample(64).rewards < 1000).all()


def test_mixed_samples_follow_sb3_conventions() -> None:
    mixed = _mixed(0.5)
    batch = mixed.sample_transitions(200)
    mixed.rng = np.random.default_rng(1)
    samples = mixed.sample(200)
    # dones are the terminated flags only: a truncated transition must bootstrap.
    mixed.rng = np.random.default_rng(1)
    batch = mixed.sample_transitions(200)
    np.testing.assert_array_equal(samples.dones.numpy().ravel(), batch.terminated.astype(np.float32))
    # Box actions rescaled from [-2, 2] to SB3's [-1, 1].
    np.testing.assert_allclose(samples.actions.numpy(), batch.action / 2.0, rtol=1e-6)
    assert samples.dones.dtype == torch.float32


def test_sb3_style_add_splits_timeouts() -> None:
    mixed = _mixed(0.5)
    before = len(mixed.real)
    mixed.add(
        np.zeros((1, 2)),
        np.ones((1, 2)),
        np.zeros((1, 1)),
        np.array([1.0]),
        np.array([True]),
        [{"TimeLimit.truncated": True}],
    )
    mixed.add(np.zeros((1, 2)), np.ones((1, 2)), np.zeros((1, 1)), np.array([1.0]), np.array([True]), [{}])
    data = mixed.real.all()
    assert len(mixed.real) == before + 2
    assert (data.truncated[-2], data.terminated[-2]) == (True, False)
    assert (data.truncated[-1], data.terminated[-1]) == (False, True)
    with pytest.raises(ValueError, match="real_ratio"):
        MixedReplayBuffer(
            mixed.real, mixed.model, 1.5, mixed.observation_space, mixed.action_space, np.random.default_rng(0)
        )
