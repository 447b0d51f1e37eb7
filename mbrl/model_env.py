"""Batched imagined rollouts in a learned dynamics model (MBPO's branched rollouts, Janner et al. 2019, Alg. 2).

:class:`ModelEnv` starts ``N`` rollouts from states drawn from the real buffer and advances all live ones together:
the current policy picks actions, :meth:`DynamicsModel.predict` samples next states and rewards with one random elite
per sample, and each sample ends on its own when it terminates (known termination function, or the learned head),
when its prediction is non-finite, or when the ensemble disagreement passes an optional threshold (MACURA-style,
Frauenknecht et al. 2024). Reaching the horizon marks the last transition ``truncated``, never ``terminated``.

The mean ensemble disagreement over live samples is recorded at every step (``RolloutResult.disagreement_by_step``)
and the per-sample disagreement of the first step is kept so an uncertainty controller can calibrate its threshold
as a percentile of it. A sample's next state needs one elite; its disagreement needs every elite, so unless the
rollout cuts samples on their disagreement (a threshold or a ``keep_fn``), it is computed on the first
:data:`DISAGREEMENT_SAMPLE` live samples of each step only (start states are drawn at random, so these are a random
subsample and their mean estimates the step's mean).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from mbrl.buffers import Transitions
from mbrl.termination import TerminationFn

#: Live samples per step whose ensemble disagreement a rollout computes when nothing cuts on it (its standard error on
#: the step's mean is then well under 1%: the per-sample spread is about the size of the mean).
DISAGREEMENT_SAMPLE = 4096

PolicyFn = Callable[[np.ndarray], np.ndarray]
"""Maps observations ``[N, obs_dim]`` to actions ``[N, act_dim]`` (or ``[N]`` indices), in environment units."""


class StepPredictor(Protocol):
    """What :class:`ModelEnv` needs from a dynamics model (``mbrl.models.dynamics.DynamicsModel`` provides it)."""

    def predict(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rng: np.random.Generator,
        deterministic: bool = False,
        disagreement_rows: int | None = None,
    ) -> Any:
        """Return an object with ``next_obs [N, d]``, ``reward [N]``, ``terminated_prob [N] | None``,
        ``disagreement [N]``, ``finite [N]``; ``deterministic`` uses the chosen elite's mean; ``disagreement_rows``
        asks for the disagreement of the first rows only (NaN for the rest may be returned; ``None``: all)."""


@dataclass
class RolloutResult:
    """What one batch of imagined rollouts produced.

    Attributes:
        transitions: Every stored imagined transition (terminated / truncated kept apart).
        horizon: The requested rollout length.
        disagreement_by_step: Mean ensemble disagreement over the samples alive at each step (length <= horizon).
        alive_by_step: Number of samples alive at the start of each step.
        first_step_disagreement: Per-sample disagreement at the first step: of all ``N`` samples where the rollout
            cuts on disagreement, else of the first :data:`DISAGREEMENT_SAMPLE` (or all, if fewer).
        num_nonfinite: Samples dropped because the model predicted NaN/inf.
        num_uncertainty_cut: Samples stopped because their disagreement passed the threshold.
        num_terminated: Samples that reached a terminal state.
        seconds: Wall-clock time of the rollout.
        sample_id: ``[len(transitions)]``, which start state each stored transition's rollout began from.
        step: ``[len(transitions)]``, the rollout step ``t`` (0-based) of each stored transition.
    """

    transitions: Transitions
    horizon: int
    disagreement_by_step: list[float] = field(default_factory=list)
    alive_by_step: list[int] = field(default_factory=list)
    first_step_disagreement: np.ndarray = field(default_factory=lambda: np.zeros(0))
    num_nonfinite: int = 0
    num_uncertainty_cut: int = 0
    num_terminated: int = 0
    seconds: float = 0.0
    sample_id: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    step: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def multi_step(self, gamma: float) -> Transitions:
        """Every stored transition turned into a multi-step one that runs to the end of its rollout.

        Model-based value expansion (Feinberg et al. 2018, eq. 3) in Dyna form: the transition taken at step ``t`` of
        a rollout that stored ``T`` transitions gets ``reward = sum_{j=t}^{T-1} gamma^(j-t) r_j``, ``next_obs`` the
        rollout's last state, its ``terminated`` flag and ``steps = T - t``, so a value update on it bootstraps with
        ``gamma ** (T - t)`` from where the rollout stopped. The rewards come from the model under the current policy,
        so the target is on-policy: no off-policy correction is needed, and the rollout length decides how far each
        backup reaches (and how much model error it carries). One-step rollouts give back the transitions as they are.

        Args:
            gamma: Discount factor.

        Returns:
            ``len(transitions)`` multi-step transitions in the same order.
        """
        tr = self.transitions
        n = len(tr)
        reward = tr.reward.astype(np.float64).copy()
        next_obs = tr.next_obs.copy()
        terminated = tr.terminated.copy()
        steps = np.ones(n, np.int64)
        if n:
            # Walk the steps backward; each sample's later transition (if stored) is the one to extend from.
            later = np.full(int(self.sample_id.max()) + 1, -1, np.int64)
            for t in range(int(self.step.max()), -1, -1):
                rows = np.flatnonzero(self.step == t)
                nxt = later[self.sample_id[rows]]
                has = nxt >= 0
                cont, src = rows[has], nxt[has]
                reward[cont] += gamma * reward[src]
                next_obs[cont] = next_obs[src]
                terminated[cont] = terminated[src]
                steps[cont] += steps[src]
                later[self.sample_id[rows]] = rows
        return Transitions(
            obs=tr.obs,
            action=tr.action,
            reward=reward.astype(np.float32),
            next_obs=next_obs,
            terminated=terminated,
            truncated=~terminated,
            steps=steps,
        )


@dataclass(frozen=True)
class ModelEpisodes:
    """Model episodes of :meth:`ModelEnv.episodes`.

    Attributes:
        returns: ``[N]`` model returns.
        lengths: ``[N]`` model episode lengths.
        disagreement_by_step: Per step, the ensemble disagreement of the episodes still running at it.
    """

    returns: np.ndarray
    lengths: np.ndarray
    disagreement_by_step: list[np.ndarray]

    @property
    def disagreement(self) -> float:
        """Mean ensemble disagreement over every live step (NaN without steps)."""
        values = np.concatenate(self.disagreement_by_step) if self.disagreement_by_step else np.zeros(0)
        return float(values.mean()) if values.size else float("nan")

    def disagreement_within(self, steps: int) -> float:
        """Mean ensemble disagreement over the first ``max(steps, 1)`` steps of the episodes: how uncertain the model
        is over the horizon a rollout of that length would use (the disagreement at the current K)."""
        head = self.disagreement_by_step[: max(int(steps), 1)]
        values = np.concatenate(head) if head else np.zeros(0)
        return float(values.mean()) if values.size else float("nan")


class RolloutProgress:
    """One :meth:`ModelEnv.rollout` in progress: the samples alive, what they stored, the statistics.

    Each step, the caller asks the policy for :attr:`obs`'s actions, has the model predict the step (the
    disagreement of the first :attr:`disagreement_rows` rows at least, ``None``: all) and hands both to
    :meth:`advance`; :meth:`finish` returns the :class:`RolloutResult`.
    """

    def __init__(
        self,
        env: ModelEnv,
        start_obs: np.ndarray,
        horizon: int,
        disagreement_threshold: float | None,
        keep_fn: Callable[[int, np.ndarray], np.ndarray] | None,
    ) -> None:
        self.env, self.horizon = env, int(horizon)
        self.threshold, self.keep_fn = disagreement_threshold, keep_fn
        #: ``[n_alive, obs_dim]`` float32, the samples still rolling out.
        self.obs = np.asarray(start_obs, dtype=np.float32)
        self._parts: list[Transitions] = []
        self._ids: list[np.ndarray] = []
        self._alive_ids = np.arange(self.obs.shape[0])
        self.result = RolloutResult(
            transitions=Transitions.empty(env.obs_dim, env.action_shape, env.action_dtype), horizon=self.horizon
        )
        cuts = disagreement_threshold is not None or keep_fn is not None
        #: Rows whose disagreement the model must compute (``None``: every row; all of them where a rollout cuts on it).
        self.disagreement_rows = None if cuts else env.disagreement_sample

    def advance(self, t: int, action: np.ndarray, step: Any) -> None:
        """Take the model's prediction ``step`` for :attr:`obs` under ``action`` as rollout step ``t``."""
        env, result, obs, rows = self.env, self.result, self.obs, self.disagreement_rows
        next_obs = np.asarray(step.next_obs, dtype=np.float32)
        reward = np.asarray(step.reward, dtype=np.float32).reshape(-1)
        disagreement = np.asarray(step.disagreement, dtype=np.float64).reshape(-1)
        result.alive_by_step.append(int(obs.shape[0]))
        finite = np.isfinite(next_obs).all(axis=1) & np.isfinite(reward)
        result.num_nonfinite += int((~finite).sum())
        finite_disagreement = disagreement[finite & np.isfinite(disagreement)]
        result.disagreement_by_step.append(float(finite_disagreement.mean()) if finite_disagreement.size else 0.0)
        if t == 0:
            result.first_step_disagreement = disagreement[: disagreement.shape[0] if rows is None else rows].copy()
        keep = finite.copy()
        if self.threshold is not None or self.keep_fn is not None:
            if self.keep_fn is not None:
                allowed = np.asarray(self.keep_fn(t, disagreement), dtype=bool).reshape(-1)
            else:
                allowed = disagreement <= float(self.threshold)  # type: ignore[arg-type]
            cut = keep & ~allowed
            result.num_uncertainty_cut += int(cut.sum())
            keep &= ~cut
        terminated = np.zeros(obs.shape[0], dtype=bool)
        if keep.any():
            prob = None if step.terminated_prob is None else np.asarray(step.terminated_prob)[keep]
            terminated[keep] = env._terminated(obs[keep], action[keep], next_obs[keep], prob)
        last = t == self.horizon - 1
        self._parts.append(
            Transitions(
                obs=obs[keep],
                action=action[keep].astype(env.action_dtype).reshape(-1, *env.action_shape),
                reward=reward[keep],
                next_obs=next_obs[keep],
                terminated=terminated[keep],
                # The horizon is our choice, not the MDP's: a cut there must bootstrap, so it is `truncated`.
                truncated=np.full(int(keep.sum()), last) & ~terminated[keep],
            )
        )
        self._ids.append(self._alive_ids[keep])
        result.num_terminated += int(terminated[keep].sum())
        alive = keep & ~terminated
        self.obs = next_obs[alive]
        self._alive_ids = self._alive_ids[alive]

    def finish(self, seconds: float) -> RolloutResult:
        """The result, with ``seconds`` of wall-clock time."""
        result = self.result
        if self._parts:
            result.transitions = Transitions.concatenate(self._parts)
            result.sample_id = np.concatenate(self._ids)
            result.step = np.concatenate([np.full(len(i), t, np.int64) for t, i in enumerate(self._ids)])
        result.seconds = seconds
        return result


