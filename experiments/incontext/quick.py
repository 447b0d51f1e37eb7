"""The in-context pillar's line in ``rolloutlab bench``: the agent on small Bernoulli bandits for 24k env steps."""

from __future__ import annotations

import time
from pathlib import Path

from envs.metarl.references import (
    bandit_monte_carlo,
    bayes_optimal_two_arm_value,
)
from meta.incontext.config import AgentConfig, TrainConfig
from rolloutlab.bench import BenchLine
from rolloutlab.checkpoint import atomic_write_json

FULL_COMMAND = "OMP_NUM_THREADS=1 nice -n 10 experiments/incontext/run_all.sh"
#: The training budget: a fixed number of env steps (not minutes), so the line is the same number on a busy machine and
#: an idle one. At 16k steps the agent still trails Thompson sampling (5.55 against 5.73); at 24k it reaches it (5.80).
QUICK_ENV_STEPS = 24_000
#: Wall seconds on an idle 2-core machine (training about 45 s, the 20k-task reference policies and the evaluation).
EXPECTED_SECONDS = 55.0


def quick_bench(out_dir: Path, env_steps: int = QUICK_ENV_STEPS, n_arms: int = 2, horizon: int = 10) -> list[BenchLine]:
    """``rolloutlab bench --only incontext``: the agent on ``n_arms`` x ``horizon`` Bernoulli bandits for
    ``env_steps`` env steps, against the reference policies.

    Args:
        out_dir: Where ``incontext_quick.json`` goes.
        env_steps: Training budget in env steps (the learning-rate schedule decays over it).
        n_arms: Bandit arms (the DP reference needs 2).
        horizon: Pulls per task.

    Returns:
        One line for the return (target: Thompson sampling's level) and one for the acting / update speed.
    """
    from meta.incontext.trainer import InContextTrainer

    start = time.perf_counter()
    config = TrainConfig(
        task="bandit", n_arms=n_arms, horizon=horizon, seed=0, total_env_steps=env_steps, max_minutes=None,
        n_envs=8, batch_size=16, window=horizon, updates_per_step=0.2, learning_starts=200, eps_anneal_steps=3_000,
        eval_tasks=1000, eval_every_steps=10**9,
        agent=AgentConfig(d_model=32, n_layers=1, n_heads=2, head_hidden=32, context_len=horizon + 1,
                          gammas=[0.5, 0.9], tau=0.02),
    )  # fmt: skip
    result = InContextTrainer(config).learn()
    references = {p: bandit_monte_carlo(p, n_arms, horizon, 20_000)[0] for p in ("random", "thompson", "oracle")}
    if n_arms == 2:
        references["bayes_optimal"] = bayes_optimal_two_arm_value(horizon)
    seconds = time.perf_counter() - start
    value = result["eval"]["mean"]
    details = {
        "references": references,
        "stderr": result["eval"]["stderr"],
        "env_steps": result["env_steps"],
        "updates": result["updates"],
        "act_steps_per_second": result["act_steps_per_second"],
        "updates_per_second": result["updates_per_second"],
    }
    atomic_write_json(Path(out_dir) / "incontext_quick.json", {"agent_return": value, **details})
    name = f"Bernoulli {n_arms}x{horizon}, {env_steps:,} env steps, transformer agent"
    return [
        BenchLine(
            pillar="incontext", benchmark=name, metric="return per task (1000 tasks)", value=value,
            target=f">= Thompson {references['thompson']:.2f} (random {references['random']:.2f})",
            passed=value >= references["thompson"], seconds=seconds, command=FULL_COMMAND, details=details,
        ),
        BenchLine(
            pillar="incontext", benchmark=name, metric="updates per second", value=result["updates_per_second"],
            target="report (acting: see details)", passed=None, seconds=0.0, command=FULL_COMMAND,
            details={"act_steps_per_second": result["act_steps_per_second"]},
        ),
    ]  # fmt: skip
