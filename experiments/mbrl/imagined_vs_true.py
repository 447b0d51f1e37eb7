"""How wrong is an imagined transition? The learned world model against Acrobot's own physics, step by step.

Trains plain DQN runs (K = 0) on Acrobot-v1 with the gate's settings while fitting each run's world model as the gate's
learned-model arms would (here with uncapped refits), then draws start states from each run's real buffer, picks
actions with the run's epsilon-greedy policy and steps both the learned model (sampled, as Dyna's rollouts do, and
with the elite mean) and :class:`mbrl.models.true_dynamics.TrueAcrobotModel` from the same (state, action) pairs.
Reported per run: one-step RMSE per observation dimension next to the spread of the true change, the rate of
terminations the model adds (false) or misses, the reward error, and the resulting error of the DQN value target
``r + gamma (1 - terminated) max_a Q_target(s', a)`` against the target the true step gives.

    OMP_NUM_THREADS=1 python experiments/mbrl/imagined_vs_true.py   # -> experiments/mbrl/results/imagined_vs_true.json
"""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.mbrl.gate_protocol import GateSettings

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Args:
    budget: int = 6_000
    """real env steps of each DQN run before the comparison"""
    runs: int = 2
    """independent runs (each with its own world model)"""
    seed: int = 0
    """base seed (run i: seed * 10_000 + i, as in the gate)"""
    samples: int = 5_000
    """(state, action) pairs compared per run"""
    epsilon: float = 0.1
    """exploration rate of the policy that picks the compared actions (the rollouts' rate late in a run)"""
    net_arch: str = GateSettings.net_arch
    """Q-network widths (the gate's)"""
    out: str = str(RESULTS / "imagined_vs_true.json")
    """where the result goes"""


def main(args: Args) -> dict[str, Any]:
    import gymnasium as gym
    import torch

    from mbrl.algorithms.dyna import BatchedDynaDQN, DynaConfig, dyna_model_config
    from mbrl.models.true_dynamics import TrueAcrobotModel
    from mbrl.termination import acrobot
    from rolloutlab.checkpoint import atomic_write_json
    from rolloutlab.threads import set_torch_threads

    set_torch_threads()
    started = time.perf_counter()
    model = dataclasses.replace(dyna_model_config(), min_train_steps=1000, patience_steps=200, max_train_steps=None)
    cfg = DynaConfig.for_env(
        "Acrobot-v1",
        budget=args.budget,
        phase_length=2_000,
        model_train_freq=2_000,
        net_arch=[int(w) for w in args.net_arch.split(",")],
        train_model_when_k0=True,
        model=model,
    )
    learner = BatchedDynaDQN([lambda: gym.make("Acrobot-v1")] * args.runs, cfg, seed=args.seed)
    while not learner.done:
        feedback = learner.run_phase([0] * args.runs)
        print(f"step {learner.steps_done}: greedy returns {[round(fb['mean_return']) for fb in feedback]}", flush=True)
    true = TrueAcrobotModel.from_env(gym.make("Acrobot-v1"))
    rng = np.random.default_rng(args.seed)
    runs: list[dict[str, Any]] = []
    for i in range(args.runs):
        data = learner.real.run(i)
        idx = rng.choice(len(data), size=min(args.samples, len(data)), replace=False)
        obs = data.obs[idx]
        act = learner._policy(i, args.epsilon)(obs)
        sampled = learner.models[i].predict(obs, act, rng)
        mean = learner.models[i].predict(obs, act, rng, deterministic=True)
        real = true.predict(obs, act, rng)
        model_term = acrobot(obs, act, sampled.next_obs)
        true_term = acrobot(obs, act, real.next_obs)
        with torch.no_grad():

            def target(reward: np.ndarray, nxt: np.ndarray, term: np.ndarray, run: int = i) -> np.ndarray:
                q = learner.q_target.forward_run(run, torch.as_tensor(nxt, dtype=torch.float32))
                return reward + (1.0 - term) * cfg.gamma * q.max(dim=-1).values.numpy()

            target_error = target(sampled.reward, sampled.next_obs, model_term) - target(
                real.reward, real.next_obs, true_term
            )
            q_now = learner.q.forward_run(i, torch.as_tensor(obs, dtype=torch.float32)).max(dim=-1).values.numpy()
        runs.append(
            {
                "transitions": len(data),
                "holdout_nmse": feedback[i]["model_holdout_nmse"],
                "rmse_sampled": np.sqrt(((sampled.next_obs - real.next_obs) ** 2).mean(axis=0)).tolist(),
                "rmse_mean": np.sqrt(((mean.next_obs - real.next_obs) ** 2).mean(axis=0)).tolist(),
                "true_change_std": (real.next_obs - obs).std(axis=0).tolist(),
                "rmse_sampled_over_change_std": (
                    np.sqrt(((sampled.next_obs - real.next_obs) ** 2).mean(axis=0)) / (real.next_obs - obs).std(axis=0)
                ).tolist(),
                "terminal_rate_true": float(true_term.mean()),
                "terminal_rate_model": float(model_term.mean()),
                "false_terminal_rate": float((model_term & ~true_term).mean()),
                "missed_terminal_rate": float((~model_term & true_term).mean()),
                "missed_share_of_true_terminals": float((~model_term & true_term).sum() / max(true_term.sum(), 1)),
                "false_share_of_model_terminals": float((model_term & ~true_term).sum() / max(model_term.sum(), 1)),
                "reward_rmse": float(np.sqrt(((sampled.reward - real.reward) ** 2).mean())),
                "target_error_mean": float(target_error.mean()),
                "target_error_rmse": float(np.sqrt((target_error**2).mean())),
                "target_error_abs_p99": float(np.percentile(np.abs(target_error), 99)),
                "target_error_abs_max": float(np.abs(target_error).max()),
                "greedy_q_mean": float(q_now.mean()),
            }
        )
    result = {
        "runs": runs,
        "observation": ["cos t1", "sin t1", "cos t2", "sin t2", "dt1", "dt2"],
        "args": dataclasses.asdict(args),
        "seconds": time.perf_counter() - started,
        "command": "OMP_NUM_THREADS=1 python experiments/mbrl/imagined_vs_true.py",
    }
    atomic_write_json(args.out, result)
    for i, run in enumerate(runs):
        print(
            f"run {i}: rmse {np.round(run['rmse_sampled'], 3)} "
            f"vs true change std {np.round(run['true_change_std'], 3)}; "
            f"terminal true {run['terminal_rate_true']:.4f}, false {run['false_terminal_rate']:.4f}, "
            f"missed {run['missed_terminal_rate']:.4f}; target error rmse {run['target_error_rmse']:.2f}"
        )
    return result


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
