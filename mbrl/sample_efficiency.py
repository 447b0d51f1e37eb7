"""The sample-efficiency comparison: MBPO against SB3 SAC at the same and at the default update-to-data ratio.

Three arms share seeds, budget, network sizes, batch size, learning rate, random warm-up and evaluation protocol:

* ``mbpo``: :class:`~mbrl.algorithms.mbpo.MBPO` with ``G`` SAC updates per env step on mixed real/model batches;
* ``sac_same_utd``: SB3 ``SAC`` with ``gradient_steps=G`` (the "no model, same number of updates" control);
* ``sac_default``: SB3 ``SAC`` with one update per env step (its default).

Each run is evaluated every ``eval_every`` env steps with the deterministic policy over ``eval_episodes`` episodes
whose seeds are fixed; *steps to threshold* is the first evaluation step whose mean return reaches the threshold.
The headline number is the ratio ``median steps (best SAC arm) / median steps (MBPO)`` with a percentile-bootstrap
interval over seeds; a run that never reaches the threshold counts as the budget (flagged in the results).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ARMS = ("mbpo", "sac_same_utd", "sac_default")


@dataclass
class ArmSettings:
    """Settings shared by every arm of one comparison.

    Attributes:
        env_id: Gymnasium id.
        budget: Env steps per run.
        updates_per_step: ``G`` for MBPO and ``sac_same_utd``.
        eval_every: Env steps between evaluations.
        eval_episodes: Episodes per evaluation.
        initial_random_steps: Uniform-random warm-up steps (SAC's ``learning_starts``) in every arm.
        learning_rate: SAC learning rate.
        batch_size: SAC batch size.
        net_arch: SAC hidden widths.
        mbpo: Extra :class:`~mbrl.algorithms.mbpo.MBPOConfig` fields for the MBPO arm (plain data, e.g.
            ``{"controller": "fixed:3", "model": {"hidden_size": 200}}``).
    """

    env_id: str
    budget: int
    updates_per_step: int = 3
    eval_every: int = 250
    eval_episodes: int = 5
    initial_random_steps: int = 250
    learning_rate: float = 1e-3
    batch_size: int = 128
    net_arch: list[int] = field(default_factory=lambda: [64, 64])
    mbpo: dict[str, Any] = field(default_factory=dict)


def run_arm(arm: str, settings: ArmSettings, seed: int, run_dir: str | None = None) -> dict[str, Any]:
    """Run one arm for one seed.

    Returns:
        ``{"arm", "seed", "eval": [[step, mean_return], ...], "final_return", "seconds", "seconds_per_1k_steps"}``
        plus, for MBPO, ``"imagined_transitions"`` and ``"imagined_per_second"``.
    """
    from rolloutlab.seeding import seed_everything

    seed_everything(seed)
    started = time.perf_counter()
    if arm == "mbpo":
        out = _run_mbpo(settings, seed, run_dir)
    elif arm in ("sac_same_utd", "sac_default"):
        out = _run_sac(settings, seed, settings.updates_per_step if arm == "sac_same_utd" else 1)
    else:
        raise ValueError(f"unknown arm {arm!r}; known: {ARMS}")
    seconds = time.perf_counter() - started
    out.update(
        arm=arm,
        seed=seed,
        seconds=seconds,
        seconds_per_1k_steps=1000.0 * seconds / settings.budget,
        final_return=out["eval"][-1][1] if out["eval"] else None,
    )
    return out


def _run_mbpo(settings: ArmSettings, seed: int, run_dir: str | None) -> dict[str, Any]:
    import tempfile

    from mbrl.algorithms.mbpo import MBPO, MBPOConfig
    from rolloutlab.config import from_dict

    cfg = from_dict(
        MBPOConfig,
        {
            "env_id": settings.env_id,
            "total_steps": settings.budget,
            "seed": seed,
            "updates_per_step": settings.updates_per_step,
            "eval_every": settings.eval_every,
            "eval_episodes": settings.eval_episodes,
            "initial_random_steps": settings.initial_random_steps,
            "checkpoint_every": 0,
            "log_every": max(settings.budget // 4, 1),
            "sac": {
                "learning_rate": settings.learning_rate,
                "batch_size": settings.batch_size,
                "net_arch": list(settings.net_arch),
            },
            **settings.mbpo,
        },
    )
    with tempfile.TemporaryDirectory(prefix="mbpo-arm-") as tmp:
        run = MBPO(cfg, run_dir=run_dir or tmp, log_formats=("csv",)).learn()
    return {
        "eval": [[s, r] for s, r in run.eval_history],
        "imagined_transitions": run.imagined_total,
        "imagined_per_second": run.imagined_total / run.rollout_seconds if run.rollout_seconds > 0 else None,
        "rollout_seconds": run.rollout_seconds,
        "nan_restores": run.nan_restores,
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

    class _Eval(BaseCallback):
        # Same protocol as MBPO.evaluate: deterministic policy, eval env reseeded identically before each evaluation.
        def _on_step(self) -> bool:
            if self.num_timesteps % settings.eval_every == 0:
                eval_env.seed(seed + 10_000)
                result = evaluate_policy(
                    self.model, eval_env, n_eval_episodes=settings.eval_episodes, deterministic=True
                )
                history.append([self.num_timesteps, float(np.mean(result[0]))])
            return True

    model = SAC(
        "MlpPolicy",
        make_env(settings.env_id),
        learning_rate=settings.learning_rate,
        batch_size=settings.batch_size,
        learning_starts=settings.initial_random_steps,
        train_freq=1,
        gradient_steps=gradient_steps,
        policy_kwargs={"net_arch": list(settings.net_arch)},
        seed=seed,
        device="cpu",
        verbose=0,
    )
    model.learn(total_timesteps=settings.budget, callback=_Eval())
    return {"eval": history, "gradient_steps": gradient_steps}


def steps_to_threshold(evals: Sequence[Sequence[float]], threshold: float) -> int | None:
    """First evaluation step whose mean return is ``>= threshold``; ``None`` if never."""
    for step, value in evals:
        if value >= threshold:
            return int(step)
    return None


def median_steps(steps: Sequence[int | None], budget: int) -> float:
    """Median over seeds, a never-reached threshold counting as the budget."""
    return float(np.median([budget if s is None else s for s in steps]))


def ratio_with_interval(
    sac_steps: dict[str, Sequence[int | None]],
    mbpo_steps: Sequence[int | None],
    budget: int,
    rng: np.random.Generator,
    resamples: int = 10_000,
    level: float = 0.95,
) -> tuple[float, list[float]]:
    """``min over SAC arms of median steps / MBPO median steps`` and its percentile-bootstrap interval.

    Each arm's seeds are resampled independently (with replacement); the best SAC arm is re-chosen in every resample.
    Never-reached thresholds count as the budget, which makes the ratio conservative when SAC never gets there.

    Returns:
        ``(ratio, [low, high])``.
    """
    filled = {arm: np.array([budget if s is None else s for s in steps], float) for arm, steps in sac_steps.items()}
    mbpo = np.array([budget if s is None else s for s in mbpo_steps], float)
    point = min(float(np.median(v)) for v in filled.values()) / float(np.median(mbpo))
    ratios = np.empty(resamples)
    for i in range(resamples):
        best = min(float(np.median(rng.choice(v, size=v.size))) for v in filled.values())
        ratios[i] = best / float(np.median(rng.choice(mbpo, size=mbpo.size)))
    alpha = (1.0 - level) / 2.0
    return point, [float(np.quantile(ratios, alpha)), float(np.quantile(ratios, 1.0 - alpha))]


def summarize_env(
    env_id: str, threshold: float, budget: int, runs: Sequence[dict[str, Any]], rng: np.random.Generator
) -> dict[str, Any]:
    """One ``sample_efficiency`` entry of ``summary.json`` from per-seed arm results (schema of issue 4).

    Only seeds present in every arm are used, so the arms are compared on the same seeds.
    """
    arms_present = sorted({r["arm"] for r in runs}, key=lambda a: ARMS.index(a) if a in ARMS else len(ARMS))
    seed_sets = [{r["seed"] for r in runs if r["arm"] == arm} for arm in arms_present]
    seeds = sorted(set.intersection(*seed_sets)) if seed_sets else []
    by = {(r["arm"], r["seed"]): r for r in runs}
    arms: dict[str, Any] = {}
    for arm in arms_present:
        rows = [by[(arm, s)] for s in seeds]
        steps = [steps_to_threshold(r["eval"], threshold) for r in rows]
        arms[arm] = {
            "steps_to_threshold": steps,
            "median_steps": median_steps(steps, budget) if steps else None,
            "never_reached": sum(s is None for s in steps),
            "final_return": [r["final_return"] for r in rows],
            "seconds_per_1k_steps": [r["seconds_per_1k_steps"] for r in rows],
        }
    entry: dict[str, Any] = {
        "env": env_id,
        "threshold": threshold,
        "budget": budget,
        "seeds": seeds,
        "arms": arms,
        "never_reached_counts_as_budget": True,
        "ratio_best_sac_over_mbpo": None,
        "ratio_ci": None,
    }
    sac_arms: dict[str, Sequence[int | None]] = {
        a: arms[a]["steps_to_threshold"] for a in ("sac_same_utd", "sac_default") if a in arms
    }
    if "mbpo" in arms and sac_arms and seeds:
        ratio, interval = ratio_with_interval(sac_arms, arms["mbpo"]["steps_to_threshold"], budget, rng)
        entry["ratio_best_sac_over_mbpo"] = ratio
        entry["ratio_ci"] = interval
        # Each SAC arm alone as well: the best-arm ratio hides how MBPO fares against SAC at its default update ratio.
        entry["ratio_by_sac_arm"] = {}
        for arm, arm_steps in sac_arms.items():
            arm_ratio, arm_interval = ratio_with_interval(
                {arm: arm_steps}, arms["mbpo"]["steps_to_threshold"], budget, rng
            )
            entry["ratio_by_sac_arm"][arm] = {"ratio": arm_ratio, "ci": arm_interval}
    return entry
