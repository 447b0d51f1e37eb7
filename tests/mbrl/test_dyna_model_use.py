"""Dyna-DQN as Bhatia, Thomas & Zilberstein use it: K is the length of imagined rollouts that train Q, the final policy
acts on Q alone, controllers see training data only, MACURA's per-sample cut, and the training-data features."""

from __future__ import annotations

import itertools
import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import envs  # noqa: F401  (registers the rolloutlab/ ids)
from mbrl.algorithms.dyna import BatchedDynaDQN, DynaConfig
from mbrl.model_error import RMSE_HORIZONS
from mbrl.models.true_dynamics import TruePendulumModel
from mbrl.phases import TRAINING_DATA_KEYS, RolloutLengthDriver
from meta.control import RolloutLengthController, make_controller

ENV_ID = "rolloutlab/DiscretePendulum-v0"


def _cfg(**overrides: object) -> DynaConfig:
    values: dict[str, object] = {
        "budget": 400,
        "phase_length": 200,
        "rollout_freq": 100,
        "num_model_rollouts": 64,
        "learning_starts": 100,
        "batch_size": 16,
        "net_arch": [16],
        "eval_episodes": 1,
        "model_train_freq": 400,
        "controller_feedback": "training",
    }
    values.update(overrides)
    return DynaConfig(**values)  # type: ignore[arg-type]


def _learner(cfg: DynaConfig, models: list[Any], **kwargs: Any) -> BatchedDynaDQN:
    return BatchedDynaDQN([lambda: gym.make(ENV_ID)] * len(models), cfg, models=models, **kwargs)


def _q_run(algo: BatchedDynaDQN, run: int) -> list[torch.Tensor]:
    return [p.detach()[run].clone() for p in algo.q.parameters()]


class GrowingDisagreement(TruePendulumModel):
    """A model whose disagreement grows by 1 per step along every rollout: ``dtheta`` grows by 1 per model step and the
    disagreement is ``dtheta + 11`` (> 0 on real states, where ``|dtheta| <= 8``)."""

    def predict(self, obs, actions, rng, deterministic=False, disagreement_rows=None):  # type: ignore[no-untyped-def]
        step = super().predict(obs, actions, rng, deterministic)
        obs64 = np.asarray(obs, np.float64)
        step.next_obs = obs64 + np.array([0.0, 0.0, 1.0])
        step.disagreement = obs64[:, 2] + 11.0
        return step


def _recording_rollouts(algo: BatchedDynaDQN, run: int = 0) -> list[Any]:
    results: list[Any] = []
    rollout = algo.model_envs[run].rollout

    def recording(*args: Any, **kwargs: Any) -> Any:
        results.append(rollout(*args, **kwargs))
        return results[-1]

    algo.model_envs[run].rollout = recording  # type: ignore[method-assign]
    return results


# --- MACURA's per-sample cut ---------------------------------------------------------------------------------------


def test_dyna_uncertainty_cut_truncates_exactly_where_disagreement_passes_xi_times_the_percentile() -> None:
    """With MACURA's threshold 2 x P95 of the first step, each imagined rollout that trains Q keeps exactly the steps
    whose disagreement is at most the threshold and stops at the first one over it."""
    algo = _learner(_cfg(), [GrowingDisagreement()], seed=0)
    results = _recording_rollouts(algo)
    feedback = RolloutLengthDriver([make_controller("uncertainty:95,32,2")], k_cap=32).run_phase(algo)[0]
    assert len(results) == 2  # rollout rounds at env steps 100 and 200
    for result in results:
        first = result.first_step_disagreement
        threshold = 2.0 * np.percentile(first, 95)
        # Disagreement at step t of sample n is first[n] + t: kept while it is <= the threshold, at most 32 steps.
        expected = np.minimum(np.floor(threshold - first).astype(int) + 1, 32).clip(min=0)
        assert 0 < expected.min() < expected.max() < 32  # every rollout is cut mid-way, each at its own step
        np.testing.assert_array_equal(np.bincount(result.sample_id, minlength=len(first)), expected)
        assert (result.transitions.obs[:, 2] + 11.0 <= threshold).all()
        assert result.num_uncertainty_cut == int((expected < 32).sum())
    assert feedback["rollout_uncertainty_cut"] == sum(r.num_uncertainty_cut for r in results)
    # What was kept is what trains Q: the model buffer holds exactly the kept transitions.
    assert len(algo.model_buffers[0]) == feedback["model_transitions"] == sum(len(r.transitions) for r in results)


