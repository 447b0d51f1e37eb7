"""rolloutlab.statistics against scipy.stats and rliable called directly on fixed data, plus the degenerate cases."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.stats

from rolloutlab import statistics

# Fixed data: final returns of two arms over eight seeds (paired by seed).
A = np.array([-231.0, -95.5, -120.25, -310.0, -88.0, -150.5, -99.75, -402.0])
B = np.array([-250.0, -130.0, -110.0, -330.5, -140.0, -160.0, -101.0, -380.0])


def _scipy(data: tuple[np.ndarray, ...], stat: Callable[..., Any], seed: int, **kwargs: Any) -> Any:
    """scipy.stats.bootstrap itself, with a fresh generator from ``seed``."""
    return scipy.stats.bootstrap(data, stat, rng=np.random.default_rng(seed), vectorized=True, **kwargs)


# --- mean and standard error -------------------------------------------------------------------------------------


def test_mean_with_stderr_is_scipy_sem() -> None:
    mean, stderr = statistics.mean_with_stderr(A)
    assert mean == float(np.mean(A))
    assert stderr == float(scipy.stats.sem(A))
    assert stderr == pytest.approx(float(np.std(A, ddof=1)) / math.sqrt(A.size), rel=1e-15)


@pytest.mark.filterwarnings("error")
def test_mean_with_stderr_degenerate_inputs() -> None:
    assert statistics.mean_with_stderr([3.5]) == (3.5, 0.0)  # scipy would warn and return NaN
    assert statistics.mean_with_stderr([2.0, 2.0, 2.0]) == (2.0, 0.0)
    with pytest.raises(ValueError, match="at least one"):
        statistics.mean_with_stderr([])


def test_pointwise_mean_with_stderr_is_sem_over_runs() -> None:
    curves = np.stack([A, B, A + 1.0])
    mean, stderr = statistics.pointwise_mean_with_stderr(curves)
    np.testing.assert_array_equal(mean, curves.mean(axis=0))
    np.testing.assert_array_equal(stderr, scipy.stats.sem(curves, axis=0))
    one_mean, one_stderr = statistics.pointwise_mean_with_stderr(A[None, :])
    np.testing.assert_array_equal(one_mean, A)
    np.testing.assert_array_equal(one_stderr, np.zeros_like(A))
    with pytest.raises(ValueError, match="runs, points"):
        statistics.pointwise_mean_with_stderr(A)


# --- bootstrap intervals -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_mean_interval_matches_scipy_bootstrap(method: str) -> None:
    estimate = statistics.mean_interval(A, rng=7, n_resamples=2000, method=method)  # type: ignore[arg-type]
    reference = _scipy((A,), np.mean, 7, n_resamples=2000, method=method)
    assert estimate.value == float(np.mean(A))
    assert estimate.low == pytest.approx(reference.confidence_interval.low, rel=1e-12)
    assert estimate.high == pytest.approx(reference.confidence_interval.high, rel=1e-12)
    assert estimate.standard_error == pytest.approx(reference.standard_error, rel=1e-12)
    assert estimate.undefined == 0
    assert estimate.low < estimate.value < estimate.high


def test_a_generator_advances_through_calls_like_scipy() -> None:
    rng = np.random.default_rng(3)
    first, second = (statistics.mean_interval(A, rng=rng, n_resamples=500) for _ in range(2))
    shared = np.random.default_rng(3)
    ref_first, ref_second = (
        scipy.stats.bootstrap((A,), np.mean, n_resamples=500, method="percentile", rng=shared) for _ in range(2)
    )
    assert (first.low, first.high) == pytest.approx(tuple(ref_first.confidence_interval), rel=1e-12)
    assert (second.low, second.high) == pytest.approx(tuple(ref_second.confidence_interval), rel=1e-12)
    assert (first.low, first.high) != (second.low, second.high)
    assert statistics.mean_interval(A, rng=3, n_resamples=500) == first  # same seed, same numbers


def test_paired_difference_matches_scipy_paired_bootstrap() -> None:
    def iqm_difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return scipy.stats.trim_mean(x, 0.25, axis=axis) - scipy.stats.trim_mean(y, 0.25, axis=axis)

    estimate = statistics.paired_difference(A, B, statistic=statistics.iqm, rng=0, n_resamples=2000)
    reference = _scipy((A, B), iqm_difference, 0, n_resamples=2000, paired=True, method="percentile")
    assert estimate.value == pytest.approx(float(iqm_difference(A, B)))
    assert (estimate.low, estimate.high) == pytest.approx(tuple(reference.confidence_interval), rel=1e-12)
    assert estimate.standard_error == pytest.approx(reference.standard_error, rel=1e-12)
    # For the mean, the paired bootstrap of a - b is the one-sample bootstrap of the differences.
    mean_diff = statistics.paired_difference(A, B, rng=1, n_resamples=1000)
    of_diffs = statistics.mean_interval(A - B, rng=1, n_resamples=1000)
    assert mean_diff[:4] == pytest.approx(of_diffs[:4], rel=1e-9)


@pytest.mark.parametrize("paired", [True, False])
def test_ratio_of_statistics_matches_scipy_on_finite_data(paired: bool) -> None:
    cost_a, cost_b = -A, -B

    def ratio_of_medians(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.median(x, axis=axis) / np.median(y, axis=axis)

    estimate = statistics.ratio_of_statistics(
        cost_a, cost_b, paired=paired, statistic=np.median, rng=5, n_resamples=2000, quantile_method="linear"
    )
    reference = _scipy((cost_a, cost_b), ratio_of_medians, 5, n_resamples=2000, paired=paired, method="percentile")
    assert estimate.value == float(np.median(cost_a) / np.median(cost_b))
    assert (estimate.low, estimate.high) == pytest.approx(tuple(reference.confidence_interval), rel=1e-12)
    # The default inverted_cdf interval ends are values the bootstrap distribution takes.
    default = statistics.ratio_of_statistics(
        cost_a, cost_b, paired=paired, statistic=np.median, rng=5, n_resamples=2000
    )
    distribution = reference.bootstrap_distribution
    assert default.low in distribution and default.high in distribution


@pytest.mark.filterwarnings("error")
def test_ratio_of_statistics_with_infinite_costs() -> None:
    never = np.array([math.inf, 50.0, 50.0])
    base = np.array([100.0, 100.0, 100.0])
    estimate = statistics.ratio_of_statistics(never, base, paired=True, rng=0, n_resamples=2000)
    assert estimate.value == math.inf and estimate.high == math.inf and estimate.low == 0.5
    # Both means infinite in a resample: undefined, dropped and counted; the rest are finite or infinite.
    both = statistics.ratio_of_statistics(never, np.array([math.inf, 100.0, 100.0]), paired=True, rng=0)
    assert math.isnan(both.value) and both.undefined > 0 and both.low == 0.5
    assert both.undefined == pytest.approx(both_inf_share(3) * 9999, rel=0.1)
    # Zero costs: 0 / 0 is the same cost, x / 0 is infinitely more.
    zero = statistics.ratio_of_statistics([0.0, 0.0], [0.0, 0.0], paired=True, rng=0, n_resamples=10)
    assert (zero.value, zero.low, zero.high) == (1.0, 1.0, 1.0)
    assert statistics.ratio_of_statistics([1.0, 2.0], [0.0, 0.0], paired=True, rng=0, n_resamples=10).value == math.inf
    everything_undefined = statistics.ratio_of_statistics([math.inf] * 2, [math.inf] * 2, paired=False, rng=0)
    assert math.isnan(everything_undefined.low) and everything_undefined.undefined == 9999


def both_inf_share(n: int) -> float:
    """Probability that a paired resample of ``n`` pairs draws the one pair that is infinite on both sides."""
    return 1.0 - (1.0 - 1.0 / n) ** n


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_bootstrap_degenerate_inputs(method: str) -> None:
    # One observation: every resample is the data (scipy refuses it).
    one = statistics.mean_interval([4.0], rng=0, method=method)  # type: ignore[arg-type]
    assert one == statistics.BootstrapEstimate(4.0, 4.0, 4.0, 0.0, 0)
    # Constant data: no spread, for BCa too (whose acceleration would be 0 / 0 and warn).
    constant = statistics.mean_interval([2.5] * 6, rng=0, method=method)  # type: ignore[arg-type]
    assert constant == statistics.BootstrapEstimate(2.5, 2.5, 2.5, 0.0, 0)
    paired_one = statistics.paired_difference([3.0], [1.0], rng=0, method=method)  # type: ignore[arg-type]
    assert (paired_one.value, paired_one.low, paired_one.high) == (2.0, 2.0, 2.0)


def test_bootstrap_input_errors() -> None:
    with pytest.raises(ValueError, match="at least one sample"):
        statistics.bootstrap_interval([], np.mean, paired=False, rng=0)
    with pytest.raises(ValueError, match="non-empty"):
        statistics.mean_interval([], rng=0)
    with pytest.raises(ValueError, match="same length"):
        statistics.paired_difference([1.0, 2.0], [1.0, 2.0, 3.0], rng=0)
    with pytest.raises(ValueError, match="one observation with several"):
        statistics.ratio_of_statistics([1.0], [1.0, 2.0], paired=False, rng=0)
    with pytest.raises(ValueError, match="unknown method"):
        statistics.mean_interval([1.0, 1.0], rng=0, method="basic")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="BCa needs"):
        statistics.bootstrap_interval(
            [[math.inf, 1.0, 2.0], [math.inf, 1.0, 3.0]],
            lambda x, y, axis=-1: x.mean(axis) / y.mean(axis),  # inf / inf on resamples that draw the first pair
            paired=True,
            rng=0,
            method="bca",
        )


# --- rliable aggregates ------------------------------------------------------------------------------------------


def test_iqm_is_rliable_aggregate_iqm() -> None:
    metrics = pytest.importorskip("rliable.metrics", reason="rliable is in the eval extras")
    scores = np.stack([A, B], axis=1)  # [runs, tasks]
    assert statistics.iqm(scores) == metrics.aggregate_iqm(scores)
    rows = np.stack([A, B])
    np.testing.assert_array_equal(statistics.iqm(rows, axis=-1), [metrics.aggregate_iqm(A), metrics.aggregate_iqm(B)])


def test_interval_estimates_match_rliable_and_leave_the_global_generator_alone() -> None:
    library = pytest.importorskip("rliable.library", reason="rliable is in the eval extras")
    metrics = pytest.importorskip("rliable.metrics")
    aggregates = {"iqm": metrics.aggregate_iqm, "median": lambda x: float(np.median(x))}
    np.random.seed(123)
    before = np.random.get_state()
    estimates = statistics.interval_estimates({"a": A, "b": B}, aggregates, seed=4, reps=500)
    after = np.random.get_state()
    assert all(np.array_equal(x, y) for x, y in zip(before, after, strict=True))  # the caller's stream is untouched

    np.random.seed(4)  # what the wrapper does, by hand: one global stream, arm by arm, aggregate by aggregate
    for arm, values in {"a": A, "b": B}.items():
        for name, fn in aggregates.items():
            point, ci = library.get_interval_estimates(
                {arm: values[:, None]}, lambda x, fn=fn: np.array([fn(x)]), reps=500
            )
            assert estimates[arm][name] == (float(point[arm][0]), float(ci[arm][0, 0]), float(ci[arm][1, 0]))
    again = statistics.interval_estimates({"a": A, "b": B}, aggregates, seed=4, reps=500)
    assert again == estimates


def test_probability_of_improvement_matches_rliable() -> None:
    library = pytest.importorskip("rliable.library", reason="rliable is in the eval extras")
    metrics = pytest.importorskip("rliable.metrics")
    estimate = statistics.probability_of_improvement(A, B, seed=2, reps=500)
    np.random.seed(2)
    point, ci = library.get_interval_estimates(
        {"x": [A[:, None], B[:, None]]},
        lambda s, t: np.array([metrics.probability_of_improvement(s, t)]),
        reps=500,
    )
    assert estimate == (float(point["x"][0]), float(ci["x"][0, 0]), float(ci["x"][1, 0]))
    u = scipy.stats.mannwhitneyu(A, B, alternative="greater").statistic
    assert estimate.value == pytest.approx(u / (A.size * B.size))
    assert estimate.low <= estimate.value <= estimate.high
    separated = statistics.probability_of_improvement(A + 1000.0, A, seed=0, reps=200)
    assert separated.value == 1.0


def test_performance_profile_matches_rliable() -> None:
    library = pytest.importorskip("rliable.library", reason="rliable is in the eval extras")
    taus = np.linspace(-400.0, -80.0, 9)
    profiles = statistics.performance_profile({"a": A, "b": B}, taus, seed=1, reps=300)
    np.random.seed(1)
    reference, cis = library.create_performance_profile({"a": A[:, None], "b": B[:, None]}, taus, reps=300)
    for arm in ("a", "b"):
        np.testing.assert_array_equal(profiles[arm].taus, taus)
        np.testing.assert_array_equal(profiles[arm].fraction, reference[arm])
        np.testing.assert_array_equal(profiles[arm].low, cis[arm][0])
        np.testing.assert_array_equal(profiles[arm].high, cis[arm][1])
    np.testing.assert_array_equal(profiles["a"].fraction, [(t < A).mean() for t in taus])
