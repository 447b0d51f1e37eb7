"""Issue 18's benchmark: the agent trained on the histories it acts with, scored against references on its own tasks.

Four tasks (:data:`TASKS`): bandits 5x100 and 2x100, the passive T-maze at L = 100 and the dark key-door. Per task
and seed the agent runs with :func:`amago_config` (whole trials from step 0, context = trial length, bilevel epsilon
with per-actor multipliers, time in the trial as an input, learning-rate warm-up and cosine decay, tau 0.003, an EMA
copy of the weights for evaluation, a critic sized to the task's return range, the library spectral norm) and
RecurrentPPO runs twice beside it: for the agent's env steps and for the agent's training wall-clock, with settings
chosen on seed 0 over :data:`~meta.incontext.baseline.RECURRENT_PPO_GRID`. The references of
:mod:`meta.incontext.references` play the same evaluation tasks (paired).

Every finished piece is one JSON file in a partial folder, written atomically at once (:func:`partial_path`), and an
agent run checkpoints in its run folder, so a killed benchmark resumes where it stopped.
:func:`summarize` merges the partial files into ``summary.json`` (``tasks.<task>.agent.mean``,
``tasks.<task>.references.<name>``, ``tasks.<task>.target_met``) and :func:`summary_table` is its markdown table.
``experiments/incontext/matched.py`` is the command line; ``experiments/incontext/gate.py`` the short gate that sets
:func:`amago_config` beside issue 7's setting (:func:`issue7_config`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from meta.incontext.config import AgentConfig, TrainConfig
from meta.incontext.tasks import critic_bins, rollout_length
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.statistics import mean_with_stderr

#: Benchmark task name -> TrainConfig task fields.
TASKS: dict[str, dict[str, Any]] = {
    "bandit_5x100": {"task": "bandit", "n_arms": 5, "horizon": 100},
    "bandit_2x100": {"task": "bandit", "n_arms": 2, "horizon": 100},
    "tmaze_100": {"task": "tmaze", "corridor_length": 100},
    "keydoor": {"task": "keydoor"},
}
#: Smaller tasks that gate a benchmark task before its full runs (not part of the benchmark's summary): the dark
#: key-door on a 5x5 grid with 20-step episodes and 100-step trials (``experiments/incontext/keydoor_gate.py``), and
#: the 5x5 and 6x6 grids with the 8x8 key-door's 50-step episodes and 500-step trials, which tell what of the 8x8
#: task's difficulty is the grid and what the trial's length.
GATE_TASKS: dict[str, dict[str, Any]] = {
    "keydoor_5x5": {"task": "keydoor", "keydoor_size": 5, "keydoor_episode_steps": 20, "keydoor_trial_steps": 100},
    "keydoor_5x5_long": {
        "task": "keydoor", "keydoor_size": 5, "keydoor_episode_steps": 50, "keydoor_trial_steps": 500,
    },
    "keydoor_6x6_long": {
        "task": "keydoor", "keydoor_size": 6, "keydoor_episode_steps": 50, "keydoor_trial_steps": 500,
    },
}  # fmt: skip
#: Evaluation tasks per benchmark task (issue 18: >= 1,000 for the bandits) and per gate task.
EVAL_TASKS = {
    "bandit_5x100": 1000, "bandit_2x100": 1000, "tmaze_100": 200, "keydoor": 200, "keydoor_5x5": 200,
    "keydoor_5x5_long": 200, "keydoor_6x6_long": 200,
}  # fmt: skip
#: Env-step budget and wall-clock cap (minutes) of one agent run, sized from the gate's measured speed so that a
#: run fits in under an hour of one core of the shared 2-core machine (the cap only guards against a slower machine;
#: the learning-rate decay is planned over the env-step budget). The bandits get 1M steps: in the 1M-step gate run
#: (``results/gate1m_oldknobs_peractor_notime_bins33.json``) the 5x100 score went 66.7, 75.3, 73.4, 74.8, 75.0 at
#: 200k, 400k, ..., 1M, in 55 minutes of training on a core shared by three jobs.
BUDGETS: dict[str, tuple[int, float]] = {
    "bandit_5x100": (1_000_000, 60.0),
    "bandit_2x100": (1_000_000, 60.0),
    "tmaze_100": (300_000, 55.0),
    "keydoor": (600_000, 55.0),
}
#: A setting's own budgets where they differ from :data:`BUDGETS` (its runs collect env steps at another rate).
#: ``keydoor_qlearning`` makes one update per 400 env steps on the 8x8 key-door: two units of it, one per core,
#: collected 17.4M env steps in 7,151 s and 12.3M in 5,070 s (``results/keydoor_8x8_probe.json``, variant
#: ``replay10``), so 7.2M take about 50 minutes; ``keydoor_novelty`` is that setting with a bonus in its targets.
SETTING_BUDGETS: dict[str, dict[str, tuple[int, float]]] = {
    "keydoor_qlearning": {"keydoor": (7_200_000, 60.0)},
    "keydoor_novelty": {"keydoor": (7_200_000, 60.0)},
}
#: Issue 18's targets, each against the matched references.
TARGETS = {
    "bandit_5x100": "agent >= thompson",
    "bandit_2x100": "agent >= 0.98 * bayes_optimal",
    "tmaze_100": "mean success over seeds >= 0.95",
    "keydoor": "agent >= 0.5 * oracle",
}


def task_fields(name: str) -> dict[str, Any]:
    """TrainConfig task fields of benchmark or gate task ``name``."""
    known = {**TASKS, **GATE_TASKS}
    if name not in known:
        raise ValueError(f"unknown task {name!r}; known: {list(known)}")
    return dict(known[name])


def _trial_length(fields: dict[str, Any]) -> int:
    """Steps of one trial of the task with TrainConfig task fields ``fields``."""
    return rollout_length(
        fields["task"], fields.get("horizon", 100), fields.get("corridor_length", 10),
        fields.get("keydoor_trial_steps", 500),
    )  # fmt: skip


def amago_config(
    name: str, seed: int, total_env_steps: int, max_minutes: float | None, eval_tasks: int | None = None
) -> TrainConfig:
    """Issue 18's agent settings for benchmark task ``name``: AMAGO's training recipe at a 2-core CPU's size.

    * Whole trials from step 0 with ``context_len = trial length + 1`` (AMAGO, Sec. 4.1, sets the context to the
      trial): every training token sees its acting history (:mod:`meta.incontext.history_match`). Batches hold about
      the tokens of issue 7's (bandit 8 x 100 vs 16 x 50).
    * Bilevel epsilon, AMAGO's defaults (1.0 -> 0.05 at a trial's start, 0.8 -> 0.01 at its end, per-actor
      multipliers in [0, 1)), annealed over a quarter of the budget.
    * Time in the trial as an input; learning rate 3e-4 warmed up over 500 updates (AMAGO's warm-up) and decayed by a
      cosine to a tenth; tau 0.003 (AMAGO); an EMA copy (decay 0.999) evaluated; 15 bins over the task's value range
      (:func:`~meta.incontext.tasks.critic_bins`) instead of 33 over [-6, 6].
    """
    fields = task_fields(name)
    task = fields["task"]
    trial = _trial_length(fields)
    gammas = {"bandit": [0.8, 0.95], "tmaze": [0.9, 0.99, 0.999], "keydoor": [0.9, 0.99, 0.999]}[task]
    low, high = critic_bins(
        task, gammas, fields.get("horizon", 100), fields.get("corridor_length", 10),
        keydoor_trial_steps=fields.get("keydoor_trial_steps", 500),
    )  # fmt: skip
    n_layers = 2 if task == "keydoor" else 1
    # Batch in whole trials: ~800 tokens for the bandits (issue 7: 16 x 50), 4 x 500 for the key-door.
    batch = {"bandit": 8, "tmaze": 8, "keydoor": 4}[task]
    updates_per_step = {"bandit": 0.1, "tmaze": 0.1, "keydoor": 0.05}[task]
    agent = AgentConfig(
        d_model=32, n_layers=n_layers, n_heads=2, head_hidden=32, context_len=trial + 1, gammas=gammas,
        n_bins=15, bin_low=low, bin_range=high, lr=3e-4, lr_warmup_updates=500, lr_final_fraction=0.1,
        tau=0.003, ema_decay=0.999, sigma_reparam=True,
    )  # fmt: skip
    return TrainConfig(
        **fields, seed=seed, total_env_steps=total_env_steps, max_minutes=max_minutes, n_envs=8, batch_size=batch,
        window=trial, full_trials=True, time_input=True, updates_per_step=updates_per_step,
        learning_starts=16 * trial, buffer_trajectories=1_000, exploration="bilevel",
        eps_anneal_steps=max(total_env_steps // 4, 1), eval_tasks=eval_tasks or EVAL_TASKS[name],
        eval_every_steps=max(total_env_steps // 5, 1), checkpoint_every=5,
        stop_at_return=0.99 if task == "tmaze" else None, agent=agent,
    )  # fmt: skip


def whole_trial_config(
    name: str, seed: int, total_env_steps: int, max_minutes: float | None, eval_tasks: int | None = None
) -> TrainConfig:
    """:func:`amago_config`'s whole-trial training with the knobs the gate took back toward issue 7's setting.

    The bandit gate (``docs/incontext.md``, "Ablations": 60k env steps, then 400k) found these cost points there:
    no EMA copy (the online weights are evaluated), tau 0.02, a constant learning rate after the warm-up, issue 7's
    per-actor epsilon (annealed over issue 7's steps for the task) instead of AMAGO's bilevel schedule, no
    time-in-trial input, and 33 critic bins over [-6, 6] in symlog space. Whole trials from step 0, the context of
    a whole trial, the warm-up and the library spectral norm stay as in :func:`amago_config`.
    """
    cfg = amago_config(name, seed, total_env_steps, max_minutes, eval_tasks)
    fields = task_fields(name)
    # Issue 7's anneal lengths (experiments.incontext.benchmark_parts.train_config).
    anneal = {
        "bandit": 10_000,
        "tmaze": 20 * (fields.get("corridor_length", 10) + 1) * 8,
        "keydoor": 60_000,
    }[fields["task"]]
    agent = dataclasses.replace(
        cfg.agent, ema_decay=0.0, tau=0.02, lr_final_fraction=1.0, n_bins=33, bin_range=6.0, bin_low=None
    )
    return dataclasses.replace(cfg, agent=agent, exploration="per_actor", eps_anneal_steps=anneal, time_input=False)


#: AMAGO's dark key-door run (its ``examples`` script for the task and its command-line defaults): rewards times 100
#: in the TD targets, 12 parallel actors, the bilevel epsilon annealed over 500k env steps, and 1,000 updates per
#: epoch of 1,000 steps from each of the 12 actors.
AMAGO_KEYDOOR = {"reward_scale": 100.0, "n_actors": 12, "anneal_steps": 500_000, "updates_per_step": 1000 / 12_000}


def amago_keydoor_config(
    name: str, seed: int, total_env_steps: int, max_minutes: float | None, eval_tasks: int | None = None
) -> TrainConfig:
    """:func:`amago_config` with the run details of AMAGO's dark key-door (:data:`AMAGO_KEYDOOR`).

    * Rewards scaled by 100 in the critic's TD targets (``AgentConfig.reward_scale``; AMAGO's ``reward_multiplier``),
      the critic's bins sized for the scaled returns (:func:`~meta.incontext.tasks.critic_bins`).
    * 12 actors (parallel env copies) instead of 8.
    * The bilevel epsilon annealed over AMAGO's 500k env steps, or over half the run when the run is shorter than
      1M steps (AMAGO anneals over the first 4 % of its 12M steps; a run that never finishes the anneal is never
      scored on the policy it anneals toward).
    * One update per 12 env steps (AMAGO: ``grads_per_epoch / (timesteps_per_epoch * parallel_actors)``).

    The network stays :func:`amago_config`'s CPU-sized one (AMAGO's is 3 layers of width 256 on a GPU), and batches
    hold about the tokens of the 8x8 key-door's 4 trials of 500 steps whatever the trial length.
    """
    cfg = amago_config(name, seed, total_env_steps, max_minutes, eval_tasks)
    fields = task_fields(name)
    trial = _trial_length(fields)
    scale = AMAGO_KEYDOOR["reward_scale"]
    low, high = critic_bins(
        cfg.task, cfg.agent.gammas, cfg.horizon, cfg.corridor_length, reward_scale=scale,
        keydoor_trial_steps=cfg.keydoor_trial_steps,
    )  # fmt: skip
    agent = dataclasses.replace(cfg.agent, reward_scale=scale, bin_low=low, bin_range=high)
    return dataclasses.replace(
        cfg, agent=agent, n_envs=int(AMAGO_KEYDOOR["n_actors"]),
        eps_anneal_steps=max(min(int(AMAGO_KEYDOOR["anneal_steps"]), total_env_steps // 2), 1),
        updates_per_step=AMAGO_KEYDOOR["updates_per_step"], batch_size=max(cfg.batch_size, 2000 // trial),
    )  # fmt: skip


#: The short key-door gate's run shape (:func:`amago_keydoor_short_config`): updates per env step, trials per batch,
#: and the share of the planned updates that the learning-rate warm-up and the EMA copy's averaging span.
KEYDOOR_SHORT = {"updates_per_step": 0.25, "batch_trials": 8, "schedule_fraction": 0.05}


def compressed_schedules(cfg: TrainConfig, fraction: float) -> TrainConfig:
    """``cfg`` with its update-counted schedules fitted to its own budget of planned updates
    (``total_env_steps * updates_per_step``).

    * The learning-rate warm-up lasts at most ``fraction`` of the planned updates (AMAGO's 500 updates are 0.05 % of
      its ~1M; in a gate of 800 updates they were 62 %, so most of the run trained below the peak rate).
    * The EMA copy averages over about ``fraction`` of the planned updates: its decay is at most
      ``1 - 1 / (fraction * planned)`` (0.999 averages over ~1,000 updates, longer than a short run's learning).

    The exploration anneal is in env steps and already planned over the budget by the settings.
    """
    planned = max(int(cfg.total_env_steps * cfg.updates_per_step), 1)
    span = max(fraction * planned, 1.0)
    agent = cfg.agent
    warmup = min(agent.lr_warmup_updates, int(span))
    ema = min(agent.ema_decay, 1.0 - 1.0 / span) if agent.ema_decay > 0 and span > 1 else agent.ema_decay
    return dataclasses.replace(cfg, agent=dataclasses.replace(agent, lr_warmup_updates=warmup, ema_decay=ema))


def amago_keydoor_short_config(
    name: str, seed: int, total_env_steps: int, max_minutes: float | None, eval_tasks: int | None = None
) -> TrainConfig:
    """:func:`amago_keydoor_config` shaped for a gate of a few minutes (:data:`KEYDOOR_SHORT`): three times the
    updates per env step on batches of 8 trials (each update about a third of the cost of 20), and the warm-up and
    the EMA copy fitted to the run (:func:`compressed_schedules`)."""
    cfg = amago_keydoor_config(name, seed, total_env_steps, max_minutes, eval_tasks)
    cfg = dataclasses.replace(
        cfg, updates_per_step=KEYDOOR_SHORT["updates_per_step"], batch_size=int(KEYDOOR_SHORT["batch_trials"])
    )
    return compressed_schedules(cfg, KEYDOOR_SHORT["schedule_fraction"])


#: What :func:`keydoor_qlearning_config` changes in the critic (:class:`~meta.incontext.config.AgentConfig` fields).
KEYDOOR_QLEARNING_AGENT: dict[str, Any] = {
    "critic_head": "scalar", "critic_init": "uniform", "reward_scale": 1.0, "critic_target": "max", "policy": "critic",
    "tau": 0.02, "lr_final_fraction": 1.0, "entropy_coef": 0.01, "gammas": [0.9, 0.99], "d_model": 64,
    "head_hidden": 64, "n_heads": 4,
}  # fmt: skip
#: ... and in the run (:class:`~meta.incontext.config.TrainConfig` fields); the replay holds this many env steps, and
#: each collected trial is replayed this many times on average (which sets the updates per env step).
KEYDOOR_QLEARNING_RUN: dict[str, Any] = {
    "keydoor_cell_input": True, "previous_obs_input": True, "n_envs": 48, "checkpoint_every": 10,
}  # fmt: skip
KEYDOOR_QLEARNING_REPLAY_STEPS = 1_600_000
KEYDOOR_QLEARNING_TRIAL_REPLAYS = 10


def keydoor_qlearning_config(
    name: str, seed: int, total_env_steps: int, max_minutes: float | None, eval_tasks: int | None = None
) -> TrainConfig:
    """:func:`amago_keydoor_short_config` with the critic and inputs the 5x5 key-door gate found
    (``docs/results/incontext.md``, "Dark key-door gate"; :data:`KEYDOOR_QLEARNING_AGENT`,
    :data:`KEYDOOR_QLEARNING_RUN`).

    * A scalar (Huber) critic trained by Q-learning (max target) at the env's reward scale, and no actor: the agent
      acts by a Boltzmann policy of the ensemble-mean Q at temperature 0.01, argmax when greedy. On one fixed layout
      the two-hot critic and the actor were what failed (``results/keydoor_fixed_layout.json``).
    * The one-hot cell and the previous observation in every input: the door's cell is the previous input's cell plus
      the move, in no single input without it.
    * Fresh data over replay: 48 actors, each collected trial replayed 10 times on average (updates per env step =
      10 / (trials per batch x trial length): 0.0125 on the 5x5 gate's 100-step trials, 0.0025 on the 8x8 key-door's
      500-step ones), the replay holding the last 1.6M env steps. Replayed hundreds of times, the critic fitted the
      trials; on the 8x8 key-door the 5x5 gate's 0.0125 would replay each trial 50 times.
    * Width 64 (4 heads) instead of 32, constant learning rate after the warm-up, tau 0.02, discounts 0.9 and 0.99.
    """
    cfg = amago_keydoor_short_config(name, seed, total_env_steps, max_minutes, eval_tasks)
    trial = _trial_length(task_fields(name))
    agent = dataclasses.replace(cfg.agent, **KEYDOOR_QLEARNING_AGENT)
    return dataclasses.replace(
        cfg, agent=agent, buffer_trajectories=max(KEYDOOR_QLEARNING_REPLAY_STEPS // trial, 1),
        updates_per_step=KEYDOOR_QLEARNING_TRIAL_REPLAYS / (cfg.batch_size * trial), **KEYDOOR_QLEARNING_RUN,
    )  # fmt: skip


#: What :func:`keydoor_novelty_config` adds to ``keydoor_qlearning``: the first-visit bonus (env reward units), kept
#: for the whole run, and collections between checkpoints (40: about 1M env steps on the 8x8 key-door, each checkpoint
#: holding the 1.6M-step replay).
KEYDOOR_NOVELTY = {"novelty_bonus": 0.1, "checkpoint_every": 40}


def keydoor_novelty_config(
    name: str, seed: int, total_env_steps: int, max_minutes: float | None, eval_tasks: int | None = None
) -> TrainConfig:
    """:func:`keydoor_qlearning_config` with a within-trial first-visit bonus in the critic's targets
    (:data:`KEYDOOR_NOVELTY`; ``TrainConfig.novelty_bonus``): 0.1 for each step onto a cell the trial has not yet
    visited with that key state, for the whole run.

    On the 8x8 key-door the plain setting's search finds the door late and rarely, and its memory of the door never
    forms (``docs/results/incontext.md``, "What the 8x8 agents remember"); the bonus pays the systematic search that
    finds it. Annealed to 0 over the first two thirds of the budget, the bonus had carried seed 0 to 51.27 greedy at
    2.88M env steps, and the search, then the score, fell as it faded (29.48 at 5.76M;
    ``results/matched_partial_keydoor_novelty_annealed/``). A trial holds at most 2 x 64 new cells, so the bonus is
    worth at most 12.8 per trial, against the oracle's 108.61 on the benchmark's tasks. Evaluation, the logged
    returns and the agent's inputs keep the env's rewards alone.
    """
    cfg = keydoor_qlearning_config(name, seed, total_env_steps, max_minutes, eval_tasks)
    return dataclasses.replace(
        cfg, novelty_bonus=KEYDOOR_NOVELTY["novelty_bonus"], checkpoint_every=int(KEYDOOR_NOVELTY["checkpoint_every"])
    )


#: The agent settings of the benchmark, by name (``experiments/incontext/matched.py --setting``).
SETTINGS: dict[str, Callable[..., TrainConfig]] = {
    "amago": amago_config,
    "whole_trial": whole_trial_config,
    "amago_keydoor": amago_keydoor_config,
    "amago_keydoor_short": amago_keydoor_short_config,
    "keydoor_qlearning": keydoor_qlearning_config,
    "keydoor_novelty": keydoor_novelty_config,
}


def budget(setting: str, task: str) -> tuple[int, float]:
    """Env-step budget and wall-clock cap (minutes) of one agent run of ``setting`` on benchmark ``task``
    (:data:`SETTING_BUDGETS`, else :data:`BUDGETS`)."""
    return SETTING_BUDGETS.get(setting, {}).get(task, BUDGETS[task])


def agent_config(
    setting: str,
    name: str,
    seed: int,
    total_env_steps: int,
    max_minutes: float | None,
    eval_tasks: int | None = None,
) -> TrainConfig:
    """The agent's TrainConfig under the named setting (:data:`SETTINGS`).

    Raises:
        ValueError: an unknown setting or task.
    """
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; known: {list(SETTINGS)}")
    return SETTINGS[setting](name, seed, total_env_steps, max_minutes, eval_tasks)


def issue7_config(
    name: str, seed: int, total_env_steps: int, max_minutes: float | None, eval_tasks: int | None = None
) -> TrainConfig:
    """Issue 7's agent settings for ``name`` (:func:`experiments.incontext.benchmark_parts.train_config`) at another
    budget: the "old setting" the gate compares with."""
    from experiments.incontext.benchmark_parts import AgentRunSettings, train_config

    fields = task_fields(name)
    part = {"bandit": name, "tmaze": "tmaze", "keydoor": "keydoor"}[fields["task"]]
    settings = AgentRunSettings(minutes_per_run=max_minutes or 60.0, max_env_steps=total_env_steps)
    cfg = train_config(part, seed, settings, corridor=fields.get("corridor_length", 10))
    return dataclasses.replace(cfg, max_minutes=max_minutes, eval_tasks=eval_tasks or EVAL_TASKS[name])


# --- references -------------------------------------------------------------------------------------------------


def matched_references(
    name: str, n_tasks: int, keydoor_size: int = 8, keydoor_episode_steps: int = 50, keydoor_trial_steps: int = 500
) -> dict[str, np.ndarray]:
    """Per-task returns of every reference of task ``name`` on its first ``n_tasks`` evaluation tasks (the key-door's
    on a ``keydoor_size`` grid with the given episode and trial lengths, as the agent's ``TrainConfig.keydoor_*``)."""
    from meta.incontext.references import bandit_references, keydoor_references, tmaze_references

    fields = task_fields(name)
    if fields["task"] == "bandit":
        return bandit_references(fields["n_arms"], fields["horizon"], n_tasks)
    if fields["task"] == "tmaze":
        return tmaze_references(fields["corridor_length"], n_tasks)
    return keydoor_references(
        n_tasks, size=keydoor_size, episode_steps=keydoor_episode_steps, trial_steps=keydoor_trial_steps
    )


def _stats(returns: np.ndarray | list[float]) -> dict[str, Any]:
    mean, stderr = mean_with_stderr(np.asarray(returns, dtype=np.float64))
    return {"mean": mean, "stderr": stderr, "n_tasks": len(returns)}


# --- runs -------------------------------------------------------------------------------------------------------


def partial_path(root: Path, name: str, what: str, seed: int | None = None) -> Path:
    """``root/<task>__<what>[__seed<seed>].json``: one finished piece of the benchmark."""
    suffix = "" if seed is None else f"__seed{seed}"
    return root / f"{name}__{what}{suffix}.json"


def run_agent(cfg: TrainConfig, run_dir: Path, history_rows: int = 8) -> dict[str, Any]:
    """Train (or resume from ``run_dir``'s checkpoint) one agent run and score it.

    Returns:
        The trainer's result plus ``eval_sampled`` (the EMA weights sampling from their policy), ``eval_online``
        (the online weights, greedy), per-task ``returns`` of the greedy headline, ``history_match`` (measured on
        the run's own replay) and ``wall_seconds``.
    """
    from meta.incontext.history_match import history_match
    from meta.incontext.trainer import InContextTrainer, evaluate_agent

    run_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    trainer = InContextTrainer(cfg, run_dir, resume=True)
    result = trainer.learn()
    result["wall_seconds"] = time.perf_counter() - start
    result["train_seconds"] = trainer.act_seconds + trainer.update_seconds
    result["returns"] = result["eval"].pop("returns")
    result["eval_sampled"] = _stats(evaluate_agent(trainer.eval_agent, cfg, cfg.eval_tasks, greedy=False))
    if trainer.ema_agent is not None:
        result["eval_online"] = _stats(evaluate_agent(trainer.agent, cfg, cfg.eval_tasks))
    rng = np.random.default_rng(cfg.seed)
    result["history_match"] = history_match(
        trainer.agent, trainer.replay, history_rows, cfg.window, cfg.full_trials, rng
    )
    return result


def ppo_task_kwargs(cfg: TrainConfig) -> dict[str, Any]:
    """The env options RecurrentPPO gets: the agent's (same task, same inputs, time in the trial included)."""
    from meta.incontext.trainer import task_kwargs

    return task_kwargs(cfg)


def run_ppo(
    cfg: TrainConfig, env_steps: int | None, max_seconds: float | None, ppo_config: Any = None
) -> dict[str, Any]:
    """RecurrentPPO on the agent's task and evaluation tasks, for ``env_steps`` and/or ``max_seconds``."""
    from meta.incontext.baseline import train_recurrent_ppo

    result = train_recurrent_ppo(
        cfg.task, env_steps, cfg.seed, cfg.eval_tasks, ppo_config, max_seconds, **ppo_task_kwargs(cfg)
    )
    result["returns"] = result["eval"].pop("returns")
    return result


def ppo_budgets(agent_run: dict[str, Any]) -> dict[str, tuple[int | None, float | None]]:
    """RecurrentPPO's budgets beside one agent run, by piece name: ``(env_steps, max_seconds)``, the agent's env steps
    (``ppo_equal_steps``) and the agent's training seconds (``ppo_equal_time``, acting plus updates, evaluations
    excluded)."""
    return {
        "ppo_equal_steps": (int(agent_run["env_steps"]), None),
        "ppo_equal_time": (None, float(agent_run["train_seconds"])),
    }


def load_json(path: Path) -> dict[str, Any] | None:
    """A partial file, or ``None`` if that piece has not been run yet."""
    return json.loads(path.read_text()) if path.exists() else None


def save_json(path: Path, obj: dict[str, Any]) -> None:
    """Write a partial file atomically (a kill leaves the old file or the new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, obj)


# --- the summary ------------------------------------------------------------------------------------------------


def task_target(name: str, refs: dict[str, float]) -> float:
    """The value that benchmark task ``name``'s target (:data:`TARGETS`) asks of the agent's mean, from the matched
    references' means ``refs`` (in the task's return units; success for the T-maze)."""
    if name == "bandit_5x100":
        return refs["thompson"]
    if name == "bandit_2x100":
        return 0.98 * refs["bayes_optimal"]
    if name == "tmaze_100":
        return 0.95
    return 0.5 * refs["oracle"]


def _method(runs: list[dict[str, Any]]) -> dict[str, Any]:
    greedy = [r["eval"]["mean"] for r in runs]
    sampled = [r["eval_sampled"]["mean"] for r in runs]
    return {
        "mean": float(np.mean(greedy)),
        "per_seed": greedy,
        "sampled_mean": float(np.mean(sampled)),
        "sampled_per_seed": sampled,
        "env_steps_per_seed": [int(r["env_steps"]) for r in runs],
        "train_seconds_per_seed": [float(r["train_seconds"]) for r in runs],
    }


def one_row_per_step(history: list[dict[str, float]]) -> list[dict[str, float]]:
    """A learning curve with one row per env step (the last one kept): runs written before the trainer stopped
    appending its final evaluation next to an evaluation at the same step have such repeats."""
    rows = {int(row["env_steps"]): row for row in history}
    return [rows[step] for step in sorted(rows)]


def missing_pieces(root: Path, name: str, seeds: list[int]) -> list[str]:
    """File names of the pieces of task ``name`` that are not in ``root`` yet: the references, the agent per seed,
    the RecurrentPPO grid and RecurrentPPO at equal steps and at equal time per seed."""
    wanted = [partial_path(root, name, "references")]
    wanted += [partial_path(root, name, "agent", s) for s in seeds]
    wanted.append(partial_path(root, name, "ppo_grid"))
    wanted += [partial_path(root, name, m, s) for m in ("ppo_equal_steps", "ppo_equal_time") for s in seeds]
    return [path.name for path in wanted if not path.exists()]


def summarize(root: Path, seeds: list[int], tasks: list[str] | None = None) -> dict[str, Any]:
    """The summary of the partial files in ``root``: per task the agent (greedy headline and sampled), RecurrentPPO
    at equal env steps and equal wall-clock, the matched references and the target. A task whose runs are missing
    says ``"status": "incomplete"`` and has no ``target_met``; nothing is filled in. Every task lists the pieces
    still to run under ``missing_pieces`` (a target met or missed by a complete agent stands while RecurrentPPO's
    pieces are missing: the target is the agent's)."""
    out: dict[str, Any] = {"seeds": seeds, "targets": TARGETS, "tasks": {}}
    for name in tasks or list(TASKS):
        refs_file = load_json(partial_path(root, name, "references"))
        agent_runs = [load_json(partial_path(root, name, "agent", s)) for s in seeds]
        entry: dict[str, Any] = {"target_rule": TARGETS[name], "missing_pieces": missing_pieces(root, name, seeds)}
        if refs_file is not None:
            entry["references"] = {k: v["mean"] for k, v in refs_file["references"].items()}
            entry["references_stderr"] = {k: v["stderr"] for k, v in refs_file["references"].items()}
            entry["eval_tasks"] = refs_file["n_tasks"]
        done = [r for r in agent_runs if r is not None]
        if done:
            entry["agent"] = _method(done)
            entry["agent"]["online_mean"] = (
                float(np.mean([r["eval_online"]["mean"] for r in done])) if "eval_online" in done[0] else None
            )
            entry["agent"]["history_match"] = [r["history_match"]["fraction"] for r in done]
            entry["agent"]["settings"] = [r.get("setting", "amago") for r in done]
            entry["agent"]["learning_curves"] = [one_row_per_step(r["history"]) for r in done]
        for method in ("ppo_equal_steps", "ppo_equal_time"):
            runs = [load_json(partial_path(root, name, method, s)) for s in seeds]
            if all(r is not None for r in runs):
                entry[method] = _method(runs)  # type: ignore[arg-type]
        tuned = load_json(partial_path(root, name, "ppo_grid"))
        if tuned is not None:
            entry["ppo_settings"] = tuned["best"]
        complete = len(done) == len(seeds) and refs_file is not None
        if complete:
            target = task_target(name, entry["references"])
            entry["target"] = target
            entry["target_met"] = bool(entry["agent"]["mean"] >= target)
            entry["target_met_sampled"] = bool(entry["agent"]["sampled_mean"] >= target)
        else:
            entry["status"] = "incomplete"
        out["tasks"][name] = entry
    return out


def _fmt(value: float | None, digits: int = 2) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def summary_table(summary: dict[str, Any]) -> str:
    """The markdown table of :func:`summarize`'s summary (every number read from it)."""
    lines = [
        "| task | agent greedy (per seed) | agent sampled | RecurrentPPO equal steps / equal time | "
        "matched references | target | met? |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, entry in summary["tasks"].items():
        agent = entry.get("agent")
        seeds = "; ".join(f"{v:.2f}" for v in agent["per_seed"]) if agent else ""
        ppo = " / ".join(_fmt(entry.get(m, {}).get("mean")) for m in ("ppo_equal_steps", "ppo_equal_time"))
        refs = ", ".join(f"{k} {v:.2f}" for k, v in entry.get("references", {}).items())
        met = "pending" if "target_met" not in entry else ("yes" if entry["target_met"] else "no")
        if entry.get("missing_pieces"):
            met += f" ({len(entry['missing_pieces'])} pieces to run)"
        lines.append(
            f"| {name} ({entry.get('eval_tasks', '—')} tasks) | {_fmt(agent and agent['mean'])} ({seeds}) | "
            f"{_fmt(agent and agent['sampled_mean'])} | {ppo} | {refs} | {entry['target_rule']} "
            f"({_fmt(entry.get('target'))}) | {met} |"
        )
    return "\n".join(lines) + "\n"
