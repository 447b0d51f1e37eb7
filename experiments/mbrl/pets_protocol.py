"""The PETS benchmark: env steps to threshold and planning latency.

Arms ``pets_cem`` and ``pets_mppi`` run :class:`~planning.mpc.pets.PETS` under the evaluation protocol of the MBPO
benchmark (:mod:`experiments.mbrl.arms`): the same thresholds, a deterministic evaluation of ``eval_episodes`` episodes
every ``eval_every`` env steps with the evaluation env reseeded to ``seed + 10_000``, and the same warm-up of uniform
random steps. A PETS run stops at its first evaluation that reaches the threshold (``PETSConfig.stop_at_return``):
steps to threshold is the only target and planning is the expensive part. MBPO and SAC at one update per step are
read from the MBPO benchmark's run records for the same seeds, so their numbers are the ones that benchmark reports.

Every finished run is saved at once (:func:`collect_pets_runs`) and reused by a rerun with the same settings, so a
killed benchmark resumes where it stopped. ``experiments/mbrl/pets.py`` is the benchmark's command line;
:mod:`experiments.mbrl.pets_quick` is its line in ``rolloutlab bench`` (``--only mpc``).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from experiments.mbrl.arms import PROTOCOL as MBPO_PROTOCOL
from experiments.mbrl.sample_efficiency_stats import median_censored, median_steps, steps_to_threshold
from experiments.sweep import Unit, grid, run_sweep

PETS_ARMS = {"pets_cem": "cem", "pets_mppi": "mppi"}
#: The issue's targets: median env steps to threshold for PETS (CEM), and planning time per env step.
STEP_TARGETS = {"Pendulum-v1": 1000, "InvertedPendulum-v5": 500}
PLAN_MS_TARGET = 50.0


@dataclass
class PETSSettings:
    """Settings shared by every PETS run of one env (the protocol's defaults; PETSConfig's for the rest).

    Attributes:
        env_id: Gymnasium id.
        threshold: Mean evaluation return that counts as solved (also the early stop).
        budget: Env steps at most per run.
        eval_every: Env steps between evaluations.
        eval_episodes: Episodes per evaluation.
        initial_random_steps: Uniform-random warm-up steps.
        pets: Further :class:`~planning.mpc.pets.PETSConfig` fields (plain data; ``cem``, ``mppi`` and ``model``
            mappings override single fields of their sub-configs).
    """

    env_id: str
    threshold: float
    budget: int = 3000
    eval_every: int = 100
    eval_episodes: int = 5
    initial_random_steps: int = 200
    pets: dict[str, Any] = field(default_factory=dict)


def pets_config(settings: PETSSettings, arm: str, seed: int) -> Any:
    """The :class:`~planning.mpc.pets.PETSConfig` of one run: PETSConfig's defaults with the settings laid over."""
    from planning.mpc.pets import PETSConfig
    from rolloutlab.config import from_dict, to_dict

    if arm not in PETS_ARMS:
        raise ValueError(f"unknown PETS arm {arm!r}; choose from {sorted(PETS_ARMS)}")
    base = to_dict(PETSConfig())
    extra = json.loads(json.dumps(settings.pets))
    for key in ("cem", "mppi", "model"):
        base[key] = {**base[key], **extra.pop(key, {})}
    values = {
        **base,
        "env_id": settings.env_id,
        "total_steps": settings.budget,
        "seed": seed,
        "optimizer": PETS_ARMS[arm],
        "eval_every": settings.eval_every,
        "eval_episodes": settings.eval_episodes,
        "initial_random_steps": settings.initial_random_steps,
        "stop_at_return": settings.threshold,
        "checkpoint_every": 0,
        "log_every": settings.eval_every,
        **extra,
    }
    return from_dict(PETSConfig, values)


