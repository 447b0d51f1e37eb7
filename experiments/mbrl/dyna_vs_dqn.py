"""Dyna-DQN vs DQN on MountainCar-v0 and Acrobot-v1 at the same budget: final greedy return and AUC, plus costs.

Three arms, the same seeds and budget for each:

* ``dyna``: our batched Dyna-DQN (Bhatia, Thomas & Zilberstein 2022, Algorithm 1) with a fixed rollout length ``K``;
* ``dyna_k0``: the same learner with ``K = 0`` (no model use: our DQN);
* ``dqn_zoo``: SB3's ``DQN`` with rl-zoo's tuned hyperparameters (the same values our learner defaults to).

All seeds of the two Dyna arms advance together in one :class:`~mbrl.algorithms.dyna.BatchedDynaDQN` (runs batched
over seeds and arms). Every ``phase_length`` env steps each run is evaluated greedily (``eval_episodes`` episodes;
SB3's ``EvalCallback`` for ``dqn_zoo``); AUC is the mean of those evaluations (the normalized area under the learning
curve), and the final return is a greedy evaluation of ``final_eval_episodes`` episodes after the budget.

Usage (finished (env, arm) pairs are kept in the output JSON and skipped on a rerun, so a killed run resumes); the
committed 5-seed run (docs/dyna.md) is:

    OMP_NUM_THREADS=1 nice -n 10 python experiments/mbrl/dyna_vs_dqn.py --budget 20000 --seeds 0,1,2,3,4 \
        --out experiments/mbrl/results/dyna_s5.json

Writes ``--out`` (default ``results/dyna.json``: resolved args, per-seed curves, the ``"dyna"`` entries and ``"costs"``
of ``summary.json``) and the same name with ``.png`` (learning curves, mean ± standard error).
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tyro

from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.threads import set_torch_threads

RESULTS = Path(__file__).resolve().parent / "results"
ARMS = ("dyna", "dyna_k0", "dqn_zoo")


@dataclass
class Args:
    envs: str = "Acrobot-v1,MountainCar-v0"
    """comma-separated gymnasium ids"""
    budget: int = 50_000
    """real env steps per run, the same for every arm"""
    seeds: str = "0,1,2"
    """comma-separated seeds, the same for every arm"""
    arms: str = ",".join(ARMS)
    """comma-separated arms: dyna, dyna_k0, dqn_zoo"""
    k: int = 16
    """rollout length K of the dyna arm"""
    phase_length: int = 2_000
    """P: env steps between model refits / Dyna bursts, and between evaluations"""
    num_model_rollouts: int = 1_000
    """M: imagined rollouts per burst"""
    planning_updates: int = 500
    """G': DQN updates on imagined data per burst"""
    eval_episodes: int = 3
    """greedy episodes per evaluation along the learning curve"""
    final_eval_episodes: int = 10
    """greedy episodes of the final evaluation"""
    throughput_steps: int = 1_000
    """env steps of the steps-per-second measurement (Acrobot, K = 0, no model), with 1 and with B runs"""
    throughput_batch: int = 8
    """B of the batched steps-per-second measurement"""
    out: str = str(RESULTS / "dyna.json")
    """output JSON (read back to resume)"""


def parse_args() -> Args:
    """Every ``Args`` field as a ``--flag`` (tyro; the field docstrings are the help text)."""
    return tyro.cli(Args, description=__doc__)


def summarize(finals: list[float], curves: list[list[float]]) -> dict[str, Any]:
    """Per-seed finals, their mean and standard error, and the AUC (mean over seeds of the mean curve value)."""
    values = np.asarray(finals, dtype=float)
    se = float(values.std(ddof=1) / np.sqrt(len(values))) if len(values) > 1 else float("nan")
    aucs = [float(np.mean(c)) for c in curves]
    return {
        "final_return": [float(v) for v in values],
        "mean": float(values.mean()),
        "se": se,
        "auc": float(np.mean(aucs)),
        "auc_per_seed": aucs,
        "curves": curves,
    }


