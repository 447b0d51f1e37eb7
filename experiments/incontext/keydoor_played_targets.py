"""Where does a trained key-door agent lose its score? Its greedy play, split into the key half and the door half.

For each finished gate unit named (its checkpoint folder under ``--runs-root``, as ``keydoor_gate.py`` leaves it),
the evaluated weights play the first ``--eval-tasks`` evaluation tasks greedily (what the gate scores), and
``keydoor_diagnose.played_toward_targets`` reads the trials: once the trial has shown the key (or, holding the key,
the door), the share of steps whose move goes closer to it, and the share of trials that found the key and the door
at all; beside them the return, its quartiles, and the median step of the first key and the first door.

The door is shown only by entering it with the key, which sends the agent back to the start, so its cell is the cell
before plus the move: in no single RL^2 input unless the input carries the previous observation
(``TrainConfig.previous_obs_input``). The checkpoints are local (gitignored); the JSON is committed.

    OMP_NUM_THREADS=1 python experiments/incontext/keydoor_played_targets.py \\
        --units amago_keydoor_short+scalarq_cell_48actors_temp001_d64_1600000 \\
        --out experiments/incontext/results/keydoor_played_targets.json
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.incontext.keydoor_diagnose import played_toward_targets
from meta.incontext.replay import Trajectory
from meta.incontext.tasks import eval_task_seeds, task_env_fns
from meta.incontext.trainer import load_agent, run_rollouts, task_kwargs
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.threads import set_torch_threads


@dataclass
class Args:
    units: list[str] = field(default_factory=list)
    """Units as ``<setting>_<env steps>`` (``keydoor_gate.py``'s names, e.g.
    ``amago_keydoor_short+scalarq_cell_48actors_temp001_d64_1600000``); seed from ``--seed``."""
    task: str = "keydoor_5x5"
    """Gate task of the units."""
    seed: int = 0
    """Training seed of the units."""
    runs_root: str = "runs/incontext-keydoor-gate"
    """Where ``keydoor_gate.py`` left the units' checkpoint folders."""
    eval_tasks: int = 200
    """Evaluation tasks played (the first of the shared evaluation seeds, as the gate's)."""
    out: str = str(Path(__file__).parent / "results" / "keydoor_played_targets.json")
    """The JSON (entries of units already in it are kept unless named again)."""


def first_reward_step(trajectory: Trajectory, holding: bool) -> int | None:
    """The step of the trial's first key reward (``holding=False``) or door reward (``holding=True``), or ``None``."""
    held = trajectory.obs[:-1, 2] > 0.5
    steps = np.flatnonzero((trajectory.rewards > 0) & (held == holding))
    return int(steps[0]) if len(steps) else None


def play_unit(checkpoint: Path, n_tasks: int) -> dict[str, Any]:
    """Greedy play of the checkpoint's evaluated weights on ``n_tasks`` evaluation tasks, read per half."""
    agent, cfg = load_agent(checkpoint)
    seeds = eval_task_seeds(n_tasks)
    venv = gym.vector.SyncVectorEnv(task_env_fns(cfg.task, min(n_tasks, 50), **task_kwargs(cfg)))
    trajectories: list[Trajectory] = []
    try:
        for first in range(0, n_tasks, venv.num_envs):
            chunk = seeds[first : first + venv.num_envs]
            played = run_rollouts(agent, venv, chunk, None, np.random.default_rng(0))
            trajectories.extend(played[: len(chunk)])
    finally:
        venv.close()
    returns = np.array([t.rewards.sum() for t in trajectories])
    firsts = {
        name: [s for t in trajectories if (s := first_reward_step(t, holding)) is not None]
        for name, holding in (("key", False), ("door", True))
    }
    return {
        "eval_tasks": n_tasks,
        "return_mean": float(returns.mean()),
        "return_quartiles": np.percentile(returns, [25, 50, 75]).tolist(),
        "first_key_step_median": float(np.median(firsts["key"])) if firsts["key"] else None,
        "first_door_step_median": float(np.median(firsts["door"])) if firsts["door"] else None,
        **played_toward_targets(trajectories, cfg.keydoor_size),
        "previous_obs_input": bool(cfg.previous_obs_input),
        "d_model": int(cfg.agent.d_model),
    }


def main(args: Args) -> dict[str, Any]:
    set_torch_threads(1)
    out = Path(args.out)
    result: dict[str, Any] = {"units": {}}
    if out.exists():
        result = json.loads(out.read_text())
    for unit in args.units:
        setting, _, steps = unit.rpartition("_")
        folder = Path(args.runs_root) / f"{args.task}_{setting}_{steps}_seed{args.seed}"
        checkpoint = folder / "checkpoint.pt"
        if not checkpoint.exists():
            raise SystemExit(f"no checkpoint at {checkpoint}: run the unit with keydoor_gate.py first")
        entry = play_unit(checkpoint, args.eval_tasks)
        result["units"][f"{unit}_seed{args.seed}"] = entry
        print(unit, {k: round(v, 3) if isinstance(v, float) else v for k, v in entry.items()}, flush=True)
    atomic_write_json(out, result)
    return result


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
