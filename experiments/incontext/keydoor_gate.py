"""Gate of the dark key-door: on a smaller key-door, does the agent exceed half of the oracle on every seed?

Before the 8x8 key-door's hour-long runs, the agent trains on a cheaper version of the same task (by default
``keydoor_5x5``: a 5x5 grid, 20-step inner episodes, 100-step trials; ``matched_protocol.GATE_TASKS``) under one or
more named settings (``matched_protocol.SETTINGS``, e.g. ``amago_keydoor``). One unit is one setting, one env-step
budget and one seed: it trains (checkpointing under ``--runs-root``, so a killed unit resumes), is scored greedily on
the evaluation tasks along the way (the learning curve) and at the end, and writes one small JSON under
``--unit-dir``; a unit whose JSON exists is skipped. The references (random, the memory-only explorer and the oracle
of :mod:`meta.incontext.references`) play the same evaluation tasks. ``--out`` then collects every unit of the task
found in ``--unit-dir`` (every setting and budget ever tried) with its per-seed scores, learning curves and the
verdict: a setting at a budget passes when its greedy score exceeds ``--fraction`` of the oracle's on each of
``--required-seeds`` seeds.

    OMP_NUM_THREADS=1 nice -n 10 python experiments/incontext/keydoor_gate.py --settings amago_keydoor --seeds 0 1 2

``--variant NAME`` with ``--train-override FIELD=VALUE`` / ``--agent-override FIELD=VALUE`` (YAML values, as in
``gate.py``) tries one setting with single knobs changed; its units are named ``<setting>+<NAME>`` and record the
overrides, so every setting tried stays in ``--out``, passed or not. Every unit also checks the critic at its end:
its Q-values of replayed actions against the Monte-Carlo returns that followed them (``value_check.value_check``),
and probes it (``keydoor_diagnose.critic_probe``): the return of its own greedy play (argmax-Q), and on random play
the share of steps where the actor's and the critic's greedy action head for a key or door the trial has revealed
(beside chance), which shows whether the agent has begun to use its memory before its score moves.

Seeds can run in parallel as separate processes (``--seeds 0``, ``--seeds 1``, ...): each writes its own unit and
rewrites ``--out`` from the units present when it ends; ``--collect-only`` rewrites it without running anything.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.incontext.gate import parse_overrides
from experiments.incontext.keydoor_diagnose import critic_probe
from experiments.incontext.matched_protocol import (
    GATE_TASKS,
    SETTINGS,
    agent_config,
    matched_references,
    run_agent,
    task_fields,
)
from experiments.incontext.value_check import value_check
from meta.incontext.config import TrainConfig
from meta.incontext.trainer import InContextTrainer
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.statistics import mean_with_stderr
from rolloutlab.threads import set_torch_threads

RESULTS = Path(__file__).parent / "results"


@dataclass
class Args:
    task: str = "keydoor_5x5"
    """Gate task (matched_protocol.GATE_TASKS): the key-door's grid, episode and trial lengths; ``keydoor``, the
    benchmark's 8x8 key-door itself, gives units of the same form for a first look at a setting there."""
    settings: list[str] = dataclasses.field(default_factory=lambda: ["amago_keydoor"])
    """Agent settings to train (matched_protocol.SETTINGS), one unit per setting and seed."""
    seeds: list[int] = dataclasses.field(default_factory=lambda: [0, 1, 2])
    """Training seeds of this invocation."""
    env_steps: int = 80_000
    """Env-step budget of one unit."""
    max_minutes: float | None = 55.0
    """Wall-clock cap of one unit's training (the run stops early and says so); ``None``: none."""
    curve_points: int = 5
    """Greedy evaluations along the run (every ``env_steps / curve_points`` steps; the last is the final score)."""
    eval_tasks: int = 200
    """Evaluation tasks (the same for every unit and the references)."""
    fraction: float = 0.5
    """A seed passes when its greedy score exceeds this fraction of the oracle's."""
    required_seeds: int = 3
    """Seeds that must all pass for a setting to pass the gate."""
    unit_dir: str = str(RESULTS / "keydoor_gate")
    """One JSON per finished unit (and the references), written atomically; finished units are skipped."""
    runs_root: str = "runs/incontext-keydoor-gate"
    """Checkpoint folders of the units (a killed unit resumes from here)."""
    out: str = str(RESULTS / "keydoor_gate.json")
    """The gate's result: every setting tried on the task, per-seed scores, references, curves, verdict (and its
    markdown table beside it, ``.md``)."""
    collect_only: bool = False
    """Run no unit: only rewrite ``--out`` and its table from the units already in ``--unit-dir``."""
    variant: str = ""
    """Name of the overridden variant (units are named ``<setting>+<variant>``); needed with any override."""
    train_override: list[str] = dataclasses.field(default_factory=list)
    """``FIELD=VALUE`` overrides of the setting's TrainConfig (YAML values), e.g. ``updates_per_step=0.5``."""
    agent_override: list[str] = dataclasses.field(default_factory=list)
    """``FIELD=VALUE`` overrides of the setting's AgentConfig (YAML values), e.g. ``tau=0.02``."""
    value_trials: int = 32
    """Replayed trials of each unit's closing value check."""
    probe_tasks: int = 50
    """Evaluation tasks of each unit's closing critic probe (argmax-Q play, heading for remembered targets)."""


