"""In-context RL benchmark: the agent trained on the histories it acts with, RecurrentPPO at equal env steps and at
equal wall-clock, and the reference policies, all on the same evaluation tasks.

Full run (3 seeds per task, every task; each agent run is capped at an hour, BUDGETS). Cost per bandit or key-door
task: 3 agent runs + the RecurrentPPO grid (8 x a quarter of one run) + 3 equal-time runs + 3 equal-steps runs
(shorter), about 9 x 55 min; the T-maze stops once solved (minutes). In all about 25 core-hours, ~13 h on the shared
2-core machine with one process per core (the bandits run the ``whole_trial`` setting, docs/results/incontext.md):

    OMP_NUM_THREADS=1 nice -n 10 python experiments/incontext/matched.py --setting whole_trial \
        --tasks bandit_5x100 bandit_2x100 &
    OMP_NUM_THREADS=1 nice -n 10 python experiments/incontext/matched.py --tasks tmaze_100 keydoor
    OMP_NUM_THREADS=1 python experiments/incontext/matched.py --summarize-only

Per task, in this order, each piece written to ``results/matched_partial/<task>__<piece>[__seed<s>].json`` as soon as
it is done (a killed run loses at most the piece in progress; an agent run resumes from its checkpoint under
``--runs-root``, a RecurrentPPO run restarts):

1. ``references``: the matched references on the task's evaluation tasks (:mod:`meta.incontext.references`).
2. ``agent`` per seed: the ``--setting`` of :data:`experiments.incontext.matched_protocol.SETTINGS` (``amago``:
   :func:`~experiments.incontext.matched_protocol.amago_config`; ``whole_trial``:
   :func:`~experiments.incontext.matched_protocol.whole_trial_config`, the knobs the gate took back) at the env-step
   budget of :func:`~experiments.incontext.matched_protocol.budget` (``BUDGETS``, or the setting's own
   ``SETTING_BUDGETS``); greedy and sampled scores (of the EMA weights
   where the setting keeps them, with the online weights' greedy score beside), its learning curve and the measured
   history match. A piece on disk that was run with other settings stops the script (delete it, or pass its
   ``--partial-dir`` elsewhere) rather than being mixed in.
3. ``ppo_grid``: RecurrentPPO tuned on seed 0 over :data:`meta.incontext.baseline.RECURRENT_PPO_GRID`
   (LSTM 64/128 x 4/10 epochs x gamma 0.99/0.999, 8 settings), each trained for ``--grid-fraction`` of the agent's
   seed-0 training seconds and scored greedily on the first ``--grid-eval-tasks`` evaluation tasks. Tuning on the
   evaluation tasks favours RecurrentPPO, the conservative direction for a claim that the agent beats it.
4. ``ppo_equal_steps`` and ``ppo_equal_time`` per seed: the chosen settings for the agent's env steps, and for the
   agent's training seconds. ``--grid-settings`` and ``--ppo-pieces`` split these over processes (one per core: an
   equal-time piece measures wall-clock).

Then ``results/summary.json`` (``tasks.<task>.agent.mean`` greedy and ``.sampled_mean``,
``tasks.<task>.references.<name>``, ``tasks.<task>.target_met``; a task with missing pieces says
``"status": "incomplete"``; ``tmaze_headline`` and ``bandit_2x100_headline``: the pre-registered headlines on fresh
seeds of ``experiments/incontext/headline.py``, per seed and their verdicts, where a plan exists),
``results/summary.md`` (its table, then one line per headline) and ``results/summary.png`` (each seed's learning curve
against the target, the references and RecurrentPPO). The logic is :mod:`experiments.incontext.matched_protocol`'s.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.incontext.benchmark_parts import config_changed
from experiments.incontext.headline import BANDIT, TMAZE, headline_line, headline_summary
from experiments.incontext.matched_protocol import (
    SETTINGS,
    TASKS,
    agent_config,
    budget,
    load_json,
    matched_references,
    partial_path,
    ppo_budgets,
    run_agent,
    run_ppo,
    save_json,
    summarize,
    summary_table,
)
from meta.incontext.baseline import recurrent_ppo_grid
from rolloutlab.checkpoint import atomic_write_json, atomic_write_text
from rolloutlab.threads import set_torch_threads

RESULTS = Path(__file__).parent / "results"


@dataclass
class Args:
    tasks: list[str] = field(default_factory=lambda: list(TASKS))
    """Benchmark tasks to run (bandit_5x100, bandit_2x100, tmaze_100, keydoor)."""
    setting: str = "amago"
    """Agent settings by name (experiments.incontext.matched_protocol.SETTINGS: amago, whole_trial)."""
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    """Training seeds of the agent and of RecurrentPPO."""
    budget_scale: float = 1.0
    """Multiplies every env-step budget and time cap (matched_protocol.budget; a smaller machine, or a smoke run)."""
    eval_tasks: int | None = None
    """Evaluation tasks per task (default: experiments.incontext.matched_protocol.EVAL_TASKS, 1,000 for the bandits)."""
    grid_fraction: float = 0.25
    """Training seconds of each RecurrentPPO grid setting, as a fraction of the agent's seed-0 training seconds."""
    grid_eval_tasks: int = 200
    """Evaluation tasks that score a grid setting."""
    grid_settings: list[int] | None = None
    """Run only these RecurrentPPO grid settings (indices into meta.incontext.baseline.recurrent_ppo_grid()), to split
    the grid over processes (each with ``--seeds`` naming the grid's seed first); the choice, and the equal-steps and
    equal-time runs after it, wait until every setting's piece is on disk."""
    ppo_pieces: list[str] = field(default_factory=lambda: ["ppo_equal_steps", "ppo_equal_time"])
    """Which of RecurrentPPO's per-seed pieces to run, to split one seed's pieces over processes (equal-time pieces
    measure wall-clock: run no more processes than cores)."""
    skip_ppo: bool = False
    """Run only the references and the agent."""
    summarize_only: bool = False
    """Only merge the partial files into summary.json / summary.md."""
    partial_dir: str = str(RESULTS / "matched_partial")
    """Folder of the per-piece JSON files."""
    runs_root: str = "runs/incontext-matched"
    """Checkpoint folders of the agent runs (a killed run resumes from here)."""
    out: str = str(RESULTS)
    """Where summary.json and summary.md go."""
    tmaze_headline_dir: str = str(TMAZE.folder)
    """The pre-registered T-maze headline's folder (experiments/incontext/headline.py --task tmaze_100): its summary
    goes into summary.json under ``tmaze_headline`` when it has a plan."""
    bandit_headline_dir: str = str(BANDIT.folder)
    """The pre-registered bandit 2x100 headline's folder (experiments/incontext/headline.py --task bandit_2x100): its
    summary goes into summary.json under ``bandit_2x100_headline`` when it has a plan."""


