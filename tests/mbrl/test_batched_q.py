"""Bitwise run independence of :mod:`mbrl.algorithms.batched_q`.

Run ``i`` of a batch must follow exactly the trajectory it would follow whatever the other runs do (masked updates,
other step counts, other data, other weights), so results of a batched experiment do not depend on which runs happened
to share its batch. Every comparison here is ``torch.equal``, not a tolerance.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch
import torch.nn.functional as F

from mbrl.algorithms.batched_q import BatchedAdam, BatchedQNetwork, clip_grad_norm_per_run

OBS_DIM, NUM_ACTIONS, ARCH = 6, 3, [32, 24]  # 24 and 3 are not multiples of the SIMD width: tails are exercised
NUM_RUNS = 3


def _batch(seeds: Sequence[int]) -> tuple[BatchedQNetwork, BatchedAdam]:
    net = BatchedQNetwork(len(seeds), OBS_DIM, NUM_ACTIONS, ARCH, seeds=seeds)
    return net, BatchedAdam(list(net.parameters()), lr=1e-3)


def _update(
    net: BatchedQNetwork, opt: BatchedAdam, obs: torch.Tensor, target: torch.Tensor, mask: torch.Tensor | None
) -> None:
    """One update the way the Dyna-DQN learner makes it: masked per-run loss, per-run clip, masked Adam step."""
    per_run = F.smooth_l1_loss(net(obs).max(dim=-1).values, target, reduction="none").mean(dim=1)
    loss = per_run.sum() if mask is None else (per_run * mask).sum()
    opt.zero_grad()
    loss.backward()  # type: ignore[no-untyped-call]
    clip_grad_norm_per_run(opt.params, 0.5)  # small enough to clip some updates
    opt.step(mask)


def _data(step: int, run_seeds: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Minibatches ``[B, 16, obs_dim]``, targets ``[B, 16]``; run ``i``'s drawn from ``run_seeds[i]`` and ``step``."""
    obs, target = [], []
    for seed in run_seeds:
        g = torch.Generator().manual_seed(1000 * seed + step)
        obs.append(torch.randn(16, OBS_DIM, generator=g))
        target.append(3.0 * torch.randn(16, generator=g))
    return torch.stack(obs), torch.stack(target)


def _run_state(net: BatchedQNetwork, opt: BatchedAdam, run: int) -> list[torch.Tensor]:
    params = [p.detach()[run] for p in net.parameters()]
    return [*params, *(m[run] for m in opt.exp_avg), *(v[run] for v in opt.exp_avg_sq), opt.steps[run : run + 1]]


def _assert_run_equal(a: tuple[BatchedQNetwork, BatchedAdam], b: tuple[BatchedQNetwork, BatchedAdam], run: int) -> None:
    for x, y in zip(_run_state(*a, run), _run_state(*b, run), strict=True):
        assert torch.equal(x, y)


def _mask(*keep: bool) -> torch.Tensor:
    return torch.tensor(keep, dtype=torch.bool)


def test_run_bit_identical_when_other_runs_are_masked_differently() -> None:
    # Two otherwise identical batches (same seeds, same data); runs 1 and 2 skip different updates, and at some steps
    # one batch passes no mask while the other does, so the runs' step counts differ between and within batches.
    t, f = True, False
    masks_a = [None, None, _mask(t, f, t), None, _mask(t, t, f), _mask(t, f, f), None, None, _mask(t, t, f), None]
    masks_b = [_mask(t, t, f), None, None, _mask(t, f, t), _mask(t, f, t), None, _mask(t, f, f), None, None, None]
    a, b = _batch([0, 0, 0]), _batch([0, 0, 0])
    for step, (mask_a, mask_b) in enumerate(zip(masks_a, masks_b, strict=True)):
        obs, target = _data(step, [1, 1, 1])
        _update(*a, obs, target, mask_a)
        _update(*b, obs, target, mask_b)
        _assert_run_equal(a, b, 0)
    assert not torch.equal(a[1].steps, b[1].steps)  # the batches really did diverge for runs 1 and 2
    assert not torch.equal(a[0].linears()[0].weight[1], b[0].linears()[0].weight[1])


def test_no_mask_ever_vs_another_run_masked_at_step_1() -> None:
    a, b = _batch([4, 5, 6]), _batch([4, 5, 6])
    for step in range(6):
        obs, target = _data(step, [7, 8, 9])
        _update(*a, obs, target, None)
        _update(*b, obs, target, _mask(True, False, True) if step == 0 else None)
    _assert_run_equal(a, b, 0)
    _assert_run_equal(a, b, 2)
    assert b[1].steps.tolist() == [6.0, 5.0, 6.0]


def test_run_bit_identical_whatever_the_other_runs_weights_and_data() -> None:
    # Run 0 has the same seed and data in both batches; the other runs have different weights and different data.
    a, b = _batch([3, 10, 11]), _batch([3, 20, 21])
    for step in range(5):
        obs_a, target_a = _data(step, [5, 6, 7])
        obs_b, target_b = _data(step, [5, 16, 17])
        _update(*a, obs_a, target_a, None if step % 2 else _mask(True, True, False))
        _update(*b, obs_b, target_b, None if step % 3 else _mask(True, False, True))
        _assert_run_equal(a, b, 0)


def test_all_true_mask_is_the_same_as_no_mask() -> None:
    a, b = _batch([0, 1, 2]), _batch([0, 1, 2])
    for step in range(4):
        obs, target = _data(step, [0, 1, 2])
        _update(*a, obs, target, None)
        _update(*b, obs, target, _mask(True, True, True))
    for run in range(NUM_RUNS):
        _assert_run_equal(a, b, run)


