"""Does the adaptive-length tokenizer give complex images more tokens, and does that beat a fixed length?

Trains the recurrent tokenizer (:mod:`meta.tokenizer`) on generated shapes and bundled digits, and, as the
fixed-length baseline, the same network with one iteration of ``budget`` iterations' tokens (a plain fixed-length
tokenizer, trained only at that length); then, on held-out images:

(a) **token count vs known complexity**: Spearman rho between the iterations ALIT's rule (``halt_error``) gives each
    held-out shape image and its complexity by construction (shapes + textured shapes); target rho >= 0.6;
(b) **adaptive vs fixed at equal mean tokens**: at a mean budget of ``budget`` iterations per image, the error
    threshold is set by rate control (:func:`meta.tokenizer.evaluate.threshold_for_budget`: the one threshold whose
    mean count on the evaluated images is at most the budget; it reads only the images' own errors), and the adaptive
    reconstruction MSE is compared with the best fixed-length tokenizer at that many tokens (the recurrent model
    stopped there, or the dedicated one), paired bootstrap interval over held-out images; target: the interval of
    adaptive minus fixed lies below zero. A threshold calibrated on training images instead is reported beside it;
(c) **training time** on one core.

The learned halting controller (``halt_learned``) is fitted on training images to the counts of the training-calibrated
threshold and reported on the held-out images. Writes ``results/adaptive_length.json``, ``results/adaptive_length.png``
(reconstruction vs tokens; tokens vs complexity) and ``results/adaptive_length_examples.png``:

    OMP_NUM_THREADS=1 nice -n 10 python experiments/tokenizer/adaptive_length.py
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tyro
from scipy.stats import spearmanr

from meta.tokenizer.config import TokenizerConfig, TrainConfig
from meta.tokenizer.data import held_out, training_images
from meta.tokenizer.evaluate import chosen, count_features, error_curves, fit_count_predictor, threshold_for_budget
from meta.tokenizer.halting import ErrorThreshold, FixedCount, LearnedCount, halting_iterations
from meta.tokenizer.trainer import TokenizerTrainer
from rolloutlab.checkpoint import atomic_write_json, atomic_write_text
from rolloutlab.config import to_dict
from rolloutlab.statistics import paired_difference
from rolloutlab.threads import set_torch_threads

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "tokenizer" / "results"


def shown(path: Path) -> str:
    """``path`` from the repository root when it lies inside it (what the JSON records), else as given."""
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(path)


@dataclass
class Args:
    steps: int = 2000
    """Gradient steps of the recurrent tokenizer."""
    fixed_steps: int = 1000
    """Gradient steps of the dedicated fixed-length baseline (one iteration: about a fifth of a recurrent step)."""
    batch_size: int = 32
    """Images per step (both models)."""
    iterations: int = 8
    """Recurrent iterations T of the adaptive tokenizer."""
    tokens_per_iteration: int = 2
    """Latent tokens the first iteration creates and each later one adds."""
    d_model: int = 48
    """Token width of the encoder."""
    encoder_layers: int = 2
    """Transformer layers of the recurrent encoder."""
    decoder_hidden: int = 256
    """Width of the decoder's hidden layers."""
    budget: int = 4
    """The headline mean budget, in iterations per image (``budget * tokens_per_iteration`` tokens)."""
    shape_images: int = 8000
    """Generated shape images in the training set."""
    digit_images: int = 1200
    """Bundled digits in the training set (the other 597 are held out)."""
    held_out_shapes: int = 1000
    """Held-out generated shape images (complexity known)."""
    calibration_images: int = 2000
    """Training images on which the training-calibrated threshold and the learned predictor are fitted."""
    seed: int = 0
    """Seeds both networks and the batch draws."""
    bootstrap_resamples: int = 9999
    """Resamples of the paired bootstrap."""
    run_root: str = "runs/tokenizer-adaptive-length"
    """Where the two training runs checkpoint (re-running resumes them)."""
    out: str = str(RESULTS / "adaptive_length.json")
    """The JSON result; the PNGs go beside it."""
    max_minutes: float | None = 40.0
    """Wall-clock cap of the recurrent tokenizer's training (None: none); on a shared machine the wall clock runs
    several times the CPU time, and a capped run says so (``training.stopped_by_time_cap``)."""
    fixed_max_minutes: float | None = 6.0
    """Wall-clock cap of the dedicated fixed-length baseline's training."""
    summarize_only: bool = False
    """Only rewrite the markdown table (``results/adaptive_length.md``) from the committed JSON."""


