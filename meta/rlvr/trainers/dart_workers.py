"""DART's rollout workers and the pools that run them (:mod:`meta.rlvr.trainers.dart`; Li et al. 2025, §3).

A :class:`RolloutWorker` holds a copy of the policy, the sampler and the verifier: ``run(job, weights)`` loads new
weights if given, samples ``count`` responses for each of the job's prompts from a per-job seed, scores them and
computes their *sampling-time* log-probabilities (the behaviour policy ``μ``, as an inference server returns them).
The same class runs in the learner's process (:class:`InlinePool`), in local processes (:class:`ProcessPool`, ``spawn``
start method: the entry function :func:`_process_main` is found by its module path) or as Ray actors
(:class:`RayPool`); the pools only move :class:`RolloutJob` s in and :class:`RolloutResult` s out. :func:`make_pool`
builds the pool of a backend named in :data:`BACKENDS`.
"""

from __future__ import annotations

import copy
import multiprocessing as mp
import queue
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from envs.reasoning import Task
from meta.rlvr.lm.sampling import sample, sequence_logprobs
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.grpo_groups import RewardFn

#: The pool backends :func:`make_pool` knows.
BACKENDS: tuple[str, ...] = ("inline", "process", "ray")


# --- the worker ---------------------------------------------------------------------------------------------------
@dataclass
class RolloutJob:
    """One job for a worker: prompts and their response counts, sampled from ``seed`` with version ``version``."""

    job_id: int
    worker: int
    version: int
    tasks: list[Task]
    counts: list[int]
    seed: int


@dataclass
class RolloutResult:
    """A finished job: per prompt, its responses' tokens, rewards and sampling-time per-token log-probabilities.

    Attributes:
        job_id: The job's id.
        worker: The worker that ran it.
        version: The policy version it was sampled with.
        tasks: The job's prompts.
        tokens: ``tokens[i][j]``: response ``j`` of prompt ``i`` (EOS included).
        rewards: The verifier's rewards, same layout.
        logps: ``log μ`` per token, same layout (one list per response).
        seconds: Worker time spent on the job (weights load, sampling, scoring, log-probs).
    """

    job_id: int
    worker: int
    version: int
    tasks: list[Task]
    tokens: list[list[list[int]]]
    rewards: list[list[float]]
    logps: list[list[list[float]]]
    seconds: float


