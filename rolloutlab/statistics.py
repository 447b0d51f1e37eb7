"""Summary statistics for benchmark results: means with standard errors, bootstrap intervals and rliable aggregates.

Every benchmark, summary and report in rolloutlab takes its statistics from this module, so each is computed one way,
by the field libraries rather than by hand:

* :func:`mean_with_stderr`, :func:`pointwise_mean_with_stderr`: the mean and its standard error, ``scipy.stats.sem``
  (sample standard deviation with ``ddof=1`` over ``sqrt(n)``).
* :func:`bootstrap_interval`: ``scipy.stats.bootstrap`` over one or several samples, resampled *paired* (one index
  draw shared by every sample, for samples matched by seed) or *independently* (each sample on its own). The interval
  is the **percentile** interval unless ``method="bca"`` (bias-corrected and accelerated) is asked for.
  :func:`mean_interval`, :func:`paired_difference` and :func:`ratio_of_statistics` are its named uses.
* :func:`iqm`, :func:`interval_estimates`, :func:`probability_of_improvement`, :func:`performance_profile`: rliable's
  aggregates (Agarwal et al., 2021, "Deep RL at the edge of the statistical precipice") with its *stratified*
  bootstrap, which resamples runs within each task.

Randomness. The scipy-based functions take ``rng``, a :class:`numpy.random.Generator` or an integer seed (a fresh
``default_rng(seed)``); a Generator passed in advances, so one Generator threads reproducibly through many calls.
``scipy.stats.bootstrap`` draws its resamples as ``rng.integers(0, n, (n_resamples, n))`` per sample, in order.
rliable's bootstraps ignore their ``random_state`` argument and draw from numpy's *global* generator
(``np.random.choice``); the rliable-based functions therefore take an integer ``seed``, seed the global generator with
it for the duration of the call and restore its previous state afterwards, so no caller's global stream is touched.

Degenerate inputs are handled explicitly rather than by scipy's errors or warnings:

* no observations: ``ValueError``;
* one observation: standard error ``0.0`` (there is no spread to estimate; committed results use this convention),
  and a bootstrap interval ``[value, value]`` (every resample is the data itself); scipy refuses such samples;
* constant data, or any bootstrap distribution without spread: the interval is ``[value, value]`` for every method
  (BCa's acceleration would be 0 / 0);
* a statistic that is undefined (NaN) on some resamples, e.g. a ratio ``inf / inf``: those resamples are dropped and
  counted in :attr:`BootstrapEstimate.undefined`; an infinite statistic is kept, and ``quantile_method="inverted_cdf"``
  (sample values, no interpolation) keeps interval ends from interpolating between ``inf`` and ``inf``.

``envs/`` is the ground floor and imports no rolloutlab package; its Monte Carlo references call ``scipy.stats.sem``
themselves.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np
import scipy.stats
from numpy.typing import ArrayLike

Statistic = Callable[..., Any]
"""A vectorized statistic: ``statistic(*samples, axis=-1)`` reduces the last axis of every sample (``np.mean``)."""

RLIABLE_HINT = "rliable is in the eval extras: pip install -e .[eval]"


class MeanStderr(NamedTuple):
    """A mean and its standard error, in the units of the data."""

    mean: float
    stderr: float


class BootstrapEstimate(NamedTuple):
    """A statistic on the data with its bootstrap interval.

    Attributes:
        value: The statistic on the observed data (NaN where it is undefined there).
        low: Lower end of the interval at the requested level.
        high: Upper end of the interval.
        standard_error: Standard deviation (``ddof=1``) of the defined bootstrap statistics: the bootstrap standard
            error (NaN where they include an infinity, ``0.0`` where they do not spread).
        undefined: Resamples whose statistic was NaN and were left out of the interval.
    """

    value: float
    low: float
    high: float
    standard_error: float
    undefined: int


class Estimate(NamedTuple):
    """A point estimate with its interval (rliable's stratified bootstrap)."""

    value: float
    low: float
    high: float


class Profile(NamedTuple):
    """A performance profile: the fraction of runs scoring above each threshold, with pointwise intervals."""

    taus: np.ndarray
    fraction: np.ndarray
    low: np.ndarray
    high: np.ndarray


# --- mean and standard error ------------------------------------------------------------------------------------


def mean_with_stderr(values: ArrayLike) -> MeanStderr:
    """The mean of ``values`` and its standard error (``scipy.stats.sem``: sample s.d., ``ddof=1``, over sqrt(n)).

    Args:
        values: Any number of observations (flattened).

    Returns:
        ``(mean, stderr)``; ``stderr`` is ``0.0`` for a single observation.

    Raises:
        ValueError: ``values`` is empty.
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    if x.size == 0:
        raise ValueError("mean_with_stderr needs at least one value")
    if x.size == 1:
        return MeanStderr(float(x[0]), 0.0)
    return MeanStderr(float(x.mean()), float(scipy.stats.sem(x)))


def pointwise_mean_with_stderr(curves: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard error at every point of a set of curves, over the runs (``scipy.stats.sem`` on axis 0).

    Args:
        curves: ``[runs, points]``, e.g. evaluation returns of every seed at shared steps.

    Returns:
        ``(mean, stderr)``, each ``[points]``; the standard error is zero with a single run.

    Raises:
        ValueError: ``curves`` is not two-dimensional or has no runs.
    """
    x = np.asarray(curves, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"curves must be [runs, points] with at least one run, got shape {x.shape}")
    mean = x.mean(axis=0)
    return mean, (scipy.stats.sem(x, axis=0) if x.shape[0] > 1 else np.zeros_like(mean))


# --- bootstrap intervals (scipy) ---------------------------------------------------------------------------------


def _generator(rng: np.random.Generator | int) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def bootstrap_interval(
    samples: Sequence[ArrayLike],
    statistic: Statistic,
    *,
    paired: bool,
    rng: np.random.Generator | int,
    n_resamples: int = 9999,
    level: float = 0.95,
    method: Literal["percentile", "bca"] = "percentile",
    quantile_method: str = "linear",
) -> BootstrapEstimate:
    """A statistic of one or several samples with its bootstrap interval (``scipy.stats.bootstrap``).

    Args:
        samples: One-dimensional samples; paired samples must have the same length.
        statistic: Vectorized over the last axis: ``statistic(*samples, axis=-1)`` (``np.mean``, ``np.median``).
        paired: Resample the samples together (observation ``i`` of every sample belongs to one unit, e.g. one seed)
            or each independently.
        rng: Generator (advanced by the draws) or seed.
        n_resamples: Bootstrap resamples.
        level: Coverage of the two-sided interval.
        method: ``"percentile"`` (quantiles of the bootstrap distribution) or ``"bca"`` (bias-corrected and
            accelerated, scipy's; needs the statistic defined on every resample).
        quantile_method: ``numpy.quantile``'s method for the percentile interval: ``"linear"`` (scipy's own choice)
            or ``"inverted_cdf"`` (sample values, for statistics that may be infinite).

    Returns:
        The statistic on the data, the interval, the bootstrap standard error and the count of undefined resamples.

    Raises:
        ValueError: No samples, an empty or non-1-D sample, paired samples of different lengths, independent samples
            mixing a single observation with several, an unknown method, or BCa over undefined resamples.
    """
    if method not in ("percentile", "bca"):
        raise ValueError(f"unknown method {method!r}; expected 'percentile' or 'bca'")
    data = tuple(np.asarray(s, dtype=np.float64) for s in samples)
    if not data:
        raise ValueError("bootstrap_interval needs at least one sample")
    if any(d.ndim != 1 or d.size == 0 for d in data):
        raise ValueError("every sample must be one-dimensional and non-empty")
    sizes = {d.size for d in data}
    if paired and len(sizes) > 1:
        raise ValueError(f"paired samples need the same length, got {sorted(sizes)}")
    with np.errstate(divide="ignore", invalid="ignore"):
        value = float(statistic(*data, axis=-1))
    gen = _generator(rng)
    result = None
    if max(sizes) == 1:
        # Every resample of single observations is the data itself (scipy refuses samples of one observation).
        distribution = np.full(n_resamples, value)
    elif min(sizes) == 1:
        raise ValueError("independent samples mixing one observation with several: resample them paired or drop it")
    else:
        with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
            # scipy warns when its own interval is NaN; NaN resamples are dropped below, its interval is not used.
            warnings.simplefilter("ignore", scipy.stats.DegenerateDataWarning)
            result = scipy.stats.bootstrap(
                data,
                statistic,
                n_resamples=n_resamples,
                vectorized=True,
                paired=paired,
                confidence_level=level,
                method="percentile",
                rng=gen,
            )
        distribution = np.asarray(result.bootstrap_distribution, dtype=np.float64)
    defined = distribution[~np.isnan(distribution)]
    undefined = int(distribution.size - defined.size)
    if defined.size == 0:
        return BootstrapEstimate(value, math.nan, math.nan, math.nan, undefined)
    if np.all(defined == defined[0]):
        return BootstrapEstimate(value, float(defined[0]), float(defined[0]), 0.0, undefined)
    with np.errstate(invalid="ignore"):
        standard_error = float(defined.std(ddof=1))
    if method == "bca":
        if undefined or result is None:
            raise ValueError("BCa needs the statistic defined on every resample")
        if quantile_method != "linear":
            raise ValueError("BCa takes scipy's own quantiles: quantile_method must be 'linear'")
        bca = scipy.stats.bootstrap(
            data,
            statistic,
            n_resamples=0,
            bootstrap_result=result,
            vectorized=True,
            paired=paired,
            confidence_level=level,
            method="BCa",
            rng=gen,
        )
        low, high = float(bca.confidence_interval.low), float(bca.confidence_interval.high)
        return BootstrapEstimate(value, low, high, standard_error, 0)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(defined, [alpha, 1.0 - alpha], method=quantile_method)  # type: ignore[call-overload]
    return BootstrapEstimate(value, float(low), float(high), standard_error, undefined)


def mean_interval(
    values: ArrayLike,
    *,
    rng: np.random.Generator | int,
    n_resamples: int = 9999,
    level: float = 0.95,
    method: Literal["percentile", "bca"] = "percentile",
) -> BootstrapEstimate:
    """The mean of ``values`` with a bootstrap interval (percentile unless ``method="bca"``).

    For paired observations ``a[i], b[i]``, ``mean_interval(a - b)`` is the paired bootstrap of the mean difference.
    """
    return bootstrap_interval(
        [np.ravel(values)], np.mean, paired=False, rng=rng, n_resamples=n_resamples, level=level, method=method
    )


def paired_difference(
    a: ArrayLike,
    b: ArrayLike,
    *,
    rng: np.random.Generator | int,
    statistic: Statistic = np.mean,
    n_resamples: int = 9999,
    level: float = 0.95,
    method: Literal["percentile", "bca"] = "percentile",
) -> BootstrapEstimate:
    """``statistic(a) - statistic(b)`` with a paired bootstrap interval: pairs ``(a[i], b[i])`` resampled together.

    Args:
        a: Scores of one arm, one per unit (seed).
        b: Scores of the other arm on the same units, in the same order.
        rng: Generator (advanced by the draws) or seed.
        statistic: Vectorized over the last axis (``np.mean``, :func:`iqm`).
        n_resamples: Bootstrap resamples.
        level: Coverage of the interval.
        method: ``"percentile"`` or ``"bca"``.

    Returns:
        The difference on the data, its interval and its bootstrap standard error.
    """

    def difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> Any:
        return statistic(x, axis=axis) - statistic(y, axis=axis)

    return bootstrap_interval(
        [np.ravel(a), np.ravel(b)],
        difference,
        paired=True,
        rng=rng,
        n_resamples=n_resamples,
        level=level,
        method=method,
    )


def _cost_ratio(numerator: ArrayLike, denominator: ArrayLike) -> Any:
    """Elementwise ``numerator / denominator`` with the conventions of cost ratios.

    ``x / 0`` is ``+inf`` for ``x > 0`` (``-inf`` for ``x < 0``) and ``0 / 0`` is ``1`` (the same cost);
    ``inf / inf`` is undefined (NaN). Finite over infinite is ``0``.
    """
    x, y = np.asarray(numerator, dtype=np.float64), np.asarray(denominator, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(y == 0, np.where(x == 0, 1.0, np.sign(x) * np.inf), x / y)
    return np.where(np.isinf(x) & np.isinf(y), np.nan, out)


def ratio_of_statistics(
    numerator: ArrayLike,
    denominator: ArrayLike,
    *,
    paired: bool,
    rng: np.random.Generator | int,
    statistic: Statistic = np.mean,
    n_resamples: int = 9999,
    level: float = 0.95,
    quantile_method: str = "inverted_cdf",
) -> BootstrapEstimate:
    """``statistic(numerator) / statistic(denominator)`` with a percentile bootstrap interval.

    Values may be ``inf`` (a cost never paid counts as infinitely expensive). Ratios follow the cost conventions:
    ``x / 0 = inf`` for ``x > 0``, ``0 / 0 = 1`` (the same cost), finite over infinite is ``0``, and ``inf / inf`` is
    undefined: such resamples are dropped (counted in ``undefined``). The default ``quantile_method="inverted_cdf"``
    picks sample values, so infinite resamples never meet ``inf - inf`` in an interpolation.

    Args:
        numerator: Values of the arm.
        denominator: Values of the baseline.
        paired: Resample both by the same index (units matched by seed, same length) or each independently.
        rng: Generator (advanced by the draws) or seed.
        statistic: Vectorized over the last axis (``np.mean``, ``np.median``).
        n_resamples: Bootstrap resamples.
        level: Coverage of the interval.
        quantile_method: ``numpy.quantile``'s method for the interval ends.

    Returns:
        The ratio on the data (``inf``/``nan`` where it is so), its interval and the count of undefined resamples.
    """

    def ratio_statistic(x: np.ndarray, y: np.ndarray, axis: int = -1) -> Any:
        return _cost_ratio(statistic(x, axis=axis), statistic(y, axis=axis))

    return bootstrap_interval(
        [np.ravel(numerator), np.ravel(denominator)],
        ratio_statistic,
        paired=paired,
        rng=rng,
        n_resamples=n_resamples,
        level=level,
        quantile_method=quantile_method,
    )


# --- rliable aggregates -------------------------------------------------------------------------------------------


def iqm(scores: ArrayLike, axis: int | None = None) -> Any:
    """Interquartile mean: the mean of the middle 50% (rliable's ``aggregate_iqm``, ``scipy.stats.trim_mean(0.25)``).

    Args:
        scores: Any shape; with ``axis=None`` (rliable's convention) all runs and tasks are pooled.
        axis: Reduce along this axis instead (vectorized use in :func:`bootstrap_interval`).
    """
    return scipy.stats.trim_mean(scores, proportiontocut=0.25, axis=axis)


@contextlib.contextmanager
def _global_numpy_seed(seed: int) -> Iterator[None]:
    """Seed numpy's global generator for rliable's draws, restoring the caller's state on exit."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _rliable() -> tuple[Any, Any]:
    try:
        from rliable import library, metrics
    except ImportError as exc:  # pragma: no cover - exercised only without the eval extras
        raise ImportError(RLIABLE_HINT) from exc
    return library, metrics


def interval_estimates(
    scores: Mapping[str, ArrayLike],
    aggregates: Mapping[str, Callable[[np.ndarray], float]],
    *,
    seed: int,
    reps: int = 2000,
    level: float = 0.95,
    method: str = "percentile",
) -> dict[str, dict[str, Estimate]]:
    """Aggregates of every arm with rliable's stratified-bootstrap intervals (runs resampled within each task).

    One seeded stream serves every interval, drawn arm by arm and, within an arm, aggregate by aggregate in the
    orders given, so the same inputs and seed give the same intervals.

    Args:
        scores: Per arm ``[runs, tasks]`` scores (a 1-D array is one task: ``[runs]``).
        aggregates: Name -> function of a ``[runs, tasks]`` array to a number (``metrics.aggregate_iqm``,
            ``lambda x: float(np.median(x))``).
        seed: Seeds numpy's global generator for the call (its previous state is restored afterwards).
        reps: Bootstrap resamples per interval.
        level: Coverage of the intervals.
        method: rliable's interval method: ``"percentile"``, ``"basic"``, ``"bc"`` or ``"bca"``.

    Returns:
        ``{arm: {aggregate: Estimate(value, low, high)}}``.
    """
    library, _ = _rliable()
    out: dict[str, dict[str, Estimate]] = {}
    with _global_numpy_seed(seed):
        for arm, values in scores.items():
            x = np.asarray(values, dtype=np.float64)
            x = x[:, None] if x.ndim == 1 else x
            out[arm] = {}
            for name, fn in aggregates.items():
                point, ci = library.get_interval_estimates(
                    {arm: x},
                    lambda s, fn=fn: np.array([fn(s)]),
                    method=method,
                    reps=reps,
                    confidence_interval_size=level,
                )
                out[arm][name] = Estimate(float(point[arm][0]), float(ci[arm][0, 0]), float(ci[arm][1, 0]))
    return out


def probability_of_improvement(
    x: ArrayLike, y: ArrayLike, *, seed: int, reps: int = 2000, level: float = 0.95
) -> Estimate:
    """rliable's probability that a run of ``x`` beats a run of ``y`` (Mann-Whitney U / (n m), averaged over tasks).

    The interval resamples the runs of ``x`` and ``y`` independently within each task.

    Args:
        x: ``[runs_x, tasks]`` scores (``[runs_x]``: one task).
        y: ``[runs_y, tasks]`` scores on the same tasks.
        seed: Seeds numpy's global generator for the call (its previous state is restored afterwards).
        reps: Bootstrap resamples.
        level: Coverage of the interval.
    """
    library, metrics = _rliable()
    a, b = (np.asarray(v, dtype=np.float64) for v in (x, y))
    a, b = (v[:, None] if v.ndim == 1 else v for v in (a, b))
    with _global_numpy_seed(seed):
        point, ci = library.get_interval_estimates(
            {"x": [a, b]},
            lambda s, t: np.array([metrics.probability_of_improvement(s, t)]),
            reps=reps,
            confidence_interval_size=level,
        )
    return Estimate(float(point["x"][0]), float(ci["x"][0, 0]), float(ci["x"][1, 0]))


def performance_profile(
    scores: Mapping[str, ArrayLike], taus: ArrayLike, *, seed: int, reps: int = 2000, level: float = 0.95
) -> dict[str, Profile]:
    """rliable's score distributions: the fraction of runs (over all tasks) scoring above each ``tau``.

    Args:
        scores: Per arm ``[runs, tasks]`` scores (``[runs]``: one task).
        taus: Thresholds, in score units.
        seed: Seeds numpy's global generator for the call (its previous state is restored afterwards).
        reps: Bootstrap resamples for the pointwise stratified-bootstrap intervals.
        level: Coverage of the intervals.

    Returns:
        ``{arm: Profile(taus, fraction, low, high)}``, each array ``[len(taus)]``.
    """
    library, _ = _rliable()
    t = np.asarray(taus, dtype=np.float64)
    arrays = {}
    for arm, values in scores.items():
        v = np.asarray(values, dtype=np.float64)
        arrays[arm] = v[:, None] if v.ndim == 1 else v
    with _global_numpy_seed(seed):
        profiles, cis = library.create_performance_profile(arrays, t, reps=reps, confidence_interval_size=level)
    return {
        arm: Profile(t, np.asarray(profiles[arm], dtype=np.float64), np.asarray(cis[arm][0]), np.asarray(cis[arm][1]))
        for arm in arrays
    }
