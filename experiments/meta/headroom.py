"""The headroom gate: is there a regime where the best rollout length K depends on the model's error?

A rollout-length controller that reads the model's error can only beat every fixed or scheduled K if the best K
changes with that error. This gate builds such a regime and measures it before any controller is trained.

The real task is the same for every run: ``rolloutlab/DiscretePendulum-v0`` (gymnasium's Pendulum-v1 with 5 torque
levels, nominal physics). Each run's *model* is the true simulator
(:class:`mbrl.models.true_dynamics.TruePendulumModel`) with an error of its own, ``delta`` drawn per run from its bin
(``--bins``): by default an angle-sensor offset of ``delta`` rad (``--parameter angle_offset``: the model believes the
pendulum sits ``delta`` further round than it does, so its gravity and its reward point at the wrong upright), or a
physics parameter (``g``, ``m``, ``l``, ``dt``, ``max_speed``) scaled by ``1 + delta``. Dyna-DQN (Bhatia, Thomas &
Zilberstein 2022) trains the Q-function on imagined rollouts of K steps mixed with real data; every arm makes the same
gradient updates per env step (K = 0 makes them on real data: compute-matched), so K changes only where the training
data comes from. The final policy acts greedily on Q, with no model. K = 0 never uses the model, so its score cannot
depend on delta (the summary checks it is flat).

Arms: every fixed K in {0, 1, 2, 4, 8, 16, 32} and the budget schedules ``dec:32``, ``inc:32``; run ``i`` of every
arm and every bin shares its seed, and run ``i`` of every arm in a bin shares its delta. Controllers see feedback from
training data only (``DynaConfig.controller_feedback="training"``): evaluations only score. A run's score is the
mean greedy return of its last ``--score-evals`` end-of-phase evaluations.

Units = (delta bin, slice of seeds): all arms of a slice train in one batched learner and write one JSON through
:func:`experiments.sweep.run_sweep` (resumable; a rerun keeps units saved under the same protocol). The summary
(``results/headroom.json``) gives per bin and arm the mean and IQM with 95% intervals, the best fixed K per bin, the
per-bin-best schedule ("oracle") against the single best arm over all runs (paired difference of means and its
paired-bootstrap s.e., plus a cross-fitted version that picks each bin's arm on the other half of the seeds), the
model's one-step RMSE per bin, K = 0's score per bin and the cost. Verdict: PASS if (a) the best arm (a fixed K or a
schedule) differs between bins and (b) the cross-fitted oracle's 95% interval over the single best arm excludes zero;
else FAIL. The in-sample margin (oracle minus single best over 2 paired s.e.) is reported beside it but no longer
decides: with 10 seeds it passed the angle-offset regime (+75.1, s.e. 27.7) while the study's own 100 paired test runs
left an offset-reading controller +6.7 [-5.5, +18.9] over the best schedule (``headroom_on_test`` in
``results/summary.json``). K = 0 is the same run in every bin, so the baseline rests on ``--seeds`` runs only; the
default is now 30, and the bins should cover the distribution the controller will be tested on.

Why the angle offset. The first try scaled gravity by 1 + delta (bins 0, -0.3, -0.55, -0.75; ``--parameter g
--bins 0:0,-0.35:-0.25,-0.6:-0.5,-0.8:-0.7``, kept in ``results/headroom_gravity.json``) and FAILED: ``fixed:32`` was
best or near best in every bin, so the per-bin oracle gained only +12.5 (s.e. 8.5). A model with weaker gravity still
points at the right goal. An offset model does not: its reward pays for holding the pendulum at the wrong angle, and
its error leaves the real task untouched (K = 0 is the same run in every bin). Calibration (3 paired seeds per
offset, 10k env steps; K = 0 scores -272 at every offset; ``--bins 0:0,0.15:0.15,0.3:0.3,0.6:0.6,1.0:1.0 --arms
fixed:0,fixed:2,fixed:8,fixed:32 --seeds 3 --seeds-per-unit 3 --out-dir results/headroom_calibration --out
results/headroom_calibration.json``): ``fixed:32`` scores -163 / -163 / -274 / -470 / -795 at
offsets 0 / 0.15 / 0.3 / 0.6 / 1.0 rad (model one-step RMSE 0 / 0.057 / 0.11 / 0.20 / 0.30), ``fixed:8`` -265 / -234 /
-215 / -424 / -708: long K wins with a small offset, every K > 0 loses to K = 0 from about 0.5 on. The default bins
put two bins below and one above that crossover, and one (0.35-0.5) near it.

Smaller budgets do not give the exact model more to add. Calibrations with 10 paired seeds (``--arms
fixed:0,fixed:4,fixed:16,fixed:32 --bins 0:0,0.3:0.3,0.6:0.6,1.0:1.0 --seeds 10 --seeds-per-unit 5``): at 5k env
steps (``--budget 5000 --phase-length 500 --learning-starts 500``, ``results/headroom_budget5k_calibration.json``) K = 0
scores -234.7 and the exact simulator's best K -214.5, oracle over single best (``fixed:0``) cross-fitted +3.9 (s.e.
4.3), FAIL; at 2.5k (``--budget 2500 --phase-length 250 --learning-starts 250 --rollout-freq 125``,
``results/headroom_budget2500_calibration.json``) -971.6 against -928.0, cross-fitted +5.7 (s.e. 7.7), FAIL. With
compute-matched updates Dyna-DQN on this task gains little from imagined data even when the model is exact, as on
Acrobot (``experiments/mbrl/results/gate_diagnosis.json``: the true simulator's K = 8 +1.9 over compute-matched
K = 0). Without compute matching (``--no-compute-matched``: only model-using runs make the extra updates, as in Dyna;
5k env steps as above, ``results/headroom_dyna5k_calibration.json``) K = 0 drops to -949.0 and K = 32 is best or near
best at every offset (-214.5 / -298.2 / -538.2 / -864.3 at 0 / 0.3 / 0.6 / 1.0 rad; cross-fitted room +10.0, s.e.
8.8), FAIL: the extra updates are worth more than the model's error costs, so K has no downside to manage there.

Size: 30 seeds x 9 arms x 4 bins = 1080 runs of 10k env steps at about 8 core-seconds each, in 24 units of 45 runs (all
arms of 5 seeds, batched): about 2.4 core-hours, about 80 minutes wall with ``--workers 2`` on 2 free cores. The
committed ``results/headroom.json`` was made with ``--seeds 10``.

    OMP_NUM_THREADS=1 python experiments/meta/headroom.py --workers 2    # -> experiments/meta/results/headroom.json
"""

