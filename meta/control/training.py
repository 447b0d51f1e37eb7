"""Meta-training: an SB3 DQN (or PPO) meta-agent on the meta vector env, checkpointed at round boundaries.

One trainer for every meta-MDP of :mod:`meta.control.mdp`: the rollout-length one
(:class:`meta.rollout_length.env.MetaEnvConfig`) and the RLVR group-size one
(:class:`meta.rlvr.meta_mdp.RLVRMetaConfig`). The config of each is named in :data:`META_PROBLEMS` by its
``problem_kind`` and imported when a run uses it, so neither world imports the other.

A *round* is B meta-episodes run in lockstep (one inner run each). After every round the whole meta-training state
is saved atomically with :func:`rolloutlab.checkpoint.save_checkpoint` (plain tensors and numbers, loaded with
``weights_only``): the SB3 policy and optimizer, the DQN replay buffer, the step / update counters, the random number
generator states and the per-episode history. A run killed at any point (SIGKILL included) resumes from the last
finished round and, with a deterministic inner learner, reaches the same final policy as an uninterrupted run.

Outputs in the run directory: ``config.yaml``, ``meta_checkpoint.pt``, ``meta_policy.pt`` (what
:class:`~meta.rollout_length.learned.LearnedController` loads), ``meta_training.json`` (learning curve, K schedules,
timing), ``meta_training.png``, and SB3 logs (``sb3/progress.csv``, continued by a resumed session, and TensorBoard
events).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv

from meta.control.parallel import make_meta_vec_env, resolve_workers
from rolloutlab.checkpoint import atomic_write_json, load_checkpoint, save_checkpoint
from rolloutlab.config import ConfigError, from_dict, save_yaml, to_dict
from rolloutlab.logs import announce_resume, make_logger
from rolloutlab.run_state import capture_rng, restore_rng

CHECKPOINT_NAME = "meta_checkpoint.pt"
POLICY_NAME = "meta_policy.pt"
HISTORY_NAME = "meta_training.json"
CHECKPOINT_KIND = "meta-train"
POLICY_KIND = "meta-policy"


@dataclass
class MetaAgentConfig:
    """The SB3 meta-agent's hyperparameters (counts are in meta-transitions, i.e. decisions).

    Why these values. DQN is Bhatia, Thomas & Zilberstein's (2022) meta-agent; PPO is the on-policy alternative.
    Both are small ([64, 64]) because the observation has ten features. The buffer (50k) holds every meta-transition
    of the issue's runs (about 5,000), so nothing is forgotten. DQN makes one gradient step per meta-transition
    collected: meta-transitions cost minutes of inner training each, so updates are cheap by comparison. Its target
    syncs every 200 updates. Epsilon anneals from 1 to 0.05 over the first half of the run, sized to the run like
    ``learning_starts``: a K that is only tried late cannot be valued. With the meta-reward on a fixed scale (returns
    in about [-1, 1], :mod:`meta.rollout_length.env`), the default Adam step of 5e-4 moves the Q-values to their size
    within a few hundred updates (``tests/meta/test_meta_values.py`` checks them against Monte-Carlo returns).
    PPO keeps SB3's 10 epochs and adds an entropy bonus of 0.01, so that the three-way choice does not collapse
    before the first rounds are scored.

    Attributes:
        algo: ``"dqn"`` (the paper's choice) or ``"ppo"``.
        learning_rate: Adam step size.
        net_arch: Hidden layer sizes of the Q-network (DQN) or of the policy and value networks (PPO).
        gamma: Discount; 1.0 because the meta-reward telescopes only undiscounted (the paper's setting).
        batch_size: Minibatch size.
        buffer_size: DQN replay capacity.
        learning_starts: DQN transitions collected before the first update; ``None`` sizes it to the run, 5% of its
            meta-transitions (at least one batch), so that a short and a long run both start learning early.
        gradient_steps: DQN updates per vector step; -1 means one per transition collected.
        target_update_interval: DQN target-network sync period.
        exploration_fraction: Fraction of training over which DQN's epsilon anneals.
        exploration_initial_eps: Initial epsilon.
        exploration_final_eps: Final epsilon.
        n_epochs: PPO epochs per round.
        ent_coef: PPO entropy bonus.
    """

    algo: Literal["dqn", "ppo"] = "dqn"
    learning_rate: float = 5e-4
    net_arch: list[int] = field(default_factory=lambda: [64, 64])
    gamma: float = 1.0
    batch_size: int = 64
    buffer_size: int = 50_000
    learning_starts: int | None = None
    gradient_steps: int = -1
    target_update_interval: int = 200
    exploration_fraction: float = 0.5
    exploration_initial_eps: float = 1.0
    exploration_final_eps: float = 0.05
    n_epochs: int = 10
    ent_coef: float = 0.01


#: The meta-MDPs meta-training knows: ``problem_kind`` -> ``"module:Class"`` of its settings, tried in this order for
#: settings that do not say their ``problem_kind`` (the rollout-length settings have no such field).
META_PROBLEMS: dict[str, str] = {
    "rollout_length": "meta.rollout_length.env:MetaEnvConfig",
    "rlvr_group_size": "meta.rlvr.meta_mdp:RLVRMetaConfig",
}


def _problem_class(path: str) -> type:
    module, _, name = path.partition(":")
    cls: type = getattr(importlib.import_module(module), name)
    return cls


def meta_problem_config(env: Any) -> Any:
    """The meta-MDP settings ``env`` describes: a settings object is returned as it is; a mapping (a config file's
    ``env:`` section) is built as the class its ``problem_kind`` names, or, without one, as the first class of
    :data:`META_PROBLEMS` that accepts it.

    Raises:
        ConfigError: an unknown ``problem_kind``, or settings no class accepts (with each class's reason).
    """
    if not isinstance(env, Mapping):
        return env
    kind = env.get("problem_kind")
    if kind is not None and kind not in META_PROBLEMS:
        raise ConfigError(f"env.problem_kind: unknown meta-MDP {kind!r}; known: {', '.join(META_PROBLEMS)}")
    paths = [META_PROBLEMS[kind]] if kind is not None else list(META_PROBLEMS.values())
    if kind == "rollout_length":
        env = {k: v for k, v in env.items() if k != "problem_kind"}  # MetaEnvConfig is the default, without the field
    reasons = []
    for path in paths:
        cls = _problem_class(path)
        try:
            return from_dict(cls, env)
        except ConfigError as exc:
            reasons.append(f"as {cls.__name__}: {exc}")
    raise ConfigError(f"env: {'; '.join(reasons)}")


@dataclass
class MetaTrainConfig:
    """A meta-training run.

    Attributes:
        env: The meta-MDP: the rollout-length one (:class:`~meta.rollout_length.env.MetaEnvConfig`: inner env,
            budget, phase, K cap, inner learner settings; the default) or the RLVR one
            (:class:`~meta.rlvr.meta_mdp.RLVRMetaConfig`: GRPO's group size under a token budget), or a mapping of
            either (:func:`meta_problem_config`). Both go through the same :mod:`meta.control.mdp` vector env.
        agent: The SB3 meta-agent.
        episodes: Meta-episodes (inner runs) to train on; rounded up to a multiple of ``runs_per_round``.
        runs_per_round: B, inner runs advanced together (batched in one learner per worker).
        workers: W, local worker processes sharing each round's runs: 0 (the default) means one per available core,
            at most ``runs_per_round`` (:func:`meta.control.parallel.resolve_workers`); 1 runs them in-process.
            Every worker draws the whole round and builds its own share of it, so the inner runs, and with an inner
            learner whose runs are independent the whole run, do not depend on W (:mod:`meta.control.parallel`):
            bit for bit with Dyna-DQN's per-run world models, to float32 rounding with its run-axis model
            (``batched_models``).
            ``meta_training.json`` records the count used (``workers``).
        ray_address: Ray cluster address; if set, the W workers are Ray actors (needs the ``distributed`` extra).
        seed: Seeds the meta-agent and every round's physics / inner seeds.
    """

    # Any: the settings class comes from META_PROBLEMS when a run uses it (a mapping is converted in __post_init__).
    env: Any = field(default_factory=lambda: meta_problem_config({}))
    agent: MetaAgentConfig = field(default_factory=MetaAgentConfig)
    episodes: int = 300
    runs_per_round: int = 10
    workers: int = 0
    ray_address: str | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        self.env = meta_problem_config(self.env)
        for name in ("episodes", "runs_per_round"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.workers <= self.runs_per_round:
            raise ValueError(
                f"workers must be between 0 (one per core) and runs_per_round={self.runs_per_round} (each worker "
                f"holds at least one run of a round), got {self.workers}"
            )

    def outcome_settings(self) -> dict[str, Any]:
        """The settings the results depend on, as plain data: all but ``workers`` and ``ray_address``, which say only
        where the inner runs execute (what a run resumed with other settings must still match)."""
        return {k: v for k, v in to_dict(self).items() if k not in ("workers", "ray_address")}

    @property
    def resolved_workers(self) -> int:
        """W as run on this machine (``workers``, or for 0 one per available core, at most ``runs_per_round``)."""
        return resolve_workers(self.workers, self.runs_per_round)

    @property
    def rounds(self) -> int:
        """Rounds of ``runs_per_round`` meta-episodes."""
        return math.ceil(self.episodes / self.runs_per_round)

    @property
    def total_timesteps(self) -> int:
        """Meta-transitions over the whole run (SB3's ``total_timesteps``)."""
        return self.rounds * self.env.horizon * self.runs_per_round


def build_agent(cfg: MetaTrainConfig, venv: VecEnv) -> BaseAlgorithm:
    """The SB3 meta-agent for ``cfg.agent`` on ``venv`` (seeded with ``cfg.seed``)."""
    a = cfg.agent
    if a.algo == "dqn":
        from stable_baselines3 import DQN

        return DQN(
            "MlpPolicy",
            venv,
            learning_rate=a.learning_rate,
            buffer_size=a.buffer_size,
            learning_starts=a.learning_starts
            if a.learning_starts is not None
            else max(a.batch_size, cfg.total_timesteps // 20),
            batch_size=a.batch_size,
            gamma=a.gamma,
            train_freq=1,
            gradient_steps=a.gradient_steps,
            target_update_interval=a.target_update_interval,
            exploration_fraction=a.exploration_fraction,
            exploration_initial_eps=a.exploration_initial_eps,
            exploration_final_eps=a.exploration_final_eps,
            policy_kwargs={"net_arch": list(a.net_arch)},
            seed=cfg.seed,
            device="cpu",
        )
    from stable_baselines3 import PPO

    # One PPO rollout = one round (horizon steps of B envs), so checkpoints fall between rollouts.
    n_steps = cfg.env.horizon
    return PPO(
        "MlpPolicy",
        venv,
        learning_rate=a.learning_rate,
        n_steps=n_steps,
        batch_size=min(a.batch_size, n_steps * venv.num_envs),
        n_epochs=a.n_epochs,
        gamma=a.gamma,
        ent_coef=a.ent_coef,
        policy_kwargs={"net_arch": list(a.net_arch)},
        seed=cfg.seed,
        device="cpu",
    )


def _replay_state(model: BaseAlgorithm) -> dict[str, Any] | None:
    buffer = getattr(model, "replay_buffer", None)
    if buffer is None:
        return None
    arrays = ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")
    state: dict[str, Any] = {name: torch.as_tensor(np.asarray(getattr(buffer, name))) for name in arrays}
    state["pos"] = int(buffer.pos)
    state["full"] = bool(buffer.full)
    return state


def _load_replay_state(model: BaseAlgorithm, state: dict[str, Any] | None) -> None:
    buffer = getattr(model, "replay_buffer", None)
    if buffer is None or state is None:
        return
    for name, value in state.items():
        if name in ("pos", "full"):
            setattr(buffer, name, value)
        else:
            current = getattr(buffer, name)
            if tuple(value.shape) != current.shape:
                raise ValueError(f"replay buffer {name}: checkpoint shape {tuple(value.shape)} != {current.shape}")
            setattr(buffer, name, value.numpy().astype(current.dtype))


_COUNTERS = ("num_timesteps", "_n_calls", "_n_updates", "_episode_num")
# Set by SB3 only *after* a step, but read by the first action of a resumed session, so they are saved too.
_SCHEDULE_STATE = ("exploration_rate", "_current_progress_remaining")


class MetaTrainer:
    """Runs (or resumes) meta-training in a run directory.

    Args:
        cfg: The run's settings (ignored on resume in favour of the checkpoint's, which must exist).
        run_dir: Where everything is written.
        inner_factory: Inner-learner override (tests); default from ``cfg.env``.
        show_progress: Show a tqdm bar over rounds.
    """

    def __init__(
        self,
        cfg: MetaTrainConfig,
        run_dir: str | Path,
        inner_factory: Any = None,
        show_progress: bool = True,
    ) -> None:
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.inner_factory = inner_factory
        self.show_progress = show_progress
        self.history: list[dict[str, Any]] = []
        self.rounds_done = 0
        self.wall_seconds = 0.0
        self.sessions = 0
        #: The worker count of the latest session (what ``workers`` resolved to on its machine).
        self.workers = cfg.resolved_workers
        self._session_start: float | None = time.perf_counter()
        self.model: BaseAlgorithm | None = None
        self._resume_state: dict[str, Any] | None = None

    @classmethod
    def resume(
        cls,
        run_dir: str | Path,
        inner_factory: Any = None,
        show_progress: bool = True,
        episodes: int | None = None,
        workers: int | None = None,
    ) -> MetaTrainer:
        """A trainer that continues the run saved in ``run_dir`` (same config).

        Args:
            run_dir: The run directory.
            inner_factory: As for the constructor.
            show_progress: As for the constructor.
            episodes: A larger final size than the saved one extends a run (finished or not) by more rounds with
                fresh inner runs; ``None`` keeps the saved size. The agent's schedules (epsilon) are fractions of the
                new total, so an extension past the exploration phase continues at the final epsilon.
            workers: The worker count from this session on (``MetaTrainConfig.workers``; the results do not depend
                on it); ``None`` keeps the saved one.

        Raises:
            ValueError: ``episodes`` is smaller than the saved final size, or ``workers`` is out of range.
        """
        envelope = load_checkpoint(Path(run_dir) / CHECKPOINT_NAME, kind=CHECKPOINT_KIND)
        cfg = from_dict(MetaTrainConfig, envelope["config"])
        if workers is not None and workers != cfg.workers:
            cfg = dataclasses.replace(cfg, workers=int(workers))
        if episodes is not None and episodes != cfg.episodes:
            if episodes < cfg.episodes:
                raise ValueError(
                    f"episodes={episodes} is below the {cfg.episodes} meta-episodes the run in {run_dir} was started "
                    "with: a run can be extended, not shortened"
                )
            cfg = dataclasses.replace(cfg, episodes=int(episodes))
        trainer = cls(cfg, run_dir, inner_factory, show_progress)
        trainer._resume_state = envelope["state"]
        return trainer

    # -- state ---------------------------------------------------------------------------------------------------

    def _elapsed(self) -> float:
        if self._session_start is None:  # a finished run reopened: no time passes for it
            return self.wall_seconds
        return self.wall_seconds + (time.perf_counter() - self._session_start)

    def save(self) -> None:
        """Atomically write the checkpoint, the exported policy and the history JSON."""
        model = self.model
        assert model is not None
        state = {
            "algo": self.cfg.agent.algo,
            "policy": model.policy.state_dict(),
            "optimizer": model.policy.optimizer.state_dict(),
            "counters": {name: int(getattr(model, name, 0)) for name in _COUNTERS},
            "schedule": {name: float(getattr(model, name)) for name in _SCHEDULE_STATE if hasattr(model, name)},
            "rounds_done": self.rounds_done,
            "rng": capture_rng({"action_space": model.action_space.np_random}),
            "replay": _replay_state(model),
            "history": self.history,
            "wall_seconds": self._elapsed(),
            "sessions": self.sessions,
            "workers": self.workers,
        }
        save_checkpoint(self.run_dir / CHECKPOINT_NAME, state, kind=CHECKPOINT_KIND, config=to_dict(self.cfg))
        export_policy(model, self.cfg, self.run_dir / POLICY_NAME)
        atomic_write_json(self.run_dir / HISTORY_NAME, self.summary())

    def summary(self) -> dict[str, Any]:
        """Learning curve, K schedules and timing so far (what ``meta_training.json`` holds)."""
        episodes = len(self.history)
        inner_steps = episodes * self.cfg.env.horizon * self.cfg.env.phase_length
        wall = self._elapsed()
        return {
            "config": to_dict(self.cfg),
            "episodes_done": episodes,
            "rounds_done": self.rounds_done,
            "wall_seconds": wall,
            "inner_env_steps": inner_steps,
            "inner_steps_per_second": inner_steps / wall if wall > 0 else None,
            "sessions": self.sessions,
            "workers": self.workers,
            "history": self.history,
        }

    def _load(self, model: BaseAlgorithm, state: dict[str, Any]) -> None:
        if state["algo"] != self.cfg.agent.algo:
            raise ValueError(f"checkpoint holds a {state['algo']} agent, config says {self.cfg.agent.algo}")
        model.policy.load_state_dict(state["policy"])
        model.policy.optimizer.load_state_dict(state["optimizer"])
        for name, value in {**state["counters"], **state["schedule"]}.items():
            if hasattr(model, name):
                setattr(model, name, value)
        _load_replay_state(model, state["replay"])
        self._restore_progress(state)

    def _restore_progress(self, state: dict[str, Any]) -> None:
        self.history = list(state["history"])
        self.rounds_done = int(state["rounds_done"])
        self.wall_seconds = float(state["wall_seconds"])
        self.sessions = int(state["sessions"])
        # A checkpoint written before the count was saved ran with the count its config names.
        self.workers = int(state.get("workers", self.cfg.workers or 1))

    def load_agent(self) -> BaseAlgorithm:
        """The meta-agent as saved in the run's checkpoint (policy, optimizer, counters, replay buffer), without
        training: for diagnostics of a finished run (e.g. :func:`meta.rollout_length.diagnostics.value_check`).

        Raises:
            ValueError: the trainer was not made by :meth:`resume` (there is no checkpoint state to load).
        """
        if self._resume_state is None:
            raise ValueError("load_agent needs a trainer made by MetaTrainer.resume(run_dir)")
        from meta.control.mdp import MetaVecEnv

        # The agent only needs the spaces; the vector env is never reset, so no inner run starts.
        venv = MetaVecEnv(self.cfg.env, self.cfg.runs_per_round, self.cfg.seed, self.inner_factory)
        model = build_agent(self.cfg, venv)
        self._load(model, self._resume_state)
        return model

    # -- training ------------------------------------------------------------------------------------------------

    def train(self) -> dict[str, Any]:
        """Train to ``cfg.rounds`` rounds (from the checkpoint if resuming); returns :meth:`summary`."""
        from rolloutlab.seeding import seed_everything
        from rolloutlab.threads import set_torch_threads

        set_torch_threads()
        cfg = self.cfg
        self.run_dir.mkdir(parents=True, exist_ok=True)
        resume = self._resume_state
        if resume is None:
            save_yaml(cfg, self.run_dir / "config.yaml")
            seed_everything(cfg.seed)
        rounds_done = int(resume["rounds_done"]) if resume is not None else 0
        if resume is not None and rounds_done >= cfg.rounds:
            # Already finished: report it as saved, without a new logger directory, session count or checkpoint write
            # (an experiment script that resumes every env on each invocation must leave finished runs untouched).
            self._restore_progress(resume)
            self._session_start = None
            return self.summary()
        workers = cfg.resolved_workers
        venv = make_meta_vec_env(
            cfg.env, cfg.runs_per_round, cfg.seed, rounds_done, workers, cfg.ray_address, self.inner_factory
        )
        try:
            model = build_agent(cfg, venv)
            self.model = model
            self._session_start = time.perf_counter()
            if resume is not None:
                self._load(model, resume)
                # Reset first, then restore the RNG streams: the uninterrupted run saved them after this reset.
                model._last_obs = venv.reset()  # type: ignore[assignment]
                restore_rng(resume["rng"], {"action_space": model.action_space.np_random})
            self.workers = workers  # this session's count (a resumed run may continue on another machine)
            self.sessions += 1
            # One SB3 log for the whole run: a resumed session continues sb3/progress.csv from its checkpoint step.
            resume_step = int(model.num_timesteps) if resume is not None else None
            model.set_logger(make_logger(self.run_dir / "sb3", ("csv", "tensorboard"), resume_step=resume_step))
            if resume is not None:
                announce_resume(self.run_dir, int(model.num_timesteps), cfg.total_timesteps)
            remaining = cfg.total_timesteps - model.num_timesteps
            if remaining > 0:
                callback = _RoundCallback(self)
                model.learn(remaining, callback=callback, reset_num_timesteps=resume is None, log_interval=1)
                callback.close_bar()
            self.save()
            plot_training(self.summary(), self.run_dir / "meta_training.png")
        finally:
            venv.close()
        return self.summary()


class _RoundCallback(BaseCallback):
    """Records finished meta-episodes and checkpoints between rounds."""

    def __init__(self, trainer: MetaTrainer) -> None:
        super().__init__()
        self.trainer = trainer
        self.pending_save = False
        self.bar: Any = None
        if trainer.show_progress:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=trainer.cfg.rounds, initial=trainer.rounds_done, desc="meta rounds", unit="round")

    def _on_step(self) -> bool:
        dones = np.asarray(self.locals["dones"])
        if not dones.all():
            return True
        trainer = self.trainer
        finals: list[float] = []
        ks: list[list[int]] = []
        for info in self.locals["infos"]:
            record: dict[str, Any] = {
                "round": trainer.rounds_done,
                "final_j": float(info["final_j"]),
                "return": float(info["episode"]["r"]),
                "k_schedule": [int(k) for k in info["k_schedule"]],
            }
            # What the run was drawn with: the rollout-length problem's physics, the RLVR problem's task domain.
            if "physics" in info:
                record["physics"] = {k: float(v) for k, v in info["physics"].items()}
            if info.get("model_error"):
                record["model_error"] = {k: float(v) for k, v in info["model_error"].items()}
            if "domain" in info:
                record["domain"] = dict(info["domain"])
            trainer.history.append(record)
            finals.append(float(info["final_j"]))
            ks.append([int(k) for k in info["k_schedule"]])
        trainer.rounds_done += 1
        self.logger.record("meta/final_j_mean", float(np.mean(finals)))
        self.logger.record("meta/k_mean", float(np.mean(ks)))
        self.logger.record("meta/rounds_done", trainer.rounds_done)
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(final_j=f"{np.mean(finals):.1f}", k=f"{np.mean(ks):.1f}")
        # Save at the start of the next rollout: by then this step's transitions are stored and trained on.
        self.pending_save = True
        return True

    def _on_rollout_start(self) -> None:
        if self.pending_save:
            self.pending_save = False
            self.trainer.save()

    def close_bar(self) -> None:
        if self.bar is not None:
            self.bar.close()


# --- the exported policy (what LearnedController loads) ---------------------------------------------------------


def export_policy(model: BaseAlgorithm, cfg: MetaTrainConfig, path: str | Path) -> Path:
    """Save just the meta-policy: its weights, architecture and the meta-MDP settings its features assume."""
    state = {
        "algo": cfg.agent.algo,
        "policy": model.policy.state_dict(),
        "net_arch": list(cfg.agent.net_arch),
        "feature_names": list(cfg.env.feature_names()),
    }
    return save_checkpoint(path, state, kind=POLICY_KIND, config={"env": to_dict(cfg.env)})


def plot_training(summary: dict[str, Any], path: str | Path) -> Path | None:
    """Learning curve (final J per meta-episode, smoothed) and the K schedule, early vs late (mean ± s.d.)."""
    history = summary["history"]
    if not history:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    finals = np.asarray([h["final_j"] for h in history])
    schedules = np.asarray([h["k_schedule"] for h in history], dtype=float)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    window = max(1, len(finals) // 20)
    smooth = np.convolve(finals, np.ones(window) / window, mode="valid")
    ax1.plot(np.arange(len(finals)), finals, ".", alpha=0.3, label="final J per meta-episode")
    ax1.plot(np.arange(window - 1, len(finals)), smooth, label=f"moving mean ({window})")
    ax1.set_xlabel("meta-episode")
    ax1.set_ylabel("final return J of the inner run")
    ax1.legend()
    quarter = max(1, len(schedules) // 4)
    phases = np.arange(1, schedules.shape[1] + 1)
    for label, block in (("first quarter", schedules[:quarter]), ("last quarter", schedules[-quarter:])):
        mean, sd = block.mean(axis=0), block.std(axis=0)
        ax2.plot(phases, mean, marker="o", label=label)
        ax2.fill_between(phases, mean - sd, mean + sd, alpha=0.2)
    ax2.set_xlabel("phase (decision)")
    knob = "group size G" if summary["config"]["env"].get("problem_kind") == "rlvr_group_size" else "rollout length K"
    ax2.set_ylabel(f"{knob} (mean ± s.d.)")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)
