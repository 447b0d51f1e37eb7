"""Meta-level rollout-length control (Bhatia, Thomas & Zilberstein 2022) at a scale this machine can run.

For each env: (1) meta-train an SB3 DQN meta-agent on the meta-MDP (domain-randomized physics, B inner Dyna-DQN runs
batched per round); (2) score every arm on the perturbed test env (MountainCar gravity 0.003; Acrobot g = 12, link 1
x1.2, link 2 x0.8) with the same inner seeds for every arm: fixed K = 0 / 16 / 32, DEC, INC, INC-DEC, MBPO-linear,
MACURA-style uncertainty truncation, a random meta-policy, the learned meta-policy (META) and SB3 DQN with rl-zoo
hyperparameters; (3) write ``results/summary.json`` (the issue's keys), ``results/arms_<env>.json``,
``results/table.md`` and PNGs.

Everything is resumable: meta-training checkpoints after every round (``--run-root``), each finished arm (or slice of
an arm's runs, ``--runs-per-unit``) is kept in ``results/arms_<env>.json`` and skipped on a rerun with the same
protocol, so a killed run continues where it stopped.

    OMP_NUM_THREADS=1 nice -n 10 python experiments/meta/rollout_length.py            # the scaled run reported
    python experiments/meta/rollout_length.py --budget 50000 --phase-length 5000 \\
        --meta-episodes 300 --test-runs 30                                           # the issue's scaled protocol
"""

from __future__ import annotations

import dataclasses
import functools
import json
import multiprocessing
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tyro

from envs.perturbed import DEFAULT_RANGES, TEST_PHYSICS
from meta.controllers import split_specs
from meta.rollout_length.env import MetaEnvConfig
from meta.rollout_length.evaluate import (
    DQN_ZOO_ARM,
    HEURISTIC_ARMS,
    LEGACY_ARMS,
    RANDOM_ARM,
    compare,
    merge_run_slices,
    run_arms,
    run_dqn_zoo,
)
from meta.rollout_length.plots import plot_arms
from meta.rollout_length.train import HISTORY_NAME, POLICY_NAME, MetaAgentConfig, MetaTrainConfig, MetaTrainer
from rolloutlab.checkpoint import atomic_write_json, atomic_write_text
from rolloutlab.threads import set_torch_threads

RESULTS = Path(__file__).resolve().parent / "results"
ALL_ARMS = (*HEURISTIC_ARMS, RANDOM_ARM, DQN_ZOO_ARM, "meta")
#: Results written before arms were specs file an arm under its old name (``k16`` for ``fixed:16``); by spec.
OLD_NAMES = {spec: old for old, spec in LEGACY_ARMS.items()}


def result_key(arm: str, results: dict[str, Any]) -> str:
    """The key ``arm`` is filed under in ``results``: its old name in results written before arms were specs."""
    old = OLD_NAMES.get(arm)
    return old if old is not None and old in results and arm not in results else arm


def by_spec(results: dict[str, Any]) -> dict[str, Any]:
    """``results`` keyed by spec (old names renamed), e.g. for :func:`compare`."""
    renamed = {LEGACY_ARMS[name]: r for name, r in results.items() if name in LEGACY_ARMS}
    return renamed | {name: r for name, r in results.items() if name not in LEGACY_ARMS}


