r"""PETS (CEM and MPPI) on the learned ensemble: env steps to threshold and planning latency, beside MBPO and SAC.

The protocol: Pendulum-v1 and InvertedPendulum-v5, 5 seeds, the MBPO benchmark's
thresholds and evaluation protocol (every 100 env steps, 5 episodes, evaluation env reseeded to seed + 10000, 200
uniform-random warm-up steps). A PETS run stops at its first evaluation that reaches the threshold. MBPO and SAC at one
update per step come from the MBPO benchmark's saved runs for the same seeds
(``experiments/mbrl/sample_efficiency.py``), wherever those have finished.

    OMP_NUM_THREADS=1 python experiments/mbrl/pets.py --envs Pendulum-v1 --budget 2000
    OMP_NUM_THREADS=1 python experiments/mbrl/pets.py --envs InvertedPendulum-v5 --budget 1000

Each finished (env, arm, seed) run is saved in ``results/pets_partial/<env>[_<tag>]/`` at once and reused on a rerun
with the same settings, so a killed benchmark resumes where it stopped. Writes ``results/pets.json`` (per env the
command that made it, the summary under ``envs.<env>.<arm>`` and every run; envs of earlier calls are kept),
``results/pets.png`` (evaluation curves) and ``results/pets.md`` (the table docs/results/mpc.md quotes). Every run uses
PETSConfig's defaults apart from the protocol's settings above. The benchmark's logic (settings, runs, summary, table)
is :mod:`experiments.mbrl.pets_protocol`'s.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.mbrl.arms import THRESHOLDS
from experiments.mbrl.pets_protocol import (
    PETS_ARMS,
    PETSSettings,
    collect_pets_runs,
    mbpo_reference,
    pets_table,
    summarize_env,
)
from rolloutlab.checkpoint import atomic_write_json, atomic_write_text
from rolloutlab.threads import set_torch_threads

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Args:
    """The benchmark's command line: each field is a ``--flag``."""

    envs: str = "Pendulum-v1,InvertedPendulum-v5"
    """comma-separated gymnasium ids (each needs a threshold: Pendulum-v1, InvertedPendulum-v5)"""
    seeds: str = "0,1,2,3,4"
    """comma-separated seeds, the same for every arm"""
    arms: str = ",".join(PETS_ARMS)
    """comma-separated PETS arms: pets_cem, pets_mppi"""
    budget: int = PETSSettings.budget
    """env steps at most per PETS run (a run that never reaches the threshold counts as this)"""
    eval_every: int = PETSSettings.eval_every
    """env steps between evaluations"""
    eval_episodes: int = PETSSettings.eval_episodes
    """episodes per evaluation"""
    initial_random_steps: int = PETSSettings.initial_random_steps
    """uniform-random warm-up steps"""
    mbpo_results: Path = RESULTS
    """folder of the MBPO benchmark's results (its partial/<env>/ run records)"""
    tag: str = ""
    """suffix for the partial-run folders and output files"""


def command_line(args: Args) -> str:
    """A command that reproduces ``args``: the script with every flag whose value is not the default."""
    parts = ["python", "experiments/mbrl/pets.py"]
    for f in dataclasses.fields(Args):
        value = getattr(args, f.name)
        if value != f.default:
            parts += ["--" + f.name.replace("_", "-"), str(value)]
    return shlex.join(parts)


