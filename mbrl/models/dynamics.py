"""The world model used by MBPO and Dyna-DQN: an ensemble predicting reward and state change, with its training loop.

Training follows MBPO's reference implementation (Janner et al. 2019) and mbrl-lib: inputs (state, action) and targets
(reward, delta-state) are standardized with statistics of the training split; each member trains on its own bootstrap
resample in shuffled minibatches; a holdout split scores each member after every epoch; a member's weights are
snapshotted whenever its holdout error improves by more than ``improvement_threshold`` (relative); the best snapshot
of every member is restored at the end and the ``num_elites`` members with the lowest holdout MSE become the elites
used for prediction.

Every fit starts its best scores afresh (MBPO's reference resets them at each ``train`` call): the normalizer is
refit to the new data first, so the previous weights' score is a score of weights trained under other statistics,
and keeping them whenever the refit did not beat it would pair stale weights with the new normalizer. The first
epoch's result is the baseline instead, so the weights a fit ends with were always trained under the normalizer
they are used with.

Early stopping counts gradient steps rather than epochs: with a small buffer an epoch is one or two minibatches, so
MBPO's five epochs of patience would stop a warm refit after about ten steps, before Adam's restart has settled.
Training stops once no member has improved for ``patience_steps`` gradient steps (and ``patience`` epochs), but never
before ``min_train_steps`` steps (or, with ``min_train_epochs``, that many epochs where those are fewer steps);
``max_epochs`` and ``max_train_steps`` are hard caps.

Targets are standardized too (a departure from MBPO, which only normalizes inputs): MountainCar's velocity changes by
about 1e-3 per step, far below the standard deviation that MBPO's log-variance floor of -10 allows, so predicting raw
deltas would drown the dynamics in model noise. Holdout NLL and MSE are therefore reported in standardized target
units, comparable across environments; ``model/holdout_nmse`` divides each output's holdout MSE by that output's
holdout variance (1 is the score of predicting the mean).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from mbrl.models.fit_schedule import FitData, FitSchedule
from mbrl.models.gaussian_ensemble import PRECISIONS, GaussianEnsemble, gaussian_nll
from mbrl.models.normalizer import Normalizer
from mbrl.models.propagator import MemberPropagator
from mbrl.models.termination_head import TerminationHead
from rolloutlab.device import resolve_device
from rolloutlab.run_state import generator_state, set_generator_state

#: Rows per batched forward pass in :meth:`DynamicsModel.predict` (MBPO's 100k imagined starts in pieces that keep
#: the hidden activations small).
PREDICT_CHUNK = 8192

#: MBPO's per-layer L2 weight decay for its 4 hidden layers + output layer (reference implementation, ``bnn.py``).
MBPO_WEIGHT_DECAYS = (2.5e-5, 5e-5, 7.5e-5, 7.5e-5, 1e-4)


def default_weight_decays(num_layers: int) -> list[float]:
    """MBPO's per-layer weight decays for ``num_layers == 4``; otherwise spread linearly over the same range."""
    if num_layers == 4:
        return list(MBPO_WEIGHT_DECAYS)
    return [float(w) for w in np.linspace(2.5e-5, 1e-4, num_layers + 1)]


def fit_optimizer(params: Any, lr: float, fused: bool) -> torch.optim.Adam:
    """Adam for a model fit.

    ``fused=False``: the multi-tensor implementation, the per-parameter loop's arithmetic in fewer calls (the same
    weights to the bit as ``torch.optim.Adam``'s default on CPU). ``fused=True``: the fused kernel (one kernel per
    step for every parameter, CPU and CUDA in torch >= 2.4; the multi-tensor one where it is missing), faster on a
    small network whose step is dominated by the ~10 small ops per parameter, but rounded differently.
    """
    if fused:
        try:
            return torch.optim.Adam(params, lr=lr, fused=True)
        except (RuntimeError, ValueError):
            pass
    return torch.optim.Adam(params, lr=lr, foreach=True)


