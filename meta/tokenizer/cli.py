"""``rolloutlab tokenizer``: train the adaptive-length tokenizer, and measure a halting controller on held-out images
(torch is imported inside the commands)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rolloutlab.runs import output_dir_option

app = typer.Typer(
    help="Adaptive-length image tokenizer (ALIT-style recurrent encoder-decoder) and its halting controllers.",
    no_args_is_help=True,
)


@app.command()
def train(
    config: Annotated[Path | None, typer.Option(help="YAML preset (TrainConfig fields); flags override it.")] = None,
    steps: Annotated[int | None, typer.Option(min=1, help="Gradient steps.")] = None,
    minutes: Annotated[float | None, typer.Option(min=0.0, help="Wall-clock cap in minutes (> 0).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the network and the batches.")] = 0,
    digits: Annotated[
        int | None, typer.Option(min=0, help="Bundled digits in the training set (0: shapes only, no scikit-learn).")
    ] = None,
    run_dir: Annotated[
        Path | None,
        typer.Option(
            help="Resume this run directory (its saved settings; --steps may extend it).", callback=output_dir_option
        ),
    ] = None,
    runs_root: Annotated[Path, typer.Option(help="Parent of new run directories.", callback=output_dir_option)] = Path(
        "runs"
    ),
) -> None:
    """Train; checkpoints go to the run directory, and re-running with --run-dir resumes after a kill."""
    from meta.tokenizer.config import TrainConfig
    from meta.tokenizer.trainer import CHECKPOINT_KIND, CHECKPOINT_NAME, TokenizerTrainer
    from rolloutlab.checkpoint import CheckpointError, load_checkpoint
    from rolloutlab.config import ConfigError, from_dict, load_yaml
    from rolloutlab.runs import make_run_dir, write_result
    from rolloutlab.threads import set_torch_threads

    set_torch_threads()
    overrides: dict[str, object] = {"seed": seed}
    for key, value in (("steps", steps), ("max_minutes", minutes), ("digit_images", digits)):
        if value is not None:
            overrides[key] = value
    try:
        checkpoint = None if run_dir is None else run_dir / CHECKPOINT_NAME
        if checkpoint is not None and checkpoint.exists() and config is None:
            # Resuming: the run's own settings (the network must match the checkpoint); only the budget can change.
            saved = load_checkpoint(checkpoint, kind=CHECKPOINT_KIND)["config"]
            budget: dict[str, object] = {k: overrides[k] for k in ("steps", "max_minutes") if k in overrides}
            cfg = from_dict(TrainConfig, {**saved, **budget})
        elif config is not None:
            cfg = load_yaml(TrainConfig, config, overrides)
        else:
            cfg = from_dict(TrainConfig, overrides)
    except (ConfigError, CheckpointError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--config/--run-dir/--steps/--digits") from exc
    if run_dir is None:
        run_dir = make_run_dir("tokenizer", cfg.seed, runs_root, cfg)
    try:
        trainer = TokenizerTrainer(cfg, run_dir, resume=True, progress=True)
    except ImportError as exc:  # the digits need scikit-learn
        raise typer.BadParameter(f"{exc} (or train on shapes only with --digits 0)", param_hint="--digits") from exc
    result = trainer.learn()
    write_result(run_dir, result)
    per_iteration = result["train_mse_per_iteration"]
    summary = f"first {per_iteration[0]:.5f}, last {per_iteration[-1]:.5f}" if per_iteration else "not logged"
    typer.echo(f"tokenizer: {result['steps']} steps, training MSE {summary}; run dir {run_dir}")


@app.command("eval")
def evaluate(
    checkpoint: Annotated[Path, typer.Argument(help="checkpoint.pt of a training run.")],
    halting: Annotated[
        str, typer.Option(help="Halting controller spec: halt_fixed:N, halt_error:THRESHOLD[,MAX], halt_learned:PATH.")
    ] = "halt_error:0.01",
    images: Annotated[int, typer.Option(min=1, help="Held-out generated shape images.")] = 500,
) -> None:
    """Tokens per image and reconstruction MSE of one halting controller on held-out shape images."""
    import numpy as np
    from scipy.stats import spearmanr

    from meta.tokenizer.data import held_out
    from meta.tokenizer.evaluate import chosen, count_features, error_curves
    from meta.tokenizer.halting import halting_iterations, make_halting
    from meta.tokenizer.trainer import load_tokenizer
    from rolloutlab.checkpoint import CheckpointError
    from rolloutlab.threads import set_torch_threads

    set_torch_threads()
    try:
        controller = make_halting(halting)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--halting") from exc
    try:
        model, cfg = load_tokenizer(checkpoint)
    except CheckpointError as exc:
        raise typer.BadParameter(str(exc), param_hint="CHECKPOINT") from exc
    shapes = held_out(cfg, images, with_digits=False).shapes
    errors = error_curves(model, shapes.images)
    counts = halting_iterations(controller, errors, count_features(shapes.images, errors[:, 0]))
    tokens = np.asarray(cfg.model.token_counts())[counts - 1]
    # Spearman's rho is undefined when every image got the same count (a fixed count, say).
    rho = float(spearmanr(tokens, shapes.complexity).statistic) if np.ptp(tokens) > 0 else float("nan")
    typer.echo(
        f"{halting}: {tokens.mean():.2f} tokens per image, reconstruction MSE {chosen(errors, counts).mean():.5f}, "
        f"Spearman rho of tokens vs complexity {rho:.3f} over {images} held-out shape images"
    )
