"""Can the in-context agent's critic and actor learn one fixed key-door layout, offline, from random play?

A check of the learning machinery with memory taken out of the problem: every trial has the same start, key and door
(one layout seed), so a memory-free network can play it optimally, and the replay is random play, so every
state-action pair is covered and exploration plays no part. Each variant trains the agent's own loss
(:meth:`~meta.incontext.agent.InContextAgent.loss`, through :meth:`~meta.incontext.trainer.InContextTrainer.update`)
on the same replay from the same initial weights and is scored by its greedy play of the layout every
``--eval-every`` updates, beside the oracle's return on the same layout. A variant is a named set of
``AgentConfig`` overrides on top of the key-door gate's agent (``matched_protocol.SETTINGS``), and runs with the
scaled coordinates and with the one-hot cell as input.

    OMP_NUM_THREADS=1 python experiments/incontext/keydoor_fixed_layout.py

Writes ``--out`` (default ``results/keydoor_fixed_layout.json``): per variant and input, the greedy return along
training, the updates to reach ``--solved-fraction`` of the oracle (``None`` if never) and the seconds taken; and its
markdown table beside it (``.md``).
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
from envs.metarl.keydoor import DarkKeyDoorEnv
from envs.metarl.references import keydoor_oracle_action
from experiments.incontext.matched_protocol import agent_config, task_fields
from meta.incontext.tasks import task_env_fns
from meta.incontext.trainer import InContextTrainer, run_rollouts, task_kwargs
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.threads import set_torch_threads

RESULTS = Path(__file__).parent / "results"

#: The knobs of the key-door gate's best two-hot variant (``keydoor_gate_short.md``), the base of every variant.
BASE = {
    "encoder": "memory_free",
    "value_mean": "real",
    "critic_init": "lowest",
    "tau": 0.02,
    "gammas": [0.9, 0.99],
    "lr_final_fraction": 1.0,
    "ema_decay": 0.0,
}
SCALAR = {"critic_head": "scalar", "critic_init": "uniform", "reward_scale": 1.0}
#: Variants: AgentConfig overrides on top of :data:`BASE`.
VARIANTS: dict[str, dict[str, Any]] = {
    "twohot_actor": {},
    "twohot_argmax_q": {"critic_target": "max", "policy": "critic"},
    "scalar_actor": SCALAR,
    "scalar_actor_max_target": {**SCALAR, "critic_target": "max"},
    "scalar_actor_max_target_entropy0.1": {**SCALAR, "critic_target": "max", "entropy_coef": 0.1},
    "scalar_argmax_q": {**SCALAR, "critic_target": "max", "policy": "critic"},
}


@dataclass
class Args:
    task: str = "keydoor_5x5"
    """Key-door shape (matched_protocol.GATE_TASKS)."""
    setting: str = "amago_keydoor_short"
    """The agent setting whose AgentConfig the variants change."""
    layout_seed: int = 123
    """Reset seed of the one layout every trial uses."""
    replay_trials: int = 120
    """Random-play trials in the replay."""
    updates: int = 3000
    """Updates per variant."""
    eval_every: int = 500
    """Updates between greedy evaluations."""
    solved_fraction: float = 0.8
    """A variant solves the layout when its greedy return reaches this fraction of the oracle's."""
    variants: list[str] = dataclasses.field(default_factory=lambda: list(VARIANTS))
    """Variants to run (:data:`VARIANTS`)."""
    inputs: list[str] = dataclasses.field(default_factory=lambda: ["coordinates", "cell"])
    """Observations: ``coordinates`` (scaled x, y) and/or ``cell`` (plus the one-hot cell)."""
    seed: int = 0
    """Seeds the weights, the replay's random play and the batch draws."""
    out: str = str(RESULTS / "keydoor_fixed_layout.json")
    """Result JSON."""


