"""Trajectory replay: windows stay inside their trajectory, short ones are padded and masked, state round-trips;
exploration schedules and the within-trial first-visit bonus."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from meta.incontext.exploration import PerActorEpsilon, first_visits, novelty_coefficient
from meta.incontext.replay import Trajectory, TrajectoryReplay


def _traj(length: int, offset: float = 0.0) -> Trajectory:
    steps = np.arange(length + 1, dtype=np.float32) + offset
    return Trajectory(
        obs=np.stack([steps, steps], axis=1),
        actions=np.arange(length, dtype=np.int64) % 3,
        rewards=np.arange(length, dtype=np.float32) + offset,
        dones=np.eye(1, length, length - 1, dtype=np.float32)[0],
    )


def test_windows_are_contiguous_and_consistent_with_start() -> None:
    replay = TrajectoryReplay(capacity=10)
    replay.add(_traj(50))
    batch = replay.sample(32, window=8, rng=np.random.default_rng(0))
    assert batch.obs.shape == (32, 9, 2) and batch.actions.shape == (32, 8)
    assert torch.all(batch.mask == 1.0)
    expected = batch.start[:, None].float() + torch.arange(9).float()
    torch.testing.assert_close(batch.obs[:, :, 0], expected)
    torch.testing.assert_close(batch.rewards, expected[:, :-1])
    assert int(batch.start.min()) >= 0 and int(batch.start.max()) <= 42
    assert len(set(batch.start.tolist())) > 5  # random windows, not always the same


def test_short_trajectories_are_padded_and_masked() -> None:
    replay = TrajectoryReplay(capacity=10)
    replay.add(_traj(5, offset=1000.0))
    replay.add(_traj(12))
    batch = replay.sample(40, window=10, rng=np.random.default_rng(1))
    short = batch.obs[:, 0, 0] >= 1000.0
    assert short.any() and (~short).any()
    assert torch.all(batch.mask[short, :5] == 1.0) and torch.all(batch.mask[short, 5:] == 0.0)
    assert torch.all(batch.obs[short, 6:] == 0.0)
    assert torch.all(batch.dones[short, 4] == 1.0)
    assert torch.all(batch.mask[~short] == 1.0)


def test_capacity_drops_oldest_and_state_round_trips() -> None:
    replay = TrajectoryReplay(capacity=2)
    for offset in (0.0, 100.0, 200.0):
        replay.add(_traj(4, offset))
    assert len(replay) == 2 and replay.trajectories[0].rewards[0] == 100.0
    clone = TrajectoryReplay(capacity=1)
    clone.load_state_dict(replay.state_dict())
    assert clone.capacity == 2
    a = replay.sample(5, 3, np.random.default_rng(7))
    b = clone.sample(5, 3, np.random.default_rng(7))
    torch.testing.assert_close(a.obs, b.obs)


def test_per_actor_epsilon_anneals_to_spread_finals() -> None:
    schedule = PerActorEpsilon(4, start=1.0, end_low=0.01, end_high=0.1, anneal_steps=100)
    np.testing.assert_allclose(schedule(0), 1.0)
    np.testing.assert_allclose(schedule(1000), np.geomspace(0.01, 0.1, 4))
    middle = schedule(50)
    assert np.all(np.diff(middle) > 0) and np.all((middle > schedule(1000)) & (middle < 1.0))


def test_first_visits_marks_steps_that_reach_an_observation_new_to_the_trial() -> None:
    # Leading two entries make the observation; the third (an RL^2 entry, say) never matters.
    obs = np.array([[0, 0, 9], [1, 0, 8], [0, 0, 7], [1, 0, 6], [1, 1, 5], [0, 0, 4]], dtype=np.float32)
    np.testing.assert_array_equal(first_visits(obs, 2), [1.0, 0.0, 0.0, 1.0, 0.0])
    np.testing.assert_array_equal(first_visits(obs, 3), [1.0, 1.0, 1.0, 1.0, 1.0])
    assert first_visits(obs, 2).shape == (len(obs) - 1,) and first_visits(obs, 2).dtype == np.float32
    with pytest.raises(ValueError, match="n_dims"):
        first_visits(obs, 4)


def test_novelty_coefficient_anneals_linearly_to_zero_or_stays() -> None:
    assert novelty_coefficient(0.2, None, 10**9) == 0.2
    assert novelty_coefficient(0.2, 100, 0) == 0.2
    assert novelty_coefficient(0.2, 100, 25) == pytest.approx(0.15)
    assert novelty_coefficient(0.2, 100, 100) == 0.0 and novelty_coefficient(0.2, 100, 1000) == 0.0


def test_novelty_coef_adds_the_bonus_to_sampled_rewards_and_round_trips() -> None:
    traj = _traj(6)
    traj.novelty = np.array([1, 0, 1, 0, 0, 1], dtype=np.float32)
    replay = TrajectoryReplay(capacity=4)
    replay.add(traj)
    plain = replay.windows(np.array([0]), 6, np.random.default_rng(0))
    bonus = replay.windows(np.array([0]), 6, np.random.default_rng(0), novelty_coef=0.5)
    torch.testing.assert_close(bonus.rewards - plain.rewards, 0.5 * torch.from_numpy(traj.novelty)[None])
    np.testing.assert_array_equal(traj.rewards, np.arange(6, dtype=np.float32))  # the stored rewards stay the env's
    clone = TrajectoryReplay(capacity=1)
    clone.load_state_dict(replay.state_dict())
    np.testing.assert_array_equal(clone.trajectories[0].novelty, traj.novelty)  # type: ignore[arg-type]
    replay.add(_traj(6))  # kept without novelty: no bonus can be added to it
    assert "novelty" not in replay.state_dict()["trajectories"][1]
    with pytest.raises(ValueError, match="novelty"):
        replay.windows(np.array([1]), 6, np.random.default_rng(0), novelty_coef=0.5)
