"""Pre-registered headlines of the in-context agent on fresh seeds: a rule written down before the seeds run picks
what they run from side-seed evidence already on disk.

Two headlines (:data:`HEADLINES`, ``--task``), each in three resumable steps:

1. ``--preregister``: apply the task's rule to its side seeds and write ``preregistration.json`` in the task's folder
   (``results/tmaze_headline/``, ``results/bandit_2x100_headline/``): the rule, every candidate's side-seed numbers,
   the pick, the env-step budget, the fresh seeds, the measure and the target. It refuses to overwrite a plan and
   fresh seeds that a side seed used. Commit the plan before step 2.
2. The default: run every unit of the plan that is not on disk yet, one JSON per unit (``agent_seed<s>.json``, then
   RecurrentPPO's ``ppo_equal_steps_seed<s>.json`` and, for the bandit, ``ppo_equal_time_seed<s>.json``), resuming an
   agent run from its checkpoint under ``--runs-root``. It refuses to run while the plan is not committed unchanged in
   git, when the side seeds no longer give the plan's pick, or for a seed that is not in the plan.
3. ``summary.json`` beside the units: per seed the measure and the learning curve, the verdict, RecurrentPPO beside.
   ``experiments/incontext/matched.py`` puts the same summary into ``results/summary.json`` under the headline's key.

The T-maze at L = 100 (``tmaze_100``, :func:`tmaze_preregistration`): the rule picks a *setting* among those run on
side seeds 0-2 (:data:`TMAZE_CANDIDATES`); the target is success >= 0.95 on every fresh seed, so the verdict is
``missed`` as soon as one seed misses it.

The bandit 2x100 (``bandit_2x100``, :func:`bandit_preregistration`): the rule picks an *env-step budget* among the
evaluation points of the learning curves of the benchmark's own ``whole_trial`` runs (seeds 0-2, 1M env steps,
``results/matched_partial/``). Under ``whole_trial``
(:func:`~experiments.incontext.matched_protocol.whole_trial_config`) a run's budget sets only its length and its
evaluation schedule (one greedy evaluation every fifth of the budget):
exploration anneals over a fixed 10k env steps, the learning rate is constant after its 500-update warm-up
(``lr_final_fraction = 1`` makes the cosine over the planned updates flat), and there is no EMA copy. Evaluations
leave the training random stream alone: :func:`~meta.incontext.trainer.evaluate_agent` plays with its own generators
(greedy play draws nothing) on its own env copies, with the agent in eval mode (no spectral-norm power iteration). A
run of budget B therefore trains as a side seed's run did over its first B steps; the plan lists the config fields in
which they differ and refuses any beyond the budget and the evaluation interval (:data:`BUDGET_FIELDS`). The measure
is the greedy mean return on the benchmark's 1,000 evaluation tasks, the target the benchmark's (mean over the seeds
>= 0.98 x the matched Bayes-optimal return on those tasks), so the verdict waits for every planned seed.

    OMP_NUM_THREADS=1 nice -n 10 python experiments/incontext/headline.py --task bandit_2x100 --preregister
    git add experiments/incontext/results/bandit_2x100_headline && git commit -m "bandit 2x100 headline: plan"
    OMP_NUM_THREADS=1 nice -n 10 python experiments/incontext/headline.py --task bandit_2x100
"""

from __future__ import annotations

import dataclasses
import datetime
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.incontext.benchmark_parts import config_differences
from experiments.incontext.matched_protocol import (
    BUDGETS,
    EVAL_TASKS,
    TARGETS,
    agent_config,
    load_json,
    one_row_per_step,
    partial_path,
    ppo_budgets,
    run_agent,
    run_ppo,
    save_json,
    task_target,
)
from meta.incontext.config import TrainConfig
from rolloutlab.statistics import mean_interval
from rolloutlab.threads import set_torch_threads

RESULTS = Path(__file__).parent / "results"
#: Seeds never used for either task before (their side seeds are seeds 0-2).
FRESH_SEEDS = [100, 101, 102, 103, 104]


# --- the plan and its units, shared by every headline ------------------------------------------------------------


