"""Does a key-door agent's memory hold the key's and the door's cells? A linear read-out of its sequence features.

For each trained run (its ``checkpoint.pt``, the evaluated weights), the agent plays the shared evaluation tasks by
argmax of its ensemble-mean Q (the acting discount, as ``critic_probe`` does), and one whole-trial pass gives the
features ``(T, d)`` its critics read at every step. On the steps whose next target an earlier step of the trial has
revealed (the key while not holding it, the door while holding it; ``keydoor_diagnose.remembered_targets``), a ridge
regression from those features predicts the target's cell, absolute and relative to the agent's cell. It is fitted
on the first ``train_fraction`` of the tasks and scored (R^2) on the rest, so a read-out must generalise across
layouts. Beside it, the same read-out from the agent's own cell alone (one-hot): a policy that heads for a target
makes its own cell say something about the target, and the relative cell is partly the agent's cell. Features that
hold the target beat that baseline on the absolute cell; features that do not stay at it (near 0 for a policy that
does not head for the target).

A policy that heads for a found target needs its cell in the features; the probe tells a memory that does not store
the door (nothing to act on) from a critic that stores it and does not act on it. Beside the read-outs, how much
the run's data had to learn from: key pick-ups and door openings per trial, and the step of a trial's first door
opening, in the probe's play and in the last ``replay_trials`` trials of the run's replay (its own exploring play).

    OMP_NUM_THREADS=1 python experiments/incontext/keydoor_memory_probe.py \\
        --runs runs/incontext-keydoor-8x8/keydoor_keydoor_qlearning+replay10_20000000_seed0 \\
        --out experiments/incontext/results/keydoor_memory_probe.json

Writes the JSON and its markdown table beside it (``.md``).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import tyro
from sklearn.linear_model import RidgeCV

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.incontext.keydoor_diagnose import QGreedyActor, played_toward_targets, remembered_targets
from meta.incontext.replay import Trajectory, TrajectoryReplay
from meta.incontext.tasks import eval_task_seeds, task_env_fns
from meta.incontext.trainer import CHECKPOINT_KIND, agent_from_checkpoint, run_rollouts, task_kwargs
from rolloutlab.checkpoint import atomic_write_json, atomic_write_text, load_checkpoint
from rolloutlab.threads import set_torch_threads

#: Ridge penalties tried (by leave-one-out on the training tasks).
ALPHAS = (0.1, 1.0, 10.0, 100.0)


@dataclass
class Args:
    runs: list[str] = field(default_factory=list)
    """Run folders, each holding a key-door trainer's checkpoint.pt."""
    tasks: int = 200
    """Evaluation tasks played (the first of the shared evaluation seeds)."""
    train_fraction: float = 0.7
    """Share of the tasks the read-out is fitted on; it is scored on the others."""
    replay_trials: int = 500
    """Newest trials of the run's replay whose key and door events are counted."""
    room: int | None = None
    """Play the evaluation tasks in rooms of this side inside the run's grid (``DarkKeyDoorEnv``'s ``room_sizes``;
    for runs that trained in smaller rooms); ``None``: the whole grid. Entries are then named ``<run>@room<side>``."""
    out: str | None = None
    """JSON file, updated run by run (a run already in it is skipped); default: printed only."""


