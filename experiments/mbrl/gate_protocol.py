"""The Dyna-DQN gate (``experiments/mbrl/gate.py``, ``gate_diagnosis.py``): do imagined rollouts help Dyna-DQN at all?

Paired inner runs of every arm (:func:`parse_gate_arm`) train in batched Dyna-DQN learners, in saved slices
(:func:`run_gate`); :func:`summarize_gate` gives the rliable aggregates and the verdict, :func:`gate_table` the table.
"""

from __future__ import annotations

import dataclasses
import json
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from experiments.mbrl.sample_efficiency_stats import BOOTSTRAP_REPS
from meta.control import make_controller
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.statistics import interval_estimates, iqm, paired_difference

if TYPE_CHECKING:
    from mbrl.algorithms.dyna import DynaConfig


#: gymnasium's reward_threshold for Acrobot-v1: a run whose mean greedy return reaches it solves the task.
GATE_SOLVED = -100.0
#: Gate settings added after slices were saved, with the behaviour those slices ran with. Such a setting is part of a
#: slice's protocol only when it differs from that behaviour, so the older slices are still reused.
_GATE_ADDED_SETTINGS: dict[str, Any] = {
    "target_clock": "updates",
    "multi_step_targets": False,
    "deterministic_rollouts": False,
    "model_use": "dyna",
    "lookahead_expectation": False,
    "lookahead_trust": 0.0,
    "batched_models": False,
}


@dataclass
class GateSettings:
    """Everything a saved slice of the gate depends on (its protocol, :func:`gate_protocol`), with the gate's values.

    On Acrobot-v1 with phases of 2k env steps, every arm trains paired inner runs (run ``i`` of every arm shares its
    seed: network init, env resets, exploration stream) in batched Dyna-DQN learners driven by
    :class:`mbrl.phases.RolloutLengthDriver`. ``experiments/mbrl/gate.py``'s ``Args`` adds the options that do not
    change a run (how many runs, workers, bootstrap resamples, output paths); these fields are its flags.
    """

    env_id: str = "Acrobot-v1"
    """inner environment (a discrete-action env with rl-zoo DQN settings)"""
    budget: int = 20_000
    """real env steps per run"""
    phase_length: int = 2_000
    """env steps between rollout-length decisions"""
    arms: str = "fixed:0,fixed:0+compute,fixed:1,fixed:2,fixed:4,fixed:8,fixed:16,incdec:16,fixed:8+true"
    """comma-separated arms: a controller spec, optionally +compute (K=0 with the extra updates on real data) or
    +true (the env's own dynamics as the model)"""
    runs_per_slice: int = 5
    """runs per saved slice (every arm's runs of a slice train in one batched learner)"""
    seed: int = 0
    """base seed; run i of every arm uses seed * 10_000 + i"""
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
    batched_models: bool = False
    """fit and query the runs' world models as one network with a run axis (equal to the per-run models to float32
    rounding, faster)"""


def parse_gate_arm(arm: str) -> tuple[str, bool, bool]:
    """``(controller spec, compute_matched, true_model)`` of a gate arm name (``fixed:0+compute``, ``fixed:8+true``).

    Raises:
        ValueError: a modifier other than ``+compute`` or ``+true``.
    """
    spec, _, modifier = arm.partition("+")
    if modifier not in ("", "compute", "true"):
        raise ValueError(f"arm {arm!r}: unknown modifier {modifier!r} (use +compute or +true)")
    return spec, modifier == "compute", modifier == "true"


def gate_arms(settings: GateSettings) -> list[str]:
    """The settings' arm names, each checked (:func:`parse_gate_arm`)."""
    arms = [a.strip() for a in settings.arms.split(",") if a.strip()]
    for arm in arms:
        parse_gate_arm(arm)
    return arms


