"""Meta-controller, second attempt: a learned rollout-length schedule against every hand-designed one, paired.

The inner regime is the one that passed the gate (``experiments/mbrl/results/gate_8k_converged.json``): Dyna-DQN on
Acrobot-v1 with 8k env steps, world-model refits until the holdout stops improving, and K = the depth of decision-time
lookahead in the learned model (``experiments/meta/presets/acrobot_gate_8k_converged.yaml``). What this script adds on
top of the preset, and why:

* ``phase_length`` 800: ten decisions per inner run, so that 504 meta-episodes give the issue's >= 5,000
  meta-transitions (at the gate's 2k phase an 8k run has four decisions). The inner learner is unchanged: it still
  refits its model every 2,000 env steps.
* ``k_cap`` 8 and the direct grid 0, 1, 2, 4, 8: lookahead costs K model steps per action, so K = 16 runs cost several
  times a K = 2 run; the fixed arms are the same grid.

Steps, each resumable (rerun the same command after a kill or at the next session):

1. Meta-train an SB3 DQN meta-agent for each action set in ``--train`` (``step``: BTZ's UP / DOWN / NOOP;
   ``direct``: K from the grid), ``meta_episodes`` inner runs each on domain-randomized physics, checkpointed after
   every round of ``runs_per_round`` runs in ``results/round2/<env>_<action set>/`` (small: commit it to carry a run
   across sessions). The trained agent's values are checked against the Monte-Carlo returns of its own replay
   buffer (:func:`meta.rollout_length.diagnostics.value_check`).
2. Score every arm on the paper's perturbed test physics: ``test_runs`` runs per arm, run ``i`` of every arm on the
   same inner seed, in units of ``runs_per_unit`` runs filed into ``results/round2/arms_<env>.json`` as they finish.
   A META arm runs once its meta-training has finished.
3. Write ``results/round2/summary.json`` (``envs.<env>.arms.<arm>.{mean,median,iqm,ci}``,
   ``envs.<env>.prob_improvement_vs_best``), ``table.md`` and ``arms_<env>.png`` (scores and K schedules).

    OMP_NUM_THREADS=1 nice -n 10 python experiments/meta/rollout_length.py                      # everything
    OMP_NUM_THREADS=1 python experiments/meta/rollout_length.py --train step --no-test          # one meta-training
    OMP_NUM_THREADS=1 python experiments/meta/rollout_length.py --train none --arms fixed:0,fixed:2  # some test arms

Test processes share the arms file: start the same ``--train none`` command once per free core and each takes the
next unit no other process holds (a killed process's unit is taken up again, from its per-phase checkpoint).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import tyro
from filelock import FileLock

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from envs.perturbed import TEST_PHYSICS
from experiments.meta.rollout_length_protocol import (
    EvalUnit,
    machines_by_run,
    mixed_machine_runs,
    schedule_table,
    summarize_arms,
)
from experiments.meta.shared_arms import SharedArmsFile
from meta.control import split_specs
from meta.control.training import POLICY_NAME, MetaTrainConfig, MetaTrainer
from meta.rollout_length.diagnostics import value_check
from meta.rollout_length.evaluate import run_arms
from meta.rollout_length.plots import plot_arms
from rolloutlab.checkpoint import atomic_write_json, atomic_write_text
from rolloutlab.config import from_dict, load_yaml, to_dict
from rolloutlab.device import cpu_arithmetic
from rolloutlab.threads import set_torch_threads

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "round2"
PRESET = HERE / "presets" / "acrobot_gate_8k_converged.yaml"
SCHEDULE_ARMS = (
    "fixed:0", "fixed:1", "fixed:2", "fixed:4", "fixed:8", "inc:8", "dec:8", "incdec:8", "linear:0,5,1,8",
    "uncertainty:95,8",
)  # fmt: skip
META_ARMS = {"meta_step": "step", "meta_direct": "direct"}
DEFAULT_ARMS = (*SCHEDULE_ARMS, "random:1,8", *META_ARMS)


@dataclass
class Args:
    preset: str = str(PRESET)
    """YAML preset of the meta-MDP (MetaTrainConfig); the flags below override its env part"""
    budget: int | None = None
    """real env steps per inner run (None: the preset's)"""
    phase_length: int = 800
    """P: env steps between decisions (budget / P decisions per inner run)"""
    k_cap: int = 8
    """largest rollout length (lookahead depth) any arm may choose"""
    k_grid: str = "0,1,2,4,8"
    """the lengths of the direct action set"""
    train: str = "step,direct"
    """action sets to meta-train (comma-separated; 'none' for none)"""
    meta_episodes: int = 504
    """meta-training episodes (inner runs) per action set, domain-randomized physics"""
    runs_per_round: int = 8
    """B: inner runs batched together in meta-training (one checkpoint per round)"""
    workers: int = 0
    """worker processes sharing each meta-training round (0: one per core; the results do not depend on it)"""
    train_seed: int = 0
    """seed of meta-training"""
    arms: str = ",".join(DEFAULT_ARMS)
    """arms to score: controller specs, random:K_INIT,K_CAP, meta_step, meta_direct ('none' for none)"""
    test: bool = True
    """score the arms after meta-training (--no-test: meta-train only)"""
    test_runs: int = 40
    """inner runs per arm on the perturbed test physics (same seeds for every arm)"""
    runs_per_unit: int = 5
    """runs per unit of test work (each unit is saved when it finishes)"""
    test_seed: int = 1
    """inner seed of the test runs (disjoint from meta-training's per-round seeds)"""
    final_episodes: int = 10
    """greedy episodes behind each test run's final score (the gate's)"""
    bootstrap_reps: int = 2000
    """bootstrap resamples for intervals"""
    out_dir: str = str(RESULTS)
    """results (summary, arms file, meta-training run directories)"""
    scratch_dir: str = "runs/meta-round2"
    """per-phase checkpoints of the unit in progress (large: every run's buffers; not committed)"""


def train_config(args: Args) -> MetaTrainConfig:
    """The preset with this script's overrides (phase, K cap and grid, training size, buffer sized to the run)."""
    base = to_dict(load_yaml(MetaTrainConfig, args.preset))
    base["env"].update(phase_length=args.phase_length, k_cap=args.k_cap, k_grid=split_ints(args.k_grid))
    if args.budget is not None:
        base["env"]["budget"] = args.budget
    base.update(episodes=args.meta_episodes, runs_per_round=args.runs_per_round, workers=args.workers)
    base["seed"] = args.train_seed
    cfg = from_dict(MetaTrainConfig, base)
    # The replay buffer holds every meta-transition of the run (so value_check can read it in order) and no more:
    # the checkpoint carries it, and a small checkpoint can be committed between sessions.
    cfg.agent.buffer_size = cfg.total_timesteps
    return cfg


def split_ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def meta_train(args: Args, action_set: str, env_id: str) -> dict[str, Any]:
    """Meta-train (or resume, or reopen finished) one action set; returns its cost, progress and value check."""
    run_dir = Path(args.out_dir) / f"{env_id}_{action_set}"
    cfg = train_config(args)
    cfg.env.action_set = action_set  # type: ignore[assignment]
    if (run_dir / "meta_checkpoint.pt").exists():
        trainer = MetaTrainer.resume(run_dir, workers=cfg.workers)
        if trainer.cfg.outcome_settings() != cfg.outcome_settings():
            raise SystemExit(f"{run_dir} holds a meta-training run with other settings; move it away to start anew")
        print(f"[{env_id} {action_set}] resuming meta-training from {run_dir}", flush=True)
    else:
        trainer = MetaTrainer(cfg, run_dir)
    summary = trainer.train()
    record: dict[str, Any] = {
        key: summary[key] for key in ("episodes_done", "rounds_done", "wall_seconds", "inner_env_steps", "sessions")
    }
    record["finished"] = summary["rounds_done"] >= cfg.rounds
    record["meta_transitions"] = summary["episodes_done"] * cfg.env.horizon
    if trainer.model is not None and cfg.agent.algo == "dqn":
        record["value_check"] = value_check(trainer.model)
    return record


def arm_specs(args: Args, env_id: str, finished: set[str]) -> dict[str, str]:
    """``{arm: spec}`` of the arms to score now (META arms only once their meta-training has finished)."""
    specs = {}
    for arm in split_specs(args.arms) if args.test and args.arms not in ("", "none") else []:
        if arm in META_ARMS:
            if META_ARMS[arm] not in finished:
                print(f"[{env_id}] {arm}: meta-training not finished, arm left for a later run", flush=True)
                continue
            specs[arm] = f"learned:{Path(args.out_dir) / f'{env_id}_{META_ARMS[arm]}' / POLICY_NAME}"
        else:
            specs[arm] = arm
    return specs


def run_unit(args: Args, cfg: MetaTrainConfig, unit: EvalUnit) -> dict[str, Any]:
    env_id = cfg.env.env_id
    print(f"[{env_id}] {unit.arm}: runs {unit.first_run}-{unit.first_run + unit.runs - 1}", flush=True)
    Path(args.scratch_dir).mkdir(parents=True, exist_ok=True)
    results = run_arms(
        [unit.spec],
        cfg.env,
        unit.runs,
        args.test_seed,
        None,
        args.final_episodes,
        checkpoint=Path(args.scratch_dir) / f"{env_id}_{unit.name}.pt",
        first_run=unit.first_run,
    )
    (result,) = results.values()
    # Paired runs are bit-identical only on one kind of CPU: record where this unit ran (see mixed_machine_runs).
    return {**result, "arithmetic": cpu_arithmetic()}


def update_summary(path: Path, values: dict[tuple[str, ...], Any]) -> dict[str, Any]:
    """Set nested keys (``("meta_training", env, action_set)`` → value) in the summary as it is on disk now and write
    it back atomically.

    Reading just before writing (not once at start) keeps what other processes wrote meanwhile: the step and direct
    meta-trainings and the test processes run side by side and each writes only its own keys. The lock (a
    ``.lock`` file beside the summary, ignored by git) keeps two of them from interleaving their read and write.
    """
    with FileLock(str(path) + ".lock"):
        summary: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        for keys, value in values.items():
            node = summary
            for key in keys[:-1]:
                node = node.setdefault(key, {})
            node[keys[-1]] = value
        atomic_write_json(path, summary)
    return summary


def main() -> None:
    args = tyro.cli(Args, description=__doc__)
    set_torch_threads(1)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = train_config(args)
    env_id = cfg.env.env_id
    started = time.perf_counter()
    summary_path = out / "summary.json"
    for action_set in [a.strip() for a in args.train.split(",") if a.strip() and a.strip() != "none"]:
        update_summary(summary_path, {("meta_training", env_id, action_set): meta_train(args, action_set, env_id)})
    # Read only: writing here would leave an empty summary.json beside a test run that has no finished arm yet.
    on_disk = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    training = on_disk.get("meta_training", {}).get(env_id, {})
    finished = {a for a, rec in training.items() if rec.get("finished")}

    arms_path = out / f"arms_{env_id}.json"
    protocol = {
        "env": to_dict(cfg.env) | {"action_set": None},
        "test_runs": args.test_runs,
        "runs_per_unit": args.runs_per_unit,
        "test_seed": args.test_seed,
        "final_episodes": args.final_episodes,
        "physics": TEST_PHYSICS[env_id],
    }
    # Several processes may run this command at once (one per core): each claims the next free unit under a lock
    # and files it into the arms file as it is on disk then (experiments/meta/shared_arms.py).
    shared = SharedArmsFile(arms_path, args.scratch_dir, protocol)
    specs = arm_specs(args, env_id, finished)
    while (unit := shared.claim_next(specs, args.test_runs, args.runs_per_unit)) is not None:
        try:
            result = run_unit(args, cfg, unit)
        except BaseException:
            shared.release(unit)
            raise
        saved, complete = shared.record(unit, result, args.test_runs)
        if complete:
            print(f"[{env_id}] {unit.arm} complete: mean {saved['arms'][unit.arm]['mean']:.1f}", flush=True)
    if others := shared.claimed_by_others(specs, args.test_runs, args.runs_per_unit):
        print(f"[{env_id}] left to the other processes running them: {', '.join(others)}", flush=True)

    saved = shared.read()
    done = saved.get("arms", {})
    entry = summarize_arms(done, seed=args.test_seed, reps=args.bootstrap_reps)
    for arm, result in done.items():
        entry["arms"][arm]["seconds"] = result["seconds"]
        entry["arms"][arm]["k_schedules"] = result.get("k_schedules")
    entry["protocol"] = protocol
    mixed = mixed_machine_runs(saved)
    entry["machines"] = {
        "seen": sorted({m for runs in machines_by_run(saved).values() for m in runs.values() if m is not None}),
        "mixed_runs": {str(run): machines for run, machines in mixed.items()},
    }
    if mixed:
        print(
            f"[{env_id}] warning: runs {sorted(mixed)} were scored on different machines for different arms, so "
            "they are not paired bit for bit; rescore them on one machine (see docs/results/meta.md)",
            flush=True,
        )
    update_summary(summary_path, {
        ("envs", env_id): entry,
        ("args",): asdict(args),
        ("command_seconds_last_invocation",): time.perf_counter() - started,
    })  # fmt: skip
    order = [arm for arm in DEFAULT_ARMS if arm in done] + [arm for arm in done if arm not in DEFAULT_ARMS]
    atomic_write_text(out / "table.md", f"## {env_id}, perturbed test physics\n\n" + schedule_table(entry, order))
    if done:
        plot_arms({arm: done[arm] for arm in order}, out / f"arms_{env_id}.png", f"{env_id}, perturbed test physics")
    print((out / "table.md").read_text(), flush=True)


if __name__ == "__main__":
    main()
