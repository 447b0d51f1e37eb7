"""The meta-agent's action sets: UP / DOWN / NOOP from any K, the direct choice over a K grid, and the env with each."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env

from meta.control import StepAction
from meta.rollout_length.actions import DEFAULT_K_GRID, MetaActions
from meta.rollout_length.env import MetaEnvConfig, MetaVecEnv, RolloutLengthEnv
from meta.rollout_length.toy import ToyFactory

UP, DOWN, NOOP = int(StepAction.UP), int(StepAction.DOWN), int(StepAction.NOOP)


def test_step_actions_from_zero_and_one() -> None:
    step = MetaActions("step", k_cap=32)
    assert step.n == 3 and step.space().n == 3
    assert [step.apply(0, a) for a in (DOWN, NOOP, UP)] == [0, 0, 1]  # one UP turns the model on
    assert [step.apply(1, a) for a in (DOWN, NOOP, UP)] == [0, 1, 2]  # one DOWN turns it off
    assert [step.apply(2, a) for a in (DOWN, NOOP, UP)] == [1, 2, 3]
    assert step.apply(30, UP) == 32 and step.apply(32, UP) == 32  # capped
    assert [step.name(a) for a in (DOWN, NOOP, UP)] == ["DOWN", "NOOP", "UP"]
    with pytest.raises(ValueError, match="invalid meta-action 3"):
        step.apply(1, 3)


def test_direct_actions_reach_any_grid_length_at_once() -> None:
    direct = MetaActions("direct", k_cap=16)
    assert direct.n == len(DEFAULT_K_GRID) and direct.grid == (0, 1, 2, 4, 8, 16)
    for k in (0, 3, 16):  # whatever is in force, action i means K = grid[i]
        assert [direct.apply(k, a) for a in range(direct.n)] == list(DEFAULT_K_GRID)
    assert direct.name(4) == "K=8"
    for bad, message in (
        ((), "non-empty"),
        ((0, 2, 2), "strictly increasing"),
        ((4, 1), "strictly"),
        ((0, 32), "within"),
    ):
        with pytest.raises(ValueError, match=message):
            MetaActions("direct", k_cap=16, grid=bad)
    with pytest.raises(ValueError, match="action set must be one of"):
        MetaActions("jump")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="within"):
        MetaEnvConfig(k_cap=8, action_set="direct")  # the default grid reaches 16: refused at config time


def test_k_init_is_one_by_default_and_configurable() -> None:
    def schedule(cfg: MetaEnvConfig, actions: list[int]) -> list[int]:
        env = RolloutLengthEnv(cfg)
        _, info = env.reset(seed=0)
        assert info["k"] == cfg.k_init
        for a in actions:
            *_, info = env.step(a)
        return info["k_schedule"]

    base = {"budget": 300, "phase_length": 100, "inner": "toy"}
    assert MetaEnvConfig().k_init == 1
    assert schedule(MetaEnvConfig(**base), [DOWN, UP, NOOP]) == [0, 1, 1]
    assert schedule(MetaEnvConfig(**base, k_init=4), [DOWN, UP, NOOP]) == [2, 3, 3]
    assert schedule(MetaEnvConfig(**base, action_set="direct"), [5, 0, 2]) == [16, 0, 2]


def test_direct_meta_env_passes_the_checker_and_refuses_bad_actions() -> None:
    cfg = MetaEnvConfig(budget=300, phase_length=100, inner="toy", action_set="direct", k_grid=[0, 2, 8])
    env = RolloutLengthEnv(cfg)
    assert env.action_space.n == 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gym_check_env(RolloutLengthEnv(cfg), skip_render_check=True)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"expected one of 0 \(K=0\), 1 \(K=2\), 2 \(K=8\)"):
        env.step(3)
    venv = MetaVecEnv(cfg, num_runs=2, seed=0, inner_factory=ToyFactory(phase_length=100, budget=300))
    assert venv.action_space.n == 3
    venv.reset()
    for _ in range(3):
        venv.step_async(np.array([2, 1]))
        *_, infos = venv.step_wait()
    assert [info["k_schedule"] for info in infos] == [[8, 8, 8], [2, 2, 2]]