def gate_learner_config(settings: GateSettings) -> DynaConfig:
    """The Dyna-DQN config every arm of the gate shares."""
    from mbrl.algorithms.dyna import DynaConfig, dyna_model_config

    model = dataclasses.replace(
        dyna_model_config(),
        min_train_steps=settings.model_min_train_steps,
        patience_steps=settings.model_patience_steps,
        max_train_steps=settings.model_max_train_steps,
    )
    return DynaConfig.for_env(
        settings.env_id,
        budget=settings.budget,
        phase_length=settings.phase_length,
        k_cap=32,
        model_train_freq=settings.model_train_freq,
        rollout_freq=settings.rollout_freq,
        num_model_rollouts=settings.num_model_rollouts,
        model_retain_rounds=settings.model_retain_rounds,
        real_ratio=settings.real_ratio,
        model_gradient_steps=settings.model_gradient_steps,
        train_model_when_k0=False,  # plain K = 0 arms are plain DQN; no model is fit for them
        net_arch=[int(w) for w in settings.net_arch.split(",")],
        multi_step_targets=settings.multi_step_targets,
        target_clock=settings.target_clock,
        model_use=settings.model_use,
        deterministic_rollouts=settings.deterministic_rollouts,
        lookahead_expectation=settings.lookahead_expectation,
        lookahead_trust=settings.lookahead_trust,
        batched_models=settings.batched_models,
        model=model,
    )


def gate_protocol(settings: GateSettings) -> dict[str, Any]:
    """What must match for a saved slice to be reused: every :class:`GateSettings` field, in order, less the settings
    added later that keep the behaviour older slices ran with."""
    keep = {f.name: getattr(settings, f.name) for f in dataclasses.fields(GateSettings)}
    for key, default in _GATE_ADDED_SETTINGS.items():
        if keep[key] == default:
            keep.pop(key)
    return keep


def run_gate_slice(settings: GateSettings, arms: Sequence[str], first_run: int, runs: int) -> dict[str, Any]:
    """Train runs ``first_run .. first_run + runs - 1`` of every arm (one batched learner) and score them.

    Every arm is scored at the same point of its cycle: the greedy policy after the last env step, over
    ``final_episodes`` episodes (with lookahead, also the same Q-networks acting without it).

    Returns:
        ``{"first_run", "runs", "arms": {arm: {"finals", "curves", "disagreement_by_step", "updates",
        "model_updates", "untrusted_decisions"[, "finals_q_greedy"]}}, "seconds"}``.
    """
    import gymnasium as gym

    from mbrl.algorithms.dyna import BatchedDynaDQN
    from mbrl.phases import RolloutLengthDriver
    from rolloutlab.threads import set_torch_threads

    set_torch_threads()
    started = time.perf_counter()
    parsed = [parse_gate_arm(a) for a in arms for _ in range(runs)]
    seeds = [settings.seed * 10_000 + first_run + i for _ in arms for i in range(runs)]
    env_fns = [lambda: gym.make(settings.env_id)] * len(parsed)
    models: list[Any] = [None] * len(parsed)
    if any(true for _, _, true in parsed):
        from mbrl.models.true_dynamics import TrueAcrobotModel

        models = [TrueAcrobotModel.from_env(gym.make(settings.env_id)) if true else None for _, _, true in parsed]
    learner = BatchedDynaDQN(
        env_fns,
        gate_learner_config(settings),
        seed=settings.seed,
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
    finals = learner.evaluate(settings.final_episodes)
    finals_q: np.ndarray | None = None
    if settings.model_use == "lookahead":
        # A diagnostic: the same final Q-networks acting greedily without lookahead, on the same evaluation episodes.
        # It tells a model that misleads the final decisions apart from a Q-function that learned less.
        in_force = list(learner.ks)
        learner.ks = [0] * len(in_force)
        finals_q = learner.evaluate(settings.final_episodes)
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


def _print(line: str) -> None:
    print(line, flush=True)


def gate_slice_path(out_dir: Path, first_run: int, runs: int) -> Path:
    """Where a finished slice is kept: ``<out_dir>/slice_<first run>_<runs>.json``."""
    return Path(out_dir) / f"slice_{first_run:03d}_{runs:03d}.json"


def run_gate(
    settings: GateSettings,
    runs: int,
    out_dir: Path,
    workers: int = 1,
    bootstrap_reps: int = BOOTSTRAP_REPS,
    log: Callable[[str], None] = _print,
) -> dict[str, Any]:
    """Train (or reuse) ``runs`` paired runs of every arm in slices and summarize them.

    Runs are split into slices of ``runs_per_slice`` saved to ``out_dir`` one by one, so a killed gate loses only the
    slice in progress and a rerun skips the slices saved under the same protocol; ``workers`` run slices side by side.

    Returns:
        :func:`gate_summary` of the slices, with ``protocol`` (:func:`gate_protocol` and ``runs``).
    """
    # Only the protocol's fields travel to the workers (a caller's subclass, such as a script's Args, may not pickle).
    settings = GateSettings(**{f.name: getattr(settings, f.name) for f in dataclasses.fields(GateSettings)})
    arms = gate_arms(settings)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    slices = [(first, min(settings.runs_per_slice, runs - first)) for first in range(0, runs, settings.runs_per_slice)]
    protocol = gate_protocol(settings)
    done: dict[int, dict[str, Any]] = {}
    todo = []
    for first, n in slices:
        path = gate_slice_path(out_dir, first, n)
        if path.exists():
            saved = json.loads(path.read_text())
            if saved.get("protocol") == protocol and set(arms) <= set(saved["arms"]):
                done[first] = saved
                continue
        todo.append((first, n))
    log(f"{len(done)} slices saved, {len(todo)} to run: {todo}")

    def keep(result: dict[str, Any]) -> None:
        result["protocol"] = protocol
        atomic_write_json(gate_slice_path(out_dir, result["first_run"], result["runs"]), result)
        done[result["first_run"]] = result
        log(f"saved slice {result['first_run']}+{result['runs']} ({result['seconds']:.0f} s)")

    if workers > 1 and len(todo) > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(run_gate_slice, settings, arms, first, n) for first, n in todo]
            for future in as_completed(futures):
                keep(future.result())
    else:
        for first, n in todo:
            keep(run_gate_slice(settings, arms, first, n))
    summary = gate_summary([done[first] for first, _ in slices], arms, settings.seed, bootstrap_reps)
    summary["protocol"] = {**protocol, "runs": runs}
    return summary


