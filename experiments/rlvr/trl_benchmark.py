"""The allocation benchmark through TRL: which allocator reaches uniform G=8's accuracy on fewer generated tokens,
and in less wall-clock time, when it runs inside TRL's ``GRPOTrainer`` (``meta.rlvr.trl.AllocatingGRPOTrainer``), on
one process and on two data-parallel processes?

Run from the repository root (one thread per process, resumable at run granularity):

    OMP_NUM_THREADS=1 nice -n 10 python experiments/rlvr/trl_benchmark.py --workers 2

Three task families:

* ``arith`` — the shipped one (``envs.reasoning``): reversed-digit addition and multiplication with 1–3 digits, the
  compact benchmark's pool and held-out set, from its SFT checkpoint (``runs/rlvr/sft.pt``, trained if missing);
* ``sort`` — defined only here, used nowhere else in the repository: sort the digits of a 4–7 digit string
  (``"3142=" → "1234"``), from its own short SFT warm start;
* ``reverse`` — defined only here: write a 4–7 digit string backwards (``"3142=" → "2413"``), from its own short SFT
  warm start.

Every arm of a family starts from the same checkpoint, with the same prompt pool, global batch (16 prompts per step,
``num_generations=8``), TRL settings and steps; seeds 0–4 (TRL's seed: prompt order and sampling). Each run is made
with 1 process or with 2 (``--processes``): a 2-process run is ``python -m torch.distributed.run --nproc_per_node 2``
(gloo on the CPU) with half the batch per process, so the global batch is the 1-process one; the launcher starts one
such process group for all the missing 2-process runs and its rank 0 writes each record. Held-out greedy accuracy every
``eval_every`` steps (split over the processes), against the adapter's ledger of generated tokens, the training
wall-clock and the busiest process's CPU time (evaluations excluded); per step, TRL's logged ``reward``, the adapter's
``rlvr/reward_per_prompt``, ``rlvr/stages``, ``rlvr/rollout_seconds``, ``rlvr/stage_seconds`` and rows and tokens
generated and trained. Each
finished run is written to ``results/trl/per_run/<family>__<arm>__<seed>__p<processes>.json`` at once; the summary
goes to ``results/trl_summary.json`` (``families.<name>`` for 1 process, ``processes.<n>.<name>`` for each process
count, ``two_vs_one_process``, ``target_parts`` and ``target_met``). The summary and its table are
:mod:`experiments.rlvr.trl_summary`'s (:func:`~experiments.rlvr.trl_summary.summarize_trl`,
:func:`~experiments.rlvr.trl_summary.trl_table`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from envs.reasoning import Task, verify
from experiments.rlvr.allocator_benchmark import (
    ARMS,
    BENCHMARK_LR,
    DEFAULT_CHECKPOINT,
    EVAL_EVERY,
    HELD_OUT_SIZE,
    POOL_SIZE,
    TRL_ARMS,
    prompt_sets,
    run_record,
)
from experiments.rlvr.trl_summary import summarize_trl, trl_table
from experiments.sweep import Unit, run_sweep
from meta.rlvr.lm.charlm import build_model, load_model, save_model
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.grpo_config import GRPOConfig as CompactGRPOConfig
from meta.rlvr.trainers.sft import SFTConfig, fit_sft, solve_rate, train_sft
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.threads import set_torch_threads

RESULTS = Path(__file__).resolve().parent / "results"
FAMILIES = ("arith", "sort", "reverse")


@dataclass
class Args:
    families: list[str] = field(default_factory=lambda: list(FAMILIES))
    """task families (arith: shipped; sort, reverse: defined only in this script)"""
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    """RL seeds (TRL's seed: prompt order and sampling)"""
    arms: list[str] = field(default_factory=lambda: list(TRL_ARMS))
    """arms (names from allocator_benchmark.ARMS)"""
    processes: list[int] = field(default_factory=lambda: [1, 2])
    """data-parallel process counts; every count trains the same global batch"""
    steps: int = 90
    """GRPO steps per run"""
    eval_every: int = EVAL_EVERY
    """held-out evaluation period in steps"""
    prompts_per_step: int = CompactGRPOConfig.prompts_per_step
    """prompts per step, over all processes (TRL's global batch: this times num_generations=8 rows)"""
    lr: float = BENCHMARK_LR
    """AdamW learning rate (the compact benchmark's, for its one optimizer step per generated batch)"""
    max_new_tokens: int = CompactGRPOConfig.max_new_tokens
    """TRL's max_completion_length (the compact trainer's max_new_tokens)"""
    arith_checkpoint: str = DEFAULT_CHECKPOINT
    """the compact benchmark's SFT checkpoint (trained with SFTConfig's defaults, experiments/rlvr/sft.yaml, if
    missing)"""
    sort_checkpoint: str = "runs/rlvr/sft_sort.pt"
    """the sort family's SFT checkpoint (trained with sort_sft_steps if missing)"""
    sort_sft_steps: int = 100
    """supervised steps of the sort family's warm start"""
    reverse_checkpoint: str = "runs/rlvr/sft_reverse.pt"
    """the reverse family's SFT checkpoint (trained with reverse_sft_steps if missing)"""
    reverse_sft_steps: int = 120
    """supervised steps of the reverse family's warm start"""
    pool_size: int = POOL_SIZE
    """training prompts per family"""
    held_out_size: int = HELD_OUT_SIZE
    """held-out prompts per family"""
    workers: int = 1
    """1-process runs side by side in worker processes (the runs of a larger process count go one at a time)"""
    out: str = str(RESULTS / "trl")
    """per-run results folder"""
    summary: str = str(RESULTS / "trl_summary.json")
    """summary file"""
    run: bool = True
    """run the missing runs first (--no-run: only summarize the records on disk, e.g. of a sweep cut short)"""
    units: list[str] = field(default_factory=list)
    """set by the launcher inside a process group: run exactly these runs (family:arm:seed) and exit"""


def sort_tasks(n: int, rng: np.random.Generator, digits: tuple[int, ...] = (4, 5, 6, 7)) -> list[Task]:
    """``n`` digit-sorting tasks: a string of 4–7 random digits, answer its digits in ascending order."""
    out = []
    for d in rng.choice(digits, size=n):
        s = "".join(str(int(x)) for x in rng.integers(0, 10, size=int(d)))
        out.append(Task(f"{s}=", "".join(sorted(s)), "sort", int(d)))
    return out


def reverse_tasks(n: int, rng: np.random.Generator, digits: tuple[int, ...] = (4, 5, 6, 7)) -> list[Task]:
    """``n`` string-reversal tasks: a string of 4–7 random digits, answer the string backwards."""
    out = []
    for d in rng.choice(digits, size=n):
        s = "".join(str(int(x)) for x in rng.integers(0, 10, size=int(d)))
        out.append(Task(f"{s}=", s[::-1], "reverse", int(d)))
    return out


#: The generated families: their task maker and the generator seeds of their pool and held-out set.
GENERATED: dict[str, tuple[Callable[[int, np.random.Generator], list[Task]], int, int]] = {
    "sort": (sort_tasks, 11, 12),
    "reverse": (reverse_tasks, 21, 22),
}


def family_tasks(family: str, args: Args) -> tuple[list[Task], list[Task]]:
    """The family's training pool and held-out set (fixed generators, the same for every arm, seed and process
    count)."""
    if family == "arith":
        return prompt_sets(args.pool_size, args.held_out_size)
    if family in GENERATED:
        make, pool_seed, held_out_seed = GENERATED[family]
        return make(args.pool_size, np.random.default_rng(pool_seed)), make(
            args.held_out_size, np.random.default_rng(held_out_seed)
        )
    raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")


def ensure_checkpoint(family: str, args: Args) -> str:
    """The family's SFT checkpoint path, trained first if missing."""
    if family == "arith":
        path = Path(args.arith_checkpoint)
        if not path.is_file():
            train_sft(SFTConfig(), out_path=path)
        return str(path)
    path = Path(getattr(args, f"{family}_checkpoint"))
    steps = int(getattr(args, f"{family}_sft_steps"))
    if not path.is_file():
        torch.manual_seed(0)
        architecture = SFTConfig().model
        model = build_model(architecture)
        make = GENERATED[family][0]
        loss = fit_sft(model, CharVocab(architecture.alphabet), make, steps, 64, 3e-3, np.random.default_rng(0))
        save_model(path, model, architecture, extra={"sft": {"family": family, "steps": steps, "final_loss": loss}})
    return str(path)


def greedy_accuracy(model: torch.nn.Module, tasks: list[Task], max_new_tokens: int, chunk: int = 200) -> float:
    """Held-out greedy accuracy with the compact trainer's sampler (the compact benchmark's measure), in chunks.

    Inside a process group every process scores its share of ``tasks`` (every ``world``-th, from its rank) and the
    counts are summed, so the result is the one a single process gives on the same parameters.
    """
    rank, world = 0, 1
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    vocab = CharVocab()
    model.eval()
    mine = tasks[rank::world]
    correct = 0.0
    for start in range(0, len(mine), chunk):
        part = mine[start : start + chunk]
        correct += sum(solve_rate(model, part, vocab, temperature=0.0, max_new_tokens=max_new_tokens))
    if world > 1:
        total = torch.tensor([correct], dtype=torch.float64)
        torch.distributed.all_reduce(total)
        correct = float(total.item())
    return correct / len(tasks)


def busiest(seconds: float) -> float:
    """The largest of every process's ``seconds`` (inside a process group: gathered from all; else ``seconds``)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        value = torch.tensor([seconds], dtype=torch.float64)
        torch.distributed.all_reduce(value, op=torch.distributed.ReduceOp.MAX)
        return float(value.item())
    return float(seconds)


#: Rows per prompt a benchmark step may hold (the largest per-prompt count of any arm, 16, plus one reused response).
MAX_ROWS_PER_PROMPT = 17


def make_trainer(
    model: torch.nn.Module,
    pool: list[Task],
    allocator: Any,
    family: str,
    output_dir: str,
    seed: int,
    *,
    prompts_per_step: int,
    max_new_tokens: int,
    lr: float,
    max_steps: int,
    callbacks: list[Any] | None = None,
    processes: int = 1,
    **config: Any,
) -> Any:
    """The benchmark's ``AllocatingGRPOTrainer`` on ``pool`` with an exact-match verifier (also used by
    ``experiments/meta/rlvr_meta_trl.py``); ``config`` overrides or adds TRL ``GRPOConfig`` settings.

    ``prompts_per_step`` is the global batch; with ``processes`` > 1 (the caller runs inside a process group of that
    size) each process gets ``prompts_per_step * 8 / processes`` rows and the per-process share of the row budget.
    """
    from datasets import Dataset
    from trl import GRPOConfig

    from meta.rlvr.lm.tokenizer import CharTokenizer
    from meta.rlvr.trl import AllocatingGRPOTrainer

    if prompts_per_step % processes:
        raise ValueError(
            f"prompts_per_step={prompts_per_step} does not split evenly over processes={processes}: every process "
            "gets the same number of prompts"
        )
    rows = prompts_per_step * 8

    def exact_match(prompts: list[str], completions: list[str], answer: list[str], **kwargs: Any) -> list[float]:
        return [verify(Task(p, a, family, 0), c) for p, c, a in zip(prompts, completions, answer, strict=True)]

    settings: dict[str, Any] = dict(
        output_dir=output_dir,
        per_device_train_batch_size=rows // processes,
        num_generations=8,
        max_completion_length=max_new_tokens,
        max_steps=max_steps,
        learning_rate=lr,
        loss_type="dapo",
        epsilon=0.2,
        epsilon_high=0.28,  # the compact trainer's clip-higher bounds
        beta=0.0,
        temperature=1.0,
        logging_steps=max_steps,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=seed,
        disable_tqdm=True,
    )
    settings.update(config)
    return AllocatingGRPOTrainer(
        model=model,
        reward_funcs=[exact_match],
        args=GRPOConfig(**settings),
        train_dataset=Dataset.from_dict({"prompt": [t.prompt for t in pool], "answer": [t.answer for t in pool]}),
        processing_class=CharTokenizer(),
        allocator=allocator,
        correctness_reward="exact_match",
        callbacks=callbacks,
        # The benchmark measures each allocator's own decisions, so it opts out of cutting a step to the batch's
        # rows: the most any arm asks per prompt (DARS, E3, knapsack and the meta-policy's grid: 16) plus one reuse,
        # per process (the adapter's budget is per process, applied to the global allocation).
        max_rows_per_step=prompts_per_step * MAX_ROWS_PER_PROMPT // processes,
    )


#: TRL's per-step log fields each run keeps (``steps`` of its record, one value per step).
STEP_FIELDS = (
    "reward",
    "rlvr/reward_per_prompt",
    "rlvr/stages",
    "rlvr/rollout_seconds",
    "rlvr/stage_seconds",
    "ledger/step_responses",
    "ledger/step_completion_tokens",
    "ledger/step_rows_trained",
    "ledger/step_tokens_trained",
)
#: The speeds of the end-of-training log each run keeps (TRL's nominal one and the adapter's real ones).
SPEED_FIELDS = (
    "train_runtime",
    "train_samples_per_second",
    "train_rows_per_second",
    "train_responses_per_second",
    "train_generated_tokens_per_second",
)


def step_log(log_history: list[dict[str, Any]]) -> tuple[dict[str, list[float]], dict[str, float]]:
    """TRL's ``state.log_history`` (logged every step) as ``({field: [value per step]}, {speed: value})``."""
    steps: dict[str, list[float]] = {name: [] for name in STEP_FIELDS}
    speeds: dict[str, float] = {}
    for entry in log_history:
        if "train_runtime" in entry:
            speeds = {name: float(entry[name]) for name in SPEED_FIELDS if name in entry}
        elif "rlvr/stages" in entry:
            for name in STEP_FIELDS:
                steps[name].append(round(float(entry.get(name, float("nan"))), 6))
    return steps, speeds


