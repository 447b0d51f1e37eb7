"""Training driver: collect whole meta-rollouts with a vector env, replay windows, update with one optimizer.

``InContextTrainer(config, run_dir).learn()`` alternates collection (``n_envs`` meta-rollouts in parallel, acting one
step at a time through the encoder's KV cache, per-actor or bilevel epsilon) with gradient updates at a fixed replay
ratio (learning rate warmed up and decayed by :func:`learning_rate`; an optional Polyak-averaged copy of the weights
is what evaluation uses). It checkpoints atomically every few iterations (networks, EMA copy, optimizer, replay,
counters, random states) and resumes from the run directory's ``checkpoint.pt`` after a kill, collecting the same
tasks it would have collected.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.logger import Logger
from tqdm import tqdm

from meta.incontext.agent import InContextAgent, polyak_
from meta.incontext.config import AgentConfig, TrainConfig, with_saved_defaults
from meta.incontext.exploration import BilevelEpsilon, PerActorEpsilon, first_visits, novelty_coefficient
from meta.incontext.replay import Trajectory, TrajectoryReplay
from meta.incontext.tasks import EVAL_SEED_BASE, eval_task_seeds, make_task_env, rollout_length, task_env_fns
from rolloutlab.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from rolloutlab.config import save_yaml, to_dict
from rolloutlab.device import resolve_device
from rolloutlab.logs import announce_resume, make_logger
from rolloutlab.run_state import capture_rng, restore_rng
from rolloutlab.seeding import seed_everything
from rolloutlab.statistics import mean_with_stderr

CHECKPOINT_KIND = "incontext-agent"
__all__ = [
    "CHECKPOINT_KIND",
    "EVAL_SEED_BASE",
    "InContextTrainer",
    "agent_from_checkpoint",
    "ema_rate",
    "evaluate_agent",
    "learning_rate",
    "load_agent",
]

#: Epsilons of one trial: ``(n_envs,)`` for the whole trial, or a function of the step in the trial.
Epsilons = np.ndarray | Callable[[int], np.ndarray]


def task_kwargs(config: TrainConfig) -> dict[str, Any]:
    """The env keyword arguments of ``config.task`` (:func:`~meta.incontext.tasks.make_task_env`)."""
    return {
        "n_arms": config.n_arms,
        "horizon": config.horizon,
        "corridor_length": config.corridor_length,
        "keydoor_size": config.keydoor_size,
        "keydoor_episode_steps": config.keydoor_episode_steps,
        "keydoor_trial_steps": config.keydoor_trial_steps,
        "keydoor_cell_input": config.keydoor_cell_input,
        "keydoor_reached_cell_input": config.keydoor_reached_cell_input,
        "keydoor_cell_marks_entered": config.keydoor_cell_marks_entered,
        "previous_obs_input": config.previous_obs_input,
        "time_input": config.time_input,
    }


def learning_rate(update: int, agent: AgentConfig, planned_updates: int) -> float:
    """The learning rate of update ``update`` (0-based): linear warm-up, then a cosine decay.

    ``lr * (update + 1) / lr_warmup_updates`` during warm-up (AMAGO warms up over 500 updates, Sec. 4 / App. A), then
    ``lr * (f + (1 - f) (1 + cos(pi p)) / 2)`` with ``f = lr_final_fraction`` and ``p`` the fraction of the
    post-warm-up updates done (clipped to 1, so a run extended past its plan stays at the final rate).
    """
    if update < agent.lr_warmup_updates:
        return agent.lr * (update + 1) / agent.lr_warmup_updates
    decay = max(planned_updates - agent.lr_warmup_updates, 1)
    progress = min((update - agent.lr_warmup_updates) / decay, 1.0)
    f = agent.lr_final_fraction
    return agent.lr * (f + (1.0 - f) * 0.5 * (1.0 + math.cos(math.pi * progress)))


def ema_rate(updates_done: int, decay: float) -> float:
    """The Polyak rate of the evaluated weights' moving average after update ``updates_done + 1``:
    ``1 - min(decay, (1 + n) / (10 + n))`` with ``n = updates_done`` (TensorFlow's ``ExponentialMovingAverage`` with
    ``num_updates``).

    A fixed rate ``1 - decay`` keeps ``decay ** n`` of the initial random weights in the average: with decay 0.999,
    45 % after 800 updates (a 9.6k-step key-door gate run), so the policy scored was a blend of the trained weights
    and the untrained ones. The ramp averages only over trained weights early on and reaches ``decay`` after
    ``(10 decay - 1) / (1 - decay)`` updates (8,991 for 0.999).
    """
    return 1.0 - min(decay, (1.0 + updates_done) / (10.0 + updates_done))


def run_rollouts(
    agent: InContextAgent,
    venv: gym.vector.VectorEnv,
    seeds: list[int],
    epsilons: Epsilons | None,
    rng: np.random.Generator,
    generator: torch.Generator | None = None,
) -> list[Trajectory]:
    """Play one meta-rollout in each copy of ``venv`` (one task per seed) and return them as trajectories.

    Actions are sampled from the last discount's policy and replaced by a uniform action with probability
    ``epsilons[i]`` in copy ``i`` (``epsilons(t)[i]`` at step ``t`` of the trial when it is a function); with
    ``epsilons=None`` the agent acts greedily (argmax). A copy that finishes early keeps being stepped (the vector env
    resets it) but its steps are not recorded.

    Args:
        agent: The agent (put in eval mode here).
        venv: A vector env of RL^2-wrapped tasks in the default next-step autoreset mode.
        seeds: One task seed per copy.
        epsilons: ``(n_envs,)`` exploration rates or a function of the step in the trial returning them, or ``None``
            for greedy evaluation.
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
    t = 0
    while active.any():
        logits, state = agent.act_logits(torch.as_tensor(obs, dtype=torch.float32, device=device), state)
        if epsilons is None:
            actions = logits.argmax(-1).cpu().numpy()
        else:
            probs = torch.softmax(logits, -1)
            if generator is not None:
                probs = probs.to(generator.device)
            actions = torch.multinomial(probs, 1, generator=generator).squeeze(-1).cpu().numpy()
            eps = epsilons(t) if callable(epsilons) else epsilons
            explore = rng.random(n_envs) < eps
            actions = np.where(explore, rng.integers(0, n_actions, size=n_envs), actions)
        obs, rewards, terminated, truncated, _ = venv.step(actions)
        for i in np.flatnonzero(active):
            rec = record[i]
            rec["obs"].append(obs[i])
            rec["actions"].append(actions[i])
            rec["rewards"].append(rewards[i])
            rec["dones"].append(float(terminated[i]))
        active &= ~(terminated | truncated)
        t += 1
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
        # The task env's own observation leads every input (the RL^2 entries follow): what makes a step new.
        self.env_obs_dim = int(np.prod(probe.unwrapped.observation_space.shape))  # type: ignore[arg-type]
        self.n_actions = int(probe.action_space.n)  # type: ignore[attr-defined]
        probe.close()
        # The training actors' tasks (smaller key-door rooms when configured); evaluation builds its own, whole ones.
        rooms = {"keydoor_room_sizes": config.keydoor_train_rooms} if config.keydoor_train_rooms else {}
        self.venv = gym.vector.SyncVectorEnv(task_env_fns(config.task, config.n_envs, **kwargs, **rooms))
        self.device = resolve_device(config.device)
        # Initialized on the CPU (from the seeded global generator), then moved: the same weights on every device.
        self.agent = InContextAgent(self.input_dim, self.n_actions, config.agent).to(self.device)
        self.optimizer = torch.optim.AdamW(
            self.agent.optimized_parameters(), lr=config.agent.lr, weight_decay=config.agent.weight_decay, foreach=True
        )
        # The Polyak-averaged weights that evaluation uses (config.agent.ema_decay > 0).
        self.ema_agent: InContextAgent | None = None
        if config.agent.ema_decay > 0:
            self.ema_agent = copy.deepcopy(self.agent).requires_grad_(False)
        self.trial_length = rollout_length(
            config.task, config.horizon, config.corridor_length, config.keydoor_trial_steps
        )
        if (
            config.full_trials
            and config.agent.encoder == "transformer"
            and config.agent.context_len <= self.trial_length
        ):
            raise ValueError(
                f"full_trials needs agent.context_len > the trial length {self.trial_length} (every step must see the "
                f"whole trial, and the last observation too), got {config.agent.context_len}"
            )
        self.replay = TrajectoryReplay(config.buffer_trajectories)
        self.epsilon = PerActorEpsilon(
            config.n_envs, config.eps_start, config.eps_end_low, config.eps_end_high, config.eps_anneal_steps
        )
        self.bilevel = BilevelEpsilon(
            self.trial_length,
            config.eps_anneal_steps,
            *config.bilevel_start,
            *config.bilevel_end,
            randomize=config.bilevel_randomize,
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
        self.logger: Logger | None = None
        resuming = run_dir is not None and resume and (run_dir / "checkpoint.pt").exists()
        if run_dir is not None:
            if resuming:
                self.load(run_dir / "checkpoint.pt")
            run_dir.mkdir(parents=True, exist_ok=True)
            if not (run_dir / "config.yaml").exists():
                save_yaml(config, run_dir / "config.yaml")
            # A resumed run continues the one progress.csv from its checkpoint step (later rows are dropped).
            self.logger = make_logger(run_dir, ("csv", "tensorboard"), resume_step=self.env_steps if resuming else None)
            if resuming:
                announce_resume(run_dir, self.env_steps, config.total_env_steps)

    # ----------------------------------------------------------------------------------------------------- phases
    @property
    def eval_agent(self) -> InContextAgent:
        """The weights evaluation uses: the Polyak-averaged copy when there is one, else the online agent."""
        return self.agent if self.ema_agent is None else self.ema_agent

    def trial_epsilons(self) -> Epsilons:
        """Exploration of the next collection: per-actor epsilons, or the bilevel schedule of the step in the trial
        (the per-actor multipliers are drawn here, one per trial as in AMAGO)."""
        if self.config.exploration == "per_actor":
            return self.epsilon(self.env_steps)
        multipliers = self.bilevel.multipliers(self.config.n_envs, self.rng)
        env_steps = self.env_steps
        return lambda t: self.bilevel(env_steps, t, multipliers)

    def collect(self) -> dict[str, float]:
        """One iteration: a meta-rollout in every env copy with annealed epsilon, stored in the replay."""
        cfg = self.config
        seeds = [cfg.seed * 1_000_003 + self.iteration * cfg.n_envs + i for i in range(cfg.n_envs)]
        if cfg.keydoor_train_rooms and cfg.keydoor_train_rooms_until is not None:
            # Small rooms until the switch, the whole grid after it, for the tasks drawn at the reset below.
            rooms = cfg.keydoor_train_rooms if self.env_steps < cfg.keydoor_train_rooms_until else None
            for env in self.venv.envs:
                env.unwrapped.room_sizes = rooms  # type: ignore[attr-defined]
        start = time.perf_counter()
        trajectories = run_rollouts(self.agent, self.venv, seeds, self.trial_epsilons(), self.rng, self.generator)
        self.act_seconds += time.perf_counter() - start
        log = {"rollout/return_mean": float(np.mean([t.rewards.sum() for t in trajectories]))}
        if cfg.novelty_bonus > 0:
            visits = [first_visits(traj.obs, self.env_obs_dim) for traj in trajectories]
            for traj, new in zip(trajectories, visits, strict=True):
                traj.novelty = new
            log["rollout/first_visits_mean"] = float(np.mean([new.sum() for new in visits]))
        for traj in trajectories:
            self.replay.add(traj)
            self.env_steps += len(traj)
        self.iteration += 1
        return log

    @property
    def novelty_coef(self) -> float:
        """The first-visit bonus the critic's targets add now (``config.novelty_bonus``, annealed)."""
        cfg = self.config
        return novelty_coefficient(cfg.novelty_bonus, cfg.novelty_anneal_steps, self.env_steps)

    @property
    def planned_updates(self) -> int:
        """Updates the whole budget allows (the length of the learning-rate decay)."""
        return int(self.config.total_env_steps * self.config.updates_per_step)

    def update(self, n_updates: int) -> dict[str, float]:
        """``n_updates`` gradient steps on replayed windows (one AdamW, clipped), each followed by a Polyak step of the
        target critics and, when kept, of the EMA weights."""
        cfg = self.config
        self.agent.train()
        info: dict[str, float] = {}
        start = time.perf_counter()
        for _ in range(n_updates):
            lr = learning_rate(self.updates, cfg.agent, self.planned_updates)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            batch = self.replay.sample(cfg.batch_size, cfg.window, self.rng, cfg.full_trials, self.novelty_coef).to(
                self.device
            )
            loss, info = self.agent.loss(batch, self.generator)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            info["train/grad_norm"] = float(
                torch.nn.utils.clip_grad_norm_(self.agent.optimized_parameters(), cfg.agent.grad_clip)
            )
            self.optimizer.step()
            self.agent.update_targets()
            if self.ema_agent is not None:
                polyak_(self.ema_agent, self.agent, ema_rate(self.updates, cfg.agent.ema_decay))
            self.updates += 1
            info["train/lr"] = lr
            if cfg.novelty_bonus > 0:
                info["train/novelty_coef"] = self.novelty_coef
        self.update_seconds += time.perf_counter() - start
        return info

    def evaluate(self, n_tasks: int | None = None, max_parallel: int = 50, greedy: bool = True) -> dict[str, Any]:
        """Returns of :attr:`eval_agent` on the evaluation tasks (the same tasks for every seed and method: seeds from
        ``EVAL_SEED_BASE``), greedy by default, else sampled from the policy.

        Returns:
            ``{"mean": float, "stderr": float, "returns": [float, ...]}``, returns per meta-rollout.
        """
        n_tasks = self.config.eval_tasks if n_tasks is None else n_tasks
        returns = evaluate_agent(self.eval_agent, self.config, n_tasks, max_parallel, greedy=greedy)
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
        # The loop's last evaluation may have been at this very step (or a resumed finished run evaluates again):
        # one row per env step in the learning curve.
        if self.history and self.history[-1]["env_steps"] == self.env_steps:
            self.history.pop()
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
            **({} if self.ema_agent is None else {"ema_agent": self.ema_agent.state_dict()}),
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
        if self.ema_agent is not None:
            self.ema_agent.load_state_dict(state["ema_agent"])
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
    all_seeds = eval_task_seeds(((n_tasks + n_parallel - 1) // n_parallel) * n_parallel)
    try:
        for first in range(0, n_tasks, n_parallel):
            seeds = all_seeds[first : first + n_parallel]
            trajectories = run_rollouts(agent, venv, seeds, no_epsilon, rng, generator)
            returns.extend(float(t.rewards.sum()) for t in trajectories[: n_tasks - first])
    finally:
        venv.close()
    return np.asarray(returns)


def load_agent(path: Path, device: str | None = None) -> tuple[InContextAgent, TrainConfig]:
    """Rebuild the agent and its config from a trainer checkpoint (for ``rolloutlab incontext eval``): the EMA
    weights when the run kept them (what its evaluations used), else the online ones.

    Args:
        path: The trainer's ``checkpoint.pt``.
        device: Where to put the agent (``None``: the device the run trained on).
    """
    return agent_from_checkpoint(load_checkpoint(path, kind=CHECKPOINT_KIND), device)


def agent_from_checkpoint(envelope: dict[str, Any], device: str | None = None) -> tuple[InContextAgent, TrainConfig]:
    """:func:`load_agent` from a checkpoint already loaded (``rolloutlab.checkpoint.load_checkpoint``), for callers
    that also read its counters or replay."""
    from rolloutlab.config import from_dict

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
    state = envelope["state"]
    agent.load_state_dict(state["ema_agent"] if "ema_agent" in state else state["agent"])
    return agent.to(resolve_device(config.device)), config