class RolloutWorker:
    """A rollout worker: a copy of the policy with the sampler and the verifier; the same class in every backend.

    Args:
        model: The policy (copied to the CPU here; later weights come with jobs).
        vocab: Encodes prompts, decodes completions.
        reward_fn: ``(task, completion) -> reward``; must be picklable (a module-level function) for processes/Ray.
        max_new_tokens: Most tokens per response.
        temperature: Sampling temperature (the log-probabilities are computed at the same one).
        threads: Torch threads to use (``None`` leaves the process's setting; processes and actors pass 1).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        vocab: CharVocab,
        reward_fn: RewardFn,
        max_new_tokens: int,
        temperature: float,
        threads: int | None = None,
    ) -> None:
        if threads is not None:
            torch.set_num_threads(threads)
        self.model = copy.deepcopy(model).cpu().eval()
        self.vocab = vocab
        self.reward_fn = reward_fn
        self.max_new_tokens = int(max_new_tokens)
        self.temperature = float(temperature)
        self.suppress = (vocab.pad_id, vocab.bos_id)

    def run(self, job: RolloutJob, weights: Mapping[str, np.ndarray] | None = None) -> RolloutResult:
        """Load ``weights`` (version ``job.version``) if given, then sample, score and compute ``log μ``."""
        start = time.perf_counter()
        if weights is not None:
            self.model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in weights.items()})
        prompts = [self.vocab.encode(t.prompt, bos=True) for t in job.tasks]
        rows = [i for i, c in enumerate(job.counts) for _ in range(int(c))]
        generator = torch.Generator().manual_seed(int(job.seed))
        out = sample(
            self.model,
            [prompts[i] for i in rows],
            max_new_tokens=self.max_new_tokens,
            eos_id=self.vocab.eos_id,
            pad_id=self.vocab.pad_id,
            temperature=self.temperature,
            generator=generator,
            suppress=self.suppress,
        )
        logps: list[list[float]] = [[] for _ in rows]
        nonempty = [k for k, c in enumerate(out.completions) if c]
        if nonempty:
            with torch.no_grad():
                logp, _ = sequence_logprobs(
                    self.model,
                    [prompts[rows[k]] for k in nonempty],
                    [out.completions[k] for k in nonempty],
                    self.vocab.pad_id,
                    temperature=self.temperature,
                    suppress=self.suppress,
                )
            for j, k in enumerate(nonempty):
                logps[k] = logp[j, : len(out.completions[k])].tolist()
        tokens: list[list[list[int]]] = [[] for _ in job.tasks]
        rewards: list[list[float]] = [[] for _ in job.tasks]
        grouped: list[list[list[float]]] = [[] for _ in job.tasks]
        for k, i in enumerate(rows):
            tokens[i].append(out.completions[k])
            rewards[i].append(float(self.reward_fn(job.tasks[i], self.vocab.decode(out.completions[k]))))
            grouped[i].append(logps[k])
        seconds = time.perf_counter() - start
        return RolloutResult(job.job_id, job.worker, job.version, list(job.tasks), tokens, rewards, grouped, seconds)


@dataclass
class WorkerSpec:
    """What builds a :class:`RolloutWorker` (picklable: it travels to processes and Ray actors)."""

    model: torch.nn.Module
    vocab: CharVocab
    reward_fn: RewardFn
    max_new_tokens: int
    temperature: float

    def build(self, threads: int | None = None) -> RolloutWorker:
        return RolloutWorker(self.model, self.vocab, self.reward_fn, self.max_new_tokens, self.temperature, threads)


# --- the pools ----------------------------------------------------------------------------------------------------
class WorkerPool(ABC):
    """Moves jobs to workers and results back; nothing else differs between backends.

    Attributes:
        size: Number of workers.
    """

    size: int

    @abstractmethod
    def submit(self, job: RolloutJob, weights: Mapping[str, np.ndarray] | None) -> None:
        """Queue ``job`` on worker ``job.worker`` (with new weights if given); returns at once."""

    @abstractmethod
    def wait(self, timeout: float | None = None) -> RolloutResult:
        """Block until a submitted job finishes and return its result (finishing order).

        Raises:
            TimeoutError: Nothing finished within ``timeout`` seconds.
            RuntimeError: A worker failed (its traceback in the message) or died.
        """

    @abstractmethod
    def close(self) -> None:
        """Stop the workers (results not yet waited for are lost)."""


class InlinePool(WorkerPool):
    """Workers in the learner's process: a job runs when submitted, its result waits in a queue. Deterministic."""

    def __init__(self, spec: WorkerSpec, size: int = 1) -> None:
        self.size = int(size)
        self.workers = [spec.build() for _ in range(self.size)]
        self._done: list[RolloutResult] = []

    def submit(self, job: RolloutJob, weights: Mapping[str, np.ndarray] | None) -> None:
        self._done.append(self.workers[job.worker].run(job, weights))

    def wait(self, timeout: float | None = None) -> RolloutResult:
        if not self._done:
            raise TimeoutError("no job was submitted")
        return self._done.pop(0)

    def close(self) -> None:
        self._done.clear()


@dataclass
class _WorkerError:
    job_id: int
    message: str


def _process_main(spec: WorkerSpec, inbox: Any, outbox: Any) -> None:
    """A worker process: one :class:`RolloutWorker`, jobs in, results (or the error) out, until ``None``."""
    worker = spec.build(threads=1)
    while True:
        message = inbox.get()
        if message is None:
            return
        job, weights = message
        try:
            outbox.put(worker.run(job, weights))
        except Exception:  # the learner re-raises it with the worker's traceback
            outbox.put(_WorkerError(job.job_id, traceback.format_exc()))