def fresh_seeds(seeds: list[int] | None, used: list[int]) -> list[int]:
    """``seeds`` (default :data:`FRESH_SEEDS`), refused if a side seed already used one of them.

    Raises:
        ValueError: a seed is among ``used``.
    """
    seeds = list(FRESH_SEEDS if seeds is None else seeds)
    if overlap := sorted(set(seeds) & set(used)):
        raise ValueError(f"fresh seeds {overlap} were already used by the side seeds {used}")
    return seeds


def written_utc() -> str:
    """The time a plan is written, UTC, to the second."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def planned_config(plan: dict[str, Any], seed: int) -> TrainConfig:
    """The agent's TrainConfig of planned seed ``seed``: the picked setting at the plan's budget and time cap, with
    the pick's ``train_override`` fields (if any) on top.

    Raises:
        SystemExit: ``seed`` is not in the plan.
    """
    if seed not in plan["seeds"]:
        raise SystemExit(f"seed {seed} is not in the pre-registered plan (seeds {plan['seeds']}); it will not run")
    picked = plan["picked"]
    cfg = agent_config(picked["setting"], plan["task"], seed, plan["env_steps"], plan["max_minutes"])
    return dataclasses.replace(cfg, **picked.get("train_override", {}))


def check_plan(plan: dict[str, Any], results: Path) -> None:
    """Refuse a plan whose pick the side seeds on disk no longer give (its task's rule re-applied to the same files).

    Raises:
        SystemExit: the rule now picks something else.
    """
    again = HEADLINES[plan["task"]].preregistration(results, plan["seeds"])["picked"]
    if again != plan["picked"]:
        raise SystemExit(f"the side seeds now give {again}, the plan says {plan['picked']}; not running")


def committed_unchanged(path: Path) -> bool:
    """Whether ``path`` is tracked by git with no uncommitted change (staged or not)."""
    cwd = path.parent
    tracked = subprocess.run(["git", "ls-files", "--error-unmatch", path.name], cwd=cwd, capture_output=True)
    if tracked.returncode != 0:
        return False
    changed = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", path.name], cwd=cwd, capture_output=True)
    return changed.returncode == 0


def unit_path(root: Path, what: str, seed: int) -> Path:
    """``root/<what>_seed<seed>.json``: one unit of the plan (``agent``, ``ppo_equal_steps``, ``ppo_equal_time``)."""
    return root / f"{what}_seed{seed}.json"


def seed_row(
    root: Path,
    seed: int,
    score: str,
    ppo_units: tuple[str, ...],
    agent_fields: Callable[[dict[str, Any]], dict[str, Any]],
) -> dict[str, Any]:
    """One planned seed of a summary: ``status`` (``done`` or ``not run``), ``agent_fields`` of its agent unit, and
    each RecurrentPPO unit on disk under its name with its greedy score (named ``score``), env steps and seconds."""
    run = load_json(unit_path(root, "agent", seed))
    row: dict[str, Any] = {"seed": seed, "status": "not run" if run is None else "done"}
    if run is not None:
        row.update(agent_fields(run))
    for unit in ppo_units:
        ppo = load_json(unit_path(root, unit, seed))
        if ppo is not None:
            row[unit] = {
                score: float(ppo["eval"]["mean"]),
                "env_steps": int(ppo["env_steps"]),
                "train_seconds": float(ppo["train_seconds"]),
            }
    return row


def summary_opening(plan: dict[str, Any], per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    """The keys a headline's summary opens with: task, pick, budget, target, seeds and the per-seed rows."""
    return {
        "task": plan["task"],
        "setting": plan["picked"],
        "env_steps": plan["env_steps"],
        "target": plan["target"],
        "seeds": plan["seeds"],
        "per_seed": per_seed,
    }


def ppo_means(per_seed: list[dict[str, Any]], ppo_units: tuple[str, ...], score: str) -> dict[str, Any]:
    """Per RecurrentPPO unit, the mean of ``score`` over the seeds it has run (``None`` before any) and their count."""
    out: dict[str, Any] = {}
    for unit in ppo_units:
        done = [row[unit][score] for row in per_seed if unit in row]
        out[f"{unit}_mean_{score}"] = float(np.mean(done)) if done else None
        out[f"{unit}_seeds_done"] = len(done)
    return out


def ppo_text(summary: dict[str, Any], ppo_units: tuple[str, ...], score: str, digits: int) -> str:
    """``; RecurrentPPO at equal env steps X (mean of n), at equal wall time Y (mean of m)`` for the units run."""
    wording = {"ppo_equal_steps": "equal env steps", "ppo_equal_time": "equal wall time"}
    parts = [
        f"{wording[unit]} {summary[f'{unit}_mean_{score}']:.{digits}f} (mean of {summary[f'{unit}_seeds_done']})"
        for unit in ppo_units
        if summary[f"{unit}_mean_{score}"] is not None
    ]
    return "; RecurrentPPO at " + ", at ".join(parts) if parts else ""


# --- T-maze, L = 100: the setting -----------------------------------------------------------------------------------

#: Success a seed must reach (the benchmark's T-maze target, here on every seed instead of the mean).
TMAZE_TARGET_SUCCESS = 0.95
TMAZE_RULE = (
    "Among the candidate settings, pick the one with the most side seeds whose success at L = 100 is >= 0.95; "
    "ties go to the higher mean success over its side seeds, then to the lower mean wall-clock seconds per side seed."
)


@dataclass(frozen=True)
class Candidate:
    """One setting with side-seed evidence on the T-maze.

    Attributes:
        setting: Name in :data:`~experiments.incontext.matched_protocol.SETTINGS`.
        train_override: TrainConfig fields changed on top of the setting (as the gate's ``--train-override``).
        sources: Result files of its side seeds, relative to ``results/``.
    """

    setting: str
    train_override: dict[str, Any]
    sources: tuple[str, ...]


#: Every setting run on T-maze side seeds before the plan: the gate's runs (300k env steps, scored once at the end)
#: and the benchmark's ``amago`` runs (the same budget, scored every 60k steps and stopped once solved).
TMAZE_CANDIDATES: dict[str, Candidate] = {
    "whole_trial": Candidate("whole_trial", {}, tuple(f"gate_tmaze_seed{s}_whole_trial.json" for s in range(3))),
    "amago_notime": Candidate(
        "amago", {"time_input": False}, tuple(f"gate_tmaze_seed{s}_amago_notime.json" for s in range(3))
    ),
    "amago": Candidate("amago", {}, tuple(f"matched_partial/tmaze_100__agent__seed{s}.json" for s in range(3))),
}


def side_seed_run(result: dict[str, Any]) -> dict[str, Any]:
    """The run inside a side-seed file: a gate file holds it under ``runs.<label>``, a benchmark piece is the run."""
    if "runs" in result:
        (run,) = result["runs"].values()
        return dict(run)
    return result


def load_side_seed(path: Path) -> dict[str, Any]:
    """A side-seed file.

    Raises:
        FileNotFoundError: it is missing.
    """
    result = load_json(path)
    if result is None:
        raise FileNotFoundError(f"side-seed file {path} is missing")
    return result


def candidate_evidence(results: Path, candidate: Candidate) -> dict[str, Any]:
    """The side-seed numbers of ``candidate``: greedy success and wall-clock seconds per seed, from its files.

    Raises:
        FileNotFoundError: a side-seed file is missing.
    """
    success, wall, seeds = [], [], []
    for source in candidate.sources:
        run = side_seed_run(load_side_seed(results / source))
        success.append(float(run["eval"]["mean"]))
        wall.append(float(run["wall_seconds"]))
        seeds.append(int(run["config"]["seed"]))
    return {
        "setting": candidate.setting,
        "train_override": dict(candidate.train_override),
        "sources": list(candidate.sources),
        "seeds": seeds,
        "success_per_seed": success,
        "wall_seconds_per_seed": wall,
        "seeds_at_target": sum(s >= TMAZE_TARGET_SUCCESS for s in success),
        "mean_success": float(np.mean(success)),
        "mean_wall_seconds": float(np.mean(wall)),
    }


def pick_setting(evidence: dict[str, dict[str, Any]]) -> str:
    """The candidate that :data:`TMAZE_RULE` picks: most side seeds at the target, then higher mean success, then
    lower mean wall-clock (then the name, so the pick never depends on the dict's order)."""
    if not evidence:
        raise ValueError("no candidate settings to pick from")
    return min(
        evidence,
        key=lambda n: (
            -evidence[n]["seeds_at_target"],
            -evidence[n]["mean_success"],
            evidence[n]["mean_wall_seconds"],
            n,
        ),
    )


def tmaze_preregistration(results: Path, seeds: list[int] | None = None) -> dict[str, Any]:
    """The T-maze plan: the rule, every candidate's side-seed evidence, the pick, budget, fresh seeds, measure and
    target (side-seed files under ``results``)."""
    task = "tmaze_100"
    evidence = {name: candidate_evidence(results, c) for name, c in TMAZE_CANDIDATES.items()}
    picked = pick_setting(evidence)
    steps, minutes = BUDGETS[task]
    used = sorted({s for e in evidence.values() for s in e["seeds"]})
    seeds = fresh_seeds(seeds, used)
    return {
        "task": task,
        "written_utc": written_utc(),
        "rule": TMAZE_RULE,
        "candidates": evidence,
        "picked": {
            "name": picked,
            "setting": TMAZE_CANDIDATES[picked].setting,
            "train_override": dict(TMAZE_CANDIDATES[picked].train_override),
        },
        "env_steps": steps,
        "max_minutes": minutes,
        "seeds": seeds,
        "side_seeds_used_before": used,
        "protocol": (
            "experiments/incontext/matched.py's agent run for tmaze_100 (matched_protocol.agent_config with the picked "
            f"setting at BUDGETS['tmaze_100'] = {steps} env steps, {minutes} min cap): greedy evaluation on the 200 "
            "evaluation tasks every fifth of the budget, stopping once an evaluation reaches 0.99 (the learning curve "
            "is those evaluations); the unit's result is the run's final greedy evaluation on those 200 tasks."
        ),
        "side_seed_protocols": (
            "gate_tmaze_* files: experiments/incontext/gate.py --no-compare-issue7 at 300k env steps, scored once at "
            "the end (no early stop); matched_partial files: matched.py's protocol above (their wall seconds are "
            "shorter where a run stopped once solved)"
        ),
        "measure": "greedy success at L = 100 (mean reward per meta-rollout) on the 200 evaluation tasks, per seed",
        "target": {"success_at_least": TMAZE_TARGET_SUCCESS, "on": "every seed"},
        "beside": "RecurrentPPO at the agent's env steps per seed, with the settings matched.py tuned on seed 0 "
        "(results/matched_partial/tmaze_100__ppo_grid.json)",
    }


def tmaze_summary(plan: dict[str, Any], root: Path) -> dict[str, Any]:
    """Per-seed success, met or missed, learning curves and the verdict: ``met`` when every planned seed is done and
    at the target, ``missed`` as soon as one done seed misses it, else ``incomplete``; RecurrentPPO's equal-step
    units beside the agent's."""
    target = float(plan["target"]["success_at_least"])
    units = TMAZE.ppo_units

    def agent_fields(run: dict[str, Any]) -> dict[str, Any]:
        success = float(run["eval"]["mean"])
        return {
            "success": success,
            "met": bool(success >= target),
            "sampled_success": float(run["eval_sampled"]["mean"]),
            "env_steps": int(run["env_steps"]),
            "solved_before_budget": bool(run["env_steps"] < plan["env_steps"]),
            "train_seconds": float(run["train_seconds"]),
            "learning_curve": run["history"],
        }

    per_seed = [seed_row(root, seed, "success", units, agent_fields) for seed in plan["seeds"]]
    done = [r for r in per_seed if r["status"] == "done"]
    if any(not r["met"] for r in done):
        verdict = "missed"
    elif len(done) == len(per_seed):
        verdict = "met"
    else:
        verdict = "incomplete"
    return {
        **summary_opening(plan, per_seed),
        "seeds_done": len(done),
        "seeds_met": sum(r["met"] for r in done),
        "verdict": verdict,
        "mean_success": float(np.mean([r["success"] for r in done])) if done else None,
        **ppo_means(per_seed, units, "success"),
    }


def tmaze_line(summary: dict[str, Any]) -> str:
    """One markdown sentence on :func:`tmaze_summary`'s result (for ``results/summary.md``)."""
    seeds = "; ".join(
        f"seed {r['seed']} {r['success']:.3f}" if r["status"] == "done" else f"seed {r['seed']} not run"
        for r in summary["per_seed"]
    )
    return (
        f"T-maze L = 100 headline (pre-registered, setting {summary['setting']['name']}, {summary['env_steps']} env "
        f"steps, target success >= {summary['target']['success_at_least']} on every seed): {seeds}: "
        f"{summary['verdict']}{ppo_text(summary, TMAZE.ppo_units, 'success', 3)}.\n"
    )


# --- bandit 2x100: the env-step budget ------------------------------------------------------------------------------

BANDIT_TASK = "bandit_2x100"
#: The setting of the side seeds, and of the fresh ones.
BANDIT_SETTING = "whole_trial"
#: The benchmark's own runs of :data:`BANDIT_SETTING` (``matched.py --setting whole_trial``, 1M env steps).
BANDIT_SIDE_SEEDS = [0, 1, 2]
BANDIT_RULE = (
    "Among the env-step budgets at which the side seeds' learning curves were evaluated (greedy, on the benchmark's "
    "evaluation tasks), pick the budget whose mean greedy return over the side seeds is highest; ties go to the "
    "smaller budget."
)
#: The config fields in which a planned run may differ from the side seed's run of the same seed: the budget and the
#: evaluation interval it sets (a fifth of the budget). Anything else would make the side seeds' curves no evidence.
BUDGET_FIELDS = ("eval_every_steps", "total_env_steps")
#: The interval of the mean over the seeds (``rolloutlab.statistics.mean_interval``: percentile bootstrap).
INTERVAL: dict[str, Any] = {"level": 0.95, "method": "percentile bootstrap over seeds", "n_resamples": 9999, "rng": 0}


def bandit_side_runs(partial: Path, seeds: list[int] | None = None) -> dict[str, dict[str, Any]]:
    """The side seeds' agent pieces in matched.py's piece folder ``partial``, by path relative to its parent.

    Raises:
        FileNotFoundError: a side seed's piece is missing.
        ValueError: a side seed ran another setting than :data:`BANDIT_SETTING`.
    """
    paths = [partial_path(partial, BANDIT_TASK, "agent", s) for s in (BANDIT_SIDE_SEEDS if seeds is None else seeds)]
    runs = {str(path.relative_to(partial.parent)): load_side_seed(path) for path in paths}
    if others := {name: run.get("setting") for name, run in runs.items() if run.get("setting") != BANDIT_SETTING}:
        raise ValueError(f"side seeds of another setting than {BANDIT_SETTING}: {others}")
    return runs


def bandit_evidence(side_runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per env-step budget at which every side seed's learning curve was evaluated: their greedy returns there and
    its mean over them (``side_runs``: :func:`bandit_side_runs`).

    Raises:
        ValueError: the curves share no evaluation point.
    """
    curves = [
        {int(row["env_steps"]): float(row["eval_return"]) for row in one_row_per_step(run["history"])}
        for run in side_runs.values()
    ]
    budgets = sorted(set.intersection(*(set(curve) for curve in curves)))
    if not budgets:
        raise ValueError("the side seeds' learning curves share no evaluation point")
    return {
        "setting": BANDIT_SETTING,
        "sources": list(side_runs),
        "seeds": [int(run["config"]["seed"]) for run in side_runs.values()],
        "candidates": [
            {
                "env_steps": budget,
                "return_per_seed": [curve[budget] for curve in curves],
                "mean_return": float(np.mean([curve[budget] for curve in curves])),
            }
            for budget in budgets
        ],
    }


def budget_differences(side_runs: dict[str, dict[str, Any]], env_steps: int, max_minutes: float) -> list[str]:
    """The config fields in which the side seeds' runs differ from runs of the same seeds at ``env_steps``.

    Raises:
        ValueError: a field beyond :data:`BUDGET_FIELDS` differs (the side seeds' curves are then no evidence).
    """
    differences = sorted({
        difference
        for run in side_runs.values()
        for difference in config_differences(
            run["config"],
            agent_config(BANDIT_SETTING, BANDIT_TASK, int(run["config"]["seed"]), env_steps, max_minutes),
        )
    })  # fmt: skip
    if beyond := sorted(set(differences) - set(BUDGET_FIELDS)):
        raise ValueError(f"the side seeds' runs differ from the planned runs in {beyond}, not only in the budget")
    return differences


def pick_budget(candidates: list[dict[str, Any]]) -> int:
    """The env-step budget that :data:`BANDIT_RULE` picks: the highest mean return, ties to the smaller budget."""
    if not candidates:
        raise ValueError("no candidate budgets to pick from")
    return int(min(candidates, key=lambda c: (-c["mean_return"], c["env_steps"]))["env_steps"])


def bandit_preregistration(results: Path, seeds: list[int] | None = None) -> dict[str, Any]:
    """The bandit 2x100 plan: the rule, the side seeds' returns per budget, the picked budget, the fresh seeds, the
    measure and the target with its threshold from the matched references (all read under ``results``).

    Raises:
        FileNotFoundError: a side seed's piece or the matched references are missing.
        ValueError: a fresh seed is a side seed, the side seeds' runs differ from the planned ones in more than the
            budget, or the references were played on another number of tasks than the agent is scored on.
    """
    partial = results / "matched_partial"
    side_runs = bandit_side_runs(partial)
    evidence = bandit_evidence(side_runs)
    budget = pick_budget(evidence["candidates"])
    seeds = fresh_seeds(seeds, evidence["seeds"])
    minutes = BUDGETS[BANDIT_TASK][1]
    differences = budget_differences(side_runs, budget, minutes)
    references_path = partial_path(partial, BANDIT_TASK, "references")
    references = load_json(references_path)
    if references is None:
        raise FileNotFoundError(f"the matched references {references_path} are missing")
    eval_tasks = EVAL_TASKS[BANDIT_TASK]
    if references["n_tasks"] != eval_tasks:
        raise ValueError(f"references on {references['n_tasks']} tasks, the agent is scored on {eval_tasks}")
    means = {name: float(ref["mean"]) for name, ref in references["references"].items()}
    return {
        "task": BANDIT_TASK,
        "written_utc": written_utc(),
        "rule": BANDIT_RULE,
        "side_seeds": evidence,
        "picked": {"setting": BANDIT_SETTING, "env_steps": budget},
        "env_steps": budget,
        "max_minutes": minutes,
        "seeds": seeds,
        "side_seeds_used_before": evidence["seeds"],
        "side_seed_config_differences": differences,
        "protocol": (
            "experiments/incontext/matched.py's agent run for bandit_2x100 (matched_protocol.agent_config with "
            f"setting {BANDIT_SETTING} at the picked {budget} env steps, {minutes} min cap): greedy evaluations on the "
            f"{eval_tasks} evaluation tasks every fifth of the budget (the learning curve); the unit's result is the "
            "run's final greedy evaluation on those tasks. The side seeds ran the same setting at "
            f"{BUDGETS[BANDIT_TASK][0]} env steps and differ only in the fields listed under "
            "side_seed_config_differences."
        ),
        "measure": (
            f"greedy mean return per meta-rollout (100 pulls) on the benchmark's {eval_tasks} bandit_2x100 evaluation "
            "tasks, per seed; the headline is its mean over the seeds"
        ),
        "eval_tasks": eval_tasks,
        "target": {
            "mean_return_at_least": task_target(BANDIT_TASK, means),
            "on": "the mean over the seeds",
            "rule": TARGETS[BANDIT_TASK],
            "references": str(references_path.relative_to(results)),
            "bayes_optimal": means["bayes_optimal"],
        },
        "interval": INTERVAL,
        "beside": "RecurrentPPO at the agent's env steps and at its training seconds per seed, with the settings "
        "matched.py tuned on seed 0 (results/matched_partial/bandit_2x100__ppo_grid.json)",
    }


def bandit_summary(plan: dict[str, Any], root: Path) -> dict[str, Any]:
    """Per-seed greedy return and learning curve, the mean over the seeds with its interval, and the verdict: ``met``
    when every planned seed is done and the mean reaches the plan's threshold, ``missed`` when every seed is done and
    it does not, else ``incomplete``; RecurrentPPO at equal env steps and at equal wall time beside the agent."""
    threshold = float(plan["target"]["mean_return_at_least"])
    units = BANDIT.ppo_units

    def agent_fields(run: dict[str, Any]) -> dict[str, Any]:
        return {
            "return": float(run["eval"]["mean"]),
            "sampled_return": float(run["eval_sampled"]["mean"]),
            "env_steps": int(run["env_steps"]),
            "stopped_by_time_cap": bool(run["stopped_by_time_cap"]),
            "train_seconds": float(run["train_seconds"]),
            "learning_curve": run["history"],
        }

    per_seed = [seed_row(root, seed, "return", units, agent_fields) for seed in plan["seeds"]]
    returns = [r["return"] for r in per_seed if r["status"] == "done"]
    spec = plan["interval"]
    estimate = (
        mean_interval(returns, rng=spec["rng"], n_resamples=spec["n_resamples"], level=spec["level"])
        if returns
        else None
    )
    if estimate is None or len(returns) < len(per_seed):
        verdict = "incomplete"
    elif estimate.value >= threshold:
        verdict = "met"
    else:
        verdict = "missed"
    return {
        **summary_opening(plan, per_seed),
        "eval_tasks": plan["eval_tasks"],
        "seeds_done": len(returns),
        "verdict": verdict,
        "mean_return": None if estimate is None else estimate.value,
        "mean_return_interval": None if estimate is None else [estimate.low, estimate.high],
        "interval": spec,
        "fraction_of_bayes_optimal": None if estimate is None else estimate.value / plan["target"]["bayes_optimal"],
        **ppo_means(per_seed, units, "return"),
    }


def bandit_line(summary: dict[str, Any]) -> str:
    """One markdown sentence on :func:`bandit_summary`'s result (for ``results/summary.md``)."""
    seeds = "; ".join(
        f"seed {r['seed']} {r['return']:.2f}" if r["status"] == "done" else f"seed {r['seed']} not run"
        for r in summary["per_seed"]
    )
    target = summary["target"]
    threshold, bayes_optimal = target["mean_return_at_least"], target["bayes_optimal"]
    mean = ""
    if summary["mean_return"] is not None:
        low, high = summary["mean_return_interval"]
        mean = f"; mean {summary['mean_return']:.2f} [{low:.2f}, {high:.2f}] of {summary['seeds_done']}"
    return (
        f"Bandit 2x100 headline (pre-registered, setting {summary['setting']['setting']}, {summary['env_steps']} env "
        f"steps picked from the side seeds' learning curves, target mean greedy return over the seeds >= "
        f"{threshold:.2f} ({threshold / bayes_optimal:.2f} x Bayes-optimal {bayes_optimal:.2f} on the same "
        f"{summary['eval_tasks']} tasks)): {seeds}{mean}: {summary['verdict']}"
        f"{ppo_text(summary, BANDIT.ppo_units, 'return', 2)}.\n"
    )


# --- the headlines ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Headline:
    """One pre-registered headline: where it lives, how its plan is written and how its units are summarized.

    Attributes:
        task: Benchmark task (:data:`~experiments.incontext.matched_protocol.TASKS`); a plan records it.
        folder: The plan, the units and the summary.
        summary_key: Its key in ``results/summary.json`` (``experiments/incontext/matched.py``).
        runs_root: Checkpoint folders of its agent runs (a killed unit resumes from here).
        ppo_units: RecurrentPPO's units beside the agent's per seed, by
            :func:`~experiments.incontext.matched_protocol.ppo_budgets` name.
        preregistration: ``(results, seeds) -> plan``: the rule applied to the side seeds under ``results``
            (``seeds=None``: :data:`FRESH_SEEDS`).
        summarize: ``(plan, folder) -> summary`` from the units on disk.
        line: One markdown sentence on a summary.
    """

    task: str
    folder: Path
    summary_key: str
    runs_root: str
    ppo_units: tuple[str, ...]
    preregistration: Callable[[Path, list[int] | None], dict[str, Any]]
    summarize: Callable[[dict[str, Any], Path], dict[str, Any]]
    line: Callable[[dict[str, Any]], str]


TMAZE = Headline(
    "tmaze_100", RESULTS / "tmaze_headline", "tmaze_headline", "runs/incontext-tmaze-headline",
    ("ppo_equal_steps",), tmaze_preregistration, tmaze_summary, tmaze_line,
)  # fmt: skip
BANDIT = Headline(
    BANDIT_TASK, RESULTS / "bandit_2x100_headline", "bandit_2x100_headline", "runs/incontext-bandit-headline",
    ("ppo_equal_steps", "ppo_equal_time"), bandit_preregistration, bandit_summary, bandit_line,
)  # fmt: skip
#: The headlines by task.
HEADLINES: dict[str, Headline] = {h.task: h for h in (TMAZE, BANDIT)}


def headline_summary(root: Path) -> dict[str, Any] | None:
    """The summary of the plan in ``root`` by its task's rules (``None`` if there is no plan)."""
    plan = load_json(root / "preregistration.json")
    return None if plan is None else HEADLINES[plan["task"]].summarize(plan, root)


def headline_line(summary: dict[str, Any]) -> str:
    """One markdown sentence on a :func:`headline_summary` (for ``results/summary.md``)."""
    return HEADLINES[summary["task"]].line(summary)


def run_units(plan: dict[str, Any], root: Path, seeds: list[int], runs_root: Path, skip_ppo: bool) -> None:
    """Every unit of ``seeds`` not on disk yet: the agent's, then RecurrentPPO's with the settings matched.py tuned.

    Raises:
        SystemExit: a seed is not in the plan (before anything runs), or RecurrentPPO's settings are missing.
    """
    headline = HEADLINES[plan["task"]]
    configs = {seed: planned_config(plan, seed) for seed in seeds}  # refuses seeds outside the plan first
    for seed, cfg in configs.items():
        path = unit_path(root, "agent", seed)
        if load_json(path) is None:
            save_json(path, {"setting": plan["picked"], **run_agent(cfg, runs_root / f"seed{seed}")})
        done = load_json(path)
        assert done is not None
        print(f"seed {seed}: greedy {done['eval']['mean']:.3f} at {done['env_steps']} env steps", flush=True)
    if skip_ppo:
        return
    from meta.incontext.baseline import RecurrentPPOConfig

    grid_path = partial_path(RESULTS / "matched_partial", plan["task"], "ppo_grid")
    grid = load_json(grid_path)
    if grid is None:
        raise SystemExit(f"RecurrentPPO's tuned settings ({grid_path}) are missing")
    for seed, cfg in configs.items():
        agent = load_json(unit_path(root, "agent", seed))
        assert agent is not None
        for unit in headline.ppo_units:
            path = unit_path(root, unit, seed)
            if load_json(path) is None:
                env_steps, max_seconds = ppo_budgets(agent)[unit]
                save_json(path, run_ppo(cfg, env_steps, max_seconds, RecurrentPPOConfig(**grid["best"])))


@dataclass
class Args:
    task: Literal["tmaze_100", "bandit_2x100"]
    """The headline: its side seeds, rule, measure and target."""
    preregister: bool = False
    """Write the plan from the side seeds (refuses to overwrite one) and stop."""
    seeds: list[int] = field(default_factory=list)
    """Seeds to run now (default: every seed of the plan); a seed outside the plan is refused."""
    skip_ppo: bool = False
    """Run only the agent's units."""
    summarize_only: bool = False
    """Only write summary.json from the units on disk."""
    dir: str | None = None
    """Folder of the plan, the units and the summary (default: the task's, results/tmaze_headline/ or
    results/bandit_2x100_headline/)."""
    runs_root: str | None = None
    """Checkpoint folders of the agent runs (default: runs/incontext-<tmaze|bandit>-headline)."""
    allow_uncommitted: bool = False
    """Run although the plan is not committed unchanged (tests only: a real headline needs the commit first)."""


def main(args: Args) -> None:
    set_torch_threads(1)
    headline = HEADLINES[args.task]
    root = Path(args.dir) if args.dir is not None else headline.folder
    plan_path = root / "preregistration.json"
    if args.preregister:
        if plan_path.exists():
            raise SystemExit(f"{plan_path} exists: a plan is written once (delete it only if no seed has run)")
        save_json(plan_path, headline.preregistration(RESULTS, None))
        print(f"wrote {plan_path}; commit it before running the seeds")
        return
    plan = load_json(plan_path)
    if plan is None:
        raise SystemExit(f"no plan at {plan_path}; write one with --preregister and commit it first")
    if plan["task"] != args.task:
        raise SystemExit(f"the plan at {plan_path} is for {plan['task']}, not {args.task}")
    if not args.summarize_only:
        if not args.allow_uncommitted and not committed_unchanged(plan_path):
            raise SystemExit(f"{plan_path} is not committed unchanged in git; commit the plan before any seed runs")
        check_plan(plan, RESULTS)
        runs_root = Path(args.runs_root if args.runs_root is not None else headline.runs_root)
        run_units(plan, root, args.seeds or list(plan["seeds"]), runs_root, args.skip_ppo)
    summary = headline.summarize(plan, root)
    save_json(root / "summary.json", summary)
    print(f"{summary['verdict']}: {headline.line(summary)}", end="")


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
