"""Merge the part files of ``benchmark.py`` into ``results/summary.json`` (issue 7's keys) and draw ``summary.png``.

    python experiments/incontext/summarize.py

A part that has not been run yet appears with ``null`` numbers and ``"status": "not run"``; nothing is filled in.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from rolloutlab.checkpoint import atomic_write_json

RESULTS = Path(__file__).parent / "results"
#: Issue 7's targets.
BANDIT5_TARGET = 75.0
BANDIT2_TARGET = 0.98 * 64.9
TMAZE_SUCCESS = 0.95
KEYDOOR_FRACTION = 0.5


def _load(name: str) -> dict[str, Any]:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _method(runs: dict[str, Any]) -> dict[str, Any]:
    keys = sorted(runs, key=int)
    per_seed = [runs[k]["eval"]["mean"] for k in keys]
    sampled = [runs[k]["eval_sampled"]["mean"] for k in keys if "eval_sampled" in runs[k]]
    return {
        "mean": float(np.mean(per_seed)) if per_seed else None,
        "per_seed": per_seed,
        "env_steps_per_seed": [runs[k]["env_steps"] for k in keys],
        # The headline is the greedy policy; the same policy with sampled actions, for reference.
        "sampled_mean": float(np.mean(sampled)) if sampled else None,
        "sampled_per_seed": sampled,
    }


def _bandit(name: str, refs: dict[str, Any], target: float) -> dict[str, Any]:
    part = _load(name)
    if not part.get("agent"):
        return {"status": "not run", "agent": {"mean": None, "per_seed": []}, "references": refs, "target": target}
    agent = _method(part["agent"])
    out = {
        "agent": agent,
        "recurrent_ppo": _method(part.get("recurrent_ppo", {})),
        "references": refs,
        "env_steps": int(np.mean(agent["env_steps_per_seed"])),
        "target": target,
        "target_met": agent["mean"] >= target,
        "shortfall": max(target - agent["mean"], 0.0),
        "wall_seconds_per_seed": [part["agent"][k]["wall_seconds"] for k in sorted(part["agent"], key=int)],
    }
    return out


def _by_corridor(runs: dict[str, Any], field: str = "success") -> dict[str, dict[str, float]]:
    """``{corridor: {seed: value}}`` from ``{corridor: {seed: run}}`` (older single-run files count as seed 0)."""
    out: dict[str, dict[str, float]] = {}
    for length, per_seed in sorted(runs.items(), key=lambda kv: int(kv[0])):
        seeds = {"0": per_seed} if "eval" in per_seed else per_seed
        out[length] = {
            seed: float(run["eval"]["mean"] if field == "success" else run[field])
            for seed, run in sorted(seeds.items(), key=lambda kv: int(kv[0]))
        }
    return out


def _tmaze(part: dict[str, Any]) -> dict[str, Any]:
    """Success vs corridor length: the mean over seeds per corridor is the curve; a corridor counts as solved when
    that mean reaches the target (so one lucky seed does not solve it)."""
    agent = _by_corridor(part.get("agent", {}))
    ppo = _by_corridor(part.get("recurrent_ppo", {}))
    steps = _by_corridor(part.get("agent", {}), "env_steps")
    by_length = {k: float(np.mean(list(v.values()))) for k, v in agent.items()}
    solved = [int(k) for k, v in by_length.items() if v >= TMAZE_SUCCESS]
    out: dict[str, Any] = {
        "success_by_corridor": by_length,
        "success_by_corridor_per_seed": agent,
        "seeds_solved_by_corridor": {k: sum(x >= TMAZE_SUCCESS for x in v.values()) for k, v in agent.items()},
        "seeds_by_corridor": {k: len(v) for k, v in agent.items()},
        "largest_solved_corridor": max(solved) if solved else None,
        "memory_free_success": part["memory_free"]["eval"]["mean"] if "memory_free" in part else None,
        "memory_free_corridor": part["memory_free"]["corridor"] if "memory_free" in part else None,
        "recurrent_ppo_success_by_corridor": {k: float(np.mean(list(v.values()))) for k, v in ppo.items()},
        "recurrent_ppo_success_by_corridor_per_seed": ppo,
        "env_steps_by_corridor": {k: float(np.mean(list(v.values()))) for k, v in steps.items()},
        "env_steps_by_corridor_per_seed": steps,
        "target": f"mean success over seeds >= {TMAZE_SUCCESS} at L >= 100",
        "target_met": any(length >= 100 for length in solved),
    }
    if not by_length:
        out["status"] = "not run"
    return out


def build() -> dict[str, Any]:
    references = _load("references")
    flat = {
        name: {policy: value["mean"] for policy, value in references.get(name, {}).items()}
        for name in ("bandit_5x100", "bandit_2x100", "keydoor")
    }
    summary: dict[str, Any] = {
        "bandit_5x100": _bandit("bandit_5x100", flat["bandit_5x100"], BANDIT5_TARGET),
        "bandit_2x100": _bandit("bandit_2x100", flat["bandit_2x100"], BANDIT2_TARGET),
    }
    summary["tmaze"] = _tmaze(_load("tmaze"))
    # The same benchmark without sigma-reparam (the setting of the first runs): the attention-collapse ablation.
    ablation = _load("tmaze_no_sigma_reparam")
    if ablation:
        full = _tmaze(ablation)
        keys = (
            "success_by_corridor",
            "seeds_solved_by_corridor",
            "seeds_by_corridor",
            "env_steps_by_corridor_per_seed",
        )
        summary["tmaze"]["ablation_no_sigma_reparam"] = {k: full[k] for k in keys}
    keydoor = _load("keydoor")
    oracle = flat["keydoor"].get("oracle")
    summary["keydoor"] = {
        "agent": _method(keydoor.get("agent", {})),
        "recurrent_ppo": _method(keydoor.get("recurrent_ppo", {})),
        "oracle": oracle,
        "random": flat["keydoor"].get("random"),
        "target": None if oracle is None else KEYDOOR_FRACTION * oracle,
    }
    agent_mean = summary["keydoor"]["agent"]["mean"]
    if agent_mean is None or oracle is None:
        summary["keydoor"]["status"] = "not run"
    else:
        summary["keydoor"]["fraction_of_oracle"] = agent_mean / oracle
        summary["keydoor"]["target_met"] = agent_mean >= KEYDOOR_FRACTION * oracle
        summary["keydoor"]["env_steps"] = int(np.mean(summary["keydoor"]["agent"]["env_steps_per_seed"]))
    costs_source = _load("bandit_5x100").get("agent", {})
    act = [run["act_steps_per_second"] for run in costs_source.values()]
    upd = [run["updates_per_second"] for run in costs_source.values()]
    summary["costs"] = {
        "act_steps_per_second": float(np.mean(act)) if act else None,
        "updates_per_second": float(np.mean(upd)) if upd else None,
        "measured_on": "bandit_5x100 agent runs (8 envs, batch 16 x 50 steps), shared 2-core CPU, 1 torch thread",
    }
    return summary


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


def _fmt(value: float | None, digits: int = 2) -> str:
    return "not run" if value is None else f"{value:.{digits}f}"


def markdown(summary: dict[str, Any]) -> str:
    """The README table: every number read from ``summary`` (nothing typed by hand)."""
    lines = [
        "| task | agent (mean; per seed) | RecurrentPPO (same env steps) | references | target | met? |",
        "|---|---|---|---|---|---|",
    ]
    for name in ("bandit_5x100", "bandit_2x100"):
        part = summary[name]
        agent, ppo = part["agent"], part.get("recurrent_ppo") or {"mean": None, "per_seed": []}
        refs = ", ".join(f"{k} {v:.1f}" for k, v in part["references"].items())
        seeds = "; ".join(f"{v:.1f}" for v in agent["per_seed"])
        met = (
            "not run"
            if "target_met" not in part
            else ("yes" if part["target_met"] else f"no (short {part['shortfall']:.1f})")
        )
        lines.append(
            f"| {name} ({part.get('env_steps', '—')} env steps/seed) | {_fmt(agent['mean'])}; {seeds} "
            f"(sampled {_fmt(agent.get('sampled_mean'))}) | "
            f"{_fmt(ppo['mean'])} (sampled {_fmt(ppo.get('sampled_mean'))}) "
            f"| {refs} | >= {part.get('target', 0):.1f} | {met} |"
        )
    tmaze = summary["tmaze"]
    curve = ", ".join(
        f"L={k}: {v:.2f} ({tmaze['seeds_solved_by_corridor'][k]}/{tmaze['seeds_by_corridor'][k]} seeds solved)"
        for k, v in tmaze["success_by_corridor"].items()
    )
    n_seeds = min(tmaze["seeds_by_corridor"].values(), default=0)
    ppo_curve = ", ".join(f"L={k}: {v:.2f}" for k, v in tmaze["recurrent_ppo_success_by_corridor"].items())
    lines.append(
        f"| T-maze success vs L (mean of {n_seeds}+ seeds) | {curve}; "
        f"largest solved {tmaze['largest_solved_corridor']} | {ppo_curve} | "
        f"optimal 1.0; memory-free agent {_fmt(tmaze['memory_free_success'])} at L={tmaze['memory_free_corridor']} | "
        f"{tmaze['target']} | {'yes' if tmaze['target_met'] else 'no'} |"
    )
    ablation = tmaze.get("ablation_no_sigma_reparam")
    if ablation:
        curve = ", ".join(
            f"L={k}: {v:.2f} ({ablation['seeds_solved_by_corridor'][k]}/{ablation['seeds_by_corridor'][k]})"
            for k, v in ablation["success_by_corridor"].items()
        )
        lines.append(f"| T-maze, agent without sigma-reparam (ablation) | {curve} | | | | |")
    keydoor = summary["keydoor"]
    seeds = "; ".join(f"{v:.1f}" for v in keydoor["agent"]["per_seed"])
    met = (
        "not run"
        if "target_met" not in keydoor
        else (f"{'yes' if keydoor['target_met'] else 'no'} ({100 * keydoor['fraction_of_oracle']:.0f}% of oracle)")
    )
    lines.append(
        f"| dark key-door ({keydoor.get('env_steps', '—')} env steps/seed) | "
        f"{_fmt(keydoor['agent']['mean'])}; {seeds} (sampled {_fmt(keydoor['agent']['sampled_mean'])}) | "
        f"{_fmt(keydoor['recurrent_ppo']['mean'])} (sampled {_fmt(keydoor['recurrent_ppo']['sampled_mean'])}) | "
        f"random {_fmt(keydoor['random'])}, oracle {_fmt(keydoor['oracle'])} | "
        f">= 50% of oracle | {met} |"
    )
    costs = summary["costs"]
    lines.append("")
    lines.append(
        f"Costs ({costs['measured_on']}): acting {_fmt(costs['act_steps_per_second'], 0)} env steps/s (KV-cached "
        f"inference + env), {_fmt(costs['updates_per_second'], 2)} updates/s."
    )
    return "\n".join(lines) + "\n"


def main() -> None:
    summary = build()
    atomic_write_json(RESULTS / "summary.json", summary)
    plot(summary, RESULTS / "summary.png")
    (RESULTS / "summary.md").write_text(markdown(summary), encoding="utf-8")
    print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "references"} for k, v in summary.items()}, indent=1))


if __name__ == "__main__":
    main()
