"""Dyna-DQN (Bhatia, Thomas & Zilberstein 2022, Algorithm 1), many independent runs advanced together in one process.

One run: a DQN agent acts in the real environment and learns from its replay buffer ``D``, as SB3's DQN does with
rl-zoo's hyperparameters (epsilon-greedy with a linear schedule, ``train_freq`` / ``gradient_steps``, Huber loss, hard
target updates, gradient-norm clip 10). Its world model is refit on ``D`` every ``model_train_freq`` env steps; every
``rollout_freq`` env steps, ``M`` imagined rollouts of ``K`` steps start from states of ``D`` under the current
epsilon-greedy policy and go into a rolling model buffer ``D'`` that keeps the last ``model_retain_rounds`` rounds.
While ``K > 0`` every DQN minibatch mixes ``real_ratio`` real transitions with imagined ones (MBPO's scheme, Janner et
al. 2019, Algorithm 2), and each training round makes ``model_gradient_steps`` extra updates on such mixed batches.
``K = 0`` is plain DQN: no imagined data and no extra updates (unless the run is *compute-matched*: the same extra
updates on real data only). The target network is synced on a gradient-step clock, so a run that makes more updates
does not learn against a staler target.

``K`` is set per *phase* (``P`` env steps) by :class:`mbrl.phases.RolloutLengthDriver`, the one owner of the rollout
length; at the end of each phase every run is evaluated greedily at the same point of its cycle and reports the
feedback of :data:`mbrl.phases.FEEDBACK_KEYS`.

:class:`BatchedDynaDQN` keeps ``B`` such runs in lockstep: the Q-networks, target networks and Adam states of all runs
are tensors with a leading run axis (:mod:`mbrl.algorithms.batched_q`) and the real replay buffers are one
:class:`~mbrl.buffers.RunBatchedBuffer`, so acting and learning cost one batched forward/backward for all runs. Each run
keeps its own environment, world model, :class:`~mbrl.buffers.ModelBuffer`, :class:`~mbrl.model_env.ModelEnv` and
random generator. Run ``i``'s parameters are bit-identical whatever the other runs of its batch decide: its
minibatches, its random draws and its optimizer arithmetic depend only on run ``i`` (updates of other runs are masked,
never mixed in).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from mbrl.algorithms.base import episode_step_limit
from mbrl.algorithms.batched_q import BatchedAdam, BatchedQNetwork, clip_grad_norm_per_run
from mbrl.algorithms.dyna import feedback as measure
from mbrl.algorithms.dyna.config import DynaConfig
from mbrl.buffers import ModelBuffer, RunBatchedBuffer, Transitions
from mbrl.model_env import ModelEnv, RolloutResult
from mbrl.model_error import RMSE_HORIZONS, rmse_feedback
from mbrl.models import DynamicsModel, ModelConfig
from mbrl.models.run_batched import can_fit_run_batched, fit_run_batched
from mbrl.phases import RolloutTruncator
from mbrl.run_batched_env import RunBatchedModelEnv
from mbrl.termination import TerminationFn, termination_fn
from rolloutlab.device import resolve_device
from rolloutlab.run_state import EpisodeReplay, generator_state, set_generator_state
from rolloutlab.seeding import run_seed

__all__ = ["BatchedDynaDQN", "EnvFn"]

EnvFn = Callable[[], gym.Env]


class BatchedDynaDQN:
    """``B`` independent Dyna-DQN runs in lockstep with Q-networks batched over runs.

    Args:
        env_fns: One environment factory per run (runs may use differently perturbed physics). Discrete actions and a
            flat Box observation are required.
        cfg: Settings shared by all runs.
        seed: Base seed; run ``i`` uses ``run_seeds[i]`` (default :func:`rolloutlab.seeding.run_seed`,
            ``seed * 10_000 + i``) for its networks, env, world model and generator.
        run_seeds: Explicit per-run seeds (e.g. to reproduce run 3 of a batch on its own, or to pair arms).
        termination: Known termination function for the imagined rollouts; default: looked up from the env id
            (:func:`mbrl.termination.termination_fn`), else the model's learned termination head.
        compute_matched: Per run, whether it makes the extra updates on real data while ``K = 0`` (the baseline that
            gets a model-using arm's gradient steps without its model).
        models: Per run, a ready world model to use instead of a learned one (``None`` entries: learned), e.g. the
            true simulator of :mod:`mbrl.models.true_dynamics` for a ceiling arm.
        eval_env_fns: Per run, the factory of the envs its evaluations run on (default: ``env_fns``, a fresh env per
            evaluation); a run trained on an env object it was handed evaluates on envs of its own.

    Attributes:
        steps_done: Real env steps taken by every run.
        episodes: Finished training episodes per run, ``[B]``.
        budget: ``cfg.budget``.
        phase: Number of completed phases.
        ks: The rollout length in force per run.
    """

    def __init__(
        self,
        env_fns: Sequence[EnvFn],
        cfg: DynaConfig,
        seed: int,
        run_seeds: Sequence[int] | None = None,
        termination: TerminationFn | None = None,
        compute_matched: Sequence[bool] | None = None,
        models: Sequence[Any | None] | None = None,
        eval_env_fns: Sequence[EnvFn] | None = None,
    ) -> None:
        if not env_fns:
            raise ValueError("need at least one env factory")
        self.cfg = cfg
        self.num_runs = b = len(env_fns)
        default_seeds = [run_seed(seed, i) for i in range(b)]
        self.run_seeds = [int(s) for s in run_seeds] if run_seeds is not None else default_seeds
        self.compute_matched = [bool(c) for c in compute_matched] if compute_matched is not None else [False] * b
        overrides = list(models) if models is not None else [None] * b
        for name, values in (("run seeds", self.run_seeds), ("compute_matched", self.compute_matched)):
            if len(values) != b:
                raise ValueError(f"need {b} {name}, got {len(values)}")
        if len(overrides) != b:
            raise ValueError(f"need {b} models (None for a learned one), got {len(overrides)}")
        self.env_fns = list(env_fns)
        self.eval_env_fns = list(eval_env_fns) if eval_env_fns is not None else self.env_fns
        if len(self.eval_env_fns) != b:
            raise ValueError(f"need {b} eval env factories, got {len(self.eval_env_fns)}")
        self.envs = [fn() for fn in self.env_fns]
        space = self.envs[0].action_space
        if not isinstance(space, gym.spaces.Discrete):
            raise TypeError(f"Dyna-DQN needs a Discrete action space, got {space}")
        obs_space = self.envs[0].observation_space
        if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 1:
            raise TypeError(f"Dyna-DQN needs a flat Box observation space, got {obs_space}")
        self.num_actions = int(space.n)
        self.obs_dim = int(obs_space.shape[0])
        spec = self.envs[0].spec
        self.env_id = spec.id if spec is not None else type(self.envs[0].unwrapped).__name__
        # Model episodes stop where the real ones do (model_return_error compares the two).
        self.max_episode_steps = episode_step_limit(self.envs[0])
        learned = termination is None and termination_fn(self.env_id) is None
        self.termination = termination if termination is not None else termination_fn(self.env_id)
        model_cfg = ModelConfig(
            **{**asdict(cfg.model), "learned_termination": learned or cfg.model.learned_termination}
        )
        self.device = resolve_device(cfg.device)
        self.models: list[Any] = [
            override
            if override is not None
            else DynamicsModel(self.obs_dim, self.num_actions, True, model_cfg, seed=s, device=self.device)
            for override, s in zip(overrides, self.run_seeds, strict=True)
        ]
        #: Per run, whether its world model is learned here (not handed in), i.e. one that a batched fit may take.
        self._learned = [override is None for override in overrides]
        self.model_envs = [ModelEnv(m, self.termination, self.obs_dim, (), np.int64) for m in self.models]
        learned_models = [m for m, own in zip(self.models, self._learned, strict=True) if own]
        #: With ``cfg.batched_models``, the learned models as one environment for the runs' lookahead.
        self._batched_env = (
            RunBatchedModelEnv(self.models, self.termination)
            if cfg.batched_models and learned_models and can_fit_run_batched(learned_models)
            else None
        )
        self.rngs = [np.random.default_rng(s) for s in self.run_seeds]
        # Initialized on the CPU from each run's generator, then moved: the same initial weights on every device.
        self.q = BatchedQNetwork(b, self.obs_dim, self.num_actions, cfg.net_arch, self.run_seeds).to(self.device)
        self.q_target = BatchedQNetwork(b, self.obs_dim, self.num_actions, cfg.net_arch, self.run_seeds).to(self.device)
        self.q_target.load_state_dict(self.q.state_dict())
        self.q_target.requires_grad_(False)
        self.optimizer = BatchedAdam(list(self.q.parameters()), lr=cfg.learning_rate)
        self.real = RunBatchedBuffer(b, cfg.buffer_size, self.obs_dim, self.num_actions, discrete_actions=True)
        self.model_buffers = [
            ModelBuffer(cfg.model_retain_rounds, self.obs_dim, self.num_actions, discrete_actions=True)
            for _ in range(b)
        ]
        self.steps_done, self.phase, self.rollout_round = 0, 0, 0
        self.budget = int(cfg.budget)
        self.ks = [0] * b
        # Each run's episode in progress, recorded so that a snapshot can put its env back (by replay).
        self._episodes = [EpisodeReplay() for _ in range(b)]
        self.obs = np.stack(
            [rec.reset(env, seed=s)[0] for rec, env, s in zip(self._episodes, self.envs, self.run_seeds, strict=True)]
        )
        for env, s in zip(self.envs, self.run_seeds, strict=True):
            env.action_space.seed(s)
        self.episode_return = np.zeros(b)
        self.episodes = np.zeros(b, np.int64)  # finished training episodes per run
        self.model_fitted = [
            bool(getattr(m, "fitted", False)) and override is not None
            for m, override in zip(self.models, overrides, strict=True)
        ]
        self.updates = np.zeros(b, np.int64)  # gradient steps per run: the target network's clock
        self.model_updates = np.zeros(b, np.int64)  # of which on batches holding imagined data
        self._truncators: list[RolloutTruncator | None] = [None] * b
        self._phase_stats: list[dict[str, float]] = [{} for _ in range(b)]
        self._last_model_metrics: list[dict[str, float]] = [{} for _ in range(b)]
        #: Mean ensemble disagreement at each step of the last round of imagined rollouts, per run (for logging).
        self.last_disagreement_by_step: list[list[float]] = [[] for _ in range(b)]
        #: Per run, the disagreement ``lookahead_trust`` compares against (the latest ``disagreement_mean``).
        self.trust_reference = np.full(b, np.nan)
        #: Per run, the mean return of the latest end-of-phase greedy evaluation, ``[B]`` (NaN before the first).
        self.last_evaluation = np.full(b, np.nan)
        #: Per run, decisions where lookahead was overruled for lack of trust (``lookahead_trust``).
        self.untrusted_decisions = np.zeros(b, np.int64)
        #: Per run, ``train_return`` of the latest phase, ``[B]`` (what ``train_return_trend`` compares with).
        self.last_train_return = np.full(b, np.nan)

    # --- DQN pieces -------------------------------------------------------------------------------------------

    def exploration_rate(self) -> float:
        """SB3's linear epsilon schedule at the current step."""
        cfg = self.cfg
        progress = self.steps_done / max(cfg.exploration_fraction * self.budget, 1e-12)
        return cfg.exploration_initial_eps + min(progress, 1.0) * (
            cfg.exploration_final_eps - cfg.exploration_initial_eps
        )

    @torch.no_grad()
    def _greedy(
        self,
        obs: np.ndarray,
        active: np.ndarray | None = None,
        rngs: Sequence[np.random.Generator] | None = None,
    ) -> np.ndarray:
        """Greedy actions ``[B]`` for one observation per run, ``obs [B, obs_dim]``; runs that look ahead in their
        model (``model_use="lookahead"``, ``K > 0``, model fitted) take the action of the best rollout value.

        Args:
            obs: One observation per run.
            active: Runs whose action is needed (``None``: all). Lookahead draws from its generator, so a run that is
                not acting must not look ahead, or its draws would depend on how long the other runs play.
            rngs: The generators of the lookahead's elite choices (``None``: the training generators). Evaluations
                pass their own, so that evaluating never moves a training stream.
        """
        q = self.q(self._tensor(obs, torch.float32).unsqueeze(1))
        actions = q.argmax(dim=-1).squeeze(1).cpu().numpy()
        generators = self.rngs if rngs is None else rngs
        runs = [i for i in self._lookahead_runs() if active is None or active[i]]
        if not runs:
            return actions
        trust = self.cfg.lookahead_trust
        spread = np.full((self.num_runs, 1, self.num_actions), np.nan)
        values = np.zeros((self.num_runs, 1, self.num_actions))
        # With batched models a learned model's run always looks ahead through the batched path (a batch of one
        # included), so that its arithmetic does not depend on how many other runs look ahead at the same step.
        together = [i for i in runs if self._learned[i]] if self._batched_env is not None else []
        if together:
            assert self._batched_env is not None
            out = np.full((len(together), 1, self.num_actions), np.nan)
            values[together] = self._batched_env.lookahead_values(
                together,
                obs[together][:, None],
                self._run_q_values,
                [min(self.ks[i], self.cfg.k_cap) for i in together],
                self.cfg.gamma,
                [generators[i] for i in together],
                expectation=self.cfg.lookahead_expectation,
                disagreement_out=out if trust > 0 else None,
            )
            spread[together] = out
        for i in runs:
            if i in together:
                continue
            values[i] = self.model_envs[i].lookahead_values(
                obs[i : i + 1],
                self.num_actions,
                self._q_values(i),
                min(self.ks[i], self.cfg.k_cap),
                self.cfg.gamma,
                generators[i],
                expectation=self.cfg.lookahead_expectation,
                disagreement_out=spread[i] if trust > 0 else None,
            )
        for i in runs:
            choice = int(values[i, 0].argmax())
            reference = self.trust_reference[i]
            if trust > 0 and np.isfinite(reference) and spread[i, 0, choice] > trust * reference:
                self.untrusted_decisions[i] += 1
                continue  # the model is unsure along this rollout: keep the Q-function's own choice
            actions[i] = choice
        return actions

    def _run_q_values(self, runs: Sequence[int], obs: np.ndarray) -> np.ndarray:
        """Q-values ``[R, M, num_actions]`` of the listed runs on their own rows ``obs [R, M, obs_dim]``, in one
        batched forward pass (the other runs see zeros; a run's values do not depend on theirs)."""
        full = np.zeros((self.num_runs, *obs.shape[1:]), np.float32)
        full[list(runs)] = obs
        with torch.no_grad():
            return self.q(self._tensor(full)).cpu().numpy()[list(runs)]

    def _q_values(self, run: int) -> Callable[[np.ndarray], np.ndarray]:
        @torch.no_grad()
        def q_fn(obs: np.ndarray) -> np.ndarray:
            return self.q.forward_run(run, self._tensor(obs, torch.float32)).cpu().numpy()

        return q_fn

    def _tensor(self, array: np.ndarray, dtype: torch.dtype | None = None) -> torch.Tensor:
        """A numpy array as a tensor on the Q-networks' device."""
        return torch.as_tensor(array, dtype=dtype, device=self.device)

    def _lookahead_runs(self) -> list[int]:
        if self.cfg.model_use != "lookahead":
            return []
        return [i for i in range(self.num_runs) if self.ks[i] > 0 and self.model_fitted[i]]

    def _act(self) -> np.ndarray:
        eps = self.exploration_rate()
        random_phase = self.steps_done < self.cfg.learning_starts
        greedy = None if random_phase else self._greedy(self.obs)
        actions = np.empty(self.num_runs, np.int64)
        for i, rng in enumerate(self.rngs):
            if random_phase or rng.random() < eps:
                actions[i] = rng.integers(self.num_actions)
            else:
                assert greedy is not None
                actions[i] = greedy[i]
        return actions

    def _dqn_update(self, batch: Transitions, mask: np.ndarray | None = None) -> None:
        """One DQN update of every run selected by ``mask`` (``[B]`` bool, ``None``: all) on its own minibatch
        (``batch`` arrays ``[B, n, ...]``); other runs are left exactly as they were."""
        obs_t = self._tensor(batch.obs)
        with torch.no_grad():
            next_q = self.q_target(self._tensor(batch.next_obs)).max(dim=-1).values
            not_done = 1.0 - self._tensor(batch.terminated, torch.float32)
            # gamma ** n for an n-step imagined transition (model value expansion); exactly gamma for one step.
            discount = self._tensor(np.power(self.cfg.gamma, batch.steps), torch.float32)
            target = self._tensor(batch.reward) + not_done * discount * next_q
        q = self.q(obs_t).gather(-1, self._tensor(batch.action).unsqueeze(-1)).squeeze(-1)
        per_run = F.smooth_l1_loss(q, target, reduction="none").mean(dim=1)
        mask_t = None if mask is None else torch.as_tensor(mask, dtype=torch.bool)
        # Each run's loss touches only its own parameters, so summing keeps the gradients independent.
        loss = (
            per_run.sum()
            if mask_t is None
            else torch.where(mask_t.to(self.device), per_run, torch.zeros_like(per_run)).sum()
        )
        self.optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        clip_grad_norm_per_run(self.optimizer.params, self.cfg.max_grad_norm)
        self.optimizer.step(mask_t)
        active = np.ones(self.num_runs, bool) if mask is None else np.asarray(mask, bool)
        self.updates += active
        # Target sync on the gradient-step clock, per run (SB3 syncs on env steps; with extra model updates a run's
        # target would otherwise go stale in update terms).
        if self.cfg.target_clock != "updates":
            return
        sync = active & (self.updates % self.cfg.target_update_interval == 0)
        if sync.any():
            self.q_target.copy_runs_from(self.q, torch.as_tensor(sync))

    def _uses_model(self, i: int) -> bool:
        return self.ks[i] > 0 and len(self.model_buffers[i]) > 0

    def _makes_extra_updates(self, i: int) -> bool:
        # Lookahead runs with K > 0 make the extra updates on real data, as compute-matched K = 0 does, so the two
        # differ only in how they act.
        if self.cfg.model_use == "lookahead" and self.ks[i] > 0:
            return True
        return self._uses_model(i) or (self.compute_matched[i] and self.ks[i] == 0)

    def _minibatch(self, active: np.ndarray) -> Transitions:
        """One minibatch per run ``[B, batch, ...]``: real data, mixed with imagined data for runs using the model.

        Runs that are not ``active`` get placeholder rows (their loss is masked) and draw nothing from their
        generator, so what run ``i`` draws depends only on run ``i``.
        """
        cfg = self.cfg
        n = cfg.batch_size
        n_real = round(cfg.real_ratio * n)
        idx = np.zeros((self.num_runs, n), np.int64)
        mixed: list[tuple[int, Transitions]] = []
        for i, rng in enumerate(self.rngs):
            if not active[i]:
                continue
            if self._uses_model(i):
                idx[i, :n_real] = rng.integers(0, self.real.size, size=n_real)
                mixed.append((i, self.model_buffers[i].sample(n - n_real, rng)))
            else:
                idx[i] = rng.integers(0, self.real.size, size=n)
        batch = self.real.gather(idx)
        for i, imagined in mixed:
            for name in ("obs", "action", "reward", "next_obs", "terminated", "truncated", "steps"):
                getattr(batch, name)[i, n_real:] = getattr(imagined, name)
        return batch

    def _train_round(self) -> None:
        cfg = self.cfg
        everyone = np.ones(self.num_runs, bool)
        extra = np.array([self._makes_extra_updates(i) for i in range(self.num_runs)])
        uses = np.array([self._uses_model(i) for i in range(self.num_runs)])
        for _ in range(cfg.updates_per_round):
            self._dqn_update(self._minibatch(everyone))
            self.model_updates += uses
        if extra.any():
            for _ in range(cfg.extra_updates_per_round):
                self._dqn_update(self._minibatch(extra), mask=extra)
                self.model_updates += uses

    def _env_step(self) -> None:
        actions = self._act()
        next_obs = np.empty_like(self.obs)
        rewards, terminated, truncated = (
            np.zeros(self.num_runs),
            np.zeros(self.num_runs, bool),
            np.zeros(self.num_runs, bool),
        )
        for i, env in enumerate(self.envs):
            nxt, reward, term, trunc, _ = self._episodes[i].step(env, int(actions[i]))
            next_obs[i], rewards[i], terminated[i], truncated[i] = nxt, reward, term, trunc
        # A time-limit cut still bootstraps: only `terminated` ends the value target.
        self.real.add(self.obs, actions, rewards, next_obs, terminated, truncated)
        self.episode_return += rewards
        for i in np.flatnonzero(terminated | truncated).tolist():
            self._phase_stats[i].setdefault("episodes", 0.0)
            self._phase_stats[i]["episodes"] += 1.0
            self._phase_stats[i]["return_sum"] = self._phase_stats[i].get("return_sum", 0.0) + self.episode_return[i]
            self.episode_return[i] = 0.0
            self.episodes[i] += 1
            next_obs[i] = self._episodes[i].reset(self.envs[i])[0]
        self.obs = next_obs
        self.steps_done += 1

    # --- the model side ---------------------------------------------------------------------------------------

    def _policy(self, run: int, epsilon: float) -> Callable[[np.ndarray], np.ndarray]:
        rng = self.rngs[run]

        @torch.no_grad()
        def act(obs: np.ndarray) -> np.ndarray:
            q = self.q.forward_run(run, self._tensor(obs, torch.float32))
            actions = q.argmax(dim=-1).cpu().numpy()
            if epsilon > 0:
                explore = rng.random(actions.shape[0]) < epsilon
                actions = np.where(explore, rng.integers(0, self.num_actions, size=actions.shape[0]), actions)
            return actions

        return act

    def _needs_model(self, i: int) -> bool:
        return self.ks[i] > 0 or self.cfg.train_model_when_k0

    def _fit_models(self) -> None:
        """Refit the world model of every run that needs one on its real buffer; with ``cfg.batched_models`` the
        learned ones together, as one network with a run axis (equal to the per-run fits to float32 rounding)."""
        runs = [i for i in range(self.num_runs) if self._needs_model(i)]
        together = [i for i in runs if self._learned[i]] if self.cfg.batched_models else []
        if together and can_fit_run_batched([self.models[i] for i in together]):
            datasets = []
            for i in together:
                data = self.real.run(i)
                datasets.append((data.obs, data.action, data.reward, data.next_obs, data.terminated))
            for i, metrics in zip(together, fit_run_batched([self.models[i] for i in together], datasets), strict=True):
                self._last_model_metrics[i] = {k: float(v) for k, v in metrics.items()}
                self.model_fitted[i] = True
            runs = [i for i in runs if i not in together]
        for i in runs:
            data = self.real.run(i)
            metrics = self.models[i].fit(data.obs, data.action, data.reward, data.next_obs, data.terminated)
            self._last_model_metrics[i] = {k: float(v) for k, v in metrics.items()}
            self.model_fitted[i] = True

    def _rollout_starts(self, run: int) -> np.ndarray:
        """``M`` start states of run ``run``'s imagined rollouts, drawn from its real buffer with its generator."""
        size = self.real.size
        starts = self.rngs[run].choice(
            size, size=self.cfg.num_model_rollouts, replace=size < self.cfg.num_model_rollouts
        )
        return self.real.obs[run, starts]

    def _rollout_round(self) -> None:
        """``M`` imagined rollouts of ``K`` steps per model-using run into its rolling model buffer."""
        cfg = self.cfg
        eps = self.exploration_rate()
        runs = [i for i in range(self.num_runs) if self.ks[i] > 0 and self.model_fitted[i]]
        if cfg.model_use == "lookahead":
            runs = []
        results: dict[int, RolloutResult] = {}
        # With batched models the learned models' runs step together; each run's draws stay in its own stream.
        together = [i for i in runs if self._learned[i]] if self._batched_env is not None else []
        if together:
            assert self._batched_env is not None
            progress = []
            for i in together:
                truncator = self._truncators[i]
                progress.append(
                    self.model_envs[i].start_rollout(
                        self._rollout_starts(i),
                        min(self.ks[i], cfg.k_cap),
                        keep_fn=None if truncator is None else truncator.keep,
                    )
                )
            done = self._batched_env.rollouts(
                together,
                progress,
                [self._policy(i, eps) for i in together],
                [self.rngs[i] for i in together],
                deterministic=cfg.deterministic_rollouts,
            )
            results.update(zip(together, done, strict=True))
        for i in runs:
            if i in results:
                continue
            truncator = self._truncators[i]
            results[i] = self.model_envs[i].rollout(
                self._rollout_starts(i),
                self._policy(i, eps),
                min(self.ks[i], cfg.k_cap),
                self.rngs[i],
                keep_fn=None if truncator is None else truncator.keep,
                deterministic=cfg.deterministic_rollouts,
            )
        for i in runs:
            result = results[i]
            if result.num_nonfinite:
                self.models[i].restore_last_good()
            imagined = result.multi_step(cfg.gamma) if cfg.multi_step_targets else result.transitions
            self.model_buffers[i].add_batch(imagined, self.rollout_round)
            self.last_disagreement_by_step[i] = list(result.disagreement_by_step)
            stats = self._phase_stats[i]
            stats["model_transitions"] = stats.get("model_transitions", 0.0) + len(result.transitions)
            stats["rollout_seconds"] = stats.get("rollout_seconds", 0.0) + result.seconds
            stats["rollout_nonfinite"] = stats.get("rollout_nonfinite", 0.0) + result.num_nonfinite
            stats["rollout_uncertainty_cut"] = stats.get("rollout_uncertainty_cut", 0.0) + result.num_uncertainty_cut
            if result.disagreement_by_step:
                stats["rollout_disagreement_mean"] = float(np.mean(result.disagreement_by_step))
            # Per-step sums weighted by the samples alive there, for the phase's rollout_disagreement_h{h}.
            for t, (mean, alive) in enumerate(zip(result.disagreement_by_step, result.alive_by_step, strict=True)):
                stats[f"disagreement_sum_{t}"] = stats.get(f"disagreement_sum_{t}", 0.0) + mean * alive
                stats[f"disagreement_count_{t}"] = stats.get(f"disagreement_count_{t}", 0.0) + alive
        self.rollout_round += 1

    # --- evaluation -------------------------------------------------------------------------------------------

    @torch.no_grad()
    def _greedy_episodes(
        self, episodes: int, env_fns: Sequence[EnvFn] | None, seed_offset: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``episodes`` greedy episodes per run, runs in lockstep: returns, lengths ``[B, episodes]``, starts."""
        fns = self.eval_env_fns if env_fns is None else list(env_fns)
        if len(fns) != self.num_runs:
            raise ValueError(f"need {self.num_runs} env factories, got {len(fns)}")
        envs = [fn() for fn in fns]
        b = self.num_runs
        returns, lengths = np.zeros((b, episodes)), np.zeros((b, episodes), np.int64)
        starts = np.zeros((b, episodes, self.obs_dim))
        obs = np.zeros((b, self.obs_dim), np.float32)
        for i, env in enumerate(envs):
            obs[i] = env.reset(seed=self.run_seeds[i] * 1_000 + seed_offset)[0]
            starts[i, 0] = obs[i]
        episode: np.ndarray = np.zeros(b, np.int64)
        # Lookahead's elite choices in evaluations come from generators of their own (run seed, offset), so that an
        # evaluation neither moves the training streams nor depends on the other runs of the batch.
        eval_rngs = [np.random.default_rng([self.run_seeds[i], 15_485_863, seed_offset]) for i in range(b)]
        while (episode < episodes).any():
            active = episode < episodes
            actions = self._greedy(obs, active, eval_rngs)
            for i in np.flatnonzero(active).tolist():
                next_obs, reward, terminated, truncated, _ = envs[i].step(int(actions[i]))
                returns[i, episode[i]] += float(reward)
                lengths[i, episode[i]] += 1
                if terminated or truncated:
                    episode[i] += 1
                    if episode[i] < episodes:
                        next_obs, _ = envs[i].reset()
                        starts[i, episode[i]] = next_obs
                obs[i] = next_obs
        for env in envs:
            env.close()
        return returns, lengths, starts

    def evaluate(self, episodes: int, env_fns: Sequence[EnvFn] | None = None) -> np.ndarray:
        """Mean greedy return per run over ``episodes`` real episodes, ``[B]``.

        Args:
            episodes: Episodes per run.
            env_fns: Optional other environments (one per run), e.g. perturbed test envs; default: the evaluation
                envs' factories (``eval_env_fns``).
        """
        returns, _, _ = self._greedy_episodes(episodes, env_fns, seed_offset=500 + self.phase)
        return returns.mean(axis=1)

    # --- the phase loop ---------------------------------------------------------------------------------------

    def run_phase(
        self, ks: Sequence[int], truncators: Sequence[RolloutTruncator | None] | None = None
    ) -> list[dict[str, float]]:
        """Advance every run by one phase of ``P`` real env steps with rollout length ``ks[i]``.

        Callers go through :class:`mbrl.phases.RolloutLengthDriver`, which owns the rollout length.

        Args:
            ks: Rollout length per run for this phase (capped at ``cfg.k_cap``; 0 = no model use).
            truncators: Optional per-run per-step truncation (MACURA-style uncertainty controller); rollouts then run
                up to ``ks[i]`` steps and stop where :meth:`RolloutTruncator.keep` says so. Refused with
                ``model_use="lookahead"``, which makes no imagined rollouts to cut.

        Returns:
            One feedback dict per run, evaluated at the end of the phase: the keys of
            :data:`mbrl.phases.FEEDBACK_KEYS` plus ``train_return`` (mean return of training episodes finished in the
            phase, NaN if none), the open-loop model errors on the run's latest real segments
            (``model_rmse_h{h}``, ``model_rmse_at_k``; :data:`mbrl.phases.TRAINING_DATA_KEYS`), ``model_holdout_nmse``,
            ``rollout_disagreement_mean``, ``k``, ``model_transitions`` (imagined transitions added in the phase),
            ``epsilon`` and ``seconds``.
        """
        if len(ks) != self.num_runs:
            raise ValueError(f"need {self.num_runs} rollout lengths, got {len(ks)}")
        if any(int(k) < 0 for k in ks):
            raise ValueError(f"rollout lengths must be >= 0, got {list(ks)}")
        if self.cfg.model_use == "lookahead" and truncators is not None and any(t is not None for t in truncators):
            # Lookahead makes no imagined training data, so a per-sample cut would have nothing to cut and the
            # controller would silently act as fixed:K_MAX.
            raise ValueError(
                "an uncertainty controller cuts the imagined rollouts that train Q, which DynaConfig.model_use="
                "'lookahead' does not make; use model_use='dyna' or a rollout-length controller such as fixed:K"
            )
        steps = min(self.cfg.phase_length, self.budget - self.steps_done)
        if steps <= 0:
            raise RuntimeError(f"budget of {self.budget} env steps is used up")
        cfg = self.cfg
        started = time.perf_counter()
        new_ks = [min(int(k), cfg.k_cap) for k in ks]
        for i, (old, new) in enumerate(zip(self.ks, new_ks, strict=True)):
            if new == 0 and old > 0:
                self.model_buffers[i].clear()  # K = 0 means no imagined data at all, not stale data
        self.ks = new_ks
        self._truncators = list(truncators) if truncators is not None else [None] * self.num_runs
        self._phase_stats = [{} for _ in range(self.num_runs)]
        for _ in range(steps):
            self._env_step()
            if self.steps_done % cfg.model_train_freq == 0:
                self._fit_models()
            if self.steps_done % cfg.rollout_freq == 0:
                self._rollout_round()
            if self.steps_done % cfg.train_freq == 0 and self.steps_done > cfg.learning_starts:
                self._train_round()
            if cfg.target_clock == "env_steps" and self.steps_done % cfg.target_update_interval == 0:
                self.q_target.copy_runs_from(self.q, torch.ones(self.num_runs, dtype=torch.bool))
        feedback = self._feedback()
        self.phase += 1
        elapsed = time.perf_counter() - started
        for fb in feedback:
            fb["seconds"] = elapsed
        return feedback

    def _feedback(self) -> list[dict[str, float]]:
        """The end-of-phase report per run: greedy evaluation, model errors along model episodes, model fit; with
        ``controller_feedback="training"`` only training data (see :class:`~mbrl.algorithms.dyna.DynaConfig`)."""
        nan = float("nan")
        returns, lengths, starts = self._greedy_episodes(self.cfg.eval_episodes, None, seed_offset=self.phase)
        self.last_evaluation = returns.mean(axis=1)
        from_training = self.cfg.controller_feedback == "training"
        one_step = measure.one_step_rmse(self) if from_training else None
        open_loop = measure.open_loop_rmse_by_run(self)
        td_errors, td_imagined = measure.real_td_errors(self), measure.imagined_td_errors(self)
        feedback = []
        for i in range(self.num_runs):
            stats = self._phase_stats[i]
            episodes = stats.get("episodes", 0.0)
            train_return = stats.get("return_sum", 0.0) / episodes if episodes else nan
            previous, self.last_train_return[i] = self.last_train_return[i], train_return
            fb: dict[str, float] = {
                "mean_return": train_return if from_training else float(returns[i].mean()),
                "train_return": train_return,
                "train_return_trend": train_return - previous,  # NaN unless both phases finished an episode
                "env_steps": float(self.steps_done),
                "budget_fraction": self.steps_done / self.budget,
                "k": float(self.ks[i]),
                "td_error_mean": float(td_errors[i]),
                "td_error_imagined": float(td_imagined[i]),
                "epsilon": self.exploration_rate(),
                "model_transitions": stats.get("model_transitions", 0.0),
                "rollout_disagreement_mean": stats.get("rollout_disagreement_mean", nan),
                "rollout_seconds": stats.get("rollout_seconds", 0.0),
                "rollout_nonfinite": stats.get("rollout_nonfinite", 0.0),
                "rollout_uncertainty_cut": stats.get("rollout_uncertainty_cut", 0.0),
                **rmse_feedback(open_loop[i], self.ks[i]),
                **self._disagreement_by_step(i),
            }
            if one_step is not None:
                fb["model_one_step_rmse"] = float(one_step[i])
                fb.update(model_return_error=nan, model_length_error=nan, disagreement_mean=nan, disagreement_at_k=nan)
            elif self.model_fitted[i]:
                rng = np.random.default_rng([self.run_seeds[i], 7_919, self.phase])
                model = self.model_envs[i].episodes(starts[i], self._policy(i, 0.0), self.max_episode_steps, rng)
                fb["model_return_error"] = float(np.mean(model.returns - returns[i]))
                fb["model_length_error"] = float(np.mean(model.lengths - lengths[i]))
                fb["disagreement_mean"] = model.disagreement
                fb["disagreement_at_k"] = model.disagreement_within(self.ks[i])
                self.trust_reference[i] = model.disagreement
            else:
                fb.update(model_return_error=nan, model_length_error=nan, disagreement_mean=nan, disagreement_at_k=nan)
            metrics = self._last_model_metrics[i]
            fb["model_holdout_loss"] = metrics.get("model/holdout_nll", nan)
            fb["model_holdout_mse"] = metrics.get("model/holdout_mse", nan)
            fb["model_holdout_nmse"] = metrics.get("model/holdout_nmse", nan)
            fb["model_restored_after_nan"] = metrics.get("model/restored_after_nan", 0.0)
            feedback.append(fb)
        return feedback

    def _disagreement_by_step(self, run: int) -> dict[str, float]:
        """``rollout_disagreement_h{h}``: the mean ensemble disagreement at step ``h`` (1-based) of the phase's imagined
        rollouts, over the samples alive there, for ``h`` in :data:`~mbrl.model_error.RMSE_HORIZONS` (NaN where no
        rollout of the phase reached step ``h``: ``K < h``, ``K = 0``, or every sample was cut or ended before)."""
        stats = self._phase_stats[run]
        out = {}
        for h in RMSE_HORIZONS:
            count = stats.get(f"disagreement_count_{h - 1}", 0.0)
            out[f"rollout_disagreement_h{h}"] = stats[f"disagreement_sum_{h - 1}"] / count if count else float("nan")
        return out

    @property
    def done(self) -> bool:
        """Whether the budget is used up."""
        return self.steps_done >= self.budget

    # --- persistence ------------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly: networks, optimizer, buffers, models, generators, each run's episode
        in progress (its reset and actions, replayed by :meth:`load_state_dict`) and counters; tensors and plain data
        only (``weights_only`` loading). The global random streams are left alone: nothing here draws from them, and a
        learner inside a larger program (meta-training) must not reset its caller's."""
        return {
            "q": self.q.state_dict(),
            "q_target": self.q_target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "real": self.real.state_dict(),
            "model_buffers": [m.state_dict() for m in self.model_buffers],
            "models": [m.state_dict() for m in self.models],
            "model_fitted": list(self.model_fitted),
            "last_model_metrics": [dict(m) for m in self._last_model_metrics],
            "rngs": [generator_state(r) for r in self.rngs],
            "episodes_in_progress": [e.state_dict() for e in self._episodes],
            "episodes": torch.as_tensor(self.episodes).clone(),
            "obs": torch.as_tensor(self.obs).clone(),
            "episode_return": torch.as_tensor(self.episode_return).clone(),
            "steps_done": self.steps_done,
            "phase": self.phase,
            "rollout_round": self.rollout_round,
            "ks": list(self.ks),
            "updates": torch.as_tensor(self.updates).clone(),
            "model_updates": torch.as_tensor(self.model_updates).clone(),
            "trust_reference": torch.as_tensor(self.trust_reference).clone(),
            "untrusted_decisions": torch.as_tensor(self.untrusted_decisions).clone(),
            "last_train_return": torch.as_tensor(self.last_train_return).clone(),
            "run_seeds": list(self.run_seeds),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot made by :meth:`state_dict` (same number of runs and config).

        Raises:
            ValueError: The snapshot is for other run seeds, or was written before episodes were saved for replay
                (its envs could not be put back exactly).
        """
        if list(state["run_seeds"]) != self.run_seeds:
            raise ValueError(f"snapshot is for run seeds {state['run_seeds']}, this object has {self.run_seeds}")
        if "episodes_in_progress" not in state:
            raise ValueError(
                "this Dyna-DQN snapshot predates exact resume (no recorded episodes to replay); start the run again"
            )
        self.q.load_state_dict(state["q"])
        self.q_target.load_state_dict(state["q_target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.real.load_state_dict(state["real"])
        for buffer, saved in zip(self.model_buffers, state["model_buffers"], strict=True):
            buffer.load_state_dict(saved)
        for model, saved in zip(self.models, state["models"], strict=True):
            model.load_state_dict(saved)
        self.model_fitted = [bool(f) for f in state["model_fitted"]]
        self._last_model_metrics = [{str(k): float(v) for k, v in m.items()} for m in state["last_model_metrics"]]
        for rng, saved in zip(self.rngs, state["rngs"], strict=True):
            set_generator_state(rng, saved)
        self.steps_done, self.phase = int(state["steps_done"]), int(state["phase"])
        self.rollout_round = int(state["rollout_round"])
        self.ks = [int(k) for k in state["ks"]]
        self.updates = state["updates"].numpy().copy()
        self.model_updates = state["model_updates"].numpy().copy()
        if "trust_reference" in state:  # snapshots from before lookahead_trust have no reference yet
            self.trust_reference = state["trust_reference"].numpy().copy()
            self.untrusted_decisions = state["untrusted_decisions"].numpy().copy()
        if "last_train_return" in state:  # snapshots from before the return trend have none: the next trend is NaN
            self.last_train_return = state["last_train_return"].numpy().copy()
        self.obs = state["obs"].numpy().astype(np.float32).copy()
        self.episode_return = state["episode_return"].numpy().copy()
        self.episodes = state["episodes"].numpy().copy()
        for i, (env, saved) in enumerate(zip(self.envs, state["episodes_in_progress"], strict=True)):
            if self._episodes[i].restore(env, saved, self.obs[i]) is None:  # not replayable: a new episode
                self.obs[i] = self._episodes[i].reset(env)[0]
                self.episode_return[i] = 0.0