def run_one(family: str, arm: str, seed: int, checkpoint: str, args: Args, processes: int = 1) -> dict[str, Any]:
    """Train one arm through TRL with the adapter; returns the curve of accuracy against the ledger and the training
    wall-clock, and the per-step log.

    With ``processes`` > 1 every process of the group calls this with the same arguments; each returns the record
    (rank 0's clock and log).
    """
    set_torch_threads()
    from transformers import PrinterCallback, TrainerCallback

    pool, held_out = family_tasks(family, args)
    torch.manual_seed(seed)
    model, _, _ = load_model(checkpoint)
    allocator = ARMS[arm]()

    curve: list[dict[str, Any]] = []
    clock = {"start": 0.0, "evaluating": 0.0, "cpu_start": 0.0, "cpu_evaluating": 0.0}

    def point(step: int) -> dict[str, Any]:
        # The training wall-clock so far: time since train() began, less the time spent in these evaluations; and the
        # same in CPU time of the busiest process, which a machine shared with other jobs does not inflate.
        seconds = time.perf_counter() - clock["start"] - clock["evaluating"] if step else 0.0
        cpu = time.process_time() - clock["cpu_start"] - clock["cpu_evaluating"] if step else 0.0
        started, cpu_started = time.perf_counter(), time.process_time()
        accuracy = greedy_accuracy(model, held_out, args.max_new_tokens)
        clock["evaluating"] += time.perf_counter() - started
        clock["cpu_evaluating"] += time.process_time() - cpu_started
        model.train()
        return {
            "step": step,
            "accuracy": accuracy,
            "train_seconds": seconds,
            "train_cpu_seconds": busiest(cpu),
            **trainer.ledger.as_dict(),
        }

    eval_every, last_step = args.eval_every, args.steps

    class Evaluate(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            clock["start"], clock["evaluating"] = time.perf_counter(), 0.0
            clock["cpu_start"], clock["cpu_evaluating"] = time.process_time(), 0.0

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step % eval_every == 0 or state.global_step == last_step:
                curve.append(point(state.global_step))

    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        trainer = make_trainer(
            model,
            pool,
            allocator,
            family,
            tmp,
            seed,
            prompts_per_step=args.prompts_per_step,
            max_new_tokens=args.max_new_tokens,
            lr=args.lr,
            max_steps=args.steps,
            callbacks=[Evaluate()],
            processes=processes,
            logging_steps=1,  # every step's stage counts and latencies reach log_history
        )
        trainer.remove_callback(PrinterCallback)
        if trainer.accelerator.num_processes != processes:
            raise ValueError(f"processes={processes} but the run has {trainer.accelerator.num_processes} processes")
        curve.append(point(0))
        start = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - start - clock["evaluating"]
        cpu_seconds = busiest(time.process_time() - clock["cpu_start"] - clock["cpu_evaluating"])
        steps, speeds = step_log(trainer.state.log_history)
    record = run_record(arm, seed, curve, trainer.ledger.as_dict(), seconds, allocator)
    # The 1-minute load average of the machine before and after the run: wall-clock is only comparable between runs
    # made under similar load.
    load_average = [round(load, 2), round(os.getloadavg()[0], 2)]
    return {
        "family": family,
        "processes": processes,
        **record,
        "cpu_seconds": cpu_seconds,
        "steps": steps,
        "speeds": speeds,
        "load": load_average,
    }


def unit_path(folder: Path, family: str, arm: str, seed: int, processes: int) -> Path:
    """A run's record file: ``<folder>/<family>__<arm>__<seed>__p<processes>.json``."""
    return folder / f"{family}__{arm}__{seed}__p{processes}.json"


def units_for(args: Args, processes: int, folder: Path) -> list[Unit]:
    """The runs with ``processes`` processes, seeds outermost (a sweep cut short leaves whole seeds of every family
    and arm); the unit's group is ``"<family> p<processes>"``."""
    return [
        Unit(arm, seed, unit_path(folder, family, arm, seed, processes), f"{family} p{processes}")
        for seed in args.seeds
        for family in args.families
        for arm in args.arms
    ]


def run_unit(unit: Unit, checkpoints: dict[str, str], args: Args) -> dict[str, Any]:
    """One 1-process (family, arm, seed) run's record, with the script's arguments."""
    family = unit.group.split()[0]
    run = run_one(family, unit.arm, unit.seed, checkpoints[family], args)
    run["args"] = asdict(args)
    return run


def describe(unit: Unit, run: dict[str, Any]) -> str:
    return f"{unit.label}: final acc {run['curve'][-1]['accuracy']:.3f} ({run['seconds']:.0f} s)"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch_group(units: list[Unit], processes: int, args: Args) -> None:
    """Run ``units`` in one process group of ``processes`` processes (``torch.distributed.run``, gloo on the CPU),
    one after the other; rank 0 writes each record the moment it finishes."""
    if not units:
        return
    print(f"{len(units)} runs on {processes} processes", flush=True)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        f"--nproc_per_node={processes}",
        "--master_addr=127.0.0.1",
        f"--master_port={_free_port()}",
        str(Path(__file__).resolve()),
        *_cli(args),
        "--units",
        *(f"{unit.group.split()[0]}:{unit.arm}:{unit.seed}" for unit in units),
    ]
    root = str(Path(__file__).resolve().parents[2])
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]),
    }
    subprocess.run(command, env=env, check=True)


