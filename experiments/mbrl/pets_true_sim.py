r"""Is a PETS miss on InvertedPendulum-v5 the model's or the planner's? Plan in the true simulator and see.

The planner of ``planning.mpc`` (CEM over action sequences, the env's known reward and termination functions) plans
here in MuJoCo itself: each candidate's rollout sets the simulator to the predicted state and steps the real physics
(InvertedPendulum's observation is its full state, ``qpos`` and ``qvel``). What the planner then fails to do, no world
model can fix. One particle per candidate (the simulator is deterministic), evaluation starts as the benchmark's
(reset with seed + 10000, then unseeded).

    OMP_NUM_THREADS=1 python experiments/mbrl/pets_true_sim.py

Writes ``results/pets_true_sim.json``: the return and length of every episode per (horizon, CEM's returned plan).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import tyro

from mbrl.rewards import reward_fn
from mbrl.termination import termination_fn
from planning.mpc import CEMConfig, CEMOptimizer, MPCPlanner, TrajectoryEvaluator
from planning.mpc.planner import planner_generator
from rolloutlab.checkpoint import atomic_write_json

RESULTS = Path(__file__).resolve().parent / "results"
ENV_ID = "InvertedPendulum-v5"


@dataclass
class Args:
    """Command line (each field a ``--flag``)."""

    horizons: str = "15,40"
    """comma-separated planning horizons"""
    returns: str = "best,mean"
    """CEM's returned plan: best (the best sample seen, PETS) and/or mean (the final mean)"""
    episodes: int = 2
    """episodes per setting"""
    seed: int = 0
    """seed of the planner and of the first reset (+ 10000, as the benchmark's evaluation)"""


class TrueInvertedPendulum:
    """MuJoCo's InvertedPendulum physics behind the planner's model interface (one member, no noise): the model and
    its propagator in one object."""

    obs_dim, action_dim, num_elites = 4, 1, 1
    device = torch.device("cpu")

    def __init__(self) -> None:
        self.sim: Any = gym.make(ENV_ID).unwrapped
        self.sim.reset(seed=0)

    def propagator(self, members: Any = None) -> TrueInvertedPendulum:
        return self

    def step(
        self, state: torch.Tensor, action: torch.Tensor, noise: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        obs = state.reshape(-1, self.obs_dim).double().numpy()
        actions = action.reshape(-1, self.action_dim).double().numpy()
        out = np.empty_like(obs)
        for i in range(out.shape[0]):
            self.sim.set_state(obs[i, :2], obs[i, 2:])
            self.sim.do_simulation(actions[i], self.sim.frame_skip)
            out[i] = self.sim._get_obs()
        next_state = torch.as_tensor(out, dtype=torch.float32).reshape(state.shape)
        return next_state, torch.zeros(state.shape[:-1])

    def terminated_prob(self, state: torch.Tensor, action: torch.Tensor) -> None:
        return None


def main(args: Args | None = None, results: Path = RESULTS) -> dict[str, Any]:
    """Play the episodes of every setting and write ``pets_true_sim.json``."""
    if args is None:
        args = tyro.cli(Args, description=__doc__)
    model = TrueInvertedPendulum()
    evaluator = TrajectoryEvaluator(model, reward_fn(ENV_ID), termination_fn(ENV_ID), "tsinf", 1, sample_noise=False)
    env = gym.make(ENV_ID)
    rows = []
    for horizon in (int(h) for h in args.horizons.split(",")):
        for kind in args.returns.split(","):
            optimizer = CEMOptimizer(env.action_space.low, env.action_space.high, CEMConfig(return_mean=kind == "mean"))
            planner = MPCPlanner(evaluator, optimizer, horizon, planner_generator(args.seed))
            returns, lengths = [], []
            started = time.perf_counter()
            for episode in range(args.episodes):
                obs, _ = env.reset(seed=args.seed + 10_000 if episode == 0 else None)
                planner.reset()
                total, steps, done = 0.0, 0, False
                while not done:
                    obs, reward, terminated, truncated, _ = env.step(planner.act(obs))
                    total, steps, done = total + float(reward), steps + 1, bool(terminated or truncated)
                returns.append(total)
                lengths.append(steps)
            row = {
                "horizon": horizon,
                "cem_returns": kind,
                "episode_returns": returns,
                "episode_lengths": lengths,
                "seconds": time.perf_counter() - started,
            }
            print(row, flush=True)
            rows.append(row)
            atomic_write_json(results / "pets_true_sim.json", {"args": dataclasses.asdict(args), "rows": rows})
    return {"rows": rows}


if __name__ == "__main__":
    main()
