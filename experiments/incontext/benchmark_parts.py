"""The in-context pillar's parts benchmark: the AMAGO-style agent against RecurrentPPO and the reference policies.

The benchmark is split into parts (:data:`PARTS`), each kept in one result file that is saved after every finished run,
so a killed benchmark loses at most the run in progress, and that run resumes from its checkpoint:

* ``references``: bandit reference policies (Monte Carlo, exact DP for 2 arms), key-door random and oracle
  (:func:`run_references`);
* ``bandit_5x100`` / ``bandit_2x100`` / ``keydoor``: the agent and RecurrentPPO (at the agent's env steps), per seed
  (:func:`run_seeded_part`);
* ``tmaze``: success of the agent (and of RecurrentPPO at its env steps) against corridor length, per seed, and the
  memory-free encoder at the shortest corridor (:func:`run_tmaze`).

The agent's settings per part are :func:`train_config` (sized for a 2-core CPU); a stored run whose resolved config
differs from it is another benchmark and is rerun (:func:`config_changed`). :func:`summarize_parts` merges the part
files into issue 7's summary and :func:`summary_table` is the table the README quotes. ``experiments/incontext/``
holds the command lines (``benchmark.py``, ``summarize.py``, ``run_all.sh``); :mod:`experiments.incontext.quick` is
the pillar's line in ``rolloutlab bench``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from envs.metarl.references import (
    BANDIT_POLICIES,
    bandit_monte_carlo,
    bayes_optimal_two_arm_value,
    keydoor_monte_carlo,
)
from meta.incontext.config import AgentConfig, TrainConfig, with_saved_defaults
from rolloutlab.config import from_dict, to_dict

#: The benchmark's parts, one result file each.
PARTS = ("references", "bandit_5x100", "bandit_2x100", "tmaze", "keydoor")
#: Parts that train the agent and RecurrentPPO once per seed.
SEEDED_PARTS = ("bandit_5x100", "bandit_2x100", "keydoor")
#: Issue 7's targets.
BANDIT5_TARGET = 75.0
BANDIT2_TARGET = 0.98 * 64.9
TMAZE_SUCCESS = 0.95
KEYDOOR_FRACTION = 0.5


def _print(line: str) -> None:
    print(line, flush=True)


@dataclass
class AgentRunSettings:
    """What every agent run of a part shares besides the part's own settings (``experiments/incontext/benchmark.py``'s
    ``Args`` extends it; these fields are its flags)."""

    minutes_per_run: float = 6.0
    """Wall-clock cap of one agent training run; the env steps it reached are recorded and given to RecurrentPPO."""
    max_env_steps: int = 2_000_000
    """Env-step budget of one agent run (the wall-clock cap usually ends it first on this machine)."""
    eval_tasks: int = 200
    """Evaluation tasks per run (the same tasks for every seed and method)."""
    sigma_reparam: bool = True
    """Spectrally reparametrized Transformer layers (AMAGO's guard against attention entropy collapse);
    ``--no-sigma-reparam`` with ``--tag _no_sigma_reparam`` is the ablation."""


def train_config(
    part: str, seed: int, settings: AgentRunSettings, corridor: int = 10, encoder: str = "transformer"
) -> TrainConfig:
    """The agent's settings for one run of ``part``, sized for a 2-core CPU (width 32, 1-2 layers: the budget allows
    a few thousand updates).

    Raises:
        ValueError: an unknown part (``references`` trains no agent).
    """
    if part.startswith("bandit"):
        n_arms = 5 if part == "bandit_5x100" else 2
        return TrainConfig(
            task="bandit", n_arms=n_arms, horizon=100, seed=seed, total_env_steps=settings.max_env_steps,
            max_minutes=settings.minutes_per_run, n_envs=8, batch_size=16, window=50, updates_per_step=0.1,
            learning_starts=1_600, eps_anneal_steps=10_000, eval_tasks=settings.eval_tasks, eval_every_steps=8_000,
            agent=AgentConfig(d_model=32, n_layers=1, n_heads=2, head_hidden=32, context_len=50,
                              gammas=[0.8, 0.95], tau=0.02, sigma_reparam=settings.sigma_reparam),
        )  # fmt: skip
    if part == "tmaze":
        return TrainConfig(
            task="tmaze", corridor_length=corridor, seed=seed, total_env_steps=settings.max_env_steps,
            max_minutes=settings.minutes_per_run, n_envs=8, batch_size=16, window=corridor + 1, updates_per_step=0.1,
            learning_starts=4 * (corridor + 1) * 8, eps_anneal_steps=20 * (corridor + 1) * 8, eval_tasks=100,
            eval_every_steps=8 * (corridor + 1) * 10, stop_at_return=0.99 if encoder != "memory_free" else None,
            agent=AgentConfig(encoder=encoder, d_model=32, n_layers=1, n_heads=2, head_hidden=32,  # type: ignore[arg-type]
                              context_len=corridor + 2, gammas=[0.9, 0.99, 0.999],
                              sigma_reparam=settings.sigma_reparam),
        )  # fmt: skip
    if part == "keydoor":
        return TrainConfig(
            task="keydoor", seed=seed, total_env_steps=settings.max_env_steps, max_minutes=settings.minutes_per_run,
            n_envs=8, batch_size=16, window=128, updates_per_step=0.02, learning_starts=4_000,
            eps_anneal_steps=60_000, eval_tasks=min(settings.eval_tasks, 100), eval_every_steps=40_000,
            agent=AgentConfig(d_model=32, n_layers=2, n_heads=2, head_hidden=32, context_len=128,
                              gammas=[0.9, 0.99, 0.999], sigma_reparam=settings.sigma_reparam),
        )  # fmt: skip
    raise ValueError(f"unknown part {part!r}")


def load_part(path: Path) -> dict[str, Any]:
    """A part's result file, or an empty part if it does not exist yet."""
    return json.loads(path.read_text()) if path.exists() else {}


