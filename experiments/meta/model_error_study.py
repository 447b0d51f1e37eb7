"""A learned rollout-length controller against every fixed and scheduled K, on runs whose model error differs.

The regime is the one the headroom gate (:mod:`experiments.meta.headroom`, ``--parameter angle_offset``) measured:
the real task is always ``rolloutlab/DiscretePendulum-v0`` with nominal physics, and each inner run's model is the
exact simulator with an angle-sensor error ``delta`` (rad) of its own (:class:`mbrl.models.true_dynamics.
TruePendulumModel`, ``angle_offset``). Dyna-DQN trains Q on imagined K-step rollouts mixed with real data; every arm
makes the same gradient updates per env step (K = 0 makes them on real data); the final policy acts greedily on Q with
no model. Controllers read feedback from training data only; evaluations only score. The inner settings are the gate's
(:class:`experiments.meta.headroom.Settings` defaults): 10k env steps, a decision every 1k.

Three stages, each resumable:

* ``train``: meta-train the meta-agent (SB3 DQN, Bhatia, Thomas & Zilberstein 2022) on the rollout-length meta-MDP
  (:class:`meta.rollout_length.env.MetaEnvConfig` with ``model="simulator"``) with ``delta ~ U(--train-error)``, for
  ``--episodes`` meta-episodes; the run directory holds the checkpoint and ``meta_policy.pt`` (not in git); its
  learning curve, wall time and the meta-value check (Q-values against Monte-Carlo meta-returns) go to
  ``results/model_error/train_<action set>.json``.
* ``test``: every arm on the same ``--seeds`` paired runs (run ``i`` has the same inner seed and the same held-out
  ``delta``, drawn from ``U(--test-error)``, which reaches beyond the training range, in every arm); units of all arms
  x ``--seeds-per-unit`` seeds, one batched learner each, written to ``results/model_error/test/``.
* ``summary``: per arm mean, median and IQM with 95% stratified-bootstrap intervals (rliable), META's probability of
  improvement over the best schedule (the fixed or scheduled arm with the highest mean) and over the others, and the
  learned K schedules against delta (``results/model_error_schedules.png``) -> ``results/summary.json``. With
  ``--test-strata n`` the offsets are stratified and each stratum is one rliable task (the pooled probability is kept
  beside it); ``--extra-dirs`` merges other schedules tested on the same paired runs.

    OMP_NUM_THREADS=1 python experiments/meta/model_error_study.py train     # ~500 meta-episodes, 2 workers
    OMP_NUM_THREADS=1 python experiments/meta/model_error_study.py test      # 100 paired runs per arm
    OMP_NUM_THREADS=1 python experiments/meta/model_error_study.py summary   # -> experiments/meta/results/summary.json
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.meta.headroom import (
    ENV_ID,
    FIXED_KS,
    Settings,
    cross_fitted_oracle,
    learner_config,
    protocol,
    wrong_model,
)
from experiments.sweep import Record, Unit, run_sweep
from meta.control.training import MetaAgentConfig
from rolloutlab.checkpoint import atomic_write_json

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parents[2]
SMALL_OFFSET = 0.45  # rad: below it the gate's best fixed K was 8-32, above it 0 (results/headroom.json)
SCHEDULES = tuple([f"fixed:{k}" for k in FIXED_KS] + ["dec:32", "inc:32", "incdec:32", "random:1,32"])


@dataclass
class Args:
    """The study's settings; ``stage`` picks what runs."""

    stage: tyro.conf.Positional[Literal["train", "test", "summary"]]
    """train the meta-agent, test every arm, or summarize the test units"""
    action_sets: str = "direct"
    """meta-agents to train / test: comma-separated action sets (direct: K from the grid; step: UP/DOWN/NOOP)"""
    k_grid: tuple[int, ...] = FIXED_KS
    """the lengths the direct action set chooses from (space-separated)"""
    train_error: str = "0:0.8"
    """lo:hi of the angle offset (rad) the meta-agent trains on"""
    test_error: str = "0:1.0"
    """lo:hi of the held-out angle offsets of the test runs (beyond the training range on purpose)"""
    episodes: int = 500
    """meta-episodes (inner runs) of meta-training; more than a saved run's extends it"""
    runs_per_round: int = 20
    """inner runs advanced together in meta-training (batched per worker)"""
    workers: int = 2
    """worker processes (meta-training: per round; test: units side by side)"""
    meta_seed: int = 0
    """seed of meta-training (the meta-agent and every round's offsets and inner seeds)"""
    train_eval_episodes: int = 1
    """greedy episodes per phase evaluation during meta-training (unused by the meta-agent; the final J uses
    --final-eval-episodes)"""
    final_eval_episodes: int = 10
    """greedy episodes scoring a meta-episode's final policy (its last J)"""
    reward_scale: float = 1000.0
    """the meta-reward is (J' - J) / reward_scale (Pendulum returns span about -1600 .. -120)"""
    j_initial: float = -1200.0
    """J_0, the return attributed to the untrained learner (about a random policy's)"""
    runs_dir: str = str(REPO / "runs" / "meta")
    """where meta-training run directories go (meta_policy.pt is read from there by the test)"""
    schedules: tuple[str, ...] = SCHEDULES
    """the fixed and scheduled arms (controller specs, space-separated)"""
    seeds: int = 100
    """paired test runs per arm"""
    seeds_per_unit: int = 5
    """test runs per unit (all arms of a unit train in one batched learner)"""
    test_seed: int = 1
    """base seed of the test runs (run i: test_seed * 10_000 + i); differs from the gate's"""
    bootstrap_reps: int = 2_000
    headroom_bins: int = 5
    """equal-width offset bins of the test range for the headroom measured on the test runs themselves (with
    --test-strata, the strata)"""
    test_strata: int = 0
    """0: every test run's offset is drawn from the whole --test-error range and all runs are one rliable task; n > 0:
    run i's offset is drawn from the (i mod n)-th of n equal-width strata of that range, and each stratum is one
    rliable task (the probability of improvement compares runs within a stratum, then averages the strata)"""
    out_dir: str = str(RESULTS / "model_error")
    """where the training summaries and test units are saved"""
    out: str = str(RESULTS / "summary.json")
    extra_dirs: tuple[str, ...] = ()
    """summary: --out-dir's of other test stages on the same paired runs (same test seed, strata, inner settings and
    meta-policy, other --schedules), whose arms are merged in; an arm tested in both must have the same scores"""
    inner: Settings = dataclasses.field(default_factory=Settings)
    """the inner learner (the headroom gate's settings; its arms and bins are unused here)"""
    agent: MetaAgentConfig = dataclasses.field(default_factory=MetaAgentConfig)
    """the SB3 meta-agent's hyperparameters"""


