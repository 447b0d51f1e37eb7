"""Imagined rollouts: per-sample termination, horizon cuts as truncation, NaN handling, disagreement records."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from mbrl.model_env import ModelEnv
from mbrl.models import DynamicsModel, ModelConfig
from meta.control import UncertaintyTruncation


@dataclass
class _Step:
    next_obs: np.ndarray
    reward: np.ndarray
    terminated_prob: np.ndarray | None
    disagreement: np.ndarray
    finite: np.ndarray = field(default_factory=lambda: np.ones(0, bool))  # empty: every row finite


class _CountingModel:
    """Deterministic stand-in: x' = x + a, reward = x', disagreement = |x'| (grows along the rollout)."""

    def __init__(self, nan_at: float | None = None, prob: bool = False) -> None:
        self.nan_at = nan_at
        self.prob = prob

    def predict(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rng: np.random.Generator,
        deterministic: bool = False,
        disagreement_rows: int | None = None,
    ) -> _Step:
        nxt = obs + actions.reshape(-1, 1)
        if self.nan_at is not None:
            nxt[nxt[:, 0] >= self.nan_at] = np.nan
        prob = (nxt[:, 0] >= 3).astype(float) if self.prob else None
        disagreement = np.abs(nxt[:, 0])
        if disagreement_rows is not None:
            disagreement[disagreement_rows:] = np.nan
        return _Step(nxt, nxt[:, 0].copy(), prob, disagreement)


def _stop_at(limit: float):  # terminate when x' >= limit
    return lambda o, a, n: n[:, 0] >= limit


def _policy(obs: np.ndarray) -> np.ndarray:
    return np.ones((obs.shape[0], 1), np.float32)


def test_per_sample_termination_and_truncation() -> None:
    env = ModelEnv(_CountingModel(), _stop_at(3.0), obs_dim=1, action_shape=(1,))
    start = np.array([[0.0], [1.0], [2.5]], np.float32)
    res = env.rollout(start, _policy, horizon=4, rng=np.random.default_rng(0))
    t = res.transitions
    # sample 0: x' = 1, 2, 3 (terminates at step 3); sample 1: 2, 3 (terminates at step 2); sample 2: 3.5 (step 1).
    assert len(t) == 6
    np.testing.assert_allclose(sorted(t.next_obs[t.terminated, 0]), [3.0, 3.0, 3.5])
    assert not t.truncated.any()  # everyone terminated before the horizon
    assert res.alive_by_step == [3, 2, 1]
    assert res.num_terminated == 3


def test_horizon_cut_is_truncated_never_terminated() -> None:
    env = ModelEnv(_CountingModel(), None, obs_dim=1, action_shape=(1,))
    res = env.rollout(np.zeros((5, 1), np.float32), _policy, horizon=3, rng=np.random.default_rng(0))
    t = res.transitions
    assert len(t) == 15 and not t.terminated.any()
    np.testing.assert_array_equal(t.truncated, np.repeat([False, False, True], 5))
    assert len(res.disagreement_by_step) == 3
    np.testing.assert_allclose(res.disagreement_by_step, [1.0, 2.0, 3.0])
    np.testing.assert_allclose(res.first_step_disagreement, np.ones(5))
    assert len(env.rollout(np.zeros((2, 1)), _policy, horizon=0, rng=np.random.default_rng(0)).transitions) == 0


def test_multi_step_transitions_run_to_the_end_of_their_rollout() -> None:
    """Model value expansion: step t of a rollout that stored T transitions sums T - t rewards and bootstraps from
    the rollout's last state with that rollout's terminal flag."""
    env = ModelEnv(_CountingModel(), _stop_at(3.0), obs_dim=1, action_shape=(1,))
    start = np.array([[0.0], [1.0], [-5.0]], np.float32)
    res = env.rollout(start, _policy, horizon=4, rng=np.random.default_rng(0))
    gamma = 0.5
    ms = res.multi_step(gamma)
    assert len(ms) == len(res.transitions) == 3 + 2 + 4
    # sample 0: x' = 1, 2, 3 (terminal): rewards 1, 2, 3.
    first = (res.sample_id == 0) & (res.step == 0)
    assert ms.reward[first][0] == pytest.approx(1 + gamma * 2 + gamma**2 * 3)
    assert ms.steps[first][0] == 3 and ms.terminated[first][0] and ms.next_obs[first][0, 0] == 3.0
    # sample 2 never terminates: x' = -4 .. -1, cut at the horizon, so it bootstraps (not terminated).
    first2 = (res.sample_id == 2) & (res.step == 0)
    assert ms.reward[first2][0] == pytest.approx(-4 + gamma * -3 + gamma**2 * -2 + gamma**3 * -1)
    assert ms.steps[first2][0] == 4 and not ms.terminated[first2][0] and ms.next_obs[first2][0, 0] == -1.0
    # The last stored transition of each rollout is left as it was.
    last = res.step == np.array([2, 1, 3])[res.sample_id]
    np.testing.assert_array_equal(ms.steps[last], 1)
    np.testing.assert_allclose(ms.reward[last], res.transitions.reward[last])
    # One-step rollouts come back unchanged.
    one = env.rollout(start, _policy, horizon=1, rng=np.random.default_rng(0))
    np.testing.assert_allclose(one.multi_step(gamma).reward, one.transitions.reward)


