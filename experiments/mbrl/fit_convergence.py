"""How far from converged is the gate's world model? The same Acrobot data fit with the gate's old step cap and until
the holdout stops improving.

    OMP_NUM_THREADS=1 python experiments/mbrl/fit_convergence.py   # ~3 min on one core

Data: 8,000 Acrobot-v1 transitions from a sticky random policy (each step keeps the last action with probability 0.7,
which swings the links further than i.i.d. actions), seed 0. Fits (Dyna's ensemble: 5 members, 3 elites, 3 x 64):

* ``cap600`` — the earlier gates' refit settings (at least 300 and at most 600 gradient steps, patience 200 steps);
* ``uncapped`` — the 8k gate's settings (at least 1,000 steps, patience 200 steps, no cap);
* ``patience2000`` — a much longer fit (patience 2,000 steps and 20 epochs, at least 3,000 steps), the reference;
* ``mbpo_size`` — MBPO's network size (7 members, 5 elites, 4 x 200), uncapped.

Writes ``results/fit_convergence.json``: per fit, gradient steps, seconds and the holdout NMSE per output (0: reward,
1-6: the state deltas), each divided by that output's holdout variance.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import gymnasium as gym
import numpy as np
import tyro

from mbrl.algorithms.dyna import dyna_model_config
from mbrl.models.dynamics import DynamicsModel
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.threads import set_torch_threads

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Args:
    transitions: int = 8_000
    """Acrobot transitions collected"""
    stick: float = 0.7
    """probability of repeating the previous action"""
    seed: int = 0
    """seed of the data and the fits"""
    out: str = str(RESULTS / "fit_convergence.json")
    """result file"""


def collect(args: Args) -> tuple[np.ndarray, ...]:
    """Sticky-random transitions ``(obs, actions, rewards, next_obs, terminated)``."""
    env = gym.make("Acrobot-v1")
    rng = np.random.default_rng(args.seed)
    obs, _ = env.reset(seed=args.seed)
    rows: list[tuple] = []
    action = 0
    for _ in range(args.transitions):
        if rng.random() > args.stick:
            action = int(rng.integers(3))
        nxt, reward, terminated, truncated, _ = env.step(action)
        rows.append((obs, action, reward, nxt, terminated))
        obs = nxt
        if terminated or truncated:
            obs, _ = env.reset()
    return tuple(np.array(col) for col in zip(*rows, strict=True))


def main(args: Args) -> None:
    set_torch_threads()
    data = collect(args)
    base = dyna_model_config()
    fits = {
        "cap600": replace(base, min_train_steps=300, patience_steps=200, max_train_steps=600),
        "uncapped": replace(base, min_train_steps=1000, patience_steps=200, max_train_steps=None),
        "patience2000": replace(base, min_train_steps=3000, patience_steps=2000, patience=20, max_train_steps=None),
        "mbpo_size": replace(base, ensemble_size=7, num_elites=5, hidden_size=200, num_layers=4, max_train_steps=None),
    }
    results = {}
    for name, cfg in fits.items():
        model = DynamicsModel(6, 3, True, cfg, seed=args.seed)
        start = time.perf_counter()
        metrics = model.fit(*data)
        per_output = [float(metrics[f"model/holdout_nmse_{j}"]) for j in range(7)]
        results[name] = {
            "train_steps": int(metrics["model/train_steps"]),
            "seconds": time.perf_counter() - start,
            "holdout_nmse": float(metrics["model/holdout_nmse"]),
            "holdout_nmse_per_output": per_output,
            "state_delta_nmse_mean": float(np.mean(per_output[1:])),
            "config": asdict(cfg),
        }
        print(
            name,
            results[name]["train_steps"],
            "steps",
            f"{results[name]['seconds']:.0f}s",
            "state-delta NMSE",
            [round(x, 4) for x in per_output[1:]],
            flush=True,
        )
    reference = results["patience2000"]["state_delta_nmse_mean"]
    for entry in results.values():
        entry["state_delta_nmse_vs_reference"] = entry["state_delta_nmse_mean"] / reference
    atomic_write_json(
        Path(args.out),
        {
            "args": asdict(args),
            "terminations": int(data[4].sum()),
            "fits": results,
            "command": "OMP_NUM_THREADS=1 python experiments/mbrl/fit_convergence.py",
        },
    )


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