def oracle_return(fields: dict[str, Any], layout_seed: int) -> float:
    """The oracle's total reward on the layout (it knows the key and the door)."""
    env = DarkKeyDoorEnv(fields["keydoor_size"], fields["keydoor_episode_steps"], fields["keydoor_trial_steps"])
    env.reset(seed=layout_seed)
    total, done = 0.0, False
    while not done:
        _, reward, done, _, _ = env.step(keydoor_oracle_action(env))
        total += float(reward)
    return total


def run_variant(args: Args, name: str, cell: bool, oracle: float) -> dict[str, Any]:
    """Train one variant on the fixed layout's random-play replay; its greedy return along the way."""
    # The setting's config at the gate's 16,000-step budget: its update-counted schedules (warm-up) as in the gate.
    base = agent_config(args.setting, args.task, args.seed, 16_000, None, 1)
    agent = dataclasses.replace(base.agent, **{**BASE, **VARIANTS[name]})
    cfg = dataclasses.replace(base, agent=agent, keydoor_cell_input=cell)
    trainer = InContextTrainer(cfg, None)  # seeds torch: every variant starts from its own seeded weights
    n_envs = 12
    venv = gym.vector.SyncVectorEnv(task_env_fns(cfg.task, n_envs, **task_kwargs(cfg)))
    rng = np.random.default_rng(args.seed)
    random_play = np.ones(n_envs)
    while len(trainer.replay) < args.replay_trials:
        for trajectory in run_rollouts(trainer.agent, venv, [args.layout_seed] * n_envs, random_play, rng):
            trainer.replay.add(trajectory)
    curve: list[dict[str, float]] = []
    start = time.perf_counter()
    for _ in range(args.updates // args.eval_every):
        trainer.update(args.eval_every)
        # Greedy play is deterministic: every copy plays the same trial.
        greedy = run_rollouts(trainer.agent, venv, [args.layout_seed] * n_envs, None, rng)
        curve.append({"updates": trainer.updates, "greedy": float(greedy[0].rewards.sum())})
    venv.close()
    solved = next((p["updates"] for p in curve if p["greedy"] >= args.solved_fraction * oracle), None)
    return {
        "variant": name,
        "input": "cell" if cell else "coordinates",
        "overrides": {**BASE, **VARIANTS[name]},
        "curve": curve,
        "final_greedy": curve[-1]["greedy"],
        "updates_to_solve": solved,
        "seconds": time.perf_counter() - start,
    }


def table(result: dict[str, Any]) -> str:
    """The markdown table of a result: one row per variant and input."""
    lines = [
        "| variant | input | greedy return every 500 updates | updates to solve | seconds |",
        "|---|---|---|---|---|",
    ]
    for run in result["runs"]:
        curve = ", ".join(f"{p['greedy']:.0f}" for p in run["curve"])
        solved = "never" if run["updates_to_solve"] is None else f"{run['updates_to_solve']:,}"
        lines.append(f"| `{run['variant']}` | {run['input']} | {curve} | {solved} | {run['seconds']:.0f} |")
    args = result["args"]
    lines += [
        "",
        f"Oracle on the layout: {result['oracle']:.0f}. Solved: greedy return >= {args['solved_fraction']} x the "
        f"oracle's. {args['replay_trials']} random-play trials in the replay, seed {args['seed']}.",
    ]
    return "\n".join(lines) + "\n"


def main(args: Args) -> None:
    set_torch_threads(1)
    fields = task_fields(args.task)
    oracle = oracle_return(fields, args.layout_seed)
    runs = []
    for name in args.variants:
        for kind in args.inputs:
            run = run_variant(args, name, kind == "cell", oracle)
            runs.append(run)
            print(
                f"{name} / {run['input']}: greedy {[p['greedy'] for p in run['curve']]} (oracle {oracle:.0f}), "
                f"solved after {run['updates_to_solve']} updates, {run['seconds']:.0f} s",
                flush=True,
            )
            result = {
                "task": fields,
                "layout_seed": args.layout_seed,
                "oracle": oracle,
                "args": dataclasses.asdict(args),
                "runs": runs,
            }
            atomic_write_json(Path(args.out), result)
            Path(args.out).with_suffix(".md").write_text(table(result))


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
