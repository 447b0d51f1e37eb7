"""The gate: do imagined rollouts help Dyna-DQN at all? (issue "The model must pay off")

Before any meta-controller is trained to choose the rollout length K, some K > 0 must beat K = 0. On Acrobot-v1 with a
20k env-step budget and phases of 2k steps, every arm below trains ``runs`` paired inner runs (run i of every arm
shares its seed: network init, env resets, exploration stream) in batched Dyna-DQN learners, all driven through the
one rollout-length driver (:class:`mbrl.phases.RolloutLengthDriver`):

* ``fixed:K`` for K in {0, 1, 2, 4, 8, 16}: K = 0 is plain DQN (rl-zoo settings); K > 0 mixes imagined data into
  every minibatch and makes the extra updates on it;
* ``incdec:16``: INC-DEC (Bhatia, Thomas & Zilberstein 2022) up to 16;
* ``fixed:0+compute``: K = 0 given the same extra gradient updates as the model arms, on real data (compute-matched);
* ``fixed:8+true``: K = 8 with the environment's own dynamics as the "model" (the ceiling of what a perfect model
  gives this learner).

Every arm is scored at the same point of its cycle: the greedy policy after the last env step, over
``final_episodes`` episodes. Reported per arm (rliable): mean, median, IQM and the fraction of runs that solve the
task (mean greedy return >= -100, gymnasium's reward threshold for Acrobot), with 95% stratified-bootstrap
intervals; and for every K > 0 arm the paired difference in IQM against both K = 0 arms with its paired-bootstrap
standard error. The gate passes when the best K > 0 arm beats *both* K = 0 arms by more than two paired standard
errors in IQM. Model error per horizon is recorded (disagreement at each rollout step, model-vs-real return error).

Runs are split into slices (``--runs-per-slice``) saved to ``results/gate/`` one by one, so a killed run loses only
the slice in progress and a rerun skips finished slices; ``--workers`` runs slices side by side.

    OMP_NUM_THREADS=1 python experiments/mbrl/gate.py --workers 2     # -> experiments/mbrl/results/gate.json
"""

from __future__ import annotations

import dataclasses
import json
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tyro

from rolloutlab.statistics import interval_estimates, iqm, paired_difference

RESULTS = Path(__file__).resolve().parent / "results"
SOLVED = -100.0  # gymnasium's reward_threshold for Acrobot-v1


@dataclass
class Args:
    env_id: str = "Acrobot-v1"
    """inner environment (a discrete-action env with rl-zoo DQN settings)"""
    budget: int = 20_000
    """real env steps per run"""
    phase_length: int = 2_000
    """env steps between rollout-length decisions"""
    arms: str = "fixed:0,fixed:0+compute,fixed:1,fixed:2,fixed:4,fixed:8,fixed:16,incdec:16,fixed:8+true"
    """comma-separated arms: a controller spec, optionally +compute (K=0 with the extra updates on real data) or
    +true (the env's own dynamics as the model)"""
    runs: int = 20
    """paired runs per arm"""
    runs_per_slice: int = 5
    """runs per saved slice (every arm's runs of a slice train in one batched learner)"""
    seed: int = 0
    """base seed; run i of every arm uses seed * 10_000 + i"""
    workers: int = 1
    """slices run side by side in worker processes"""
    final_episodes: int = 10
    """greedy episodes behind each run's final score"""
    net_arch: str = "64,64"
    """Q-network hidden widths (rl-zoo: 256,256; 64,64 keeps 9 arms x 20 runs inside one session on 2 cores)"""
    model_train_freq: int = 2_000
    """env steps between world-model refits"""
    model_min_train_steps: int = 300
    """gradient steps every world-model refit takes (warm-started from the previous fit)"""
    model_patience_steps: int = 200
    """gradient steps without holdout improvement before a refit stops"""
    model_max_train_steps: int = 600
    """cap on gradient steps per refit: the 120 learned models x 10 refits dominate the gate's cost"""
    rollout_freq: int = 250
    """env steps between rounds of imagined rollouts"""
    num_model_rollouts: int = 1_000
    """imagined rollouts per round"""
    model_retain_rounds: int = 4
    """rounds of imagined data kept"""
    real_ratio: float = 0.5
    """real share of each minibatch of a model-using run"""
    model_gradient_steps: int = -1
    """extra updates per training round of a model-using (or compute-matched) run; -1: as many as the ordinary ones"""
    target_clock: str = "updates"
    """target-network sync clock: "updates" (each run's own gradient steps) or "env_steps" (SB3's)"""
    model_use: str = "dyna"
    """dyna (train on imagined rollouts of K steps) or lookahead (act by K-step rollouts in the model)"""
    multi_step_targets: bool = False
    """imagined transitions carry the model's rewards to the end of their rollout (model value expansion)"""
    deterministic_rollouts: bool = False
    """imagined steps use the elite's mean instead of sampling (Acrobot is deterministic)"""
    lookahead_expectation: bool = False
    """lookahead steps with the elites' average prediction instead of one random elite's mean"""
    lookahead_trust: float = 0.0
    """0, or keep the Q-function's choice where the chosen rollout's disagreement exceeds this times the usual one"""
    bootstrap_reps: int = 2_000
    """bootstrap resamples for intervals and paired standard errors"""
    out_dir: str = str(RESULTS / "gate")
    """where slices are saved"""
    out: str = str(RESULTS / "gate.json")
    """the summary"""


