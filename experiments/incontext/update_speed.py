"""Speed of the in-context agent's update on one CPU thread: the written-out bin softmaxes against torch's, side by
side, and the whole update's rate under each named setting.

The critic reads its values out of a softmax over a short last axis of bins (15 or 33) on a tensor of
``batch x steps x critics x discounts x actions x bins`` entries; ``torch.softmax`` / ``F.log_softmax`` over such a
short axis are slow on the CPU, so :func:`meta.incontext.value_scale.expected_value` and
:func:`~meta.incontext.value_scale.bin_log_probs` write them out. Each pair is timed interleaved (A, B, A, B, ...) in
one process, so machine load hits both alike; the ratio of medians is the result.

    OMP_NUM_THREADS=1 python experiments/incontext/update_speed.py

Writes ``results/update_speed.json``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from experiments.incontext.matched_protocol import agent_config
from meta.incontext.trainer import InContextTrainer
from meta.incontext.value_scale import bin_log_probs, expected_value, symexp
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.threads import set_torch_threads

RESULTS = Path(__file__).parent / "results"


@dataclass
class Args:
    repeats: int = 30
    """Interleaved timings per side of each pair."""
    updates: int = 20
    """Updates per timing of the whole update."""
    update_repeats: int = 5
    """Timings of the whole update per setting."""
    out: str = str(RESULTS / "update_speed.json")
    """Where the result goes."""


def interleaved(first: Callable[[], object], second: Callable[[], object], repeats: int) -> dict[str, float]:
    """Median seconds of ``first`` and ``second``, timed alternately, and their ratio."""
    times: tuple[list[float], list[float]] = ([], [])
    first(), second()  # warm-up
    for _ in range(repeats):
        for side, fn in enumerate((first, second)):
            start = time.perf_counter()
            fn()
            times[side].append(time.perf_counter() - start)
    a, b = (float(np.median(t)) for t in times)
    return {"torch_ms": 1e3 * a, "written_out_ms": 1e3 * b, "speedup": a / b}


def main(args: Args) -> None:
    set_torch_threads(1)
    g = torch.Generator().manual_seed(0)
    out: dict[str, object] = {"args": vars(args), "pairs": {}, "updates_per_second": {}}
    # The critic's output in the bandit setting: 8 trials x 100 steps x 4 critics x 2 discounts x 5 actions x bins.
    for n_bins in (15, 33):
        logits = torch.randn(8, 100, 4, 2, 5, n_bins, generator=g)
        bins = torch.linspace(0.0, 5.0, n_bins)
        taken = torch.randn(8, 100, 4, 2, n_bins, generator=g)
        target = torch.softmax(torch.randn(8, 100, 1, 2, n_bins, generator=g), dim=-1)

        def cross_entropy_step(
            log_probs: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor = taken, y: torch.Tensor = target
        ) -> None:
            leaf = x.clone().requires_grad_()
            (-(y * log_probs(leaf)).sum()).backward()

        out["pairs"][f"expected_value_{n_bins}_bins"] = interleaved(  # type: ignore[index]
            lambda logits=logits, bins=bins: symexp((torch.softmax(logits, dim=-1) * bins).sum(-1)),
            lambda logits=logits, bins=bins: expected_value(logits, bins),
            args.repeats,
        )
        out["pairs"][f"log_softmax_forward_backward_{n_bins}_bins"] = interleaved(  # type: ignore[index]
            lambda: cross_entropy_step(lambda x: F.log_softmax(x, dim=-1)),
            lambda: cross_entropy_step(bin_log_probs),
            args.repeats,
        )
    for setting in ("amago", "whole_trial"):
        trainer = InContextTrainer(agent_config(setting, "bandit_5x100", 0, 400_000, None, 10), None)
        for _ in range(3):
            trainer.collect()
        trainer.update(5)
        rates = []
        for _ in range(args.update_repeats):
            start = time.perf_counter()
            trainer.update(args.updates)
            rates.append(args.updates / (time.perf_counter() - start))
        out["updates_per_second"][setting] = {"median": float(np.median(rates)), "all": rates}  # type: ignore[index]
    atomic_write_json(Path(args.out), out)
    for name, pair in out["pairs"].items():  # type: ignore[attr-defined]
        print(f"{name}: torch {pair['torch_ms']:.2f} ms, written out {pair['written_out_ms']:.2f} ms, "
              f"x{pair['speedup']:.1f}")  # fmt: skip
    for setting, rate in out["updates_per_second"].items():  # type: ignore[attr-defined]
        print(f"bandit_5x100 {setting}: {rate['median']:.1f} updates/s")


if __name__ == "__main__":
    main(tyro.cli(Args, description=__doc__))