def parse_range(text: str) -> tuple[float, float]:
    """``"0:0.8"`` -> ``(0.0, 0.8)``.

    Raises:
        ValueError: not ``lo:hi`` with ``lo <= hi``.
    """
    lo, sep, hi = text.partition(":")
    if not sep or float(lo) > float(hi):
        raise ValueError(f"range {text!r}: need lo:hi with lo <= hi")
    return float(lo), float(hi)


def action_sets(args: Args) -> list[str]:
    """The meta-agents' action sets."""
    sets = [s.strip() for s in args.action_sets.split(",") if s.strip()]
    for s in sets:
        if s not in ("direct", "step"):
            raise ValueError(f"--action-sets: {s!r} is not direct or step")
    if not sets:
        raise ValueError("--action-sets is empty")
    return sets


def meta_env_config(args: Args, action_set: str) -> Any:
    """The meta-MDP: the gate's inner learner on the discrete Pendulum, each run's model off by its own angle."""
    from meta.rollout_length.env import MetaEnvConfig
    from rolloutlab.config import to_dict

    settings = args.inner
    inner = to_dict(learner_config(settings))
    inner["eval_episodes"] = args.train_eval_episodes
    return MetaEnvConfig(
        env_id=ENV_ID,
        model="simulator",
        model_error={"angle_offset": list(parse_range(args.train_error))},
        randomize_physics=False,
        budget=settings.budget,
        phase_length=settings.phase_length,
        k_cap=max(FIXED_KS),
        k_init=1,  # the step action set starts with the model on; one DOWN turns it off
        action_set=action_set,  # type: ignore[arg-type]
        k_grid=list(args.k_grid),
        reward_scale=args.reward_scale,
        j_initial=args.j_initial,
        final_eval_episodes=args.final_eval_episodes,
        compute_matched=args.inner.compute_matched,
        dyna=inner,
    )