def parse_arm(arm: str) -> tuple[str, bool, bool]:
    """``(controller spec, compute_matched, true_model)`` of an arm name."""
    spec, _, modifier = arm.partition("+")
    if modifier not in ("", "compute", "true"):
        raise ValueError(f"arm {arm!r}: unknown modifier {modifier!r} (use +compute or +true)")
    return spec, modifier == "compute", modifier == "true"


def learner_config(args: Args) -> Any:
    """The Dyna-DQN config every arm shares."""
    from mbrl.algorithms.dyna import DynaConfig, dyna_model_config

    model = dataclasses.replace(
        dyna_model_config(),
        min_train_steps=args.model_min_train_steps,
        patience_steps=args.model_patience_steps,
        max_train_steps=args.model_max_train_steps,
    )
    return DynaConfig.for_env(
        args.env_id,
        budget=args.budget,
        phase_length=args.phase_length,
        k_cap=32,
        model_train_freq=args.model_train_freq,
        rollout_freq=args.rollout_freq,
        num_model_rollouts=args.num_model_rollouts,
        model_retain_rounds=args.model_retain_rounds,
        real_ratio=args.real_ratio,
        model_gradient_steps=args.model_gradient_steps,
        train_model_when_k0=False,  # plain K = 0 arms are plain DQN; no model is fit for them
        net_arch=[int(w) for w in args.net_arch.split(",")],
        multi_step_targets=args.multi_step_targets,
        target_clock=args.target_clock,
        model_use=args.model_use,
        deterministic_rollouts=args.deterministic_rollouts,
        lookahead_expectation=args.lookahead_expectation,
        lookahead_trust=args.lookahead_trust,
        model=model,
    )


