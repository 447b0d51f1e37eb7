"""Meta-training over inner runs in several processes, or on a Ray cluster (any meta-MDP of :mod:`meta.control.mdp`).

Meta-training is embarrassingly parallel over inner runs. :class:`~meta.control.mdp.MetaVecEnv` already
batches B runs in one process; the vector envs here split the B runs of a round into W chunks of consecutive run
indices, each a ``MetaVecEnv`` holding that share of the round in its own worker (a local process, or a Ray actor when
the ``distributed`` extra is installed and an address is given), and step the chunks concurrently.

Every worker draws the whole round from ``default_rng([seed, round])``, as one process does, and builds only its own
runs with the seeds they have in the whole round, so the runs of a round (their domains, seeds and, for inner learners
whose runs are independent of each other, their trajectories) do not depend on W: meta-training with W workers gives
the results of W = 1. Batched Dyna-DQN's runs are bit-identical in any batch with its per-run world models (the
default); with ``DynaConfig(batched_models=True)`` its models are one network with a run axis, whose fits and lookahead
equal the per-run ones only to float32 rounding, so results with different W may differ by that rounding.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

from meta.control.mdp import BatchedVecEnv, MetaProblemConfig, MetaVecEnv


def split_runs(num_runs: int, workers: int) -> list[range]:
    """The run indices of each of ``workers`` near-equal chunks of ``num_runs`` runs (consecutive, every one
    non-empty, the first ``num_runs % workers`` one run larger)."""
    if not 1 <= workers <= num_runs:
        raise ValueError(f"need 1 <= workers <= num_runs, got workers={workers}, num_runs={num_runs}")
    base, extra = divmod(num_runs, workers)
    bounds = np.cumsum([0] + [base + (1 if w < extra else 0) for w in range(workers)]).tolist()
    return [range(bounds[w], bounds[w + 1]) for w in range(workers)]


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one, else the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def resolve_workers(workers: int, num_runs: int) -> int:
    """The worker count a setting means: ``workers`` itself, or for 0 (auto) one per available core, at most one
    per run (``min(available_cores(), num_runs)``)."""
    return workers if workers > 0 else max(1, min(available_cores(), num_runs))


class ChunkWorker:
    """One chunk of a round's runs: a :class:`MetaVecEnv` holding the runs ``runs`` of each round of ``num_runs``,
    behind a two-method interface (local process or Ray actor)."""

    def __init__(
        self,
        config: MetaProblemConfig,
        num_runs: int,
        runs: range,
        seed: int,
        round_index: int,
        inner_factory: Any,
    ) -> None:
        # Each worker pins torch to one thread: W workers on W cores beat W workers fighting over threads.
        from rolloutlab.threads import set_torch_threads

        set_torch_threads(1)
        self.venv = MetaVecEnv(config, num_runs, seed, inner_factory, round_index=round_index, runs=runs)

    def reset(self) -> tuple[np.ndarray, list[dict[str, Any]]]:
        obs = self.venv.reset()
        return obs, self.venv.reset_infos

    def step(self, actions: np.ndarray) -> tuple[VecEnvStepReturn, list[dict[str, Any]]]:
        self.venv.step_async(actions)
        result = self.venv.step_wait()
        return result, self.venv.reset_infos


def _process_main(remote: Connection, parent: Connection, args: tuple[Any, ...]) -> None:
    parent.close()
    worker = ChunkWorker(*args)
    try:
        while True:
            command, data = remote.recv()
            if command == "reset":
                remote.send(worker.reset())
            elif command == "step":
                remote.send(worker.step(data))
            elif command == "close":
                break
            else:
                raise RuntimeError(f"unknown command {command!r}")
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        remote.close()


class _ChunkedMetaVecEnv(BatchedVecEnv):
    """Base: B runs split into chunks handled by workers; subclasses say how to call the workers."""

    def __init__(self, shares: Sequence[range], config: MetaProblemConfig) -> None:
        self.shares = list(shares)
        self.render_mode = None
        self._actions: np.ndarray | None = None
        super().__init__(sum(len(share) for share in self.shares), config.observation_space(), config.actions().space())

    def _call_all(self, command: str, payloads: Sequence[Any]) -> list[Any]:
        raise NotImplementedError

    def reset(self) -> np.ndarray:
        results = self._call_all("reset", [None] * len(self.shares))
        self.reset_infos = [info for _, infos in results for info in infos]
        return np.concatenate([obs for obs, _ in results])

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_async() must come before step_wait()")
        chunks = [self._actions[share.start : share.stop] for share in self.shares]
        self._actions = None
        results = self._call_all("step", chunks)
        obs = np.concatenate([r[0][0] for r in results])
        rewards = np.concatenate([r[0][1] for r in results])
        dones = np.concatenate([r[0][2] for r in results])
        infos = [info for r in results for info in r[0][3]]
        self.reset_infos = [info for r in results for info in r[1]]
        return obs, rewards, dones, infos


class ProcessMetaVecEnv(_ChunkedMetaVecEnv):
    """The B runs of each round split over ``workers`` local processes (``forkserver`` start by default).

    Args:
        config: The meta-MDP settings.
        num_runs: B, inner runs per round, over all workers.
        workers: W, processes.
        seed: Base seed.
        round_index: First round (non-zero when resuming).
        inner_factory: Picklable inner-learner factory (default from ``config.inner``).
        start_method: A :mod:`multiprocessing` start method.
    """

    def __init__(
        self,
        config: MetaProblemConfig,
        num_runs: int,
        workers: int,
        seed: int = 0,
        round_index: int = 0,
        inner_factory: Any = None,
        start_method: str = "forkserver",
    ) -> None:
        shares = split_runs(num_runs, workers)
        context = mp.get_context(start_method)
        self.remotes: list[Connection] = []
        self.processes: list[Any] = []
        for share in shares:
            parent, child = context.Pipe()
            args = (config, num_runs, share, seed, round_index, inner_factory)
            process = context.Process(target=_process_main, args=(child, parent, args), daemon=True)  # type: ignore[attr-defined]
            process.start()
            child.close()
            self.remotes.append(parent)
            self.processes.append(process)
        self.closed = False
        super().__init__(shares, config)

    def _call_all(self, command: str, payloads: Sequence[Any]) -> list[Any]:
        for remote, payload in zip(self.remotes, payloads, strict=True):
            remote.send((command, payload))
        return [remote.recv() for remote in self.remotes]

    def close(self) -> None:
        if self.closed:
            return
        for remote in self.remotes:
            with contextlib.suppress(BrokenPipeError, EOFError):
                remote.send(("close", None))
        for process in self.processes:
            process.join(timeout=10)
        self.closed = True


class RayMetaVecEnv(_ChunkedMetaVecEnv):
    """The B runs of each round split over ``workers`` Ray actors (needs the ``distributed`` extra).

    Args:
        address: Ray cluster address (``"auto"``, ``"ray://host:10001"``, or ``"local"`` for an in-process cluster).
        Other arguments as for :class:`ProcessMetaVecEnv`.
    """

    def __init__(
        self,
        config: MetaProblemConfig,
        num_runs: int,
        workers: int,
        address: str,
        seed: int = 0,
        round_index: int = 0,
        inner_factory: Any = None,
    ) -> None:
        try:
            import ray
        except ImportError as exc:
            raise RuntimeError("--ray needs the 'distributed' extra: pip install 'rolloutlab[distributed]'") from exc
        if not ray.is_initialized():
            if address == "local":  # an in-process cluster sized to the workers (no dashboard: nothing to serve)
                ray.init(num_cpus=workers, include_dashboard=False, ignore_reinit_error=True)
            else:
                ray.init(address=address, ignore_reinit_error=True)
        self._ray = ray
        # Ray's stubs type a remote class's handles loosely; the actors are used through `.remote()` only.
        actor_cls: Any = ray.remote(num_cpus=1)(ChunkWorker)
        shares = split_runs(num_runs, workers)
        self.actors: list[Any] = [
            actor_cls.remote(config, num_runs, share, seed, round_index, inner_factory) for share in shares
        ]
        super().__init__(shares, config)

    def _call_all(self, command: str, payloads: Sequence[Any]) -> list[Any]:
        if command == "reset":
            futures = [actor.reset.remote() for actor in self.actors]
        else:
            futures = [actor.step.remote(p) for actor, p in zip(self.actors, payloads, strict=True)]
        return list(self._ray.get(futures))

    def close(self) -> None:
        for actor in self.actors:
            self._ray.kill(actor)
        self.actors = []


def make_meta_vec_env(
    config: MetaProblemConfig,
    num_runs: int,
    seed: int = 0,
    round_index: int = 0,
    workers: int = 1,
    ray_address: str | None = None,
    inner_factory: Any = None,
) -> VecEnv:
    """The meta vector env for a training run: in-process batched (W = 1), process pool (W > 1) or Ray (address).

    Returns:
        An SB3 ``VecEnv`` of ``num_runs`` meta-episodes per round.
    """
    if ray_address:
        return RayMetaVecEnv(config, num_runs, workers, ray_address, seed, round_index, inner_factory)
    if workers > 1:
        return ProcessMetaVecEnv(config, num_runs, workers, seed, round_index, inner_factory)
    return MetaVecEnv(config, num_runs, seed, inner_factory, round_index=round_index)
