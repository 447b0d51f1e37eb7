"""Halting controllers of the adaptive-length tokenizer: hand-computed decisions on given error sequences, the spec
grammar, the learned predictor, state round trips and budget matching."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from meta.control import make_controller
from meta.control.spec import HALTING, ROLLOUT_LENGTH, build_spec
from meta.tokenizer.config import TokenizerConfig, tokens_after
from meta.tokenizer.evaluate import chosen, count_features, fit_count_predictor, threshold_for_budget
from meta.tokenizer.halting import (
    CountPredictor,
    ErrorThreshold,
    FixedCount,
    LearnedCount,
    halting_iterations,
    make_halting,
)

# One image's reconstruction MSE after iterations 1..4.
ERRORS = np.array([[0.05, 0.02, 0.009, 0.004]])


def test_tokens_per_iteration_follow_the_schedule() -> None:
    # The first iteration creates initial_tokens, each later one adds tokens_per_iteration.
    assert [tokens_after(t, 2, 2) for t in (1, 2, 3, 8)] == [2, 4, 6, 16]
    assert [tokens_after(t, 4, 1) for t in (1, 2, 5)] == [4, 5, 8]
    assert TokenizerConfig(iterations=4, initial_tokens=3, tokens_per_iteration=2).token_counts() == [3, 5, 7, 9]
    assert TokenizerConfig(iterations=4, initial_tokens=3, tokens_per_iteration=2).max_tokens == 9
    with pytest.raises(ValueError, match="counted from 1"):
        tokens_after(0, 2, 2)


@pytest.mark.parametrize(
    ("threshold", "max_iters", "expected"),
    [
        (0.01, 8, 3),  # 0.009 is the first error at or below 0.01
        (0.02, 8, 2),  # "at most": an error equal to the threshold halts
        (0.1, 8, 1),
        (0.001, 8, 4),  # never reached: the curve's last iteration
        (0.001, 2, 2),  # never reached before MAX
        (0.0, 4, 4),
    ],
)
def test_error_threshold_halts_at_the_first_error_at_most_the_threshold(
    threshold: float, max_iters: int, expected: int
) -> None:
    assert halting_iterations(ErrorThreshold(threshold, max_iters), ERRORS).tolist() == [expected]


def test_error_threshold_decides_from_feedback() -> None:
    rule = ErrorThreshold(0.01, 3)
    assert rule.decide({"iteration": 1, "recon_error": 0.05}) is False
    assert rule.decide({"iteration": 2, "recon_error": 0.01}) is True
    assert rule.decide({"iteration": 3, "recon_error": 0.5}) is True  # MAX
    with pytest.raises(KeyError, match=r"ErrorThreshold needs feedback\['recon_error'\]"):
        rule.decide({"iteration": 1})


def test_fixed_count_ignores_the_error() -> None:
    errors = np.array([[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    assert halting_iterations(FixedCount(2), errors).tolist() == [2, 2]
    assert halting_iterations(FixedCount(9), errors).tolist() == [4, 4]  # the curve ends at T = 4
    with pytest.raises(ValueError, match="at least 1 iteration"):
        FixedCount(0)


def _predictor() -> CountPredictor:
    # count = round(2 * feature + 3), clipped to 1..6 (feature already standardized: mean 0, scale 1).
    return CountPredictor(mean=[0.0], scale=[1.0], weights=[2.0], bias=3.0, max_iters=6, threshold=0.01)


def test_count_predictor_rounds_and_clips() -> None:
    assert _predictor().predict(np.array([[0.4], [-5.0], [5.0], [0.0]])).tolist() == [4, 1, 6, 3]


def test_count_predictor_fit_recovers_a_linear_rule() -> None:
    x = np.array([[0.0], [1.0], [2.0], [3.0]])
    fitted = CountPredictor.fit(x, 1.0 + x[:, 0], max_iters=8, threshold=0.01, ridge=0.0)
    assert fitted.predict(x).tolist() == [1, 2, 3, 4]
    assert fitted.bias == pytest.approx(2.5)


def test_learned_count_decides_once_and_its_state_round_trips() -> None:
    controller = LearnedCount(_predictor())
    assert controller.decide({"iteration": 1, "features": [0.4]}) is False  # target 4
    assert controller.state_dict() == {"target": 4}
    restored = LearnedCount(_predictor())
    restored.load_state_dict(controller.state_dict())
    # The restored controller goes on with the image in progress without seeing its features again.
    assert [restored.decide({"iteration": t}) for t in (2, 3, 4)] == [False, False, True]
    restored.reset()
    assert restored.state_dict() == {"target": None}
    with pytest.raises(KeyError, match="unexpected keys"):
        restored.load_state_dict({"target": 1, "other": 2})
    counts = halting_iterations(LearnedCount(_predictor()), np.zeros((2, 6)), features=np.array([[0.4], [-1.0]]))
    assert counts.tolist() == [4, 1]


def test_specs_build_each_halting_controller(tmp_path: Path) -> None:
    assert repr(make_halting("halt_fixed:3")) == "FixedCount(3)"
    assert repr(make_halting("halt_error:0.01")) == "ErrorThreshold(0.01, 8)"
    assert repr(make_halting("halt_error:0.005,6")) == "ErrorThreshold(0.005, 6)"
    path = _predictor().save(tmp_path / "predictor.json")
    learned = make_halting(f"halt_learned:{path}")
    assert isinstance(learned, LearnedCount) and learned.predictor == _predictor()
    assert repr(build_spec(HALTING, "halt_fixed:2")) == "FixedCount(2)"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("halt_fixed:2.5", "N must be a whole number"),
        ("halt_fixed", "takes N, got 0"),
        ("halt_error:0.01,2.5", "MAX must be a whole number"),
        ("halt_error:-1", "need THRESHOLD >= 0"),
        ("halt_learned", "takes PATH"),
        ("halt_learned:/no/such/file.json", "count predictor file not found"),
        ("fixed:3", "'fixed' is a rollout-length controller spec, not a tokenizer halting controller"),
        ("halt_sometimes:1", "known tokenizer halting controller specs: halt_error, halt_fixed, halt_learned"),
    ],
)
def test_bad_specs_are_refused_in_one_sentence(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_halting(spec)


def test_a_halting_spec_is_not_a_rollout_length_controller() -> None:
    with pytest.raises(ValueError, match=f"build 'halt_fixed:3' with {HALTING.builder}"):
        make_controller("halt_fixed:3")
    assert ROLLOUT_LENGTH != HALTING


def test_a_malformed_predictor_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"mean": [0.0]}))
    with pytest.raises(ValueError, match="must hold exactly the keys"):
        CountPredictor.load(path)
    path.write_text("not json")
    with pytest.raises(ValueError, match="is not JSON"):
        CountPredictor.load(path)


def test_threshold_for_budget_meets_the_mean_count() -> None:
    errors = np.array([[0.5, 0.1, 0.05], [0.2, 0.02, 0.01], [0.9, 0.8, 0.7]])
    # Budget 2 iterations per image: threshold 0.1 gives counts [2, 2, 3] (mean 2.33); 0.2 gives [2, 1, 3] = 2.
    threshold = threshold_for_budget(errors, 2.0)
    assert threshold == 0.2
    counts = halting_iterations(ErrorThreshold(threshold, 3), errors)
    assert counts.tolist() == [2, 1, 3]
    assert chosen(errors, counts).tolist() == [0.1, 0.2, 0.7]
    assert threshold_for_budget(errors, 3.0) == 0.01  # the smallest candidate: every image runs all 3 iterations
    assert threshold_for_budget(errors, 1.0) == 0.9
    with pytest.raises(ValueError, match="below one iteration"):
        threshold_for_budget(errors, 0.5)


def test_fit_count_predictor_targets_the_threshold_counts() -> None:
    rng = np.random.default_rng(0)
    images = rng.random((40, 4, 4)).astype(np.float32)
    first = rng.uniform(0.011, 0.3, size=40)
    # Curves whose count under threshold 0.01 is set by the first error: decay by a factor 2 per iteration.
    errors = first[:, None] * 0.5 ** np.arange(6)[None, :]
    predictor = fit_count_predictor(images, errors, threshold=0.01, ridge=1e-6)
    target = halting_iterations(ErrorThreshold(0.01, 6), errors)
    predicted = predictor.predict(count_features(images, errors[:, 0]))
    assert np.mean(np.abs(predicted - target)) < 0.5
    assert predictor.threshold == 0.01 and predictor.max_iters == 6
