"""World-model fits of many independent runs as one batched network (a run axis in front of the member axis).

A fit of Dyna's small ensemble (5 members of 3 x 64) costs a few milliseconds per gradient step, almost all of it
the fixed cost of some hundred small tensor ops, not arithmetic. :func:`fit_run_batched` fits ``B`` runs' models as
one network whose weights are the runs' ensembles stacked on a leading run axis (``[B, E, in, out]``, applied as
``B * E`` members in one batched matmul), so a step costs about one run's ops for all runs.

The runs stay independent. Each run keeps its own data, normalizers, holdout split, bootstrap rows and minibatch order
(all drawn from its own model's generator in the order :meth:`DynamicsModel.fit
<mbrl.models.dynamics.DynamicsModel.fit>` draws them), its own early-stopping schedule
(:class:`~mbrl.models.fit_schedule.FitSchedule`), best-weight snapshots and elite choice. A run that stops leaves the
batch (its best weights go back into its model, which finishes the fit as it would alone) and the others go on
without it. Every op is elementwise, a per-member matmul or a reduction within one member's or one run's slice, and
Adam's update is elementwise with one step count for all runs still fitting (they all started together), so each
step is the per-run step to float32 rounding: not always bit for bit, because torch's CPU batched-matmul and
reduction kernels may round a run's slice of a larger batch differently in the last bit, depending on the batch's
size, the slice's place in it and the minibatch's row count (on the development machine: bit for bit at 32, 64, 128
or 256 rows per member, not at most other counts). Early stopping can turn such a last-bit difference into another
stopping step (as ``ModelConfig.fused_optimizer`` can), so a run's fit agrees with its own fit, and with its fit
beside other runs, in its draws and, but for a score on the edge of ``improvement_threshold``, its steps, stops and
elites; its weights to rounding (``tests/mbrl/test_run_batched.py``; ``model/train_loss`` is summed in another order).

Models with a learned termination head or bf16 hidden layers (``ModelConfig.precision``) are fitted one by one
(:func:`can_fit_run_batched`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from mbrl.models.dynamics import DynamicsModel, fit_optimizer
from mbrl.models.fit_schedule import FitData
from mbrl.models.gaussian_ensemble import LOGVAR_BOUND_PENALTY, gaussian_nll

__all__ = ["can_fit_run_batched", "fit_run_batched"]

#: One run's training data for :func:`fit_run_batched`: ``(obs, actions, rewards, next_obs, terminated)``, as the
#: arguments of :meth:`DynamicsModel.fit <mbrl.models.dynamics.DynamicsModel.fit>`.
Dataset = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def can_fit_run_batched(models: Sequence[Any]) -> bool:
    """Whether :func:`fit_run_batched` takes these models: learned float32 :class:`DynamicsModel` s without a
    termination head, all with the same settings, dimensions and device."""
    if not models or not all(type(m) is DynamicsModel for m in models):
        return False
    first = models[0]
    return all(
        m.termination is None
        and m.cfg.precision == "float32"
        and m.cfg == first.cfg
        and (m.obs_dim, m.action_dim, m.discrete_actions) == (first.obs_dim, first.action_dim, first.discrete_actions)
        and m.device == first.device
        for m in models
    )


class _Run:
    """One run's side of a batched fit: its model, data, schedule and place in its epoch."""

    def __init__(self, model: DynamicsModel, data: FitData, offset: int) -> None:
        self.model, self.data, self.offset = model, data, offset
        self.schedule = model.fit_schedule(data.x_train.shape[0])
        self.rows = data.member_rows  # [E, n_train], reshuffled every epoch
        self.cursor = 0  # position of the next minibatch in the epoch
        self.in_epoch = False
        self.loss_sum, self.loss_count = 0.0, 0

    def next_batch(self, batch_size: int) -> np.ndarray:
        """The next minibatch's rows ``[E, n]`` (offsets into the concatenated training data), starting an epoch
        where none is under way (only called while :meth:`FitSchedule.wants_epoch` or inside an epoch)."""
        if not self.in_epoch:
            self.rows = self.model._rng.permuted(self.rows, axis=1)  # each member its own minibatch order
            self.cursor, self.in_epoch = 0, True
        batch = self.rows[:, self.cursor : self.cursor + batch_size]
        self.cursor += batch_size
        self.schedule.begin_step()
        return batch + self.offset

    def close_epoch(self) -> bool:
        """After a step: end the epoch where the data or the step cap ran out; ``True`` where the holdout is to be
        scored now."""
        if self.cursor < self.data.num_train and self.schedule.may_step():
            return False
        self.in_epoch = False
        return self.schedule.end_epoch()

    def done(self) -> bool:
        """Whether the run's fit is over (between epochs, with no further epoch to start)."""
        return not self.in_epoch and not self.schedule.wants_epoch()

    def finish(
        self, stacked: list[torch.Tensor], names: list[str], best: dict[str, torch.Tensor], row: int
    ) -> dict[str, float]:
        """Write the run's weights back into its model (the members' best, everything else as trained) and finish
        the fit there."""
        if not self.schedule.restored:
            with torch.no_grad():
                params = dict(self.model.ensemble.named_parameters())
                for name, p in zip(names, stacked, strict=True):
                    params[name].copy_(p[row])
                for name, p in self.model._member_params().items():
                    p.copy_(best[name.removeprefix("ensemble.")][row])
        return self.model.finish_fit(self.data, self.schedule)