@dataclass
class ModelConfig:
    """World-model architecture and training settings (defaults: MBPO's).

    Attributes:
        ensemble_size: Number of ensemble members ``E``.
        num_elites: Members used for prediction, chosen by holdout MSE.
        hidden_size: Width of each hidden layer.
        num_layers: Number of hidden layers.
        lr: Adam learning rate.
        weight_decays: Per-layer L2 coefficients (``num_layers + 1`` values); ``None`` means
            :func:`default_weight_decays`.
        batch_size: Minibatch size per member.
        holdout_fraction: Fraction of the data held out for early stopping and elite selection.
        max_holdout: Cap on the holdout size (MBPO: 5000).
        patience: Epochs without improvement of any member before training may stop (MBPO: 5). Training stops only
            once both ``patience`` epochs and ``patience_steps`` gradient steps have passed without an improvement,
            so on a large buffer (many steps per epoch) this is MBPO's rule and on a small one ``patience_steps``
            governs.
        patience_steps: Gradient steps without improvement of any member before training may stop. The holdout is
            still scored once per epoch, so the stop falls on the first epoch end past this many steps. On
            noise-free control data the holdout MSE keeps falling roughly as a power of the step count (no plateau
            within 20k steps on Acrobot), so this sets how much training a model accumulates: with 200, a model with
            little training behind it keeps improving by 1% within 200 steps for some 10k-20k steps, and once it
            has that much, warm refits stop after about 1k-2k steps (Acrobot, Dyna's 5x3x64 ensemble refit every
            1000 transitions up to 20k: 62k steps over 20 refits, median 1.1k). 100 costs about a third less and
            leaves models about 1.7x worse on unseen episodes.
        min_train_steps: Gradient steps every fit takes before early stopping may end it (the caps below still
            apply). A warm refit first loses accuracy to the restarted Adam moments and the new normalizer, and a
            small buffer is only one or two minibatches per epoch; this floor gives the refit time to recover and
            improve. Warm refits on a growing buffer mostly stop between this floor and a few times it.
        min_train_epochs: The floor scaled to the data (``None``: off, ``min_train_steps`` alone, the rule of
            every committed result). When set, a fit's floor is ``min(min_train_steps, ceil(min_train_epochs *
            steps_per_epoch))`` gradient steps, ``steps_per_epoch = ceil(num_train / batch_size)``: a buffer of a
            few minibatches is no longer trained for a fixed ``min_train_steps`` (on MBPO's first refits, 1000
            steps are 100-200 passes over the data), while on a buffer of ``min_train_steps / min_train_epochs``
            minibatches or more the floor is ``min_train_steps`` as before. The patience rules still end every
            fit, so a fit whose holdout keeps improving runs on past the floor either way.
        improvement_threshold: Relative holdout-MSE improvement that counts as an improvement (MBPO: 0.01).
        score_every_steps: The holdout is scored (and improved members snapshotted) at the end of an epoch once at
            least this many gradient steps have passed since the last score, and at the last epoch. 1 (the default,
            MBPO's rule and that of every committed result) scores after every epoch. On a small buffer an epoch
            is one or two steps and each score costs about as much as a step, while the patience rules count steps
            anyway: 8 scores a buffer of ``8 * batch_size`` training rows or more after every epoch as before, and a
            smaller one every 8 steps.
        fused_optimizer: Fit with fused Adam and the per-layer weight decay as Adam parameter groups
            (:meth:`GaussianEnsemble.decay_groups`, the same gradient ``wd * W`` as the loss's penalty, without its
            ops in every step): a faster step, equal to the default's to float32 rounding. Early stopping turns those
            rounding differences into another stopping step, so fits are alike in accuracy over seeds but not run
            for run; hence off by default, the arithmetic the committed results were fitted with (PETS's model
            config turns it on: its committed float32-planner runs were fitted with it).
        max_epochs: Hard cap on epochs per :meth:`DynamicsModel.fit` call. The step-based patience ends fits; the
            cap only binds on buffers of a few thousand transitions, whose epochs are a few steps, when the model
            is still improving (e.g. a first fit: 1000 epochs of 1600 training rows are 7000 steps).
        max_train_steps: Optional cap on minibatch gradient steps per :meth:`DynamicsModel.fit` call (``None``: no
            cap). Each fit warm-starts from the previous weights, so when the buffer grows large a fixed number of
            steps keeps the refit cost flat instead of growing with the data; the holdout check still runs on the
            partial last epoch.
        bootstrap: Each member trains on its own bootstrap resample (``True``) or on the same data in its own shuffled
            order (``False``).
        learned_termination: Also train a termination classifier (for envs without a known termination function).
        termination_hidden_size: Width of the termination classifier's hidden layers.
        refit_normalizer: Recompute the normalizer statistics from the data passed to each ``fit`` call (the whole
            buffer, as in mbrl-lib) instead of accumulating them over calls.
        precision: ``"float32"`` (the default, the arithmetic of every committed result) or ``"bf16"``: the
            ensemble's hidden layers in bfloat16 under ``torch.autocast`` in fits, predictions and planning
            (:class:`~mbrl.models.gaussian_ensemble.GaussianEnsemble`, :class:`MemberPropagator`); an opt-in whose
            effect on learning is measured, not assumed. The batched-runs fit does not take it.
    """

    ensemble_size: int = 7
    num_elites: int = 5
    hidden_size: int = 200
    num_layers: int = 4
    lr: float = 1e-3
    weight_decays: list[float] | None = None
    batch_size: int = 256
    holdout_fraction: float = 0.2
    max_holdout: int = 5000
    patience: int = 5
    patience_steps: int = 200
    min_train_steps: int = 1000
    min_train_epochs: float | None = None
    improvement_threshold: float = 0.01
    score_every_steps: int = 1
    fused_optimizer: bool = False
    max_epochs: int = 1000
    max_train_steps: int | None = None
    bootstrap: bool = True
    learned_termination: bool = False
    termination_hidden_size: int = 64
    refit_normalizer: bool = True
    precision: str = "float32"