class ModelEnv:
    """A learned model as a batched environment for imagined rollouts.

    Args:
        model: The dynamics model (anything with a contract-compatible ``predict``).
        termination_fn: Known termination function ``fn(obs, action, next_obs) -> bool[N]``; ``None`` uses the
            model's learned ``terminated_prob`` (> 0.5) if it has one, otherwise nothing terminates.
        obs_dim: Observation size.
        action_shape: Shape of one action (``()`` for discrete indices).
        action_dtype: Numpy dtype of stored actions.
        disagreement_sample: Live samples per step whose disagreement a rollout computes when nothing cuts on it
            (``None``: every sample).
    """

    def __init__(
        self,
        model: StepPredictor,
        termination_fn: TerminationFn | None,
        obs_dim: int,
        action_shape: tuple[int, ...],
        action_dtype: Any = np.float32,
        disagreement_sample: int | None = DISAGREEMENT_SAMPLE,
    ) -> None:
        self.model = model
        self.disagreement_sample = disagreement_sample
        self.termination_fn = termination_fn
        self.obs_dim = int(obs_dim)
        self.action_shape = tuple(action_shape)
        self.action_dtype = action_dtype

    def _terminated(self, obs: np.ndarray, action: np.ndarray, next_obs: np.ndarray, prob: Any) -> np.ndarray:
        if self.termination_fn is not None:
            return np.asarray(self.termination_fn(obs, action, next_obs), dtype=bool)
        if prob is not None:
            return np.asarray(prob) > 0.5
        return np.zeros(obs.shape[0], dtype=bool)

    def rollout(
        self,
        start_obs: np.ndarray,
        policy: PolicyFn,
        horizon: int,
        rng: np.random.Generator,
        disagreement_threshold: float | None = None,
        keep_fn: Callable[[int, np.ndarray], np.ndarray] | None = None,
        deterministic: bool = False,
    ) -> RolloutResult:
        """Roll out ``horizon`` steps from each start state, stopping samples individually.

        Args:
            start_obs: ``[N, obs_dim]`` start states (normally sampled from the real buffer).
            policy: The current policy, batched.
            horizon: Rollout length ``h >= 0`` (0 returns an empty result).
            rng: Generator for the model's elite choice and sampling noise.
            disagreement_threshold: If given, a sample whose disagreement exceeds it is stopped and that transition
                is not stored (the model is trusted only below the threshold).
            keep_fn: Alternative to a fixed threshold: ``keep_fn(step, disagreement[N_alive]) -> bool[N_alive]``
                says which samples may continue (e.g. ``UncertaintyTruncation.keep``, which calibrates its threshold
                at step 0); rejected samples are stopped and their transition is not stored.

        Returns:
            The stored transitions and per-step statistics.
        """
        started = time.perf_counter()
        progress = self.start_rollout(start_obs, horizon, disagreement_threshold, keep_fn)
        for t in range(int(horizon)):
            if progress.obs.shape[0] == 0:
                break
            action = np.asarray(policy(progress.obs))
            step = self.model.predict(
                progress.obs, action, rng, deterministic=deterministic, disagreement_rows=progress.disagreement_rows
            )
            progress.advance(t, action, step)
        return progress.finish(time.perf_counter() - started)

    def start_rollout(
        self,
        start_obs: np.ndarray,
        horizon: int,
        disagreement_threshold: float | None = None,
        keep_fn: Callable[[int, np.ndarray], np.ndarray] | None = None,
    ) -> RolloutProgress:
        """The bookkeeping of one :meth:`rollout`, for a caller that makes the model steps itself (several runs'
        rollouts stepped together by :class:`mbrl.run_batched_env.RunBatchedModelEnv`)."""
        return RolloutProgress(self, start_obs, horizon, disagreement_threshold, keep_fn)

    def lookahead_values(
        self,
        obs: np.ndarray,
        num_actions: int,
        q_fn: Callable[[np.ndarray], np.ndarray],
        horizon: int,
        gamma: float,
        rng: np.random.Generator,
        expectation: bool = False,
        disagreement_out: np.ndarray | None = None,
    ) -> np.ndarray:
        """Rollout values of every action at ``obs``: each action, then the greedy policy of ``q_fn``, for ``horizon``
        model steps, closed by the discounted ``max_a q_fn`` at the last state (Bertsekas 2019, "rollout with terminal
        cost approximation": one policy-improvement step over the Q-function's greedy policy, in the model).

        Args:
            obs: ``[N, obs_dim]`` states to decide at.
            num_actions: Number of discrete actions.
            q_fn: Q-values ``[M, num_actions]`` for observations ``[M, obs_dim]``.
            horizon: Model steps per rollout (>= 1).
            gamma: Discount.
            rng: Generator for the model's elite choice (steps use the elite mean).
            expectation: Step with the elites' average prediction (``predict_expected``, PETS's expectation
                propagation) instead of one random elite's mean; a model without ``predict_expected`` (the true
                simulator) steps as usual.
            disagreement_out: If given, an ``[N, num_actions]`` array filled with the mean ensemble disagreement along
                each action's rollout (how far the model can be trusted there; NaN for a model that reports none).

        Returns:
            ``[N, num_actions]`` values; a rollout that terminates stops collecting rewards and bootstraps nothing.
        """
        if horizon < 1:
            raise ValueError(f"lookahead horizon must be >= 1, got {horizon}")
        n = obs.shape[0]
        state = np.repeat(np.asarray(obs, np.float64), num_actions, axis=0)
        action = np.tile(np.arange(num_actions), n)
        value, alive, discount = np.zeros(n * num_actions), np.ones(n * num_actions, bool), 1.0
        expected = getattr(self.model, "predict_expected", None) if expectation else None
        spread, live_steps = np.zeros(n * num_actions), np.zeros(n * num_actions)
        for _ in range(int(horizon)):
            if expected is not None:
                step = expected(state, action)
            else:
                rows = None if disagreement_out is not None else 0
                step = self.model.predict(state, action, rng, deterministic=True, disagreement_rows=rows)
            if disagreement_out is not None:
                spread += np.where(alive, np.asarray(step.disagreement, np.float64), 0.0)
                live_steps += alive
            next_obs = np.asarray(step.next_obs, np.float64)
            finite = np.asarray(np.isfinite(next_obs).all(axis=1), dtype=bool)
            next_obs = np.where(finite[:, None], next_obs, state)
            done = self._terminated(state, action, next_obs, step.terminated_prob) | ~finite
            value += discount * np.where(alive, np.nan_to_num(np.asarray(step.reward, np.float64)), 0.0)
            alive &= ~done
            discount *= gamma
            state = next_obs
            q = np.asarray(q_fn(state.astype(np.float32)), np.float64)
            action = q.argmax(axis=1)
        value += discount * np.where(alive, q.max(axis=1), 0.0)
        if disagreement_out is not None:
            disagreement_out[...] = (spread / np.maximum(live_steps, 1)).reshape(n, num_actions)
        return value.reshape(n, num_actions)

    def episodes(
        self, start_obs: np.ndarray, policy: PolicyFn, max_steps: int, rng: np.random.Generator
    ) -> ModelEpisodes:
        """Whole model episodes (elite means, no sampling noise) from ``start_obs [N, obs_dim]`` under ``policy``.

        Used for the model-error feedback of Bhatia, Thomas & Zilberstein (2022, section 4): the same policy's
        return and length in the model minus those in the real environment from the same start states.
        """
        n = start_obs.shape[0]
        obs = np.asarray(start_obs, dtype=np.float64)
        alive = np.ones(n, bool)
        returns, lengths = np.zeros(n), np.zeros(n, np.int64)
        disagreement: list[np.ndarray] = []
        for _ in range(int(max_steps)):
            actions = np.asarray(policy(obs.astype(np.float32)))
            step = self.model.predict(obs, actions, rng, deterministic=True)
            finite = np.asarray(step.finite, bool) if len(step.finite) else np.ones(n, bool)
            nxt = np.where(finite[:, None], np.asarray(step.next_obs, np.float64), obs)
            done = self._terminated(obs, actions, nxt, step.terminated_prob) | ~finite
            disagreement.append(np.asarray(step.disagreement, np.float64)[alive])
            returns += np.where(alive, np.nan_to_num(np.asarray(step.reward, np.float64)), 0.0)
            lengths += alive
            alive &= ~done
            obs = nxt
            if not alive.any():
                break
        return ModelEpisodes(returns, lengths, disagreement)