def _forward(params: dict[str, torch.Tensor], x: torch.Tensor, num_hidden: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:meth:`GaussianEnsemble.forward <mbrl.models.gaussian_ensemble.GaussianEnsemble.forward>` of ``R`` runs at once:
    ``params`` the ensembles' parameters by name, stacked on a run axis (``[R, E, ...]``, the bounds
    ``[R, 1, 1, out]``), ``x`` ``[R, E, N, in]``; ``(mean, logvar)``, each ``[R, E, N, out]``, op for op as one run
    computes them."""
    r, e, n = x.shape[0], x.shape[1], x.shape[2]
    h = x.reshape(r * e, n, x.shape[3])
    for layer in _layers(num_hidden):
        weight, bias = params[f"{layer}.weight"], params[f"{layer}.bias"]
        h = torch.baddbmm(bias.reshape(r * e, 1, -1), h, weight.reshape(r * e, *weight.shape[2:]))
        if layer != "output":
            h = F.silu(h)
    mean, raw_logvar = h.reshape(r, e, n, -1).chunk(2, dim=-1)
    max_logvar, min_logvar = params["max_logvar"], params["min_logvar"]
    logvar = max_logvar - F.softplus(max_logvar - raw_logvar)
    logvar = min_logvar + F.softplus(logvar - min_logvar)
    return mean, logvar


def fit_run_batched(models: Sequence[DynamicsModel], datasets: Sequence[Dataset]) -> list[dict[str, float]]:
    """Fit every model on its own dataset, all in one batched network; each ends as :meth:`DynamicsModel.fit` on
    that model and dataset would leave it, to float32 rounding (the module docstring says how far that goes).

    Args:
        models: ``B`` models accepted by :func:`can_fit_run_batched`.
        datasets: One dataset per model.

    Returns:
        Per model, the metrics of :meth:`DynamicsModel.fit`.

    Raises:
        ValueError: The models cannot be fitted together, or the numbers of models and datasets differ.
    """
    if len(models) != len(datasets):
        raise ValueError(f"need one dataset per model, got {len(datasets)} for {len(models)} models")
    if not can_fit_run_batched(models):
        raise ValueError(
            "fit_run_batched needs learned DynamicsModels without a termination head, with one ModelConfig, "
            "dimensions and device; fit these one by one"
        )
    cfg = models[0].cfg
    device = models[0].device
    runs: list[_Run] = []
    offset = 0
    for model, dataset in zip(models, datasets, strict=True):
        data = model.fit_data(*dataset)
        runs.append(_Run(model, data, offset))
        offset += data.num_train
    x_all = torch.cat([run.data.x_train for run in runs])
    y_all = torch.cat([run.data.y_train for run in runs])
    ensembles = [m.ensemble for m in models]
    num_hidden = len(ensembles[0].hidden)
    names = [name for name, _ in ensembles[0].named_parameters()]
    stacked = [
        torch.stack([dict(ens.named_parameters())[name].detach() for ens in ensembles]).requires_grad_()
        for name in names
    ]
    decays = ensembles[0].weight_decays
    # The parameters DynamicsModel.fit snapshots at each improvement (the members' weights; not the shared bounds).
    member_names = [name.removeprefix("ensemble.") for name in models[0]._member_params()]
    best = {name: stacked[names.index(name)].detach().clone() for name in member_names}
    optimizer = _optimizer(stacked, names, decays, cfg.lr, cfg.fused_optimizer)
    metrics: list[dict[str, float]] = [{} for _ in runs]
    active = list(range(len(runs)))  # the runs still fitting, in the order of the stacked run axis
    while True:
        finished = [j for j, i in enumerate(active) if runs[i].done()]
        if finished:
            for j in finished:
                metrics[active[j]] = runs[active[j]].finish(stacked, names, best, j)
            keep = [j for j in range(len(active)) if j not in set(finished)]
            active = [active[j] for j in keep]
            if not active:
                break
            stacked, optimizer, best = _compact(stacked, optimizer, best, keep, device)
        batches = [runs[i].next_batch(cfg.batch_size) for i in active]
        _step(stacked, optimizer, [runs[i] for i in active], batches, x_all, y_all, names, cfg.fused_optimizer, decays)
        scoring = [j for j, i in enumerate(active) if runs[i].close_epoch()]
        if scoring:
            _score(stacked, names, best, [runs[active[j]] for j in scoring], scoring, num_hidden)
    return metrics


def _layers(num_hidden: int) -> list[str]:
    """The ensemble's layer names, input to output."""
    return [f"hidden.{i}" for i in range(num_hidden)] + ["output"]


