"""Training driver: collect whole meta-rollouts with a vector env, replay windows, update with one optimizer.

``InContextTrainer(config, run_dir).learn()`` alternates collection (``n_envs`` meta-rollouts in parallel, acting one
step at a time through the encoder's KV cache, per-actor epsilon) with gradient updates at a fixed replay ratio. It
checkpoints atomically every few iterations (networks, optimizer, replay, counters, random states) and resumes from
the run directory's ``checkpoint.pt`` after a kill, collecting the same tasks it would have collected.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tqdm import tqdm

from meta.incontext.agent import InContextAgent
from meta.incontext.config import TrainConfig, with_saved_defaults
from meta.incontext.exploration import PerActorEpsilon
from meta.incontext.replay import Trajectory, TrajectoryReplay
from meta.incontext.tasks import make_task_env, task_env_fns
from rolloutlab.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from rolloutlab.config import to_dict
from rolloutlab.device import resolve_device
from rolloutlab.logs import make_logger
from rolloutlab.run_state import capture_rng, restore_rng
from rolloutlab.seeding import seed_everything
from rolloutlab.statistics import mean_with_stderr

CHECKPOINT_KIND = "incontext-agent"
#: Evaluation tasks are seeded from here (same tasks for every training seed and every method).
EVAL_SEED_BASE = 10_000_000


def task_kwargs(config: TrainConfig) -> dict[str, int]:
    """The env keyword arguments of ``config.task``."""
    return {"n_arms": config.n_arms, "horizon": config.horizon, "corridor_length": config.corridor_length}


def run_rollouts(
    agent: InContextAgent,
    venv: gym.vector.VectorEnv,
    seeds: list[int],
    epsilons: np.ndarray | None,
    rng: np.random.Generator,
    generator: torch.Generator | None = None,
) -> list[Trajectory]:
    """Play one meta-rollout in each copy of ``venv`` (one task per seed) and return them as trajectories.

    Actions are sampled from the last discount's policy and replaced by a uniform action with probability
    ``epsilons[i]`` in copy ``i``; with ``epsilons=None`` the agent acts greedily (argmax). A copy that finishes early
    keeps being stepped (the vector env resets it) but its steps are not recorded.

    Args:
        agent: The agent (put in eval mode here).
        venv: A vector env of RL^2-wrapped tasks in the default next-step autoreset mode.
        seeds: One task seed per copy.
        epsilons: ``(n_envs,)`` exploration rates, or ``None`` for greedy evaluation.
        rng: Draws the epsilon coin flips and random actions.
        generator: Torch generator for policy sampling; actions are drawn on its device (a CPU generator gives the
            same draws whatever the agent's device).
    """
    agent.eval()
    device = agent.device
    n_envs = venv.num_envs
    obs, _ = venv.reset(seed=seeds)  # type: ignore[arg-type]  # a list seeds each copy
    n_actions = int(venv.single_action_space.n)  # type: ignore[attr-defined]
    state = agent.init_state(n_envs)
    record: list[dict[str, list[Any]]] = [
        {"obs": [obs[i]], "actions": [], "rewards": [], "dones": []} for i in range(n_envs)
    ]
    active = np.ones(n_envs, dtype=bool)
    while active.any():
        logits, state = agent.act_logits(torch.as_tensor(obs, dtype=torch.float32, device=device), state)
        if epsilons is None:
            actions = logits.argmax(-1).cpu().numpy()
        else:
            probs = torch.softmax(logits, -1)
            if generator is not None:
                probs = probs.to(generator.device)
            actions = torch.multinomial(probs, 1, generator=generator).squeeze(-1).cpu().numpy()
            explore = rng.random(n_envs) < epsilons
            actions = np.where(explore, rng.integers(0, n_actions, size=n_envs), actions)
        obs, rewards, terminated, truncated, _ = venv.step(actions)
        for i in np.flatnonzero(active):
            rec = record[i]
            rec["obs"].append(obs[i])
            rec["actions"].append(actions[i])
            rec["rewards"].append(rewards[i])
            rec["dones"].append(float(terminated[i]))
        active &= ~(terminated | truncated)
    return [
        Trajectory(
            obs=np.asarray(rec["obs"], dtype=np.float32),
            actions=np.asarray(rec["actions"], dtype=np.int64),
            rewards=np.asarray(rec["rewards"], dtype=np.float32),
            dones=np.asarray(rec["dones"], dtype=np.float32),
        )
        for rec in record
    ]


class InContextTrainer:
    """Trains an :class:`~meta.incontext.agent.InContextAgent` on one task.

    Args:
        config: The run's configuration.
        run_dir: Where ``checkpoint.pt``, ``progress.csv`` and ``result.json`` go; ``None`` keeps everything in memory.
        resume: Continue from ``run_dir/checkpoint.pt`` if it exists.
        progress: Show a tqdm bar.
    """

    def __init__(
        self, config: TrainConfig, run_dir: Path | None = None, resume: bool = True, progress: bool = False
    ) -> None:
        self.config = config
        self.run_dir = run_dir
        self.progress = progress
        seed_everything(config.seed)
        kwargs = task_kwargs(config)
        probe = make_task_env(config.task, **kwargs)
        self.input_dim = int(np.prod(probe.observation_space.shape))  # type: ignore[arg-type]
        self.n_actions = int(probe.action_space.n)  # type: ignore[attr-defined]
        probe.close()
        self.venv = gym.vector.SyncVectorEnv(task_env_fns(config.task, config.n_envs, **kwargs))
        self.device = resolve_device(config.device)
        # Initialized on the CPU (from the seeded global generator), then moved: the same weights on every device.
        self.agent = InContextAgent(self.input_dim, self.n_actions, config.agent).to(self.device)
        self.optimizer = torch.optim.AdamW(
            self.agent.optimized_parameters(), lr=config.agent.lr, weight_decay=config.agent.weight_decay
        )
        self.replay = TrajectoryReplay(config.buffer_trajectories)
        self.epsilon = PerActorEpsilon(
            config.n_envs, config.eps_start, config.eps_end_low, config.eps_end_high, config.eps_anneal_steps
        )
        self.rng = np.random.default_rng(config.seed)
        self.generator = torch.Generator().manual_seed(config.seed)
        self.env_steps = 0
        self.updates = 0
        self.iteration = 0
        self.act_seconds = 0.0
        self.update_seconds = 0.0
        self.history: list[dict[str, float]] = []
        self._next_eval = config.eval_every_steps
        self.logger = make_logger(run_dir, ("csv",)) if run_dir is not None else None
        if run_dir is not None and resume and (run_dir / "checkpoint.pt").exists():
            self.load(run_dir / "checkpoint.pt")

    # ----------------------------------------------------------------------------------------------------- phases
    def collect(self) -> dict[str, float]:
        """One iteration: a meta-rollout in every env copy with annealed per-actor epsilon, stored in the replay."""
        cfg = self.config
        seeds = [cfg.seed * 1_000_003 + self.iteration * cfg.n_envs + i for i in range(cfg.n_envs)]
        start = time.perf_counter()
        trajectories = run_rollouts(
            self.agent, self.venv, seeds, self.epsilon(self.env_steps), self.rng, self.generator
        )
        self.act_seconds += time.perf_counter() - start
        for traj in trajectories:
            self.replay.add(traj)
            self.env_steps += len(traj)
        self.iteration += 1
        return {"rollout/return_mean": float(np.mean([t.rewards.sum() for t in trajectories]))}

    def update(self, n_updates: int) -> dict[str, float]:
        """``n_updates`` gradient steps on replayed windows (one AdamW, clipped), each followed by a Polyak step."""
        cfg = self.config
        self.agent.train()
        info: dict[str, float] = {}
        start = time.perf_counter()
        for _ in range(n_updates):
            batch = self.replay.sample(cfg.batch_size, cfg.window, self.rng).to(self.device)
            loss, info = self.agent.loss(batch, self.generator)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            info["train/grad_norm"] = float(
                torch.nn.utils.clip_grad_norm_(self.agent.optimized_parameters(), cfg.agent.grad_clip)
            )
            self.optimizer.step()
            self.agent.update_targets()
            self.updates += 1
        self.update_seconds += time.perf_counter() - start
        return info

    def evaluate(self, n_tasks: int | None = None, max_parallel: int = 50) -> dict[str, Any]:
        """Greedy returns on fresh tasks (the same tasks for every seed and method: seeds from ``EVAL_SEED_BASE``).

        Returns:
            ``{"mean": float, "stderr": float, "returns": [float, ...]}``, returns per meta-rollout.
        """
        n_tasks = self.config.eval_tasks if n_tasks is None else n_tasks
        returns = evaluate_agent(self.agent, self.config, n_tasks, max_parallel)
        mean, stderr = mean_with_stderr(returns)
        return {"mean": mean, "stderr": stderr, "returns": [float(r) for r in returns]}

    def learn(self) -> dict[str, Any]:
        """Collect and update until ``total_env_steps`` (or ``max_minutes``), evaluating along the way.

        Returns:
            A result dict: final evaluation, env steps and updates done, costs, whether the time cap stopped the run.
        """
        cfg = self.config
        wall_start = time.perf_counter()
        stopped_by_time = False
        bar = tqdm(total=cfg.total_env_steps, initial=self.env_steps, disable=not self.progress, unit="step")
        while self.env_steps < cfg.total_env_steps:
            if cfg.max_minutes is not None and time.perf_counter() - wall_start > 60.0 * cfg.max_minutes:
                stopped_by_time = True
                break
            before = self.env_steps
            log = self.collect()
            if self.env_steps >= cfg.learning_starts:
                due = int(self.env_steps * cfg.updates_per_step) - self.updates
                log.update(self.update(max(due, 0)))
            bar.update(self.env_steps - before)
            if self.env_steps >= self._next_eval:
                self._next_eval += cfg.eval_every_steps
                result = self.evaluate()
                log["eval/return_mean"] = result["mean"]
                self.history.append({"env_steps": self.env_steps, "eval_return": result["mean"]})
                bar.set_postfix(eval=f"{result['mean']:.2f}")
                reached = cfg.stop_at_return is not None and result["mean"] >= cfg.stop_at_return
            else:
                reached = False
            self._log(log)
            if self.run_dir is not None and (reached or self.iteration % cfg.checkpoint_every == 0):
                self.save(self.run_dir / "checkpoint.pt")
            if reached:
                break
        bar.close()
        final = self.evaluate()
        self.history.append({"env_steps": self.env_steps, "eval_return": final["mean"]})
        if self.run_dir is not None:
            self.save(self.run_dir / "checkpoint.pt")
        return {
            "eval": final,
            "env_steps": self.env_steps,
            "updates": self.updates,
            "stopped_by_time_cap": stopped_by_time,
            "act_steps_per_second": self.env_steps / max(self.act_seconds, 1e-9),
            "updates_per_second": self.updates / max(self.update_seconds, 1e-9),
            "history": self.history,
            "config": to_dict(cfg),
        }

    def _log(self, values: dict[str, float]) -> None:
        if self.logger is None:
            return
        for key, value in values.items():
            self.logger.record(key, value)
        self.logger.record("time/env_steps", self.env_steps)
        self.logger.record("time/updates", self.updates)
        self.logger.dump(self.env_steps)

    # ---------------------------------------------------------------------------------------------- checkpointing
    def save(self, path: Path) -> Path:
        """Atomically checkpoint everything a resumed run needs to continue as this one would have."""
        state = {
            "agent": self.agent.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "replay": self.replay.state_dict(),
            "counters": {
                "env_steps": self.env_steps,
                "updates": self.updates,
                "iteration": self.iteration,
                "next_eval": self._next_eval,
            },
            "seconds": {"act": self.act_seconds, "update": self.update_seconds},
            "history": self.history,
            "rng": capture_rng({"run": self.rng, "generator": self.generator}),
        }
        return save_checkpoint(path, state, kind=CHECKPOINT_KIND, config=to_dict(self.config))

    def load(self, path: Path) -> None:
        """Restore a checkpoint written by :meth:`save` (weights-only loading)."""
        state = load_checkpoint(path, kind=CHECKPOINT_KIND)["state"]
        if "rng" not in state:
            raise CheckpointError(
                f"{path} predates the trainer's current RNG layout (rolloutlab.run_state) and cannot be resumed; "
                "its agent still loads for evaluation"
            )
        self.agent.load_state_dict(state["agent"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.replay.load_state_dict(state["replay"])
        counters = state["counters"]
        self.env_steps = int(counters["env_steps"])
        self.updates = int(counters["updates"])
        self.iteration = int(counters["iteration"])
        self._next_eval = int(counters["next_eval"])
        self.act_seconds = float(state["seconds"]["act"])
        self.update_seconds = float(state["seconds"]["update"])
        self.history = list(state["history"])
        restore_rng(state["rng"], {"run": self.rng, "generator": self.generator})


def evaluate_agent(
    agent: InContextAgent, config: TrainConfig, n_tasks: int, max_parallel: int = 50, greedy: bool = True
) -> np.ndarray:
    """Total reward per meta-rollout on ``n_tasks`` evaluation tasks, ``(n_tasks,)``.

    By default the agent takes the argmax of its policy (the headline number); ``greedy=False`` samples from the
    policy without epsilon, with a fixed torch generator so that the evaluation is repeatable.
    """
    kwargs = task_kwargs(config)
    returns: list[float] = []
    n_parallel = min(n_tasks, max_parallel)
    venv = gym.vector.SyncVectorEnv(task_env_fns(config.task, n_parallel, **kwargs))
    rng = np.random.default_rng(0)
    generator = torch.Generator().manual_seed(0)
    no_epsilon = None if greedy else np.zeros(n_parallel)
    try:
        for first in range(0, n_tasks, n_parallel):
            seeds = [EVAL_SEED_BASE + first + i for i in range(n_parallel)]
            trajectories = run_rollouts(agent, venv, seeds, no_epsilon, rng, generator)
            returns.extend(float(t.rewards.sum()) for t in trajectories[: n_tasks - first])
    finally:
        venv.close()
    return np.asarray(returns)


def load_agent(path: Path, device: str | None = None) -> tuple[InContextAgent, TrainConfig]:
    """Rebuild the agent and its config from a trainer checkpoint (for ``rolloutlab incontext eval``).

    Args:
        path: The trainer's ``checkpoint.pt``.
        device: Where to put the agent (``None``: the device the run trained on).
    """
    from rolloutlab.config import from_dict

    envelope = load_checkpoint(path, kind=CHECKPOINT_KIND)
    config = from_dict(TrainConfig, with_saved_defaults(envelope["config"]))
    if device is not None:
        config = dataclasses.replace(config, device=device)
    probe = make_task_env(config.task, **task_kwargs(config))
    agent = InContextAgent(
        int(np.prod(probe.observation_space.shape)),  # type: ignore[arg-type]
        int(probe.action_space.n),  # type: ignore[attr-defined]
        config.agent,
    )
    probe.close()
    agent.load_state_dict(envelope["state"]["agent"])
    return agent.to(resolve_device(config.device)), config
