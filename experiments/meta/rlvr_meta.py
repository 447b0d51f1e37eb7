"""One meta-controller for both worlds: the meta-MDP of the rollout length, over GRPO's responses per prompt G.

The RLVR meta-MDP (:mod:`meta.rlvr.meta_mdp`, the same :mod:`meta.control.mdp` class as the rollout-length one): one
meta-episode is one compact GRPO run of the character model from its SFT warm start under a fixed budget of generated
completion tokens; every sixth of the budget the meta-agent picks G from {2, 4, 8, 16}; the meta-reward is the change
in held-out accuracy (over 0.1). Each training run draws a difficulty mix of 1-3 digit reversed-digit arithmetic
(Dirichlet(1) weights) and a learning rate (log-uniform 1.5e-4..6e-4).

Steps, each resumable (rerun the same command after a kill or at the next session):

1. The SFT warm start (``runs/rlvr/sft.pt``, trained with ``experiments/rlvr/sft.yaml`` if missing).
2. Meta-training: SB3 DQN (the rollout-length meta-agent's settings), ``meta_episodes`` inner runs, checkpointed every
   round in ``results/rlvr_meta/train/`` (small: commit it to carry a run across sessions); the agent's values are
   checked against the Monte-Carlo returns of its replay buffer (``value_check``).
3. The test: ``test_units`` held-out units (seeds from another stream; one fixed difficulty mix, 0.15 / 0.25 / 0.6
   over 1 / 2 / 3 digits, against the training runs' random mixes whose average is 1/3 each; the learning rate fixed
   at the allocator benchmark's 3e-4), every arm on every unit, paired (:mod:`experiments.meta.rlvr_meta_arms`):
   fixed G in {2, 4, 8, 16}, AR3PO, DARS, Knapsack, E3 (the allocator benchmark's settings), a random meta-policy
   and META. Each finished run is filed into ``results/rlvr_meta/runs_<test_name>/`` at once.
4. ``results/rlvr_meta.json``: per arm the final held-out accuracy (mean, IQM, rliable intervals) and tokens to a
   target, META against the best other arm (``compact.prob_improvement_vs_best``: rliable's probability of
   improvement of META's final accuracy over that arm's, with its interval; the paired mean difference and the
   paired win rate beside it), and the target met or missed; the TRL transfer's summary
   (``experiments/meta/rlvr_meta_trl.py`` → ``results/rlvr_meta_trl.json``, key ``meta_minus_best_heuristic``) is
   copied under ``trl`` when it exists.

    OMP_NUM_THREADS=1 nice -n 10 python experiments/meta/rlvr_meta.py                  # everything
    OMP_NUM_THREADS=1 python experiments/meta/rlvr_meta.py --no-test                   # meta-training only
    # the same policy on held-out seeds of the training distribution (random mixes and learning rates):
    OMP_NUM_THREADS=1 python experiments/meta/rlvr_meta.py --test-mix None --test-lr None --test-name in_distribution \\
        --summary experiments/meta/results/rlvr_meta_in_distribution.json --trl-summary none
    OMP_NUM_THREADS=1 python experiments/meta/rlvr_meta.py --meta-episodes 24 --test-units 2 --out-dir /tmp/x  # smoke
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.meta.rlvr_meta_arms import arm_names, run_arm, tokens_to_target
from experiments.sweep import Unit, grid, run_sweep
from meta.control.training import POLICY_NAME, MetaAgentConfig, MetaTrainConfig, MetaTrainer
from meta.rlvr.meta_mdp import RLVRMetaConfig, WarmStart, draw_domains
from meta.rollout_length.diagnostics import value_check
from rolloutlab.checkpoint import atomic_write_json, atomic_write_text
from rolloutlab.statistics import (
    bootstrap_interval,
    interval_estimates,
    iqm,
    mean_interval,
    paired_difference,
    probability_of_improvement,
)
from rolloutlab.threads import set_torch_threads

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


@dataclass
class Args:
    out_dir: str = str(RESULTS / "rlvr_meta")
    """meta-training run directory (train/), per-run test files (runs/)"""
    summary: str = str(RESULTS / "rlvr_meta.json")
    """the summary JSON"""
    checkpoint: str = "runs/rlvr/sft.pt"
    """SFT warm start (trained with sft_config if missing)"""
    sft_config: str = "experiments/rlvr/sft.yaml"
    """the warm start's SFT preset"""
    token_budget: int = 32_000
    """completion tokens per inner run"""
    meta_episodes: int = 360
    """meta-training inner runs"""
    runs_per_round: int = 6
    """inner runs per meta-training round (one checkpoint per round)"""
    train_seed: int = 0
    """seed of the meta-agent and of the training domains"""
    train_workers: int = 0
    """worker processes sharing each meta-training round's inner runs (0: one per core; part of the run's config,
    the results do not depend on it)"""
    ray_address: str | None = None
    """a Ray cluster for the meta-training workers (``auto``, ``ray://HOST:10001``; part of the run's config)"""
    test: bool = True
    """run the test arms once meta-training has finished"""
    test_units: int = 20
    """held-out units (paired runs per arm)"""
    test_seed: int = 10_000
    """seed stream of the held-out units (disjoint from training's rounds)"""
    test_mix: tuple[float, float, float] | None = (0.15, 0.25, 0.6)
    """held-out difficulty mix over 1, 2, 3 digits (None: a random mix per unit, as in training)"""
    test_lr: float | None = 3e-4
    """learning rate of the test runs, the allocator benchmark's (None: drawn per unit as in training)"""
    test_name: str = "heldout_mix"
    """names the folder of the test's runs (runs_<name>/), so that several test protocols share one meta-training"""
    workers: int = 1
    """processes for the test runs"""
    trl_summary: str = str(RESULTS / "rlvr_meta_trl.json")
    """the TRL transfer's summary (experiments/meta/rlvr_meta_trl.py), copied under "trl" when it exists ("none":
    never)"""