def test_lookahead_values_roll_each_action_out_then_follow_the_greedy_policy() -> None:
    """x' = x + a, reward x'. With Q = 0 everywhere the greedy policy then takes action 0, so the state stays put:
    value(a) = sum_{t<H} gamma^t (x + a), and a rollout that terminates keeps only the rewards up to its end."""
    gamma, horizon = 0.5, 3
    q_zero = lambda o: np.zeros((o.shape[0], 3))  # noqa: E731
    env = ModelEnv(_CountingModel(), None, obs_dim=1, action_shape=())
    values = env.lookahead_values(np.array([[1.0], [0.0]]), 3, q_zero, horizon, gamma, np.random.default_rng(0))
    discount = sum(gamma**t for t in range(horizon))
    np.testing.assert_allclose(values, np.array([[1, 2, 3], [0, 1, 2]]) * discount)
    stop = ModelEnv(_CountingModel(), _stop_at(3.0), obs_dim=1, action_shape=())
    values = stop.lookahead_values(np.array([[1.0]]), 3, q_zero, horizon, gamma, np.random.default_rng(0))
    np.testing.assert_allclose(values[0], [1 * discount, 2 * discount, 3.0])  # action 2 reaches 3 and ends
    # The Q-function closes the rollout: with Q = 10 for every action the bootstrap adds gamma^H * 10.
    q_ten = lambda o: np.full((o.shape[0], 3), 10.0)  # noqa: E731
    values = env.lookahead_values(np.array([[0.0]]), 3, q_ten, 1, gamma, np.random.default_rng(0))
    np.testing.assert_allclose(values[0], np.array([0.0, 1.0, 2.0]) + gamma * 10.0)
    with pytest.raises(ValueError, match="horizon"):
        env.lookahead_values(np.array([[0.0]]), 3, q_zero, 0, gamma, np.random.default_rng(0))


def test_learned_termination_used_without_known_function() -> None:
    env = ModelEnv(_CountingModel(prob=True), None, obs_dim=1, action_shape=(1,))
    res = env.rollout(np.zeros((2, 1), np.float32), _policy, horizon=5, rng=np.random.default_rng(0))
    assert res.transitions.terminated.sum() == 2 and len(res.transitions) == 6


def test_nonfinite_predictions_are_dropped_and_counted() -> None:
    env = ModelEnv(_CountingModel(nan_at=2.0), None, obs_dim=1, action_shape=(1,))
    res = env.rollout(np.array([[0.0], [5.0]], np.float32), _policy, horizon=3, rng=np.random.default_rng(0))
    assert np.isfinite(res.transitions.next_obs).all()
    assert res.num_nonfinite == 2  # sample 1 at step 0, sample 0 at step 1
    assert len(res.transitions) == 1


def test_uncertainty_threshold_and_controller_keep() -> None:
    env = ModelEnv(_CountingModel(), None, obs_dim=1, action_shape=(1,))
    res = env.rollout(np.zeros((4, 1), np.float32), _policy, 5, np.random.default_rng(0), disagreement_threshold=2.5)
    assert len(res.transitions) == 8 and res.num_uncertainty_cut == 4  # steps with disagreement 1, 2 kept
    # MACURA-style: threshold = 50th percentile of first-step disagreement over starts 0..3 -> |1..4| -> 2.5
    controller = UncertaintyTruncation(50, k_max=5)
    start = np.arange(4, dtype=np.float32)[:, None]
    res = env.rollout(start, _policy, controller.decide({}), np.random.default_rng(0), keep_fn=controller.keep)
    assert controller.threshold == pytest.approx(2.5)
    assert res.num_uncertainty_cut == 4 and len(res.transitions) == 3  # 1, 2 at step 0; 2 at step 1