def check_env(args: Args) -> None:
    """The study's models are the discrete Pendulum's simulator: another ``--inner.env`` is refused, not ignored."""
    if args.inner.env != ENV_ID:
        raise SystemExit(f"--inner.env {args.inner.env!r}: this study runs on {ENV_ID} only (the gate runs others)")


def run_dir(args: Args, action_set: str) -> Path:
    return Path(args.runs_dir) / f"model_error_{action_set}"


def train(args: Args) -> None:
    """Meta-train (or resume) one meta-agent per action set; write its learning curve and value check."""
    check_env(args)
    from meta.control.training import CHECKPOINT_NAME, MetaTrainConfig, MetaTrainer
    from meta.rollout_length.diagnostics import value_check

    for action_set in action_sets(args):
        directory = run_dir(args, action_set)
        if (directory / CHECKPOINT_NAME).exists():
            try:  # a larger --episodes than the saved run's extends it
                trainer = MetaTrainer.resume(directory, episodes=args.episodes)
            except ValueError as exc:
                raise SystemExit(str(exc)) from None
        else:
            cfg = MetaTrainConfig(
                env=meta_env_config(args, action_set),
                agent=args.agent,
                episodes=args.episodes,
                runs_per_round=args.runs_per_round,
                workers=args.workers,
                seed=args.meta_seed,
            )
            trainer = MetaTrainer(cfg, directory)
        summary = trainer.train()
        checks = value_check(MetaTrainer.resume(directory).load_agent())
        history = summary["history"]
        out = {
            "action_set": action_set,
            "command": f"python experiments/meta/model_error_study.py train --action-sets {action_set}",
            "episodes_done": summary["episodes_done"],
            "wall_seconds": summary["wall_seconds"],
            "sessions": summary["sessions"],
            "value_check": checks,
            "config": summary["config"],
            "history": history,
        }
        atomic_write_json(Path(args.out_dir) / f"train_{action_set}.json", out)
        print(f"{action_set}: {summary['episodes_done']} meta-episodes in {summary['wall_seconds'] / 60:.1f} min")


def arm_specs(args: Args) -> dict[str, str]:
    """Arm name -> controller spec: the schedules, then one META per action set (``learned:<run dir>``)."""
    arms = {spec.strip(): spec.strip() for spec in args.schedules if spec.strip()}
    for action_set in action_sets(args):
        arms[f"meta_{action_set}"] = f"learned:{run_dir(args, action_set)}"
    return arms


def test_deltas(args: Args, first_run: int, runs: int) -> list[float]:
    """The held-out angle offset of test runs ``first_run ..`` (the same in every arm; with ``--test-strata n``, run
    ``i``'s from stratum ``i mod n``)."""
    lo, hi = parse_range(args.test_error)
    out = []
    for run in range(first_run, first_run + runs):
        u = float(np.random.default_rng([args.test_seed, 9_311, run]).uniform())
        if args.test_strata:
            width = (hi - lo) / args.test_strata
            out.append(lo + width * (run % args.test_strata + u))
        else:
            out.append(lo + (hi - lo) * u)
    return out


def _portable(spec: str) -> str:
    """A spec with this checkout's path left out (``learned:/abs/repo/runs/x`` -> ``learned:runs/x``), so that a
    saved unit matches in any clone."""
    return spec.replace(f"{REPO}/", "")


def test_protocol(args: Args) -> dict[str, Any]:
    """What must match for a saved test unit to be reused."""
    out: dict[str, Any] = {
        "inner": {k: v for k, v in protocol(args.inner).items() if k not in ("arms", "bins", "parameter")},
        "arms": {name: _portable(spec) for name, spec in arm_specs(args).items()},
        "test_error": args.test_error,
        "seeds_per_unit": args.seeds_per_unit,
        "test_seed": args.test_seed,
    }
    if args.test_strata:  # absent when 0, so units saved before strata existed stay valid
        out["test_strata"] = args.test_strata
    return out


