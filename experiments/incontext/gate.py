"""Gate for issue 18: does the new training (:func:`experiments.incontext.matched_protocol.amago_config`) beat issue 7's
setting (:func:`~experiments.incontext.matched_protocol.issue7_config`) in one short run, same seed, same env-step
budget, side by side?

Both agents train on the same task stream (same seed) for the same env steps, then play the same evaluation tasks
(1,000 for the bandits) greedily and sampling from their policy; the matched references play those tasks too. The new
setting is evaluated with its EMA weights (its online weights are reported beside them). Each run checkpoints in
``runs/incontext-gate/`` and resumes after a kill; the result is ``results/gate.json``.

    OMP_NUM_THREADS=1 nice -n 5 python experiments/incontext/gate.py --task bandit_5x100 --env-steps 60000

``--ema-decay``, ``--tau``, ``--lr-final-fraction`` and any ``--train-override FIELD=VALUE`` /
``--agent-override FIELD=VALUE`` (with their own ``--label`` and ``--out``) override single knobs of the new setting
for an ablation; issue 7's run then resumes from its checkpoint and is only re-evaluated. ``--no-compare-issue7`` runs
only the new setting (a full-budget check of one candidate against the matched references).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tyro
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.incontext.matched_protocol import SETTINGS, issue7_config, matched_references, run_agent
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.statistics import paired_difference
from rolloutlab.threads import set_torch_threads

RESULTS = Path(__file__).parent / "results"


@dataclass
class Args:
    task: str = "bandit_5x100"
    """Benchmark task (experiments.incontext.matched_protocol.TASKS)."""
    seed: int = 0
    """Training seed of both runs."""
    env_steps: int = 32_000
    """Env-step budget of each run (the same for both)."""
    eval_tasks: int = 1000
    """Evaluation tasks (the same for both runs and the references)."""
    setting: str = "amago"
    """The new setting's base (matched_protocol.SETTINGS: amago, whole_trial) that the overrides change."""
    ema_decay: float | None = None
    """Override of the new setting's EMA decay (0: evaluate the online weights); ``None`` keeps the setting's."""
    tau: float | None = None
    """Override of the new setting's target-critic Polyak rate; ``None`` keeps the setting's."""
    lr_final_fraction: float | None = None
    """Override of the new setting's final learning-rate fraction (1.0: constant after warm-up)."""
    train_override: list[str] = dataclasses.field(default_factory=list)
    """``FIELD=VALUE`` overrides of the new setting's TrainConfig (YAML values), e.g. ``exploration=per_actor``."""
    agent_override: list[str] = dataclasses.field(default_factory=list)
    """``FIELD=VALUE`` overrides of the new setting's AgentConfig (YAML values), e.g. ``n_bins=33``."""
    compare_issue7: bool = True
    """Also train issue 7's setting and report the paired difference; off: the new setting and the references only."""
    label: str = "issue18"
    """Name of the new setting's run (its run folder and key in the result); give overridden variants their own."""
    runs_root: str = "runs/incontext-gate"
    """Checkpoint folders of the two runs (a killed gate resumes from here)."""
    out: str = str(RESULTS / "gate.json")
    """Where the result goes."""


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["a=1", "b=per_actor"]`` → ``{"a": 1, "b": "per_actor"}`` (values read as YAML scalars)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"override {item!r} is not FIELD=VALUE")
        out[key] = yaml.safe_load(value)
    return out


def main(args: Args) -> None:
    set_torch_threads(1)
    if args.setting not in SETTINGS:
        raise SystemExit(f"unknown setting {args.setting!r}; known: {list(SETTINGS)}")
    settings = {"issue7": issue7_config, args.label: SETTINGS[args.setting]}
    if not args.compare_issue7:
        del settings["issue7"]
    overrides = {k: v for k in ("ema_decay", "tau", "lr_final_fraction") if (v := getattr(args, k)) is not None}
    if args.compare_issue7 and "keydoor_size" in parse_overrides(args.train_override):
        # Issue 7's run would play the 8x8 grid: not a comparison.
        raise SystemExit("keydoor_size changes the task; gate it alone with --no-compare-issue7")
    out: dict[str, object] = {"args": dataclasses.asdict(args), "runs": {}}
    returns = {}
    for label, make in settings.items():
        # One evaluation at the end only: the gate's cost is the two trainings.
        cfg = dataclasses.replace(
            make(args.task, args.seed, args.env_steps, None, args.eval_tasks), eval_every_steps=10**9
        )
        if label != "issue7":
            agent = dataclasses.replace(cfg.agent, **overrides, **parse_overrides(args.agent_override))
            cfg = dataclasses.replace(cfg, agent=agent, **parse_overrides(args.train_override))
        run = run_agent(cfg, Path(args.runs_root) / f"{args.task}_{label}_seed{args.seed}")
        returns[label] = np.asarray(run.pop("returns"))
        out["runs"][label] = run  # type: ignore[index]
        print(
            f"{label}: greedy {run['eval']['mean']:.2f} ± {run['eval']['stderr']:.2f}, sampled "
            f"{run['eval_sampled']['mean']:.2f}, {run['env_steps']} env steps, {run['updates']} updates, "
            f"{run['train_seconds']:.0f} s training, history match {run['history_match']['fraction']:.3f}",
            flush=True,
        )
    refs = matched_references(args.task, args.eval_tasks, keydoor_size=cfg.keydoor_size)
    out["references"] = {k: float(v.mean()) for k, v in refs.items()}
    if args.compare_issue7:
        # Paired over evaluation tasks (both runs played the same tasks): mean difference, 95 % bootstrap interval.
        diff = paired_difference(returns[args.label], returns["issue7"], rng=0)
        out[f"paired_difference_{args.label}_minus_issue7"] = {k: float(v) for k, v in diff._asdict().items()}
    atomic_write_json(Path(args.out), out)
    print(json.dumps({k: v for k, v in out.items() if k == "references" or k.startswith("paired_difference")}))


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