from __future__ import annotations

import dataclasses
import functools
import re
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.sweep import Record, Unit, run_sweep
from rolloutlab.checkpoint import atomic_write_json

RESULTS = Path(__file__).resolve().parent / "results"
ENV_ID = "rolloutlab/DiscretePendulum-v0"
FIXED_KS = (0, 1, 2, 4, 8, 16, 32)
ADDITIVE = "angle_offset"  # the one model error given in absolute units (rad), not as a scale 1 + delta


def nominal_model(env_id: str) -> Any:
    """The exact simulator of ``env_id`` at its own physics (:mod:`mbrl.models.true_dynamics`)."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers the env)
    from mbrl.models.true_dynamics import TrueAcrobotModel, TrueCartPoleModel, TruePendulumModel

    simulators: dict[str, Any] = {
        ENV_ID: TruePendulumModel,
        "Acrobot-v1": TrueAcrobotModel,
        "CartPole-v1": TrueCartPoleModel,
    }
    if env_id not in simulators:
        raise ValueError(f"--env {env_id!r}: the gate knows the exact simulators of {sorted(simulators)} only")
    return simulators[env_id].from_env(gym.make(env_id))


def wrong_model(nominal: Any, parameter: str, delta: float) -> Any:
    """The nominal exact simulator (:class:`~mbrl.models.true_dynamics.TruePendulumModel` or
    :class:`~mbrl.models.true_dynamics.TrueAcrobotModel`) with error ``delta`` in ``parameter``."""
    if parameter == ADDITIVE:
        return nominal.perturbed({}, angle_offset=delta)
    return nominal.perturbed({parameter: 1.0 + delta})


@dataclass
class Settings:
    """Everything a saved unit depends on (its protocol): these fields are the gate's flags."""

    arms: str = "fixed:0,fixed:1,fixed:2,fixed:4,fixed:8,fixed:16,fixed:32,dec:32,inc:32"
    """comma-separated rollout-length controller specs (meta.control.make_controller), e.g. fixed:0,linear:2,3,32,0"""
    bins: str = "0:0.1,0.15:0.25,0.35:0.5,0.6:0.8"
    """comma-separated delta bins lo:hi; each run's model has error delta ~ U(lo, hi) in --parameter"""
    parameter: str = "angle_offset"
    """the model's error: angle_offset (delta in rad) or a physics parameter scaled by 1 + delta (Pendulum: g, m, l,
    dt, max_speed; Acrobot: gravity, link_mass_1, link_length_1, dt, ...; CartPole: gravity, masspole, length,
    force_mag, tau, ...)"""
    env: str = ENV_ID
    """the real task, nominal physics: rolloutlab/DiscretePendulum-v0, Acrobot-v1 or CartPole-v1"""
    budget: int = 10_000
    """real env steps per run (50 episodes of 200 steps)"""
    phase_length: int = 1_000
    """env steps between rollout-length decisions and greedy evaluations"""
    eval_episodes: int = 5
    """greedy episodes per evaluation"""
    score_evals: int = 4
    """a run's score: mean of its last this many evaluations"""
    seeds_per_unit: int = 5
    """paired seeds per unit (all arms of a unit train in one batched learner)"""
    seed: int = 0
    """base seed; run i uses seed * 10_000 + i (the same in every arm and bin)"""
    net_arch: str = "64,64"
    """Q-network hidden widths"""
    learning_rate: float = 1e-3
    batch_size: int = 128
    learning_starts: int = 1_000
    gamma: float = 0.98
    target_update_interval: int = 500
    """gradient steps between target syncs (per run; the update clock)"""
    train_freq: int = 4
    exploration_fraction: float = 0.2
    exploration_final_eps: float = 0.05
    rollout_freq: int = 250
    """env steps between rounds of imagined rollouts"""
    num_model_rollouts: int = 400
    """imagined rollouts per round"""
    model_retain_rounds: int = 4
    real_ratio: float = 0.5
    """real share of each minibatch of a model-using run"""
    compute_matched: bool = True
    """K = 0 makes the model-using runs' extra updates on real data (every arm the same updates); False: only runs
    that use the model make them (the extra updates come with the imagined data, as in Dyna)"""