def run_test_unit(args: Args, policies: dict[str, str], unit: Unit) -> Record:
    """Every arm on the unit's paired runs in one batched learner (``policies``: :func:`policy_digests`)."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers the env)
    from mbrl.algorithms.dyna import BatchedDynaDQN
    from mbrl.models.true_dynamics import TruePendulumModel
    from mbrl.phases import RolloutLengthDriver
    from meta.control import make_controller
    from rolloutlab.threads import set_torch_threads

    set_torch_threads()
    wall, cpu = time.perf_counter(), time.process_time()
    settings = args.inner
    first, runs = unit.seed, args.seeds_per_unit
    arms = arm_specs(args)
    deltas = test_deltas(args, first, runs)
    nominal = TruePendulumModel.from_env(gym.make(ENV_ID))
    seeds = [args.test_seed * 10_000 + first + i for _ in arms for i in range(runs)]
    controllers = []
    for spec in arms.values():
        for i in range(runs):
            controller = make_controller(spec)
            if hasattr(controller, "seed"):  # random: each run draws its own actions
                controller.seed = args.test_seed * 10_000 + first + i
            controllers.append(controller)
    learner = BatchedDynaDQN(
        [functools.partial(gym.make, ENV_ID)] * len(seeds),
        learner_config(settings),
        seed=args.test_seed,
        run_seeds=seeds,
        compute_matched=[args.inner.compute_matched] * len(seeds),
        models=[wrong_model(nominal, "angle_offset", d) for _ in arms for d in deltas],
    )
    driver = RolloutLengthDriver(controllers, k_cap=learner.cfg.k_cap)
    evaluations: list[list[float]] = [[] for _ in seeds]
    one_step: list[list[float]] = [[] for _ in seeds]
    while not learner.done:
        for i, fb in enumerate(driver.run_phase(learner)):
            evaluations[i].append(float(learner.last_evaluation[i]))
            one_step[i].append(float(fb["model_one_step_rmse"]))
    out = {}
    for a, name in enumerate(arms):
        rows = range(a * runs, (a + 1) * runs)
        out[name] = {
            "scores": [float(np.mean(evaluations[i][-settings.score_evals :])) for i in rows],
            "evaluations": [evaluations[i] for i in rows],
            "one_step_rmse": [one_step[i] for i in rows],
            "schedules": [driver.schedules[i] for i in rows],
        }
    return {
        "protocol": test_protocol(args),
        "policies": policies,
        "first_run": first,
        "runs": runs,
        "deltas": deltas,
        "arms": out,
        "seconds": time.perf_counter() - wall,
        "core_seconds": time.process_time() - cpu,
    }


def test_units(args: Args) -> list[Unit]:
    if args.seeds % args.seeds_per_unit:
        raise ValueError(f"--seeds {args.seeds} must be a multiple of --seeds-per-unit {args.seeds_per_unit}")
    if args.test_strata < 0 or (args.test_strata and args.seeds % args.test_strata):
        raise ValueError(f"--test-strata {args.test_strata} must be 0 or a positive divisor of --seeds {args.seeds}")
    out_dir = Path(args.out_dir) / "test"
    return [
        Unit("all", first, out_dir / f"runs{first:03d}.json", group="runs")
        for first in range(0, args.seeds, args.seeds_per_unit)
    ]


def finished_policy(args: Args, action_set: str) -> Path:
    """The meta-policy the test stage plays for ``action_set``.

    ``meta_policy.pt`` is rewritten after every meta-training round, so a test started while training still runs (or
    after it was stopped) would score a half-trained policy under the finished one's name: that is refused.

    Raises:
        SystemExit: no policy yet, or its meta-training has not finished all its rounds.
    """
    from meta.control.training import CHECKPOINT_KIND, CHECKPOINT_NAME, POLICY_NAME, MetaTrainConfig
    from rolloutlab.checkpoint import load_checkpoint
    from rolloutlab.config import from_dict

    directory = run_dir(args, action_set)
    policy = directory / POLICY_NAME
    if not policy.exists():
        raise SystemExit(f"no meta-policy at {policy}: run the train stage first")
    envelope = load_checkpoint(directory / CHECKPOINT_NAME, kind=CHECKPOINT_KIND)
    rounds = from_dict(MetaTrainConfig, envelope["config"]).rounds
    done = int(envelope["state"]["rounds_done"])
    if done < rounds:
        raise SystemExit(
            f"meta-training in {directory} has finished {done} of {rounds} rounds: finish the train stage first "
            "(its meta_policy.pt is the latest round's, not the trained one)"
        )
    return policy


def policy_digests(args: Args) -> dict[str, str]:
    """Arm name -> SHA-256 (first 16 hex digits) of the meta-policy file it plays: saved with every test unit, so that
    units scored with another policy under the same name are never mixed in."""
    import hashlib

    return {
        f"meta_{action_set}": hashlib.sha256(finished_policy(args, action_set).read_bytes()).hexdigest()[:16]
        for action_set in action_sets(args)
    }


def test(args: Args) -> dict[Unit, Record]:
    """Run (or resume) the test units."""
    check_env(args)
    wanted = test_protocol(args)
    policies = policy_digests(args)
    return run_sweep(
        test_units(args),
        functools.partial(run_test_unit, args, policies),
        reuse=lambda _unit, record: record.get("protocol") == wanted and record.get("policies") == policies,
        workers=args.workers,
        describe=lambda unit, r: f"runs {r['first_run']}+{r['runs']}: {r['seconds']:.0f} s",
    )


def summarize(args: Args, records: Sequence[Record]) -> dict[str, Any]:
    """Per-arm aggregates with intervals and META's probabilities of improvement (see the module docstring)."""
    from rolloutlab.statistics import interval_estimates, iqm, paired_difference, probability_of_improvement

    records = sorted(records, key=lambda r: r["first_run"])
    played = {json.dumps(r.get("policies"), sort_keys=True) for r in records}
    if len(played) > 1:
        raise SystemExit(
            f"the test units were played by different meta-policies {sorted(played)}: rerun the test stage"
        )
    arms = list(records[0]["arms"])  # arm_specs(args)'s, then any merged from --extra-dirs
    scores = {arm: np.array([x for r in records for x in r["arms"][arm]["scores"]]) for arm in arms}
    deltas = [d for r in records for d in r["deltas"]]
    aggregates: dict[str, Callable[[np.ndarray], float]] = {"mean": np.mean, "median": np.median, "iqm": iqm}
    estimates = interval_estimates(scores, aggregates, seed=args.test_seed, reps=args.bootstrap_reps)
    metas = [arm for arm in arms if arm.startswith("meta_")]
    schedules = [arm for arm in arms if arm not in metas]
    best_schedule = max(schedules, key=lambda arm: float(np.mean(scores[arm])))
    strata = args.test_strata

    def by_task(x: np.ndarray) -> np.ndarray:
        """``[runs]`` -> rliable's ``[runs per task, tasks]``: run ``i`` is in stratum ``i mod strata``."""
        return x.reshape(-1, strata) if strata else x

    def improvement(x: np.ndarray, y: np.ndarray, *, pooled: bool = False) -> dict[str, Any]:
        p = probability_of_improvement(
            x if pooled else by_task(x), y if pooled else by_task(y), seed=args.test_seed, reps=args.bootstrap_reps
        )
        return {"p": p.value, "ci95": [p.low, p.high]}

    comparisons: dict[str, Any] = {
        meta: {other: improvement(scores[meta], scores[other]) for other in schedules} for meta in metas
    }
    schedules_by_offset: dict[str, Any] = {}
    for meta in metas:
        ks = np.array([s for r in records for s in r["arms"][meta]["schedules"]], dtype=float)
        half = ks.shape[1] // 2
        schedules_by_offset[meta] = {}
        for name, (low, high) in {"small": (0.0, SMALL_OFFSET), "large": (SMALL_OFFSET, np.inf)}.items():
            rows = ks[(np.array(deltas) >= low) & (np.array(deltas) < high)]
            schedules_by_offset[meta][name] = {
                "runs": len(rows),
                "mean_k_first_half": float(rows[:, :half].mean()) if len(rows) else None,
                "mean_k_second_half": float(rows[:, half:].mean()) if len(rows) else None,
                "share_k0_second_half": float((rows[:, half:] == 0).mean()) if len(rows) else None,
                "share_k32_second_half": float((rows[:, half:] == 32).mean()) if len(rows) else None,
            }
    # The room a controller reading the offset had on these very runs: each offset bin's best schedule (picked on the
    # other half of the bin's runs) against the best single schedule.
    test_lo, test_hi = parse_range(args.test_error)
    bins = strata or args.headroom_bins
    edges = np.linspace(test_lo, test_hi, bins + 1)
    which = np.clip(np.searchsorted(edges, deltas, side="right") - 1, 0, bins - 1)
    if strata:  # the stratum of a run is its index mod strata, even where rounding puts its offset on an edge
        which = np.arange(len(deltas)) % strata
    by_bin = [{arm: scores[arm][which == b] for arm in schedules} for b in range(bins)]
    room = cross_fitted_oracle(
        [sc for sc in by_bin if len(sc[best_schedule])],
        schedules,
        best_schedule,
        seed=args.test_seed,
        reps=args.bootstrap_reps,
    )
    # How far the probability-of-improvement target is within reach at all: the per-bin best schedule, picked with
    # hindsight on these runs (an upper bound for any controller choosing among the schedules by offset bin).
    in_sample = scores[best_schedule].copy()
    for b, sc in enumerate(by_bin):
        if len(sc[best_schedule]):
            in_sample[which == b] = scores[max(schedules, key=lambda arm: float(np.mean(sc[arm])))][which == b]
    reach = improvement(in_sample, scores[best_schedule])
    lo, hi = parse_range(args.train_error)
    outside = np.array([not lo <= d <= hi for d in deltas])
    return {
        "runs_per_arm": len(deltas),
        "deltas": deltas,
        "held_out_beyond_training_range": int(outside.sum()),
        "best_schedule": best_schedule,
        "arms": {
            arm: {
                **{name: e.value for name, e in estimates[arm].items()},
                **{f"{name}_ci95": [e.low, e.high] for name, e in estimates[arm].items()},
                "scores": scores[arm].tolist(),
                "schedules": [s for r in records for s in r["arms"][arm]["schedules"]] if arm in metas else None,
            }
            for arm in arms
        },
        "probability_of_improvement": comparisons,
        "versus_best_schedule": {meta: comparisons[meta][best_schedule] for meta in metas},
        "probability_tasks": strata or 1,
        "versus_best_schedule_pooled": {
            meta: improvement(scores[meta], scores[best_schedule], pooled=True) for meta in metas
        },
        "paired_difference_vs_best_schedule": {
            meta: {"mean_diff": d.value, "se": d.standard_error, "ci95": [d.low, d.high]}
            for meta in metas
            for d in [
                paired_difference(
                    scores[meta], scores[best_schedule], rng=args.test_seed, n_resamples=args.bootstrap_reps
                )
            ]
        },
        "mean_by_offset_bin": {
            arm: [float(np.mean(scores[arm][which == b])) if np.any(which == b) else None for b in range(bins)]
            for arm in arms
        },
        "schedules_by_offset": schedules_by_offset,
        "headroom_on_test": {
            "bins": [[round(float(a), 6), round(float(b), 6)] for a, b in itertools.pairwise(edges)],
            "best_schedule_by_bin": [
                max(schedules, key=lambda arm: float(np.mean(sc[arm]))) if len(sc[best_schedule]) else None
                for sc in by_bin
            ],
            "runs_by_bin": [len(sc[best_schedule]) for sc in by_bin],
            "oracle_minus_best_schedule_cross_fitted": {
                "mean_diff": room.value,
                "se": room.standard_error,
                "ci95": [room.low, room.high],
            },
            "in_sample_oracle_mean": float(np.mean(in_sample)),
            "in_sample_oracle_probability_of_improvement": reach,
        },
        "best_schedule_estimates": {
            name: {"value": e.value, "ci95": [e.low, e.high]} for name, e in estimates[best_schedule].items()
        },
        "target_met": {
            meta: bool(
                comparisons[meta][best_schedule]["ci95"][0] > 0.5
                and all(estimates[meta]["iqm"].value > estimates[s]["iqm"].value for s in schedules)
            )
            for meta in metas
        },
        "cost": {
            "core_seconds_per_run": float(
                np.mean([r["core_seconds"] / (r["runs"] * len(arms)) for r in records]) if records else np.nan
            ),
            "core_seconds": float(sum(r["core_seconds"] for r in records)),
        },
        "protocol": test_protocol(args),
        "extra_dirs": [_portable(str(Path(d).resolve())) for d in args.extra_dirs],
        "policies": records[0].get("policies"),
        "command": "python experiments/meta/model_error_study.py summary",
    }