def _dotted(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config dict flattened to dotted keys (``agent.lr``)."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update(_dotted(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def config_differences(stored: dict[str, Any], cfg: TrainConfig) -> list[str]:
    """The fields, dotted (``agent.lr``), in which a stored run's resolved config differs from ``cfg``."""
    # Fields added since the run get the defaults of the code that ran it.
    old = _dotted(to_dict(from_dict(TrainConfig, with_saved_defaults(stored))))
    current = _dotted(to_dict(cfg))
    return sorted(
        key for key in old.keys() | current.keys() if key not in old or key not in current or old[key] != current[key]
    )


def config_changed(stored: dict[str, Any], cfg: TrainConfig, ignore_time_cap: bool = False) -> bool:
    """Whether a stored run's resolved config differs from ``cfg`` (the wall-clock cap optionally ignored: a T-maze
    run stops when solved, and an extended one records its extension's cap)."""
    ignored = {"max_minutes"} if ignore_time_cap else set()
    return bool(set(config_differences(stored, cfg)) - ignored)


def nest_single_seed_runs(runs: dict[str, Any]) -> None:
    """Older T-maze files hold one run per corridor (seed 0); nest them as ``{corridor: {seed: run}}`` in place."""
    for key, value in list(runs.items()):
        if "eval" in value:
            runs[key] = {"0": value}


def run_agent(cfg: TrainConfig, run_dir: Path) -> dict[str, Any]:
    """Train (or resume from ``run_dir``'s checkpoint) one agent run; its result with the greedy and sampled scores."""
    from meta.incontext.trainer import InContextTrainer, evaluate_agent

    run_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    trainer = InContextTrainer(cfg, run_dir, resume=True)
    result = trainer.learn()
    result["wall_seconds"] = time.perf_counter() - start
    result["eval"].pop("returns")
    # The headline is greedy (argmax); the sampled policy is recorded beside it.
    result["eval_sampled"] = {"mean": float(evaluate_agent(trainer.agent, cfg, cfg.eval_tasks, greedy=False).mean())}
    return result


def _recurrent_ppo(task: str, env_steps: int, seed: int, eval_tasks: int, **task_kwargs: Any) -> dict[str, Any]:
    from meta.incontext.baseline import train_recurrent_ppo

    ppo = train_recurrent_ppo(task, env_steps, seed, eval_tasks, None, **task_kwargs)
    ppo["eval"].pop("returns")
    return ppo


def run_references(
    part: dict[str, Any], reference_tasks: int, keydoor_reference_tasks: int, log: Callable[[str], None] = _print
) -> bool:
    """Fill ``part`` with the reference policies' scores; ``False`` (nothing done) if it already holds them.

    Bandits 5x100 and 2x100: every policy of :data:`envs.metarl.references.BANDIT_POLICIES` by Monte Carlo over
    ``reference_tasks`` tasks, plus the exact (DP) Bayes-optimal value for 2 arms; key-door: random and oracle over
    ``keydoor_reference_tasks`` tasks.
    """
    if {"bandit_5x100", "bandit_2x100", "keydoor"} <= set(part):
        return False
    for n_arms in (5, 2):
        refs: dict[str, Any] = {}
        for policy in BANDIT_POLICIES:
            mean, stderr = bandit_monte_carlo(policy, n_arms, 100, reference_tasks, seed=0)
            refs[policy] = {"mean": mean, "stderr": stderr}
        if n_arms == 2:
            refs["bayes_optimal"] = {"mean": bayes_optimal_two_arm_value(100), "stderr": 0.0, "method": "DP"}
        part[f"bandit_{n_arms}x100"] = refs
        log(f"bandit {n_arms}x100: { ({k: round(v['mean'], 2) for k, v in refs.items()}) }")
    part["keydoor"] = {}
    for policy in ("random", "oracle"):
        mean, stderr = keydoor_monte_carlo(policy, keydoor_reference_tasks, seed=0)
        part["keydoor"][policy] = {"mean": mean, "stderr": stderr}
    log(f"keydoor: {part['keydoor']}")
    return True


def run_seeded_part(
    name: str,
    part: dict[str, Any],
    settings: AgentRunSettings,
    seeds: Sequence[int],
    runs_root: Path,
    save: Callable[[], None],
    log: Callable[[str], None] = _print,
) -> None:
    """A bandit or key-door part: per seed, the agent (:func:`run_agent`) and then RecurrentPPO at its env steps.

    Finished runs in ``part`` are kept unless their config differs from :func:`train_config` (then the seed's agent
    and RecurrentPPO runs are both redone); ``save`` is called after every new run.
    """
    part.setdefault("agent", {})
    part.setdefault("recurrent_ppo", {})
    for seed in seeds:
        key = str(seed)
        cfg = train_config(name, seed, settings)
        stored = part["agent"].get(key)
        if stored is not None and config_changed(stored["config"], cfg):
            # A run with other settings (or another wall-clock cap) is another benchmark: replace it, and its
            # RecurrentPPO run at its env steps (git history keeps the old numbers).
            log(f"{name} seed {seed}: stored run has other settings; rerunning")
            del part["agent"][key]
            part["recurrent_ppo"].pop(key, None)
        if key not in part["agent"]:
            part["agent"][key] = run_agent(cfg, runs_root / f"agent_seed{seed}_{cfg.max_minutes:g}min")
            save()
        agent_run = part["agent"][key]
        log(f"{name} agent seed {seed}: {agent_run['eval']['mean']:.2f} at {agent_run['env_steps']} steps")
        if key not in part["recurrent_ppo"]:
            task_kwargs = {"n_arms": cfg.n_arms, "horizon": cfg.horizon} if cfg.task == "bandit" else {}
            part["recurrent_ppo"][key] = _recurrent_ppo(
                cfg.task, agent_run["env_steps"], seed, cfg.eval_tasks, **task_kwargs
            )
            save()
        log(f"{name} recurrent_ppo seed {seed}: {part['recurrent_ppo'][key]['eval']['mean']:.2f}")


def run_tmaze(
    part: dict[str, Any],
    settings: AgentRunSettings,
    seeds: Sequence[int],
    corridors: Sequence[int],
    runs_root: Path,
    save: Callable[[], None],
    extend_minutes: float = 0.0,
    log: Callable[[str], None] = _print,
) -> None:
    """The T-maze part: per corridor length and seed, the agent and RecurrentPPO at its env steps; then the
    memory-free encoder at the shortest corridor.

    Args:
        part: The part's results, updated in place (older single-seed files are nested first).
        settings: The agent runs' shared settings.
        seeds: Training seeds.
        corridors: Corridor lengths, shortest first.
        runs_root: Parent of the runs' checkpoint folders (seed 0 keeps the single-seed runs' folder names).
        save: Called after every new run.
        extend_minutes: Continue each stored run that is not yet solved (success < 0.95) from its checkpoint for this
            many more minutes, then re-run RecurrentPPO at its new env steps (0: no extension).
        log: Progress lines.
    """
    agent_runs = part.setdefault("agent", {})
    ppo_runs = part.setdefault("recurrent_ppo", {})
    for runs in (agent_runs, ppo_runs):
        nest_single_seed_runs(runs)
    for length in corridors:
        key = str(length)
        for seed in seeds:
            s = str(seed)
            per_seed = agent_runs.setdefault(key, {})
            # Seed 0 keeps the directory name of the single-seed runs, so they still resume.
            run_dir = runs_root / (f"agent_L{length}" if seed == 0 else f"agent_L{length}_seed{seed}")
            cfg = train_config("tmaze", seed, settings, corridor=length)
            if s in per_seed and config_changed(per_seed[s]["config"], cfg, ignore_time_cap=True):
                log(f"tmaze L={length} seed {seed}: stored run has other settings; rerunning")
                del per_seed[s]
                ppo_runs.get(key, {}).pop(s, None)
            if s not in per_seed:
                per_seed[s] = run_agent(cfg, run_dir)
                save()
            elif extend_minutes > 0 and per_seed[s]["eval"]["mean"] < 0.95:
                # Resume the unsolved run from its checkpoint with a fresh wall-clock cap; env steps accumulate.
                extended = dataclasses.replace(settings, minutes_per_run=extend_minutes)
                previous = per_seed[s]["wall_seconds"]
                per_seed[s] = run_agent(train_config("tmaze", seed, extended, length), run_dir)
                per_seed[s]["wall_seconds"] += previous
                per_seed[s]["extended_minutes"] = extend_minutes
                ppo_runs.get(key, {}).pop(s, None)
                save()
            log(f"tmaze L={length} seed {seed}: success {per_seed[s]['eval']['mean']:.2f}")
            if s not in ppo_runs.setdefault(key, {}):
                steps = per_seed[s]["env_steps"]
                ppo_runs[key][s] = _recurrent_ppo("tmaze", steps, seed, 100, corridor_length=length)
                save()
            log(f"tmaze L={length} seed {seed}: recurrent_ppo {ppo_runs[key][s]['eval']['mean']:.2f}")
    if "memory_free" not in part:
        cfg = train_config("tmaze", 0, settings, corridor=corridors[0], encoder="memory_free")
        part["memory_free"] = {"corridor": corridors[0], **run_agent(cfg, runs_root / "memory_free")}
        save()
    log(f"tmaze memory-free: success {part['memory_free']['eval']['mean']:.2f}")


# --- the summary ------------------------------------------------------------------------------------------------


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


def _bandit(part: dict[str, Any], refs: dict[str, Any], target: float) -> dict[str, Any]:
    if not part.get("agent"):
        return {"status": "not run", "agent": {"mean": None, "per_seed": []}, "references": refs, "target": target}
    agent = _method(part["agent"])
    return {
        "agent": agent,
        "recurrent_ppo": _method(part.get("recurrent_ppo", {})),
        "references": refs,
        "env_steps": int(np.mean(agent["env_steps_per_seed"])),
        "target": target,
        "target_met": agent["mean"] >= target,
        "shortfall": max(target - agent["mean"], 0.0),
        "wall_seconds_per_seed": [part["agent"][k]["wall_seconds"] for k in sorted(part["agent"], key=int)],
    }


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


def summarize_parts(results: Path) -> dict[str, Any]:
    """Issue 7's summary from the part files in ``results`` (``<part>.json``, the ablation
    ``tmaze_no_sigma_reparam.json``). A part that has not been run yet appears with ``null`` numbers and
    ``"status": "not run"``; nothing is filled in."""

    def load(name: str) -> dict[str, Any]:
        return load_part(results / f"{name}.json")

    references = load("references")
    flat = {
        name: {policy: value["mean"] for policy, value in references.get(name, {}).items()}
        for name in ("bandit_5x100", "bandit_2x100", "keydoor")
    }
    summary: dict[str, Any] = {
        "bandit_5x100": _bandit(load("bandit_5x100"), flat["bandit_5x100"], BANDIT5_TARGET),
        "bandit_2x100": _bandit(load("bandit_2x100"), flat["bandit_2x100"], BANDIT2_TARGET),
    }
    summary["tmaze"] = _tmaze(load("tmaze"))
    # The same benchmark without sigma-reparam (the setting of the first runs): the attention-collapse ablation.
    ablation = load("tmaze_no_sigma_reparam")
    if ablation:
        full = _tmaze(ablation)
        keys = (
            "success_by_corridor",
            "seeds_solved_by_corridor",
            "seeds_by_corridor",
            "env_steps_by_corridor_per_seed",
        )
        summary["tmaze"]["ablation_no_sigma_reparam"] = {k: full[k] for k in keys}
    keydoor = load("keydoor")
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
    costs_source = load("bandit_5x100").get("agent", {})
    act = [run["act_steps_per_second"] for run in costs_source.values()]
    upd = [run["updates_per_second"] for run in costs_source.values()]
    summary["costs"] = {
        "act_steps_per_second": float(np.mean(act)) if act else None,
        "updates_per_second": float(np.mean(upd)) if upd else None,
        "measured_on": "bandit_5x100 agent runs (8 envs, batch 16 x 50 steps), shared 2-core CPU, 1 torch thread",
    }
    return summary


def _fmt(value: float | None, digits: int = 2) -> str:
    return "not run" if value is None else f"{value:.{digits}f}"


def summary_table(summary: dict[str, Any]) -> str:
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