@dataclass
class Args(Settings):
    """The protocol plus what does not change a run."""

    seeds: int = 30
    """paired seeds per arm and bin (K = 0 is the same run in every bin, so the baseline rests on this many runs)"""
    workers: int = 2
    """units run side by side in worker processes"""
    bootstrap_reps: int = 2_000
    """bootstrap resamples for intervals and paired standard errors"""
    out_dir: str = str(RESULTS / "headroom")
    """where units are saved"""
    out: str = str(RESULTS / "headroom.json")
    """the summary"""


def parse_bins(text: str, additive: bool = False) -> list[tuple[float, float]]:
    """``"0:0,-0.2:-0.1"`` -> ``[(0.0, 0.0), (-0.2, -0.1)]``.

    Args:
        text: Comma-separated ``lo:hi`` bins.
        additive: The deltas are added to a parameter (any real), not factors ``1 + delta`` (which must stay > 0).

    Raises:
        ValueError: a bin is not ``lo:hi`` with ``lo <= hi`` (and ``1 + lo > 0`` unless ``additive``).
    """
    bins = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        lo_text, sep, hi_text = part.partition(":")
        if not sep:
            raise ValueError(f"bin {part!r} is not lo:hi")
        lo, hi = float(lo_text), float(hi_text)
        if not lo <= hi:
            raise ValueError(f"bin {part!r}: need lo <= hi")
        if not additive and 1.0 + lo <= 0.0:
            raise ValueError(f"bin {part!r}: a scale 1 + delta must stay > 0")
        bins.append((lo, hi))
    if not bins:
        raise ValueError("need at least one bin")
    return bins


def arm_list(settings: Settings) -> list[str]:
    """The settings' arms, each a valid controller spec."""
    from meta.control import make_controller

    # A comma followed by a letter starts the next spec; other commas separate one spec's numbers (linear:2,3,32,0).
    arms = [a.strip() for a in re.split(r",(?=\s*[A-Za-z])", settings.arms) if a.strip()]
    for arm in arms:
        make_controller(arm)
    return arms


def run_deltas(settings: Settings, bin_index: int, first_run: int, runs: int) -> list[float]:
    """Delta of runs ``first_run ..`` in a bin: one draw per (seed, bin, run), the same for every arm."""
    lo, hi = parse_bins(settings.bins, settings.parameter == ADDITIVE)[bin_index]
    return [
        float(np.random.default_rng([settings.seed, 7_207, bin_index, first_run + i]).uniform(lo, hi))
        for i in range(runs)
    ]


