"""``rolloutlab meta``: meta-train a rollout-length meta-agent, and compare it against every schedule.

Heavy libraries (torch, SB3) are imported inside the commands so ``rolloutlab --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from rolloutlab.runs import output_dir_option

app = typer.Typer(
    help="Meta-level rollout-length control: the meta-MDP over a Dyna-DQN run and its SB3 meta-agent.",
    no_args_is_help=True,
    add_completion=False,
)

# meta.rollout_length.evaluate.DEFAULT_ARMS without dqn_zoo (a test keeps them equal).
_DEFAULT_ARMS = "fixed:0,fixed:16,fixed:32,dec:32,inc:32,incdec:32,linear:0,5,1,32,uncertainty:95,32,random:0,32"


@app.command()
def train(
    env: Annotated[str, typer.Option("--env", help="Inner env: MountainCar-v0 or Acrobot-v1.")] = "MountainCar-v0",
    budget: Annotated[int, typer.Option(min=1, help="Real env steps per inner run.")] = 50_000,
    phase: Annotated[int, typer.Option(min=1, help="Env steps between decisions (P).")] = 5_000,
    episodes: Annotated[int, typer.Option(min=1, help="Meta-training episodes (inner runs).")] = 300,
    runs_per_round: Annotated[int, typer.Option(min=1, help="Inner runs batched together (B).")] = 10,
    workers: Annotated[
        int,
        typer.Option(
            min=0,
            help="Worker processes sharing each round's runs: 0 one per available core (at most --runs-per-round), "
            "1 in-process. The results do not depend on it (--resume takes it too).",
        ),
    ] = 0,
    ray: Annotated[str | None, typer.Option("--ray", help="Ray address; workers become Ray actors.")] = None,
    k_cap: Annotated[int, typer.Option(min=0, help="Largest rollout length.")] = 32,
    action_set: Annotated[
        str, typer.Option(help="step (UP / DOWN / NOOP on the K in force) or direct (K from --k-grid).")
    ] = "step",
    k_init: Annotated[int, typer.Option(min=0, help="K in force before the first decision.")] = 1,
    k_grid: Annotated[str, typer.Option(help="The lengths of the direct choice, comma-separated.")] = "0,1,2,4,8,16",
    algo: Annotated[str, typer.Option(help="Meta-agent: dqn or ppo.")] = "dqn",
    inner: Annotated[str, typer.Option(help="Inner learner: dyna (BatchedDynaDQN) or toy (analytic stand-in).")] = (
        "dyna"
    ),
    seed: Annotated[int, typer.Option(help="Seed of meta-training.")] = 0,
    config: Annotated[
        Path | None, typer.Option(help="YAML preset for MetaTrainConfig (command-line options override it).")
    ] = None,
    resume: Annotated[Path | None, typer.Option(help="Continue the meta-training run in this directory.")] = None,
    out: Annotated[
        Path, typer.Option(help="Parent directory of new run directories.", callback=output_dir_option)
    ] = Path("runs"),
) -> None:
    """Meta-train (or resume with --resume RUN_DIR); writes meta_policy.pt for `learned:PATH`."""
    from meta.control.training import MetaTrainConfig, MetaTrainer
    from rolloutlab.checkpoint import CheckpointError
    from rolloutlab.config import ConfigError, from_dict, load_yaml, to_dict
    from rolloutlab.runs import run_dir_kept_on_success

    if resume is not None:
        try:
            trainer = MetaTrainer.resume(resume, workers=workers)
        except CheckpointError as exc:
            raise typer.BadParameter(str(exc), param_hint="--resume") from exc
        except ValueError as exc:  # a --workers the saved run's rounds cannot take
            raise typer.BadParameter(str(exc), param_hint="--workers") from exc
        run_dir = resume
    else:
        overrides: dict[str, Any] = {
            "episodes": episodes,
            "runs_per_round": runs_per_round,
            "workers": workers,
            "ray_address": ray,
            "seed": seed,
        }
        try:
            base = to_dict(load_yaml(MetaTrainConfig, config)) if config is not None else {}
            env_part = {**base.get("env", {}), "env_id": env, "budget": budget, "phase_length": phase}
            try:
                grid = [int(k) for k in k_grid.split(",") if k.strip()]
            except ValueError:
                raise typer.BadParameter(f"{k_grid!r}: comma-separated integers", param_hint="--k-grid") from None
            env_part.update(k_cap=k_cap, inner=inner, action_set=action_set, k_init=k_init, k_grid=grid)
            agent_part = {**base.get("agent", {}), "algo": algo}
            cfg = from_dict(MetaTrainConfig, {**base, **overrides, "env": env_part, "agent": agent_part})
        except (ConfigError, ValueError) as exc:
            raise typer.BadParameter(str(exc)) from exc
        try:
            with run_dir_kept_on_success(f"meta-{env}", seed, out) as run_dir:
                trainer = MetaTrainer(cfg, run_dir)
        except (ConfigError, ValueError) as exc:  # refused before any work: no run directory is left behind
            raise typer.BadParameter(str(exc)) from exc
    summary = trainer.train()
    typer.echo(
        f"meta-trained {summary['episodes_done']} episodes in {summary['wall_seconds']:.0f}s "
        f"({summary['inner_steps_per_second'] or 0:.0f} inner env-steps/s, {summary['workers']} worker(s)); "
        f"policy: {run_dir / 'meta_policy.pt'}"
    )


@app.command("eval")
def evaluate(
    env: Annotated[str, typer.Option("--env", help="Inner env: MountainCar-v0 or Acrobot-v1.")] = "MountainCar-v0",
    runs: Annotated[int, typer.Option(min=1, help="Inner runs per arm (same seeds for every arm).")] = 30,
    arms: Annotated[
        str,
        typer.Option(
            help="Comma-separated arms: controller specs (fixed:K, dec:K_MAX, inc:K_MAX, incdec:K_MAX, "
            "linear:EPOCH_A,EPOCH_B,H_MIN,H_MAX, uncertainty:PERCENTILE,K_MAX[,XI], random:K_INIT,K_CAP[,SEED], "
            "learned:PATH) and dqn_zoo."
        ),
    ] = _DEFAULT_ARMS,
    budget: Annotated[int, typer.Option(min=1, help="Real env steps per inner run.")] = 50_000,
    phase: Annotated[int, typer.Option(min=1, help="Env steps between decisions (P).")] = 5_000,
    k_cap: Annotated[int, typer.Option(min=0, help="Largest rollout length.")] = 32,
    physics: Annotated[
        str,
        typer.Option(
            help="test (the paper's perturbation), nominal, or name=value pairs on top of the nominal physics, "
            "e.g. 'gravity=11,link_mass_1=1.3' (Acrobot: gravity, link_length_1/2, link_mass_1/2; MountainCar: "
            "gravity)."
        ),
    ] = "test",
    inner: Annotated[str, typer.Option(help="Inner learner: dyna or toy.")] = "dyna",
    final_episodes: Annotated[int, typer.Option(min=1, help="Greedy episodes per run for the final score.")] = 10,
    seed: Annotated[int, typer.Option(help="Inner seed shared by every arm.")] = 1,
    out: Annotated[
        Path, typer.Option(help="Output directory (JSON, table, plots).", callback=output_dir_option)
    ] = Path("runs/meta-eval"),
) -> None:
    """Score every arm on the (perturbed) env: JSON, a results table, and plots of scores and K schedules."""
    from envs.perturbed import parse_physics
    from meta.control import split_specs
    from meta.rollout_length.env import MetaEnvConfig
    from meta.rollout_length.evaluate import DQN_ZOO_ARM, arm_controller, arm_key, compare, run_arms, run_dqn_zoo
    from meta.rollout_length.plots import plot_arms
    from rolloutlab.checkpoint import atomic_write_json, atomic_write_text
    from rolloutlab.config import from_dict
    from rolloutlab.threads import set_torch_threads

    set_torch_threads()
    try:
        # from_dict, not the constructor: it also checks the Literal fields (--inner), which a dataclass takes as given.
        cfg = from_dict(
            MetaEnvConfig, {"env_id": env, "budget": budget, "phase_length": phase, "k_cap": k_cap, "inner": inner}
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    try:
        phys = parse_physics(env, physics)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--physics") from exc
    names = split_specs(arms)
    if not names:
        raise typer.BadParameter("no arms given; e.g. --arms fixed:0,inc:32", param_hint="--arms")
    model_arms = [a for a in names if a != DQN_ZOO_ARM]
    keys = [arm_key(a) for a in names]
    if len(set(keys)) != len(keys):
        raise typer.BadParameter(f"arms with the same result key: {keys}", param_hint="--arms")
    for arm in model_arms:  # refuse a bad spec (or an old arm name, with its new spec) before any run starts
        try:
            arm_controller(arm, cfg, seed)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--arms") from exc
    results: dict[str, Any] = {}
    if model_arms:
        typer.echo(f"{env}: arms {', '.join(model_arms)} ({runs} runs each x {budget} steps, batched)")
        try:
            results.update(run_arms(model_arms, cfg, runs, seed, phys, final_episodes))
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--arms") from exc
    if DQN_ZOO_ARM in names:
        typer.echo(f"{env}: arm dqn_zoo ({runs} runs x {budget} steps)")
        results[DQN_ZOO_ARM] = run_dqn_zoo(env, budget, runs, seed, phys, final_episodes)
    report = {"env": env, "physics": phys, "budget": budget, "phase": phase, "k_cap": k_cap, "runs": runs}
    report |= {"seed": seed, "arms": results, **compare(results)}
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "eval.json", report)
    lines = ["| arm | final return (mean ± s.e.) |", "|---|---|"]
    lines += [f"| {name} | {r['mean']:.1f} ± {r['se']:.1f} |" for name, r in results.items()]
    atomic_write_text(out / "table.md", "\n".join(lines) + "\n")
    plot_arms(results, out / "eval.png", f"{env}, physics {phys}")
    typer.echo("\n".join(lines))
    typer.echo(f"wrote {out / 'eval.json'}, {out / 'table.md'}, {out / 'eval.png'}")