def unit_label(setting: str, variant: str) -> str:
    """A unit's setting label: the setting's name, ``+<variant>`` when knobs are overridden."""
    return f"{setting}+{variant}" if variant else setting


def unit_path(unit_dir: Path, task: str, setting: str, env_steps: int, seed: int) -> Path:
    """``unit_dir/<task>__<setting>__<env_steps>steps__seed<seed>.json``: one finished unit (a unit of another budget
    is another unit)."""
    return unit_dir / f"{task}__{setting}__{env_steps}steps__seed{seed}.json"


def references(args: Args) -> dict[str, Any]:
    """The references' mean returns on the gate task's evaluation tasks (computed once, then read back)."""
    path = Path(args.unit_dir) / f"{args.task}__references.json"
    if path.exists():
        return json.loads(path.read_text())
    fields = task_fields(args.task)
    # The benchmark's key-door names only its task; its grid and lengths are TrainConfig's defaults.
    cfg = TrainConfig(**fields)
    refs = matched_references(
        "keydoor", args.eval_tasks, keydoor_size=cfg.keydoor_size,
        keydoor_episode_steps=cfg.keydoor_episode_steps, keydoor_trial_steps=cfg.keydoor_trial_steps,
    )  # fmt: skip
    stats: dict[str, dict[str, float]] = {}
    for name, returns in refs.items():
        mean, stderr = mean_with_stderr(returns)
        stats[name] = {"mean": mean, "stderr": stderr}
    out = {"task": fields, "n_tasks": args.eval_tasks, "references": stats}
    atomic_write_json(path, out)
    return out