def test_lookahead_refuses_an_uncertainty_cut() -> None:
    """Lookahead makes no imagined training data: the cut would have nothing to cut and act as fixed:K_MAX."""
    algo = _learner(_cfg(model_use="lookahead"), [TruePendulumModel()], seed=0)
    driver = RolloutLengthDriver([make_controller("uncertainty:95,8,2")], k_cap=algo.cfg.k_cap)
    with pytest.raises(ValueError, match="model_use='lookahead'"):
        driver.run_phase(algo)
    assert algo.steps_done == 0


# --- the model trains Q; the final policy is Q alone ---------------------------------------------------------------


def test_dyna_mode_trains_on_imagined_rollouts_and_acts_on_q_alone() -> None:
    """K > 0 fills the model buffer with rollouts of K steps and mixes them into Q's updates; greedy actions (training
    and every evaluation) are Q's argmax and never query the model."""
    model = TruePendulumModel()
    algo = _learner(_cfg(), [model, model], seed=2, compute_matched=[True, True])
    driver = RolloutLengthDriver([make_controller("fixed:0"), make_controller("fixed:4")], k_cap=32)
    driver.run_phase(algo)
    assert len(algo.model_buffers[0]) == 0 and len(algo.model_buffers[1]) == 2 * 64 * 4  # 2 rounds x 64 x K
    assert algo.model_updates[0] == 0 and algo.model_updates[1] > 0
    assert algo.updates[0] == algo.updates[1]  # the same gradient steps: K changes only where the data comes from
    calls = []
    predict = model.predict

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return predict(*args, **kwargs)

    model.predict = counting  # type: ignore[method-assign]
    returns = algo.evaluate(2)
    assert not calls and np.isfinite(returns).all()
    obs = np.stack([algo.obs[0], algo.obs[0]])
    with torch.no_grad():
        q = algo.q(torch.as_tensor(obs).unsqueeze(1)).squeeze(1).numpy()
    np.testing.assert_array_equal(algo._greedy(obs), q.argmax(axis=-1))
    assert not calls


# --- nothing a controller sees comes from an evaluation --------------------------------------------------------------


class ReadsEverything(RolloutLengthController):
    """Decides from every finite number it is shown, so that any change in any feedback key changes its decisions."""

    def decide(self, feedback: Any) -> int:
        values = [
            float(v)
            for k, v in feedback.items()
            if not k.endswith("seconds") and isinstance(v, (int, float)) and math.isfinite(float(v))
        ]  # wall-clock timings aside
        return int(abs(sum(values)) * 1e6) % 5

    def max_length(self) -> int:
        return 4