def protocol(settings: Settings) -> dict[str, Any]:
    """What must match for a saved unit to be reused: every :class:`Settings` field (``compute_matched`` only when
    False: units saved before the field existed were compute-matched)."""
    fields = {f.name: getattr(settings, f.name) for f in dataclasses.fields(Settings)}
    if fields["compute_matched"]:
        del fields["compute_matched"]
    if fields["env"] == ENV_ID:  # units saved before the field existed are the discrete Pendulum's
        del fields["env"]
    return fields


def learner_config(settings: Settings) -> Any:
    """The Dyna-DQN settings every run shares."""
    from mbrl.algorithms.dyna import DynaConfig

    return DynaConfig(
        budget=settings.budget,
        phase_length=settings.phase_length,
        k_cap=max(FIXED_KS),
        model_train_freq=settings.budget,  # the true-simulator model has nothing to fit
        rollout_freq=settings.rollout_freq,
        num_model_rollouts=settings.num_model_rollouts,
        model_retain_rounds=settings.model_retain_rounds,
        real_ratio=settings.real_ratio,
        learning_rate=settings.learning_rate,
        batch_size=settings.batch_size,
        buffer_size=settings.budget,
        learning_starts=settings.learning_starts,
        gamma=settings.gamma,
        target_update_interval=settings.target_update_interval,
        train_freq=settings.train_freq,
        exploration_fraction=settings.exploration_fraction,
        exploration_final_eps=settings.exploration_final_eps,
        net_arch=[int(w) for w in settings.net_arch.split(",")],
        eval_episodes=settings.eval_episodes,
        model_use="dyna",
        controller_feedback="training",  # evaluations score the arm; they never steer its controller
    )


def run_unit(settings: Settings, unit: Unit) -> Record:
    """Train every arm on the unit's seeds in one batched learner; ``unit.arm`` is the bin index, ``unit.seed`` the
    first run.

    Returns:
        ``{"protocol", "bin", "first_run", "runs", "deltas", "arms": {arm: {"scores", "evaluations",
        "one_step_rmse", "schedules"}}, "seconds", "core_seconds"}``.
    """
    import gymnasium as gym

    from mbrl.algorithms.dyna import BatchedDynaDQN
    from mbrl.phases import RolloutLengthDriver
    from meta.control import make_controller
    from rolloutlab.threads import set_torch_threads

    set_torch_threads()
    wall, cpu = time.perf_counter(), time.process_time()
    bin_index, first_run, runs = int(unit.arm), unit.seed, settings.seeds_per_unit
    arms = arm_list(settings)
    deltas = run_deltas(settings, bin_index, first_run, runs)
    nominal = nominal_model(settings.env)
    models = [wrong_model(nominal, settings.parameter, d) for _ in arms for d in deltas]
    seeds = [settings.seed * 10_000 + first_run + i for _ in arms for i in range(runs)]
    learner = BatchedDynaDQN(
        [functools.partial(gym.make, settings.env)] * len(seeds),
        learner_config(settings),
        seed=settings.seed,
        run_seeds=seeds,
        compute_matched=[settings.compute_matched] * len(seeds),  # True: every arm makes the same updates per step
        models=models,
    )
    driver = RolloutLengthDriver([make_controller(arm) for arm in arms for _ in range(runs)], k_cap=learner.cfg.k_cap)
    evaluations: list[list[float]] = [[] for _ in seeds]
    one_step: list[list[float]] = [[] for _ in seeds]
    while not learner.done:
        feedback = driver.run_phase(learner)
        for i, fb in enumerate(feedback):
            evaluations[i].append(float(learner.last_evaluation[i]))
            one_step[i].append(float(fb["model_one_step_rmse"]))
    out: dict[str, Any] = {}
    for a, arm in enumerate(arms):
        rows = range(a * runs, (a + 1) * runs)
        out[arm] = {
            "scores": [float(np.mean(evaluations[i][-settings.score_evals :])) for i in rows],
            "evaluations": [evaluations[i] for i in rows],
            "one_step_rmse": [one_step[i] for i in rows],
            "schedules": [driver.schedules[i] for i in rows],
        }
    return {
        "protocol": protocol(settings),
        "bin": bin_index,
        "first_run": first_run,
        "runs": runs,
        "deltas": deltas,
        "arms": out,
        "seconds": time.perf_counter() - wall,
        "core_seconds": time.process_time() - cpu,
    }