@dataclass
class Args:
    envs: str = "Acrobot-v1,MountainCar-v0"
    """comma-separated inner envs (in the order they are run)"""
    budget: int = 10_000
    """real env steps per inner run (training and test)"""
    phase_length: int = 1_000
    """P: env steps between decisions (budget / P decisions per run)"""
    k_cap: int = 32
    """largest rollout length"""
    meta_episodes: int = 32
    """meta-training episodes (inner runs) per env, domain-randomized physics"""
    runs_per_round: int = 8
    """B: inner runs batched together during meta-training"""
    workers: int = 1
    """worker processes for meta-training (1 = in-process batching only)"""
    eval_workers: int = 1
    """worker processes for the test arms: the model-based arms are split into this many batched groups and run beside
    the dqn_zoo arm (1 = everything in this process, one after another). Run i of every arm keeps its inner seed
    whatever the grouping, so the paired comparison is unchanged."""
    arms_per_group: int = 0
    """model-based arms batched in one unit of test work (0: split them evenly over ``eval_workers``). Small groups
    finish, and are written to the arms JSON, one by one: a long test can span sessions without carrying the large
    per-group checkpoints (every run's replay buffer) from one machine to the next."""
    test_runs: int = 8
    """inner runs per arm on the perturbed test env (same seeds for every arm)"""
    runs_per_unit: int = 0
    """test runs per unit of work (0: all ``test_runs``). Smaller slices of an arm's runs finish, and are saved, one by
    one, so a session that ends mid-arm loses at most one slice; run i keeps its inner seed whichever slice runs it.
    Fewer runs per batch cost some batching speed."""
    arms: str = ",".join(ALL_ARMS)
    """comma-separated arms"""
    train_seed: int = 0
    """seed of meta-training"""
    test_seed: int = 1
    """inner seed of the test runs (disjoint from meta-training's per-round seeds)"""
    final_episodes: int = 5
    """greedy episodes per run for the final score"""
    net_arch: str = "64,64"
    """inner Q-network hidden widths (rl-zoo uses 256,256; smaller to fit this machine)"""
    num_model_rollouts: int = 200
    """M: imagined rollouts per rollout round"""
    model_gradient_steps: int = -1
    """extra DQN updates per training round on mixed real/imagined batches while K > 0 (-1: as many as the ordinary
    ones)"""
    model_hidden: int = 32
    """world-model ensemble hidden width"""
    model_epochs: int = 5
    """world-model training epochs per refit (early stopping may stop sooner)"""
    model_train_steps: int | None = None
    """cap on world-model gradient steps per refit (keeps refits flat as the buffer grows; None: epochs only)"""
    eval_episodes: int = 2
    """greedy episodes per phase behind the feedback's mean_return"""
    run_root: str = "runs/meta-experiment"
    """where meta-training run directories (checkpoints) live"""
    out_dir: str = str(RESULTS)
    """results directory"""


def parse_args() -> Args:
    """Every ``Args`` field as a ``--flag`` (tyro; the field docstrings are the help text)."""
    return tyro.cli(Args, description=__doc__)


def env_config(args: Args, env_id: str) -> MetaEnvConfig:
    model: dict[str, Any] = {"hidden_size": args.model_hidden, "max_epochs": args.model_epochs}
    if args.model_train_steps is not None:
        model["max_train_steps"] = args.model_train_steps
    dyna = {
        "net_arch": [int(x) for x in args.net_arch.split(",")],
        "num_model_rollouts": args.num_model_rollouts,
        "model_gradient_steps": args.model_gradient_steps,
        "eval_episodes": args.eval_episodes,
        "buffer_size": args.budget,
        "model": model,
    }
    return MetaEnvConfig(
        env_id=env_id,
        budget=args.budget,
        phase_length=args.phase_length,
        k_cap=args.k_cap,
        final_eval_episodes=args.final_episodes,
        dyna=dyna,
    )


def protocol(args: Args) -> dict[str, Any]:
    # The arm list is not part of it: finished arms are kept when a later invocation asks for more (or fewer) arms.
    keys = (
        "budget", "phase_length", "k_cap", "meta_episodes", "test_runs", "runs_per_round", "final_episodes",
        "test_seed", "net_arch", "num_model_rollouts", "model_gradient_steps", "model_hidden", "model_epochs",
        "model_train_steps", "eval_episodes",
    )  # fmt: skip
    return {k: getattr(args, k) for k in keys}


