"""Decision-time lookahead of many runs' world models at once (:meth:`ModelEnv.lookahead_values
<mbrl.model_env.ModelEnv.lookahead_values>` with a run axis).

A lookahead step of one run is a model step on a handful of rows (one state times the number of actions), some
fifty small tensor ops whose cost is almost all fixed. :class:`RunBatchedModelEnv` steps every run's rows together:
each run's elites' weights are gathered into one ``[R * K, in, out]`` stack per layer and applied in one batched
matmul, and each run's rows are standardized with its own normalizers. A run's values are computed op for op as by
its own :class:`~mbrl.model_env.ModelEnv` (elementwise ops, per-member matmuls, reductions within a run's slice;
each run's elite draws from its own generator, in the same order): with the elites' average
(``expectation=True``) they came out bit for bit the per-run values in the tests, with one random elite per row
equal to float32 rounding (a row's matmul is then part of a differently shaped product than in the per-run
grouping); ``tests/mbrl/test_run_batched.py`` checks both, and that a run's values do not depend on the other runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from mbrl.model_env import PolicyFn, RolloutProgress, RolloutResult
from mbrl.models.dynamics import DynamicsModel, ModelStep
from mbrl.models.gaussian_ensemble import EnsembleLinear
from mbrl.models.normalizer import Normalizer
from mbrl.termination import TerminationFn

__all__ = ["RunBatchedModelEnv", "RunQFn"]

RunQFn = Callable[[Sequence[int], np.ndarray], np.ndarray]
"""``q_fn(runs, obs [R, M, obs_dim]) -> [R, M, num_actions]``: the Q-values of each listed run on its own rows."""


@dataclass
class _Frozen:
    """Some runs' elites and normalizer statistics, stacked, with the key they were built under."""

    key: tuple[object, ...]
    arrays: list[np.ndarray]
    layers: list[tuple[torch.Tensor, torch.Tensor]]
    in_mean: torch.Tensor
    in_std: torch.Tensor
    out_mean: torch.Tensor
    out_std: torch.Tensor
    max_logvar: torch.Tensor
    min_logvar: torch.Tensor


_BOUNDS = ("max_logvar", "min_logvar")