def run_slice(args: Args, arms: list[str], first_run: int, runs: int) -> dict[str, Any]:
    """Train ``runs`` paired runs of every arm (one batched learner) and score them; returns per-arm records."""
    import gymnasium as gym

    from mbrl.algorithms.dyna import BatchedDynaDQN
    from mbrl.phases import RolloutLengthDriver
    from meta.controllers import make_controller
    from rolloutlab.threads import set_torch_threads

    set_torch_threads()
    started = time.perf_counter()
    parsed = [parse_arm(a) for a in arms for _ in range(runs)]
    seeds = [args.seed * 10_000 + first_run + i for _ in arms for i in range(runs)]
    env_fns = [lambda: gym.make(args.env_id)] * len(parsed)
    models: list[Any] = [None] * len(parsed)
    if any(true for _, _, true in parsed):
        from mbrl.models.true_dynamics import TrueAcrobotModel

        models = [TrueAcrobotModel.from_env(gym.make(args.env_id)) if true else None for _, _, true in parsed]
    learner = BatchedDynaDQN(
        env_fns,
        learner_config(args),
        seed=args.seed,
        run_seeds=seeds,
        compute_matched=[c for _, c, _ in parsed],
        models=models,
    )
    driver = RolloutLengthDriver([make_controller(spec) for spec, _, _ in parsed], k_cap=learner.cfg.k_cap)
    curves: list[list[dict[str, float]]] = [[] for _ in parsed]
    horizons: list[list[list[float]]] = [[] for _ in parsed]
    while not learner.done:
        feedback = driver.run_phase(learner)
        for i, fb in enumerate(feedback):
            keys = ("mean_return", "model_return_error", "model_holdout_nmse", "model_transitions", "k")
            curves[i].append({k: float(fb[k]) for k in keys if k in fb})
            horizons[i].append(list(learner.last_disagreement_by_step[i]))
        means = [
            float(np.mean([fb["mean_return"] for fb in feedback[a * runs : (a + 1) * runs]])) for a in range(len(arms))
        ]
        print(f"runs {first_run}+{runs} step {learner.steps_done}: " + ", ".join(f"{m:.0f}" for m in means), flush=True)
    finals = learner.evaluate(args.final_episodes)
    finals_q: np.ndarray | None = None
    if args.model_use == "lookahead":
        # A diagnostic: the same final Q-networks acting greedily without lookahead, on the same evaluation episodes.
        # It tells a model that misleads the final decisions apart from a Q-function that learned less.
        in_force = list(learner.ks)
        learner.ks = [0] * len(in_force)
        finals_q = learner.evaluate(args.final_episodes)
        learner.ks = in_force
    seconds = time.perf_counter() - started
    out: dict[str, Any] = {}
    for a, arm in enumerate(arms):
        rows = range(a * runs, (a + 1) * runs)
        out[arm] = {
            "finals": [float(finals[i]) for i in rows],
            "curves": [curves[i] for i in rows],
            "disagreement_by_step": [horizons[i] for i in rows],
            "updates": [int(learner.updates[i]) for i in rows],
            "model_updates": [int(learner.model_updates[i]) for i in rows],
            "untrusted_decisions": [int(learner.untrusted_decisions[i]) for i in rows],
        }
        if finals_q is not None:
            out[arm]["finals_q_greedy"] = [float(finals_q[i]) for i in rows]
    return {"first_run": first_run, "runs": runs, "arms": out, "seconds": seconds}


def slice_path(args: Args, first_run: int, runs: int) -> Path:
    return Path(args.out_dir) / f"slice_{first_run:03d}_{runs:03d}.json"


def protocol(args: Args) -> dict[str, Any]:
    """What must match for a saved slice to be reused."""
    keep = dataclasses.asdict(args)
    for key in ("runs", "workers", "bootstrap_reps", "out_dir", "out"):
        keep.pop(key)
    # Settings added after slices were saved count only when they differ from the behaviour those slices ran with.
    added = {
        "target_clock": "updates",
        "multi_step_targets": False,
        "deterministic_rollouts": False,
        "model_use": "dyna",
        "lookahead_expectation": False,
        "lookahead_trust": 0.0,
    }
    for key, default in added.items():
        if keep[key] == default:
            keep.pop(key)
    return keep


def command_line(args: Args) -> str:
    """The command that reproduces ``args``: the settings that differ from the defaults, as tyro's flags."""
    parts = ["OMP_NUM_THREADS=1 python experiments/mbrl/gate.py --workers 2", f"--runs {args.runs}"]
    for field in dataclasses.fields(Args):
        value, default = getattr(args, field.name), field.default
        if field.name in ("runs", "workers") or value == default:
            continue
        flag = "--" + field.name.replace("_", "-")
        if isinstance(value, bool):
            parts.append(flag if value else "--no-" + field.name.replace("_", "-"))
        else:
            out = str(value)
            root = str(RESULTS.parent.parent.parent) + "/"
            parts.append(f"{flag} {out[len(root) :] if out.startswith(root) else out}")
    return " ".join(parts)


