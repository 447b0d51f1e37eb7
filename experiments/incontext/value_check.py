"""Did the in-context agent's critic learn? Its Q-values of the replayed actions against the Monte-Carlo discounted
returns that followed them, per discount, and what its policy prefers, on a trained run's own replay.

The brief's first check ("a value function against Monte-Carlo returns"): a critic whose values are far from the
returns it is trained toward, or uncorrelated with them, cannot steer the actor. Q-values are divided by the
agent's ``reward_scale`` first (the critics learn scaled rewards), so both sides are in the env's reward units. The
returns are those of the stored (exploring) behaviour, so a good critic matches them only roughly (it values the
learned policy), but not by a factor of several. Reads ``checkpoint.pt`` of a run folder (``InContextTrainer``
layout) and writes JSON:

    OMP_NUM_THREADS=1 python experiments/incontext/value_check.py \\
        --run-dir runs/incontext-gate-keydoor/keydoor_keydoor600k_amago_seed0 \\
        --out experiments/incontext/results/value_check_keydoor600k_amago.json
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import tyro

from meta.incontext.config import TrainConfig, with_saved_defaults
from meta.incontext.trainer import InContextTrainer
from rolloutlab.checkpoint import atomic_write_json, load_checkpoint
from rolloutlab.config import from_dict
from rolloutlab.threads import set_torch_threads


@dataclass
class Args:
    run_dir: str
    """Run folder holding the trainer's checkpoint.pt."""
    trials: int = 32
    """Replayed trials to check (drawn from the run's replay)."""
    seed: int = 0
    """Draws the trials."""
    out: str | None = None
    """Where the JSON goes (default: printed only)."""


def discounted_returns(rewards: np.ndarray, dones: np.ndarray, gamma: float) -> np.ndarray:
    """``G_t = r_t + gamma (1 - done_t) G_{t+1}`` along the last axis, 0 after the end."""
    out = np.zeros_like(rewards)
    following = np.zeros(rewards.shape[0])
    for t in range(rewards.shape[1] - 1, -1, -1):
        following = rewards[:, t] + gamma * (1.0 - dones[:, t]) * following
        out[:, t] = following
    return out


def _compare(taken: np.ndarray, returns: np.ndarray, suffix: str) -> dict[str, Any]:
    """Mean Monte-Carlo return, mean |Q| over mean |return|, and their correlation (``None`` if either is constant)."""
    return {
        f"mc_return_mean{suffix}": float(returns.mean()),
        f"size_ratio{suffix}": float(np.abs(taken).mean() / max(np.abs(returns).mean(), 1e-12)),
        f"correlation{suffix}": (
            float(np.corrcoef(taken, returns)[0, 1]) if taken.std() > 0 and returns.std() > 0 else None
        ),
    }


def value_check(trainer: InContextTrainer, trials: int, rng: np.random.Generator) -> dict[str, Any]:
    """Q-values of replayed actions against the Monte-Carlo discounted returns that followed them, per discount.

    The critics learn values of rewards times ``agent.reward_scale`` (AMAGO's reward multiplier), so their Q-values
    are divided by it here: both sides are in the env's reward units (a ratio of ``reward_scale`` otherwise says
    nothing about the critic).

    A run with a first-visit bonus (``TrainConfig.novelty_bonus``) trains its critics toward the env's rewards plus
    the bonus at the run's current coefficient: ``*_with_bonus`` compares against those returns too (the ones the
    critic learns), beside the env's own.

    Args:
        trainer: A trainer whose replay holds trajectories (its online weights are checked: the ones TD trains).
        trials: Replayed trials (windows) drawn from the replay.
        rng: Draws them.
    """
    cfg = trainer.config
    agent = trainer.agent.eval()
    coef = trainer.novelty_coef
    bonus_rng = copy.deepcopy(rng)  # the same windows again, their rewards with the first-visit bonus
    batch = trainer.replay.sample(trials, cfg.window, rng, cfg.full_trials).to(agent.device)
    learned_rewards = (
        trainer.replay.sample(trials, cfg.window, bonus_rng, cfg.full_trials, coef).rewards.numpy().astype(np.float64)
        if coef > 0
        else None
    )
    with torch.no_grad():
        features, _ = agent.encode(batch.obs, None, batch.start)
        q = agent.q_values(features[:, :-1]).mean(dim=2).cpu() / cfg.agent.reward_scale  # (B, T, G, A), env units
        probs = torch.softmax(agent.policy_logits(features[:, :-1])[..., -1, :], dim=-1).cpu()  # longest discount
    mask = batch.mask.cpu().numpy() > 0
    rewards = batch.rewards.cpu().numpy().astype(np.float64)
    dones = batch.dones.cpu().numpy().astype(np.float64)
    actions = batch.actions.cpu()
    out: dict[str, Any] = {
        "env_steps": trainer.env_steps,
        "updates": trainer.updates,
        "trials": trials,
        "reward_scale": cfg.agent.reward_scale,
        "mean_reward_per_trial": float((rewards * mask).sum(1).mean()),
        "novelty_coef": coef,
        "per_discount": {},
    }
    for g, gamma in enumerate(cfg.agent.gammas):
        taken = q[..., g, :].gather(-1, actions[..., None]).squeeze(-1).numpy()[mask]
        returns = discounted_returns(rewards, dones, gamma)[mask]
        out["per_discount"][str(gamma)] = {"q_taken_mean": float(taken.mean()), **_compare(taken, returns, "")}
        if learned_rewards is not None:
            learned = discounted_returns(learned_rewards, dones, gamma)[mask]
            out["per_discount"][str(gamma)].update(_compare(taken, learned, "_with_bonus"))
    chosen = probs.numpy()[mask]
    out["policy_mean_probs"] = chosen.mean(0).tolist()
    out["policy_mean_max_prob"] = float(chosen.max(-1).mean())
    return out


def main(args: Args) -> None:
    set_torch_threads(1)
    path = Path(args.run_dir) / "checkpoint.pt"
    cfg = from_dict(TrainConfig, with_saved_defaults(load_checkpoint(path, kind="incontext-agent")["config"]))
    trainer = InContextTrainer(cfg, Path(args.run_dir), resume=True)
    out = {"run_dir": args.run_dir, **value_check(trainer, args.trials, np.random.default_rng(args.seed))}
    print(json.dumps(out, indent=1))
    if args.out is not None:
        atomic_write_json(Path(args.out), out)


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