class RunBatchedModelEnv:
    """The learned models of ``B`` runs as one batched environment for lookahead.

    Args:
        models: One model per run; the runs that look ahead together must have learned models with the same settings
            and dimensions, discrete actions and no learned termination head
            (:func:`mbrl.models.run_batched.can_fit_run_batched`).
        termination_fn: Known termination function ``fn(obs, action, next_obs) -> bool[N]`` (``None``: nothing
            terminates, as :class:`~mbrl.model_env.ModelEnv` without a function or head).
    """

    def __init__(self, models: Sequence[DynamicsModel], termination_fn: TerminationFn | None) -> None:
        self.models = list(models)
        self.termination_fn = termination_fn
        first = next(m for m in self.models if isinstance(m, DynamicsModel))
        self.obs_dim, self.num_actions = first.obs_dim, first.action_dim
        self.device = first.device
        self.num_hidden = first.cfg.num_layers
        self._cache: dict[tuple[int, ...], _Frozen] = {}

    def _terminated(self, obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
        """Per run (``[R, M, ...]``), the termination flags ``[R, M]``, the function called on each run's rows."""
        out = np.zeros(obs.shape[:2], dtype=bool)
        if self.termination_fn is not None:
            for r in range(obs.shape[0]):
                out[r] = np.asarray(self.termination_fn(obs[r], action[r], next_obs[r]), dtype=bool)
        return out

    def _frozen(self, runs: Sequence[int]) -> _Frozen:
        """The listed runs' elites and normalizer statistics as stacked tensors, rebuilt only when a model changed
        (a fit, a fallback or a load moves a parameter's version counter or replaces a normalizer's arrays)."""
        arrays = [a for i in runs for n in self._normalizers(i) for a in (n._mean, n._m2)]
        key = (
            tuple(
                (
                    *(p._version for p in self.models[i].ensemble.parameters()),
                    self.models[i].ensemble.elite_idx._version,
                )
                for i in runs
            )
            + tuple(id(a) for a in arrays)
            + tuple(n.count for i in runs for n in self._normalizers(i))
        )
        cached = self._cache.get(tuple(runs))
        if cached is not None and cached.key == key:
            return cached
        bounds = [torch.stack([getattr(self.models[i].ensemble, name).detach() for i in runs]) for name in _BOUNDS]
        frozen = _Frozen(key, arrays, self._elites(runs), *self._statistics(runs), *bounds)
        self._cache[tuple(runs)] = frozen  # holds the arrays, so their ids cannot come back for new ones
        return frozen

    def _normalizers(self, run: int) -> tuple[Normalizer, Normalizer]:
        model = self.models[run]
        return model.input_normalizer, model.output_normalizer

    def _statistics(self, runs: Sequence[int]) -> list[torch.Tensor]:
        """Input mean and std ``[R, 1, in]``, output mean and std ``[R, 1, out]`` (float64)."""
        out = []
        for which in (0, 1):
            for stat in ("mean", "std"):
                values = np.stack([getattr(self._normalizers(i)[which], stat) for i in runs])[:, None]
                out.append(torch.as_tensor(values, device=self.device))
        return out

    @torch.no_grad()
    def _elites(self, runs: Sequence[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer, the listed runs' elites' weights ``[R * K, in, out]`` and biases ``[R * K, 1, out]``."""
        layers = []
        ensembles = [self.models[r].ensemble for r in runs]
        for i in range(self.num_hidden + 1):
            weights, biases = [], []
            for ensemble in ensembles:
                layer = ensemble.hidden[i] if i < self.num_hidden else ensemble.output
                assert isinstance(layer, EnsembleLinear)
                weights.append(layer.weight[ensemble.elite_idx])
                biases.append(layer.bias[ensemble.elite_idx])
            layers.append((torch.cat(weights), torch.cat(biases)))
        return layers

    @torch.no_grad()
    def _elite_means(self, frozen: _Frozen, state: np.ndarray, action: np.ndarray) -> torch.Tensor:
        """Every elite's predicted mean for each listed run's rows, ``[R, K, M, out]`` (standardized target units):
        :meth:`DynamicsModel.predict_expected`'s forward pass, run by run, in one go; the unbounded log-variances
        follow the means on the last axis."""
        r, m = state.shape[0], state.shape[1]
        onehot = np.zeros((r, m, self.num_actions))
        np.put_along_axis(onehot, action[..., None].astype(np.int64), 1.0, axis=2)
        inputs = torch.as_tensor(np.concatenate([state, onehot], axis=2), device=self.device)
        x = ((inputs - frozen.in_mean) / frozen.in_std).float()
        k = frozen.layers[0][0].shape[0] // r
        h = x.unsqueeze(1).expand(r, k, m, x.shape[-1]).reshape(r * k, m, x.shape[-1])
        for i, (weight, bias) in enumerate(frozen.layers):
            h = torch.baddbmm(bias, h, weight)
            if i < self.num_hidden:
                h = F.silu(h)
        return h.reshape(r, k, m, -1)  # the means, then the unbounded log-variances

    def _step(
        self,
        frozen: _Frozen,
        state: np.ndarray,
        action: np.ndarray,
        rngs: Sequence[np.random.Generator],
        expectation: bool,
        disagreement: bool,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """One lookahead model step of the listed runs: next observations ``[R, M, obs_dim]``, rewards ``[R, M]`` and
        (if asked) the elites' disagreement ``[R, M]``; as :meth:`DynamicsModel.predict_expected` (``expectation``)
        or :meth:`DynamicsModel.predict` with ``deterministic=True`` (one elite drawn per row from the run's
        generator) on each run alone."""
        means = self._elite_means(frozen, state, action)[..., : self.obs_dim + 1]  # [R, K, M, out]
        r, k, m, _ = means.shape
        if expectation:
            y = means.double().mean(dim=1)
        else:
            choice = np.stack([rngs[i].integers(0, k, size=m) for i in range(r)])
            index = torch.as_tensor(choice, device=means.device)[:, None, :, None].expand(r, 1, m, means.shape[-1])
            y = means.gather(1, index).squeeze(1).double()
        y_np = (y * frozen.out_std + frozen.out_mean).cpu().numpy()
        spread = None
        if disagreement:
            spread = means.std(dim=1, unbiased=False).mean(dim=-1).double().cpu().numpy()
        return state + y_np[..., 1:], y_np[..., 0], spread

    def lookahead_values(
        self,
        runs: Sequence[int],
        obs: np.ndarray,
        q_fn: RunQFn,
        horizons: Sequence[int],
        gamma: float,
        rngs: Sequence[np.random.Generator],
        expectation: bool = False,
        disagreement_out: np.ndarray | None = None,
    ) -> np.ndarray:
        """:meth:`ModelEnv.lookahead_values <mbrl.model_env.ModelEnv.lookahead_values>` of each listed run at its
        own states, with its own horizon, all runs stepping together.

        Args:
            runs: The runs that look ahead (indices into ``models``).
            obs: ``[R, N, obs_dim]`` states to decide at, per listed run.
            q_fn: Q-values of the listed runs (:data:`RunQFn`).
            horizons: Model steps per listed run (each >= 1).
            gamma: Discount.
            rngs: Per listed run, the generator of its elite choices (unused with ``expectation``).
            expectation: Step with the elites' average prediction instead of one random elite's mean.
            disagreement_out: If given, ``[R, N, num_actions]`` filled with the mean ensemble disagreement along each
                action's rollout.

        Returns:
            ``[R, N, num_actions]`` values.
        """
        runs = list(runs)
        horizon = np.asarray(horizons, np.int64)
        if horizon.shape != (len(runs),) or (horizon < 1).any():
            raise ValueError(f"need one lookahead horizon >= 1 per run, got {list(horizons)} for {len(runs)} runs")
        a = self.num_actions
        r, n = len(runs), obs.shape[1]
        state = np.repeat(np.asarray(obs, np.float64), a, axis=1)  # [R, N * A, d]
        action = np.broadcast_to(np.tile(np.arange(a), n), (r, n * a)).copy()
        value, alive = np.zeros((r, n * a)), np.ones((r, n * a), bool)
        discount = np.ones(r)
        spread, live_steps = np.zeros((r, n * a)), np.zeros((r, n * a))
        bootstrap = np.zeros((r, n * a))
        going = np.arange(r)  # rows (of the listed runs) still stepping; horizons end them one by one
        frozen = self._frozen(runs)
        for t in range(int(horizon.max())):
            still = horizon[going] > t
            if not still.all():
                going = going[still]
                frozen = self._frozen([runs[j] for j in going])
            rows = going.tolist()
            g_runs = [runs[j] for j in rows]
            s, act = state[going], action[going]
            next_obs, reward, dis = self._step(
                frozen, s, act, [rngs[j] for j in rows], expectation, disagreement_out is not None
            )
            live = alive[going]
            if dis is not None:
                spread[going] += np.where(live, dis, 0.0)
                live_steps[going] += live
            finite = np.isfinite(next_obs).all(axis=2)
            next_obs = np.where(finite[..., None], next_obs, s)
            done = self._terminated(s, act, next_obs) | ~finite
            value[going] += discount[going, None] * np.where(live, np.nan_to_num(reward), 0.0)
            alive[going] = live & ~done
            discount[going] *= gamma
            state[going] = next_obs
            q = np.asarray(q_fn(g_runs, next_obs.astype(np.float32)), np.float64)
            action[going] = q.argmax(axis=2)
            bootstrap[going] = q.max(axis=2)
        value += discount[:, None] * np.where(alive, bootstrap, 0.0)
        if disagreement_out is not None:
            disagreement_out[...] = (spread / np.maximum(live_steps, 1)).reshape(r, n, a)
        return value.reshape(r, n, a)

    @torch.no_grad()
    def _predict(
        self,
        runs: Sequence[int],
        obs: Sequence[np.ndarray],
        actions: Sequence[np.ndarray],
        rngs: Sequence[np.random.Generator],
        deterministic: bool,
        disagreement_rows: Sequence[int | None],
    ) -> list[ModelStep]:
        """:meth:`DynamicsModel.predict` of each listed run on its own rows (``obs[r] [n_r, obs_dim]``, actions
        ``[n_r]``), all runs' rows in one batched pass (padded to the longest run's); each run's elite choices and
        noise are drawn from its own generator, in :meth:`DynamicsModel.predict`'s order."""
        r, width = len(runs), max(o.shape[0] for o in obs)
        state = np.zeros((r, width, self.obs_dim))
        action = np.zeros((r, width), np.int64)
        for j, (o, a) in enumerate(zip(obs, actions, strict=True)):
            state[j, : o.shape[0]] = o
            action[j, : o.shape[0]] = np.asarray(a).reshape(-1)
        frozen = self._frozen(runs)
        out = self._elite_means(frozen, state, action)  # [R, K, W, 2 * out]
        k, out_dim = out.shape[1], self.obs_dim + 1
        means = out[..., :out_dim]
        choice = np.zeros((r, width), np.int64)
        noise = np.zeros((r, width, out_dim))
        for j, o in enumerate(obs):
            n = o.shape[0]
            choice[j, :n] = rngs[j].integers(0, k, size=n)
            if not deterministic:
                noise[j, :n] = rngs[j].standard_normal((n, out_dim))
        index = torch.as_tensor(choice, device=out.device)[:, None, :, None].expand(r, 1, width, out.shape[-1])
        chosen = out.gather(1, index).squeeze(1)  # [R, W, 2 * out]
        y = chosen[..., :out_dim].double()
        if not deterministic:
            # GaussianEnsemble.forward's soft clamp of the chosen member's log-variance into the run's bounds.
            max_logvar, min_logvar = frozen.max_logvar[:, 0], frozen.min_logvar[:, 0]
            logvar = max_logvar - F.softplus(max_logvar - chosen[..., out_dim:])
            logvar = min_logvar + F.softplus(logvar - min_logvar)
            y = y + torch.exp(0.5 * logvar.double()) * torch.as_tensor(noise, device=out.device)
        y_np = (y * frozen.out_std + frozen.out_mean).cpu().numpy()
        spread = means.std(dim=1, unbiased=False).mean(dim=-1).double().cpu().numpy()  # [R, W]
        steps = []
        for j, o in enumerate(obs):
            n = o.shape[0]
            scored = n if disagreement_rows[j] is None else min(n, max(0, int(disagreement_rows[j])))  # type: ignore[arg-type]
            disagreement = np.full(n, np.nan)
            disagreement[:scored] = spread[j, :scored]
            rows = y_np[j, :n]
            steps.append(
                ModelStep(
                    next_obs=np.asarray(o, np.float64) + rows[:, 1:],
                    reward=rows[:, 0].copy(),
                    terminated_prob=None,
                    disagreement=disagreement,
                    finite=np.isfinite(rows).all(axis=1),
                )
            )
        return steps

    def rollouts(
        self,
        runs: Sequence[int],
        progress: Sequence[RolloutProgress],
        policies: Sequence[PolicyFn],
        rngs: Sequence[np.random.Generator],
        deterministic: bool = False,
    ) -> list[RolloutResult]:
        """:meth:`ModelEnv.rollout <mbrl.model_env.ModelEnv.rollout>` of each listed run (its rollout begun by its
        own :meth:`ModelEnv.start_rollout`, its policy, its generator), the model steps of all runs taken together.
        Each run's policy and model draw from its generator in the per-run order (actions, then elites and noise).
        ``seconds`` of every result is the wall time of the whole batch."""
        started = time.perf_counter()
        for t in range(max((p.horizon for p in progress), default=0)):
            going = [j for j, p in enumerate(progress) if t < p.horizon and p.obs.shape[0] > 0]
            if not going:
                break
            actions = [np.asarray(policies[j](progress[j].obs)) for j in going]
            steps = self._predict(
                [runs[j] for j in going],
                [progress[j].obs for j in going],
                actions,
                [rngs[j] for j in going],
                deterministic,
                [progress[j].disagreement_rows for j in going],
            )
            for j, action, step in zip(going, actions, steps, strict=True):
                progress[j].advance(t, action, step)
        seconds = time.perf_counter() - started
        return [p.finish(seconds) for p in progress]