def test_each_run_matches_torch_adam_bitwise() -> None:
    # Same op sequence and scalar roundings as torch.optim.Adam's single-tensor path (torch 2.x); if a torch upgrade
    # changes that path, this pins down where: the independence tests above still hold on their own.
    shapes = [(NUM_RUNS, 7, 13), (NUM_RUNS, 1, 3), (NUM_RUNS, 24, 32)]
    gen = torch.Generator().manual_seed(0)
    ours = [torch.randn(*s, generator=gen) for s in shapes]
    refs = [[torch.nn.Parameter(p[run].clone()) for p in ours] for run in range(NUM_RUNS)]
    opt = BatchedAdam(ours, lr=1e-2)
    torch_opts = [torch.optim.Adam(ref, lr=1e-2, foreach=False) for ref in refs]
    masks = [None, _mask(True, False, True), None, _mask(False, True, True), _mask(False, False, True)]
    for mask in masks * 3:
        grads = [torch.randn(*s, generator=gen) for s in shapes]
        for p, g in zip(ours, grads, strict=True):
            p.grad = g.clone()
        opt.step(mask)
        for run, (ref, ref_opt) in enumerate(zip(refs, torch_opts, strict=True)):
            if mask is None or bool(mask[run]):
                for r, g in zip(ref, grads, strict=True):
                    r.grad = g[run].clone()
                ref_opt.step()
    for run, (ref, ref_opt) in enumerate(zip(refs, torch_opts, strict=True)):
        for k, (p, r) in enumerate(zip(ours, ref, strict=True)):
            assert torch.equal(p[run], r.detach())
            assert torch.equal(opt.exp_avg[k][run], ref_opt.state[r]["exp_avg"])
            assert torch.equal(opt.exp_avg_sq[k][run], ref_opt.state[r]["exp_avg_sq"])


def test_masked_run_is_left_exactly_as_it_was_even_with_nonfinite_grad() -> None:
    net, opt = _batch([0, 1, 2])
    for step in range(2):
        obs, target = _data(step, [0, 1, 2])
        _update(net, opt, obs, target, None)
    before = [t.clone() for t in _run_state(net, opt, 1)]
    for p in opt.params:
        p.grad = torch.randn_like(p)
        p.grad[1] = float("nan")
    opt.step(_mask(True, False, True))
    for x, y in zip(_run_state(net, opt, 1), before, strict=True):
        assert torch.equal(x, y)
    assert all(torch.isfinite(p).all() for p in opt.params)
    assert opt.steps.tolist() == [3.0, 2.0, 3.0]


def test_state_dict_round_trip_continues_bitwise() -> None:
    a, b = _batch([0, 1, 2]), _batch([0, 1, 2])
    for step in range(3):
        obs, target = _data(step, [0, 1, 2])
        _update(*a, obs, target, _mask(True, step != 1, True))
    b[0].load_state_dict(a[0].state_dict())
    b[1].load_state_dict(a[1].state_dict())
    for step in range(3, 6):
        obs, target = _data(step, [0, 1, 2])
        _update(*a, obs, target, None)
        _update(*b, obs, target, None)
    for run in range(NUM_RUNS):
        _assert_run_equal(a, b, run)


def test_clip_grad_norm_is_per_run_bitwise() -> None:
    gen = torch.Generator().manual_seed(0)
    shapes = [(NUM_RUNS, 6, 32), (NUM_RUNS, 1, 32), (NUM_RUNS, 32, 3), (NUM_RUNS, 1, 3)]
    grads_a = [torch.randn(*s, generator=gen) for s in shapes]
    grads_b = [g.clone() for g in grads_a]
    for g in grads_b:  # other runs: a huge gradient (clipped hard) and a non-finite one
        g[1] *= 1e6
        g[2] = float("inf")
    params_a = [torch.zeros(s, requires_grad=True) for s in shapes]
    params_b = [torch.zeros(s, requires_grad=True) for s in shapes]
    for p, g in zip([*params_a, *params_b], [*grads_a, *grads_b], strict=True):
        p.grad = g
    norms_a = clip_grad_norm_per_run(params_a, 1.0)
    norms_b = clip_grad_norm_per_run(params_b, 1.0)
    assert torch.equal(norms_a[0], norms_b[0])
    for pa, pb in zip(params_a, params_b, strict=True):
        assert torch.equal(pa.grad[0], pb.grad[0])  # type: ignore[index]
    assert bool(norms_a[0] > 1.0)  # run 0 was really clipped


@pytest.mark.parametrize("num_obs", [1, 5, 64])
def test_forward_of_a_run_does_not_depend_on_the_other_runs(num_obs: int) -> None:
    # Run 0: same seed and inputs; runs 1, 2: other weights and other (even non-finite) inputs.
    net_a = BatchedQNetwork(NUM_RUNS, OBS_DIM, NUM_ACTIONS, [256, 256], seeds=[0, 1, 2])
    net_b = BatchedQNetwork(NUM_RUNS, OBS_DIM, NUM_ACTIONS, [256, 256], seeds=[0, 7, 8])
    gen = torch.Generator().manual_seed(num_obs)
    obs_a = torch.randn(NUM_RUNS, num_obs, OBS_DIM, generator=gen)
    obs_b = torch.randn(NUM_RUNS, num_obs, OBS_DIM, generator=gen)
    obs_b[0] = obs_a[0]
    obs_b[2, 0, 0] = float("nan")
    with torch.no_grad():
        q_a, q_b = net_a(obs_a), net_b(obs_b)
    assert torch.equal(q_a[0], q_b[0])
    assert not torch.equal(q_a[1], q_b[1])