def summarize_gate(finals: Mapping[str, np.ndarray], seed: int, reps: int) -> dict[str, Any]:
    """Per-arm aggregates with rliable intervals, paired IQM differences against both K = 0 arms, and the verdict.

    Reported per arm: mean, median, IQM and the fraction of runs that solve the task (:data:`GATE_SOLVED`), with 95%
    stratified-bootstrap intervals; for every arm but the K = 0 ones, the paired difference in IQM against both K = 0
    arms (``fixed:0`` and ``fixed:0+compute``) with its paired-bootstrap standard error. The gate passes when the best
    learned-model arm beats *both* K = 0 arms by more than two paired standard errors in IQM.

    Args:
        finals: Per arm, the final score of every run (run ``i`` of every arm on the same seed).
        seed: Seed of the bootstrap streams.
        reps: Bootstrap resamples.

    Returns:
        ``{"arms", "paired_iqm_vs_k0", "best_model_arm", "gate_passed"}``.
    """
    from rliable import metrics

    # One task: rliable's aggregate_median is a median over *tasks* of per-task means, so the median over runs is
    # taken directly.
    aggregates = {
        "mean": metrics.aggregate_mean,
        "median": lambda x: float(np.median(x)),
        "iqm": iqm,
        "solved_fraction": lambda x: float(np.mean(x >= GATE_SOLVED)),
    }
    estimates = interval_estimates(finals, aggregates, seed=seed, reps=reps)
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
        if parse_gate_arm(arm)[0] == "fixed:0":
            continue
        paired[arm] = {}
        for base in baselines:
            # A fresh generator from the same seed per pair: every comparison resamples the same run indices.
            d = paired_difference(values, finals[base], statistic=iqm, rng=seed, n_resamples=reps)
            se = d.standard_error
            paired[arm][base] = {"iqm_diff": d.value, "se": se, "z": d.value / se if se > 0 else float("inf")}
    model_arms = [a for a in paired if not parse_gate_arm(a)[2]]
    best = max(model_arms, key=lambda a: arms[a]["iqm"]) if model_arms else None
    # The verdict needs both K = 0 arms: beating only one of them is not the gate.
    passed = bool(best is not None and len(baselines) == 2 and all(paired[best][b]["z"] > 2.0 for b in baselines))
    return {"arms": arms, "paired_iqm_vs_k0": paired, "best_model_arm": best, "gate_passed": passed}