class ProcessPool(WorkerPool):
    """Workers in local processes (``spawn``: a fresh interpreter each, no forked torch state), one inbox per worker
    and one shared outbox; weights travel as numpy arrays."""

    def __init__(self, spec: WorkerSpec, size: int = 1) -> None:
        self.size = int(size)
        context = mp.get_context("spawn")
        self._outbox = context.Queue()
        self._inboxes = [context.Queue() for _ in range(self.size)]
        self._processes = [
            context.Process(target=_process_main, args=(spec, inbox, self._outbox), daemon=True)
            for inbox in self._inboxes
        ]
        for p in self._processes:
            p.start()

    def submit(self, job: RolloutJob, weights: Mapping[str, np.ndarray] | None) -> None:
        self._inboxes[job.worker].put((job, weights))

    def wait(self, timeout: float | None = None) -> RolloutResult:
        deadline = None if timeout is None else time.perf_counter() + timeout
        while True:
            try:
                out = self._outbox.get(timeout=1.0)
            except queue.Empty:
                dead = [i for i, p in enumerate(self._processes) if not p.is_alive()]
                if dead:
                    raise RuntimeError(f"rollout worker process(es) {dead} died") from None
                if deadline is not None and time.perf_counter() > deadline:
                    raise TimeoutError(f"no rollout result within {timeout} s") from None
                continue
            if isinstance(out, _WorkerError):
                raise RuntimeError(f"rollout job {out.job_id} failed in its worker:\n{out.message}")
            return out  # type: ignore[no-any-return]

    def close(self) -> None:
        for inbox in self._inboxes:
            inbox.put(None)
        for p in self._processes:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)


class _RayWorker:
    """The Ray actor: builds the same :class:`RolloutWorker` inside the actor process."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.worker = spec.build(threads=1)

    def run(self, job: RolloutJob, weights: Mapping[str, np.ndarray] | None) -> RolloutResult:
        return self.worker.run(job, weights)


class RayPool(WorkerPool):
    """Workers as Ray actors (one CPU each); starts a local Ray instance if none is running and stops it on
    :meth:`close` if it started it."""

    def __init__(self, spec: WorkerSpec, size: int = 1) -> None:
        import ray

        self._ray = ray
        self.size = int(size)
        self._started = not ray.is_initialized()
        if self._started:
            ray.init(
                num_cpus=self.size,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
                runtime_env={"env_vars": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}},
            )
        actor: Any = ray.remote(num_cpus=1)(_RayWorker)
        spec_ref = ray.put(spec)
        self._actors: list[Any] = [actor.remote(spec_ref) for _ in range(self.size)]
        self._pending: dict[Any, int] = {}

    def submit(self, job: RolloutJob, weights: Mapping[str, np.ndarray] | None) -> None:
        ref = self._actors[job.worker].run.remote(job, weights)
        self._pending[ref] = job.job_id

    def wait(self, timeout: float | None = None) -> RolloutResult:
        if not self._pending:
            raise TimeoutError("no job was submitted")
        ready, _ = self._ray.wait(list(self._pending), num_returns=1, timeout=timeout)
        if not ready:
            raise TimeoutError(f"no rollout result within {timeout} s")
        job_id = self._pending.pop(ready[0])
        try:
            return self._ray.get(ready[0])  # type: ignore[no-any-return]
        except Exception as exc:
            raise RuntimeError(f"rollout job {job_id} failed in its Ray actor: {exc}") from exc

    def close(self) -> None:
        for a in self._actors:
            self._ray.kill(a)
        self._actors = []
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()


def make_pool(backend: str, spec: WorkerSpec, size: int) -> WorkerPool:
    """The :class:`WorkerPool` of ``backend`` with ``size`` workers built from ``spec``."""
    if backend == "inline":
        return InlinePool(spec, size)
    if backend == "process":
        return ProcessPool(spec, size)
    if backend == "ray":
        return RayPool(spec, size)
    raise ValueError(f"backend must be one of {list(BACKENDS)}, got {backend!r}")


__all__ = [
    "BACKENDS",
    "InlinePool",
    "ProcessPool",
    "RayPool",
    "RolloutJob",
    "RolloutResult",
    "RolloutWorker",
    "WorkerPool",
    "WorkerSpec",
    "make_pool",
]