def summarize(args: Args, finals: dict[str, np.ndarray]) -> dict[str, Any]:
    """Per-arm aggregates with rliable intervals, and paired IQM differences against both K = 0 arms."""
    from rliable import metrics

    # One task: rliable's aggregate_median is a median over *tasks* of per-task means, so the median over runs is
    # taken directly.
    aggregates = {
        "mean": metrics.aggregate_mean,
        "median": lambda x: float(np.median(x)),
        "iqm": iqm,
        "solved_fraction": lambda x: float(np.mean(x >= SOLVED)),
    }
    estimates = interval_estimates(finals, aggregates, seed=args.seed, reps=args.bootstrap_reps)
    arms: dict[str, Any] = {}
    for arm, values in finals.items():
        entry: dict[str, Any] = {"finals": values.tolist()}
        for name, estimate in estimates[arm].items():
            entry[name] = estimate.value
            entry[f"{name}_ci95"] = [estimate.low, estimate.high]
        arms[arm] = entry
    baselines = [b for b in ("fixed:0", "fixed:0+compute") if b in finals]
    paired: dict[str, Any] = {}
    for arm, values in finals.items():
        if parse_arm(arm)[0] == "fixed:0":
            continue
        paired[arm] = {}
        for base in baselines:
            # A fresh generator from the same seed per pair: every comparison resamples the same run indices.
            d = paired_difference(values, finals[base], statistic=iqm, rng=args.seed, n_resamples=args.bootstrap_reps)
            se = d.standard_error
            paired[arm][base] = {"iqm_diff": d.value, "se": se, "z": d.value / se if se > 0 else float("inf")}
    model_arms = [a for a in paired if not parse_arm(a)[2]]
    best = max(model_arms, key=lambda a: arms[a]["iqm"]) if model_arms else None
    # The verdict needs both K = 0 arms: beating only one of them is not the gate.
    passed = bool(best is not None and len(baselines) == 2 and all(paired[best][b]["z"] > 2.0 for b in baselines))
    return {"arms": arms, "paired_iqm_vs_k0": paired, "best_model_arm": best, "gate_passed": passed}


