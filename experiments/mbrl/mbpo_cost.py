r"""What MBPO on HalfCheetah-v5 costs per 1k env steps: the code before the speed work against today's code, default
and with the fast options, each run in its own process and charged in CPU seconds.

Arms (the project's HalfCheetah settings, ``experiments/mbrl/sample_efficiency.py``'s: MBPOConfig's defaults with
200 warm-up steps, SAC 256 x 256 at 10 updates per env step, batch 256, the 7 x 4 x 200 ensemble, 100k imagined
rollouts per 250 env steps, K = 1; evaluations off in every arm, so only learning is charged):

* ``baseline``: the code of commit :data:`BASELINE` (the last commit before the float32 planner, the fused updates
  and one-elite rollouts), checked out with ``git archive`` into a temporary folder and imported from there;
* ``default``: today's code, MBPOConfig's defaults (the settings of every committed MBPO result);
* ``fast``: today's code with the opt-in speed options: ``sac.backend="sbx"`` (the ``sbx`` extra),
  ``model.fused_optimizer=True`` and the data-scaled fit floor ``model.min_train_epochs=20``.

A unit is one (arm, seed): a fresh process runs ``--steps`` env steps (warm-up included) and records its CPU seconds
(``time.process_time``: every thread of the process, XLA's included) and wall seconds in total and per part (SAC
updates, model fits, imagined rollouts), into ``results/mbpo_cost/<arm>__<seed>.json``. Done units are skipped on a
rerun. The summary (``results/mbpo_cost.json``) pairs the arms by seed: the median ratio of CPU seconds per 1k env
steps to the baseline's, with a bootstrap interval over seeds, and is also written into
``experiments/results/speed.json`` as the part ``mbpo_end_to_end``.

    OMP_NUM_THREADS=1 python experiments/mbrl/mbpo_cost.py --seeds 0 1 2
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tyro

REPO = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results"
UNITS = RESULTS / "mbpo_cost"
SPEED_JSON = REPO / "experiments" / "results" / "speed.json"
BASELINE = "a4f6780ea25c19e252217be87600c7e1a7c28302"
ARMS = ("baseline", "default", "fast")
#: The fast arm's options over MBPOConfig's defaults.
FAST = {"sac": {"backend": "sbx"}, "model": {"fused_optimizer": True, "min_train_epochs": 20.0}}
#: jax.monitoring's events for the seconds JAX spends tracing, lowering and compiling a computation (once per shape).
XLA_COMPILE_EVENTS = frozenset(
    f"/jax/core/compile/{stage}_duration" for stage in ("jaxpr_trace", "jaxpr_to_mlir_module", "backend_compile")
)
#: Target: the fast arm's CPU seconds per 1k env steps at most this share of the baseline's.
TARGET_RATIO = 0.6


@dataclass
class Args:
    """Command line (each field a ``--flag``)."""

    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    """seeds to run (each a unit per arm)"""
    arms: list[str] = field(default_factory=lambda: list(ARMS))
    """arms to run (baseline, default, fast)"""
    steps: int = 1200
    """env steps per unit, the 200 warm-up steps included"""
    unit: str = ""
    """internal: run one unit ``ARM:SEED`` in this process (the driver starts these)"""
    code_root: str = ""
    """internal: the source tree the unit imports"""
    side_by_side: bool = False
    """run a seed's arms at the same time, one process each (on a quiet machine with a core per arm, so that every
    arm meets the same machine state)"""


def run_unit(arm: str, seed: int, steps: int) -> dict[str, Any]:
    """One MBPO run of ``steps`` env steps in this process, its CPU and wall seconds in total and per part."""
    from mbrl.algorithms.mbpo import MBPO, MBPOConfig, SACConfig
    from mbrl.models import ModelConfig
    from rolloutlab.threads import set_torch_threads

    set_torch_threads(1)
    model_extra = FAST["model"] if arm == "fast" else {}
    sac_extra = FAST["sac"] if arm == "fast" else {}
    cfg = MBPOConfig(
        env_id="HalfCheetah-v5",
        total_steps=steps,
        seed=seed,
        controller="fixed:1",
        initial_random_steps=200,
        eval_every=0,
        checkpoint_every=0,
        sac=SACConfig(learning_rate=3e-4, batch_size=256, net_arch=[256, 256], **sac_extra),
        model=ModelConfig(**model_extra),
    )
    with tempfile.TemporaryDirectory() as run_dir:
        run = MBPO(cfg, run_dir=run_dir, log_formats=("csv",))
        parts: dict[str, list[float]] = {"sac_updates": [0.0, 0.0], "model_fits": [0.0, 0.0], "rollouts": [0.0, 0.0]}

        def charged(name: str, fn: Any) -> Any:
            def call(*args: Any, **kwargs: Any) -> Any:
                cpu, wall = time.process_time(), time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    parts[name][0] += time.process_time() - cpu
                    parts[name][1] += time.perf_counter() - wall

            return call

        # Instance attributes shadow the methods, so each part is charged however its code is organised.
        run.sac.train = charged("sac_updates", run.sac.train)
        run.model.fit = charged("model_fits", run.model.fit)
        run.model_env.rollout = charged("rollouts", run.model_env.rollout)
        compile_s = [0.0]
        if arm == "fast":
            import jax.monitoring

            def on_duration(event: str, duration: float, **_: Any) -> None:
                if event in XLA_COMPILE_EVENTS:
                    compile_s[0] += duration

            jax.monitoring.register_event_duration_secs_listener(on_duration)
        cpu, wall = time.process_time(), time.perf_counter()
        run.learn()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    per_1k = 1000.0 / steps
    return {
        "arm": arm,
        "seed": seed,
        "env_steps": steps,
        "cpu_s": cpu,
        "wall_s": wall,
        "cpu_s_per_1k_env_steps": cpu * per_1k,
        "wall_s_per_1k_env_steps": wall * per_1k,
        "parts_cpu_s_per_1k_env_steps": {name: v[0] * per_1k for name, v in parts.items()},
        "parts_wall_s_per_1k_env_steps": {name: v[1] * per_1k for name, v in parts.items()},
        "other_cpu_s_per_1k_env_steps": (cpu - sum(v[0] for v in parts.values())) * per_1k,
        # JAX traces and XLA compiles each new shape once (one thread: seconds of CPU); a long run amortizes them.
        "xla_compile_s": compile_s[0],
        "cpu_s_per_1k_env_steps_without_compile": (cpu - compile_s[0]) * per_1k,
        "model_fits": int(run.model_fits),
        "options": FAST if arm == "fast" else {},
        "code": BASELINE if arm == "baseline" else "working tree",
        "load_average": list(os.getloadavg()),
    }


def baseline_tree() -> Path:
    """The baseline commit's files in a temporary folder (``git archive``; kept for the driver's lifetime)."""
    folder = Path(tempfile.mkdtemp(prefix="mbpo_cost_baseline_"))
    archive = subprocess.run(["git", "archive", BASELINE], cwd=REPO, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def paired_ratio(units: dict[tuple[str, int], dict[str, Any]], arm: str, key: str) -> dict[str, Any]:
    """``arm``'s ``key`` over the baseline's, paired by seed: median and a 95% bootstrap interval over seeds."""
    seeds = sorted(s for (a, s) in units if a == arm and ("baseline", s) in units)
    ratios = np.array([units[(arm, s)][key] / units[("baseline", s)][key] for s in seeds])
    if len(ratios) == 0:
        return {"seeds": [], "ratios": []}
    rng = np.random.default_rng(0)
    boot = np.median(rng.choice(ratios, size=(10_000, len(ratios))), axis=1)
    return {
        "seeds": seeds,
        "ratios": ratios.tolist(),
        "median": float(np.median(ratios)),
        "interval_95": [float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))],
    }


def summarize(
    steps: int, units_dir: Path = UNITS, out: Path = RESULTS / "mbpo_cost.json", speed_json: Path = SPEED_JSON
) -> dict[str, Any]:
    """Pair the units of ``steps`` env steps in ``units_dir`` by seed into ``out`` and ``speed_json``'s part."""
    from rolloutlab.checkpoint import atomic_write_json

    units = {}
    for path in sorted(units_dir.glob("*.json")):
        unit = json.loads(path.read_text())
        if unit["env_steps"] == steps:
            units[(unit["arm"], unit["seed"])] = unit
    arms: dict[str, Any] = {}
    for arm in ARMS:
        rows = [u for (a, _), u in sorted(units.items()) if a == arm]
        if not rows:
            continue
        arms[arm] = {
            "seeds": [u["seed"] for u in rows],
            "cpu_s_per_1k_env_steps": [u["cpu_s_per_1k_env_steps"] for u in rows],
            "median_cpu_s_per_1k_env_steps": float(np.median([u["cpu_s_per_1k_env_steps"] for u in rows])),
            "median_parts_cpu_s_per_1k_env_steps": {
                part: float(np.median([u["parts_cpu_s_per_1k_env_steps"][part] for u in rows]))
                for part in rows[0]["parts_cpu_s_per_1k_env_steps"]
            },
        }
        if arm != "baseline":
            arms[arm]["cpu_ratio_to_baseline"] = paired_ratio(units, arm, "cpu_s_per_1k_env_steps")
            arms[arm]["wall_ratio_to_baseline"] = paired_ratio(units, arm, "wall_s_per_1k_env_steps")
    fast = arms.get("fast", {}).get("cpu_ratio_to_baseline", {})
    summary = {
        "command": "OMP_NUM_THREADS=1 python experiments/mbrl/mbpo_cost.py --seeds "
        + " ".join(str(s) for s in sorted({s for _, s in units})),
        "settings": f"HalfCheetah-v5, {steps} env steps per unit (200 warm-up), SAC 256x256, 10 updates per env step, "
        "7x4x200 ensemble, 100k rollouts per 250 env steps, K = 1, no evaluations; one process per unit, one thread",
        "baseline": BASELINE,
        "fast_options": FAST,
        "target_ratio": TARGET_RATIO,
        "arms": arms,
        "met": bool(fast) and fast.get("median", np.inf) <= TARGET_RATIO,
    }
    atomic_write_json(out, summary)
    if speed_json.exists():
        speed = json.loads(speed_json.read_text())
        speed.setdefault("parts", {})["mbpo_end_to_end"] = {
            "see": "experiments/mbrl/results/mbpo_cost.json",
            **{k: summary[k] for k in ("command", "settings", "target_ratio", "met")},
            "median_cpu_s_per_1k_env_steps": {arm: arms[arm]["median_cpu_s_per_1k_env_steps"] for arm in arms},
            "cpu_ratio_to_baseline": {arm: arms[arm]["cpu_ratio_to_baseline"] for arm in arms if arm != "baseline"},
        }
        atomic_write_json(speed_json, speed)
    return summary


