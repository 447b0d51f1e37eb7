"""rolloutlab/Wordle-v0: checkers, determinism, pickling, rewards and hard mode."""

from __future__ import annotations

import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import envs  # noqa: F401  (registers the ids)
from envs.wordle import WordleEnv


@pytest.mark.parametrize("hard", [False, True])
def test_checkers(hard: bool) -> None:
    env = gym.make("rolloutlab/Wordle-v0", hard=hard)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gym_check_env(env.unwrapped, skip_render_check=True)
        sb3_check_env(env.unwrapped, warn=False)


def _trace(seed: int, hard: bool) -> list[bytes]:
    env = gym.make("rolloutlab/Wordle-v0", hard=hard)
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    out = [obs.tobytes()]
    for _ in range(20):
        obs, _reward, terminated, truncated, info = env.step(env.action_space.sample())
        out.append(obs.tobytes() + bytes([int(terminated), int(truncated)]))
        if terminated or truncated:
            out.append(info["answer"].encode())
            obs, _ = env.reset()
    return out


@pytest.mark.parametrize("hard", [False, True])
def test_same_seed_same_rollout(hard: bool) -> None:
    assert _trace(5, hard) == _trace(5, hard)
    assert _trace(5, hard) != _trace(6, hard)


def test_pickle_round_trip_mid_game() -> None:
    env = WordleEnv()
    env.reset(seed=1)
    env.step(env.lists.allowed.index("salet"))
    clone = pickle.loads(pickle.dumps(env))
    for word in ("crony", "vivid"):
        a, b = env.step(env.lists.allowed.index(word)), clone.step(clone.lists.allowed.index(word))
        assert np.array_equal(a[0], b[0]) and a[1:4] == b[1:4]


def test_rewards_termination_truncation_and_board() -> None:
    env = WordleEnv(render_mode="ansi")
    obs, _ = env.reset(options={"answer": "cigar"})
    assert obs.shape == (6 * 5 * 2,) and not obs.any()
    obs, reward, terminated, truncated, info = env.step(env.lists.allowed.index("salet"))
    assert (reward, terminated, truncated) == (-1.0, False, False)
    assert info["feedback"] == (0, 1, 0, 0, 0)
    assert obs[:10].tolist() == [19, 1, 1, 2, 12, 1, 5, 1, 20, 1]  # s a l e t, grey yellow grey grey grey (+1)
    obs, reward, terminated, truncated, info = env.step(env.lists.allowed.index("cigar"))
    assert (reward, terminated, truncated) == (-1.0, True, False)
    assert "CIGAR 🟩🟩🟩🟩🟩" in str(env.render())
    env.reset(options={"answer": "cigar"})
    for _ in range(6):
        _, _, terminated, truncated, info = env.step(env.lists.allowed.index("salet"))
    assert (terminated, truncated, info["answer"]) == (False, True, "cigar")


def test_hard_mode_violation_costs_a_guess_and_reveals_nothing() -> None:
    env = WordleEnv(hard=True)
    env.reset(options={"answer": "cigar"})
    env.step(env.lists.allowed.index("salet"))  # reveals a yellow A
    mask = env.action_masks()
    assert not mask[env.lists.allowed.index("crony")] and mask[env.lists.allowed.index("cigar")]
    obs, reward, terminated, _truncated, info = env.step(env.lists.allowed.index("crony"))
    assert info["hard_mode_violation"] == "guess must contain A"
    assert reward == -1.0 and not terminated and not obs[10:].any()
    with pytest.raises(ValueError, match="not in the answer list"):
        env.reset(options={"answer": "zzzzz"})