def table(summary: dict[str, Any]) -> str:
    """The markdown table quoted by the README and docs/dyna.md (generated, never edited by hand)."""
    lines = [
        "| arm | mean | median | IQM [95% CI] | solved "
        "| IQM − fixed:0 (paired s.e.) | IQM − fixed:0+compute (paired s.e.) |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm, entry in summary["arms"].items():
        paired = summary["paired_iqm_vs_k0"].get(arm, {})
        diffs = [
            f"{paired[b]['iqm_diff']:+.1f} ({paired[b]['se']:.1f})" if b in paired else "—"
            for b in ("fixed:0", "fixed:0+compute")
        ]
        lo, hi = entry["iqm_ci95"]
        lines.append(
            f"| {arm} | {entry['mean']:.1f} | {entry['median']:.1f} | {entry['iqm']:.1f} [{lo:.1f}, {hi:.1f}] "
            f"| {entry['solved_fraction']:.2f} | {diffs[0]} | {diffs[1]} |"
        )
    return "\n".join(lines) + "\n"


def main(args: Args) -> dict[str, Any]:
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    for arm in arms:
        parse_arm(arm)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    slices = [
        (first, min(args.runs_per_slice, args.runs - first)) for first in range(0, args.runs, args.runs_per_slice)
    ]
    done: dict[int, dict[str, Any]] = {}
    todo = []
    for first, runs in slices:
        path = slice_path(args, first, runs)
        if path.exists():
            saved = json.loads(path.read_text())
            if saved.get("protocol") == protocol(args) and set(arms) <= set(saved["arms"]):
                done[first] = saved
                continue
        todo.append((first, runs))
    print(f"{len(done)} slices saved, {len(todo)} to run: {todo}", flush=True)

    def keep(result: dict[str, Any]) -> None:
        from rolloutlab.checkpoint import atomic_write_json

        result["protocol"] = protocol(args)
        atomic_write_json(slice_path(args, result["first_run"], result["runs"]), result)
        done[result["first_run"]] = result
        print(f"saved slice {result['first_run']}+{result['runs']} ({result['seconds']:.0f} s)", flush=True)

    if args.workers > 1 and len(todo) > 1:
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            futures = [pool.submit(run_slice, args, arms, first, runs) for first, runs in todo]
            for future in as_completed(futures):
                keep(future.result())
    else:
        for first, runs in todo:
            keep(run_slice(args, arms, first, runs))
    ordered = [done[first] for first, _ in slices]
    finals = {arm: np.array([x for s in ordered for x in s["arms"][arm]["finals"]]) for arm in arms}
    summary = summarize(args, finals)
    per_horizon = {}
    for arm in arms:
        last = [s["arms"][arm]["disagreement_by_step"][i][-1] for s in ordered for i in range(s["runs"])]
        width = max((len(x) for x in last), default=0)
        if width:
            padded = np.array([x + [np.nan] * (width - len(x)) for x in last])
            per_horizon[arm] = np.nanmean(padded, axis=0).tolist()
    summary["final_disagreement_by_step"] = per_horizon
    if all("finals_q_greedy" in s["arms"][arm] for s in ordered for arm in arms):
        q_greedy = {arm: np.array([x for s in ordered for x in s["arms"][arm]["finals_q_greedy"]]) for arm in arms}
        summary["q_greedy_finals"] = {
            arm: {
                "finals": x.tolist(),
                "mean": float(x.mean()),
                "iqm": float(iqm(x)),
                "solved_fraction": float(np.mean(x >= SOLVED)),
            }
            for arm, x in q_greedy.items()
        }
    with warnings.catch_warnings():  # K = 0 arms fit no model: their model errors are all NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        model_errors = {
            arm: np.nanmean(
                [
                    [c.get("model_return_error", np.nan) for c in curve]
                    for s in ordered
                    for curve in s["arms"][arm]["curves"]
                ],
                axis=0,
            ).tolist()
            for arm in arms
        }
        summary["model_holdout_nmse_by_phase"] = {
            arm: np.nanmean(
                [
                    [c.get("model_holdout_nmse", np.nan) for c in curve]
                    for s in ordered
                    for curve in s["arms"][arm]["curves"]
                ],
                axis=0,
            ).tolist()
            for arm in arms
        }
    summary["model_return_error_by_phase"] = model_errors
    summary["mean_return_by_phase"] = {
        arm: np.mean(
            [[c["mean_return"] for c in curve] for s in ordered for curve in s["arms"][arm]["curves"]], axis=0
        ).tolist()
        for arm in arms
    }
    summary["seconds"] = float(sum(s["seconds"] for s in ordered))
    summary["protocol"] = {**protocol(args), "runs": args.runs}
    summary["command"] = command_line(args)
    from rolloutlab.checkpoint import atomic_write_json, atomic_write_text

    atomic_write_json(args.out, summary)
    atomic_write_text(Path(args.out).with_suffix(".md"), table(summary))
    print(f"{'arm':<18} {'mean':>8} {'median':>8} {'IQM':>8} {'solved':>7}")
    for arm, entry in summary["arms"].items():
        print(
            f"{arm:<18} {entry['mean']:8.1f} {entry['median']:8.1f} {entry['iqm']:8.1f} {entry['solved_fraction']:7.2f}"
        )
    for arm, vs in summary["paired_iqm_vs_k0"].items():
        print(arm, {b: f"{v['iqm_diff']:+.1f} (z {v['z']:.1f})" for b, v in vs.items()})
    print(f"best model arm {summary['best_model_arm']}; gate passed: {summary['gate_passed']}")
    return summary


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