def units(settings: Settings, seeds: int, out_dir: Path) -> list[Unit]:
    """Every (bin, seed slice) unit, slices outermost (a gate cut short still covers every bin)."""
    if seeds % settings.seeds_per_unit:
        raise ValueError(f"--seeds {seeds} must be a multiple of --seeds-per-unit {settings.seeds_per_unit}")
    n_bins = len(parse_bins(settings.bins, settings.parameter == ADDITIVE))
    return [
        Unit(str(b), first, out_dir / f"bin{b}_runs{first:03d}.json", group="bin")
        for first in range(0, seeds, settings.seeds_per_unit)
        for b in range(n_bins)
    ]


def _best(scores: Mapping[str, np.ndarray], candidates: Sequence[str]) -> str:
    """The candidate with the highest mean score (the first on ties)."""
    return max(candidates, key=lambda arm: float(np.mean(scores[arm])))


def cross_fitted_oracle(
    scores: Sequence[Mapping[str, np.ndarray]], arms: Sequence[str], single: str, *, seed: int, reps: int
) -> Any:
    """The per-bin-best arm ("oracle") minus ``single``, cross-fitted: each half of a bin's runs is scored with the
    arm that was best in that bin on the other half, which removes the winner's-curse bias of choosing and scoring on
    the same runs.

    Args:
        scores: Per bin, each arm's scores on the bin's paired runs (the same runs in every arm).
        arms: The candidates the oracle picks from.
        single: The arm it is compared with.
        seed: Seed of the paired bootstrap.
        reps: Bootstrap resamples.

    Returns:
        A :class:`~rolloutlab.statistics.BootstrapEstimate` of the paired difference of means.
    """
    from rolloutlab.statistics import paired_difference

    picked, baseline = [], []
    for sc in scores:
        n = len(sc[single])
        halves = [np.arange(n) % 2 == 0, np.arange(n) % 2 == 1]
        for held, pick in (halves, halves[::-1]):
            arm = _best({a: sc[a][pick] for a in arms}, arms) if pick.any() else single
            picked.append(sc[arm][held])
            baseline.append(sc[single][held])
    return paired_difference(np.concatenate(picked), np.concatenate(baseline), rng=seed, n_resamples=reps)


def summarize(settings: Settings, records: Sequence[Record], reps: int) -> dict[str, Any]:
    """The gate's summary and verdict from its unit records (see the module docstring)."""
    from rolloutlab.statistics import interval_estimates, iqm, paired_difference

    arms = arm_list(settings)
    bins = parse_bins(settings.bins, settings.parameter == ADDITIVE)
    fixed = [arm for arm in arms if arm.startswith("fixed:")]
    by_bin = [sorted((r for r in records if r["bin"] == b), key=lambda r: r["first_run"]) for b in range(len(bins))]
    scores = [{arm: np.array([x for r in rs for x in r["arms"][arm]["scores"]]) for arm in arms} for rs in by_bin]
    per_bin: list[dict[str, Any]] = []
    for b, (rs, sc) in enumerate(zip(by_bin, scores, strict=True)):
        estimates = interval_estimates(sc, {"mean": np.mean, "iqm": iqm}, seed=settings.seed + b, reps=reps)
        with warnings.catch_warnings():  # a model never fitted would give NaN; the true simulator always is
            warnings.simplefilter("ignore", RuntimeWarning)
            rmse = float(
                np.nanmean([x for r in rs for arm in arms for run in r["arms"][arm]["one_step_rmse"] for x in run])
            )
        per_bin.append(
            {
                "delta_range": list(bins[b]),
                "deltas": [d for r in rs for d in r["deltas"]],
                "model_one_step_rmse": rmse,
                "best_fixed_arm": _best(sc, fixed) if fixed else None,
                "best_arm": _best(sc, arms),
                "arms": {
                    arm: {
                        "scores": sc[arm].tolist(),
                        **{name: e.value for name, e in estimates[arm].items()},
                        **{f"{name}_ci95": [e.low, e.high] for name, e in estimates[arm].items()},
                    }
                    for arm in arms
                },
            }
        )
    pooled = {arm: np.concatenate([sc[arm] for sc in scores]) for arm in arms}
    single = _best(pooled, arms)
    oracle = np.concatenate([sc[entry["best_arm"]] for sc, entry in zip(scores, per_bin, strict=True)])
    diff = paired_difference(oracle, pooled[single], rng=settings.seed, n_resamples=reps)
    cross_diff = cross_fitted_oracle(scores, arms, single, seed=settings.seed, reps=reps)
    best_fixed = [entry["best_fixed_arm"] for entry in per_bin]
    differs = len(set(best_fixed)) > 1
    # What a controller needs is that the best rollout-length *controller* depends on the model's error: a fixed K,
    # or a schedule such as "long rollouts first, none later" whose switch time is what the error changes.
    best_differs = len({entry["best_arm"] for entry in per_bin}) > 1
    margin = diff.value > 2.0 * diff.standard_error
    # The verdict rests on the cross-fitted margin: the in-sample oracle picks and scores on the same runs, so with
    # few seeds it passes on noise alone.
    cross_margin = cross_diff.low > 0.0
    k0 = "fixed:0"
    core = [r["core_seconds"] / (r["runs"] * len(arms)) for r in records]
    return {
        "verdict": "PASS" if best_differs and cross_margin else "FAIL",
        "verdict_rule": "the best arm differs between bins and the cross-fitted oracle's 95% interval over the single "
        "best arm excludes zero",
        "best_arm_differs": best_differs,
        "best_fixed_k_differs": differs,
        "oracle_beats_single_by_2se": bool(margin),
        "cross_fitted_oracle_beats_single": bool(cross_margin),
        "best_fixed_arm_by_bin": best_fixed,
        "best_arm_by_bin": [entry["best_arm"] for entry in per_bin],
        "single_best_arm": single,
        "oracle_minus_single": {"mean_diff": diff.value, "se": diff.standard_error, "ci95": [diff.low, diff.high]},
        "oracle_minus_single_cross_fitted": {
            "mean_diff": cross_diff.value,
            "se": cross_diff.standard_error,
            "ci95": [cross_diff.low, cross_diff.high],
        },
        "model_one_step_rmse_by_bin": [entry["model_one_step_rmse"] for entry in per_bin],
        "k0_mean_by_bin": [float(np.mean(sc[k0])) for sc in scores] if k0 in arms else None,
        # K = 0 never calls the model, so its runs must be the same in every bin (bit for bit).
        "k0_flat": bool(all(np.array_equal(sc[k0], scores[0][k0]) for sc in scores)) if k0 in arms else None,
        "bins": per_bin,
        "cost": {
            "core_seconds_per_run": float(np.mean(core)),
            "core_seconds": float(sum(r["core_seconds"] for r in records)),
            "wall_seconds_in_units": float(sum(r["seconds"] for r in records)),
        },
        "protocol": protocol(settings),
    }


