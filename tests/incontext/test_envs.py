"""Contract tests of the meta-RL environments: checkers, determinism, pickling, and the rules themselves."""

from __future__ import annotations

import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import envs
from envs.metarl import BernoulliBanditEnv, DarkKeyDoorEnv, PassiveTMazeEnv, RL2Wrapper

METARL_IDS = [env_id for env_id in envs.ENV_IDS if env_id.split("/")[1].split("-")[0] in {
    "BernoulliBandit", "PassiveTMaze", "DarkKeyDoor"}]  # fmt: skip


def test_all_metarl_envs_registered() -> None:
    assert len(METARL_IDS) == 3


@pytest.mark.parametrize("env_id", METARL_IDS)
@pytest.mark.parametrize("rl2", [False, True])
def test_checkers(env_id: str, rl2: bool) -> None:
    env = gym.make(env_id)
    target = RL2Wrapper(env) if rl2 else env.unwrapped
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gymnasium warns that a wrapped env is not the raw one; that is the point
        check_env(target, skip_render_check=True)
        sb3_check_env(target, warn=False)


def _rollout(env: gym.Env, seed: int, steps: int) -> list[tuple]:
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    out = [tuple(np.asarray(obs).ravel())]
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        out.append((*np.asarray(obs).ravel(), reward, terminated, truncated))
        if terminated or truncated:
            obs, _ = env.reset()
            out.append(tuple(np.asarray(obs).ravel()))
    return out


@pytest.mark.parametrize("env_id", METARL_IDS)
def test_same_seed_same_rollout(env_id: str) -> None:
    first = _rollout(RL2Wrapper(gym.make(env_id)), seed=3, steps=300)
    second = _rollout(RL2Wrapper(gym.make(env_id)), seed=3, steps=300)
    other = _rollout(RL2Wrapper(gym.make(env_id)), seed=4, steps=300)
    assert first == second
    assert first != other


@pytest.mark.parametrize("env_id", METARL_IDS)
def test_pickle_round_trip(env_id: str) -> None:
    env = RL2Wrapper(gym.make(env_id))
    env.reset(seed=1)
    env.step(0)
    clone = pickle.loads(pickle.dumps(env))
    for action in [1, 0, 1, 1, 0]:
        a = env.step(action)
        b = clone.step(action)
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1:4] == b[1:4]


def test_rl2_inputs() -> None:
    env = RL2Wrapper(gym.make("rolloutlab/BernoulliBandit-v0", n_arms=3, horizon=4))
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs, [0.0, 0, 0, 0, 0.0, 1.0])  # t/H, no previous action, reward 0, reset flag
    obs, reward, *_ = env.step(2)
    np.testing.assert_array_equal(obs, [0.25, 0, 0, 1, reward, 0.0])


def test_previous_observation_input_holds_the_cell_the_door_was_entered_from() -> None:
    from envs.metarl.keydoor import MOVES

    env = RL2Wrapper(DarkKeyDoorEnv(size=5, episode_steps=50, rollout_steps=200), previous_observation=True)
    obs, _ = env.reset(seed=3)
    assert obs.shape == env.observation_space.shape == (2 * 3 + 4 + 2,)
    np.testing.assert_array_equal(obs[-3:], 0.0)  # nothing before a task's first step
    raw = env.unwrapped
    assert isinstance(raw, DarkKeyDoorEnv)

    def inside(cell: np.ndarray) -> bool:
        return bool(((cell >= 0) & (cell < 5)).all())

    # Put the key next to the start and the door next to the key (the layout is the env's to draw; set it here).
    first = next(a for a in range(4) if inside(raw.start + MOVES[a]))
    raw.key = raw.start + MOVES[first]
    second = next(a for a in range(4) if inside(raw.key + MOVES[a]) and not (raw.key + MOVES[a] == raw.start).all())
    raw.door = raw.key + MOVES[second]
    for action in (first, second):
        before = obs[:3].copy()
        obs, reward, *_ = env.step(action)
        assert reward == 1.0
        np.testing.assert_array_equal(obs[-3:], before)
    # The door reset the agent to the start without the key; only the previous observation says where it was.
    np.testing.assert_array_equal(obs[:3], [*(raw.start / 4), 0.0])
    np.testing.assert_array_equal(obs[-3:], [*(raw.key / 4), 1.0])
    assert obs[3 + 4 + 1] == 1.0  # the reset flag
    assert RL2Wrapper(DarkKeyDoorEnv(size=5)).observation_space.shape == (3 + 4 + 2,)


