"""``rolloutlab incontext``: train and evaluate the in-context agent (heavy imports happen inside the commands)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rolloutlab.device import DEVICE_HELP, device_option
from rolloutlab.runs import output_dir_option

app = typer.Typer(
    help="In-context RL (AMAGO-style transformer) on bandits, T-maze and dark key-door.", no_args_is_help=True
)


def _check_device(device: str) -> None:
    """Refuse a saved or preset device this machine lacks (a run saved on a GPU, resumed where there is none)."""
    from rolloutlab.device import DeviceError, resolve_device

    try:
        resolve_device(device)
    except DeviceError as exc:
        raise typer.BadParameter(f"{exc}; choose another with --device", param_hint="--device") from exc


@app.command()
def train(
    task: Annotated[str, typer.Option(help="bandit, tmaze or keydoor.")] = "bandit",
    config: Annotated[Path | None, typer.Option(help="YAML preset (TrainConfig fields); flags override it.")] = None,
    steps: Annotated[int | None, typer.Option(min=1, help="Env-step budget.")] = None,
    minutes: Annotated[float | None, typer.Option(min=0.0, help="Wall-clock cap in minutes (> 0).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of everything.")] = 0,
    n_arms: Annotated[int | None, typer.Option(min=2, help="Bandit arms.")] = None,
    horizon: Annotated[int | None, typer.Option(min=1, help="Bandit pulls per task.")] = None,
    corridor: Annotated[int | None, typer.Option(min=1, help="T-maze corridor length.")] = None,
    encoder: Annotated[str | None, typer.Option(help="transformer, gru or memory_free.")] = None,
    run_dir: Annotated[
        Path | None,
        typer.Option(
            help="Resume this run directory (its saved settings; --steps/--minutes may extend it, --device move it).",
            callback=output_dir_option,
        ),
    ] = None,
    runs_root: Annotated[Path, typer.Option(help="Parent of new run directories.", callback=output_dir_option)] = Path(
        "runs"
    ),
    device: Annotated[str | None, typer.Option(help=DEVICE_HELP, callback=device_option)] = None,
) -> None:
    """Train the agent; checkpoints go to the run directory, and re-running with --run-dir resumes after a kill."""
    from meta.incontext.config import TrainConfig, with_saved_defaults
    from meta.incontext.trainer import CHECKPOINT_KIND, InContextTrainer
    from rolloutlab.checkpoint import CheckpointError, load_checkpoint
    from rolloutlab.config import ConfigError, from_dict, load_yaml, to_dict
    from rolloutlab.runs import make_run_dir, write_result
    from rolloutlab.threads import set_torch_threads

    set_torch_threads()
    overrides: dict[str, object] = {"task": task, "seed": seed}
    for key, value in (
        ("total_env_steps", steps),
        ("max_minutes", minutes),
        ("n_arms", n_arms),
        ("horizon", horizon),
        ("corridor_length", corridor),
        ("device", device),
    ):
        if value is not None:
            overrides[key] = value
    try:
        checkpoint = run_dir / "checkpoint.pt" if run_dir is not None else None
        resuming = checkpoint is not None and checkpoint.exists() and config is None
        if resuming:
            assert checkpoint is not None
            # Resuming: the run's own saved settings (networks must match the checkpoint); only the budget and where it
            # computes can change.
            saved = with_saved_defaults(load_checkpoint(checkpoint, kind=CHECKPOINT_KIND)["config"])
            movable = ("total_env_steps", "max_minutes", "device")
            budget: dict[str, object] = {k: overrides[k] for k in movable if k in overrides}
            cfg = from_dict(TrainConfig, {**saved, **budget})
        elif config is not None:
            cfg = load_yaml(TrainConfig, config, overrides)
        else:
            cfg = from_dict(TrainConfig, overrides)
        if encoder is not None and not resuming:
            cfg = from_dict(TrainConfig, {**to_dict(cfg), "agent": {**to_dict(cfg.agent), "encoder": encoder}})
    except (ConfigError, CheckpointError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--task/--config/--run-dir") from exc
    _check_device(cfg.device)
    if run_dir is None:
        run_dir = make_run_dir(f"incontext-{cfg.task}", cfg.seed, runs_root, cfg)
    trainer = InContextTrainer(cfg, run_dir, resume=True, progress=True)
    result = trainer.learn()
    result["eval"].pop("returns")
    write_result(run_dir, result)
    typer.echo(
        f"{cfg.task}: eval return {result['eval']['mean']:.3f} ± {result['eval']['stderr']:.3f} after "
        f"{result['env_steps']} env steps, {result['updates']} updates; run dir {run_dir}"
    )


@app.command("eval")
def evaluate(
    checkpoint: Annotated[Path, typer.Argument(help="checkpoint.pt of a training run.")],
    tasks: Annotated[int, typer.Option(min=1, help="Evaluation tasks.")] = 200,
    greedy: Annotated[bool, typer.Option(help="Argmax actions (--no-greedy samples from the policy).")] = True,
    device: Annotated[
        str | None, typer.Option(help=f"{DEVICE_HELP} Default: where the run trained.", callback=device_option)
    ] = None,
) -> None:
    """Evaluate a trained agent on the shared evaluation tasks."""
    from meta.incontext.trainer import evaluate_agent, load_agent
    from rolloutlab.checkpoint import CheckpointError
    from rolloutlab.device import DeviceError
    from rolloutlab.statistics import mean_with_stderr
    from rolloutlab.threads import set_torch_threads

    set_torch_threads()
    try:
        agent, cfg = load_agent(checkpoint, device=device)
    except CheckpointError as exc:
        raise typer.BadParameter(str(exc), param_hint="CHECKPOINT") from exc
    except DeviceError as exc:  # the device it trained on is not here
        raise typer.BadParameter(f"{exc}; choose another with --device", param_hint="--device") from exc
    returns = evaluate_agent(agent, cfg, tasks, greedy=greedy)
    mean, stderr = mean_with_stderr(returns)
    typer.echo(f"{cfg.task}: mean return {mean:.3f} ± {stderr:.3f} over {tasks} tasks")
