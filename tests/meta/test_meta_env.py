"""The meta-MDP: UP/DOWN rule, telescoping reward, gymnasium/SB3 checkers, lockstep vector env."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

from meta.control import StepAction
from meta.control import step_rollout_length as next_k
from meta.rollout_length.env import MetaEnvConfig, MetaVecEnv, RolloutLengthEnv
from meta.rollout_length.features import FEATURE_NAMES
from meta.rollout_length.inner import EnvFn
from meta.rollout_length.toy import ToyFactory

UP, DOWN, NOOP = StepAction.UP, StepAction.DOWN, StepAction.NOOP


@pytest.mark.parametrize(
    ("k", "up", "down"),
    [(0, 1, 0), (1, 2, 0), (2, 3, 1), (3, 5, 1), (8, 12, 4), (21, 32, 10), (22, 32, 11), (32, 32, 16)],
)
def test_up_down_rule_matches_the_paper(k: int, up: int, down: int) -> None:
    """UP: ceil(1.5 K) or 1 from 0, capped at 32; DOWN: floor(K / 2), 0 from 1 (Bhatia et al. 2022, sec. 4)."""
    assert next_k(k, UP, 32) == up
    assert next_k(k, DOWN, 32) == down
    assert next_k(k, NOOP, 32) == k


def test_up_sequence_from_zero_reaches_the_cap() -> None:
    k, seen = 0, []
    for _ in range(10):
        k = next_k(k, UP, 32)
        seen.append(k)
    assert seen == [1, 2, 3, 5, 8, 12, 18, 27, 32, 32]
    with pytest.raises(ValueError):
        next_k(-1, UP, 32)


class ScriptedLearner:
    """Fake inner learner returning a scripted sequence of J values (one row per phase), recording the Ks it saw."""

    def __init__(self, returns: np.ndarray) -> None:
        self.returns = returns
        self.phase = 0
        self.seen_ks: list[list[int]] = []

    def run_phase(self, ks: Sequence[int]) -> list[dict[str, float]]:
        self.seen_ks.append(list(ks))
        row = self.returns[self.phase]
        self.phase += 1
        return [
            {
                "mean_return": float(r),
                "model_return_error": 3.0,
                "model_length_error": -4.0,
                "model_holdout_loss": 0.5,
                "disagreement_mean": 0.1,
                "env_steps": 0.0,
                "budget_fraction": self.phase / len(self.returns),
            }
            for r in row
        ]

    def evaluate(self, episodes: int, env_fns: Sequence[EnvFn] | None = None) -> np.ndarray:
        return np.asarray(self.returns[self.phase - 1])


def test_reward_telescopes_to_the_final_return() -> None:
    returns = np.array([[-190.0], [float("nan")], [-150.0], [-171.0], [-120.5]])
    learner = ScriptedLearner(returns)
    for j0 in (None, 0.0):
        learner.phase = 0
        cfg = MetaEnvConfig(budget=500, phase_length=100, j_initial=j0, randomize_physics=False, k_init=0)
        env = RolloutLengthEnv(cfg, inner_factory=lambda env_fns, seed, **_: learner)
        obs, _ = env.reset(seed=0)
        assert obs[FEATURE_NAMES.index("j")] == pytest.approx(cfg.initial_return / 200)
        total, done, steps = 0.0, False, 0
        actions = [UP, UP, DOWN, NOOP, UP]
        while not done:
            obs, reward, done, truncated, info = env.step(actions[steps])
            assert not truncated
            total += reward
            steps += 1
        assert steps == cfg.horizon == 5
        # Undiscounted meta-return = (J_final - J_0) / 200 (MountainCar's step limit); with J_0 = 0 it is the final
        # return itself on that scale.
        assert cfg.meta_reward_scale == 200.0
        assert total == pytest.approx((-120.5 - cfg.initial_return) / 200)
        assert info["final_j"] == -120.5
        assert info["k_schedule"] == [1, 2, 1, 1, 2]
    assert learner.seen_ks[:5] == [[1], [2], [1], [1], [2]]
    assert obs[FEATURE_NAMES.index("budget_remaining")] == pytest.approx(0.0)
    assert obs[FEATURE_NAMES.index("model_return_error")] == pytest.approx(3.0 / 200)
    assert obs[FEATURE_NAMES.index("model_length_error")] == pytest.approx(-4.0 / 200)
    assert obs[FEATURE_NAMES.index("j_trend")] == pytest.approx((-120.5 + 171.0) / 200)


@pytest.mark.parametrize("env_id", ["MountainCar-v0", "Acrobot-v1"])
def test_meta_env_passes_checkers(env_id: str) -> None:
    cfg = MetaEnvConfig(env_id=env_id, budget=300, phase_length=100, inner="toy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gym_check_env(RolloutLengthEnv(cfg), skip_render_check=True)
        sb3_check_env(RolloutLengthEnv(cfg), warn=False)


def test_meta_env_same_seed_same_episode() -> None:
    def episode(seed: int) -> list[float]:
        env = RolloutLengthEnv(MetaEnvConfig(budget=400, phase_length=100, inner="toy"))
        obs, info = env.reset(seed=seed)
        out = [*obs.tolist(), *info["physics"].values()]
        for a in (UP, UP, NOOP, DOWN):
            obs, reward, *_ = env.step(a)
            out += [*obs.tolist(), reward]
        return out

    assert episode(3) == episode(3)
    assert episode(3) != episode(4)


def test_vec_env_runs_in_lockstep_and_rounds_are_seeded() -> None:
    cfg = MetaEnvConfig(budget=300, phase_length=100, inner="toy", k_init=0)
    factory = ToyFactory(phase_length=100, budget=300)
    venv = MetaVecEnv(cfg, num_runs=4, seed=7, inner_factory=factory)
    first = venv.reset()
    assert first.shape == (4, len(FEATURE_NAMES))
    physics0 = [info["physics"]["gravity"] for info in venv.reset_infos]
    assert len(set(physics0)) == 4  # domain randomization: every run has its own physics
    for t in range(3):
        venv.step_async(np.array([UP, DOWN, NOOP, UP]))
        obs, _rewards, dones, infos = venv.step_wait()
        assert dones.all() == (t == 2) and (dones.any() == dones.all())
    assert venv.round_index == 1
    assert [info["k_schedule"] for info in infos] == [[1, 2, 3], [0, 0, 0], [0, 0, 0], [1, 2, 3]]
    assert all("terminal_observation" in info and "episode" in info for info in infos)
    again = MetaVecEnv(cfg, num_runs=4, seed=7, inner_factory=factory, round_index=1)
    np.testing.assert_array_equal(again.reset(), obs)
