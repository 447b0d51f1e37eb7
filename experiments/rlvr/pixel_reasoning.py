"""Adaptive pixel reasoning: when to call the zoom tool, learned by rollout-guided GRPO, against fixed arms.

Run from the repository root (one thread, low priority, resumable):

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python experiments/rlvr/pixel_reasoning.py

Every unit is one arm on one RL seed: the one operation-aware SFT warm start (a trace calls the zoom tool with
probability 1/2 on every query kind; trained by the first unit and kept under ``runs/pixel_reasoning/``, so every unit
starts from the same policy, as in the other RLVR benchmarks), then GRPO (``uniform:8``, 16 queries per step) on the
zoom-query task (:mod:`envs.vision.zoom_queries`; 30% of queries ask for a small glyph's digit, which needs the zoom,
the rest ask for the background tint or the number of large squares).
Arms (:func:`meta.rlvr.vision.arms.make_tool_arm`):

* ``always_zoom``: every response calls the tool (the accuracy ceiling);
* ``never_zoom``: the tool is masked out;
* ``free_zoom``: the policy decides, rewarded for correctness only;
* ``penalty``: the policy decides, every call costs 0.1 (the fixed tool-penalty baseline);
* ``guided``: the policy decides, the rollout-guided rule rewards a call by ±0.2 where the policy's own success
  with the tool beats its success without by more than 0.1 (or not).

Each finished unit writes ``results/pixel_reasoning/<arm>__<seed>.json`` at once (skipped when present). The summary
(``results/pixel_reasoning/summary.json`` and ``accuracy_vs_tool_use.svg``) gives, per arm, the final greedy held-out
accuracy, tool-use ratio and tool-use rates on fine and coarse queries, seed means with 95% bootstrap intervals, the
guided arm's paired accuracy difference to always-zoom, and the targets: accuracy within 1 point of always-zoom (or
above) at a tool-use ratio of at most 35%, and a fine-query tool-use rate at least 3x the coarse one.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.sweep import Unit, grid, run_sweep, unit_file
from meta.rlvr.vision.run import PixelReasoningConfig, PixelReasoningRun
from rolloutlab.checkpoint import atomic_write_json, atomic_write_text
from rolloutlab.statistics import mean_interval, paired_difference
from rolloutlab.threads import set_torch_threads

COMMAND = "OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python experiments/rlvr/pixel_reasoning.py"
#: Arm name (file names) -> tool-arm spec.
ARMS: dict[str, str] = {
    "always_zoom": "always_zoom",
    "never_zoom": "never_zoom",
    "free_zoom": "free_zoom",
    "penalty": "zoom_penalty:0.1",
    "guided": "rollout_guided:0.2,0.1",
}
ADAPTIVE, CEILING = "guided", "always_zoom"
#: Targets: accuracy at most this far below always-zoom, tool-use ratio at most this, fine/coarse tool-use ratio.
MAX_ACCURACY_GAP, MAX_TOOL_RATIO, MIN_FINE_OVER_COARSE = 0.01, 0.35, 3.0
METRICS = ("accuracy", "tool_ratio", "tool_rate_fine", "tool_rate_coarse", "accuracy_fine", "accuracy_coarse")
N_BOOT = 2000


@dataclass
class Args:
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    """RL seeds (GRPO prompt order and sampling); the query sets and the SFT warm start are shared by all."""
    arms: list[str] = field(default_factory=lambda: list(ARMS))
    """Arms to run (names of ARMS)."""
    steps: int = 40
    """GRPO steps per unit."""
    sft_steps: int = 1200
    """Operation-aware SFT steps per unit."""
    sft_dir: str = "runs/pixel_reasoning"
    """Where the SFT warm start is kept (trained by the first unit, loaded by the others)."""
    out: str = "experiments/rlvr/results/pixel_reasoning"
    """Results folder (one JSON per unit, summary.json, accuracy_vs_tool_use.svg)."""
    summary_only: bool = False
    """Summarise the units on disk without running the missing ones."""


def run_unit(args: Args, unit: Unit) -> dict[str, Any]:
    """One arm on one seed: SFT, GRPO, evaluations; the record written to the unit's file."""
    cfg = PixelReasoningConfig(
        arm=ARMS[unit.arm], seed=unit.seed, steps=args.steps, sft_checkpoint=f"{args.sft_dir}/sft.pt"
    )
    cfg.sft.steps = args.sft_steps
    started = time.perf_counter()
    result = PixelReasoningRun(cfg, progress=True).learn()
    return {
        "arm": unit.arm,
        "spec": ARMS[unit.arm],
        "seed": unit.seed,
        "seconds": time.perf_counter() - started,
        "command": COMMAND,
        **result,
    }


def _interval(values: list[float]) -> dict[str, Any]:
    estimate = mean_interval(values, rng=0, n_resamples=N_BOOT)
    return {"mean": estimate.value, "ci": [estimate.low, estimate.high]}


