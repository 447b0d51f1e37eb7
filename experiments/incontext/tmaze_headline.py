"""The T-maze headline (L = 100) on fresh seeds, with the setting chosen by a rule written down before they run.

Three steps, each resumable:

1. ``--preregister``: apply :func:`pick_setting` to the side seeds already on disk (:data:`CANDIDATES`: the T-maze gate
   runs ``results/gate_tmaze_seed{0,1,2}_*.json`` and the benchmark's own ``amago`` runs in
   ``results/matched_partial/``) and write ``results/tmaze_headline/preregistration.json``: the rule, every candidate's
   side-seed numbers, the picked setting, the env-step budget, the fresh seeds, the measure and the target. It
   refuses to overwrite a plan. Commit the plan before step 2.
2. The default: run every unit of the plan that is not on disk yet, one JSON per unit (``agent_seed<s>.json``, then
   ``ppo_equal_steps_seed<s>.json``), resuming an agent run from its checkpoint under ``--runs-root``. It refuses
   to run while the plan is not committed unchanged in git, when the side seeds no longer give the plan's setting,
   or for a seed that is not in the plan.
3. ``summary.json`` beside the units (:func:`headline_summary`): per seed the success, met or missed, the learning
   curve; the verdict (``met`` only when every planned seed is done and meets the target); RecurrentPPO at equal env
   steps beside it. ``experiments/incontext/matched.py`` puts the same summary into ``results/summary.json``.

    OMP_NUM_THREADS=1 nice -n 10 python experiments/incontext/tmaze_headline.py --preregister
    git add experiments/incontext/results/tmaze_headline && git commit -m "T-maze headline: pre-registration"
    OMP_NUM_THREADS=1 nice -n 10 python experiments/incontext/tmaze_headline.py
"""

from __future__ import annotations

import dataclasses
import datetime
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.incontext.matched_protocol import (
    BUDGETS,
    agent_config,
    load_json,
    partial_path,
    run_agent,
    run_ppo,
    save_json,
)
from meta.incontext.config import TrainConfig
from rolloutlab.threads import set_torch_threads

