"""``rolloutlab bench --only meta``: the meta pillar's headline numbers at a small size (a few minutes).

1. Inner env-steps per second of one meta-training round over the real batched Dyna-DQN (Acrobot-v1, B = 4 runs,
   the scaled inner settings of ``experiments/meta/rollout_length.py``): the cost that decides how many meta-episodes
   are affordable. The issue's scaled protocol (300 meta-episodes x 50k steps in <= 2 h) needs about 2,100 steps/s.
2. Whether a DQN meta-agent learns a better-than-random schedule on the analytic toy learner (:mod:`.toy`), whose best
   schedule is known to increase K as data accumulates: META's final J minus the random meta-policy's, same seeds.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from rolloutlab.bench import BenchLine

_FULL = "OMP_NUM_THREADS=1 python experiments/meta/rollout_length.py"
_NEEDED_STEPS_PER_SECOND = 300 * 50_000 / 7_200


def _throughput(out_dir: Path) -> BenchLine:
    from meta.rollout_length.env import MetaEnvConfig, MetaVecEnv

    started = time.perf_counter()
    dyna = {
        "net_arch": [64, 64],
        "num_model_rollouts": 200,
        "eval_episodes": 2,
        "buffer_size": 2_000,
        "model": {"hidden_size": 32, "max_epochs": 5},
    }
    cfg = MetaEnvConfig(env_id="Acrobot-v1", budget=2_000, phase_length=1_000, dyna=dyna)
    venv = MetaVecEnv(cfg, num_runs=4, seed=0)
    venv.reset()
    t0 = time.perf_counter()
    for _ in range(cfg.horizon):
        venv.step_async(np.full(4, 2))  # UP every phase
        venv.step_wait()
    rate = 4 * cfg.budget / (time.perf_counter() - t0)
    return BenchLine(
        pillar="meta",
        benchmark="meta round over batched Dyna-DQN (Acrobot, B=4, 2k steps)",
        metric="inner env-steps/s",
        value=round(rate, 1),
        target=f">= {_NEEDED_STEPS_PER_SECOND:.0f} for 300x50k meta-episodes in 2 h",
        passed=rate >= _NEEDED_STEPS_PER_SECOND,
        seconds=time.perf_counter() - started,
        command=_FULL,
        details={"runs": 4, "budget": cfg.budget, "phase_length": cfg.phase_length},
    )


def _toy_learning(out_dir: Path) -> BenchLine:
    from meta.rollout_length.env import MetaEnvConfig
    from meta.rollout_length.evaluate import arm_key, compare, run_arm
    from meta.rollout_length.train import MetaAgentConfig, MetaTrainConfig, MetaTrainer

    started = time.perf_counter()
    env = MetaEnvConfig(budget=50_000, phase_length=5_000, inner="toy")
    cfg = MetaTrainConfig(
        env=env, agent=MetaAgentConfig(learning_starts=100, net_arch=[32, 32]), episodes=200, runs_per_round=20
    )
    MetaTrainer(cfg, out_dir / "toy-meta", show_progress=False).train()
    policy = out_dir / "toy-meta" / "meta_policy.pt"
    specs = (f"learned:{policy}", "random:0,32", "fixed:0", "inc:32")
    arms = {arm_key(spec): run_arm(spec, env, runs=20, seed=7, physics={}) for spec in specs}
    margin = arms["meta"]["mean"] - arms["random:0,32"]["mean"]
    return BenchLine(
        pillar="meta",
        benchmark="DQN meta-agent on the toy learner (200 meta-episodes)",
        metric="META − random final J",
        value=round(margin, 2),
        target="> 0",
        passed=margin > 0,
        seconds=time.perf_counter() - started,
        command="rolloutlab bench --only meta",
        details={name: {"mean": r["mean"], "se": r["se"]} for name, r in arms.items()} | compare(arms),
    )


def quick_bench(out_dir: Path) -> list[BenchLine]:
    """Run both measurements; see the module docstring."""
    from rolloutlab.threads import set_torch_threads

    set_torch_threads()
    out_dir.mkdir(parents=True, exist_ok=True)
    return [_throughput(out_dir), _toy_learning(out_dir)]
