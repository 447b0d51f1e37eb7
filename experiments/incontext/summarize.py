"""Merge the part files of ``benchmark.py`` (issue 7's benchmark) into ``results/summary_issue7.json`` (issue 7's keys),
``summary_issue7.md`` (its table) and ``summary_issue7.png``. ``results/summary.json`` is the second round's
(``matched.py``).

    python experiments/incontext/summarize.py

A part that has not been run yet appears with ``null`` numbers and ``"status": "not run"``; nothing is filled in. The
summary and its table are :mod:`experiments.incontext.benchmark_parts`'s
(:func:`~experiments.incontext.benchmark_parts.summarize_parts`,
:func:`~experiments.incontext.benchmark_parts.summary_table`).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.incontext.benchmark_parts import TMAZE_SUCCESS, summarize_parts, summary_table
from rolloutlab.checkpoint import atomic_write_json, atomic_write_text

RESULTS = Path(__file__).parent / "results"


@dataclass
class Args:
    results: str = str(RESULTS)
    """Folder of the part files; summary_issue7.json, .md and .png are written there."""


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    for ax, name in zip(axes[:2], ("bandit_5x100", "bandit_2x100"), strict=True):
        part = summary[name]
        refs = part.get("references", {})
        labels = [*refs.keys(), "agent", "RecurrentPPO"]
        values = [*refs.values(), part["agent"]["mean"] or 0.0, (part.get("recurrent_ppo") or {}).get("mean") or 0.0]
        ax.bar(range(len(values)), values, color=["0.7"] * len(refs) + ["tab:blue", "tab:orange"])
        ax.set_xticks(range(len(values)), labels, rotation=45, ha="right")
        ax.set_title(f"{name} (return per task)")
    ax = axes[2]
    tmaze = summary["tmaze"]
    if tmaze["success_by_corridor"]:
        lengths = [int(k) for k in tmaze["success_by_corridor"]]
        ax.plot(lengths, list(tmaze["success_by_corridor"].values()), "o-", label="agent (transformer)")
        ppo = tmaze["recurrent_ppo_success_by_corridor"]
        if ppo:
            ax.plot([int(k) for k in ppo], list(ppo.values()), "s--", label="RecurrentPPO")
        ablation = tmaze.get("ablation_no_sigma_reparam")
        if ablation:
            curve = ablation["success_by_corridor"]
            ax.plot([int(k) for k in curve], list(curve.values()), "^:", label="agent without sigma-reparam")
        if tmaze["memory_free_success"] is not None:
            ax.plot([tmaze["memory_free_corridor"]], [tmaze["memory_free_success"]], "x", ms=10, label="memory-free")
        ax.set_xscale("log")
    ax.axhline(TMAZE_SUCCESS, color="0.6", ls=":")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("corridor length L")
    ax.set_title("passive T-maze success")
    ax.legend(fontsize=7)
    ax = axes[3]
    keydoor = summary["keydoor"]
    values = [keydoor.get("random") or 0.0, keydoor["agent"]["mean"] or 0.0, keydoor["recurrent_ppo"]["mean"] or 0.0]
    values.append(keydoor.get("oracle") or 0.0)
    ax.bar(range(4), values, color=["0.7", "tab:blue", "tab:orange", "0.7"])
    ax.set_xticks(range(4), ["random", "agent", "RecurrentPPO", "oracle"], rotation=45, ha="right")
    ax.set_title("dark key-door 8x8 / 500 steps")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(args: Args) -> None:
    results = Path(args.results)
    summary = summarize_parts(results)
    atomic_write_json(results / "summary_issue7.json", summary)
    plot(summary, results / "summary_issue7.png")
    atomic_write_text(results / "summary_issue7.md", summary_table(summary))
    print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "references"} for k, v in summary.items()}, indent=1))


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