def test_evaluation_episodes_feed_no_feature_and_no_decision() -> None:
    """With controller_feedback="training", 1 or 3 evaluation episodes per phase give the same feedback, key for key,
    and the same decisions of a controller that reads every key."""

    def run(eval_episodes: int) -> tuple[list[list[dict[str, float]]], list[list[int]], np.ndarray]:
        model = TruePendulumModel().perturbed({}, angle_offset=0.3)
        algo = _learner(_cfg(budget=600, eval_episodes=eval_episodes), [model, model], seed=4)
        driver = RolloutLengthDriver([ReadsEverything(), make_controller("fixed:4")], k_cap=32)
        feedback = []
        while not algo.done:
            feedback.append(driver.run_phase(algo))
        return feedback, driver.schedules, algo.last_evaluation.copy()

    (few, few_k, few_eval), (many, many_k, many_eval) = run(1), run(3)
    assert not np.array_equal(few_eval, many_eval)  # the evaluations differ ...
    assert few_k == many_k and len(set(few_k[0])) > 1  # ... the decisions do not (and they do vary)
    for phase_a, phase_b in zip(few, many, strict=True):
        for a, b in zip(phase_a, phase_b, strict=True):
            assert a.keys() == b.keys() and set(TRAINING_DATA_KEYS) <= set(a)
            for key in a:
                if not key.endswith("seconds"):
                    assert a[key] == b[key] or (math.isnan(a[key]) and math.isnan(b[key])), key


# --- batched = unbatched, bit for bit --------------------------------------------------------------------------------


def test_batched_runs_are_bit_identical_to_unbatched_ones_where_schedules_coincide() -> None:
    """Run i of a batch of three (different schedules beside it) has the same Q-network bit for bit, and the same
    feedback, as the same run alone."""
    model = TruePendulumModel().perturbed({}, angle_offset=0.3)
    cfg = _cfg(budget=600)
    specs = ["fixed:4", "fixed:0", "dec:8"]
    batch = _learner(cfg, [model] * 3, seed=0, run_seeds=[11, 12, 13], compute_matched=[True] * 3)
    batch_driver = RolloutLengthDriver([make_controller(s) for s in specs], k_cap=32)
    batch_feedback = batch_driver.run(batch)
    for i in (1, 2):
        alone = _learner(cfg, [model], seed=0, run_seeds=[11 + i], compute_matched=[True])
        alone_feedback = RolloutLengthDriver([make_controller(specs[i])], k_cap=32).run(alone)[0]
        for a, b in zip(_q_run(batch, i), _q_run(alone, 0), strict=True):
            assert torch.equal(a, b)
        for key, value in alone_feedback.items():
            if not key.endswith("seconds"):
                other = batch_feedback[i][key]
                assert value == other or (math.isnan(value) and math.isnan(other)), key


# --- training-data features ------------------------------------------------------------------------------------------


def test_training_data_features_disagreement_by_step_td_errors_and_return_trend() -> None:
    algo = _learner(_cfg(budget=800), [GrowingDisagreement(), TruePendulumModel()], seed=1)
    results = _recording_rollouts(algo, run=0)
    driver = RolloutLengthDriver([make_controller("fixed:8"), make_controller("fixed:0")], k_cap=32)
    phases = [driver.run_phase(algo) for _ in range(4)]
    growing, plain = phases[0]
    # Step h's disagreement is the first step's + (h - 1), averaged over the phase's rollouts (none cut, none ended).
    first = np.concatenate([r.first_step_disagreement for r in results[:2]])  # phase 0's rounds, at 100 and 200
    for h in RMSE_HORIZONS:
        key = f"rollout_disagreement_h{h}"
        if h <= 8:
            assert growing[key] == pytest.approx(first.mean() + h - 1)
        else:
            assert math.isnan(growing[key])  # K = 8: no rollout reaches step h
        assert math.isnan(plain[key])  # K = 0: no rollouts
    # The TD error on imagined data exists where Q trains on imagined data.
    assert math.isfinite(growing["td_error_imagined"]) and math.isnan(plain["td_error_imagined"])
    assert math.isfinite(plain["td_error_mean"])
    # The return trend: this phase's mean training return minus the previous phase's (200-step episodes, 200-step
    # phases: one finished episode per phase).
    for before, after in itertools.pairwise(phases):
        for b, a in zip(before, after, strict=True):
            assert a["train_return_trend"] == pytest.approx(a["train_return"] - b["train_return"])
    assert all(math.isnan(fb["train_return_trend"]) for fb in phases[0])
    assert phases[3][0]["budget_fraction"] == 1.0
