"""CEM and MPPI over action sequences: the optimum of a known quadratic, the bounds, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from planning.mpc import CEMConfig, CEMOptimizer, MPPIConfig, MPPIOptimizer

H, A = 6, 2
LOW, HIGH = np.array([-1.0, -2.0]), np.array([1.0, 2.0])


def _quadratic(target: np.ndarray):
    goal = torch.as_tensor(target, dtype=torch.float32)

    def objective(seqs: torch.Tensor) -> torch.Tensor:
        return -((seqs - goal) ** 2).sum(dim=(1, 2))

    return objective


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _zeros(*shape: int) -> torch.Tensor:
    return torch.zeros(shape)


def _optimizers():
    yield CEMOptimizer(LOW, HIGH, CEMConfig(population=200, iterations=12))
    # MPPI keeps its noise level, so its precision is set by the noise: a smaller one for a precise optimum.
    yield MPPIOptimizer(
        LOW, HIGH, MPPIConfig(population=200, iterations=30, noise_std_fraction=0.1, temperature=0.3, smoothing=1.0)
    )


@pytest.mark.parametrize("optimizer", list(_optimizers()), ids=["cem", "mppi"])
def test_finds_the_optimum_of_a_quadratic(optimizer) -> None:
    rng = np.random.default_rng(0)
    target = rng.uniform(LOW * 0.8, HIGH * 0.8, size=(H, A))
    start = np.zeros((H, A))
    result = optimizer.optimize(_quadratic(target), torch.as_tensor(start), _gen(1)).numpy()
    assert result.shape == (H, A) and result.dtype == np.float32
    start_error = np.abs(start - target).max()
    # Within a few percent of the action range of the optimum, from a start that was far off.
    assert np.abs(result - target).max() < 0.06 * (HIGH - LOW).min() < start_error


@pytest.mark.parametrize("optimizer", list(_optimizers()), ids=["cem", "mppi"])
def test_optimum_outside_the_box_ends_on_its_boundary(optimizer) -> None:
    target = np.tile(np.array([3.0, -5.0]), (H, 1))  # outside on both dims
    result = optimizer.optimize(_quadratic(target), _zeros(H, A), _gen(0)).numpy()
    assert np.all(result >= LOW) and np.all(result <= HIGH)
    corner = np.tile(np.array([1.0, -2.0]), (H, 1))
    # Every action moved most of the way to the nearest feasible point (the corner), none beyond it.
    assert np.abs(result - corner).max() < 0.5 * np.abs(corner).min()
    assert np.abs(result - corner).mean() < 0.15


def test_cem_returns_the_best_sample_it_scored() -> None:
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []
    target = np.full((H, A), 0.3)

    def objective(seqs: torch.Tensor) -> torch.Tensor:
        values = _quadratic(target)(seqs)
        seen.append((seqs.clone(), values))
        return values

    cem = CEMOptimizer(LOW, HIGH, CEMConfig(population=50, iterations=3))
    result = cem.optimize(objective, _zeros(H, A), _gen(0))
    seqs = torch.cat([s for s, _ in seen])
    values = torch.cat([v for _, v in seen])
    torch.testing.assert_close(result, seqs[torch.argmax(values)], rtol=0, atol=0)


def test_nan_scores_are_never_chosen() -> None:
    def objective(seqs: torch.Tensor) -> torch.Tensor:
        values = -((seqs - 0.5) ** 2).sum(dim=(1, 2))
        values[seqs[:, 0, 0] > 0] = torch.nan  # the better half is broken
        return values

    cem = CEMOptimizer(LOW, HIGH, CEMConfig(population=100, iterations=4))
    assert cem.optimize(objective, _zeros(H, A), _gen(0))[0, 0] <= 0


def test_same_seed_same_plan() -> None:
    for make in (lambda: CEMOptimizer(LOW, HIGH), lambda: MPPIOptimizer(LOW, HIGH)):
        a = make().optimize(_quadratic(np.full((H, A), 0.2)), _zeros(H, A), _gen(5))
        b = make().optimize(_quadratic(np.full((H, A), 0.2)), _zeros(H, A), _gen(5))
        c = make().optimize(_quadratic(np.full((H, A), 0.2)), _zeros(H, A), _gen(6))
        torch.testing.assert_close(a, b, rtol=0, atol=0)
        assert not torch.equal(a, c)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="lower < upper"):
        CEMOptimizer(np.array([1.0]), np.array([-1.0]))
    with pytest.raises(ValueError, match="one shape"):
        MPPIOptimizer(np.array([0.0, 0.0]), np.array([1.0]))
    with pytest.raises(ValueError, match="population"):
        CEMOptimizer(LOW, HIGH, CEMConfig(population=1))
    with pytest.raises(ValueError, match="temperature"):
        MPPIOptimizer(LOW, HIGH, MPPIConfig(temperature=0.0))
    cem = CEMOptimizer(LOW, HIGH)
    with pytest.raises(ValueError, match="shape"):
        cem.optimize(_quadratic(np.zeros((H, A))), _zeros(H, 3), _gen(0))
    with pytest.raises(ValueError, match="returned 1 values"):
        cem.optimize(lambda s: torch.zeros(1), _zeros(H, A), _gen(0))
