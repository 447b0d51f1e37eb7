"""In-context RL benchmarks (issue 7): the AMAGO-style agent against RecurrentPPO and the reference policies.

One part per invocation, each writing ``experiments/incontext/results/<part>.json`` after every finished run (a killed
benchmark loses at most the run in progress, and that run resumes from its checkpoint under ``runs/``):

* ``references``: bandit reference policies (Monte Carlo over 20k tasks, exact DP for 2 arms), key-door random/oracle.
* ``bandit_5x100`` / ``bandit_2x100``: agent and RecurrentPPO (at the agent's env steps), per seed.
* ``tmaze``: success of the agent (and of RecurrentPPO at its env steps) vs corridor length, per seed, and the
  memory-free encoder at the shortest corridor.
* ``keydoor``: agent and RecurrentPPO per seed.

``summarize.py`` merges the part files into ``summary.json`` and draws ``summary.png``.

    OMP_NUM_THREADS=1 nice -n 10 python experiments/incontext/benchmark.py --part bandit_5x100 --seeds 3
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tyro

from envs.metarl.references import (
    BANDIT_POLICIES,
    bandit_monte_carlo,
    bayes_optimal_two_arm_value,
    keydoor_monte_carlo,
)
from meta.incontext.baseline import train_recurrent_ppo
from meta.incontext.config import AgentConfig, TrainConfig, with_saved_defaults
from meta.incontext.trainer import InContextTrainer, evaluate_agent
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.config import from_dict, to_dict
from rolloutlab.threads import set_torch_threads

RESULTS = Path(__file__).parent / "results"


@dataclass
class Args:
    part: str = "bandit_5x100"
    """Which benchmark: references, bandit_5x100, bandit_2x100, tmaze or keydoor."""
    seeds: int = 3
    """Training seeds (0 .. seeds-1) for the agent and for RecurrentPPO."""
    minutes_per_run: float = 6.0
    """Wall-clock cap of one agent training run; the env steps it reached are recorded and given to RecurrentPPO."""
    max_env_steps: int = 2_000_000
    """Env-step budget of one agent run (the wall-clock cap usually ends it first on this machine)."""
    eval_tasks: int = 200
    """Evaluation tasks per run (the same tasks for every seed and method)."""
    corridors: str = "10,25,50,100"
    """T-maze corridor lengths, comma-separated, shortest first."""
    reference_tasks: int = 20_000
    """Monte-Carlo tasks per bandit reference policy."""
    keydoor_reference_tasks: int = 500
    """Monte-Carlo tasks for the key-door random and oracle policies."""
    extend_minutes: float = 0.0
    """T-maze only: continue each stored corridor run that is not yet solved (success < 0.95) from its checkpoint for
    this many more minutes, then re-run RecurrentPPO at the new env steps (0: no extension)."""
    sigma_reparam: bool = True
    """Spectrally reparametrized Transformer layers (AMAGO's guard against attention entropy collapse);
    ``--no-sigma-reparam`` with ``--tag _no_sigma_reparam`` is the ablation."""
    tag: str = ""
    """Suffix of the part's result file and run directory (e.g. ``_no_sigma_reparam`` for an ablation)."""
    runs_root: str = "runs/incontext-bench"
    """Where the per-run checkpoints go (a killed run resumes from here)."""
    out: str = str(RESULTS)
    """Directory of the result JSON files."""


def parse_args() -> Args:
    """Every ``Args`` field as a ``--flag`` (tyro; the field docstrings are the help text)."""
    return tyro.cli(Args, description=__doc__)


def train_config(part: str, seed: int, args: Args, corridor: int = 10, encoder: str = "transformer") -> TrainConfig:
    """The agent's settings per task, sized for a 2-core CPU."""
    if part.startswith("bandit"):
        n_arms = 5 if part == "bandit_5x100" else 2
        return TrainConfig(
            task="bandit", n_arms=n_arms, horizon=100, seed=seed, total_env_steps=args.max_env_steps,
            max_minutes=args.minutes_per_run, n_envs=8, batch_size=16, window=50, updates_per_step=0.1,
            learning_starts=1_600, eps_anneal_steps=10_000, eval_tasks=args.eval_tasks, eval_every_steps=8_000,
            agent=AgentConfig(d_model=32, n_layers=1, n_heads=2, head_hidden=32, context_len=50,
                              gammas=[0.8, 0.95], tau=0.02, sigma_reparam=args.sigma_reparam),
        )  # fmt: skip
    if part == "tmaze":
        return TrainConfig(
            task="tmaze", corridor_length=corridor, seed=seed, total_env_steps=args.max_env_steps,
            max_minutes=args.minutes_per_run, n_envs=8, batch_size=16, window=corridor + 1, updates_per_step=0.1,
            learning_starts=4 * (corridor + 1) * 8, eps_anneal_steps=20 * (corridor + 1) * 8, eval_tasks=100,
            eval_every_steps=8 * (corridor + 1) * 10, stop_at_return=0.99 if encoder != "memory_free" else None,
            agent=AgentConfig(encoder=encoder, d_model=32, n_layers=1, n_heads=2, head_hidden=32,  # type: ignore[arg-type]
                              context_len=corridor + 2, gammas=[0.9, 0.99, 0.999],
                              sigma_reparam=args.sigma_reparam),
        )  # fmt: skip
    if part == "keydoor":
        return TrainConfig(
            task="keydoor", seed=seed, total_env_steps=args.max_env_steps, max_minutes=args.minutes_per_run,
            n_envs=8, batch_size=16, window=128, updates_per_step=0.02, learning_starts=4_000,
            eps_anneal_steps=60_000, eval_tasks=min(args.eval_tasks, 100), eval_every_steps=40_000,
            agent=AgentConfig(d_model=32, n_layers=2, n_heads=2, head_hidden=32, context_len=128,
                              gammas=[0.9, 0.99, 0.999], sigma_reparam=args.sigma_reparam),
        )  # fmt: skip
    raise ValueError(f"unknown part {part!r}")


def load_part(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def _changed(stored: dict[str, Any], cfg: TrainConfig, ignore_time_cap: bool = False) -> bool:
    """Whether a stored run's resolved config differs from ``cfg`` (the wall-clock cap optionally ignored: a T-maze
    run stops when solved, and an extended one records its extension's cap)."""
    current = to_dict(cfg)
    # Fields added since the run get the defaults of the code that ran it.
    stored = to_dict(from_dict(TrainConfig, with_saved_defaults(stored)))
    if ignore_time_cap:
        stored, current = ({k: v for k, v in c.items() if k != "max_minutes"} for c in (stored, current))
    return stored != current


def _nest_single_seed_runs(runs: dict[str, Any]) -> None:
    """Older T-maze files hold one run per corridor (seed 0); nest them as ``{corridor: {seed: run}}`` in place."""
    for key, value in list(runs.items()):
        if "eval" in value:
            runs[key] = {"0": value}


def run_agent(cfg: TrainConfig, run_dir: Path) -> dict[str, Any]:
    run_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    trainer = InContextTrainer(cfg, run_dir, resume=True)
    result = trainer.learn()
    result["wall_seconds"] = time.perf_counter() - start
    result["eval"].pop("returns")
    # The headline is greedy (argmax); the sampled policy is recorded beside it.
    result["eval_sampled"] = {"mean": float(evaluate_agent(trainer.agent, cfg, cfg.eval_tasks, greedy=False).mean())}
    return result


def main(args: Args) -> None:
    set_torch_threads(1)
    out = Path(args.out)
    path = out / f"{args.part}{args.tag}.json"
    part = load_part(path)
    part["args"] = dataclasses.asdict(args)

    def save() -> None:
        atomic_write_json(path, part)

    if args.part == "references":
        if {"bandit_5x100", "bandit_2x100", "keydoor"} <= set(part):
            print("references already computed; delete references.json to recompute", flush=True)
            return
        for n_arms in (5, 2):
            refs: dict[str, Any] = {}
            for policy in BANDIT_POLICIES:
                mean, stderr = bandit_monte_carlo(policy, n_arms, 100, args.reference_tasks, seed=0)
                refs[policy] = {"mean": mean, "stderr": stderr}
            if n_arms == 2:
                refs["bayes_optimal"] = {"mean": bayes_optimal_two_arm_value(100), "stderr": 0.0, "method": "DP"}
            part[f"bandit_{n_arms}x100"] = refs
            print(f"bandit {n_arms}x100:", {k: round(v["mean"], 2) for k, v in refs.items()}, flush=True)
        part["keydoor"] = {}
        for policy in ("random", "oracle"):
            mean, stderr = keydoor_monte_carlo(policy, args.keydoor_reference_tasks, seed=0)
            part["keydoor"][policy] = {"mean": mean, "stderr": stderr}
        print("keydoor:", part["keydoor"], flush=True)
        save()
        return

    runs_root = Path(args.runs_root) / f"{args.part}{args.tag}"
    if args.part in ("bandit_5x100", "bandit_2x100", "keydoor"):
        part.setdefault("agent", {})
        part.setdefault("recurrent_ppo", {})
        for seed in range(args.seeds):
            key = str(seed)
            cfg = train_config(args.part, seed, args)
            stored = part["agent"].get(key)
            if stored is not None and _changed(stored["config"], cfg):
                # A run with other settings (or another wall-clock cap) is another benchmark: replace it, and its
                # RecurrentPPO run at its env steps (git history keeps the old numbers).
                print(f"{args.part} seed {seed}: stored run has other settings; rerunning", flush=True)
                del part["agent"][key]
                part["recurrent_ppo"].pop(key, None)
            if key not in part["agent"]:
                part["agent"][key] = run_agent(cfg, runs_root / f"agent_seed{seed}_{cfg.max_minutes:g}min")
                save()
            agent_run = part["agent"][key]
            print(f"{args.part} agent seed {seed}: {agent_run['eval']['mean']:.2f} at {agent_run['env_steps']} steps")
            if key not in part["recurrent_ppo"]:
                task_kwargs = {"n_arms": cfg.n_arms, "horizon": cfg.horizon} if cfg.task == "bandit" else {}
                ppo = train_recurrent_ppo(cfg.task, agent_run["env_steps"], seed, cfg.eval_tasks, None, **task_kwargs)
                ppo["eval"].pop("returns")
                part["recurrent_ppo"][key] = ppo
                save()
            ppo_mean = part["recurrent_ppo"][key]["eval"]["mean"]
            print(f"{args.part} recurrent_ppo seed {seed}: {ppo_mean:.2f}", flush=True)
        return

    if args.part == "tmaze":
        corridors = [int(c) for c in args.corridors.split(",")]
        agent_runs = part.setdefault("agent", {})
        ppo_runs = part.setdefault("recurrent_ppo", {})
        for runs in (agent_runs, ppo_runs):
            _nest_single_seed_runs(runs)
        for length in corridors:
            key = str(length)
            for seed in range(args.seeds):
                s = str(seed)
                per_seed = agent_runs.setdefault(key, {})
                # Seed 0 keeps the directory name of the single-seed runs, so they still resume.
                run_dir = runs_root / (f"agent_L{length}" if seed == 0 else f"agent_L{length}_seed{seed}")
                if s in per_seed and _changed(per_seed[s]["config"], train_config("tmaze", seed, args, length), True):
                    print(f"tmaze L={length} seed {seed}: stored run has other settings; rerunning", flush=True)
                    del per_seed[s]
                    ppo_runs.get(key, {}).pop(s, None)
                if s not in per_seed:
                    per_seed[s] = run_agent(train_config("tmaze", seed, args, corridor=length), run_dir)
                    save()
                elif args.extend_minutes > 0 and per_seed[s]["eval"]["mean"] < 0.95:
                    # Resume the unsolved run from its checkpoint with a fresh wall-clock cap; env steps accumulate.
                    extended = dataclasses.replace(args, minutes_per_run=args.extend_minutes)
                    previous = per_seed[s]["wall_seconds"]
                    per_seed[s] = run_agent(train_config("tmaze", seed, extended, length), run_dir)
                    per_seed[s]["wall_seconds"] += previous
                    per_seed[s]["extended_minutes"] = args.extend_minutes
                    ppo_runs.get(key, {}).pop(s, None)
                    save()
                print(f"tmaze L={length} seed {seed}: success {per_seed[s]['eval']['mean']:.2f}", flush=True)
                if s not in ppo_runs.setdefault(key, {}):
                    steps = per_seed[s]["env_steps"]
                    ppo = train_recurrent_ppo("tmaze", steps, seed, 100, None, corridor_length=length)
                    ppo["eval"].pop("returns")
                    ppo_runs[key][s] = ppo
                    save()
                print(f"tmaze L={length} seed {seed}: recurrent_ppo {ppo_runs[key][s]['eval']['mean']:.2f}", flush=True)
        if "memory_free" not in part:
            cfg = train_config("tmaze", 0, args, corridor=corridors[0], encoder="memory_free")
            part["memory_free"] = {"corridor": corridors[0], **run_agent(cfg, runs_root / "memory_free")}
            save()
        print(f"tmaze memory-free: success {part['memory_free']['eval']['mean']:.2f}", flush=True)
        return
    raise ValueError(f"unknown part {args.part!r}")


if __name__ == "__main__":
    main(parse_args())