def meta_train(args: Args, env_id: str, out: Path) -> dict[str, Any]:
    run_dir = Path(args.run_root) / env_id
    cfg = MetaTrainConfig(
        env=env_config(args, env_id),
        agent=MetaAgentConfig(learning_starts=40, batch_size=32, target_update_interval=40),
        episodes=args.meta_episodes,
        runs_per_round=args.runs_per_round,
        workers=args.workers,
        seed=args.train_seed,
    )
    if (run_dir / "meta_checkpoint.pt").exists():
        print(f"[{env_id}] resuming meta-training from {run_dir}", flush=True)
        trainer = MetaTrainer.resume(run_dir)
    else:
        trainer = MetaTrainer(cfg, run_dir)
    summary = trainer.train()
    for name in (POLICY_NAME, HISTORY_NAME, "meta_training.png"):
        if (run_dir / name).exists():
            shutil.copyfile(run_dir / name, out / f"{env_id}_{name}")
    return summary


def env_protocol(args: Args) -> dict[str, Any]:
    return {
        "budget": args.budget,
        "phase": args.phase_length,
        "k_cap": args.k_cap,
        "meta_episodes": args.meta_episodes,
        "test_runs": args.test_runs,
    }


def finalize(summary: dict[str, Any]) -> None:
    """Top-level ``protocol`` (a value, or ``{env: value}`` where envs differ) and summed meta-training cost."""
    protocols = {env_id: entry["protocol"] for env_id, entry in summary["envs"].items()}
    top: dict[str, Any] = {}
    for key in ("budget", "phase", "k_cap", "meta_episodes", "test_runs"):
        values = {env_id: p[key] for env_id, p in protocols.items()}
        top[key] = next(iter(values.values())) if len(set(values.values())) == 1 else values
    top["perturbation"] = {"test": TEST_PHYSICS, "training_domain_randomization": DEFAULT_RANGES}
    summary["protocol"] = top
    per = summary["meta_training"]["per_env"].values()
    wall = sum(p["wall_seconds"] for p in per)
    steps = sum(p["inner_env_steps"] for p in per)
    summary["meta_training"].update(
        wall_seconds=wall, inner_env_steps=steps, inner_steps_per_second=steps / wall if wall else None
    )


def _progress(env_id: str, phase: int) -> None:
    print(f"[{env_id}] test phase {phase + 1} done", flush=True)


def _zoo_progress(env_id: str, runs: int, index: int, final: float) -> None:
    print(f"[{env_id}] dqn_zoo run {index + 1}/{runs}: final {final:.1f}", flush=True)


@dataclass(frozen=True)
class EvalUnit:
    """One unit of test work: runs ``first_run .. first_run + runs - 1`` of a batched group of model-based arms
    (checkpointed per phase at ``checkpoint``), or the whole dqn_zoo arm (its finished runs kept at ``checkpoint``)."""

    checkpoint: str
    arms: list[str]
    first_run: int
    runs: int


def run_slices(args: Args) -> list[tuple[int, int]]:
    """``(first run, number of runs)`` of each slice of an arm's ``test_runs`` (one slice if ``runs_per_unit`` is 0)."""
    step = args.runs_per_unit if 0 < args.runs_per_unit < args.test_runs else args.test_runs
    return [(start, min(step, args.test_runs - start)) for start in range(0, args.test_runs, step)]


def eval_units(args: Args, env_id: str, model_arms: list[str], slices: dict[str, dict[str, Any]]) -> list[EvalUnit]:
    """The units still to run: ``model_arms`` in groups of ``arms_per_group`` (or over ``eval_workers``), each split
    into slices of ``runs_per_unit`` runs; slices already saved for every arm of their group are left out."""
    if args.arms_per_group > 0:
        size = args.arms_per_group
        groups = [model_arms[j : j + size] for j in range(0, len(model_arms), size)]
    else:
        groups = [model_arms[j :: max(args.eval_workers, 1)] for j in range(max(args.eval_workers, 1))]
    groups = [g for g in groups if g]
    units = []
    for j, group in enumerate(groups):
        # One checkpoint per group (the single-group name is the historical one, so older runs still resume).
        if args.arms_per_group > 0:
            name = f"arms_{env_id}_{'-'.join(group)}"
        else:
            name = f"arms_{env_id}" if len(groups) == 1 else f"arms_{env_id}_part{j + 1}of{len(groups)}"
        for start, runs in run_slices(args):
            if all(len(slices.get(arm, {}).get(str(start), {}).get("finals", [])) == runs for arm in group):
                continue
            suffix = "" if runs == args.test_runs else f"_runs{start}-{start + runs - 1}"
            units.append(EvalUnit(str(Path(args.run_root) / f"{name}{suffix}.pt"), group, start, runs))
    return units


