"""Figures of a rollout-length evaluation: final score per arm, and the K schedule each arm chose."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


def plot_arms(results: Mapping[str, Mapping[str, Any]], path: Path, title: str = "") -> Path:
    """Bars of final greedy return (mean ± s.e.) per arm, beside each arm's K per phase (mean ± s.d. over runs).

    The right panel is where a learned schedule shows what it does differently from the fixed and scheduled arms
    (arms without ``k_schedules``, such as ``dqn_zoo``, only appear as bars).

    Args:
        results: ``{arm: {"mean", "se", "k_schedules": [[K per phase] per run], ...}}``, as from ``run_arms``.
        path: Where the PNG goes.
        title: Figure title (e.g. the env id and physics).

    Returns:
        ``path``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4))
    colors = [
        "tab:red"
        if n.startswith(("meta", "learned"))
        else "tab:gray"
        if n.startswith(("random", "dqn_zoo"))
        else "tab:blue"
        for n in names
    ]
    ax1.bar(names, [results[n]["mean"] for n in names], yerr=[results[n]["se"] for n in names], capsize=3, color=colors)
    ax1.set_ylabel("final greedy return (mean ± s.e.)")
    ax1.tick_params(axis="x", rotation=30)
    for name in names:
        schedules = results[name].get("k_schedules")
        if not schedules:
            continue
        k = np.asarray(schedules, dtype=float)
        phases = np.arange(1, k.shape[1] + 1)
        mean, sd = k.mean(axis=0), k.std(axis=0)
        style = {"lw": 2.5, "color": "tab:red"} if name.startswith(("meta", "learned")) else {"lw": 1.0}
        ax2.plot(phases, mean, marker=".", label=name, **style)
        ax2.fill_between(phases, mean - sd, mean + sd, alpha=0.12, color=style.get("color"))
    ax2.set_xlabel("phase (decision)")
    ax2.set_ylabel("rollout length K (mean ± s.d. over runs)")
    ax2.legend(fontsize=7, ncol=2)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)
