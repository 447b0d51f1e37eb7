"""The meta pillar's line in ``rolloutlab bench`` (2.), and a throughput round to run by hand (1.).

1. :func:`throughput`, not in the suite: inner env-steps per second of a short meta round in the experiment's regime
   (the gate's Acrobot learner, B = 2 runs of 600 steps, a world-model refit at 300, then lookahead), without a
   target: the protocol's need (>= 500 meta-episodes of 8k steps in <= 2 h, about 560 steps/s) is for the full
   benchmark, which batches B = 8 runs of 8k steps on an idle machine. At a bench-sized round the per-phase greedy
   evaluations, not the inner steps, set the rate (about 140 s for 1.2k inner steps on the shared 2-core machine).
2. Whether a DQN meta-agent learns a better-than-random schedule on the analytic toy learner
   (:mod:`meta.rollout_length.toy`), whose best schedule is known to increase K as data accumulates: META's final J
   minus the random meta-policy's, same seeds.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from meta.rollout_length.evaluate import arm_key, compare, run_arm
from rolloutlab.bench import BenchLine

_FULL = "OMP_NUM_THREADS=1 python experiments/meta/rollout_length.py"
#: The issue's protocol: 504 meta-episodes of 8k inner steps in 2 h.
_NEEDED_STEPS_PER_SECOND = 504 * 8_000 / 7_200
#: Inner steps per run of the throughput round: four decisions, one model refit half-way, lookahead after it.
_BUDGET = 600
#: The experiment's meta-MDP preset (the gate's learner).
_PRESET = Path(__file__).resolve().parent / "presets" / "acrobot_gate_8k_converged.yaml"
#: Wall seconds of :func:`quick_bench` on an idle 2-core machine (the progress bar's estimate).
EXPECTED_SECONDS = 6.0


def throughput() -> BenchLine:
    from meta.control.training import MetaTrainConfig
    from meta.rollout_length.env import MetaEnvConfig, MetaVecEnv
    from rolloutlab.config import load_yaml

    started = time.perf_counter()
    cfg = load_yaml(MetaTrainConfig, _PRESET).env
    assert isinstance(cfg, MetaEnvConfig), f"{_PRESET} is not a rollout-length preset"
    # Short enough for the bench, long enough to hold one model refit and lookahead after it (the costly part).
    cfg.budget, cfg.phase_length = _BUDGET, _BUDGET // 4
    cfg.dyna = {**cfg.dyna, "model_train_freq": _BUDGET // 2}
    runs = 2
    venv = MetaVecEnv(cfg, num_runs=runs, seed=0)
    venv.reset()
    t0 = time.perf_counter()
    for _ in range(cfg.horizon):
        venv.step_async(np.full(runs, 2))  # UP every decision
        venv.step_wait()
    rate = runs * cfg.horizon * cfg.phase_length / (time.perf_counter() - t0)
    return BenchLine(
        pillar="meta",
        benchmark=f"meta round, the gate's Dyna-DQN (Acrobot, B={runs}, {cfg.horizon * cfg.phase_length} steps)",
        metric="inner env-steps/s",
        value=round(rate, 1),
        target=f"report (the full benchmark, B = 8 on an idle machine, needs >= {_NEEDED_STEPS_PER_SECOND:.0f})",
        passed=None,
        seconds=time.perf_counter() - started,
        command=_FULL,
        details={
            "runs": runs,
            "steps": cfg.horizon * cfg.phase_length,
            "phase_length": cfg.phase_length,
            "model_train_freq": _BUDGET // 2,
            "full_benchmark_needs": round(_NEEDED_STEPS_PER_SECOND, 1),
        },
    )


def _toy_learning(out_dir: Path) -> BenchLine:
    from meta.control.training import MetaAgentConfig, MetaTrainConfig, MetaTrainer
    from meta.rollout_length.env import MetaEnvConfig

    started = time.perf_counter()
    env = MetaEnvConfig(budget=50_000, phase_length=5_000, inner="toy")
    # In-process: the toy learner's phases take microseconds, so worker processes would only add their start-up.
    agent = MetaAgentConfig(learning_starts=100, net_arch=[32, 32])
    cfg = MetaTrainConfig(env=env, agent=agent, episodes=200, runs_per_round=20, workers=1)
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
    """The toy-learner check (2. in the module docstring)."""
    from rolloutlab.threads import set_torch_threads

    set_torch_threads()
    out_dir.mkdir(parents=True, exist_ok=True)
    # The throughput round (:func:`throughput`) is left out of the suite: at any size that fits the bench its
    # per-phase evaluations, not the inner steps, decide the rate (3 greedy Acrobot episodes per 150-step phase), so
    # it would measure neither the full benchmark's steps/s nor anything with a target. ``throughput()`` runs it alone.
    return [_toy_learning(out_dir)]