def evaluate_task(args: Args, env_id: str, cfg: MetaEnvConfig, out: Path, unit: EvalUnit) -> dict[str, Any]:
    """Run one unit of test work; ``{arm: result}``."""
    set_torch_threads(1)
    checkpoint, arms = unit.checkpoint, unit.arms
    if arms == ["dqn_zoo"]:
        print(f"[{env_id}] arm dqn_zoo: {args.test_runs} runs x {args.budget} steps", flush=True)
        zoo = run_dqn_zoo(
            env_id,
            args.budget,
            args.test_runs,
            args.test_seed,
            None,
            args.final_episodes,
            checkpoint=checkpoint,
            on_run=functools.partial(_zoo_progress, env_id, args.test_runs),
        )
        return {"dqn_zoo": zoo}
    last = unit.first_run + unit.runs - 1
    print(f"[{env_id}] arms {arms}: runs {unit.first_run}-{last} each x {args.budget} steps", flush=True)
    specs = [f"learned:{out / f'{env_id}_{POLICY_NAME}'}" if a == "meta" else a for a in arms]
    return run_arms(
        specs,
        cfg,
        unit.runs,
        args.test_seed,
        None,
        args.final_episodes,
        checkpoint=checkpoint,
        on_phase=functools.partial(_progress, env_id),
        first_run=unit.first_run,
    )


def run_test_tasks(
    args: Args, env_id: str, cfg: MetaEnvConfig, out: Path, units: list[EvalUnit]
) -> Iterator[tuple[EvalUnit, dict[str, Any]]]:
    """Yield ``(unit, {arm: result})`` as each unit finishes, in this process or over ``eval_workers`` processes."""
    if args.eval_workers <= 1 or len(units) <= 1:
        for unit in units:
            yield unit, evaluate_task(args, env_id, cfg, out, unit)
        return
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=min(args.eval_workers, len(units)), mp_context=context) as pool:
        futures = {pool.submit(evaluate_task, args, env_id, cfg, out, unit): unit for unit in units}
        for future in as_completed(futures):
            yield futures[future], future.result()


def record(
    args: Args, unit: EvalUnit, results: dict[str, Any], done: dict[str, Any], slices: dict[str, dict[str, Any]]
) -> list[str]:
    """File a finished unit's results: whole arms into ``done``; slices into ``slices`` until an arm's slices cover all
    ``test_runs``, then merged into ``done``. Returns the arms that became complete."""
    finished = []
    for arm, result in results.items():
        if unit.runs == args.test_runs:
            done[arm] = result
            finished.append(arm)
            continue
        parts = slices.setdefault(arm, {})
        parts[str(unit.first_run)] = result
        plan = run_slices(args)  # slices saved under another --runs-per-unit are not mixed in
        if all(len(parts.get(str(start), {}).get("finals", [])) == runs for start, runs in plan):
            done[arm] = merge_run_slices([parts[str(start)] for start, _ in plan])
            done[arm]["runs_per_unit"] = args.runs_per_unit
            del slices[arm]
            finished.append(arm)
    return finished


