"""RLVR hints and budgets benchmark: Guide and SEELE (hints on problems the model cannot solve) and HBPO
(token budgets stated in the prompt) against uniform GRPO G=8, at equal generated-token budgets.

Run from the repository root (one thread, low priority, resumable):

    OMP_NUM_THREADS=1 nice -n 5 .venv/bin/python experiments/rlvr/hints_budgets.py

Two settings, each with its own warm start (trained first if its checkpoint is missing) and its own uniform G=8 arm:

* **hints** — reversed-digit add/mul with 1-4 digit operands; the warm start barely solves the 4-digit bucket, so most
  of its groups there are all wrong and plain GRPO learns nothing from them. Arms ``uniform_g8``, ``guide``
  (``--guidance guide:0.5``) and ``seele`` (``--guidance seele:2``). Headline: greedy held-out accuracy on the hardest
  bucket at the end (mean of the last three evaluations), paired difference to uniform's with its seed-bootstrap
  interval; met when the interval is above 0.
* **budgets** — the ``scratch`` family (addition with an optional scratchpad of carries, 1-3 digits), warm-started on
  a mix of plain prompts (scratchpad or not, half and half) and budget prompts. Arms ``uniform_scratch`` and ``hbpo``
  (``--guidance hbpo:0.05,4,6,8,10``). Headline: greedy answer length on the plain held-out prompts at the end, as a
  ratio to uniform's with its paired seed-bootstrap interval, at equal accuracy; met when the ratio's interval is
  below ``1 − MIN_LENGTH_CUT`` (answers at least 5% shorter: a ratio of 0.9999 whose interval happens to exclude 1
  is no change) and the accuracy difference's interval reaches 0 or above.

Every arm of a setting starts from the same checkpoint, prompt pool, held-out set and optimizer and trains until the
same number of generated completion tokens (hint rollouts and every round included); only ``--guidance`` differs.
Each finished (arm, seed) run is written to ``results/hints_budgets_partial/<arm>__<seed>.json`` at once, so a killed
benchmark resumes where it stopped. The script also merges the DARS-B and DART sections another script writes: a
ready-made ``results/hints_budgets_parts/<name>.json`` (exactly the dict of ``methods.<name>``) or, failing that, the
per-seed ``results/hints_budgets_partial/<name>__*.json`` files, listed as they are. It writes
``results/hints_budgets.json`` (``methods.<name>.{headline_metric, value, baseline, ci, headline_met}``) and
``results/hints_budgets.md``, and prints the table.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from envs.reasoning import Task
from envs.reasoning.scratchpad import SCRATCH_ALPHABET, SCRATCH_FAMILY, make_scratch_sft_set
from experiments.rlvr.allocator_benchmark import FINAL_WINDOW, cost_ratio, paired_delta
from experiments.sweep import Unit, grid, run_sweep
from meta.rlvr.lm.charlm import CharLMConfig, build_model, load_model, save_model
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.run import GRPORun, GRPORunConfig
from meta.rlvr.trainers.sft import SFTConfig, fit_sft, train_sft
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.threads import set_torch_threads

COMMAND = "OMP_NUM_THREADS=1 nice -n 5 .venv/bin/python experiments/rlvr/hints_budgets.py"
#: Arm -> (setting, guidance spec). The baselines are uniform G=8 in each setting.
ARMS: dict[str, tuple[str, str]] = {
    "uniform_g8": ("hints", ""),
    "guide": ("hints", "guide:0.5"),
    "seele": ("hints", "seele:2"),
    "uniform_scratch": ("budgets", ""),
    "hbpo": ("budgets", "hbpo:0.05,4,6,8,10"),
}
BASELINES = {"hints": "uniform_g8", "budgets": "uniform_scratch"}
#: Sections another script may write (breadth_async.py's DARS-B and DART), merged as they are.
OTHER_METHODS = ("dars_b", "dart")
#: HBPO's headline needs answers at least this much shorter (upper end of the length ratio's interval below 1 − it).
MIN_LENGTH_CUT = 0.05


@dataclass
class Args:
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    """RL seeds (prompt order, sampling); the warm starts are shared by all."""
    arms: list[str] = field(default_factory=lambda: list(ARMS))
    """Arms to run (names of ARMS; a setting's baseline must be among them for its methods to be summarised)."""
    tokens_budget: int = 200_000
    """Generated completion tokens per run (every arm stops at the first step that reaches it)."""
    max_steps: int = 1000
    """Step cap per run."""
    eval_every: int = 25
    """Held-out evaluation period in steps (also at step 0 and the end)."""
    prompts_per_step: int = 16
    """Prompts (groups of 8) per step."""
    pool_size: int = 256
    """Training prompts per setting."""
    held_out_size: int = 400
    """Held-out prompts per setting (greedy)."""
    lr: float = 3e-4
    """AdamW rate (one full-batch optimizer step per generated batch, as in the allocator benchmark)."""
    hints_checkpoint: str = "runs/rlvr/hints_sft.pt"
    """Warm start of the hints setting (add/mul, 1-4 digits); trained with `hints_sft_steps` if missing."""
    hints_sft_steps: int = 1500
    """Warm-start steps of the hints setting."""
    budgets_checkpoint: str = "runs/rlvr/scratch_sft.pt"
    """Warm start of the budgets setting (scratch family, 1-3 digits); trained with `budgets_sft_steps` if missing."""
    budgets_sft_steps: int = 1500
    """Warm-start steps of the budgets setting."""
    out: str = "experiments/rlvr/results"
    """Results folder (hints_budgets.json, hints_budgets.md, hints_budgets_partial/, hints_budgets_parts/)."""


#: Difficulties of each setting (the hardest is the headline bucket of the hints setting).
DIFFICULTIES = {"hints": [1, 2, 3, 4], "budgets": [1, 2, 3]}
#: Budgets the scratch warm start states in half of its prompts (HBPO's, so its prompts are not new to the model).
SFT_BUDGETS = (4, 6, 8, 10)
MAX_NEW_TOKENS = {"hints": 8, "budgets": 12}


def parse_args() -> Args:
    """Every ``Args`` field as a ``--flag`` (tyro; the field docstrings are the help text)."""
    return tyro.cli(Args, description=__doc__)


def warm_start(setting: str, path: Path, steps: int) -> None:
    """Train and save the setting's SFT checkpoint (seed 0)."""
    if setting == "hints":
        cfg = SFTConfig(
            steps=steps,
            families=["add", "mul"],
            difficulties=DIFFICULTIES["hints"],
            difficulty_weights=[1.0] * 4,
            eval_per_difficulty=25,
        )
        train_sft(cfg, out_path=path, log=print)
        return
    model_cfg = CharLMConfig(alphabet=SCRATCH_ALPHABET)
    torch.manual_seed(0)
    model = build_model(model_cfg)

    def make_batch(n: int, rng: np.random.Generator) -> list[Task]:
        return make_scratch_sft_set(n, rng, DIFFICULTIES["budgets"], 0.5, SFT_BUDGETS, 0.5)

    loss = fit_sft(model, CharVocab(SCRATCH_ALPHABET), make_batch, steps, 64, 3e-3, np.random.default_rng(0), print)
    save_model(path, model, model_cfg, extra={"sft": {"final_loss": loss, "steps": steps}})


def base_config(setting: str, args: Args) -> GRPORunConfig:
    """The run settings every arm of ``setting`` shares (guidance and seed set per arm)."""
    return GRPORunConfig(
        sft_checkpoint=args.hints_checkpoint if setting == "hints" else args.budgets_checkpoint,
        allocator="uniform:8",
        steps=args.max_steps,
        eval_every=args.eval_every,
        checkpoint_every=0,
        pool_size=args.pool_size,
        held_out_size=args.held_out_size,
        families=["add", "mul"] if setting == "hints" else [SCRATCH_FAMILY],
        difficulties=DIFFICULTIES[setting],
        grpo=GRPOConfig(
            prompts_per_step=args.prompts_per_step,
            max_new_tokens=MAX_NEW_TOKENS[setting],
            lr=args.lr,
            minibatches=1,
        ),
    )


def run_arm(arm: str, seed: int, args: Args) -> dict[str, Any]:
    """Train one arm to the tokens budget; the curve holds overall and per-bucket greedy accuracy and length."""
    setting, spec = ARMS[arm]
    base = base_config(setting, args)
    cfg = replace(base, guidance=spec, grpo=replace(base.grpo, seed=seed))
    model, model_config, _ = load_model(cfg.sft_checkpoint)
    run = GRPORun(cfg, model, model_config)
    trainer = run.trainer
    hardest = max(cfg.difficulties)
    bucket = [t for t in run.held_out if t.difficulty == hardest]
    start = time.perf_counter()

    def point() -> dict[str, Any]:
        details = trainer.evaluate_details(run.held_out)
        return {
            "step": trainer.num_steps,
            "accuracy": details["accuracy"],
            "answer_length": details["answer_length"],
            "hardest_accuracy": trainer.evaluate(bucket),
            **trainer.costs.as_dict(),
        }

    curve = [point()]
    while trainer.costs.completion_tokens < args.tokens_budget and trainer.num_steps < args.max_steps:
        trainer.step()
        done = trainer.costs.completion_tokens >= args.tokens_budget or trainer.num_steps >= args.max_steps
        if trainer.num_steps % args.eval_every == 0 or done:
            curve.append(point())
            last = curve[-1]
            print(
                f"{arm} seed {seed} step {last['step']}: acc {last['accuracy']:.3f} hardest "
                f"{last['hardest_accuracy']:.3f} length {last['answer_length']:.2f} tokens {last['completion_tokens']}",
                flush=True,
            )
    return {
        "arm": arm,
        "seed": seed,
        "setting": setting,
        "guidance": spec,
        "hardest_difficulty": hardest,
        "curve": curve,
        "costs": trainer.costs.as_dict(),
        "steps": trainer.num_steps,
        "seconds": time.perf_counter() - start,
        "controller": trainer.guidance.state_dict() if trainer.guidance is not None else None,
    }


def final(run: dict[str, Any], key: str) -> float:
    """``key`` at the end of a run: the mean of its last evaluations (the held-out estimate is noisy)."""
    return float(np.mean([p[key] for p in run["curve"][-FINAL_WINDOW:]]))


def summarize(runs: list[dict[str, Any]], seeds: list[int]) -> dict[str, Any]:
    """``methods.<name>`` for every arm with all seeds and its setting's baseline (module docstring's headlines)."""
    by = {(r["arm"], r["seed"]): r for r in runs}
    methods: dict[str, Any] = {}
    for arm, (setting, spec) in ARMS.items():
        base_arm = BASELINES[setting]
        if not all((arm, s) in by and (base_arm, s) in by for s in seeds):
            continue
        mine, base = [by[(arm, s)] for s in seeds], [by[(base_arm, s)] for s in seeds]
        entry: dict[str, Any] = {
            "setting": setting,
            "guidance": spec,
            "seeds": list(seeds),
            "accuracy": [final(r, "accuracy") for r in mine],
            "hardest_accuracy": [final(r, "hardest_accuracy") for r in mine],
            "answer_length": [final(r, "answer_length") for r in mine],
            "total_tokens": float(np.mean([r["costs"]["completion_tokens"] for r in mine])),
            "steps": float(np.mean([r["steps"] for r in mine])),
            "seconds": float(np.mean([r["seconds"] for r in mine])),
        }
        accuracy = paired_delta(entry["accuracy"], [final(r, "accuracy") for r in base])
        entry["accuracy_delta"], entry["accuracy_delta_ci"] = accuracy["value"], accuracy["ci"]
        if setting == "hints":
            theirs = [final(r, "hardest_accuracy") for r in base]
            delta = paired_delta(entry["hardest_accuracy"], theirs)
            entry.update(
                headline_metric=f"held-out greedy accuracy on the hardest bucket ({mine[0]['hardest_difficulty']} "
                "digits), paired difference to uniform G=8",
                value=float(np.mean(entry["hardest_accuracy"])),
                baseline=float(np.mean(theirs)),
                effect=delta["value"],
                ci=delta["ci"],
                headline_met=None if arm == base_arm else bool(delta["ci"][0] > 0.0),
            )
        else:
            theirs = [final(r, "answer_length") for r in base]
            ratio = cost_ratio(entry["answer_length"], theirs)
            high = ratio["ci"][1]
            entry.update(
                headline_metric="held-out greedy answer length (tokens), ratio to uniform G=8, interval below "
                f"{1 - MIN_LENGTH_CUT:.2f}, at equal accuracy (accuracy difference interval reaching 0)",
                value=float(np.mean(entry["answer_length"])),
                baseline=float(np.mean(theirs)),
                effect=ratio["value"],
                ci=ratio["ci"],
                headline_met=None
                if arm == base_arm
                else bool(high is not None and high < 1.0 - MIN_LENGTH_CUT and accuracy["ci"][1] >= 0.0),
            )
        methods[arm] = entry
    return methods


def merge_others(out: Path) -> dict[str, Any]:
    """DARS-B / DART sections written elsewhere (module docstring); ``{}`` when there are none yet."""
    merged: dict[str, Any] = {}
    for name in OTHER_METHODS:
        section = out / "hints_budgets_parts" / f"{name}.json"
        if section.is_file():
            merged[name] = json.loads(section.read_text())
            continue
        parts = sorted((out / "hints_budgets_partial").glob(f"{name}__*.json"))
        if parts:
            merged[name] = {
                "headline_metric": None,
                "value": None,
                "baseline": None,
                "ci": [None, None],
                "headline_met": None,
                "note": f"per-seed parts only (no hints_budgets_parts/{name}.json section yet)",
                "parts": [json.loads(p.read_text()) for p in parts],
            }
    return merged


def _num(x: Any, fmt: str = ".3f") -> str:
    return "n/a" if x is None else format(x, fmt)


def table(methods: dict[str, Any]) -> str:
    """Markdown table of the headlines, then the verdicts."""
    lines = [
        "| method | setting | headline value | baseline | effect [95% CI] | accuracy delta [95% CI] | tokens | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, e in methods.items():
        lo, hi = e.get("ci", [None, None])
        acc = e.get("accuracy_delta_ci", [None, None])
        met = e.get("headline_met")
        lines.append(
            f"| {name} | {e.get('setting', '')} | {_num(e.get('value'))} | {_num(e.get('baseline'))} "
            f"| {_num(e.get('effect'))} [{_num(lo)}, {_num(hi)}] "
            f"| {_num(e.get('accuracy_delta'), '+.3f')} [{_num(acc[0], '+.3f')}, {_num(acc[1], '+.3f')}] "
            f"| {_num(e.get('total_tokens'), ',.0f')} | {'-' if met is None else ('met' if met else 'missed')} |"
        )
    lines.append("")
    for name, e in methods.items():
        if e.get("headline_met") is not None:
            lines.append(f"- {name}: {e['headline_metric']}: **{'met' if e['headline_met'] else 'missed'}**.")
    return "\n".join(lines) + "\n"


def main(args: Args) -> dict[str, Any]:
    set_torch_threads()
    out = Path(args.out)
    partial = out / "hints_budgets_partial"
    partial.mkdir(parents=True, exist_ok=True)
    settings = {ARMS[a][0] for a in args.arms}
    for setting in sorted(settings):
        path = Path(args.hints_checkpoint if setting == "hints" else args.budgets_checkpoint)
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            warm_start(setting, path, args.hints_sft_steps if setting == "hints" else args.budgets_sft_steps)

    def run(unit: Unit) -> dict[str, Any]:
        record = run_arm(unit.arm, unit.seed, args)
        record["args"] = asdict(args)
        return record

    units = grid(args.arms, args.seeds, partial)
    runs = list(
        run_sweep(units, run, describe=lambda u, r: f"{u.label}: {r['steps']} steps, {r['seconds']:.0f}s").values()
    )
    methods = summarize(runs, args.seeds)
    methods.update(merge_others(out))
    summary = {"command": COMMAND, "seeds": list(args.seeds), "args": asdict(args), "methods": methods}
    atomic_write_json(out / "hints_budgets.json", summary)
    text = table(methods)
    (out / "hints_budgets.md").write_text(f"Command: `{COMMAND}`\n\n{text}")
    print(text)
    return summary


if __name__ == "__main__":
    main(parse_args())