def _optimizer(
    stacked: list[torch.Tensor], names: list[str], decays: list[float], lr: float, fused: bool
) -> torch.optim.Adam:
    """The optimizer :meth:`DynamicsModel.fit` builds, over the stacked parameters (elementwise, so each run's slice
    is updated as its own would be)."""
    if not fused:
        return fit_optimizer([{"params": stacked, "weight_decay": 0.0}], lr, False)
    # GaussianEnsemble.decay_groups over the stacked tensors: one group per decayed layer weight, then the rest.
    by_name = dict(zip(names, stacked, strict=True))
    groups: list[dict[str, Any]] = []
    decayed: set[str] = set()
    for layer, decay in zip(_layers(len(decays) - 1), decays, strict=True):
        if decay:
            groups.append({"params": [by_name[f"{layer}.weight"]], "weight_decay": float(decay)})
            decayed.add(f"{layer}.weight")
    groups.append({"params": [p for name, p in by_name.items() if name not in decayed], "weight_decay": 0.0})
    return fit_optimizer(groups, lr, True)


def _step(
    stacked: list[torch.Tensor],
    optimizer: torch.optim.Adam,
    runs: list[_Run],
    batches: list[np.ndarray],
    x_all: torch.Tensor,
    y_all: torch.Tensor,
    names: list[str],
    fused: bool,
    decays: list[float],
) -> None:
    """One gradient step of every run still fitting (row ``k`` of the stacked run axis is ``runs[k]``), each on its
    own minibatch ``batches[k]``."""
    num_hidden = len(decays) - 1
    # Runs whose minibatches differ in size (an epoch's last) go through the network in separate groups.
    sizes: dict[int, list[int]] = {}
    for k, batch in enumerate(batches):
        sizes.setdefault(batch.shape[1], []).append(k)
    total: torch.Tensor | None = None
    for group in sizes.values():
        idx = torch.as_tensor(np.stack([batches[k] for k in group]), device=x_all.device)
        xb, yb = x_all[idx], y_all[idx]  # [R, E, n, in], [R, E, n, out]
        if len(group) == len(runs):
            params = dict(zip(names, stacked, strict=True))
        else:
            index = torch.as_tensor(group, device=x_all.device)
            params = {name: p.index_select(0, index) for name, p in zip(names, stacked, strict=True)}
        mean, logvar = _forward(params, xb, num_hidden)
        r, e, n, out = mean.shape
        nll = gaussian_nll(mean.reshape(r * e, n, out), logvar.reshape(r * e, n, out), yb.reshape(r * e, n, out))
        # GaussianEnsemble.loss per run, in its order: the members' NLL, the log-variance bound penalty, the decay
        # (which fused Adam applies itself, as in DynamicsModel.fit).
        loss = nll.reshape(r, e).sum(dim=1)
        bounds = params["max_logvar"].sum(dim=(1, 2, 3)) - params["min_logvar"].sum(dim=(1, 2, 3))
        loss = loss + LOGVAR_BOUND_PENALTY * bounds
        if not fused:
            penalty = loss.new_zeros(r)
            for layer, decay in zip(_layers(num_hidden), decays, strict=True):
                if decay:
                    penalty = penalty + decay * 0.5 * params[f"{layer}.weight"].pow(2).sum(dim=(1, 2, 3))
            loss = loss + penalty
        values = loss.detach()
        finite = torch.isfinite(values)
        for k, value, ok in zip(group, values.tolist(), finite.tolist(), strict=True):
            run = runs[k]
            if ok:
                run.loss_sum += value
                run.loss_count += 1
            else:  # DynamicsModel.fit falls back to the last good model; this run's slice is never read again
                run.schedule.restored = True
                run.cursor = run.data.num_train
        # A run's loss touches only its own slice, so summing keeps the gradients apart (d sum / d loss_r = 1).
        part = torch.where(finite, loss, torch.zeros_like(loss)).sum()
        total = part if total is None else total + part
    assert total is not None
    optimizer.zero_grad(set_to_none=True)
    total.backward()  # type: ignore[no-untyped-call]
    optimizer.step()