def run_task(name: str, args: Args, root: Path) -> None:
    """Every piece of one benchmark task that is not on disk yet."""
    steps, minutes = budget(args.setting, name)
    steps, minutes = int(steps * args.budget_scale), minutes * args.budget_scale
    configs = {seed: agent_config(args.setting, name, seed, steps, minutes, args.eval_tasks) for seed in args.seeds}
    n_eval = configs[args.seeds[0]].eval_tasks
    path = partial_path(root, name, "references")
    if load_json(path) is None:
        refs = matched_references(name, n_eval)
        save_json(path, {
            "n_tasks": n_eval,
            "references": {k: {"mean": float(v.mean()), "stderr": float(v.std(ddof=1) / np.sqrt(len(v)))}
                           for k, v in refs.items()},
            "returns": {k: v.tolist() for k, v in refs.items()},
        })  # fmt: skip
    for seed, cfg in configs.items():
        path = partial_path(root, name, "agent", seed)
        if load_json(path) is None:
            run_dir = Path(args.runs_root) / f"{name}_{args.setting}_seed{seed}"
            save_json(path, {"setting": args.setting, **run_agent(cfg, run_dir)})
        run = load_json(path)
        assert run is not None
        if config_changed(run["config"], cfg):
            raise SystemExit(
                f"{path} was run with other settings (setting {run.get('setting', 'amago')!r}) than --setting "
                f"{args.setting!r} at this budget; delete it or use another --partial-dir"
            )
        print(f"{name} seed {seed}: greedy {run['eval']['mean']:.2f}, sampled {run['eval_sampled']['mean']:.2f}, "
              f"history match {run['history_match']['fraction']:.3f}", flush=True)  # fmt: skip
    if args.skip_ppo:
        return
    agent_runs = {seed: load_json(partial_path(root, name, "agent", seed)) for seed in args.seeds}
    grid_path = partial_path(root, name, "ppo_grid")
    if load_json(grid_path) is None:
        first = args.seeds[0]
        base = agent_runs[first]
        assert base is not None
        grid_configs = recurrent_ppo_grid()
        chosen = range(len(grid_configs)) if args.grid_settings is None else args.grid_settings
        for i in chosen:
            piece = partial_path(root, name, f"ppo_grid{i}")
            if load_json(piece) is None:
                cfg = dataclasses.replace(configs[first], eval_tasks=args.grid_eval_tasks)
                save_json(piece, run_ppo(cfg, None, args.grid_fraction * base["train_seconds"], grid_configs[i]))
        tried = [load_json(partial_path(root, name, f"ppo_grid{i}")) for i in range(len(grid_configs))]
        waiting = [i for i, piece in enumerate(tried) if piece is None]
        if waiting:
            print(f"{name}: RecurrentPPO grid settings {waiting} still to run; the choice waits for them", flush=True)
            return
        scores = [(piece["eval"]["mean"], i, piece["config"]) for i, piece in enumerate(tried) if piece is not None]
        best = max(scores, key=lambda s: (s[0], -s[1]))
        save_json(grid_path, {"best": best[2], "scores": [{"mean": m, "config": c} for m, _, c in scores]})
    grid = load_json(grid_path)
    assert grid is not None
    from meta.incontext.baseline import RecurrentPPOConfig

    best_config = RecurrentPPOConfig(**grid["best"])
    for seed, cfg in configs.items():
        agent = agent_runs[seed]
        assert agent is not None
        for method, (env_steps, max_seconds) in ppo_budgets(agent).items():
            path = partial_path(root, name, method, seed)
            if method in args.ppo_pieces and load_json(path) is None:
                save_json(path, run_ppo(cfg, env_steps, max_seconds, best_config))