def summarise(records: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per-arm seed means with intervals, the adaptive arm's paired gap to always-zoom, and the targets."""
    arms: dict[str, Any] = {}
    for arm, recs in records.items():
        finals = [r["final"] for r in recs]
        arms[arm] = {
            "spec": ARMS[arm],
            "seeds": [r["seed"] for r in recs],
            **{m: _interval([f[m] for f in finals]) for m in METRICS},
            "rollouts": float(np.mean([r["totals"]["rollouts"] + r["totals"]["probe_rollouts"] for r in recs])),
            "seconds": float(np.mean([r["seconds"] for r in recs])),
        }
    out: dict[str, Any] = {"command": COMMAND, "arms": arms, "targets": None}
    if ADAPTIVE in records and CEILING in records:
        by_seed = {r["seed"]: r["final"] for r in records[CEILING]}
        pairs = [(r["final"], by_seed[r["seed"]]) for r in records[ADAPTIVE] if r["seed"] in by_seed]
        if pairs:
            gap = paired_difference(
                [a["accuracy"] for a, _ in pairs], [b["accuracy"] for _, b in pairs], rng=0, n_resamples=N_BOOT
            )
            adaptive = arms[ADAPTIVE]
            fine, coarse = adaptive["tool_rate_fine"]["mean"], adaptive["tool_rate_coarse"]["mean"]
            fine_over_coarse = fine / coarse if coarse > 0 else (float("inf") if fine > 0 else 0.0)
            out["targets"] = {
                "paired_seeds": len(pairs),
                "accuracy_gap_to_always_zoom": {"mean": gap.value, "ci": [gap.low, gap.high]},
                "accuracy_met": gap.value >= -MAX_ACCURACY_GAP,
                "tool_ratio": adaptive["tool_ratio"]["mean"],
                "tool_ratio_met": adaptive["tool_ratio"]["mean"] <= MAX_TOOL_RATIO,
                "fine_over_coarse": fine_over_coarse if np.isfinite(fine_over_coarse) else None,
                "fine_over_coarse_met": fine_over_coarse >= MIN_FINE_OVER_COARSE,
                "seeds_met": len(pairs) >= 5,
            }
            out["targets"]["all_met"] = all(v for k, v in out["targets"].items() if k.endswith("_met"))
    return out


def plot_svg(summary: dict[str, Any], path: Path) -> None:
    """Accuracy against tool-use ratio per arm, seed means with 95% intervals on both axes (SVG text)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for arm, s in summary["arms"].items():
        x, y = s["tool_ratio"], s["accuracy"]
        ax.errorbar(
            x["mean"],
            y["mean"],
            xerr=[[x["mean"] - x["ci"][0]], [x["ci"][1] - x["mean"]]],
            yerr=[[y["mean"] - y["ci"][0]], [y["ci"][1] - y["mean"]]],
            fmt="o",
            capsize=3,
            label=arm,
        )
    ax.axvline(MAX_TOOL_RATIO, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("tool-use ratio (held-out, greedy)")
    ax.set_ylabel("accuracy (held-out, greedy)")
    ax.set_xlim(-0.05, 1.05)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("Zoom queries: accuracy vs tool use (95% seed intervals)", fontsize=9)
    fig.tight_layout()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(fig)
    atomic_write_text(path, buffer.getvalue())


def main(args: Args) -> dict[str, Any]:
    unknown = [a for a in args.arms if a not in ARMS]
    if unknown:
        raise SystemExit(f"--arms: unknown arm {unknown[0]!r}; known arms: {', '.join(ARMS)}")
    set_torch_threads(1)
    folder = Path(args.out)
    units = grid(args.arms, args.seeds, lambda arm, seed: unit_file(folder, arm, seed))
    if args.summary_only:
        units = [u for u in units if u.path.is_file()]
        records = run_sweep(units, lambda unit: run_unit(args, unit), show_progress=False)
    else:
        records = run_sweep(units, lambda unit: run_unit(args, unit))
    by_arm: dict[str, list[dict[str, Any]]] = {}
    for unit, record in records.items():
        by_arm.setdefault(unit.arm, []).append(record)
    summary = summarise(by_arm)
    summary["args"] = asdict(args)
    atomic_write_json(folder / "summary.json", summary)
    if by_arm:
        plot_svg(summary, folder / "accuracy_vs_tool_use.svg")
    for arm, s in summary["arms"].items():
        print(
            f"{arm:12s} acc {s['accuracy']['mean']:.3f} [{s['accuracy']['ci'][0]:.3f}, {s['accuracy']['ci'][1]:.3f}]  "
            f"tool {s['tool_ratio']['mean']:.3f}  fine {s['tool_rate_fine']['mean']:.3f}  "
            f"coarse {s['tool_rate_coarse']['mean']:.3f}  n={len(s['seeds'])}"
        )
    if summary["targets"]:
        print("targets:", summary["targets"])
    return summary


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