def meta_config(args: Args) -> RLVRMetaConfig:
    """The training meta-MDP."""
    return RLVRMetaConfig(checkpoint=args.checkpoint, token_budget=args.token_budget)


def test_config(args: Args) -> RLVRMetaConfig:
    """The held-out meta-MDP: same budget and grid, the held-out mix and a fixed learning rate (where given)."""
    cfg = meta_config(args)
    if args.test_mix is not None:
        cfg = replace(cfg, mix=list(args.test_mix))
    if args.test_lr is not None:
        cfg = replace(cfg, lr_range=[args.test_lr, args.test_lr])
    return cfg


def train_config(args: Args) -> MetaTrainConfig:
    cfg = MetaTrainConfig(
        env=meta_config(args),
        agent=MetaAgentConfig(),
        episodes=args.meta_episodes,
        runs_per_round=args.runs_per_round,
        workers=args.train_workers,
        ray_address=args.ray_address,
        seed=args.train_seed,
    )
    # The replay buffer holds every meta-transition (value_check reads it in order) and no more, so the checkpoint
    # stays small enough to commit.
    cfg.agent.buffer_size = cfg.total_timesteps
    return cfg


def ensure_warm_start(args: Args) -> None:
    if Path(args.checkpoint).is_file():
        return
    from meta.rlvr.trainers.sft import SFTConfig, train_sft
    from rolloutlab.config import load_yaml

    print(f"training the SFT warm start into {args.checkpoint}", flush=True)
    train_sft(load_yaml(SFTConfig, args.sft_config), out_path=Path(args.checkpoint), log=print)