def unit_config(args: Args, setting: str, seed: int) -> Any:
    """The TrainConfig of one unit: the setting at the unit's budget, with the variant's overrides."""
    cfg = agent_config(setting, args.task, seed, args.env_steps, args.max_minutes, args.eval_tasks)
    agent = dataclasses.replace(cfg.agent, **parse_overrides(args.agent_override))
    cfg = dataclasses.replace(cfg, agent=agent, **parse_overrides(args.train_override))
    return dataclasses.replace(cfg, eval_every_steps=max(args.env_steps // args.curve_points, 1))


def run_unit(args: Args, setting: str, seed: int) -> dict[str, Any]:
    """Train and score one setting on one seed (resuming from its checkpoint), then check its critic against
    Monte-Carlo returns on its own replay; the unit's JSON content."""
    cfg = unit_config(args, setting, seed)
    label = unit_label(setting, args.variant)
    run_dir = Path(args.runs_root) / f"{args.task}_{label}_{args.env_steps}_seed{seed}"
    start = time.perf_counter()
    result = run_agent(cfg, run_dir)
    result.pop("returns")
    trainer = InContextTrainer(cfg, run_dir, resume=True)  # the finished run, from its last checkpoint
    critic = value_check(trainer, args.value_trials, np.random.default_rng(seed))
    probe = critic_probe(trainer.eval_agent, cfg, min(args.probe_tasks, args.eval_tasks))
    return {
        "task": args.task,
        "setting": label,
        "base_setting": setting,
        "overrides": {"train": parse_overrides(args.train_override), "agent": parse_overrides(args.agent_override)},
        "seed": seed,
        "value_check": critic,
        "critic_probe": probe,
        "greedy": result["eval"],
        "sampled": result["eval_sampled"],
        "online": result.get("eval_online"),
        "learning_curve": result["history"],
        "env_steps": result["env_steps"],
        "updates": result["updates"],
        "stopped_by_time_cap": result["stopped_by_time_cap"],
        "train_seconds": result["train_seconds"],
        "unit_seconds": time.perf_counter() - start,
        "history_match": result["history_match"]["fraction"],
        "config": result["config"],
    }


def collect(args: Args, refs: dict[str, Any]) -> dict[str, Any]:
    """Every unit of ``args.task`` in ``args.unit_dir``, grouped by setting and budget (key ``<setting>_<env_steps>``),
    with each group's verdict."""
    oracle = refs["references"]["oracle"]["mean"]
    threshold = args.fraction * oracle
    settings: dict[str, Any] = {}
    for path in sorted(Path(args.unit_dir).glob(f"{args.task}__*__seed*.json")):
        unit = json.loads(path.read_text())
        budget = int(unit["config"]["total_env_steps"])
        entry = settings.setdefault(
            f"{unit['setting']}_{budget}",
            {"setting": unit["setting"], "overrides": unit.get("overrides"), "env_step_budget": budget, "seeds": {}},
        )
        critic = unit.get("value_check")
        entry["seeds"][str(unit["seed"])] = {
            "greedy": unit["greedy"]["mean"],
            "greedy_stderr": unit["greedy"]["stderr"],
            "sampled": unit["sampled"]["mean"],
            "fraction_of_oracle": unit["greedy"]["mean"] / oracle,
            "passed": bool(unit["greedy"]["mean"] > threshold),
            "learning_curve": unit["learning_curve"],
            "env_steps": unit["env_steps"],
            "updates": unit["updates"],
            "train_seconds": unit["train_seconds"],
            "stopped_by_time_cap": unit["stopped_by_time_cap"],
            # The critic at the unit's end: correlation of Q(replayed action) with the Monte-Carlo return, per discount.
            "critic_correlation": None
            if critic is None
            else {g: v["correlation"] for g, v in critic["per_discount"].items()},
            # Mean Q of the replayed actions over the mean Monte-Carlo return, per discount (in the config's order).
            "critic_size_ratio": None if critic is None else [v["size_ratio"] for v in critic["per_discount"].values()],
            "policy_mean_max_prob": None if critic is None else critic["policy_mean_max_prob"],
            # The critic's own greedy play, and how often actor and critic head for a remembered key or door.
            "critic_probe": unit.get("critic_probe"),
        }
    for entry in settings.values():
        seeds = entry["seeds"].values()
        entry["seeds_passed"] = sum(s["passed"] for s in seeds)
        entry["seeds_run"] = len(entry["seeds"])
        entry["mean_greedy"] = float(np.mean([s["greedy"] for s in seeds]))
        entry["passed"] = entry["seeds_passed"] >= args.required_seeds
        # The rule asks every one of the required seeds to pass: one failed seed settles a setting as a miss.
        failed = entry["seeds_run"] > entry["seeds_passed"]
        entry["decided"] = entry["passed"] or failed or entry["seeds_run"] >= args.required_seeds
    if any(e["passed"] for e in settings.values()):
        verdict = "pass"
    elif settings and all(e["decided"] for e in settings.values()):
        verdict = "fail"
    else:
        verdict = "incomplete"
    return {
        "task": args.task,
        "task_fields": GATE_TASKS.get(args.task, task_fields(args.task)),
        "eval_tasks": refs["n_tasks"],
        "references": {k: v["mean"] for k, v in refs["references"].items()},
        "rule": f"greedy score > {args.fraction} * oracle on {args.required_seeds} of {args.required_seeds} seeds",
        "threshold": threshold,
        "settings": settings,
        "verdict": verdict,
    }


def _correlations(per_discount: dict[str, float | None] | None) -> str:
    if not per_discount:
        return "—"
    return " / ".join("—" if v is None else f"{v:.2f}" for v in per_discount.values())


def _ratios(ratios: list[float] | None) -> str:
    return "—" if not ratios else " / ".join(f"{v:.2f}" for v in ratios)


def _probe(probe: dict[str, Any] | None) -> tuple[str, str]:
    if not probe:
        return "—", "—"
    use = probe["memory_use"]
    return f"{probe['q_greedy']:.2f}", f"{use['actor_toward']:.2f} / {use['critic_toward']:.2f} ({use['chance']:.2f})"


def gate_table(result: dict[str, Any]) -> str:
    """The markdown table of :func:`collect`'s result: one row per setting and seed, then the references and verdict."""
    lines = [
        "| setting | seed | greedy (± s.e.) | sampled | fraction of the oracle "
        "| greedy along the run (env steps: score) | env steps | updates | training s | critic corr. per discount "
        "| critic Q / MC return per discount | argmax-Q greedy | toward a remembered target: actor / critic (chance) "
        "| passed |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in result["settings"].values():
        setting = entry["setting"]
        for seed, row in sorted(entry["seeds"].items(), key=lambda item: int(item[0])):
            curve = ", ".join(f"{p['env_steps']:,}: {p['eval_return']:.2f}" for p in row["learning_curve"])
            capped = " (time cap)" if row["stopped_by_time_cap"] else ""
            q_greedy, toward = _probe(row.get("critic_probe"))
            lines.append(
                f"| `{setting}` | {seed} | {row['greedy']:.2f} ± {row['greedy_stderr']:.2f} | {row['sampled']:.2f} | "
                f"{row['fraction_of_oracle']:.3f} | {curve} | {row['env_steps']:,}{capped} | {row['updates']:,} | "
                f"{row['train_seconds']:.0f} | {_correlations(row.get('critic_correlation'))} | "
                f"{_ratios(row.get('critic_size_ratio'))} | {q_greedy} | {toward} | "
                f"{'yes' if row['passed'] else 'no'} |"
            )
    refs = ", ".join(f"{name} {value:.2f}" for name, value in result["references"].items())
    lines += [
        "",
        f"References on the same {result['eval_tasks']} tasks: {refs}. Rule: {result['rule']} "
        f"(threshold {result['threshold']:.2f}). Verdict: **{result['verdict']}**.",
    ]
    return "\n".join(lines) + "\n"


def main(args: Args) -> None:
    set_torch_threads(1)
    unknown = [s for s in args.settings if s not in SETTINGS]
    if unknown:
        raise SystemExit(f"unknown setting(s) {unknown}; known: {list(SETTINGS)}")
    if args.task not in [*GATE_TASKS, "keydoor"]:
        raise SystemExit(f"unknown gate task {args.task!r}; known: {[*GATE_TASKS, 'keydoor']}")
    unit_dir = Path(args.unit_dir)
    unit_dir.mkdir(parents=True, exist_ok=True)
    refs = references(args)
    print(f"references on {args.task}: " + ", ".join(f"{k} {v['mean']:.2f}" for k, v in refs["references"].items()))
    if (args.train_override or args.agent_override) and not args.variant:
        raise SystemExit("--train-override / --agent-override change the setting; name the variant with --variant")
    for setting in [] if args.collect_only else args.settings:
        for seed in args.seeds:
            path = unit_path(unit_dir, args.task, unit_label(setting, args.variant), args.env_steps, seed)
            if path.exists():
                print(f"{path.name}: done, skipped", flush=True)
                continue
            unit = run_unit(args, setting, seed)
            atomic_write_json(path, unit)
            curve = ", ".join(f"{row['env_steps']}: {row['eval_return']:.2f}" for row in unit["learning_curve"])
            print(
                f"{setting} seed {seed}: greedy {unit['greedy']['mean']:.2f} (oracle "
                f"{refs['references']['oracle']['mean']:.2f}), sampled {unit['sampled']['mean']:.2f}, "
                f"{unit['updates']} updates, {unit['train_seconds']:.0f} s; curve {curve}",
                flush=True,
            )
    result = collect(args, refs)
    atomic_write_json(Path(args.out), result)
    Path(args.out).with_suffix(".md").write_text(gate_table(result))
    print(json.dumps({k: result[k] for k in ("references", "threshold", "verdict")}))


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
