r"""MBPO vs SB3 SAC at matched warm-up, networks and evaluation (see experiments/mbrl/arms.py).

Arms: ``mbpo:SPEC`` (one per rollout-length controller spec), ``sac_same_utd`` (SAC at MBPO's G updates per env
step) and ``sac_utd1`` (SAC at one update per env step); same seeds, networks, warm-up and evaluation in every arm.
One env per call; each finished (arm, seed) run is saved in ``results/partial/<env>[_<tag>]/`` at once and reused on a
rerun with the same settings, so a killed benchmark resumes where it stopped.

Steps to threshold (10 seeds, evaluation every 100 env steps, 200 warm-up steps):

    OMP_NUM_THREADS=1 nice -n 5 python experiments/mbrl/sample_efficiency.py --env-id Pendulum-v1
    OMP_NUM_THREADS=1 nice -n 5 python experiments/mbrl/sample_efficiency.py --env-id InvertedPendulum-v5

Final return (HalfCheetah; several hours per MBPO run on a CPU; the SAC settings are MBPO's):

    OMP_NUM_THREADS=1 nice -n 5 python experiments/mbrl/sample_efficiency.py --env-id HalfCheetah-v5 \
        --budget 30000 --seeds 0,1,2 --arms mbpo:fixed:1,sac_same_utd --final-only \
        --net-arch 256,256 --learning-rate 3e-4 --batch-size 256 --checkpoint-every 1000

With ``--checkpoint-every N`` a run in progress is checkpointed every N env steps under
``runs/mbrl/arm_runs/<env>[_<tag>]/`` (an MBPO run continues exactly after a kill on the same machine) and as a carry
file under ``results/in_progress/<env>[_<tag>]/`` (about 12 MB; an MBPO run's without its model buffer): commit it,
and a new machine continues the run from it (MBPO with the model buffer refilled from the restored model, SAC with a
new episode; the run record's ``resumed`` lists every continuation). A finished run's checkpoints are deleted.

Writes ``results/sample_efficiency_<env>[_<tag>].json`` (the command, resolved args and settings, every run's record
and the summary entry) and the matching ``.png`` (learning curves, mean ± standard error).
``experiments/mbrl/summary.py`` then assembles ``results/summary.json``.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.mbrl.arms import (
    DEFAULT_ARMS,
    DEFAULT_NET_ARCH,
    PROTOCOL,
    THRESHOLDS,
    ArmSettings,
    ArmStorage,
    arm_order,
    collect_runs,
    parse_arms,
    run_arm,
    run_folder_name,
)
from experiments.mbrl.sample_efficiency_stats import summarize
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.statistics import pointwise_mean_with_stderr
from rolloutlab.threads import set_torch_threads

RESULTS = Path(__file__).resolve().parent / "results"
#: The protocol's longest uniform-random warm-up, in env steps.
MAX_WARMUP = 200
#: Evaluation period with --final-only when --eval-every is not given (a curve, not a resolution).
FINAL_ONLY_EVAL_EVERY = 1000


@dataclass
class Args:
    """The benchmark's command line: each field is a ``--flag`` (``env_id`` is ``--env-id``)."""

    env_id: str = "Pendulum-v1"
    """gymnasium id of the task"""
    threshold: float | None = None
    """mean evaluation return that counts as solved (default: -200 for Pendulum-v1, 950 for InvertedPendulum-v5)"""
    budget: int = 10_000
    """env steps per run, the same for every arm (a multiple of --eval-every)"""
    seeds: str = "0,1,2,3,4,5,6,7,8,9"
    """comma-separated seeds, the same for every arm"""
    arms: str = ",".join(DEFAULT_ARMS)
    """comma-separated arms: mbpo:SPEC (SPEC a rollout-length controller spec), sac_same_utd, sac_utd1"""
    final_only: bool = False
    """the target is the final evaluation return (HalfCheetah): no threshold, sparser evaluations"""
    updates_per_step: int = ArmSettings.updates_per_step
    """G: SAC gradient updates per env step for the MBPO arms and sac_same_utd (sac_utd1 uses 1)"""
    eval_every: int | None = None
    """env steps between deterministic evaluations (default: 100; 1000 with --final-only)"""
    eval_episodes: int = ArmSettings.eval_episodes
    """episodes per evaluation, with fixed seeds"""
    initial_random_steps: int = ArmSettings.initial_random_steps
    """uniform-random warm-up steps in every arm (SAC's learning_starts; at most 200)"""
    learning_rate: float = ArmSettings.learning_rate
    """SAC learning rate in every arm"""
    batch_size: int = ArmSettings.batch_size
    """SAC batch size in every arm"""
    net_arch: str = ",".join(map(str, DEFAULT_NET_ARCH))
    """SAC hidden widths in every arm"""
    rollout_batch_size: int | None = None
    """MBPO imagined rollouts started per model refit (default: MBPOConfig's)"""
    model_retain_epochs: int | None = None
    """MBPO epochs of imagined data kept (default: MBPOConfig's)"""
    model_train_freq: int | None = None
    """MBPO env steps between model refits, also its epoch length (default: MBPOConfig's)"""
    model_max_train_steps: int | None = None
    """cap on model gradient steps per refit (default: ModelConfig's, no cap)"""
    model_min_train_epochs: float | None = None
    """MBPO's data-scaled fit floor in epochs (default: ModelConfig's, off: the fixed min_train_steps floor)"""
    model_fused_optimizer: bool = False
    """MBPO's world model fitted with fused Adam (equal to the default to float32 rounding, faster)"""
    model_precision: str = "float32"
    """MBPO's world-model precision: float32 or bf16 (hidden layers in bfloat16, opt-in)"""
    sac_backend: str = "sb3"
    """MBPO's SAC update backend: sb3, fused or sbx (the sbx extra)"""
    tag: str = ""
    """suffix for the output file names"""
    checkpoint_every: int = 0
    """checkpoint runs in progress every this many env steps, locally and as a carry file to commit (0: never;
    runs of the threshold benchmarks take minutes)"""
    full_budget: bool = False
    """run every arm to the budget even after it reached the threshold (default: stop there; the steps to threshold
    are the same, since runs are seeded, and the learning curves end at the threshold)"""