def run_pets(arm: str, settings: PETSSettings, seed: int) -> dict[str, Any]:
    """Run one PETS arm for one seed in a temporary folder; return its record (curve, steps, latencies, costs)."""
    import tempfile

    from planning.mpc.pets import PETS
    from rolloutlab.config import to_dict
    from rolloutlab.seeding import seed_everything

    cfg = pets_config(settings, arm, seed)
    seed_everything(seed)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pets-arm-") as tmp:
        run = PETS(cfg, run_dir=tmp, log_formats=("csv",)).learn()
    seconds = time.perf_counter() - started
    return {
        "arm": arm,
        "seed": seed,
        "settings": json.loads(json.dumps(dataclasses.asdict(settings))),
        "eval": [[s, r] for s, r in run.eval_history],
        "steps_to_threshold": steps_to_threshold(run.eval_history, settings.threshold),
        "env_steps": run.env_steps,
        "stopped_early": run.stopped_early,
        **run.latency_ms(),
        "plan_calls": len(run.planner.latencies),
        "horizons": list(run.driver.schedules[0]),
        "seconds": seconds,
        "fit_seconds": run.fit_seconds,
        "eval_seconds": run.eval_seconds,
        "pets_config": to_dict(cfg),
    }


def collect_pets_runs(
    arms: Sequence[str],
    seeds: Sequence[int],
    settings: PETSSettings,
    partial_dir: Path,
    run: Callable[[str, PETSSettings, int], dict[str, Any]] = run_pets,
    on_run: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every (seed, arm) run, reusing finished ones from ``partial_dir``; each new one is saved as it finishes.

    Raises:
        ValueError: a kept run was made under other settings (delete it or use another folder).
    """
    partial_dir.mkdir(parents=True, exist_ok=True)
    expected = json.loads(json.dumps(dataclasses.asdict(settings)))

    def reuse(unit: Unit, record: dict[str, Any]) -> bool:
        if record.get("settings") != expected:
            raise ValueError(f"{unit.path} was made under other settings; delete it or use another --tag")
        return True

    def report(unit: Unit, record: dict[str, Any], records: dict[Unit, dict[str, Any]]) -> None:
        if on_run is not None:
            on_run(record)

    units = grid(arms, seeds, partial_dir)
    records = run_sweep(
        units, lambda unit: run(unit.arm, settings, unit.seed), reuse=reuse, on_record=report, show_progress=False
    )
    return list(records.values())


def mbpo_reference(results: Path, env_id: str) -> tuple[list[dict[str, Any]], int | None]:
    """The MBPO benchmark's finished run records for ``env_id`` (its protocol only) and their budget.

    Args:
        results: The MBPO benchmark's results folder (its ``partial/<env>/`` run records).
        env_id: Gymnasium id.

    Returns:
        ``(records, budget)``; ``([], None)`` when none have finished.

    Raises:
        ValueError: the records were made with different budgets.
    """
    folder = results / "partial" / env_id.replace("/", "-")
    runs = []
    for path in sorted(folder.glob("*.json")) if folder.exists() else []:
        record = json.loads(path.read_text())
        if record.get("protocol") == MBPO_PROTOCOL:
            runs.append(record)
    budgets = {int(r["settings"]["budget"]) for r in runs}
    if len(budgets) > 1:
        raise ValueError(f"{folder} mixes budgets {sorted(budgets)}")
    return runs, (budgets.pop() if budgets else None)


def _arm_entry(steps: Sequence[int | None], budget: int) -> dict[str, Any]:
    return {
        "steps_to_threshold": list(steps),
        "median_steps_to_threshold": median_steps(steps, budget),
        "never_reached": sum(s is None for s in steps),
        "median_censored": median_censored(steps),
    }


def summarize_env(
    settings: PETSSettings,
    records: Sequence[Mapping[str, Any]],
    reference_runs: Sequence[Mapping[str, Any]] = (),
    reference_budget: int | None = None,
) -> dict[str, Any]:
    """One env's entry of ``pets.json``.

    Args:
        settings: The env's PETS settings.
        records: Its PETS run records.
        reference_runs: MBPO benchmark run records (:mod:`experiments.mbrl.arms`) for the same env. Of those, the
            seeds the PETS runs used give ``sac_utd1`` and ``mbpo``: the ``mbpo:*`` arm with the lowest median steps
            over these seeds (one arm for all seeds, as that benchmark picks its ``mbpo_arm``). An arm missing any
            of the seeds is left out.
        reference_budget: The MBPO benchmark's budget (a never-reached threshold counts as it).

    Returns:
        Per arm: steps to threshold per seed, their median (never reached = the budget), never-reached count; for the
        PETS arms also ``plan_ms_p50`` / ``plan_ms_p95`` (medians over seeds of each run's percentile), wall
        seconds, and ``met`` flags for the targets.
    """
    seeds = sorted({int(r["seed"]) for r in records})
    entry: dict[str, Any] = {
        "threshold": settings.threshold,
        "budget": settings.budget,
        "seeds": seeds,
        "targets": {
            "median_steps_to_threshold": STEP_TARGETS.get(settings.env_id),
            "plan_ms_p50": PLAN_MS_TARGET,
        },
    }
    for arm in PETS_ARMS:
        rows = sorted((r for r in records if r["arm"] == arm), key=lambda r: r["seed"])
        if not rows:
            continue
        steps = [r["steps_to_threshold"] for r in rows]
        item = _arm_entry(steps, settings.budget)
        item["plan_ms_p50"] = float(np.median([r["plan_ms_p50"] for r in rows]))
        item["plan_ms_p95"] = float(np.median([r["plan_ms_p95"] for r in rows]))
        item["seconds_median"] = float(np.median([r["seconds"] for r in rows]))
        target = STEP_TARGETS.get(settings.env_id)
        item["steps_met"] = None if target is None else bool(item["median_steps_to_threshold"] <= target)
        item["plan_ms_met"] = bool(item["plan_ms_p50"] <= PLAN_MS_TARGET)
        entry[arm] = item
    if reference_runs and reference_budget is not None:
        from experiments.mbrl.arms import SAC_UTD1, is_mbpo
        from experiments.mbrl.sample_efficiency_stats import best_by_median

        def steps_of(arm: str) -> list[int | None]:
            by_seed = {int(r["seed"]): r for r in reference_runs if r["arm"] == arm}
            return [steps_to_threshold(by_seed[s]["eval"], settings.threshold) for s in seeds if s in by_seed]

        have = {r["arm"] for r in reference_runs}
        complete = [a for a in sorted(have) if len(steps_of(a)) == len(seeds)]
        mbpo_arms = {a: steps_of(a) for a in complete if is_mbpo(a)}
        if mbpo_arms:
            best = best_by_median(mbpo_arms, reference_budget)
            entry["mbpo"] = {"arm": best, **_arm_entry(mbpo_arms[best], reference_budget)}
        if SAC_UTD1 in complete:
            entry[SAC_UTD1] = _arm_entry(steps_of(SAC_UTD1), reference_budget)
        entry["reference_budget"] = reference_budget
    return entry


def _steps_cell(item: Mapping[str, Any]) -> str:
    steps = ", ".join("never" if s is None else str(s) for s in item["steps_to_threshold"])
    return steps


def pets_table(envs: Mapping[str, Mapping[str, Any]]) -> str:
    """The markdown table of ``pets.json``'s ``envs`` (the README and docs quote it; a test checks they agree)."""
    lines = [
        "| env | arm | steps to threshold (per seed) | median | never | plan ms p50 / p95 | target | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for env_id, entry in envs.items():
        target = entry["targets"]["median_steps_to_threshold"]
        for arm in (*PETS_ARMS, "mbpo", "sac_utd1"):
            if arm not in entry:
                continue
            item = entry[arm]
            name = f"{arm} ({item['arm']})" if arm == "mbpo" else arm
            median = f"{item['median_steps_to_threshold']:.0f}" + (" (censored)" if item["median_censored"] else "")
            if arm in PETS_ARMS:
                plan = f"{item['plan_ms_p50']:.1f} / {item['plan_ms_p95']:.1f}"
                goal = f"≤ {target} steps, ≤ {PLAN_MS_TARGET:.0f} ms"
                met = f"steps {'yes' if item['steps_met'] else 'no'}, ms {'yes' if item['plan_ms_met'] else 'no'}"
            else:
                plan, goal, met = "—", "—", "—"
            lines.append(
                f"| {env_id} | {name} | {_steps_cell(item)} | {median} | {item['never_reached']} | {plan} | {goal} "
                f"| {met} |"
            )
    return "\n".join(lines) + "\n"