def target_features(
    features: np.ndarray, trajectories: list[Trajectory], size: int
) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per target (``"key"``, ``"door"``): the features ``(N, d)`` of the steps whose target is known, the targets
    ``(N, 4)`` as ``[x, y, x - agent_x, y - agent_y]`` in cells, each step's trial index ``(N,)`` and the one-hot of
    the agent's cell ``(N, size * size)`` (the baseline's features).

    Args:
        features: ``(n_trials, T, d)`` features of the steps (the input at step t, before its action).
        trajectories: The trials, in the same order.
        size: Side of the grid.
    """
    parts: dict[str, tuple[list, list, list, list]] = {"key": ([], [], [], []), "door": ([], [], [], [])}
    for i, traj in enumerate(trajectories):
        pos, targets, known = remembered_targets(traj, size)
        holding = traj.obs[:-1, 2] > 0.5
        for name, mask in (("key", known & ~holding), ("door", known & holding)):
            steps = np.flatnonzero(mask)
            parts[name][0].append(features[i, steps])
            parts[name][1].append(np.concatenate([targets[steps], targets[steps] - pos[steps]], axis=1))
            parts[name][2].append(np.full(len(steps), i))
            parts[name][3].append(np.eye(size * size)[pos[steps, 0] * size + pos[steps, 1]])
    return {
        name: (
            np.concatenate(x) if x else np.zeros((0, features.shape[-1])),
            np.concatenate(y).astype(np.float64) if y else np.zeros((0, 4)),
            np.concatenate(g) if g else np.zeros(0, dtype=int),
            np.concatenate(c) if c else np.zeros((0, size * size)),
        )
        for name, (x, y, g, c) in parts.items()
    }


def target_events(trajectories: list[Trajectory]) -> dict[str, float]:
    """Key pick-ups and door openings per trial, and the step of each trial's first door opening (the trial's
    length when it opened none): ``{"trials", "keys_per_trial", "doors_per_trial", "first_door_step_median",
    "trials_with_door"}``."""
    keys, doors, first = [], [], []
    for traj in trajectories:
        holding = traj.obs[:-1, 2] > 0.5
        opened = np.flatnonzero((traj.rewards > 0) & holding)
        keys.append(int(((traj.rewards > 0) & ~holding).sum()))
        doors.append(len(opened))
        first.append(int(opened[0]) if len(opened) else len(traj))
    return {
        "trials": len(trajectories),
        "keys_per_trial": float(np.mean(keys)),
        "doors_per_trial": float(np.mean(doors)),
        "first_door_step_median": float(np.median(first)),
        "trials_with_door": float(np.mean(np.asarray(doors) > 0)),
    }


def readout_r2(x: np.ndarray, y: np.ndarray, trials: np.ndarray, n_train_trials: int) -> dict[str, Any]:
    """Ridge read-outs of each target column from the features, fitted on trials ``< n_train_trials`` and scored
    (R^2) on the rest: ``{"steps", "train_trials", "test_trials", "abs": mean R^2 of x and y, "rel": the same of the
    relative cell, "columns": R^2 per column}``; ``abs``/``rel`` are ``None`` when either side has too few steps."""
    train, test = trials < n_train_trials, trials >= n_train_trials
    out: dict[str, Any] = {
        "steps": len(y),
        "train_trials": len(np.unique(trials[train])),
        "test_trials": len(np.unique(trials[test])),
    }
    if train.sum() < 10 or test.sum() < 10:
        return {**out, "abs": None, "rel": None, "columns": None}
    scores = []
    for column in range(y.shape[1]):
        model = RidgeCV(alphas=ALPHAS).fit(x[train], y[train, column])
        scores.append(float(model.score(x[test], y[test, column])))
    return {**out, "abs": float(np.mean(scores[:2])), "rel": float(np.mean(scores[2:])), "columns": scores}


def probe_run(
    run_dir: Path, n_tasks: int, train_fraction: float, replay_trials: int = 500, room: int | None = None
) -> dict[str, Any]:
    """The read-outs of one run's key and door cells, how its argmax-Q play heads for them, and the key and door
    events of that play and of its replay's newest ``replay_trials`` trials; the tasks in rooms of side ``room``
    when given."""
    envelope = load_checkpoint(run_dir / "checkpoint.pt", kind=CHECKPOINT_KIND)
    agent, cfg = agent_from_checkpoint(envelope, device="cpu")
    agent.eval()
    state = envelope["state"]
    counters = state["counters"]
    replay = TrajectoryReplay(1)
    replay.load_state_dict(state["replay"])
    replayed = list(replay.trajectories)[-replay_trials:]
    del envelope, state, replay
    seeds = eval_task_seeds(n_tasks)
    rooms = {} if room is None else {"keydoor_room_sizes": [room]}
    venv = gym.vector.SyncVectorEnv(task_env_fns(cfg.task, n_tasks, **task_kwargs(cfg), **rooms))
    try:
        acting = QGreedyActor(agent, len(cfg.agent.gammas) - 1)
        played = run_rollouts(acting, venv, seeds, None, np.random.default_rng(0))  # type: ignore[arg-type]
    finally:
        venv.close()
    obs = torch.as_tensor(np.stack([t.obs for t in played]), device=agent.device)
    with torch.no_grad():
        features, _ = agent.encode(obs, None, torch.zeros(len(played), dtype=torch.long, device=agent.device))
    per_target = target_features(features[:, :-1].cpu().numpy(), played, cfg.keydoor_size)
    n_train = int(train_fraction * n_tasks)
    return {
        "task": cfg.task,
        "keydoor_size": cfg.keydoor_size,
        "room": cfg.keydoor_size if room is None else room,
        "trial_steps": cfg.keydoor_trial_steps,
        "env_steps": int(counters["env_steps"]),
        "updates": int(counters["updates"]),
        "n_tasks": n_tasks,
        "train_tasks": n_train,
        "return_mean": float(np.mean([t.rewards.sum() for t in played])),
        "played_toward_targets": played_toward_targets(played, cfg.keydoor_size),
        "played_events": target_events(played),
        "replay_events": target_events(replayed),
        **{
            name: {**readout_r2(x, y, g, n_train), "cell_only": readout_r2(c, y, g, n_train)}
            for name, (x, y, g, c) in per_target.items()
        },
    }


def _number(value: float | None, fmt: str = ".2f") -> str:
    return "-" if value is None or value != value else format(value, fmt)


def _grid(entry: dict[str, Any]) -> str:
    size, room = entry["keydoor_size"], entry.get("room", entry["keydoor_size"])
    return f"{size}x{size}" if room == size else f"{room}x{room} room of {size}x{size}"


def table(results: dict[str, Any]) -> str:
    """Markdown table of the probed runs: the read-outs (beside the agent's cell alone), how argmax-Q play heads for
    found targets, and the replay's key and door events."""
    lines = [
        "| run | grid, trial | env steps | updates | key R² (cell alone) | door R² (cell alone) | toward found key "
        "| toward found door | replay: keys / trial | replay: doors / trial | replay: first door step (median) |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name, entry in results["runs"].items():
        toward, replay = entry["played_toward_targets"], entry["replay_events"]
        key, door = entry["key"], entry["door"]
        lines.append(
            f"| `{name.split('+', 1)[-1]}` | {_grid(entry)}, "
            f"{entry['trial_steps']} | {entry['env_steps']:,} | {entry['updates']:,} "
            f"| {_number(key['abs'])} ({_number(key['cell_only']['abs'])}) "
            f"| {_number(door['abs'])} ({_number(door['cell_only']['abs'])}) "
            f"| {_number(toward['toward_key'])} | {_number(toward['toward_door'])} "
            f"| {_number(replay['keys_per_trial'], '.1f')} | {_number(replay['doors_per_trial'], '.1f')} "
            f"| {_number(replay['first_door_step_median'], '.0f')} |"
        )
    return "\n".join(lines) + "\n"


def main(args: Args) -> dict[str, Any]:
    set_torch_threads(1)
    out_path = Path(args.out) if args.out else None
    results: dict[str, Any] = json.loads(out_path.read_text()) if out_path and out_path.exists() else {}
    results.setdefault("runs", {})
    results["protocol"] = {
        "tasks": args.tasks, "train_fraction": args.train_fraction, "alphas": list(ALPHAS),
        "replay_trials": args.replay_trials,
    }  # fmt: skip
    for run in args.runs:
        name = Path(run).name + ("" if args.room is None else f"@room{args.room}")
        if name in results["runs"]:
            print(f"{name}: already probed", flush=True)
            continue
        results["runs"][name] = probe_run(Path(run), args.tasks, args.train_fraction, args.replay_trials, args.room)
        entry = results["runs"][name]
        for target in ("key", "door"):
            part = entry[target]
            print(f"{name} {target}: absolute-cell R2 {part['abs']} (from the agent's cell alone "
                  f"{part['cell_only']['abs']})", flush=True)  # fmt: skip
        if out_path:
            atomic_write_json(out_path, results)
            atomic_write_text(out_path.with_suffix(".md"), table(results))
    if not out_path:
        print(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main(tyro.cli(Args))
