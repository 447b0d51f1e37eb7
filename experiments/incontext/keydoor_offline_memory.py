"""Does the agent's critic learn to use its memory of a trial, offline, from random play on random layouts?

The memory half of the key-door's learning, with exploration taken out: a replay of random-play trials on random
5x5 layouts (reset seeds apart from the evaluation tasks'), the key-door gate's Transformer, and the agent's own loss
(:meth:`~meta.incontext.agent.InContextAgent.loss` through :meth:`~meta.incontext.trainer.InContextTrainer.update`)
under the variants of :mod:`experiments.incontext.keydoor_fixed_layout` (minus its memory-free encoder). Every
``--probe-every`` updates :func:`~experiments.incontext.keydoor_diagnose.critic_probe` scores the critic on the first
``--probe-tasks`` evaluation tasks: the return of argmax-Q play, and the share of random-play steps on a key or door
that the trial has revealed where the critic's argmax heads toward it (beside chance).

    OMP_NUM_THREADS=1 python experiments/incontext/keydoor_offline_memory.py

Writes ``--out`` (default ``results/keydoor_offline_memory.json``) and its markdown table beside it (``.md``).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.incontext.keydoor_diagnose import critic_probe
from experiments.incontext.keydoor_fixed_layout import BASE, VARIANTS
from experiments.incontext.matched_protocol import agent_config
from meta.incontext.tasks import task_env_fns
from meta.incontext.trainer import InContextTrainer, run_rollouts, task_kwargs
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.threads import set_torch_threads

RESULTS = Path(__file__).parent / "results"
#: Reset seeds of the replay's layouts start here (the evaluation tasks' start at 10,000,000).
REPLAY_SEED_BASE = 5_000_000


@dataclass
class Args:
    task: str = "keydoor_5x5"
    """Key-door shape (matched_protocol.GATE_TASKS)."""
    setting: str = "amago_keydoor_short"
    """The agent setting whose AgentConfig (and Transformer) the variants change."""
    replay_trials: int = 600
    """Random-play trials in the replay, one layout each."""
    updates: int = 8000
    """Updates per variant."""
    probe_every: int = 2000
    """Updates between critic probes."""
    probe_tasks: int = 50
    """Evaluation tasks of each probe."""
    variants: list[str] = dataclasses.field(default_factory=lambda: ["twohot_actor", "scalar_argmax_q"])
    """Variants (keydoor_fixed_layout.VARIANTS)."""
    inputs: list[str] = dataclasses.field(default_factory=lambda: ["cell"])
    """Observations: ``coordinates`` and/or ``cell``."""
    seed: int = 0
    """Seeds the weights, the random play and the batch draws."""
    out: str = str(RESULTS / "keydoor_offline_memory.json")
    """Result JSON."""


def run_variant(args: Args, name: str, cell: bool) -> dict[str, Any]:
    """Train one variant on the random-play replay; the critic probes along the way."""
    base = agent_config(args.setting, args.task, args.seed, 16_000, None, args.probe_tasks)
    overrides = {key: value for key, value in {**BASE, **VARIANTS[name]}.items() if key != "encoder"}
    cfg = dataclasses.replace(base, agent=dataclasses.replace(base.agent, **overrides), keydoor_cell_input=cell)
    trainer = InContextTrainer(cfg, None)
    n_envs = 50
    venv = gym.vector.SyncVectorEnv(task_env_fns(cfg.task, n_envs, **task_kwargs(cfg)))
    rng = np.random.default_rng(args.seed)
    while len(trainer.replay) < args.replay_trials:
        seeds = [REPLAY_SEED_BASE + len(trainer.replay) + i for i in range(n_envs)]
        for trajectory in run_rollouts(trainer.agent, venv, seeds, np.ones(n_envs), rng):
            trainer.replay.add(trajectory)
    venv.close()
    probes: list[dict[str, Any]] = []
    start = time.perf_counter()
    for _ in range(args.updates // args.probe_every):
        trainer.update(args.probe_every)
        probe = critic_probe(trainer.agent, cfg, args.probe_tasks)
        probes.append({"updates": trainer.updates, "q_greedy": probe["q_greedy"], **probe["memory_use"]})
    return {
        "variant": name,
        "input": "cell" if cell else "coordinates",
        "overrides": overrides,
        "probes": probes,
        "seconds": time.perf_counter() - start,
    }


def table(result: dict[str, Any]) -> str:
    """The markdown table of a result: one row per variant, input and probe."""
    lines = [
        "| variant | input | updates | argmax-Q return | critic heads toward a revealed target (chance) |",
        "|---|---|---|---|---|",
    ]
    for run in result["runs"]:
        for probe in run["probes"]:
            lines.append(
                f"| `{run['variant']}` | {run['input']} | {probe['updates']:,} | {probe['q_greedy']:.2f} | "
                f"{probe['critic_toward']:.2f} ({probe['chance']:.2f}) |"
            )
    lines += ["", f"Replay: {result['args']['replay_trials']} random-play trials on random layouts."]
    return "\n".join(lines) + "\n"


def main(args: Args) -> None:
    set_torch_threads(1)
    runs = []
    for name in args.variants:
        for kind in args.inputs:
            run = run_variant(args, name, kind == "cell")
            runs.append(run)
            print(name, run["input"], run["probes"], f"{run['seconds']:.0f} s", flush=True)
            result = {"args": dataclasses.asdict(args), "runs": runs}
            atomic_write_json(Path(args.out), result)
            Path(args.out).with_suffix(".md").write_text(table(result))


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