def run_dyna_arms(
    env_id: str, seeds: list[int], arms: Sequence[str], args: Args
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both Dyna arms, every seed, in one batch: runs ``[dyna seeds..., dyna_k0 seeds...]``."""
    import gymnasium as gym

    from mbrl.algorithms.dyna import BatchedDynaDQN, DynaConfig

    cfg = DynaConfig.for_env(
        env_id,
        budget=args.budget,
        phase_length=args.phase_length,
        num_model_rollouts=args.num_model_rollouts,
        planning_updates=args.planning_updates,
        eval_episodes=args.eval_episodes,
        train_model_when_k0=False,
    )
    ks = [args.k if arm == "dyna" else 0 for arm in arms for _ in seeds]
    run_seeds = [1_000 * (arm == "dyna_k0") + s for arm in arms for s in seeds]
    algo = BatchedDynaDQN([lambda: gym.make(env_id)] * len(ks), cfg, seed=0, run_seeds=run_seeds)
    curves: list[list[float]] = [[] for _ in ks]
    rollout_transitions, rollout_seconds = 0.0, 0.0
    started = time.perf_counter()
    while not algo.done:
        feedback = algo.run_phase(ks)
        for curve, fb in zip(curves, feedback, strict=True):
            curve.append(fb["mean_return"])
        rollout_transitions += sum(fb.get("model_transitions", 0.0) for fb in feedback)
        rollout_seconds += sum(fb.get("rollout_seconds", 0.0) for fb in feedback)
        print(f"{env_id} step {algo.steps_done}: " + ", ".join(f"{c[-1]:.0f}" for c in curves), flush=True)
    finals = algo.evaluate(args.final_eval_episodes)
    wall = time.perf_counter() - started
    out = {}
    n = len(seeds)
    for a, arm in enumerate(arms):
        rows = slice(a * n, (a + 1) * n)
        out[arm] = summarize([float(v) for v in finals[rows]], curves[rows])
    costs = {
        "batched_runs": len(ks),
        "wall_seconds": wall,
        "wall_seconds_per_1k_env_steps_per_run": wall / (args.budget * len(ks)) * 1000,
        "imagined_transitions": rollout_transitions,
        "imagined_transitions_per_second": rollout_transitions / rollout_seconds if rollout_seconds else None,
    }
    return out, costs


def run_dqn_zoo(env_id: str, seeds: list[int], args: Args) -> tuple[dict[str, Any], dict[str, Any]]:
    """SB3 DQN with rl-zoo's hyperparameters, one seed after another."""
    import gymnasium as gym
    from stable_baselines3 import DQN
    from stable_baselines3.common.callbacks import EvalCallback
    from stable_baselines3.common.evaluation import evaluate_policy

    from mbrl.algorithms.dyna import ZOO_DQN
    from mbrl.termination import base_name

    hp = dict(ZOO_DQN[base_name(env_id)])
    net_arch = hp.pop("net_arch")
    finals, curves, wall = [], [], 0.0
    for seed in seeds:
        started = time.perf_counter()
        model = DQN("MlpPolicy", gym.make(env_id), policy_kwargs={"net_arch": net_arch}, seed=seed, device="cpu", **hp)
        with tempfile.TemporaryDirectory() as log_dir:  # EvalCallback keeps its curve only when given a log path
            callback = EvalCallback(
                gym.make(env_id),
                n_eval_episodes=args.eval_episodes,
                eval_freq=args.phase_length,
                deterministic=True,
                log_path=log_dir,
                verbose=0,
            )
            model.learn(total_timesteps=args.budget, callback=callback)
        eval_env = gym.make(env_id)
        eval_env.reset(seed=10_000 + seed)
        mean, _ = evaluate_policy(model, eval_env, n_eval_episodes=args.final_eval_episodes, deterministic=True)
        assert isinstance(mean, float)
        wall += time.perf_counter() - started
        finals.append(float(mean))
        curves.append([float(np.mean(r)) for r in callback.evaluations_results])
        print(f"{env_id} dqn_zoo seed {seed}: final {mean:.1f}", flush=True)
    return summarize(finals, curves), {"wall_seconds_per_1k_env_steps": wall / (args.budget * len(seeds)) * 1000}


def measure_throughput(args: Args) -> dict[str, Any]:
    """Dyna-DQN env steps per second (acting + learning, K = 0, Acrobot-v1) with 1 run and with B batched runs."""
    import gymnasium as gym

    from mbrl.algorithms.dyna import BatchedDynaDQN, DynaConfig

    out: dict[str, Any] = {"env": "Acrobot-v1", "steps": args.throughput_steps}
    for b in (1, args.throughput_batch):
        cfg = DynaConfig.for_env(
            "Acrobot-v1", budget=args.throughput_steps, phase_length=args.throughput_steps, train_model_when_k0=False
        )
        algo = BatchedDynaDQN([lambda: gym.make("Acrobot-v1")] * b, cfg, seed=0)
        started = time.perf_counter()
        for _ in range(args.throughput_steps):
            algo._env_step([[] for _ in range(b)])
        seconds = time.perf_counter() - started
        out[f"runs_{b}"] = {"seconds": seconds, "env_steps_per_second_total": b * args.throughput_steps / seconds}
    return out


def plot(path: Path, entries: list[dict[str, Any]], phase_length: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(entries), figsize=(5 * len(entries), 3.8), squeeze=False)
    for ax, entry in zip(axes[0], entries, strict=True):
        for arm, res in entry["arms"].items():
            curves = np.asarray(res["curves"], dtype=float)
            steps = phase_length * np.arange(1, curves.shape[1] + 1)
            mean = curves.mean(axis=0)
            se = curves.std(axis=0, ddof=1) / np.sqrt(len(curves)) if len(curves) > 1 else np.zeros_like(mean)
            ax.plot(steps, mean, label=f"{arm} (n={len(curves)})")
            ax.fill_between(steps, mean - se, mean + se, alpha=0.2)
        ax.set_title(f"{entry['env']}, budget {entry['budget']}")
        ax.set_xlabel("env steps")
        ax.set_ylabel("greedy return (mean ± s.e.)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    args = parse_args()
    set_torch_threads(1)
    out_path = Path(args.out)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = set(arms) - set(ARMS)
    if unknown:
        raise SystemExit(f"unknown arms {sorted(unknown)}; known: {ARMS}")
    result: dict[str, Any] = {"args": dataclasses.asdict(args), "dyna": [], "costs": {}}
    if out_path.exists():
        previous = json.loads(out_path.read_text())
        same = {k: previous.get("args", {}).get(k) for k in ("budget", "seeds", "k")}
        if same == {"budget": args.budget, "seeds": args.seeds, "k": args.k}:
            result["dyna"], result["costs"] = previous.get("dyna", []), previous.get("costs", {})
            print(f"resuming from {out_path}")
    for env_id in [e.strip() for e in args.envs.split(",") if e.strip()]:
        entry = next((e for e in result["dyna"] if e["env"] == env_id), None)
        if entry is None:
            entry = {"env": env_id, "budget": args.budget, "seeds": seeds, "k": args.k, "arms": {}}
            result["dyna"].append(entry)
        env_costs = result["costs"].setdefault(env_id, {})
        dyna_arms = [a for a in ("dyna", "dyna_k0") if a in arms and a not in entry["arms"]]
        if dyna_arms:
            arm_results, costs = run_dyna_arms(env_id, seeds, dyna_arms, args)
            entry["arms"].update(arm_results)
            env_costs["batched_dyna"] = costs
            atomic_write_json(out_path, result)
        if "dqn_zoo" in arms and "dqn_zoo" not in entry["arms"]:
            entry["arms"]["dqn_zoo"], env_costs["dqn_zoo"] = run_dqn_zoo(env_id, seeds, args)
            atomic_write_json(out_path, result)
    if "throughput" not in result["costs"]:
        result["costs"]["throughput"] = measure_throughput(args)
        atomic_write_json(out_path, result)
    plot(out_path.with_suffix(".png"), result["dyna"], args.phase_length)
    print(f"\n{'env':16s} {'arm':8s} {'final mean ± se':>18s} {'AUC':>8s}")
    for entry in result["dyna"]:
        for arm, res in entry["arms"].items():
            print(f"{entry['env']:16s} {arm:8s} {res['mean']:10.1f} ± {res['se']:5.1f} {res['auc']:8.1f}")
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()