RESULTS = Path(__file__).parent / "results"
HEADLINE_DIR = RESULTS / "tmaze_headline"
TASK = "tmaze_100"
#: Success a seed must reach (the benchmark's T-maze target, now on every seed instead of the mean).
TARGET_SUCCESS = 0.95
#: Seeds never used for the T-maze before (the side seeds and the benchmark's runs are seeds 0-2).
FRESH_SEEDS = [100, 101, 102, 103, 104]
RULE = (
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
CANDIDATES: dict[str, Candidate] = {
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


def candidate_evidence(results: Path, candidate: Candidate) -> dict[str, Any]:
    """The side-seed numbers of ``candidate``: greedy success and wall-clock seconds per seed, from its files.

    Raises:
        FileNotFoundError: a side-seed file is missing.
    """
    success, wall, seeds = [], [], []
    for source in candidate.sources:
        run = side_seed_run(load_json(results / source) or _missing(results / source))
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
        "seeds_at_target": sum(s >= TARGET_SUCCESS for s in success),
        "mean_success": float(np.mean(success)),
        "mean_wall_seconds": float(np.mean(wall)),
    }


def _missing(path: Path) -> dict[str, Any]:
    raise FileNotFoundError(f"side-seed file {path} is missing")


def pick_setting(evidence: dict[str, dict[str, Any]]) -> str:
    """The candidate that :data:`RULE` picks: most side seeds at the target, then higher mean success, then lower
    mean wall-clock (then the name, so the pick never depends on the dict's order)."""
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


def build_preregistration(results: Path, seeds: list[int] | None = None) -> dict[str, Any]:
    """The plan: the rule, every candidate's side-seed evidence, the pick, budget, fresh seeds, measure and target."""
    evidence = {name: candidate_evidence(results, c) for name, c in CANDIDATES.items()}
    picked = pick_setting(evidence)
    steps, minutes = BUDGETS[TASK]
    seeds = list(FRESH_SEEDS if seeds is None else seeds)
    used = sorted({s for e in evidence.values() for s in e["seeds"]})
    if overlap := sorted(set(seeds) & set(used)):
        raise ValueError(f"fresh seeds {overlap} were already used by the side seeds {used}")
    return {
        "task": TASK,
        "written_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "rule": RULE,
        "candidates": evidence,
        "picked": {
            "name": picked,
            "setting": CANDIDATES[picked].setting,
            "train_override": dict(CANDIDATES[picked].train_override),
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
        "target": {"success_at_least": TARGET_SUCCESS, "on": "every seed"},
        "beside": "RecurrentPPO at the agent's env steps per seed, with the settings matched.py tuned on seed 0 "
        "(results/matched_partial/tmaze_100__ppo_grid.json)",
    }


def planned_config(plan: dict[str, Any], seed: int) -> TrainConfig:
    """The agent's TrainConfig of planned seed ``seed``.

    Raises:
        SystemExit: ``seed`` is not in the plan.
    """
    if seed not in plan["seeds"]:
        raise SystemExit(f"seed {seed} is not in the pre-registered plan (seeds {plan['seeds']}); it will not run")
    picked = plan["picked"]
    cfg = agent_config(picked["setting"], plan["task"], seed, plan["env_steps"], plan["max_minutes"])
    return dataclasses.replace(cfg, **picked["train_override"])


def check_plan(plan: dict[str, Any], results: Path) -> None:
    """Refuse a plan whose pick the side seeds on disk no longer give (the rule re-applied to the same files).

    Raises:
        SystemExit: the rule now picks another setting.
    """
    evidence = {name: candidate_evidence(results, CANDIDATES[name]) for name in plan["candidates"]}
    if (again := pick_setting(evidence)) != plan["picked"]["name"]:
        raise SystemExit(f"the side seeds now give {again!r}, the plan says {plan['picked']['name']!r}; not running")


def committed_unchanged(path: Path) -> bool:
    """Whether ``path`` is tracked by git with no uncommitted change (staged or not)."""
    cwd = path.parent
    tracked = subprocess.run(["git", "ls-files", "--error-unmatch", path.name], cwd=cwd, capture_output=True)
    if tracked.returncode != 0:
        return False
    changed = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", path.name], cwd=cwd, capture_output=True)
    return changed.returncode == 0


def unit_path(root: Path, what: str, seed: int) -> Path:
    """``root/<what>_seed<seed>.json``: one unit of the plan (``agent`` or ``ppo_equal_steps``)."""
    return root / f"{what}_seed{seed}.json"


def headline_summary(root: Path) -> dict[str, Any] | None:
    """Per-seed success, met or missed, learning curves and the verdict of the plan in ``root`` (``None`` if there
    is no plan). The verdict is ``met`` when every planned seed is done and at the target, ``missed`` as soon as one
    done seed misses it, else ``incomplete``; RecurrentPPO's equal-step units sit beside the agent's."""
    plan = load_json(root / "preregistration.json")
    if plan is None:
        return None
    target = float(plan["target"]["success_at_least"])
    per_seed = []
    for seed in plan["seeds"]:
        run = load_json(unit_path(root, "agent", seed))
        ppo = load_json(unit_path(root, "ppo_equal_steps", seed))
        row: dict[str, Any] = {"seed": seed, "status": "not run" if run is None else "done"}
        if run is not None:
            success = float(run["eval"]["mean"])
            row.update(
                success=success,
                met=bool(success >= target),
                sampled_success=float(run["eval_sampled"]["mean"]),
                env_steps=int(run["env_steps"]),
                solved_before_budget=bool(run["env_steps"] < plan["env_steps"]),
                train_seconds=float(run["train_seconds"]),
                learning_curve=run["history"],
            )
        if ppo is not None:
            row["ppo_equal_steps"] = {
                "success": float(ppo["eval"]["mean"]),
                "env_steps": int(ppo["env_steps"]),
                "train_seconds": float(ppo["train_seconds"]),
            }
        per_seed.append(row)
    done = [r for r in per_seed if r["status"] == "done"]
    if any(not r["met"] for r in done):
        verdict = "missed"
    elif len(done) == len(per_seed):
        verdict = "met"
    else:
        verdict = "incomplete"
    ppo_done = [r["ppo_equal_steps"]["success"] for r in per_seed if "ppo_equal_steps" in r]
    return {
        "task": plan["task"],
        "setting": plan["picked"],
        "env_steps": plan["env_steps"],
        "target": plan["target"],
        "seeds": plan["seeds"],
        "per_seed": per_seed,
        "seeds_done": len(done),
        "seeds_met": sum(r["met"] for r in done),
        "verdict": verdict,
        "mean_success": float(np.mean([r["success"] for r in done])) if done else None,
        "ppo_equal_steps_mean_success": float(np.mean(ppo_done)) if ppo_done else None,
        "ppo_equal_steps_seeds_done": len(ppo_done),
    }


def headline_line(summary: dict[str, Any]) -> str:
    """One markdown sentence on :func:`headline_summary`'s result (for ``results/summary.md``)."""
    seeds = "; ".join(
        f"seed {r['seed']} {r['success']:.3f}" if r["status"] == "done" else f"seed {r['seed']} not run"
        for r in summary["per_seed"]
    )
    ppo = summary["ppo_equal_steps_mean_success"]
    ppo_text = (
        ""
        if ppo is None
        else f"; RecurrentPPO at equal env steps {ppo:.3f} (mean of {summary['ppo_equal_steps_seeds_done']})"
    )
    return (
        f"T-maze L = 100 headline (pre-registered, setting {summary['setting']['name']}, {summary['env_steps']} env "
        f"steps, target success >= {summary['target']['success_at_least']} on every seed): {seeds}: "
        f"{summary['verdict']}{ppo_text}.\n"
    )


@dataclass
class Args:
    preregister: bool = False
    """Write the plan from the side seeds (refuses to overwrite one) and stop."""
    seeds: list[int] = field(default_factory=list)
    """Seeds to run now (default: every seed of the plan); a seed outside the plan is refused."""
    skip_ppo: bool = False
    """Run only the agent's units."""
    summarize_only: bool = False
    """Only write summary.json from the units on disk."""
    dir: str = str(HEADLINE_DIR)
    """Folder of the plan, the units and the summary."""
    runs_root: str = "runs/incontext-tmaze-headline"
    """Checkpoint folders of the agent runs (a killed unit resumes from here)."""
    allow_uncommitted: bool = False
    """Run although the plan is not committed unchanged (tests only: a real headline needs the commit first)."""


def main(args: Args) -> None:
    set_torch_threads(1)
    root = Path(args.dir)
    plan_path = root / "preregistration.json"
    if args.preregister:
        if plan_path.exists():
            raise SystemExit(f"{plan_path} exists: a plan is written once (delete it only if no seed has run)")
        save_json(plan_path, build_preregistration(RESULTS))
        print(f"wrote {plan_path}; commit it before running the seeds")
        return
    plan = load_json(plan_path)
    if plan is None:
        raise SystemExit(f"no plan at {plan_path}; write one with --preregister and commit it first")
    if not args.summarize_only:
        if not args.allow_uncommitted and not committed_unchanged(plan_path):
            raise SystemExit(f"{plan_path} is not committed unchanged in git; commit the plan before any seed runs")
        check_plan(plan, RESULTS)
        seeds = args.seeds or list(plan["seeds"])
        configs = {seed: planned_config(plan, seed) for seed in seeds}  # refuses seeds outside the plan first
        for seed, cfg in configs.items():
            path = unit_path(root, "agent", seed)
            if load_json(path) is None:
                save_json(path, {"setting": plan["picked"], **run_agent(cfg, Path(args.runs_root) / f"seed{seed}")})
            done = load_json(path)
            assert done is not None
            print(f"seed {seed}: success {done['eval']['mean']:.3f} at {done['env_steps']} env steps", flush=True)
        if not args.skip_ppo:
            from meta.incontext.baseline import RecurrentPPOConfig

            grid = load_json(partial_path(RESULTS / "matched_partial", TASK, "ppo_grid"))
            if grid is None:
                raise SystemExit("RecurrentPPO's tuned settings (matched_partial/tmaze_100__ppo_grid.json) are missing")
            for seed, cfg in configs.items():
                path = unit_path(root, "ppo_equal_steps", seed)
                agent = load_json(unit_path(root, "agent", seed))
                if load_json(path) is None and agent is not None:
                    save_json(path, run_ppo(cfg, int(agent["env_steps"]), None, RecurrentPPOConfig(**grid["best"])))
    summary = headline_summary(root)
    assert summary is not None
    save_json(root / "summary.json", summary)
    print(f"verdict {summary['verdict']}: {summary['seeds_met']} of {len(summary['seeds'])} seeds at the target")


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