def test_bandit_ends_after_horizon_and_pays_by_means() -> None:
    env = BernoulliBanditEnv(n_arms=2, horizon=5000)
    env.reset(seed=0)
    total, done, steps = 0.0, False, 0
    while not done:
        _, reward, done, truncated, _ = env.step(1)
        total += float(reward)
        steps += 1
        assert not truncated
    assert steps == 5000
    assert abs(total / 5000 - env.means[1]) < 0.03


def test_tmaze_cue_only_at_start_and_memoryless_is_half() -> None:
    env = PassiveTMazeEnv(corridor_length=3)
    successes = []
    for seed in range(400):
        obs, _ = env.reset(seed=seed)
        cue = obs[0]
        assert cue in (-1.0, 1.0)
        for _ in range(3):
            obs, reward, terminated, _, _ = env.step(0)
            assert obs[0] == 0.0 and reward == 0.0 and not terminated
        assert obs[1] == 1.0  # at the junction
        _, reward, terminated, _, _ = env.step(0)  # a memory-free agent: always "up"
        assert terminated
        assert reward == float(cue == 1.0)
        successes.append(reward)
    assert 0.42 < np.mean(successes) < 0.58


def test_keydoor_key_then_door_then_back_to_start() -> None:
    env = DarkKeyDoorEnv()
    env.reset(seed=5)
    env.pos = env.key.copy()
    # Step off the key and back on it: +1 and the key.
    neighbour_action = 0 if env.key[1] < env.size - 1 else 1
    back_action = 1 - neighbour_action
    env.step(neighbour_action)
    _, reward, _, _, info = env.step(back_action)
    assert reward == 1.0 and env.has_key and not info["inner_reset"]
    env.pos = env.door.copy()
    env.step(neighbour_action if env.door[1] < env.size - 1 else 1)
    obs, reward, _, _, info = env.step(back_action if env.door[1] < env.size - 1 else 0)
    assert reward == 1.0 and info["inner_reset"]
    np.testing.assert_array_equal(env.pos, env.start)
    assert obs[2] == 0.0


def test_keydoor_rollout_is_500_steps_with_50_step_episodes() -> None:
    env = DarkKeyDoorEnv()
    env.reset(seed=0)
    resets, steps, done = [], 0, False
    while not done:
        _, _, done, _, info = env.step(2)  # walk into the left wall forever: never finds the door
        steps += 1
        if info["inner_reset"]:
            resets.append(steps)
    assert steps == 500
    assert resets == list(range(50, 501, 50))


def test_keydoor_cell_input_is_the_one_hot_cell_after_the_coordinates() -> None:
    plain, with_cell = DarkKeyDoorEnv(size=5), DarkKeyDoorEnv(size=5, cell_input=True)
    assert with_cell.observation_space.shape == (3 + 25,)
    obs_plain, _ = plain.reset(seed=3)
    obs_cell, _ = with_cell.reset(seed=3)
    for action in [0, 3, 3, 1, 2, 0]:
        np.testing.assert_array_equal(obs_cell[:3], obs_plain)
        cell = np.flatnonzero(obs_cell[3:])
        assert cell.tolist() == [with_cell.pos[0] * 5 + with_cell.pos[1]]
        assert with_cell.observation_space.contains(obs_cell)
        obs_plain, *_ = plain.step(action)
        obs_cell, *_ = with_cell.step(action)