def meta_train(args: Args) -> dict[str, Any]:
    run_dir = Path(args.out_dir) / "train"
    cfg = train_config(args)
    if (run_dir / "meta_checkpoint.pt").exists():
        trainer = MetaTrainer.resume(run_dir, workers=cfg.workers)
        if trainer.cfg.outcome_settings() != cfg.outcome_settings():
            raise SystemExit(f"{run_dir} holds a meta-training run with other settings; move it away to start anew")
        print(f"resuming meta-training from {run_dir}", flush=True)
    else:
        trainer = MetaTrainer(cfg, run_dir)
    summary = trainer.train()
    record: dict[str, Any] = {key: summary[key] for key in ("episodes_done", "rounds_done", "wall_seconds", "sessions")}
    record["finished"] = summary["rounds_done"] >= cfg.rounds
    record["meta_transitions"] = summary["episodes_done"] * cfg.env.horizon
    history = summary["history"]
    quarter = max(1, len(history) // 4)
    record["final_accuracy_first_quarter"] = float(np.mean([h["final_j"] for h in history[:quarter]]))
    record["final_accuracy_last_quarter"] = float(np.mean([h["final_j"] for h in history[-quarter:]]))
    record["g_schedule_last_quarter_mean"] = np.mean([h["k_schedule"] for h in history[-quarter:]], axis=0).tolist()
    # The agent trained this session, or the saved one of a run reopened after it finished.
    model = trainer.model if trainer.model is not None else trainer.load_agent()
    record["value_check"] = value_check(model)
    return record


def _run_file(args: Args, arm: str, unit: int) -> Path:
    return Path(args.out_dir) / f"runs_{args.test_name}" / f"{arm.replace(':', '')}__{unit}.json"


def _one(args: Args, unit: Unit) -> dict[str, Any]:
    """One arm on one test unit (the unit's index is the sweep's seed)."""
    set_torch_threads()
    cfg = test_config(args)
    domain = draw_domains(cfg, 1, np.random.default_rng([args.test_seed, unit.seed]))[0]
    policy = str(Path(args.out_dir) / "train" / POLICY_NAME)
    run = run_arm(unit.arm, cfg, domain, WarmStart(cfg), policy=policy)
    run["unit"] = unit.seed
    return run


def test_arms(args: Args) -> list[dict[str, Any]]:
    arms = arm_names(meta_config(args).grid)
    units = grid(arms, range(args.test_units), lambda arm, u: _run_file(args, arm, u))
    records = run_sweep(
        units,
        partial(_one, args),
        workers=args.workers,
        describe=lambda u, r: f"unit {u.seed} {u.arm}: final accuracy {r['final_accuracy']:.3f} ({r['seconds']:.0f} s)",
    )
    return list(records.values())


def summarize(args: Args, runs: list[dict[str, Any]]) -> dict[str, Any]:
    arms = arm_names(meta_config(args).grid)
    units = list(range(args.test_units))
    final = {a: np.asarray([r["final_accuracy"] for u in units for r in runs if r["arm"] == a and r["unit"] == u])
             for a in arms}  # fmt: skip
    start = np.asarray([next(r for r in runs if r["unit"] == u)["curve"][0]["accuracy"] for u in units])
    # Tokens to target: per unit, half of the largest gain any arm made on it (a target every unit has).
    best_final = np.max(np.stack([final[a] for a in arms]), axis=0)
    targets = start + 0.5 * (best_final - start)
    # rliable's IQM with its stratified-bootstrap interval (one task, the units as runs).
    iqms = interval_estimates(final, {"iqm": iqm}, seed=0)
    out_arms: dict[str, Any] = {}
    for i, a in enumerate(arms):
        ci = mean_interval(final[a], rng=i)
        arm_runs = {r["unit"]: r for r in runs if r["arm"] == a}
        reached = [tokens_to_target(arm_runs[u], float(targets[u])) for u in units]
        # A unit that never reached its target counts as infinitely many tokens, so the median's interval is
        # infinite on the side where too many units missed.
        tokens = np.asarray([np.inf if t is None else t for t in reached])
        tci = bootstrap_interval([tokens], np.median, paired=False, rng=i)
        out_arms[a] = {
            "final_accuracy_mean": float(final[a].mean()),
            "final_accuracy_ci": [ci.low, ci.high],
            "final_accuracy_iqm": float(iqm(final[a])),
            "final_accuracy_iqm_ci": [iqms[a]["iqm"].low, iqms[a]["iqm"].high],
            "gain_mean": float((final[a] - start).mean()),
            "tokens_to_target_median": float(np.median(tokens)),
            "tokens_to_target_median_ci": [float(tci.low), float(tci.high)],
            "reached_target": int(sum(t is not None for t in reached)),
            "completion_tokens_mean": float(np.mean([arm_runs[u]["completion_tokens"] for u in units])),
            "g_schedules": [arm_runs[u]["g_schedule"] for u in units] if a in ("meta", "random") else None,
        }
    others = [a for a in arms if a != "meta"]
    best = max(others, key=lambda a: out_arms[a]["final_accuracy_mean"])
    poi = probability_of_improvement(final["meta"], final[best], seed=0)
    diff = paired_difference(final["meta"], final[best], rng=0)
    wins = float(np.mean((final["meta"] > final[best]) + 0.5 * (final["meta"] == final[best])))
    # Did the meta-agent learn anything at all: META against the random meta-policy, paired.
    vs_random = paired_difference(final["meta"], final["random"], rng=1)
    met = poi.low > 0.5
    return {
        "command": "OMP_NUM_THREADS=1 nice -n 10 python experiments/meta/rlvr_meta.py",
        "args": asdict(args),
        "compact": {
            "units": args.test_units,
            "start_accuracy_mean": float(start.mean()),
            "arms": out_arms,
            "best_other_arm": best,
            "prob_improvement_vs_best": {"point": poi.value, "ci": [poi.low, poi.high]},
            "meta_minus_best_final_accuracy": {"point": diff.value, "ci": [diff.low, diff.high]},
            "meta_win_rate_vs_best": wins,
            "meta_minus_random_final_accuracy": {"point": vs_random.value, "ci": [vs_random.low, vs_random.high]},
            "target": "prob_improvement_vs_best above 0.5 with its interval excluding 0.5",
            "target_met": bool(met),
        },
    }


def _tokens(x: float) -> str:
    return "never" if not np.isfinite(x) else f"{x:,.0f}"


def table(out: dict[str, Any]) -> str:
    """The compact test (and the TRL transfer, if present) as markdown."""
    c = out["compact"]
    lines = [
        f"Compact trainer, {c['units']} held-out units, start accuracy {c['start_accuracy_mean']:.3f}:",
        "",
        "| arm | final accuracy (mean [95% CI]) | IQM [95% CI] | gain | tokens to target (median [95% CI]) | reached "
        "| tokens |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm, e in c["arms"].items():
        lo, hi = e["final_accuracy_ci"]
        ilo, ihi = e["final_accuracy_iqm_ci"]
        tlo, thi = e["tokens_to_target_median_ci"]
        lines.append(
            f"| {arm} | {e['final_accuracy_mean']:.3f} [{lo:.3f}, {hi:.3f}] | {e['final_accuracy_iqm']:.3f} "
            f"[{ilo:.3f}, {ihi:.3f}] | {e['gain_mean']:+.3f} | {_tokens(e['tokens_to_target_median'])} "
            f"[{_tokens(tlo)}, {_tokens(thi)}] | {e['reached_target']}/{c['units']} | "
            f"{e['completion_tokens_mean']:,.0f} |"
        )
    poi, diff = c["prob_improvement_vs_best"], c["meta_minus_best_final_accuracy"]
    vs_random = c["meta_minus_random_final_accuracy"]
    lines += [
        "",
        f"- META vs the best other arm ({c['best_other_arm']}): probability of improvement {poi['point']:.2f} "
        f"[{poi['ci'][0]:.2f}, {poi['ci'][1]:.2f}], paired difference {diff['point']:+.3f} "
        f"[{diff['ci'][0]:+.3f}, {diff['ci'][1]:+.3f}], win rate {c['meta_win_rate_vs_best']:.2f}.",
        f"- META minus the random meta-policy: {vs_random['point']:+.3f} "
        f"[{vs_random['ci'][0]:+.3f}, {vs_random['ci'][1]:+.3f}].",
        f"- Target ({c['target']}): **{'met' if c['target_met'] else 'missed'}**.",
    ]
    trl = out.get("trl")
    if trl is not None and trl.get("meta_minus_best_heuristic") is not None:
        lines += [
            "",
            f"Inside TRL, {trl['family']} family, {len(trl['seeds_complete'])} paired seeds, start accuracy "
            f"{trl['start_accuracy_mean']:.3f}:",
            "",
            "| arm | final accuracy (mean [95% CI]) | GRPO steps | tokens |",
            "|---|---|---|---|",
        ]
        for arm, e in trl["arms"].items():
            lo, hi = e["final_accuracy_ci"]
            lines.append(
                f"| {arm} | {e['final_accuracy_mean']:.3f} [{lo:.3f}, {hi:.3f}] | {e['grpo_steps_mean']:.0f} | "
                f"{e['completion_tokens_mean']:,.0f} |"
            )
        m = trl["meta_minus_best_heuristic"]
        lines.append("")
        lines.append(
            f"- Inside TRL: META minus the best heuristic arm ({trl['best_heuristic']}) {m['point']:+.3f} "
            f"[{m['ci'][0]:+.3f}, {m['ci'][1]:+.3f}]; target (interval reaches 0 or above): "
            f"**{'met' if trl.get('target_met') else 'missed'}**."
        )
    return "\n".join(lines) + "\n"


def main(args: Args) -> None:
    set_torch_threads()
    start = time.perf_counter()
    ensure_warm_start(args)
    training = meta_train(args)
    print(f"meta-training: {json.dumps(training)}", flush=True)
    out: dict[str, Any] = {"meta_training": training}
    if args.test and training["finished"]:
        runs = test_arms(args)
        out.update(summarize(args, runs))
        c = out["compact"]
        print(
            f"META vs {c['best_other_arm']}: P(improvement) {c['prob_improvement_vs_best']}, "
            f"target {'met' if c['target_met'] else 'missed'}",
            flush=True,
        )
    trl = Path(args.trl_summary)
    if args.trl_summary != "none" and trl.is_file():
        # The transfer runs in its own script (TRL is slower); its summary is quoted here so that one file holds both.
        out["trl"] = json.loads(trl.read_text())
    out["seconds_this_session"] = time.perf_counter() - start
    atomic_write_json(Path(args.summary), out)
    if "compact" in out:
        atomic_write_text(Path(args.summary).with_suffix(".md"), table(out))


if __name__ == "__main__":
    main(tyro.cli(Args))