def _cli(args: Args) -> list[str]:
    """``args`` as this script's command-line options for a group member (every field but ``units`` and ``run``: a
    member runs its units whatever ``run`` says, and torch.distributed.run's parser would take ``--run`` for an
    abbreviation of its own ``--run-path``)."""
    out: list[str] = []
    for name, value in asdict(args).items():
        if name in ("units", "run"):
            continue
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            out.append(flag if value else "--no-" + name.replace("_", "-"))
            continue
        out.append(flag)
        out += [str(v) for v in value] if isinstance(value, list) else [str(value)]
    return out


def run_group_member(args: Args) -> None:
    """Inside a process group: run ``args.units`` in order; rank 0 writes each record as it finishes."""
    processes = int(os.environ["WORLD_SIZE"])
    rank = int(os.environ["RANK"])
    checkpoints = {family: ensure_checkpoint(family, args) for family in args.families}
    for spec in args.units:
        family, arm, seed = spec.split(":")
        path = unit_path(Path(args.out) / "per_run", family, arm, int(seed), processes)
        started = time.perf_counter()
        record = run_one(family, arm, int(seed), checkpoints[family], args, processes)
        if rank == 0:
            record["args"] = {**asdict(args), "units": []}
            atomic_write_json(path, record)
            print(
                f"[{time.perf_counter() - started:.0f}s] {family} p{processes} {arm} seed {seed}: final acc "
                f"{record['curve'][-1]['accuracy']:.3f} ({record['seconds']:.0f} s training)",
                flush=True,
            )