def main() -> None:
    args = tyro.cli(Args, description=__doc__)
    if args.unit:
        sys.path.insert(0, args.code_root)
        arm, seed = args.unit.split(":")
        unit = run_unit(arm, int(seed), args.steps)
        print(json.dumps(unit))
        return
    if set(args.arms) - set(ARMS):
        raise SystemExit(f"--arms must name some of {list(ARMS)}, got {args.arms}")
    sys.path.insert(0, str(REPO))
    from rolloutlab.checkpoint import atomic_write_json

    UNITS.mkdir(parents=True, exist_ok=True)
    base: Path | None = None
    for seed in args.seeds:
        todo = [
            arm
            for arm in args.arms
            if not (UNITS / f"{arm}__{seed}.json").exists()
            or json.loads((UNITS / f"{arm}__{seed}.json").read_text())["env_steps"] != args.steps
        ]
        if "baseline" in todo and base is None:
            base = baseline_tree()
        started = []
        for arm in todo:
            root = str(base) if arm == "baseline" else str(REPO)
            # The unit imports from its own tree: this file is run from the current tree, the packages from ``root``.
            env = {**os.environ, "PYTHONPATH": root, "OMP_NUM_THREADS": "1"}
            command = [sys.executable, __file__, "--unit", f"{arm}:{seed}", "--code-root", root]
            process = subprocess.Popen(
                [*command, "--steps", str(args.steps)], env=env, stdout=subprocess.PIPE, text=True, cwd=root
            )
            started.append((arm, process))
            if not args.side_by_side:
                process.wait()
        for arm, process in started:
            stdout, _ = process.communicate()
            if process.returncode:
                raise SystemExit(f"the {arm} unit of seed {seed} failed (exit {process.returncode})")
            unit = json.loads(stdout.strip().splitlines()[-1])
            unit["side_by_side"] = args.side_by_side
            atomic_write_json(UNITS / f"{arm}__{seed}.json", unit)
            print(f"{arm} seed {seed}: {unit['cpu_s_per_1k_env_steps']:.0f} CPU-s per 1k env steps", flush=True)
    summary = summarize(args.steps)
    print(json.dumps({arm: a["median_cpu_s_per_1k_env_steps"] for arm, a in summary["arms"].items()}))


if __name__ == "__main__":
    main()
