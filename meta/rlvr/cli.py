"""``rolloutlab rlvr``: SFT warm start, one GRPO training run, and the reduced allocation benchmark.

Heavy imports (torch, transformers) happen inside the commands so ``rolloutlab --help`` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="RLVR: adaptive per-prompt rollout allocation for GRPO on verifiable arithmetic.")


@app.command()
def sft(
    out: Annotated[Path, typer.Option(help="Checkpoint file to write.")] = Path("runs/rlvr/sft.pt"),
    steps: Annotated[int, typer.Option(help="Optimizer steps.")] = 1500,
    seed: Annotated[int, typer.Option(help="Seed.")] = 0,
    config: Annotated[Path | None, typer.Option(help="YAML preset for SFTConfig (CLI flags override).")] = None,
) -> None:
    """Warm-start the character model with supervised learning and report its solve rate per difficulty."""
    from meta.rlvr.sft import SFTConfig, train_sft
    from rolloutlab.config import from_dict, load_yaml
    from rolloutlab.threads import set_torch_threads

    set_torch_threads()
    overrides = {"steps": steps, "seed": seed}
    cfg = load_yaml(SFTConfig, config, overrides) if config else from_dict(SFTConfig, overrides)
    _, metrics = train_sft(cfg, out_path=out, log=typer.echo)
    typer.echo(json.dumps({"sampled": metrics["sampled"], "greedy_overall": metrics["greedy"]["overall"]}, indent=2))
    typer.echo(f"saved {out}")


@app.command()
def train(
    checkpoint: Annotated[Path, typer.Option(help="SFT checkpoint to start from.")] = Path("runs/rlvr/sft.pt"),
    allocator: Annotated[
        str, typer.Option(help="Allocator spec, e.g. uniform:8, ar3po:2,4, dars:4,16, knapsack:8,16")
    ] = ("uniform:8"),
    steps: Annotated[int, typer.Option(help="GRPO steps.")] = 100,
    prompts_per_step: Annotated[int, typer.Option(help="Prompts per step.")] = 16,
    lr: Annotated[float, typer.Option(help="Learning rate.")] = 3e-4,
    seed: Annotated[int, typer.Option(help="Seed.")] = 0,
    eval_every: Annotated[int, typer.Option(help="Held-out evaluation period (steps).")] = 10,
) -> None:
    """Run GRPO with one allocator from an SFT checkpoint; prints accuracy against generated tokens."""
    import numpy as np

    from envs.reasoning import make_prompt_set
    from meta.rlvr.allocators import make_allocator
    from meta.rlvr.charlm import load_model
    from meta.rlvr.grpo import GRPOConfig, GRPOTrainer
    from meta.rlvr.vocab import CharVocab
    from rolloutlab.seeding import seed_everything
    from rolloutlab.threads import set_torch_threads

    set_torch_threads()
    seed_everything(seed)
    chosen = make_allocator(allocator)  # validate the spec before any heavy work
    model, _, _ = load_model(checkpoint)
    pool = make_prompt_set(256, np.random.default_rng(1), difficulties=[1, 2, 3])
    held_out = make_prompt_set(600, np.random.default_rng(2), difficulties=[1, 2, 3])
    cfg = GRPOConfig(prompts_per_step=prompts_per_step, lr=lr, seed=seed)
    trainer = GRPOTrainer(model, CharVocab(), pool, chosen, cfg)
    typer.echo(f"step 0: held-out accuracy {trainer.evaluate(held_out):.3f}")
    for step in range(1, steps + 1):
        metrics = trainer.step()
        if step % eval_every == 0 or step == steps:
            typer.echo(
                f"step {step}: held-out accuracy {trainer.evaluate(held_out):.3f}, "
                f"tokens {metrics['cost/completion_tokens']}, responses {metrics['cost/responses']}, "
                f"mixed groups {metrics['groups_mixed']}/{metrics['groups_generated']}"
            )


@app.command()
def bench(
    out: Annotated[Path, typer.Option(help="Output directory.")] = Path("runs/rlvr-bench"),
) -> None:
    """Run the reduced benchmark (a few arms, short runs) and print its table."""
    from meta.rlvr.bench import quick_bench
    from rolloutlab.threads import set_torch_threads

    set_torch_threads()
    for line in quick_bench(out):
        typer.echo(f"{line.benchmark}: {line.metric} = {line.value} (target {line.target}, {line.seconds:.0f}s)")
