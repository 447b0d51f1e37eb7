"""Scoring sequences in the ensemble: member routing (TS-inf / TS-1), batched == loop, terminations, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mbrl.models import DynamicsModel, ModelConfig
from mbrl.termination import accepts_tensors
from planning.mpc import CEMOptimizer, MPCPlanner, TrajectoryEvaluator
from planning.mpc.trajectories import NONFINITE_RETURN


class RecordingModel:
    """x' = x + a + member, reward = x'; records the member of every slot of every step (a model and its
    propagator in one object, standardized units = environment units)."""

    obs_dim, action_dim, num_elites = 1, 1, 3
    device = torch.device("cpu")

    def __init__(self, nan_above: float | None = None) -> None:
        self.calls: list[np.ndarray] = []
        self.nan_above = nan_above
        self.offset = torch.zeros(0)

    def propagator(self, members=None) -> RecordingModel:
        members = np.arange(self.num_elites) if members is None else np.asarray(members)
        self.offset = torch.as_tensor(members, dtype=torch.float32)
        return self

    def _next(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        nxt = state + action + self.offset.reshape(-1, 1, 1)
        if self.nan_above is not None:
            nxt = torch.where(nxt > self.nan_above, torch.nan, nxt)
        return nxt

    def step(self, state, action, noise=None):
        self.calls.append(self.offset.numpy().copy())
        nxt = self._next(state, action)
        return nxt, nxt[..., 0]

    def forward(self, state, action, spread=True):
        nxt = self._next(state, action)
        mean = torch.cat([nxt, nxt - state], dim=-1)
        return mean, torch.zeros_like(mean) if spread else None

    def terminated_prob(self, state, action):
        return None


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _fitted_model(seed: int = 0) -> DynamicsModel:
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(400, 3))
    act = rng.uniform(-1, 1, size=(400, 2))
    nxt = obs + 0.1 * np.tanh(obs @ rng.normal(size=(3, 3))) + 0.05 * act @ rng.normal(size=(2, 3))
    reward = -(nxt**2).sum(axis=1)
    cfg = ModelConfig(ensemble_size=4, num_elites=3, hidden_size=32, num_layers=2, max_epochs=5, min_train_steps=0)
    model = DynamicsModel(3, 2, False, cfg, seed=seed)
    model.fit(obs, act, reward, nxt, np.zeros(400, bool))
    return model


def test_tsinf_keeps_every_particle_on_one_member_and_ts1_redraws() -> None:
    model = RecordingModel()
    seqs = np.zeros((4, 5, 1))
    TrajectoryEvaluator(model, None, None, "tsinf", num_particles=6).returns(np.zeros(1), seqs, _gen())
    assert len(model.calls) == 5
    for call in model.calls[1:]:
        np.testing.assert_array_equal(call, model.calls[0])
    # Particles spread evenly over the elites (slot p is particle p); each candidate meets the same members.
    np.testing.assert_array_equal(model.calls[0], [0, 0, 1, 1, 2, 2])

    # TS-1, one particle, zero actions, two steps: the return is 2 m1 + m2 with m1, m2 the members drawn at each
    # step; a particle that kept its member (TS-inf) would score a multiple of 3.
    ev = TrajectoryEvaluator(RecordingModel(), None, None, "ts1", num_particles=1, sample_noise=False)
    values = ev.returns(np.zeros(1), np.zeros((200, 2, 1)), _gen())
    assert set(np.round(values).astype(int)) - {0, 3, 6}


def test_returns_follow_the_member_dynamics() -> None:
    # One particle per member, actions 1: x_t = t (1 + m), returns sum_t x_t = (1 + m) H (H + 1) / 2 averaged.
    model = RecordingModel()
    ev = TrajectoryEvaluator(model, None, None, "tsinf", num_particles=3)
    value = ev.returns(np.zeros(1), np.ones((1, 4, 1)), _gen())
    assert value == pytest.approx(np.mean([(1 + m) * 10 for m in range(3)]))


def test_termination_stops_rewards_and_nonfinite_scores_worst() -> None:
    def done(obs, action, next_obs):
        return next_obs[:, 0] >= 2.0

    ev = TrajectoryEvaluator(RecordingModel(), None, done, "expectation")
    # expectation offset 1: x = 2, 4, ... -> terminates on the first step, collecting only its reward 2.
    assert ev.returns(np.zeros(1), np.ones((1, 5, 1)), _gen())[0] == pytest.approx(2.0)
    ev = TrajectoryEvaluator(RecordingModel(nan_above=5.0), None, None, "expectation")
    values = ev.returns(np.zeros(1), np.stack([np.ones((5, 1)), np.zeros((5, 1)) - 1]), _gen())
    assert values[0] == NONFINITE_RETURN and values[1] > NONFINITE_RETURN


def test_predict_members_routes_each_row_through_its_member() -> None:
    model = _fitted_model()
    rng = np.random.default_rng(1)
    obs, act = rng.normal(size=(9, 3)), rng.uniform(-1, 1, size=(9, 2))
    members = np.array([2, 0, 1, 1, 0, 2, 2, 0, 1])
    step = model.predict_members(obs, act, members, deterministic=True)
    x = model.input_normalizer.normalize(torch.as_tensor(model._inputs(obs, act))).float()
    with torch.no_grad():
        mean, _ = model.ensemble(x)
    elite = model.ensemble.elite_idx.numpy()
    y = model.output_normalizer.denormalize(mean[elite[members], np.arange(9)].double()).numpy()
    np.testing.assert_allclose(step.next_obs, obs + y[:, 1:], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(step.reward, y[:, 0], rtol=1e-5, atol=1e-6)
    # The blocked fast path (rows sorted in equal blocks per member) agrees with the general one.
    order = np.argsort(members, kind="stable")
    blocked = model.predict_members(obs[order], act[order], members[order], deterministic=True)
    np.testing.assert_allclose(blocked.next_obs, step.next_obs[order], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="member indices"):
        model.predict_members(obs, act, members + 1, deterministic=True)
    with pytest.raises(ValueError, match="rng"):
        model.predict_members(obs, act, members)


@pytest.mark.parametrize(("propagation", "particles"), [("tsinf", 6), ("tsinf", 2), ("expectation", 1)])
def test_batched_evaluation_equals_a_loop(propagation: str, particles: int) -> None:
    model = _fitted_model()
    ev = TrajectoryEvaluator(
        model, lambda o, a, n: -(n**2).sum(axis=1), None, propagation, particles, sample_noise=False
    )
    rng = np.random.default_rng(3)
    obs, seqs = rng.normal(size=3), rng.uniform(-1, 1, size=(7, 5, 2))
    batched = ev.returns(obs, seqs, _gen())
    looped = np.array([ev.returns(obs, seqs[i : i + 1], _gen())[0] for i in range(7)])
    np.testing.assert_allclose(batched, looped, rtol=1e-5)
    # And the float32 planning path equals the model's float64 per-member prediction, step by step, to rounding.
    c, h = seqs.shape[:2]
    k = model.num_elites
    members = (np.arange(particles) * k) // particles
    total = np.zeros((particles, c))
    state = np.broadcast_to(obs, (particles * c, 3)).copy()
    for t in range(h):
        action = np.tile(seqs[:, t], (particles, 1))
        if propagation == "expectation":
            step = model.predict_expected(state, action)
        else:
            step = model.predict_members(state, action, np.repeat(members, c), deterministic=True)
        total += -(step.next_obs**2).sum(axis=1).reshape(particles, c)
        state = step.next_obs
    np.testing.assert_allclose(batched, total.mean(axis=0), rtol=1e-4, atol=1e-4)


@accepts_tensors
def _angle_reward(obs: torch.Tensor, action: torch.Tensor, next_obs: torch.Tensor) -> torch.Tensor:
    """An atan2 reward (a transcendental op, like Pendulum's) that turns NaN where ``next_obs[..., 0] > 0.4``."""
    value = -(torch.atan2(obs[..., 1], obs[..., 0]) ** 2) - 0.1 * action[..., 0] ** 2
    return torch.where(next_obs[..., 0] > 0.4, torch.nan, value)


@accepts_tensors
def _ends_low(obs: torch.Tensor, action: torch.Tensor, next_obs: torch.Tensor) -> torch.Tensor:
    return next_obs[..., 2] < -0.2


def _step_by_step(model, obs, seqs, generator, reward_fn, termination, particles, discount) -> torch.Tensor:
    """PETS's scoring written as one step at a time: reward, finiteness and termination masks after every step."""
    k = model.num_elites
    prop = model.propagator((np.arange(particles) * k) // particles)
    seqs = torch.as_tensor(seqs, dtype=torch.float32)
    c, h, act_dim = seqs.shape
    noise = torch.randn((h, particles, c, model.obs_dim + 1), generator=generator)
    state = torch.as_tensor(obs, dtype=torch.float32).expand(particles, c, -1)
    total = torch.zeros(particles, c)
    alive = torch.ones(particles, c, dtype=torch.bool)
    broken = torch.zeros(particles, c, dtype=torch.bool)
    weight = 1.0
    for t in range(h):
        action = seqs[:, t].expand(particles, c, act_dim)
        next_obs, _ = prop.step(state, action, noise[t])
        reward = reward_fn(state, action, next_obs)
        finite = torch.isfinite(next_obs).all(dim=-1) & torch.isfinite(reward)
        broken |= alive & ~finite
        alive &= finite
        total += weight * torch.where(alive, reward, 0.0)
        if termination is not None:
            alive &= ~termination(state, action, next_obs)
        weight *= discount
        state = next_obs
    return torch.where(broken, NONFINITE_RETURN, total).mean(dim=0)


@pytest.mark.parametrize(("termination", "discount"), [(None, 1.0), (_ends_low, 1.0), (_ends_low, 0.9)])
def test_whole_trajectory_scoring_equals_step_by_step_bit_for_bit(termination, discount: float) -> None:
    # The evaluator scores the whole simulated trajectory at once; the returns must be the step-by-step ones exactly
    # (the committed PETS runs are reproduced to the last bit), NaN rewards and terminations included.
    model = _fitted_model()
    rng = np.random.default_rng(5)
    obs, seqs = rng.normal(size=3) * 0.3, rng.uniform(-1, 1, size=(40, 8, 2))
    ev = TrajectoryEvaluator(model, _angle_reward, termination, "tsinf", num_particles=6, discount=discount)
    batched = ev.objective(obs, _gen(7))(torch.as_tensor(seqs, dtype=torch.float32))
    expected = _step_by_step(model, obs, seqs, _gen(7), _angle_reward, termination, 6, discount)
    # Some candidates have a broken particle (their mean carries NONFINITE_RETURN / 6), others none.
    assert bool((expected < NONFINITE_RETURN / 10).any()) and bool((expected > -1e3).any())
    assert torch.equal(batched, expected)


def test_shape_mismatches_are_refused() -> None:
    model = _fitted_model()
    ev = TrajectoryEvaluator(model, None, None)
    with pytest.raises(ValueError, match="3-dim observations"):
        ev.returns(np.zeros(4), np.zeros((2, 3, 2)), _gen())
    with pytest.raises(ValueError, match="2-dim actions"):
        ev.returns(np.zeros(3), np.zeros((2, 3, 1)), _gen())
    with pytest.raises(ValueError, match="takes 2-dim"):
        MPCPlanner(ev, CEMOptimizer(np.array([-1.0]), np.array([1.0])), 5, _gen())
    with pytest.raises(ValueError, match="horizon"):
        MPCPlanner(ev, CEMOptimizer(-np.ones(2), np.ones(2)), 0, _gen())
    with pytest.raises(ValueError, match="propagation"):
        TrajectoryEvaluator(model, None, None, "moment-matching")


def test_planner_warm_starts_with_the_shifted_plan() -> None:
    model = _fitted_model()
    planner = MPCPlanner(
        TrajectoryEvaluator(model, None, None, "expectation"),
        CEMOptimizer(-np.ones(2), np.ones(2)),
        4,
        _gen(),
    )
    np.testing.assert_array_equal(planner.initial_plan(), np.zeros((4, 2)))
    plan = planner.plan(np.zeros(3)).numpy()
    np.testing.assert_array_equal(planner.initial_plan(), np.concatenate([plan[1:], np.zeros((1, 2))]))
    planner.horizon = 2
    np.testing.assert_array_equal(planner.initial_plan(), plan[1:3])
    planner.horizon = 6
    np.testing.assert_array_equal(planner.initial_plan(), np.concatenate([plan[1:], np.zeros((3, 2))]))
    saved = planner.state_dict()
    planner.reset()
    np.testing.assert_array_equal(planner.initial_plan(), np.zeros((6, 2)))
    planner.load_state_dict(saved)
    np.testing.assert_array_equal(planner.initial_plan(), np.concatenate([plan[1:], np.zeros((3, 2))]))
    planner.reset()
    action = planner.act(np.zeros(3))
    assert action.shape == (2,) and action.dtype == np.float32 and len(planner.latencies) == 1