def gate_summary(slices: Sequence[Mapping[str, Any]], arms: Sequence[str], seed: int, reps: int) -> dict[str, Any]:
    """The gate's summary from its slices (in run order): :func:`summarize_gate` of the final scores, plus model
    error per rollout step and per phase, the return per phase, the Q-greedy finals of lookahead runs, wall seconds.
    """
    finals = {arm: np.array([x for s in slices for x in s["arms"][arm]["finals"]]) for arm in arms}
    summary = summarize_gate(finals, seed, reps)
    per_horizon = {}
    for arm in arms:
        last = [s["arms"][arm]["disagreement_by_step"][i][-1] for s in slices for i in range(s["runs"])]
        width = max((len(x) for x in last), default=0)
        if width:
            padded = np.array([x + [np.nan] * (width - len(x)) for x in last])
            per_horizon[arm] = np.nanmean(padded, axis=0).tolist()
    summary["final_disagreement_by_step"] = per_horizon
    if all("finals_q_greedy" in s["arms"][arm] for s in slices for arm in arms):
        q_greedy = {arm: np.array([x for s in slices for x in s["arms"][arm]["finals_q_greedy"]]) for arm in arms}
        summary["q_greedy_finals"] = {
            arm: {
                "finals": x.tolist(),
                "mean": float(x.mean()),
                "iqm": float(iqm(x)),
                "solved_fraction": float(np.mean(x >= GATE_SOLVED)),
            }
            for arm, x in q_greedy.items()
        }

    def by_phase(key: str) -> dict[str, list[float]]:
        return {
            arm: np.nanmean(
                [[c.get(key, np.nan) for c in curve] for s in slices for curve in s["arms"][arm]["curves"]], axis=0
            ).tolist()
            for arm in arms
        }

    with warnings.catch_warnings():  # K = 0 arms fit no model: their model errors are all NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        summary["model_holdout_nmse_by_phase"] = by_phase("model_holdout_nmse")
        summary["model_return_error_by_phase"] = by_phase("model_return_error")
    summary["mean_return_by_phase"] = {
        arm: np.mean(
            [[c["mean_return"] for c in curve] for s in slices for curve in s["arms"][arm]["curves"]], axis=0
        ).tolist()
        for arm in arms
    }
    summary["seconds"] = float(sum(s["seconds"] for s in slices))
    return summary


def gate_table(summary: Mapping[str, Any]) -> str:
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


def gate_report(summary: Mapping[str, Any]) -> str:
    """The gate's verdict as printed by its scripts: per-arm aggregates, paired differences, the best model arm."""
    lines = [f"{'arm':<18} {'mean':>8} {'median':>8} {'IQM':>8} {'solved':>7}"]
    for arm, entry in summary["arms"].items():
        lines.append(
            f"{arm:<18} {entry['mean']:8.1f} {entry['median']:8.1f} {entry['iqm']:8.1f} {entry['solved_fraction']:7.2f}"
        )
    for arm, vs in summary["paired_iqm_vs_k0"].items():
        diffs = {b: f"{v['iqm_diff']:+.1f} (z {v['z']:.1f})" for b, v in vs.items()}
        lines.append(f"{arm} {diffs}")
    lines.append(f"best model arm {summary['best_model_arm']}; gate passed: {summary['gate_passed']}")
    return "\n".join(lines)