def main(args: Args) -> None:
    set_torch_threads()
    if args.units:
        run_group_member(args)
        return
    out = Path(args.out)
    (out / "per_run").mkdir(parents=True, exist_ok=True)
    # Checkpoints first, here: the process groups and workers only read them.
    checkpoints = {family: ensure_checkpoint(family, args) for family in args.families}
    for processes in args.processes if args.run else []:
        units = units_for(args, processes, out / "per_run")
        if processes == 1:
            run_sweep(
                units, partial(run_unit, checkpoints=checkpoints, args=args), workers=args.workers, describe=describe
            )
        else:
            launch_group([u for u in units if not u.path.is_file()], processes, args)
    paths = [u.path for p in args.processes for u in units_for(args, p, out / "per_run")]
    runs = [json.loads(path.read_text()) for path in paths if path.is_file()]
    summary = {
        **summarize_trl(runs, args.families, args.arms, args.seeds, args.processes),
        "args": asdict(args),
        "command": "OMP_NUM_THREADS=1 python experiments/rlvr/trl_benchmark.py"
        + ("" if args.arms == list(TRL_ARMS) else " --arms " + " ".join(args.arms)),
    }
    atomic_write_json(Path(args.summary), summary)
    text = trl_table(summary)
    Path(args.summary).with_suffix(".md").write_text(text)
    print(text)


if __name__ == "__main__":
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    main(tyro.cli(Args, description=__doc__))
