"""DART: rollout workers and the trainer decoupled and asynchronous (Li et al. 2025, "Efficient Multi-turn RL for GUI
Agents via Decoupled Training and Adaptive Data Curation", §3-4), on the compact GRPO trainer.

DART splits RL training into modules that never wait for each other: rollout workers sample with whatever policy
version they hold, a data manager collects what they return, the trainer updates from it and hands new weights to
each worker when that worker starts its next job (per-worker model synchronization: no global stop to broadcast).
Scheduling is rollout-wise: a worker that finishes a job starts the next at once. Here:

* ``RolloutWorker`` — one worker: a copy of the policy, a sampler and the verifier. ``run(job, weights)`` loads new
  weights if given, samples ``count`` responses for each of the job's prompts from a per-job seed, scores them and
  computes their *sampling-time* log-probabilities (the behaviour policy ``μ``, as an inference server returns them).
  The same class runs in the learner's process (``InlinePool``), in local processes (``ProcessPool``) or as Ray actors
  (``RayPool``); the pools only move jobs and results. Workers and pools live in
  :mod:`meta.rlvr.trainers.dart_workers`.
* :class:`DARTCounts` — the per-task adaptive rollout count (DART's "dynamic rollout frequency", which spends fewer
  rollouts on tasks the policy already solves): ``n_min`` responses for a prompt whose solve-rate estimate (the EMA of
  :class:`~meta.rlvr.allocators.stats.StatsTable`) is at least ``easy``, ``n_max`` otherwise (and for unseen prompts).
  The threshold rule is rolloutlab's reading of the paper's difficulty-based adjustment.
* :class:`DARTTrainer` — the learner, a :class:`~meta.rlvr.trainers.grpo.GRPOTrainer`: each :meth:`~DARTTrainer.step`
  takes ``prompts_per_step`` groups from what the workers returned, oldest first, and makes the usual clipped update.
  Its policy version is its step count ``t``.

**Bounded staleness.** A group sampled with policy version ``v`` may be trained on at version ``t`` only if
``t − v <= max_staleness``; older groups are dropped (their responses and tokens go to the ledger's
``dropped_responses`` / ``dropped_tokens`` and to :attr:`DARTTrainer.stale_responses` / ``stale_tokens``).

**Importance correction** (the decoupled objective of Hilton et al. 2022 with DART's truncated importance sampling,
§4.4; Yao et al. 2025 for the truncation): the proximal policy ``π_prox`` is the learner's policy when the update
starts, ``μ`` the worker's at sampling. Each token's loss is ``w · (−min(ρA, clip(ρ, 1−ε_low, 1+ε_high)A))`` with
``ρ = π_θ/π_prox`` (the trainer's own ratio and clip) and ``w = min(π_prox/μ, C)`` (detached), so the untruncated
importance ratio is ``π_θ/μ``, corrected back to the sampling-time policy. Since ``w > 0`` it factors out of the
``min``, and the trainer applies it as a per-token advantage ``w·A``. A fresh group (``v = t``) has ``μ = π_prox``,
so ``w = 1`` and the step is exactly the synchronous one.

**Synchronous mode** (``synchronous=True``, spec ``dart_sync``): the baseline with the same workers and code. Each
step submits its whole batch with the current weights, waits for it and then trains; workers idle while the learner
trains and the learner idles while they sample. The asynchronous mode keeps every worker busy all the time.

Each step reports ``async/idle_seconds`` (the learner blocked waiting for results), ``async/step_seconds`` and the
staleness counts. Checkpoints (:meth:`DARTTrainer.state_dict`) first wait for the jobs in flight and keep their
results as plain data, so a resumed run has nothing outstanding; with one worker (or ``InlinePool``) the job sequence
is deterministic, so a resumed run is bit-identical to one that checkpointed at the same steps.

Specs (``rolloutlab rlvr train --dart SPEC``): ``dart:MAX_STALENESS,N_MIN,N_MAX,WORKERS[,BACKEND]`` (defaults 1, 4,
8, 1, process) and ``dart_sync:N_MIN,N_MAX,WORKERS[,BACKEND]``; ``BACKEND`` is ``inline``, ``process`` or ``ray``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import torch

from envs.reasoning import Task, verify
from meta.control.spec import DART, Spec, available_specs, parse_spec
from meta.rlvr.allocators import Allocator, is_mixed
from meta.rlvr.allocators.stats import StatsTable
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.dart_workers import BACKENDS, RolloutJob, RolloutResult, WorkerPool, WorkerSpec, make_pool
from meta.rlvr.trainers.grpo import GRPOTrainer
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.grpo_groups import Group, Response, RewardFn, response_measures


# --- configuration ----------------------------------------------------------------------------------------------
@dataclass
class DARTConfig:
    """DART's settings.

    Attributes:
        max_staleness: Most policy versions a group may lag the learner when it is trained on (``t − v``), >= 0.
        n_min: Responses for a prompt the policy already solves (solve-rate estimate >= ``easy``), >= 2.
        n_max: Responses for the others, >= ``n_min``.
        easy: Solve-rate threshold of :class:`DARTCounts`, in (0, 1].
        workers: Rollout workers, >= 1.
        backend: ``"inline"`` (in the learner's process, one job at a time: tests), ``"process"`` or ``"ray"``.
        prompts_per_job: Prompts per worker job in the asynchronous mode (rollout-wise scheduling's unit); the
            synchronous mode splits each step's batch evenly over the workers instead.
        is_cap: ``C``, the truncation of the importance weight ``π_prox/μ`` (>= 1).
        synchronous: The synchronous baseline (see the module docstring).
    """

    max_staleness: int = 1
    n_min: int = 4
    n_max: int = 8
    easy: float = 0.8
    workers: int = 1
    backend: str = "process"
    prompts_per_job: int = 4
    is_cap: float = 2.0
    synchronous: bool = False

    def __post_init__(self) -> None:
        if self.max_staleness < 0:
            raise ValueError(f"max_staleness must be >= 0, got {self.max_staleness}")
        if self.n_min < 2 or self.n_max < self.n_min:
            raise ValueError(f"need 2 <= n_min <= n_max, got n_min={self.n_min}, n_max={self.n_max}")
        if not 0.0 < self.easy <= 1.0:
            raise ValueError(f"easy must be in (0, 1], got {self.easy}")
        if self.workers < 1 or self.prompts_per_job < 1:
            raise ValueError(f"need workers >= 1 and prompts_per_job >= 1, got {self.workers}, {self.prompts_per_job}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {list(BACKENDS)}, got {self.backend!r}")
        if not self.is_cap >= 1.0:
            raise ValueError(f"is_cap must be >= 1, got {self.is_cap}")


#: The DART spec names, as the one spec registry (:data:`meta.control.spec.SPECS`) lists them.
DART_SPECS: tuple[str, ...] = tuple(available_specs(DART))


def dart_config_from_spec(spec: Spec, **overrides: Any) -> DARTConfig:
    """The :class:`DARTConfig` a parsed DART spec names (the factory the spec registry calls; see
    :func:`make_dart_config`)."""
    args = list(spec.args)
    backend = args.pop().lower() if args and args[-1].lower() in BACKENDS else None
    fields = ("max_staleness", "n_min", "n_max", "workers") if spec.name == "dart" else ("n_min", "n_max", "workers")
    usage = ",".join(f.upper() for f in fields) + f"[,BACKEND] (whole numbers; BACKEND one of {list(BACKENDS)})"
    nums = replace(spec, args=tuple(args)).numbers(usage, 0, len(fields), whole=True)
    values: dict[str, Any] = dict(zip(fields, nums, strict=False))
    if backend is not None:
        values["backend"] = backend
    if spec.name == "dart_sync":
        values.update(synchronous=True, max_staleness=0)
    return DARTConfig(**{**values, **overrides})


def make_dart_config(spec: str, **overrides: Any) -> DARTConfig:
    """A :class:`DARTConfig` from ``dart:MAX_STALENESS,N_MIN,N_MAX,WORKERS[,BACKEND]`` (defaults 1, 4, 8, 1, process)
    or ``dart_sync:N_MIN,N_MAX,WORKERS[,BACKEND]``; ``overrides`` set other fields (``prompts_per_job``, ...).

    Raises:
        ValueError: Unknown name, a spec of another kind, too many or malformed arguments, or values the config
            refuses.
    """
    return dart_config_from_spec(parse_spec(spec, DART), **overrides)


class DARTCounts(Allocator):
    """DART's per-task adaptive rollout count: ``n_min`` responses for a prompt whose EMA solve rate is at least
    ``easy``, ``n_max`` for the others and for unseen prompts. One stage; every group is kept.

    Args:
        n_min: Responses for an easy prompt.
        n_max: Responses for the others.
        easy: The solve-rate threshold.
    """

    name = "dart_counts"

    def __init__(self, n_min: int = 4, n_max: int = 8, easy: float = 0.8) -> None:
        if n_min < 1 or n_max < n_min:
            raise ValueError(f"need 1 <= n_min <= n_max, got {n_min}, {n_max}")
        self.n_min = int(n_min)
        self.n_max = int(n_max)
        self.easy = float(easy)

    def count(self, key: str, stats: StatsTable) -> int:
        """Responses for the prompt ``key`` given the statistics so far."""
        rec = stats.get(key)
        return self.n_min if rec.ema is not None and rec.ema >= self.easy else self.n_max

    def initial(self, keys: Sequence[str], stats: StatsTable) -> list[int]:
        return [self.count(k, stats) for k in keys]


# --- staleness and importance weights ---------------------------------------------------------------------------
def staleness_filter(versions: Sequence[int], version: int, max_staleness: int) -> list[bool]:
    """Which samples may be trained on at learner version ``version``: ``version − v <= max_staleness`` each.

    Raises:
        ValueError: A sample from a version the learner has not reached (``v > version``).
    """
    if any(v > version for v in versions):
        raise ValueError(f"a sample's version is ahead of the learner's ({max(versions)} > {version})")
    return [version - int(v) <= max_staleness for v in versions]


def truncated_importance_weights(prox_logp: torch.Tensor, behaviour_logp: torch.Tensor, cap: float) -> torch.Tensor:
    """``w = min(exp(log π_prox − log μ), C)`` per token (truncated importance sampling, DART §4.4)."""
    return torch.exp(prox_logp - behaviour_logp).clamp(max=cap)


# --- the learner --------------------------------------------------------------------------------------------------
@dataclass
class _Ready:
    """A returned group waiting to be trained on: its prompt, version and responses with ``log μ``."""

    task: Task
    version: int
    tokens: list[list[int]]
    rewards: list[float]
    logps: list[list[float]]

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "task": asdict(self.task)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> _Ready:
        return cls(
            Task(**data["task"]),
            int(data["version"]),
            [list(map(int, t)) for t in data["tokens"]],
            [float(r) for r in data["rewards"]],
            [list(map(float, lp)) for lp in data["logps"]],
        )


@dataclass
class _AsyncResponse(Response):
    """A response with its sampling version and, for a stale one, its per-token truncated importance weights."""

    version: int = 0
    is_weights: list[float] | None = field(default=None)


class DARTTrainer(GRPOTrainer):
    """The DART learner (module docstring): a :class:`~meta.rlvr.trainers.grpo.GRPOTrainer` fed by rollout workers.

    Args:
        model: The policy the learner trains (workers get copies and then its weights).
        vocab: Encodes prompts, decodes completions.
        tasks: Training prompt pool (drawn in the trainer's shuffled order when jobs are made).
        dart: DART's settings.
        config: Trainer settings (``prompts_per_step`` groups per update, the update schedule, sampling temperature).
        reward_fn: The verifier; a module-level function for the process and Ray backends.
        pool: A ready pool (tests); ``None`` builds one of ``dart.backend`` at the first step.

    Raises:
        ValueError: A device other than the CPU (workers run on the CPU and send CPU weights).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        vocab: CharVocab,
        tasks: Sequence[Task],
        dart: DARTConfig | None = None,
        config: GRPOConfig | None = None,
        *,
        reward_fn: RewardFn = verify,
        pool: WorkerPool | None = None,
    ) -> None:
        self.dart = dart or DARTConfig()
        allocator = DARTCounts(self.dart.n_min, self.dart.n_max, self.dart.easy)
        super().__init__(model, vocab, tasks, allocator, config, reward_fn=reward_fn)
        if self.device.type != "cpu":
            raise ValueError(f"DART's workers run on the CPU: the learner must too, got device {self.device}")
        self.pool = pool
        self._ready: list[_Ready] = []
        self._sent: list[int] = [-1] * self.dart.workers  # policy version each worker holds
        self._busy: list[int] = [0] * self.dart.workers  # jobs in flight per worker
        self._next_job = 0
        self.stale_groups = 0
        self.stale_responses = 0
        self.stale_tokens = 0
        self.corrected_responses = 0
        self.idle_seconds = 0.0
        self.step_seconds = 0.0
        self.idle_seconds_step = 0.0

    # --- workers ---------------------------------------------------------------------------------------------
    def _ensure_pool(self) -> WorkerPool:
        if self.pool is None:
            spec = WorkerSpec(self.model, self.vocab, self.reward_fn, self.cfg.max_new_tokens, self.temperature)
            self.pool = make_pool(self.dart.backend, spec, self.dart.workers)
        if self.pool.size != self.dart.workers:
            raise ValueError(f"the pool has {self.pool.size} workers, DART is set for {self.dart.workers}")
        return self.pool

    def _weights(self) -> dict[str, np.ndarray]:
        return {k: v.detach().cpu().numpy().copy() for k, v in self.model.state_dict().items()}

    def _submit(self, worker: int, n_prompts: int) -> None:
        """Draw ``n_prompts`` prompts and send them to ``worker`` with this version (and its weights if it lags)."""
        pool = self._ensure_pool()
        tasks = self._draw(n_prompts)
        counts = self.allocator.initial([t.prompt for t in tasks], self.stats)
        seed = int(self.rng.integers(0, 2**31 - 1))
        job = RolloutJob(self._next_job, worker, self.num_steps, tasks, counts, seed)
        weights = None if self._sent[worker] == self.num_steps else self._weights()
        pool.submit(job, weights)
        self._next_job += 1
        self._sent[worker] = self.num_steps
        self._busy[worker] += 1

    def _receive(self, result: RolloutResult) -> None:
        """Book a returned job: its cost, its statistics, its groups into the ready queue."""
        self._busy[result.worker] -= 1
        for task, tokens, rewards, logps in zip(result.tasks, result.tokens, result.rewards, result.logps, strict=True):
            if not tokens:
                continue
            self.costs.responses += len(tokens)
            self.costs.completion_tokens += sum(len(t) for t in tokens)
            self.costs.prompt_tokens += len(self.vocab.encode(task.prompt, bos=True))
            self.costs.groups += 1
            self.costs.zero_variance_groups += int(not is_mixed(rewards))
            self.stats.update(task.prompt, rewards, [len(t) for t in tokens])
            self._ready.append(_Ready(task, result.version, tokens, rewards, logps))

    def _wait(self) -> None:
        pool = self._ensure_pool()
        start = time.perf_counter()
        result = pool.wait()
        self.idle_seconds_step += time.perf_counter() - start
        self._receive(result)

    def _in_flight(self) -> int:
        return sum(self._busy)

    def drain(self) -> None:
        """Wait for every job in flight and keep the results (checkpoints, :meth:`close`, and a pause of the workers
        while the caller does other work, such as a held-out evaluation, that the asynchronous mode must not
        overlap with sampling to be timed fairly). The wait outside :meth:`step` is booked as no step's idle time."""
        while self._in_flight() > 0:
            self._wait()

    def close(self) -> None:
        """Wait for the jobs in flight (their cost is booked), then stop the workers. Returned groups not trained on
        yet stay in the ready queue (generated, not dropped): a run that goes on trains on them (within the bound)."""
        if self.pool is not None:
            self.idle_seconds_step = 0.0
            self.drain()
            self.pool.close()
            self.pool = None
            self._sent = [-1] * self.dart.workers

    def _take(self, n: int) -> list[_Ready]:
        """Up to ``n`` ready groups, oldest first, dropping (and counting) those past the staleness bound."""
        keep = staleness_filter([r.version for r in self._ready], self.num_steps, self.dart.max_staleness)
        for item, ok in zip(self._ready, keep, strict=True):
            if not ok:
                self.stale_groups += 1
                self.stale_responses += len(item.tokens)
                self.stale_tokens += sum(len(t) for t in item.tokens)
                self.costs.dropped_responses += len(item.tokens)
                self.costs.dropped_tokens += sum(len(t) for t in item.tokens)
        fresh = [item for item, ok in zip(self._ready, keep, strict=True) if ok]
        self._ready = fresh[n:]
        return fresh[:n]

    # --- one step --------------------------------------------------------------------------------------------
    def step(self) -> dict[str, Any]:
        """One learner update from the workers' groups.

        Returns:
            :meth:`GRPOTrainer.step`'s metrics plus ``async/*``: ``idle_seconds`` (this step's wait for results),
            ``step_seconds``, ``stale_*`` (cumulative drops), ``corrected_responses`` (cumulative stale-but-kept
            responses trained with importance weights), ``mean_staleness`` of the trained groups and ``in_flight``
            (jobs outstanding when the update started).
        """
        start = time.perf_counter()
        before = self.costs.as_dict()
        self.idle_seconds_step = 0.0
        self._ensure_pool()
        batch = self.cfg.prompts_per_step
        taken: list[_Ready] = []
        if self.dart.synchronous:
            # The whole batch with the current weights, split over the workers; nothing is sampled while training.
            sizes = [len(c) for c in np.array_split(np.arange(batch), self.dart.workers) if len(c)]
            for worker, size in enumerate(sizes):
                self._submit(worker, size)
            self.drain()
            taken = self._take(batch)
        else:
            while True:
                for worker in range(self.dart.workers):  # rollout-wise scheduling: no worker stays idle
                    if self._busy[worker] == 0:
                        self._submit(worker, self.dart.prompts_per_job)
                taken += self._take(batch - len(taken))
                if len(taken) >= batch:
                    break
                self._wait()
        in_flight = self._in_flight()
        groups = self._groups(taken)
        update = self._update(groups)
        self.num_steps += 1
        generated = [r for g in groups for r in g.responses]
        rewards = [r.reward for r in generated]
        measures = response_measures(
            [self.vocab.decode(r.tokens) for r in generated], [r.policy_tokens for r in generated]
        )
        seconds = time.perf_counter() - start
        self.idle_seconds += self.idle_seconds_step
        self.step_seconds += seconds
        staleness = [self.num_steps - 1 - item.version for item in taken]
        return {
            "step": self.num_steps,
            **update,
            "reward_mean": float(np.mean(rewards)) if rewards else 0.0,
            **measures,
            "groups_generated": len(groups),
            "groups_mixed": sum(is_mixed(g.rewards) for g in groups),
            "groups_kept": len(groups),
            "refill_rounds": 0,
            "entropy": 0.0,  # the workers do not report entropies
            "temperature": self.temperature,
            "async/idle_seconds": self.idle_seconds_step,
            "async/step_seconds": seconds,
            "async/mean_staleness": float(np.mean(staleness)) if staleness else 0.0,
            "async/in_flight": in_flight,
            "async/stale_groups": self.stale_groups,
            "async/stale_responses": self.stale_responses,
            "async/stale_tokens": self.stale_tokens,
            "async/corrected_responses": self.corrected_responses,
            **{f"cost/{k}": v for k, v in self.costs.as_dict().items()},
            **{f"step_cost/{k}": v for k, v in self.costs.since(before).items()},
        }

    def _groups(self, taken: Sequence[_Ready]) -> list[Group]:
        """Groups of the trained items; responses of an older version get ``w = min(π_prox/μ, C)`` per token.

        Only groups with a reward spread need the weights (the others have zero advantages throughout), so
        ``π_prox`` is computed for those alone; every late response counts in :attr:`corrected_responses`.
        """
        groups: list[Group] = []
        late: list[_AsyncResponse] = []
        prompts: list[list[int]] = []
        behaviour: list[list[float]] = []
        for item in taken:
            g = Group(item.task, self.vocab.encode(item.task.prompt, bos=True))
            for tokens, reward, logp in zip(item.tokens, item.rewards, item.logps, strict=True):
                r = _AsyncResponse(tokens, reward, version=item.version)
                g.responses.append(r)
                if item.version < self.num_steps and tokens:
                    self.corrected_responses += 1
                    if is_mixed(item.rewards):
                        late.append(r)
                        prompts.append(g.prompt_ids)
                        behaviour.append(logp)
            groups.append(g)
        if late:
            # π_prox: the learner's policy now, before this update, on the same tokens.
            with torch.no_grad():
                prox, _ = self._logprobs(self.model, prompts, [r.tokens for r in late])
            for j, r in enumerate(late):
                n = len(r.tokens)
                mu = torch.tensor(behaviour[j], dtype=torch.float32)
                r.is_weights = truncated_importance_weights(prox[j, :n].cpu(), mu, self.dart.is_cap).tolist()
        return groups

    def _advantages(self, g: Group) -> list[float | list[float]]:  # type: ignore[override]
        # w > 0 factors out of PPO's min (module docstring), so a stale response's importance weights are applied as
        # per-token advantages w·A, which the trainer's update already takes (the branching rollout's path).
        adv = super()._advantages(g)
        out: list[float | list[float]] = []
        for r, a in zip(g.responses, adv, strict=True):
            weights = getattr(r, "is_weights", None)
            out.append([a * w for w in weights] if weights is not None and a != 0.0 else a)
        return out

    # --- state -----------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """:meth:`GRPOTrainer.state_dict` plus DART's: the returned groups not yet trained on (the jobs in flight
        are waited for first, so nothing is outstanding), the job counter and the staleness and time counters."""
        self.idle_seconds_step = 0.0
        if self.pool is not None:
            self.drain()
        return {
            **super().state_dict(),
            "dart": {
                "config": asdict(self.dart),
                "ready": [item.as_dict() for item in self._ready],
                "next_job": self._next_job,
                "stale_groups": self.stale_groups,
                "stale_responses": self.stale_responses,
                "stale_tokens": self.stale_tokens,
                "corrected_responses": self.corrected_responses,
                "idle_seconds": self.idle_seconds,
                "step_seconds": self.step_seconds,
            },
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` snapshot (the workers get the restored weights with their next job).

        Raises:
            ValueError: The snapshot has no DART state, or another staleness bound or count rule.
        """
        if "dart" not in state:
            raise ValueError("the snapshot is not a DART trainer's (no 'dart' state)")
        saved = state["dart"]
        mine = asdict(self.dart)
        for key in ("max_staleness", "n_min", "n_max", "easy", "synchronous", "is_cap"):
            if saved["config"][key] != mine[key]:
                raise ValueError(f"the snapshot's DART {key} is {saved['config'][key]}, this trainer's {mine[key]}")
        super().load_state_dict({k: v for k, v in state.items() if k != "dart"})
        self._ready = [_Ready.from_dict(d) for d in saved["ready"]]
        self._next_job = int(saved["next_job"])
        self.stale_groups = int(saved["stale_groups"])
        self.stale_responses = int(saved["stale_responses"])
        self.stale_tokens = int(saved["stale_tokens"])
        self.corrected_responses = int(saved["corrected_responses"])
        self.idle_seconds = float(saved["idle_seconds"])
        self.step_seconds = float(saved["step_seconds"])
        self._sent = [-1] * self.dart.workers  # whatever the workers hold, they get these weights next
        self._busy = [0] * self.dart.workers


__all__ = [
    "DARTConfig",
    "DARTCounts",
    "DARTTrainer",
    "make_dart_config",
    "staleness_filter",
    "truncated_importance_weights",
]