def parse_args() -> Args:
    """Every ``Args`` field as a ``--flag`` (tyro; the field docstrings are the help text)."""
    return tyro.cli(Args, description=__doc__)


def command_line(args: Args) -> str:
    """A command that reproduces ``args``: the script with every flag whose value is not the default."""
    parts = ["python", "experiments/mbrl/sample_efficiency.py"]
    for f in dataclasses.fields(Args):
        value = getattr(args, f.name)
        if value == f.default:
            continue
        flag = "--" + f.name.replace("_", "-")
        if isinstance(value, bool):
            parts.append(flag if value else f"--no-{flag[2:]}")
        else:
            parts += [flag, str(value)]
    return shlex.join(parts)


def settings_from_args(args: Args, threshold: float | None = None) -> ArmSettings:
    """The shared arm settings; only the MBPO fields a flag names override MBPOConfig's defaults. With a
    ``threshold`` (steps-to-threshold mode) runs stop when they reach it, unless ``--full-budget``."""
    eval_every = args.eval_every or (FINAL_ONLY_EVAL_EVERY if args.final_only else ArmSettings.eval_every)
    if args.initial_random_steps > MAX_WARMUP:
        raise SystemExit(
            f"--initial-random-steps {args.initial_random_steps}: the protocol allows at most {MAX_WARMUP}"
        )
    if args.budget % eval_every:
        raise SystemExit(f"--budget {args.budget} must be a multiple of the evaluation period {eval_every}")
    mbpo: dict[str, Any] = {}
    if args.rollout_batch_size is not None:
        mbpo["rollout_batch_size"] = args.rollout_batch_size
    if args.model_retain_epochs is not None:
        mbpo["model_retain_epochs"] = args.model_retain_epochs
    if args.model_train_freq is not None:
        mbpo["model_train_freq"] = mbpo["epoch_length"] = args.model_train_freq
    model: dict[str, Any] = {}
    if args.model_max_train_steps is not None:
        model["max_train_steps"] = args.model_max_train_steps
    if args.model_min_train_epochs is not None:
        model["min_train_epochs"] = args.model_min_train_epochs
    if args.model_fused_optimizer:
        model["fused_optimizer"] = True
    if args.model_precision != "float32":
        model["precision"] = args.model_precision
    if model:
        mbpo["model"] = model
    if args.sac_backend != "sb3":
        mbpo["sac"] = {"backend": args.sac_backend}
    return ArmSettings(
        env_id=args.env_id,
        budget=args.budget,
        updates_per_step=args.updates_per_step,
        eval_every=eval_every,
        eval_episodes=args.eval_episodes,
        initial_random_steps=args.initial_random_steps,
        learning_rate=args.learning_rate,
        batch_size=args.batch_size,
        net_arch=[int(w) for w in args.net_arch.split(",")],
        mbpo=mbpo,
        stop_at=None if args.full_budget else threshold,
    )