def test_rollout_with_a_trained_dynamics_model() -> None:
    rng = np.random.default_rng(0)
    obs = rng.uniform(-1, 1, size=(400, 2))
    act = rng.uniform(-1, 1, size=(400, 1))
    nxt = obs + 0.1 * act
    cfg = ModelConfig(ensemble_size=3, num_elites=2, hidden_size=16, num_layers=2, max_epochs=5)
    model = DynamicsModel(2, 1, False, cfg, seed=0)
    model.fit(obs, act, -np.abs(nxt[:, 0]), nxt, np.zeros(400, bool))
    env = ModelEnv(model, lambda o, a, n: np.abs(n[:, 0]) > 5.0, obs_dim=2, action_shape=(1,))
    res = env.rollout(obs[:50].astype(np.float32), lambda o: np.zeros((len(o), 1), np.float32), 3, rng)
    assert len(res.transitions) == 150 and res.transitions.obs.dtype == np.float32
    assert len(res.disagreement_by_step) == 3 and all(d >= 0 for d in res.disagreement_by_step)
    assert res.transitions.truncated.sum() == 50


def test_model_episodes_report_disagreement_overall_and_within_the_first_k_steps() -> None:
    env = ModelEnv(_CountingModel(), _stop_at(3.0), obs_dim=1, action_shape=(1,))
    start = np.array([[0.0], [1.0]], np.float32)
    episodes = env.episodes(start, _policy, max_steps=10, rng=np.random.default_rng(0))
    # x' = 1, 2, 3 and 2, 3: disagreement |x'| per live step is [1, 2], [2, 3], [3].
    np.testing.assert_array_equal(episodes.returns, [6.0, 5.0])
    np.testing.assert_array_equal(episodes.lengths, [3, 2])
    assert [d.tolist() for d in episodes.disagreement_by_step] == [[1.0, 2.0], [2.0, 3.0], [3.0]]
    assert episodes.disagreement == pytest.approx(11 / 5)
    assert episodes.disagreement_within(0) == pytest.approx(1.5)  # K = 0 still reads one step
    assert episodes.disagreement_within(2) == pytest.approx(2.0)
    assert episodes.disagreement_within(50) == episodes.disagreement


class _TwoWayModel(_CountingModel):
    """``predict`` steps x' = x + a; ``predict_expected`` (the elites' average) steps x' = x + 2a."""

    def predict_expected(self, obs: np.ndarray, actions: np.ndarray) -> _Step:
        nxt = obs + 2 * actions.reshape(-1, 1)
        return _Step(nxt, nxt[:, 0].copy(), None, np.abs(nxt[:, 0]))


def test_lookahead_can_step_with_the_elites_average_prediction() -> None:
    env = ModelEnv(_TwoWayModel(), _stop_at(100.0), obs_dim=1, action_shape=(), action_dtype=np.int64)
    start = np.zeros((1, 1), np.float32)

    def q_fn(obs: np.ndarray) -> np.ndarray:
        return np.zeros((obs.shape[0], 2))

    sampled = env.lookahead_values(start, 2, q_fn, 1, 1.0, np.random.default_rng(0))
    averaged = env.lookahead_values(start, 2, q_fn, 1, 1.0, np.random.default_rng(0), expectation=True)
    np.testing.assert_array_equal(sampled, [[0.0, 1.0]])  # reward = x' = a
    np.testing.assert_array_equal(averaged, [[0.0, 2.0]])  # reward = x' = 2a
    plain = ModelEnv(_CountingModel(), _stop_at(100.0), obs_dim=1, action_shape=(), action_dtype=np.int64)
    np.testing.assert_array_equal(  # a model without predict_expected (the true simulator) steps as usual
        plain.lookahead_values(start, 2, q_fn, 1, 1.0, np.random.default_rng(0), expectation=True), sampled
    )


def test_disagreement_is_a_subsample_unless_the_rollout_cuts_on_it() -> None:
    start = np.arange(6, dtype=np.float32)[:, None]
    env = ModelEnv(_CountingModel(), None, obs_dim=1, action_shape=(1,), disagreement_sample=2)
    res = env.rollout(start, _policy, 2, np.random.default_rng(0))
    # Only the first two live samples (x' = 1, 2 then 2, 3) are scored when nothing cuts on disagreement.
    np.testing.assert_array_equal(res.first_step_disagreement, [1.0, 2.0])
    assert res.disagreement_by_step == [1.5, 2.5] and len(res.transitions) == 12
    cut = env.rollout(start, _policy, 2, np.random.default_rng(0), disagreement_threshold=100.0)
    np.testing.assert_array_equal(cut.first_step_disagreement, np.arange(1.0, 7.0))
    assert cut.disagreement_by_step == [3.5, 4.5]
