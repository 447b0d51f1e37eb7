"""``rolloutlab rlvr``: SFT warm start, one GRPO training run, and the reduced allocation benchmark.

Heavy imports (torch, transformers) happen inside the commands so ``rolloutlab --help`` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from rolloutlab.device import DEVICE_HELP, device_option
from rolloutlab.runs import output_dir_option, output_file_option

app = typer.Typer(help="RLVR: adaptive per-prompt rollout allocation for GRPO on verifiable arithmetic.")


@app.command()
def sft(
    out: Annotated[Path, typer.Option(help="Checkpoint file to write.", callback=output_file_option)] = Path(
        "runs/rlvr/sft.pt"
    ),
    steps: Annotated[int, typer.Option(min=1, help="Optimizer steps.")] = 1500,
    seed: Annotated[int, typer.Option(help="Seed.")] = 0,
    config: Annotated[Path | None, typer.Option(help="YAML preset for SFTConfig (CLI flags override).")] = None,
) -> None:
    """Warm-start the character model with supervised learning and report its solve rate per difficulty."""
    from meta.rlvr.trainers.sft import SFTConfig, train_sft
    from rolloutlab.config import ConfigError, load_config_or_defaults
    from rolloutlab.threads import set_torch_threads

    set_torch_threads()
    try:
        cfg = load_config_or_defaults(SFTConfig, config, {"steps": steps, "seed": seed})
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from exc
    _, metrics = train_sft(cfg, out_path=out, log=typer.echo)
    typer.echo(json.dumps({"sampled": metrics["sampled"], "greedy_overall": metrics["greedy"]["overall"]}, indent=2))
    typer.echo(f"saved {out}")


@app.command()
def train(
    checkpoint: Annotated[
        Path | None, typer.Option(help="SFT checkpoint to start from (default: the config's, runs/rlvr/sft.pt).")
    ] = None,
    allocator: Annotated[
        str | None, typer.Option(help="Allocator spec, e.g. uniform:8, ar3po:2,4, dars:4,16, knapsack:8,16")
    ] = None,
    token_controller: Annotated[
        str | None,
        typer.Option(
            help="Token-level controller spec: hapo:0.2,1 (HAPO), eepo:0.001 (EEPO) or arpo:0.5,1 (ARPO, calc family "
            "only) or ehpo:1,0.1 (EHPO); default none."
        ),
    ] = None,
    guidance: Annotated[
        str | None,
        typer.Option(
            help="Guidance controller spec: guide:0.5 (Guide), seele:2 (SEELE) or hbpo:0.05,4,6,8,10 (HBPO, scratch "
            "family); default none."
        ),
    ] = None,
    dart: Annotated[
        str | None,
        typer.Option(
            help="DART spec: dart:1,4,8,1,process (asynchronous rollout workers, max staleness 1; backend inline, "
            "process or ray) or dart_sync:4,8,1,process (synchronous baseline); default none."
        ),
    ] = None,
    steps: Annotated[int | None, typer.Option(min=1, help="GRPO steps in the whole run (default 100).")] = None,
    prompts_per_step: Annotated[int | None, typer.Option(min=1, help="Prompts per step (default 16).")] = None,
    lr: Annotated[
        float | None, typer.Option(help="AdamW rate per optimizer step (default 1e-4, sized for 4 minibatches).")
    ] = None,
    minibatches: Annotated[
        int | None, typer.Option(min=1, help="Optimizer steps per generated batch (default 4; 1 makes every ratio 1).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed (default 0).")] = None,
    eval_every: Annotated[
        int | None, typer.Option(min=1, help="Held-out evaluation period in steps (default 10).")
    ] = None,
    checkpoint_every: Annotated[
        int | None, typer.Option(min=0, help="Steps between checkpoints, 0 for only at the end (default 10).")
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="YAML preset for GRPORunConfig (trainer settings under grpo:); flags win.")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Parent directory of new run directories (default runs).", callback=output_dir_option),
    ] = None,
    resume: Annotated[
        Path | None, typer.Option(help="Continue the run in this directory to its original step budget.")
    ] = None,
    device: Annotated[str | None, typer.Option(help=DEVICE_HELP, callback=device_option)] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar (stderr).")] = True,
) -> None:
    """Run GRPO with one allocator from an SFT checkpoint in a run directory (or resume one with --resume RUN_DIR).

    The run directory holds config.yaml, progress.csv, TensorBoard events, checkpoint.pt (every --checkpoint-every
    steps) and, at the end, result.json; the console shows held-out accuracy against generated tokens.
    """
    from meta.rlvr.trainers.run import GRPORun, load_run_config
    from rolloutlab.checkpoint import CheckpointError
    from rolloutlab.config import ConfigError
    from rolloutlab.device import DeviceError
    from rolloutlab.threads import set_torch_threads

    set_torch_threads()
    if resume is not None:
        settings = {
            "--checkpoint": checkpoint,
            "--allocator": allocator,
            "--token-controller": token_controller,
            "--guidance": guidance,
            "--dart": dart,
            "--steps": steps,
            "--prompts-per-step": prompts_per_step,
            "--lr": lr,
            "--minibatches": minibatches,
            "--seed": seed,
            "--eval-every": eval_every,
            "--checkpoint-every": checkpoint_every,
            "--config": config,
            "--out": out,
        }
        given = [name for name, value in settings.items() if value is not None]
        if given:
            # A resumed run must end as the uninterrupted one would: its settings are the saved ones. Only where it
            # computes may change (--device), so that a run saved on a GPU can go on without one.
            raise typer.BadParameter(
                f"--resume continues a run with its saved config; drop {', '.join(given)}", param_hint="--resume"
            )
        try:
            run = GRPORun.resume(resume, device=device, progress=progress, echo=typer.echo)
        except CheckpointError as exc:
            raise typer.BadParameter(str(exc), param_hint="--resume") from exc
        except DeviceError as exc:  # the device the run was saved on is not here
            raise typer.BadParameter(f"{exc}; continue it elsewhere with --device", param_hint="--device") from exc
        typer.echo(f"resumed {run.run_dir} at step {run.trainer.num_steps} of {run.cfg.steps}")
    else:
        run_flags = {
            "sft_checkpoint": None if checkpoint is None else str(checkpoint),
            "allocator": allocator,
            "token_controller": token_controller,
            "guidance": guidance,
            "dart": dart,
            "steps": steps,
            "eval_every": eval_every,
            "checkpoint_every": checkpoint_every,
        }
        grpo_flags = {
            "prompts_per_step": prompts_per_step,
            "lr": lr,
            "minibatches": minibatches,
            "seed": seed,
            "device": device,
        }
        overrides: dict[str, Any] = {k: v for k, v in run_flags.items() if v is not None}
        overrides["grpo"] = {k: v for k, v in grpo_flags.items() if v is not None}
        try:
            cfg = load_run_config(config, overrides)
        except ConfigError as exc:
            raise typer.BadParameter(str(exc), param_hint="--config and the flags") from exc
        try:
            run = GRPORun.start(cfg, root=out or Path("runs"), progress=progress, echo=typer.echo)
        except CheckpointError as exc:
            raise typer.BadParameter(str(exc), param_hint="--checkpoint") from exc
        except DeviceError as exc:  # a preset's device that this machine lacks
            raise typer.BadParameter(f"{exc}; choose another with --device", param_hint="--device") from exc
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--allocator/--token-controller/--guidance/--config") from exc
        typer.echo(f"run directory {run.run_dir}")
    run.learn()
    final = run.evals[-1]["accuracy"] if run.evals else float("nan")
    typer.echo(f"done: {run.trainer.num_steps} steps, final held-out accuracy {final:.3f}; results in {run.run_dir}")


@app.command()
def bench(
    out: Annotated[Path, typer.Option(help="Output directory.", callback=output_dir_option)] = Path("runs/rlvr-bench"),
) -> None:
    """Run the reduced benchmark (a few arms, short runs) and print its table (needs a clone of the repository)."""
    from rolloutlab.bench import CheckoutMissing, PillarEntry, expected_seconds, load_quick_bench, run_with_progress
    from rolloutlab.threads import set_torch_threads

    try:
        quick_bench = load_quick_bench("experiments.rlvr.quick")
    except CheckoutMissing as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(code=2) from exc
    set_torch_threads()
    for line in run_with_progress(PillarEntry("rlvr", quick_bench, expected_seconds("experiments.rlvr.quick")), out):
        typer.echo(f"{line.benchmark}: {line.metric} = {line.value} (target {line.target}, {line.seconds:.0f}s)")