@dataclass
class ModelStep:
    """One batched model prediction (all arrays numpy, ``N`` samples).

    Attributes:
        next_obs: ``[N, obs_dim]`` predicted next observation (``obs`` + sampled delta).
        reward: ``[N]`` predicted reward.
        terminated_prob: ``[N]`` termination probability from the learned head, or ``None`` without one.
        disagreement: ``[N]`` standard deviation across elites of the predicted mean, averaged over output dims,
            in standardized target units.
        finite: ``[N]`` whether the prediction is finite (non-finite rows are a sign the model diverged).
    """

    next_obs: np.ndarray
    reward: np.ndarray
    terminated_prob: np.ndarray | None
    disagreement: np.ndarray
    finite: np.ndarray = field(default_factory=lambda: np.ones(0, dtype=bool))


class DynamicsModel:
    """Ensemble world model ``(s, a) -> (r, s' - s)`` with normalizers, training and sampling.

    Args:
        obs_dim: Observation width.
        action_dim: Number of actions if ``discrete_actions`` (one-hot encoded inside), else the action width.
        discrete_actions: Whether actions are integer indices.
        cfg: Architecture and training settings.
        seed: Seeds the initialization and the model's own generator for holdout splits and bootstrap draws.
        device: Where the networks live and compute (:func:`rolloutlab.device.resolve_device` spellings). Inputs and
            outputs stay numpy: inputs are moved to the device, results come back to the CPU. The initialization
            and every random draw (holdout split, bootstrap, minibatch order, elite choice, sampling noise) come
            from CPU generators, so they are the same on every device.

    Attributes:
        device: The resolved device.
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        discrete_actions: bool,
        cfg: ModelConfig,
        seed: int = 0,
        device: str | torch.device = "cpu",
    ) -> None:
        if cfg.max_train_steps is not None and cfg.max_train_steps < 1:
            raise ValueError(f"ModelConfig.max_train_steps must be >= 1 or None, got {cfg.max_train_steps}")
        if cfg.score_every_steps < 1:
            raise ValueError(f"ModelConfig.score_every_steps must be >= 1, got {cfg.score_every_steps}")
        if cfg.patience_steps < 0 or cfg.min_train_steps < 0:
            raise ValueError(
                f"ModelConfig.patience_steps and min_train_steps must be >= 0, got {cfg.patience_steps} and "
                f"{cfg.min_train_steps}"
            )
        if cfg.min_train_epochs is not None and not cfg.min_train_epochs >= 0:
            raise ValueError(f"ModelConfig.min_train_epochs must be >= 0 or None, got {cfg.min_train_epochs}")
        if cfg.precision not in PRECISIONS:
            raise ValueError(f"ModelConfig.precision must be one of {', '.join(PRECISIONS)}, got {cfg.precision!r}")
        self.obs_dim, self.action_dim, self.discrete_actions = int(obs_dim), int(action_dim), bool(discrete_actions)
        self.cfg = cfg
        self.device = resolve_device(device)
        in_dim, out_dim = self.obs_dim + self.action_dim, self.obs_dim + 1
        decays = cfg.weight_decays if cfg.weight_decays is not None else default_weight_decays(cfg.num_layers)
        # Built (and so initialized) on the CPU, then moved: the same initial weights on every device.
        self.ensemble = GaussianEnsemble(
            in_dim,
            out_dim,
            cfg.ensemble_size,
            cfg.hidden_size,
            cfg.num_layers,
            decays,
            cfg.num_elites,
            seed=seed,
            precision=cfg.precision,
        ).to(self.device)
        self.termination: TerminationHead | None = None
        if cfg.learned_termination:
            generator = torch.Generator().manual_seed(int(seed) + 1)
            self.termination = TerminationHead(cfg.ensemble_size, in_dim, cfg.termination_hidden_size, generator).to(
                self.device
            )
        self.input_normalizer = Normalizer(in_dim)
        self.output_normalizer = Normalizer(out_dim)
        self._rng = np.random.default_rng(seed)
        self._last_good: dict[str, Any] = self._snapshot()
        self.fitted = False

    # --- data layout ------------------------------------------------------------------------------------------

    def _inputs(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, dtype=np.float64).reshape(-1, self.obs_dim)
        if self.discrete_actions:
            idx = np.asarray(actions).reshape(-1).astype(np.int64)
            if idx.shape[0] != obs.shape[0]:
                raise ValueError(f"got {obs.shape[0]} observations but {idx.shape[0]} actions")
            if idx.size and (idx.min() < 0 or idx.max() >= self.action_dim):
                raise ValueError(f"discrete actions must lie in [0, {self.action_dim}), got [{idx.min()}, {idx.max()}]")
            act = np.zeros((idx.shape[0], self.action_dim))
            act[np.arange(idx.shape[0]), idx] = 1.0
        else:
            act = np.asarray(actions, dtype=np.float64).reshape(obs.shape[0], self.action_dim)
        return np.concatenate([obs, act], axis=1)

    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        """A numpy array as a tensor on the model's device (same dtype)."""
        return torch.as_tensor(array, device=self.device)

    def _weights(self) -> dict[str, Any]:
        return {
            "ensemble": copy.deepcopy(self.ensemble.state_dict()),
            "termination": None if self.termination is None else copy.deepcopy(self.termination.state_dict()),
        }

    def _load_weights(self, weights: Mapping[str, Any]) -> None:
        self.ensemble.load_state_dict(weights["ensemble"])
        if self.termination is not None and weights.get("termination") is not None:
            self.termination.load_state_dict(weights["termination"])

    def _member_params(self) -> dict[str, torch.Tensor]:
        params = {f"ensemble.{n}": p for n, p in self.ensemble.named_parameters()}
        if self.termination is not None:
            params.update({f"termination.{n}": p for n, p in self.termination.named_parameters()})
        return {n: p for n, p in params.items() if p.shape[0] == self.cfg.ensemble_size and p.dim() == 3}

    def _snapshot(self) -> dict[str, Any]:
        """Weights together with the normalizer statistics they were trained under (one consistent model)."""
        return {
            **self._weights(),
            "input_normalizer": self.input_normalizer.state_dict(),
            "output_normalizer": self.output_normalizer.state_dict(),
        }

    def _load_snapshot(self, snapshot: Mapping[str, Any]) -> None:
        """Inverse of :meth:`_snapshot`; a snapshot without normalizers (older checkpoints) keeps the current ones."""
        self._load_weights(snapshot)
        if snapshot.get("input_normalizer") is not None and snapshot.get("output_normalizer") is not None:
            self.input_normalizer.load_state_dict(snapshot["input_normalizer"])
            self.output_normalizer.load_state_dict(snapshot["output_normalizer"])

    def restore_last_good(self) -> None:
        """Reload the weights and normalizers from the end of the last successful :meth:`fit` (after NaN/inf)."""
        self._load_snapshot(self._last_good)

    # --- training ---------------------------------------------------------------------------------------------

    def min_train_steps(self, num_train: int) -> int:
        """The gradient steps a fit on ``num_train`` training rows takes before early stopping may end it
        (``ModelConfig.min_train_steps``, or less on a small buffer with ``ModelConfig.min_train_epochs``)."""
        cfg = self.cfg
        if cfg.min_train_epochs is None:
            return cfg.min_train_steps
        steps_per_epoch = math.ceil(num_train / cfg.batch_size)
        return min(cfg.min_train_steps, math.ceil(cfg.min_train_epochs * steps_per_epoch))

    @torch.no_grad()
    def _holdout_scores(
        self, x: torch.Tensor, y: torch.Tensor, t: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Per-member holdout scores: MSE ``[E]``, MSE per output ``[E, out_dim]``, NLL ``[E]``, termination BCE."""
        mean, logvar = self.ensemble(x)
        mse_per_output = ((mean - y) ** 2).mean(dim=1)
        nll = gaussian_nll(mean, logvar, y.expand_as(mean))
        bce = None
        if self.termination is not None and t is not None:
            logits = self.termination(x.unsqueeze(0).expand(self.cfg.ensemble_size, -1, -1))
            bce = F.binary_cross_entropy_with_logits(logits, t.expand_as(logits), reduction="none").mean(dim=1)
        return mse_per_output.mean(dim=1), mse_per_output, nll, bce

    def fit(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
    ) -> dict[str, float]:
        """Train on a dataset of real transitions (typically the whole replay buffer).

        Args:
            obs: ``[N, obs_dim]``.
            actions: ``[N]`` integer actions (discrete) or ``[N, action_dim]``.
            rewards: ``[N]``.
            next_obs: ``[N, obs_dim]``.
            terminated: ``[N]`` true terminals only (never time-limit truncations).

        Returns:
            Metrics: ``model/holdout_nll`` and ``model/holdout_mse`` (mean over elites, standardized target units),
            ``model/holdout_nmse`` (holdout MSE of each output divided by that output's holdout variance, averaged
            over elites and outputs) and ``model/holdout_nmse_<j>`` per output (``j = 0`` the reward, ``1..obs_dim``
            the state deltas), ``model/train_epochs``, ``model/train_steps``, ``model/train_loss``,
            ``model/num_train``, ``model/num_holdout``, ``model/restored_after_nan`` (1.0 if a non-finite loss made
            training fall back to the last good weights and normalizers) and, with a learned termination head,
            ``model/holdout_termination_bce``.
        """
        cfg = self.cfg
        data = self.fit_data(obs, actions, rewards, next_obs, terminated)
        x_tr, y_tr, t_tr = data.x_train, data.y_train, data.t_train
        if cfg.fused_optimizer:
            groups = self.ensemble.decay_groups()  # the optimizer applies the weight decay
        else:
            groups = [{"params": list(self.ensemble.parameters()), "weight_decay": 0.0}]  # the loss holds it
        if self.termination is not None:
            groups.append({"params": list(self.termination.parameters()), "weight_decay": 0.0})
        optimizer = fit_optimizer(groups, cfg.lr, cfg.fused_optimizer)
        member_params = self._member_params()
        best_state = {name: p.detach().clone() for name, p in member_params.items()}
        schedule = self.fit_schedule(data.x_train.shape[0])
        member_idx = data.member_rows
        losses: list[torch.Tensor] = []  # the losses of the steps since the holdout was last scored
        while schedule.wants_epoch():
            member_idx = self._rng.permuted(member_idx, axis=1)  # each member its own minibatch order
            epoch_idx = self._tensor(member_idx)  # one host-to-device copy per epoch; the steps slice views of it
            for start in range(0, data.num_train, cfg.batch_size):
                if not schedule.may_step():
                    break
                schedule.begin_step()
                batch = epoch_idx[:, start : start + cfg.batch_size]
                xb, yb = x_tr[batch], y_tr[batch]
                # With the fused optimizer, its parameter groups apply the per-layer weight decay, not the loss.
                loss = self.ensemble.loss(xb, yb, weight_decay=not cfg.fused_optimizer)
                if self.termination is not None:
                    loss = loss + self.termination.loss(xb, t_tr[batch]).sum()
                if not torch.isfinite(loss):
                    schedule.restored = True
                    break
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                losses.append(loss.detach())
            if not schedule.end_epoch():
                continue
            mse, _, _, _ = self._holdout_scores(data.x_holdout, data.y_holdout, data.t_holdout)
            improved = schedule.scored(mse, float(torch.stack(losses).mean()) if losses else math.nan)
            losses = []
            if improved is not None:
                with torch.no_grad():
                    for name, p in member_params.items():
                        mask = improved.reshape(-1, *([1] * (p.dim() - 1)))
                        best_state[name] = torch.where(mask, p.detach(), best_state[name])
        if not schedule.restored:
            with torch.no_grad():
                for name, p in member_params.items():
                    p.copy_(best_state[name])
        return self.finish_fit(data, schedule)

    def fit_data(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
    ) -> FitData:
        """The first part of :meth:`fit`: drop non-finite rows, split off the holdout, refit the normalizers on the
        training split and draw each member's bootstrap rows (the holdout split and the bootstrap come from the
        model's generator, in this order)."""
        cfg = self.cfg
        x_np = self._inputs(obs, actions)
        obs64 = np.asarray(obs, dtype=np.float64).reshape(-1, self.obs_dim)
        y_np = np.concatenate(
            [np.asarray(rewards, dtype=np.float64).reshape(-1, 1), np.asarray(next_obs, dtype=np.float64) - obs64],
            axis=1,
        )
        t_np = np.asarray(terminated, dtype=np.float64).reshape(-1)
        keep = np.isfinite(x_np).all(axis=1) & np.isfinite(y_np).all(axis=1)
        x_np, y_np, t_np = x_np[keep], y_np[keep], t_np[keep]
        n = x_np.shape[0]
        if n == 0:
            raise ValueError("DynamicsModel.fit needs at least one finite transition")
        perm = self._rng.permutation(n)
        n_hold = min(int(n * cfg.holdout_fraction), cfg.max_holdout)
        if n - n_hold < 1:
            n_hold = 0
        hold_idx, train_idx = perm[:n_hold], perm[n_hold:]
        if cfg.refit_normalizer:
            self.input_normalizer.reset()
            self.output_normalizer.reset()
        self.input_normalizer.update(x_np[train_idx])
        self.output_normalizer.update(y_np[train_idx])

        def tensors(idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            # Reads the normalizers at call time, so after a fallback it standardizes with the restored statistics.
            x = self.input_normalizer.normalize(self._tensor(x_np[idx])).float()
            y = self.output_normalizer.normalize(self._tensor(y_np[idx])).float()
            return x, y, self._tensor(t_np[idx]).float()

        x_tr, y_tr, t_tr = tensors(train_idx)
        x_ho, y_ho, t_ho = tensors(hold_idx) if n_hold > 0 else (x_tr, y_tr, t_tr)
        n_train, e = x_tr.shape[0], cfg.ensemble_size
        if cfg.bootstrap:
            member_idx = self._rng.integers(0, n_train, size=(e, n_train))
        else:
            member_idx = np.tile(np.arange(n_train), (e, 1))
        return FitData(
            x_tr, y_tr, t_tr, x_ho, y_ho, t_ho, member_idx, n_hold, lambda: tensors(hold_idx if n_hold else train_idx)
        )

    def fit_schedule(self, num_train: int) -> FitSchedule:
        """A fresh early-stopping schedule with this model's settings, for a fit on ``num_train`` training rows."""
        cfg = self.cfg
        return FitSchedule(
            min_train_steps=self.min_train_steps(num_train),
            patience=cfg.patience,
            patience_steps=cfg.patience_steps,
            improvement_threshold=cfg.improvement_threshold,
            score_every_steps=cfg.score_every_steps,
            max_epochs=cfg.max_epochs,
            max_train_steps=cfg.max_train_steps,
            ensemble_size=cfg.ensemble_size,
            device=self.device,
        )

    def finish_fit(self, data: FitData, schedule: FitSchedule) -> dict[str, float]:
        """The last part of :meth:`fit`, once the members hold their best weights: fall back to the last good model
        where the fit was not finite, else choose the elites and keep the model as the last good one; the metrics."""
        cfg = self.cfg
        x_ho, y_ho, t_ho = data.x_holdout, data.y_holdout, data.t_holdout
        if schedule.restored:
            # Non-finite loss or predictions: fall back to the weights of the last successful fit together with the
            # normalizers they were trained under, re-standardize the holdout with those, and say so.
            self._load_snapshot(self._last_good)
            x_ho, y_ho, t_ho = data.restandardize()
        mse, mse_per_output, nll, bce = self._holdout_scores(x_ho, y_ho, t_ho)
        if not schedule.restored:
            score = torch.where(torch.isfinite(mse), mse, torch.full_like(mse, math.inf))
            self.ensemble.elite_idx.copy_(torch.argsort(score)[: cfg.num_elites])
            self._last_good = self._snapshot()
            self.fitted = True
        elites = self.ensemble.elite_idx
        # Normalized MSE per output: 1 is the score of predicting the holdout mean. An output that is constant on the
        # holdout (MountainCar's reward) has no variance to normalize by; it keeps its standardized MSE, as the
        # normalizer leaves a constant feature unscaled.
        variance = y_ho.double().var(dim=0, unbiased=False)
        variance = torch.where(variance > 1e-12, variance, torch.ones_like(variance))
        nmse = (mse_per_output[elites].double() / variance).mean(dim=0)
        metrics = {
            "model/holdout_nll": float(nll[elites].mean()),
            "model/holdout_mse": float(mse[elites].mean()),
            "model/holdout_nmse": float(nmse.mean()),
            **{f"model/holdout_nmse_{j}": float(v) for j, v in enumerate(nmse.tolist())},
            "model/train_epochs": float(schedule.epochs),
            "model/train_steps": float(schedule.steps),
            "model/train_loss": schedule.last_loss,
            "model/num_train": float(data.num_train),
            "model/num_holdout": float(data.num_holdout),
            "model/restored_after_nan": float(schedule.restored),
        }
        if bce is not None:
            metrics["model/holdout_termination_bce"] = float(bce[elites].mean())
        return metrics

    # --- prediction -------------------------------------------------------------------------------------------

    def _grouped(self, x: torch.Tensor, members: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Each row of ``x [N, in]`` through its own elite ``members[N]`` only: ``mean``, ``logvar`` ``[N, out]`` and
        the learned termination probability ``[N]`` (``None`` without the head), one member's work per row."""
        n, k = x.shape[0], self.num_elites
        elite_idx = self.ensemble.elite_idx
        if n % k == 0 and np.array_equal(members, np.repeat(np.arange(k), n // k)):
            # Rows already in equal blocks per member (how a TS-inf planner lays out its particles): a reshape.
            mean, logvar = self.ensemble(x.reshape(k, n // k, -1), elite_idx)
            prob = None
            if self.termination is not None:
                prob = torch.sigmoid(self.termination(x.reshape(k, n // k, -1), elite_idx)).reshape(n)
            return mean.reshape(n, -1), logvar.reshape(n, -1), prob
        # Group the rows by member into [K, M, in] (M = the largest group; shorter groups padded with zeros).
        order = np.argsort(members, kind="stable")
        grouped = members[order]
        counts = np.bincount(grouped, minlength=k)
        slot = np.arange(n) - (np.cumsum(counts) - counts)[grouped]
        width = int(counts.max()) if n else 0
        xg = x.new_zeros((k, width, x.shape[1]))
        g_t, s_t, order_t = self._tensor(grouped), self._tensor(slot), self._tensor(order)
        xg[g_t, s_t] = x[order_t]
        mean_g, logvar_g = self.ensemble(xg, elite_idx)
        mean = x.new_empty((n, mean_g.shape[-1]))
        mean[order_t] = mean_g[g_t, s_t]
        logvar = x.new_empty((n, logvar_g.shape[-1]))
        logvar[order_t] = logvar_g[g_t, s_t]
        prob = None
        if self.termination is not None:
            prob = torch.empty(n, device=x.device)
            prob[order_t] = torch.sigmoid(self.termination(xg, elite_idx))[g_t, s_t]
        return mean, logvar, prob

    def _disagreement(self, x: torch.Tensor) -> np.ndarray:
        """Standard deviation across elites of the predicted mean, averaged over outputs, ``[N]`` (chunked)."""
        out = np.empty(x.shape[0])
        for start in range(0, x.shape[0], PREDICT_CHUNK):
            mean, _ = self.ensemble(x[start : start + PREDICT_CHUNK], self.ensemble.elite_idx)
            out[start : start + PREDICT_CHUNK] = mean.std(dim=0, unbiased=False).mean(dim=-1).double().cpu().numpy()
        return out

    @torch.no_grad()
    def predict(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rng: np.random.Generator,
        deterministic: bool = False,
        disagreement_rows: int | None = None,
    ) -> ModelStep:
        """Sample one step of the model for each of ``N`` (state, action) pairs, each from one random elite.

        Each row runs through its own elite only, in chunks of :data:`PREDICT_CHUNK` rows (one member's work per row;
        the elite and the noise of every row are drawn before the chunks, so the result does not depend on the chunk
        size). The disagreement needs every elite on a row and is the expensive part: ``disagreement_rows`` limits
        it to the first rows.

        Args:
            obs: ``[N, obs_dim]``.
            actions: ``[N]`` integer actions (discrete) or ``[N, action_dim]``.
            rng: Draws the elite for each sample and the Gaussian noise.
            deterministic: Use the chosen elite's mean instead of sampling from its Gaussian.
            disagreement_rows: Compute the disagreement of the first this many rows only, NaN for the rest (a mean
                over them estimates the batch's mean where the rows are in random order, e.g. start states drawn
                from a buffer); ``None``: every row.

        Returns:
            A :class:`ModelStep`.
        """
        obs64 = np.asarray(obs, dtype=np.float64).reshape(-1, self.obs_dim)
        n = obs64.shape[0]
        x = self.input_normalizer.normalize(self._tensor(self._inputs(obs64, actions))).float()
        choice = rng.integers(0, self.num_elites, size=n)
        noise = None if deterministic else rng.standard_normal((n, self.obs_dim + 1))
        y = torch.empty((n, self.obs_dim + 1), dtype=torch.float64, device=self.device)
        terminated = None if self.termination is None else torch.empty(n, dtype=torch.float64, device=self.device)
        for start in range(0, n, PREDICT_CHUNK):
            rows = slice(start, start + PREDICT_CHUNK)
            mean, logvar, prob = self._grouped(x[rows], choice[rows])
            part = mean.double()
            if noise is not None:
                part = part + torch.exp(0.5 * logvar.double()) * self._tensor(noise[rows])
            y[rows] = part
            if terminated is not None and prob is not None:
                terminated[rows] = prob.double()
        y_np = self.output_normalizer.denormalize(y).cpu().numpy()
        disagreement = np.full(n, np.nan)
        scored = n if disagreement_rows is None else min(n, max(0, int(disagreement_rows)))
        if scored:
            disagreement[:scored] = self._disagreement(x[:scored])
        return ModelStep(
            next_obs=obs64 + y_np[:, 1:],
            reward=y_np[:, 0].copy(),
            terminated_prob=None if terminated is None else terminated.cpu().numpy(),
            disagreement=disagreement,
            finite=np.isfinite(y_np).all(axis=1),
        )

    @property
    def num_elites(self) -> int:
        """Number of elite members (the ones :meth:`predict` samples from)."""
        return int(self.ensemble.elite_idx.numel())

    @torch.no_grad()
    def predict_members(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        members: np.ndarray,
        rng: np.random.Generator | None = None,
        deterministic: bool = False,
    ) -> ModelStep:
        """One model step per sample from a *given* elite: trajectory sampling (PETS's TS-inf, Chua et al. 2018).

        Each sample runs through its own member only, so a batch costs one member's forward pass per row instead of
        the whole ensemble's.

        Args:
            obs: ``[N, obs_dim]``.
            actions: ``[N]`` integer actions (discrete) or ``[N, action_dim]``.
            members: ``[N]`` indices into the elites (``0 <= members < num_elites``).
            rng: Draws the Gaussian noise (needed unless ``deterministic``).
            deterministic: Use each member's mean instead of sampling from its Gaussian.

        Returns:
            A :class:`ModelStep`; ``disagreement`` is NaN (one member per sample says nothing about the others).
        """
        obs64 = np.asarray(obs, dtype=np.float64).reshape(-1, self.obs_dim)
        n = obs64.shape[0]
        members = np.asarray(members, dtype=np.int64).reshape(-1)
        if members.shape[0] != n:
            raise ValueError(f"got {n} observations but {members.shape[0]} member indices")
        k = self.num_elites
        if n and (members.min() < 0 or members.max() >= k):
            raise ValueError(f"member indices must lie in [0, {k}), got [{members.min()}, {members.max()}]")
        if not deterministic and rng is None:
            raise ValueError("predict_members needs an rng unless deterministic=True")
        x = self.input_normalizer.normalize(self._tensor(self._inputs(obs64, actions))).float()
        mean, logvar, prob = self._grouped(x, members)
        y = mean.double()
        if not deterministic:
            assert rng is not None
            y = y + torch.exp(0.5 * logvar.double()) * self._tensor(rng.standard_normal(y.shape))
        y_np = self.output_normalizer.denormalize(y).cpu().numpy()
        return ModelStep(
            next_obs=obs64 + y_np[:, 1:],
            reward=y_np[:, 0].copy(),
            terminated_prob=None if prob is None else prob.double().cpu().numpy(),
            disagreement=np.full(n, np.nan),
            finite=np.isfinite(y_np).all(axis=1),
        )

    def propagator(self, members: torch.Tensor | np.ndarray | None = None) -> MemberPropagator:
        """The weights of the given elites frozen as float32 tensors, for a planner's many steps on one model.

        Args:
            members: ``[S]`` indices into the elites, one per slot of the propagator's batches (a member may fill
                several slots); ``None``: every elite once, in elite order.
        """
        k = self.num_elites
        idx = torch.arange(k) if members is None else torch.as_tensor(np.asarray(members), dtype=torch.long)
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= k):
            raise ValueError(f"member indices must lie in [0, {k}), got [{int(idx.min())}, {int(idx.max())}]")
        return MemberPropagator(self, self.ensemble.elite_idx.cpu()[idx])

    @torch.no_grad()
    def predict_expected(self, obs: np.ndarray, actions: np.ndarray) -> ModelStep:
        """The elites' average predicted mean (PETS's "expectation" propagation: no sampling, no member choice).

        The normalizer is affine, so averaging in standardized units and denormalizing equals averaging the
        denormalized means. ``disagreement`` is the elites' spread, as in :meth:`predict`.
        """
        obs64 = np.asarray(obs, dtype=np.float64).reshape(-1, self.obs_dim)
        x = self.input_normalizer.normalize(self._tensor(self._inputs(obs64, actions))).float()
        mean, _ = self.ensemble(x, self.ensemble.elite_idx)
        y_np = self.output_normalizer.denormalize(mean.double().mean(dim=0)).cpu().numpy()
        terminated_prob = None
        if self.termination is not None:
            logits = self.termination(x.unsqueeze(0).expand(self.cfg.ensemble_size, -1, -1))
            terminated_prob = torch.sigmoid(logits[self.ensemble.elite_idx]).double().mean(dim=0).cpu().numpy()
        return ModelStep(
            next_obs=obs64 + y_np[:, 1:],
            reward=y_np[:, 0].copy(),
            terminated_prob=terminated_prob,
            disagreement=mean.std(dim=0, unbiased=False).mean(dim=-1).double().cpu().numpy(),
            finite=np.isfinite(y_np).all(axis=1),
        )

    # --- persistence ------------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Weights (elites included), normalizer statistics and the model's generator state, as plain tensors/data."""
        weights = self._weights()
        return {
            "ensemble": weights["ensemble"],
            "termination": weights["termination"],
            "input_normalizer": self.input_normalizer.state_dict(),
            "output_normalizer": self.output_normalizer.state_dict(),
            "last_good": self._last_good,
            "rng": generator_state(self._rng),
            "fitted": self.fitted,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot made by :meth:`state_dict`."""
        self._load_weights(state)
        self.input_normalizer.load_state_dict(state["input_normalizer"])
        self.output_normalizer.load_state_dict(state["output_normalizer"])
        last_good = copy.deepcopy(dict(state["last_good"]))
        if last_good.get("input_normalizer") is None or last_good.get("output_normalizer") is None:
            # Saved before snapshots carried normalizers: pair the last good weights with the loaded statistics.
            last_good["input_normalizer"] = self.input_normalizer.state_dict()
            last_good["output_normalizer"] = self.output_normalizer.state_dict()
        self._last_good = last_good
        set_generator_state(self._rng, state["rng"])
        self.fitted = bool(state["fitted"])