def report(summary: Mapping[str, Any]) -> str:
    """The verdict as printed: mean score per bin and arm, the best arms, the oracle's margin."""
    arms = list(summary["bins"][0]["arms"])
    lines = [f"{'arm':<10} " + " ".join(f"{e['delta_range']!s:>16}" for e in summary["bins"])]
    for arm in arms:
        lines.append(f"{arm:<10} " + " ".join(f"{e['arms'][arm]['mean']:16.1f}" for e in summary["bins"]))
    lines.append("one-step RMSE " + " ".join(f"{x:.4f}" for x in summary["model_one_step_rmse_by_bin"]))
    lines.append(f"K = 0 the same in every bin: {summary['k0_flat']}")
    lines.append(f"best fixed by bin {summary['best_fixed_arm_by_bin']}; best by bin {summary['best_arm_by_bin']}")
    d, c = summary["oracle_minus_single"], summary["oracle_minus_single_cross_fitted"]
    lines.append(
        f"oracle - single best ({summary['single_best_arm']}): {d['mean_diff']:+.1f} (s.e. {d['se']:.1f}); "
        f"cross-fitted {c['mean_diff']:+.1f} (s.e. {c['se']:.1f})"
    )
    lines.append(f"cost {summary['cost']['core_seconds_per_run']:.1f} core-s per run; verdict {summary['verdict']}")
    return "\n".join(lines)


def main(args: Args) -> dict[str, Any]:
    """Run (or resume) the gate's units and write the summary to ``--out``."""
    settings = Settings(**{f.name: getattr(args, f.name) for f in dataclasses.fields(Settings)})
    wanted = protocol(settings)
    records = run_sweep(
        units(settings, args.seeds, Path(args.out_dir)),
        functools.partial(run_unit, settings),
        reuse=lambda _unit, record: record.get("protocol") == wanted,
        workers=args.workers,
        describe=lambda unit, r: f"bin {r['bin']} runs {r['first_run']}+{r['runs']}: {r['seconds']:.0f} s",
    )
    summary = summarize(settings, list(records.values()), args.bootstrap_reps)
    summary["seeds"] = args.seeds
    atomic_write_json(args.out, summary)
    print(report(summary))
    return summary


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