def train(config: TrainConfig, run_dir: Path, images: np.ndarray) -> tuple[TokenizerTrainer, dict[str, Any]]:
    trainer = TokenizerTrainer(config, run_dir, resume=True, progress=True, images=images)
    result = trainer.learn()
    return trainer, result


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho; NaN when either side is constant (every image got the same count)."""
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(spearmanr(x, y).statistic)


def compare(adaptive: np.ndarray, fixed: np.ndarray, resamples: int, seed: int) -> dict[str, Any]:
    """Mean MSE of each arm and adaptive minus fixed with its paired bootstrap interval (over images)."""
    estimate = paired_difference(adaptive, fixed, rng=seed, n_resamples=resamples)
    return {
        "adaptive_mse": float(np.mean(adaptive)),
        "fixed_mse": float(np.mean(fixed)),
        "difference": float(estimate.value),
        "interval": [float(estimate.low), float(estimate.high)],
        "relative": float(np.mean(adaptive) / np.mean(fixed) - 1.0),
    }


def main(args: Args) -> dict[str, Any]:
    if args.summarize_only:
        saved: dict[str, Any] = json.loads(Path(args.out).read_text(encoding="utf-8"))
        atomic_write_text(Path(args.out).with_suffix(".md"), markdown_table(saved))
        return saved
    set_torch_threads(1)
    wall_start = time.perf_counter()
    model = TokenizerConfig(
        d_model=args.d_model,
        encoder_layers=args.encoder_layers,
        decoder_hidden=args.decoder_hidden,
        iterations=args.iterations,
        initial_tokens=args.tokens_per_iteration,
        tokens_per_iteration=args.tokens_per_iteration,
    )
    config = TrainConfig(
        seed=args.seed,
        steps=args.steps,
        batch_size=args.batch_size,
        shape_images=args.shape_images,
        digit_images=args.digit_images,
        max_minutes=args.max_minutes,
        model=model,
    )
    budget_tokens = model.token_counts()[args.budget - 1]
    fixed_config = dataclasses.replace(
        config,
        steps=args.fixed_steps,
        max_minutes=args.fixed_max_minutes,
        model=dataclasses.replace(model, iterations=1, initial_tokens=budget_tokens, tokens_per_iteration=0),
    )
    images = training_images(config)
    root = Path(args.run_root)
    adaptive_trainer, adaptive_run = train(config, root / "adaptive", images)
    fixed_trainer, fixed_run = train(fixed_config, root / f"fixed{budget_tokens}", images)

    # --- held-out error curves ---------------------------------------------------------------------------------
    eval_start = time.perf_counter()
    test = held_out(config, args.held_out_shapes, with_digits=args.digit_images > 0)
    test_images = np.concatenate([test.shapes.images, test.digits])
    n_shapes = len(test.shapes)
    errors = error_curves(adaptive_trainer.model, test_images)
    fixed_errors = error_curves(fixed_trainer.model, test_images)[:, 0]
    counts_tokens = model.token_counts()
    complexity = test.shapes.complexity

    # --- (b) adaptive vs fixed at equal mean tokens, every budget; the headline at args.budget --------------------
    rng = np.random.default_rng(args.seed)
    calibration = images[rng.choice(len(images), size=min(args.calibration_images, len(images)), replace=False)]
    calibration_errors = error_curves(adaptive_trainer.model, calibration)
    budgets = []
    for budget in range(1, args.iterations):
        threshold = threshold_for_budget(errors, budget)
        iterations = halting_iterations(ErrorThreshold(threshold, args.iterations), errors)
        budgets.append(
            {
                "budget_iterations": budget,
                "budget_tokens": counts_tokens[budget - 1],
                "threshold": threshold,
                "mean_iterations": float(iterations.mean()),
                "mean_tokens": float(np.mean(np.asarray(counts_tokens)[iterations - 1])),
                "spearman_complexity": spearman(iterations[:n_shapes], complexity),
                **compare(
                    chosen(errors, iterations), errors[:, budget - 1], args.bootstrap_resamples, args.seed + budget
                ),
            }
        )
    headline = next(b for b in budgets if b["budget_iterations"] == args.budget)
    threshold = headline["threshold"]
    iterations = halting_iterations(ErrorThreshold(threshold, args.iterations), errors)
    adaptive_errors = chosen(errors, iterations)
    prefix_errors = errors[:, args.budget - 1]
    best_fixed_name, best_fixed = min(
        (
            ("recurrent tokenizer stopped at the budget", prefix_errors),
            (f"dedicated {budget_tokens}-token", fixed_errors),
        ),
        key=lambda pair: float(np.mean(pair[1])),
    )
    versus_best = compare(adaptive_errors, best_fixed, args.bootstrap_resamples, args.seed)
    versus_dedicated = compare(adaptive_errors, fixed_errors, args.bootstrap_resamples, args.seed)

    # The threshold calibrated on training images instead of the held-out ones.
    train_threshold = threshold_for_budget(calibration_errors, args.budget)
    train_iterations = halting_iterations(ErrorThreshold(train_threshold, args.iterations), errors)

    # --- the learned halting controller ----------------------------------------------------------------------------
    predictor = fit_count_predictor(calibration, calibration_errors, train_threshold)
    predictor_path = Path(args.out).with_name("adaptive_length_predictor.json")
    predictor.save(predictor_path)
    learned_iterations = halting_iterations(LearnedCount(predictor), errors, count_features(test_images, errors[:, 0]))

    # --- (a) tokens vs complexity ----------------------------------------------------------------------------------
    shape_iterations = iterations[:n_shapes]
    per_complexity = {
        int(c): {
            "images": int((complexity == c).sum()),
            "mean_tokens": float(np.mean(np.asarray(counts_tokens)[shape_iterations[complexity == c] - 1])),
            "fixed_curve_mse": [float(v) for v in errors[:n_shapes][complexity == c].mean(axis=0)],
        }
        for c in np.unique(complexity)
    }
    rho = spearman(shape_iterations, complexity)
    eval_seconds = time.perf_counter() - eval_start

    def arm(its: np.ndarray) -> dict[str, Any]:
        return {
            "mean_iterations": float(its.mean()),
            "mean_tokens": float(np.mean(np.asarray(counts_tokens)[its - 1])),
            "mse": float(chosen(errors, its).mean()),
            "mse_shapes": float(chosen(errors, its)[:n_shapes].mean()),
            "mse_digits": float(chosen(errors, its)[n_shapes:].mean()) if len(test.digits) else None,
            "spearman_complexity": spearman(its[:n_shapes], complexity),
            "iteration_histogram": np.bincount(its, minlength=args.iterations + 1)[1:].tolist(),
        }

    fixed_arm = halting_iterations(FixedCount(args.budget), errors)
    result: dict[str, Any] = {
        "args": dataclasses.asdict(args),
        "config": to_dict(config),
        "fixed_config": to_dict(fixed_config),
        "held_out": {"shapes": n_shapes, "digits": len(test.digits)},
        "token_counts": counts_tokens,
        "training": {
            "adaptive_seconds": adaptive_run["train_seconds"],
            "fixed_seconds": fixed_run["train_seconds"],
            "total_minutes": (adaptive_run["train_seconds"] + fixed_run["train_seconds"]) / 60.0,
            "adaptive_cpu_seconds": adaptive_run["cpu_seconds"],
            "fixed_cpu_seconds": fixed_run["cpu_seconds"],
            "total_cpu_minutes": (adaptive_run["cpu_seconds"] + fixed_run["cpu_seconds"]) / 60.0,
            "stopped_by_time_cap": adaptive_run["stopped_by_time_cap"] or fixed_run["stopped_by_time_cap"],
            "adaptive_steps": adaptive_run["steps"],
            "fixed_steps": fixed_run["steps"],
            "threads": 1,
        },
        "eval_seconds": eval_seconds,
        "fixed_curve": {
            "mse": [float(v) for v in errors.mean(axis=0)],
            "mse_shapes": [float(v) for v in errors[:n_shapes].mean(axis=0)],
            "mse_digits": [float(v) for v in errors[n_shapes:].mean(axis=0)] if len(test.digits) else None,
        },
        "dedicated_fixed": {"tokens": budget_tokens, "mse": float(fixed_errors.mean())},
        "complexity": {
            "spearman_tokens_vs_complexity": rho,
            "spearman_tokens_vs_shapes": spearman(shape_iterations, test.shapes.n_shapes),
            "spearman_tokens_vs_edge_pixels": spearman(shape_iterations, test.shapes.edge_pixels),
            "threshold": threshold,
            "per_complexity": per_complexity,
        },
        "headline": {
            "budget_iterations": args.budget,
            "budget_tokens": budget_tokens,
            "threshold": threshold,
            "adaptive": arm(iterations),
            "fixed": arm(fixed_arm),
            "best_fixed": best_fixed_name,
            "versus_best_fixed": versus_best,
            "versus_dedicated_fixed": versus_dedicated,
            "train_calibrated": {
                "threshold": train_threshold,
                **arm(train_iterations),
                **compare(chosen(errors, train_iterations), best_fixed, args.bootstrap_resamples, args.seed),
            },
            "learned": {"predictor": shown(predictor_path), **arm(learned_iterations)},
        },
        "budgets": budgets,
        "targets": {
            "spearman_at_least_0.6": rho >= 0.6,
            "adaptive_below_best_fixed": versus_best["interval"][1] < 0.0,
        },
        "wall_seconds": time.perf_counter() - wall_start,
    }
    out = Path(args.out)
    atomic_write_json(out, result)
    atomic_write_text(out.with_suffix(".md"), markdown_table(result))
    plot(result, out.with_suffix(".png"))
    examples(adaptive_trainer, test, errors, iterations, counts_tokens, out.with_name(out.stem + "_examples.png"))
    print(
        f"(a) Spearman rho tokens vs complexity {rho:.3f} (target >= 0.6: {'met' if rho >= 0.6 else 'MISSED'})\n"
        f"(b) at {budget_tokens} tokens mean: adaptive MSE {versus_best['adaptive_mse']:.5f} vs best fixed "
        f"({best_fixed_name}) {versus_best['fixed_mse']:.5f}; difference {versus_best['difference']:+.5f} "
        f"[{versus_best['interval'][0]:+.5f}, {versus_best['interval'][1]:+.5f}] "
        f"({'met' if result['targets']['adaptive_below_best_fixed'] else 'MISSED'})\n"
        f"(c) training {result['training']['total_minutes']:.1f} min wall, "
        f"{result['training']['total_cpu_minutes']:.1f} min CPU, one thread"
    )
    return result


def markdown_table(result: dict[str, Any]) -> str:
    """The budgets table of the docs: for each mean budget, the fixed-length and adaptive held-out MSE and their paired
    difference."""
    lines = [
        "| budget (tokens per image) | fixed-length MSE | adaptive MSE (mean tokens) | adaptive - fixed [95% interval] "
        "| Spearman rho (tokens, complexity) |",
        "|---|---|---|---|---|",
    ]
    for b in result["budgets"]:
        low, high = b["interval"]
        lines.append(
            f"| {b['budget_tokens']} | {b['fixed_mse']:.5f} | {b['adaptive_mse']:.5f} ({b['mean_tokens']:.2f}) "
            f"| {b['difference']:+.5f} [{low:+.5f}, {high:+.5f}] | {b['spearman_complexity']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> None:
    """Reconstruction MSE against mean tokens per image, and tokens against known complexity."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    tokens = result["token_counts"]
    left.plot(tokens, result["fixed_curve"]["mse"], "o-", label="fixed length (recurrent model stopped at t)")
    budgets = result["budgets"]
    left.plot(
        [b["mean_tokens"] for b in budgets], [b["adaptive_mse"] for b in budgets], "s-", label="adaptive (halt_error)"
    )
    dedicated = result["dedicated_fixed"]
    left.plot([dedicated["tokens"]], [dedicated["mse"]], "k^", label=f"dedicated {dedicated['tokens']}-token model")
    learned = result["headline"]["learned"]
    left.plot([learned["mean_tokens"]], [learned["mse"]], "D", label="learned count (halt_learned)")
    left.set_xlabel("mean latent tokens per image")
    left.set_ylabel("reconstruction MSE (held-out)")
    left.set_yscale("log")
    left.legend(fontsize=7)
    per = result["complexity"]["per_complexity"]
    levels = sorted(per, key=int)
    right.bar([int(c) for c in levels], [per[c]["mean_tokens"] for c in levels])
    right.set_xlabel("known complexity (shapes + textured shapes)")
    right.set_ylabel("mean tokens (halt_error at the headline budget)")
    right.set_title(f"Spearman rho = {result['complexity']['spearman_tokens_vs_complexity']:.2f}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def examples(
    trainer: TokenizerTrainer,
    test: Any,
    errors: np.ndarray,
    iterations: np.ndarray,
    token_counts: list[int],
    path: Path,
) -> None:
    """One held-out shape image per complexity level and two digits: the original, then the reconstruction after each
    iteration; the one ALIT's rule picks is framed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    complexity = test.shapes.complexity
    n_shapes = len(test.shapes)
    levels = np.unique(complexity)
    picked = levels[np.unique(np.linspace(0, len(levels) - 1, 6).round().astype(int))]
    rows = [int(np.flatnonzero(complexity == c)[0]) for c in picked]
    rows += [n_shapes, n_shapes + 1] if len(test.digits) >= 2 else []
    images = np.concatenate([test.shapes.images, test.digits])[rows]
    with torch.no_grad():
        recon = trainer.model.eval()(torch.as_tensor(images)).numpy()  # (T, rows, S, S)
    horizon = recon.shape[0]
    fig, axes = plt.subplots(len(rows), horizon + 1, figsize=(1.2 * (horizon + 1), 1.2 * len(rows)))
    for r, index in enumerate(rows):
        label = f"c={int(complexity[index])}" if index < n_shapes else "digit"
        axes[r, 0].imshow(images[r], cmap="gray", vmin=0, vmax=1)
        axes[r, 0].set_ylabel(label, fontsize=7)
        for t in range(horizon):
            ax = axes[r, t + 1]
            ax.imshow(recon[t, r], cmap="gray", vmin=0, vmax=1)
            if t + 1 == iterations[index]:
                for spine in ax.spines.values():
                    spine.set_color("red")
                    spine.set_linewidth(2)
        for ax in axes[r]:
            ax.set_xticks([])
            ax.set_yticks([])
    axes[0, 0].set_title("image", fontsize=7)
    for t in range(horizon):
        axes[0, t + 1].set_title(f"{token_counts[t]} tok", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