def plot(path: Path, runs: list[dict[str, Any]], threshold: float | None, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for arm in arm_order(sorted({r["arm"] for r in runs})):
        curves = [r["eval"] for r in runs if r["arm"] == arm and r["eval"]]
        if not curves:
            continue
        n = min(len(c) for c in curves)
        steps = np.array([curves[0][i][0] for i in range(n)])
        values = np.array([[c[i][1] for i in range(n)] for c in curves])
        mean, se = pointwise_mean_with_stderr(values)
        ax.plot(steps, mean, label=f"{arm} (n={len(curves)})")
        ax.fill_between(steps, mean - se, mean + se, alpha=0.2)
    if threshold is not None:
        ax.axhline(threshold, color="grey", linestyle="--", linewidth=1, label="threshold")
    ax.set_xlabel("env steps")
    ax.set_ylabel("eval return (mean ± s.e. over seeds)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(args: Args | None = None, results: Path = RESULTS) -> dict[str, Any]:
    """Run (or resume) the benchmark and write its results file; returns the summary entry."""
    if args is None:
        args = parse_args()
    set_torch_threads(1)
    arms = parse_arms(args.arms)
    threshold = (
        None if args.final_only else (args.threshold if args.threshold is not None else THRESHOLDS.get(args.env_id))
    )
    if not args.final_only and threshold is None:
        raise SystemExit(f"--threshold is needed for {args.env_id} (known: {THRESHOLDS}), or --final-only")
    mode = "final_return" if args.final_only else "threshold"
    settings = settings_from_args(args, threshold)
    seeds = [int(s) for s in args.seeds.split(",")]
    name = args.env_id.replace("/", "-") + (f"_{args.tag}" if args.tag else "")
    out = results / f"sample_efficiency_{name}.json"
    if out.exists() and json.loads(out.read_text()).get("protocol") != PROTOCOL:
        raise SystemExit(f"{out} holds results of another protocol (round one); choose another --tag")
    command = command_line(args)

    def write(runs: list[dict[str, Any]]) -> dict[str, Any]:
        entry = summarize(mode, args.env_id, threshold, args.budget, runs, np.random.default_rng(0))
        atomic_write_json(
            out,
            {
                "protocol": PROTOCOL,
                "mode": mode,
                "threshold": threshold,
                "command": command,
                "args": dataclasses.asdict(args),
                "settings": dataclasses.asdict(settings),
                "entry": entry,
                "runs": runs,
            },
        )
        plot(out.with_suffix(".png"), runs, threshold, f"{args.env_id}, budget {args.budget}")
        return entry

    storage = None
    if args.checkpoint_every:
        storage = ArmStorage(
            work_dir=Path("runs") / "mbrl" / "arm_runs" / name,
            carry_dir=results / "in_progress" / name,
            checkpoint_every=args.checkpoint_every,
        )

    def report(record: dict[str, Any], runs: list[dict[str, Any]]) -> None:
        if storage is not None:
            # The record is saved: the run's checkpoints are no longer needed (its logs stay in the work folder).
            stem = run_folder_name(record["arm"], record["seed"])
            assert storage.carry_dir is not None
            (storage.carry_dir / f"{stem}.pt").unlink(missing_ok=True)
            for name in ("checkpoint.pt", "sac_checkpoint.pt"):
                (storage.work_dir / stem / name).unlink(missing_ok=True)
        print(
            f"{args.env_id} {record['arm']} seed {record['seed']}: final {record['final_return']:.1f} "
            f"in {record['seconds']:.0f}s",
            flush=True,
        )
        write(runs)

    def run(arm: str, arm_settings: ArmSettings, seed: int) -> dict[str, Any]:
        return run_arm(arm, arm_settings, seed, storage)

    runs = collect_runs(arms, seeds, settings, results / "partial" / name, run=run, on_run=report)
    entry = write(runs)
    for arm, row in entry["arms"].items():
        steps = f"median steps {row['median_steps']}  never {row['never_reached']}  " if mode == "threshold" else ""
        print(f"{arm:16s} {steps}final {row['final_return']}  wall s median {row['seconds_median']:.0f}")
    targets = ("ratio_sac_utd1_over_mbpo", "ratio_best_sac_over_mbpo") if mode == "threshold" else ()
    for key in (*targets, "mbpo_minus_sac_same_utd"):
        value = entry.get(key)
        if value is not None:
            point = value["value"] if "value" in value else value["mean"]
            print(f"{key} (MBPO = {entry['mbpo_arm']}): {point:.3g}  95% CI {value['ci']}  met {value['met']}")
    return entry


if __name__ == "__main__":
    main()
