"""The sample-efficiency comparison of the issue "The model must pay off": MBPO against SB3 SAC.

Arms are named by data, and an MBPO arm carries its rollout-length controller spec:

* ``mbpo:SPEC``: :class:`~mbrl.algorithms.mbpo.MBPO` with the controller ``SPEC`` (``mbpo:fixed:1``,
  ``mbpo:linear:20,100,1,15``) and ``G`` SAC updates per env step on mixed real/model batches;
* ``sac_same_utd``: SB3 ``SAC`` with ``gradient_steps=G`` (the "no model, same number of updates" control);
* ``sac_utd1``: SB3 ``SAC`` with one update per env step.

Every arm shares the seeds, the budget, the SAC networks, learning rate and batch size, the uniform-random warm-up
and the evaluation protocol: every ``eval_every`` env steps the deterministic policy plays ``eval_episodes`` episodes
whose seeds are fixed. The MBPO arms take :class:`~mbrl.algorithms.mbpo.MBPOConfig`'s defaults for everything the
settings do not name (model data scale, model fitting).

Two summaries:

* *steps to threshold* (Pendulum, InvertedPendulum): the first evaluation step whose mean return reaches the
  threshold, a never-reached run counting as the budget. "MBPO" is the MBPO arm with the lowest median steps; the
  targets are ``ratio_sac_utd1_over_mbpo >= 5`` (MBPO's paper reports 5-10x) and ``ratio_best_sac_over_mbpo >= 1``,
  each a ratio of medians with a percentile-bootstrap interval over seeds (:func:`summarize_threshold`);
* *final return* (HalfCheetah): the paired (by seed) difference of final evaluation returns, MBPO minus
  ``sac_same_utd``, with a paired-bootstrap interval (:func:`summarize_final`).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import numpy as np

from meta.controllers import make_controller, split_specs
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.statistics import bootstrap_interval, mean_interval

if TYPE_CHECKING:
    from mbrl.algorithms.mbpo import MBPOConfig

#: Stored in every run record and results file of this protocol; files without it are round one.
PROTOCOL = "model-must-pay-off"
#: Issue 4's thresholds: the mean evaluation return that counts as solved (the MBPO and PETS benchmarks share them).
THRESHOLDS = {"Pendulum-v1": -200.0, "InvertedPendulum-v5": 950.0}
MBPO_PREFIX = "mbpo:"
SAC_SAME_UTD = "sac_same_utd"
SAC_UTD1 = "sac_utd1"
SAC_ARMS = (SAC_SAME_UTD, SAC_UTD1)
DEFAULT_ARMS = ("mbpo:fixed:1", "mbpo:fixed:3", SAC_SAME_UTD, SAC_UTD1)
#: Steps-to-threshold targets: ``met`` when the ratio of medians is at least this.
RATIO_TARGETS = {"ratio_sac_utd1_over_mbpo": 5.0, "ratio_best_sac_over_mbpo": 1.0}
#: Round one's SAC arm names in this protocol's vocabulary (its ``mbpo`` arm becomes ``mbpo:<its controller>``).
ROUND_ONE_SAC_NAMES = {"sac_same_utd": SAC_SAME_UTD, "sac_default": SAC_UTD1}


def is_mbpo(arm: str) -> bool:
    """Whether ``arm`` names an MBPO arm (``mbpo:SPEC``)."""
    return arm.startswith(MBPO_PREFIX)


def mbpo_controller(arm: str) -> str:
    """The rollout-length controller spec an MBPO arm carries (``"mbpo:fixed:3"`` -> ``"fixed:3"``)."""
    if not is_mbpo(arm):
        raise ValueError(f"{arm!r} is not an MBPO arm (mbpo:SPEC)")
    return arm[len(MBPO_PREFIX) :]


def parse_arm(name: str) -> str:
    """Check one arm name and return it stripped.

    Raises:
        ValueError: neither ``sac_same_utd``, ``sac_utd1`` nor ``mbpo:SPEC`` with a spec
            :func:`meta.controllers.make_controller` accepts (round one's bare ``mbpo`` and ``sac_default`` included).
    """
    name = name.strip()
    if name in SAC_ARMS:
        return name
    if is_mbpo(name):
        make_controller(mbpo_controller(name))  # raises on an unknown or malformed spec
        return name
    hint = ""
    if name in ("mbpo", "sac_default"):
        hint = " (round one's names: mbpo is now mbpo:fixed:1, sac_default is sac_utd1)"
    raise ValueError(f"unknown arm {name!r}; arms are mbpo:SPEC, {SAC_SAME_UTD}, {SAC_UTD1}{hint}")


def parse_arms(text: str) -> list[str]:
    """Parse a comma-separated arm list; a controller spec's own commas stay with it.

    ``"mbpo:linear:20,100,1,15,sac_utd1"`` gives ``["mbpo:linear:20,100,1,15", "sac_utd1"]``.

    Raises:
        ValueError: an unknown arm, a repeated arm or an empty list.
    """
    arms = [parse_arm(a) for a in split_specs(text)]
    if not arms:
        raise ValueError("no arms given")
    repeated = sorted({a for a in arms if arms.count(a) > 1})
    if repeated:
        raise ValueError(f"arms given twice: {repeated}")
    return arms


def arm_order(arms: Sequence[str]) -> list[str]:
    """MBPO arms first (in the given order), then ``sac_same_utd`` and ``sac_utd1``."""
    return [a for a in arms if is_mbpo(a)] + [a for a in SAC_ARMS if a in arms]


@dataclass
class ArmSettings:
    """Settings shared by every arm of one comparison (the protocol's defaults).

    Attributes:
        env_id: Gymnasium id.
        budget: Env steps per run.
        updates_per_step: ``G`` for the MBPO arms and ``sac_same_utd`` (MBPOConfig's default).
        eval_every: Env steps between evaluations (the resolution of steps-to-threshold).
        eval_episodes: Episodes per evaluation.
        initial_random_steps: Uniform-random warm-up steps (SAC's ``learning_starts``) in every arm.
        learning_rate: SAC learning rate in every arm.
        batch_size: SAC batch size in every arm.
        net_arch: SAC hidden widths in every arm.
        mbpo: :class:`~mbrl.algorithms.mbpo.MBPOConfig` fields to override for the MBPO arms (plain data; a
            ``"model"`` mapping overrides single :class:`~mbrl.models.ModelConfig` fields). Empty: the library's
            defaults. The controller comes from the arm name, never from here.
        stop_at: End a run at its first evaluation whose mean return reaches this (steps-to-threshold mode); ``None``
            runs the whole budget. Runs are seeded, so a stopped run's evaluations are the first ones of the full
            run and its steps to threshold are the same; only the cost of running past the threshold is saved.
    """

    env_id: str
    budget: int
    updates_per_step: int = 10
    eval_every: int = 100
    eval_episodes: int = 5
    initial_random_steps: int = 200
    learning_rate: float = 1e-3
    batch_size: int = 128
    net_arch: list[int] = field(default_factory=lambda: [64, 64])
    mbpo: dict[str, Any] = field(default_factory=dict)
    stop_at: float | None = None


def arm_settings(settings: ArmSettings, arm: str) -> dict[str, Any]:
    """The settings an arm's result depends on, as JSON data (the SAC arms do not depend on ``mbpo``).

    Stored in every run record; a finished run is reused only under the same value (:func:`collect_runs`).
    """
    data = dataclasses.asdict(settings)
    # Stopping at the threshold does not change a run's evaluations up to it (see ArmSettings.stop_at), so full-budget
    # and stopped runs of the same settings are the same runs as far as steps to threshold go.
    data.pop("stop_at")
    if not is_mbpo(arm):
        data.pop("mbpo")
    return dict(json.loads(json.dumps(data)))


def mbpo_config(settings: ArmSettings, arm: str, seed: int) -> MBPOConfig:
    """The :class:`~mbrl.algorithms.mbpo.MBPOConfig` of one MBPO arm run.

    MBPOConfig's defaults, with the shared settings, the arm's controller and ``settings.mbpo`` laid over them; the
    ``sac`` and ``model`` sub-configs are merged field by field, so overriding one model field keeps the others at
    MBPOConfig's defaults.
    """
    from mbrl.algorithms.mbpo import MBPOConfig, SACConfig
    from mbrl.models import ModelConfig
    from rolloutlab.config import from_dict, to_dict

    extra = dict(settings.mbpo)
    if "controller" in extra:
        raise ValueError("the MBPO controller comes from the arm name (mbpo:SPEC), not from ArmSettings.mbpo")
    defaults = MBPOConfig()
    model = from_dict(ModelConfig, {**to_dict(defaults.model), **extra.pop("model", {})})
    sac = from_dict(
        SACConfig,
        {
            **to_dict(defaults.sac),
            "learning_rate": settings.learning_rate,
            "batch_size": settings.batch_size,
            "net_arch": list(settings.net_arch),
        },
    )
    return from_dict(
        MBPOConfig,
        {
            "env_id": settings.env_id,
            "total_steps": settings.budget,
            "seed": seed,
            "controller": mbpo_controller(arm),
            "updates_per_step": settings.updates_per_step,
            "eval_every": settings.eval_every,
            "eval_episodes": settings.eval_episodes,
            "initial_random_steps": settings.initial_random_steps,
            "checkpoint_every": 0,
            "log_every": max(settings.budget // 4, 1),
            **extra,
            "sac": sac,
            "model": model,
        },
    )


def run_arm(arm: str, settings: ArmSettings, seed: int) -> dict[str, Any]:
    """Run one arm for one seed.

    Returns:
        The run record: ``arm``, ``seed``, ``protocol``, ``settings`` (:func:`arm_settings`), ``eval``
        (``[[step, mean_return], ...]``), ``final_step`` and ``final_return`` (the last evaluation), wall
        ``seconds`` (evaluations included), ``eval_seconds``, ``seconds_per_1k_steps``; for MBPO also
        ``imagined_transitions``, ``imagined_per_second``, ``rollout_seconds``, ``nan_restores`` and the resolved
        ``mbpo_config``.
    """
    from rolloutlab.seeding import seed_everything

    parse_arm(arm)
    seed_everything(seed)
    started = time.perf_counter()
    if is_mbpo(arm):
        out = _run_mbpo(settings, arm, seed)
    else:
        out = _run_sac(settings, seed, settings.updates_per_step if arm == SAC_SAME_UTD else 1)
    seconds = time.perf_counter() - started
    last = out["eval"][-1] if out["eval"] else [None, None]
    steps_done = int(out.pop("steps_done"))
    return {
        "arm": arm,
        "seed": seed,
        "protocol": PROTOCOL,
        "settings": arm_settings(settings, arm),
        **out,
        "final_step": last[0],
        "final_return": last[1],
        "seconds": seconds,
        "steps_done": steps_done,
        "stopped_at_threshold": steps_done < settings.budget,
        "seconds_per_1k_steps": 1000.0 * seconds / max(steps_done, 1),
    }


def _run_mbpo(settings: ArmSettings, arm: str, seed: int) -> dict[str, Any]:
    import tempfile

    from mbrl.algorithms.mbpo import MBPO
    from rolloutlab.config import to_dict

    class _ArmMBPO(MBPO):
        # Evaluation time is kept apart so that the cost of learning can be told from the cost of measuring it.
        eval_seconds = 0.0

        def evaluate(self) -> float:
            t0 = time.perf_counter()
            try:
                value = super().evaluate()
            finally:
                self.eval_seconds += time.perf_counter() - t0
            if settings.stop_at is not None and value >= settings.stop_at:
                self.stop_requested = True
            return value

        def save(self, path: str | Path | None = None) -> Path:
            # The run folder is temporary: a checkpoint would be deleted unread, and writing it (the model buffer
            # holds hundreds of MB on HalfCheetah) would be charged to the arm's wall seconds.
            return Path(path) if path is not None else self.run_dir / "checkpoint.pt"

    cfg = mbpo_config(settings, arm, seed)
    with tempfile.TemporaryDirectory(prefix="mbpo-arm-") as tmp:
        run = _ArmMBPO(cfg, run_dir=tmp, log_formats=("csv",))
        run.learn()
    return {
        "eval": [[s, r] for s, r in run.eval_history],
        "eval_seconds": run.eval_seconds,
        "imagined_transitions": run.imagined_total,
        "imagined_per_second": run.imagined_total / run.rollout_seconds if run.rollout_seconds > 0 else None,
        "rollout_seconds": run.rollout_seconds,
        "nan_restores": run.nan_restores,
        "mbpo_config": to_dict(cfg),
        "steps_done": run.env_steps,
    }


def _run_sac(settings: ArmSettings, seed: int, gradient_steps: int) -> dict[str, Any]:
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    from mbrl.algorithms.mbpo import make_env

    eval_env = DummyVecEnv([lambda: Monitor(make_env(settings.env_id))])
    history: list[list[float]] = []
    timing = {"eval_seconds": 0.0}

    class _Eval(BaseCallback):
        # Same protocol as MBPO.evaluate: deterministic policy, eval env reseeded identically before each evaluation.
        def _on_step(self) -> bool:
            if self.num_timesteps % settings.eval_every == 0:
                t0 = time.perf_counter()
                eval_env.seed(seed + 10_000)
                result = evaluate_policy(
                    self.model, eval_env, n_eval_episodes=settings.eval_episodes, deterministic=True
                )
                history.append([self.num_timesteps, float(np.mean(result[0]))])
                timing["eval_seconds"] += time.perf_counter() - t0
                if settings.stop_at is not None and history[-1][1] >= settings.stop_at:
                    return False  # SB3 ends learn() here
            return True

    model = SAC(
        "MlpPolicy",
        make_env(settings.env_id),
        learning_rate=settings.learning_rate,
        batch_size=settings.batch_size,
        learning_starts=settings.initial_random_steps,  # uniform-random actions until then, as MBPO's warm-up
        train_freq=1,
        gradient_steps=gradient_steps,
        policy_kwargs={"net_arch": list(settings.net_arch)},
        seed=seed,
        device="cpu",
        verbose=0,
    )
    model.learn(total_timesteps=settings.budget, callback=_Eval())
    return {
        "eval": history,
        "eval_seconds": timing["eval_seconds"],
        "gradient_steps": gradient_steps,
        "steps_done": model.num_timesteps,
    }


# --- resumable collection ---------------------------------------------------------------------------------------


def run_file(partial_dir: Path, arm: str, seed: int) -> Path:
    """Where a finished run is kept: ``<partial_dir>/<arm, %-quoted>__<seed>.json`` (no ``:`` in file names)."""
    return partial_dir / f"{quote(arm, safe='')}__{seed}.json"


def collect_runs(
    arms: Sequence[str],
    seeds: Sequence[int],
    settings: ArmSettings,
    partial_dir: Path,
    run: Callable[[str, ArmSettings, int], dict[str, Any]] = run_arm,
    on_run: Callable[[dict[str, Any], list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every (seed, arm) run, reusing finished ones from ``partial_dir`` and saving each new one as it finishes.

    Seed-major order, so an interrupted benchmark has whole seeds for every arm. A killed run loses only the run in
    progress; calling this again with the same settings resumes after the last finished one.

    Args:
        arms: Arm names (:func:`parse_arms`).
        seeds: Seeds, the same for every arm.
        settings: The shared settings; a kept run is reused only if it was made under the same ones.
        partial_dir: Folder of finished runs (created if missing).
        run: Runs one arm for one seed (:func:`run_arm`; tests pass a fake).
        on_run: Called after each new run with its record and all records so far.

    Returns:
        The run records in seed-major order.

    Raises:
        ValueError: a kept file for one of these runs was made under other settings or another protocol (round one's
            files included); delete it or write to another folder (the script's ``--tag``).
    """
    partial_dir.mkdir(parents=True, exist_ok=True)
    runs: list[dict[str, Any]] = []
    for seed in seeds:
        for arm in arms:
            path = run_file(partial_dir, arm, seed)
            if path.exists():
                record = json.loads(path.read_text())
                expected = {"arm": arm, "seed": seed, "protocol": PROTOCOL, "settings": arm_settings(settings, arm)}
                stale = sorted(k for k, v in expected.items() if record.get(k) != v)
                if stale:
                    raise ValueError(
                        f"{path} differs from this run in {stale}; it belongs to another benchmark: delete it or "
                        "write to another folder (--tag)"
                    )
                runs.append(record)
                continue
            record = run(arm, settings, seed)
            atomic_write_json(path, record)
            runs.append(record)
            if on_run is not None:
                on_run(record, runs)
    return runs


# --- steps to threshold -----------------------------------------------------------------------------------------


def steps_to_threshold(evals: Sequence[Sequence[float]], threshold: float) -> int | None:
    """First evaluation step whose mean return is ``>= threshold``; ``None`` if never."""
    for step, value in evals:
        if value >= threshold:
            return int(step)
    return None


def _filled(steps: Sequence[int | None], budget: int) -> np.ndarray:
    return np.array([budget if s is None else s for s in steps], dtype=float)


def median_steps(steps: Sequence[int | None], budget: int) -> float:
    """Median over seeds, a never-reached threshold counting as the budget."""
    return float(np.median(_filled(steps, budget)))


def median_censored(steps: Sequence[int | None]) -> bool:
    """Whether the median rests on runs that never reached the threshold (at least half of them)."""
    return 2 * sum(s is None for s in steps) >= len(steps) > 0


def best_by_median(arm_steps: Mapping[str, Sequence[int | None]], budget: int) -> str:
    """The arm with the lowest median steps; ties go to the lower mean, then to the earlier arm."""
    order = list(arm_steps)
    return min(
        order,
        key=lambda a: (median_steps(arm_steps[a], budget), float(_filled(arm_steps[a], budget).mean()), order.index(a)),
    )


def bootstrap_ratio(
    numerator: Mapping[str, Sequence[int | None]],
    denominator: Mapping[str, Sequence[int | None]],
    budget: int,
    rng: np.random.Generator,
    resamples: int = 10_000,
    level: float = 0.95,
) -> tuple[float, list[float]]:
    """``min median steps over numerator arms / min median steps over denominator arms`` and its bootstrap interval.

    Each arm's seeds are resampled independently with replacement (:func:`rolloutlab.statistics.bootstrap_interval`,
    ``paired=False``), and the best arm of each side is chosen again in every resample, so the interval carries the
    choice of the best arm. Never-reached thresholds count as the budget.

    Returns:
        ``(ratio, [low, high])``: the point ratio and the percentile interval at ``level``.
    """
    names = list(numerator)

    def best_median_ratio(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        medians = [np.median(x, axis=axis) for x in samples]
        return np.minimum.reduce(medians[: len(names)]) / np.minimum.reduce(medians[len(names) :])

    samples = [_filled(steps, budget) for steps in (*numerator.values(), *denominator.values())]
    estimate = bootstrap_interval(samples, best_median_ratio, paired=False, rng=rng, n_resamples=resamples, level=level)
    return estimate.value, [estimate.low, estimate.high]


def _ratio(
    numerator: Mapping[str, Sequence[int | None]],
    denominator: Mapping[str, Sequence[int | None]],
    budget: int,
    rng: np.random.Generator,
    target: float | None,
) -> dict[str, Any]:
    value, interval = bootstrap_ratio(numerator, denominator, budget, rng)
    sac_arm, mbpo_arm = best_by_median(numerator, budget), best_by_median(denominator, budget)
    out: dict[str, Any] = {
        "value": value,
        "ci": interval,
        "sac_arm": sac_arm,
        "mbpo_arm": mbpo_arm,
        # A censored SAC median makes the ratio a lower bound; a censored MBPO median makes it unreliable.
        "censored": {"sac": median_censored(numerator[sac_arm]), "mbpo": median_censored(denominator[mbpo_arm])},
    }
    if target is not None:
        out.update(target=target, met=bool(value >= target), ci_low_meets_target=bool(interval[0] >= target))
    return out


def _mbpo_ratios(
    sac: Mapping[str, Sequence[int | None]],
    mbpo: Mapping[str, Sequence[int | None]],
    budget: int,
    rng: np.random.Generator,
    targets: bool,
) -> dict[str, Any]:
    """The ratios of the SAC arms over the given MBPO arms (the best of them where there are several)."""
    out: dict[str, Any] = {}
    if SAC_UTD1 in sac:
        target = RATIO_TARGETS["ratio_sac_utd1_over_mbpo"] if targets else None
        out["ratio_sac_utd1_over_mbpo"] = _ratio({SAC_UTD1: sac[SAC_UTD1]}, mbpo, budget, rng, target)
    target = RATIO_TARGETS["ratio_best_sac_over_mbpo"] if targets else None
    out["ratio_best_sac_over_mbpo"] = _ratio(sac, mbpo, budget, rng, target)
    if SAC_SAME_UTD in sac:
        out["ratio_sac_same_utd_over_mbpo"] = _ratio({SAC_SAME_UTD: sac[SAC_SAME_UTD]}, mbpo, budget, rng, None)
    return out


def _common_seeds(runs: Sequence[dict[str, Any]]) -> tuple[list[str], list[int], dict[tuple[str, int], dict[str, Any]]]:
    """Arms (MBPO first), the seeds every arm has, and the records by ``(arm, seed)``."""
    names = [r["arm"] for r in runs]
    unknown = sorted({a for a in names if not (is_mbpo(a) or a in SAC_ARMS)})
    if unknown:
        raise ValueError(f"unknown arms {unknown} (round one's records need round_one_runs first)")
    arms = arm_order(sorted(set(names), key=names.index))
    seed_sets = [{r["seed"] for r in runs if r["arm"] == arm} for arm in arms]
    seeds = sorted(set.intersection(*seed_sets)) if seed_sets else []
    return arms, seeds, {(r["arm"], r["seed"]): r for r in runs}


def _cost(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    seconds = [r["seconds"] for r in rows]
    return {
        "seconds": seconds,
        "seconds_median": float(np.median(seconds)) if seconds else None,
        "eval_seconds": [r.get("eval_seconds") for r in rows],
        "seconds_per_1k_steps": [r["seconds_per_1k_steps"] for r in rows],
    }


def summarize_threshold(
    env_id: str,
    threshold: float,
    budget: int,
    runs: Sequence[dict[str, Any]],
    rng: np.random.Generator,
    targets: bool = True,
) -> dict[str, Any]:
    """One steps-to-threshold entry of ``summary.json`` from per-seed run records.

    Only seeds present in every arm are used, so the arms are compared on the same seeds. "MBPO" is the MBPO arm
    with the lowest median steps (``mbpo_arm``); the ratios are given for it (the best arm chosen again in every
    bootstrap resample) and for every MBPO arm alone (``ratios_by_mbpo_arm``).

    Args:
        targets: Add each target ratio's ``target``, ``met`` and ``ci_low_meets_target``; ``False`` for results of
            another protocol, whose numbers must not be read against this protocol's targets.

    Returns:
        ``env``, ``mode`` (``"threshold"``), ``threshold``, ``budget``, ``seeds``, ``arms`` (per arm:
        ``steps_to_threshold``, ``median_steps``, ``never_reached``, ``final_return``, ``seconds``, ``seconds_median``,
        ``eval_seconds``, ``seconds_per_1k_steps``), ``never_reached_counts_as_budget``, ``mbpo_arm``,
        ``ratio_sac_utd1_over_mbpo``, ``ratio_best_sac_over_mbpo``, ``ratio_sac_same_utd_over_mbpo`` (each ``None``
        without the arms it needs) and ``ratios_by_mbpo_arm``.
    """
    arm_names, seeds, by = _common_seeds(runs)
    arms: dict[str, Any] = {}
    for arm in arm_names:
        rows = [by[(arm, s)] for s in seeds]
        steps = [steps_to_threshold(r["eval"], threshold) for r in rows]
        arms[arm] = {
            "steps_to_threshold": steps,
            "median_steps": median_steps(steps, budget) if steps else None,
            "never_reached": sum(s is None for s in steps),
            "final_return": [r["final_return"] for r in rows],
            **_cost(rows),
        }
    entry: dict[str, Any] = {
        "env": env_id,
        "mode": "threshold",
        "threshold": threshold,
        "budget": budget,
        "seeds": seeds,
        "arms": arms,
        "never_reached_counts_as_budget": True,
        "mbpo_arm": None,
        "ratio_sac_utd1_over_mbpo": None,
        "ratio_best_sac_over_mbpo": None,
        "ratio_sac_same_utd_over_mbpo": None,
        "ratios_by_mbpo_arm": {},
    }
    mbpo = {a: arms[a]["steps_to_threshold"] for a in arms if is_mbpo(a)}
    sac = {a: arms[a]["steps_to_threshold"] for a in SAC_ARMS if a in arms}
    if not (mbpo and sac and seeds):
        return entry
    entry["mbpo_arm"] = best_by_median(mbpo, budget)
    entry.update(_mbpo_ratios(sac, mbpo, budget, rng, targets))
    for arm, steps in mbpo.items():
        entry["ratios_by_mbpo_arm"][arm] = _mbpo_ratios(sac, {arm: steps}, budget, rng, targets)
    return entry


# --- final return -----------------------------------------------------------------------------------------------


def final_return_difference(
    a: Sequence[float], b: Sequence[float], rng: np.random.Generator, resamples: int = 10_000, level: float = 0.95
) -> dict[str, Any]:
    """Mean of the paired differences ``a[i] - b[i]`` with a paired percentile-bootstrap interval.

    The pairs (seeds) are resampled together: :func:`rolloutlab.statistics.mean_interval` of the differences.
    ``met``: the interval excludes zero and the mean is positive.

    Returns:
        ``{"differences", "mean", "ci": [low, high], "met"}``.
    """
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if diff.size == 0:
        raise ValueError("final_return_difference needs at least one pair")
    estimate = mean_interval(diff, rng=rng, n_resamples=resamples, level=level)
    low, high = estimate.low, estimate.high
    return {
        "differences": diff.tolist(),
        "mean": estimate.value,
        "ci": [low, high],
        "met": bool((low > 0.0 or high < 0.0) and estimate.value > 0.0),
    }


def summarize_final(
    env_id: str, budget: int, runs: Sequence[dict[str, Any]], rng: np.random.Generator
) -> dict[str, Any]:
    """The final-return entry of ``summary.json`` (HalfCheetah) from per-seed run records.

    Only seeds present in every arm are used. ``mbpo_minus_sac_same_utd`` is the paired difference (by seed) of the
    final evaluation returns of the best MBPO arm (highest mean final return, ``mbpo_arm``) and ``sac_same_utd``;
    ``mbpo_minus_sac_same_utd_by_mbpo_arm`` holds it for every MBPO arm.

    Returns:
        ``env``, ``mode`` (``"final_return"``), ``budget``, ``seeds``, ``arms`` (per arm: ``final_return``,
        ``final_return_mean``, ``final_step``, ``seconds``, ``seconds_median``, ``eval_seconds``,
        ``seconds_per_1k_steps``), ``final_eval_at_budget`` (every final evaluation was taken at the budget),
        ``mbpo_arm``, ``mbpo_minus_sac_same_utd`` (``None`` without both arms) and
        ``mbpo_minus_sac_same_utd_by_mbpo_arm``.
    """
    arm_names, seeds, by = _common_seeds(runs)
    arms: dict[str, Any] = {}
    for arm in arm_names:
        rows = [by[(arm, s)] for s in seeds]
        finals = [r["final_return"] for r in rows]
        arms[arm] = {
            "final_return": finals,
            "final_return_mean": float(np.mean(finals)) if finals and None not in finals else None,
            "final_step": [r.get("final_step") for r in rows],
            **_cost(rows),
        }
    entry: dict[str, Any] = {
        "env": env_id,
        "mode": "final_return",
        "budget": budget,
        "seeds": seeds,
        "arms": arms,
        "final_eval_at_budget": all(s == budget for row in arms.values() for s in row["final_step"]),
        "mbpo_arm": None,
        "mbpo_minus_sac_same_utd": None,
        "mbpo_minus_sac_same_utd_by_mbpo_arm": {},
    }
    mbpo = [a for a in arms if is_mbpo(a) and arms[a]["final_return_mean"] is not None]
    if not (mbpo and SAC_SAME_UTD in arms and seeds):
        return entry
    sac = arms[SAC_SAME_UTD]["final_return"]
    for arm in mbpo:
        entry["mbpo_minus_sac_same_utd_by_mbpo_arm"][arm] = {
            "mbpo_arm": arm,
            **final_return_difference(arms[arm]["final_return"], sac, rng),
        }
    best = max(mbpo, key=lambda a: (arms[a]["final_return_mean"], -mbpo.index(a)))
    entry["mbpo_arm"] = best
    entry["mbpo_minus_sac_same_utd"] = entry["mbpo_minus_sac_same_utd_by_mbpo_arm"][best]
    return entry


def summarize(
    mode: str,
    env_id: str,
    threshold: float | None,
    budget: int,
    runs: Sequence[dict[str, Any]],
    rng: np.random.Generator,
) -> dict[str, Any]:
    """:func:`summarize_threshold` (``mode="threshold"``) or :func:`summarize_final` (``mode="final_return"``)."""
    if mode == "final_return":
        return summarize_final(env_id, budget, runs, rng)
    if mode != "threshold" or threshold is None:
        raise ValueError(f"mode must be 'final_return', or 'threshold' with a threshold; got {mode!r}, {threshold!r}")
    return summarize_threshold(env_id, threshold, budget, runs, rng)


# --- round one --------------------------------------------------------------------------------------------------


def round_one_runs(runs: Sequence[dict[str, Any]], controller: str) -> list[dict[str, Any]]:
    """Round one's run records under this protocol's arm names.

    ``mbpo`` becomes ``mbpo:<controller>`` (round one ran ``fixed:1``), ``sac_default`` becomes ``sac_utd1`` and
    ``sac_same_utd`` keeps its name; each record keeps its old name as ``round_one_arm``. The renaming is of names
    only: round one ran another protocol (evaluation every 250 env steps, 250 warm-up steps, 5 seeds, 5000 imagined
    rollouts per round, at most 30 model epochs per refit), so its numbers are never this protocol's.

    Raises:
        ValueError: an arm name round one did not have.
    """
    out = []
    for run in runs:
        name = run["arm"]
        if name == "mbpo":
            new = MBPO_PREFIX + controller
        elif name in ROUND_ONE_SAC_NAMES:
            new = ROUND_ONE_SAC_NAMES[name]
        else:
            raise ValueError(f"{name!r} is not a round-one arm (mbpo, sac_same_utd, sac_default)")
        out.append({**run, "arm": new, "round_one_arm": name})
    return out