def table(summary: dict[str, Any]) -> str:
    envs = list(summary["envs"])
    lines = ["| arm | " + " | ".join(envs) + " |", "|---|" + "---|" * len(envs)]
    for arm in ALL_ARMS:
        keys = {result_key(arm, summary["envs"][env_id]["arms"]) for env_id in envs}
        label = next(iter(keys)) if len(keys) == 1 else arm
        cells = []
        for env_id in envs:
            r = summary["envs"][env_id]["arms"].get(result_key(arm, summary["envs"][env_id]["arms"]))
            cells.append("—" if r is None else f"{r['mean']:.1f} ± {r['se']:.1f}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    cells = []
    for env_id in envs:
        d = summary["envs"][env_id].get("meta_minus_best_heuristic")
        cells.append("—" if not d else f"{d['mean']:+.1f} ± {d['se']:.1f}")
    lines.append("| META − best heuristic (paired) | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    args = parse_args()
    set_torch_threads(1)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    arms = split_specs(args.arms)
    started = time.perf_counter()
    summary_path = out / "summary.json"
    # Envs run by earlier invocations (possibly with another protocol) are kept; each env records its own protocol.
    summary: dict[str, Any] = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    summary.setdefault("envs", {})
    summary.setdefault("meta_training", {}).setdefault("per_env", {})
    summary.setdefault("args_by_env", {})
    for env_id in [e.strip() for e in args.envs.split(",") if e.strip()]:
        arms_path = out / f"arms_{env_id}.json"
        saved = json.loads(arms_path.read_text()) if arms_path.exists() else {}
        same = saved.get("protocol") == protocol(args)
        done: dict[str, Any] = saved.get("arms", {}) if same else {}
        slices: dict[str, dict[str, Any]] = saved.get("slices", {}) if same else {}
        cfg = env_config(args, env_id)
        if "meta" in arms:
            train_summary = meta_train(args, env_id, out)
            per_env = {k: train_summary[k] for k in ("wall_seconds", "inner_env_steps", "inner_steps_per_second")}
            per_env["episodes_done"] = train_summary["episodes_done"]
            summary["meta_training"]["per_env"][env_id] = per_env
        model_arms = [a for a in arms if a != DQN_ZOO_ARM and a not in done]
        units = eval_units(args, env_id, model_arms, slices)
        if "dqn_zoo" in arms and "dqn_zoo" not in done:
            # Finished dqn_zoo runs are kept here, so a killed arm resumes at its next run.
            zoo_checkpoint = str(Path(args.run_root) / f"arms_{env_id}_dqn_zoo.json")
            units.append(EvalUnit(zoo_checkpoint, ["dqn_zoo"], 0, args.test_runs))
        for unit, results in run_test_tasks(args, env_id, cfg, out, units):
            for arm in record(args, unit, results, done, slices):
                done[arm]["inner_env_steps"] = args.test_runs * args.budget
                print(f"[{env_id}] arm {arm}: {done[arm]['mean']:.1f} ± {done[arm]['se']:.1f}", flush=True)
            if unit.runs != args.test_runs:
                print(f"[{env_id}] arms {unit.arms}: runs from {unit.first_run} saved", flush=True)
            saved_arms: dict[str, Any] = {"protocol": protocol(args), "arms": done}
            if slices:
                saved_arms["slices"] = slices
            atomic_write_json(arms_path, saved_arms)
        entry: dict[str, Any] = {"arms": done, "physics": TEST_PHYSICS[env_id], "protocol": env_protocol(args)}
        entry.update(compare(by_spec(done)))
        summary["envs"][env_id] = entry
        summary["args_by_env"][env_id] = dataclasses.asdict(args)
        ordered = {result_key(a, done): done[result_key(a, done)] for a in ALL_ARMS if result_key(a, done) in done}
        plot_arms(ordered, out / f"arms_{env_id}.png", f"{env_id}, perturbed test physics")
        finalize(summary)
        summary["experiment_wall_seconds_last_invocation"] = time.perf_counter() - started
        atomic_write_json(summary_path, summary)
        atomic_write_text(out / "table.md", table(summary))
        print(table(summary), flush=True)


if __name__ == "__main__":
    main()