def plot(path: Path, records: list[dict[str, Any]], thresholds: dict[str, float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(thresholds)
    fig, axes = plt.subplots(1, len(envs), figsize=(6 * len(envs), 4), squeeze=False)
    for ax, env_id in zip(axes[0], envs, strict=True):
        for colour, arm in zip(("tab:blue", "tab:orange"), PETS_ARMS, strict=False):
            for i, r in enumerate(x for x in records if x["env"] == env_id and x["arm"] == arm):
                steps, values = zip(*r["eval"], strict=True) if r["eval"] else ((), ())
                ax.plot(steps, values, color=colour, alpha=0.7, marker=".", label=arm if i == 0 else None)
        ax.axhline(thresholds[env_id], color="grey", linestyle="--", linewidth=1, label="threshold")
        ax.set_title(f"{env_id}: PETS per seed (runs stop at the threshold)")
        ax.set_xlabel("env steps")
        ax.set_ylabel("evaluation return")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(args: Args | None = None, results: Path = RESULTS) -> dict[str, Any]:
    """Run (or resume) the benchmark and write ``pets.json``; returns its ``envs`` summary."""
    if args is None:
        args = tyro.cli(Args, description=__doc__)
    set_torch_threads(1)
    envs = [e.strip() for e in args.envs.split(",") if e.strip()]
    unknown = [e for e in envs if e not in THRESHOLDS]
    if unknown:
        raise SystemExit(f"no threshold for {unknown}; known: {THRESHOLDS}")
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if not arms or set(arms) - set(PETS_ARMS):
        raise SystemExit(f"--arms must name some of {list(PETS_ARMS)}, got {args.arms!r}")
    seeds = [int(s) for s in args.seeds.split(",")]
    suffix = f"_{args.tag}" if args.tag else ""
    out = results / f"pets{suffix}.json"
    summary: dict[str, Any] = {}
    commands: dict[str, str] = {}
    all_records: list[dict[str, Any]] = []

    def write() -> None:
        # Envs written by other calls (e.g. one process per env) are kept, each with the command that made it; the
        # file is re-read just before every write so that parallel calls do not drop each other's envs.
        previous = json.loads(out.read_text()) if out.exists() else {"envs": {}, "runs": [], "commands": {}}
        kept = [e for e in previous["envs"] if e not in summary]
        merged = {
            "commands": {**{e: previous["commands"][e] for e in kept}, **commands},
            "envs": {**{e: previous["envs"][e] for e in kept}, **summary},
            "runs": [r for r in previous["runs"] if r["env"] in kept] + all_records,
        }
        atomic_write_json(out, merged)
        atomic_write_text(out.with_suffix(".md"), pets_table(merged["envs"]))
        plot(results / f"pets{suffix}.png", merged["runs"], {e: THRESHOLDS[e] for e in merged["envs"]})

    for env_id in envs:
        settings = PETSSettings(
            env_id=env_id,
            threshold=THRESHOLDS[env_id],
            budget=args.budget,
            eval_every=args.eval_every,
            eval_episodes=args.eval_episodes,
            initial_random_steps=args.initial_random_steps,
        )
        started = time.perf_counter()

        def report(record: dict[str, Any], env_id: str = env_id, started: float = started) -> None:
            print(
                f"{env_id} {record['arm']} seed {record['seed']}: steps to threshold {record['steps_to_threshold']}"
                f", plan {record['plan_ms_p50']:.1f} ms (p95 {record['plan_ms_p95']:.1f}), {record['seconds']:.0f}s"
                f" ({time.perf_counter() - started:.0f}s into this env)",
                flush=True,
            )

        records = collect_pets_runs(
            arms, seeds, settings, results / "pets_partial" / f"{env_id}{suffix}", on_run=report
        )
        try:
            reference, reference_budget = mbpo_reference(args.mbpo_results, env_id)
        except ValueError as error:
            raise SystemExit(str(error)) from None
        summary[env_id] = summarize_env(settings, records, reference, reference_budget)
        commands[env_id] = command_line(args)
        all_records += [{"env": env_id, **r} for r in records]
        write()
    for env_id, entry in summary.items():
        for arm in (*PETS_ARMS, "mbpo", "sac_utd1"):
            if arm in entry:
                row = entry[arm]
                extra = f"  plan p50 {row['plan_ms_p50']:.1f} ms" if "plan_ms_p50" in row else ""
                print(f"{env_id} {arm:10s} median steps {row['median_steps_to_threshold']:.0f}{extra}")
    return summary


if __name__ == "__main__":
    main()