def test_keydoor_cell_marks_entered_shows_start_and_door_on_the_step_that_opens_it() -> None:
    with pytest.raises(ValueError, match="cell_input"):
        DarkKeyDoorEnv(size=4, cell_marks_entered=True)
    env = DarkKeyDoorEnv(size=4, cell_input=True, cell_marks_entered=True)
    assert env.observation_space.shape == (3 + 16,)
    env.reset(seed=0)
    env.start, env.key, env.door = np.array([0, 0]), np.array([0, 1]), np.array([1, 1])
    env.pos = env.start.copy()
    obs, reward, *_ = env.step(0)  # up, onto the key: one cell, the agent's
    assert reward == 1.0 and np.flatnonzero(obs[3:]).tolist() == [1]
    obs, reward, _, _, info = env.step(3)  # right, onto the door: the start and the door
    assert reward == 1.0 and info["inner_reset"] and obs[:2].tolist() == [0.0, 0.0]
    assert np.flatnonzero(obs[3:]).tolist() == [0, 1 * 4 + 1] and env.observation_space.contains(obs)
    obs, *_ = env.step(3)  # on again: one cell
    assert np.flatnonzero(obs[3:]).tolist() == [1 * 4 + 0]
    from meta.incontext.tasks import make_task_env

    marked = make_task_env("keydoor", keydoor_size=4, keydoor_cell_input=True, keydoor_cell_marks_entered=True)
    assert marked.unwrapped.cell_marks_entered  # type: ignore[attr-defined]


def test_keydoor_room_sizes_draw_smaller_rooms_in_the_same_grid_units() -> None:
    with pytest.raises(ValueError, match="room_sizes"):
        DarkKeyDoorEnv(size=8, room_sizes=[9])
    # Without rooms the layouts are the ones every evaluation task has always had: three cells of the whole grid.
    plain = DarkKeyDoorEnv(size=8)
    plain.reset(seed=3)
    drawn = gym.utils.seeding.np_random(3)[0].choice(64, size=3, replace=False)
    assert [divmod(int(c), 8) for c in drawn] == [tuple(plain.start), tuple(plain.key), tuple(plain.door)]
    assert plain.room == 8
    env = DarkKeyDoorEnv(size=8, cell_input=True, room_sizes=[4, 6])
    assert env.observation_space.shape == (3 + 64,)
    rooms = set()
    for seed in range(40):
        obs, _ = env.reset(seed=seed)
        rooms.add(env.room)
        cells = np.stack([env.start, env.key, env.door])
        assert env.room in (4, 6) and cells.max() < env.room
        assert obs[:2].tolist() == pytest.approx((env.start / 7).tolist())  # the 8x8 grid's units
        for _ in range(30):  # the room's edges are walls
            obs, *_ = env.step(int(env.np_random.integers(4)))
            assert env.pos.max() < env.room and obs[3 + int(env.pos[0]) * 8 + int(env.pos[1])] == 1.0
    assert rooms == {4, 6}


def test_keydoor_reached_cell_input_shows_the_door_on_the_step_that_opens_it() -> None:
    env = DarkKeyDoorEnv(size=4, cell_input=True, reached_cell_input=True)
    assert env.observation_space.shape == (3 + 16 + 16,)
    obs, _ = env.reset(seed=0)
    assert not obs[19:].any()  # no move yet
    env.start, env.key, env.door = np.array([0, 0]), np.array([0, 1]), np.array([1, 1])
    env.pos = env.start.copy()
    obs, reward, *_ = env.step(0)  # up, onto the key: the reached cell is the agent's cell
    assert reward == 1.0 and np.flatnonzero(obs[19:]).tolist() == np.flatnonzero(obs[3:19]).tolist() == [1]
    obs, reward, _, _, info = env.step(3)  # right, onto the door: back at the start, the door's cell reached
    assert reward == 1.0 and info["inner_reset"]
    assert np.flatnonzero(obs[3:19]).tolist() == [0] and np.flatnonzero(obs[19:]).tolist() == [1 * 4 + 1]
    assert env.observation_space.contains(obs)
    from meta.incontext.tasks import make_task_env

    plain = make_task_env("keydoor", keydoor_size=4, keydoor_cell_input=True)
    wide = make_task_env("keydoor", keydoor_size=4, keydoor_cell_input=True, keydoor_reached_cell_input=True)
    assert wide.observation_space.shape[0] == plain.observation_space.shape[0] + 16  # type: ignore[index]