@torch.no_grad()
def _score(
    stacked: list[torch.Tensor],
    names: list[str],
    best: dict[str, torch.Tensor],
    runs: list[_Run],
    rows: list[int],
    num_hidden: int,
) -> None:
    """Score the holdout of ``runs`` (rows ``rows`` of the stacked run axis) and snapshot their improved members."""
    sizes: dict[int, list[int]] = {}
    for k, run in enumerate(runs):
        sizes.setdefault(int(run.data.x_holdout.shape[0]), []).append(k)
    for group in sizes.values():
        index = torch.as_tensor([rows[k] for k in group], device=stacked[0].device)
        params = {name: p.detach().index_select(0, index) for name, p in zip(names, stacked, strict=True)}
        e = params["output.weight"].shape[1]
        x = torch.stack([runs[k].data.x_holdout for k in group])  # [R, N, in]
        y = torch.stack([runs[k].data.y_holdout for k in group])
        mean, _ = _forward(params, x.unsqueeze(1).expand(-1, e, -1, -1), num_hidden)
        # DynamicsModel._holdout_scores per run: the MSE per output over the rows, then over the outputs.
        mse = ((mean - y.unsqueeze(1)) ** 2).mean(dim=2).mean(dim=2)  # [R, E]
        for k, scores in zip(group, mse, strict=True):
            run = runs[k]
            period_loss = run.loss_sum / run.loss_count if run.loss_count else math.nan
            run.loss_sum, run.loss_count = 0.0, 0
            improved = run.schedule.scored(scores, period_loss)
            if improved is None:
                continue
            row = rows[k]
            for name, snapshot in best.items():
                current = stacked[names.index(name)]
                mask = improved.reshape(-1, *([1] * (snapshot.dim() - 2)))
                snapshot[row] = torch.where(mask, current[row].detach(), snapshot[row])


def _compact(
    stacked: list[torch.Tensor],
    optimizer: torch.optim.Adam,
    best: dict[str, torch.Tensor],
    keep: list[int],
    device: torch.device,
) -> tuple[list[torch.Tensor], torch.optim.Adam, dict[str, torch.Tensor]]:
    """The stacked parameters, their Adam state and the best snapshots of the runs ``keep`` only (a run that stopped
    leaves the batch, so the others' steps no longer carry it)."""
    index = torch.as_tensor(keep, device=device)
    fresh = [p.detach().index_select(0, index).requires_grad_() for p in stacked]
    mapping = {id(old): new for old, new in zip(stacked, fresh, strict=True)}
    groups = [
        {"params": [mapping[id(p)] for p in group["params"]], "weight_decay": group["weight_decay"]}
        for group in optimizer.param_groups
    ]
    compacted = fit_optimizer(groups, optimizer.defaults["lr"], bool(optimizer.defaults.get("fused")))
    for old, new in zip(stacked, fresh, strict=True):
        state = optimizer.state.get(old)
        if state:
            compacted.state[new] = {
                key: value.index_select(0, index) if value.dim() and value.shape[0] == old.shape[0] else value.clone()
                for key, value in state.items()
            }
    return fresh, compacted, {name: b.index_select(0, index) for name, b in best.items()}