def plot(summary: dict[str, Any], path: Path) -> None:
    """One panel per task: each agent seed's learning curve (greedy evaluations on the evaluation tasks), the target,
    the matched references and RecurrentPPO's means at equal env steps and at equal wall-clock."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = summary["tasks"]
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.6 * len(tasks), 3.8), squeeze=False)
    for ax, (name, entry) in zip(axes[0], tasks.items(), strict=True):
        for seed, curve in zip(summary["seeds"], (entry.get("agent") or {}).get("learning_curves", []), strict=False):
            ax.plot([r["env_steps"] for r in curve], [r["eval_return"] for r in curve], "o-", ms=3,
                    label=f"agent seed {seed}")  # fmt: skip
        for ref, value in entry.get("references", {}).items():
            ax.axhline(value, color="0.75", lw=0.8)
            ax.annotate(ref, (1.0, value), xycoords=("axes fraction", "data"), fontsize=6, ha="right", va="bottom")
        if entry.get("target") is not None:
            ax.axhline(entry["target"], color="k", ls=":", label="target")
        for method, style in (("ppo_equal_steps", "--"), ("ppo_equal_time", "-.")):
            if method in entry:
                ax.axhline(entry[method]["mean"], color="tab:purple", ls=style, label=f"RecurrentPPO {method[4:]}")
        ax.set_title(name)
        ax.set_xlabel("agent env steps")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6, loc="lower right")
    axes[0][0].set_ylabel("greedy return (success for the T-maze)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(args: Args) -> None:
    set_torch_threads(1)
    root = Path(args.partial_dir)
    if not args.summarize_only:
        for name in args.tasks:
            if name not in TASKS:
                raise SystemExit(f"unknown task {name!r}; known: {list(TASKS)}")
        if args.setting not in SETTINGS:
            raise SystemExit(f"unknown setting {args.setting!r}; known: {list(SETTINGS)}")
        known_pieces = list(ppo_budgets({"env_steps": 0, "train_seconds": 0.0}))
        for piece in args.ppo_pieces:
            if piece not in known_pieces:
                raise SystemExit(f"unknown RecurrentPPO piece {piece!r}; known: {known_pieces}")
        for name in args.tasks:
            run_task(name, args, root)
    summary = summarize(root, args.seeds)
    lines = []
    for headline, folder in ((TMAZE, args.tmaze_headline_dir), (BANDIT, args.bandit_headline_dir)):
        result = headline_summary(Path(folder))
        if result is not None:
            summary[headline.summary_key] = result
            lines.append("\n" + headline_line(result))
    summary["args"] = dataclasses.asdict(args)
    out = Path(args.out)
    atomic_write_json(out / "summary.json", summary)
    table = summary_table(summary) + "".join(lines)
    atomic_write_text(out / "summary.md", table)
    plot(summary, out / "summary.png")
    print(table)


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