def table(summary: dict[str, Any]) -> str:
    """The summary as a markdown table: one row per arm, P(META beats the arm) per meta-agent."""
    metas = [arm for arm in summary["arms"] if arm.startswith("meta_")]
    head = ["arm", "runs", "mean [95% CI]", "median", "IQM [95% CI]"] + [f"P({m} > arm)" for m in metas]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for arm, entry in summary["arms"].items():
        cells = [
            f"`{arm}`",
            str(len(entry["scores"])),
            f"{entry['mean']:.1f} [{entry['mean_ci95'][0]:.1f}, {entry['mean_ci95'][1]:.1f}]",
            f"{entry['median']:.1f}",
            f"{entry['iqm']:.1f} [{entry['iqm_ci95'][0]:.1f}, {entry['iqm_ci95'][1]:.1f}]",
        ]
        for meta in metas:
            p = summary["probability_of_improvement"][meta].get(arm)
            cells.append("" if p is None else f"{p['p']:.2f} [{p['ci95'][0]:.2f}, {p['ci95'][1]:.2f}]")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_schedules(summary: dict[str, Any], path: Path) -> None:
    """META's K per phase against each run's delta (one panel per meta-agent)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metas = [arm for arm in summary["arms"] if arm.startswith("meta_")]
    fig, axes = plt.subplots(1, max(1, len(metas)), figsize=(6 * max(1, len(metas)), 4), squeeze=False)
    deltas = np.array(summary["deltas"])
    for ax, meta in zip(axes[0], metas, strict=False):
        schedules = np.array(summary["arms"][meta]["schedules"], dtype=float)
        phases = np.tile(np.arange(schedules.shape[1]), len(deltas))
        jitter = np.random.default_rng(0).uniform(-0.2, 0.2, schedules.size)  # keeps equal points apart
        image = ax.scatter(
            np.repeat(deltas, schedules.shape[1]),
            phases + jitter,
            c=np.log2(schedules.reshape(-1) + 1),
            cmap="viridis",
            s=12,
        )
        ax.set_xlabel("model angle offset delta (rad)")
        ax.set_ylabel("phase (1k env steps)")
        ax.set_title(f"{meta}: chosen K (colour: log2(K + 1))")
        fig.colorbar(image, ax=ax)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def saved_units(args: Args, out_dir: str, *, any_arms: bool = False) -> list[Record]:
    """The test units saved in ``out_dir`` under this protocol (``any_arms``: whatever their arms)."""
    ignored = {"arms"} if any_arms else set()

    def compared(protocol: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in protocol.items() if k not in ignored}

    wanted = compared(test_protocol(args))
    records = []
    for unit in test_units(dataclasses.replace(args, out_dir=out_dir)):
        if unit.path.exists():
            record = json.loads(unit.path.read_text())
            if compared(record.get("protocol", {})) == wanted:
                records.append(record)
    return records


def merge_arms(records: Sequence[Record], others: Sequence[Record], where: str) -> list[Record]:
    """``records`` with the arms of ``others`` (units of the same paired runs) added.

    Raises:
        SystemExit: a unit of ``records`` has no counterpart with the same runs and meta-policy in ``others``, or an
            arm in both scored differently (the same run must give the same score in any batch).
    """
    by_first = {r["first_run"]: r for r in others}
    merged = []
    for record in records:
        other = by_first.get(record["first_run"])
        if other is None or other["deltas"] != record["deltas"] or other.get("policies") != record.get("policies"):
            raise SystemExit(f"{where} has no unit of runs {record['first_run']}+ with the same offsets and policy")
        arms = dict(record["arms"])
        for arm, entry in other["arms"].items():
            if arm in arms and arms[arm]["scores"] != entry["scores"]:
                raise SystemExit(f"arm {arm} scored differently in {where} on runs {record['first_run']}+")
            arms.setdefault(arm, entry)
        merged.append({**record, "arms": arms})
    return merged


def main(args: Args) -> None:
    if args.stage == "train":
        train(args)
        return
    records = list(test(args).values()) if args.stage == "test" else saved_units(args, args.out_dir)
    if not records:
        where = Path(args.out_dir) / "test"
        raise SystemExit(f"no test units saved under this protocol in {where}: run the test stage")
    for extra in args.extra_dirs:
        records = merge_arms(records, saved_units(args, extra, any_arms=True), extra)
    summary = summarize(args, records)
    atomic_write_json(args.out, summary)
    plot_schedules(summary, Path(args.out).with_name("model_error_schedules.png"))
    Path(args.out).with_name("model_error_table.md").write_text(table(summary))
    for arm, entry in summary["arms"].items():
        print(f"{arm:<14} mean {entry['mean']:8.1f}  median {entry['median']:8.1f}  IQM {entry['iqm']:8.1f}")
    print(f"best schedule {summary['best_schedule']}; target met {summary['target_met']}")


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
