"""The RLVR testbeds: a task family, a warm start whose data mix leaves a method's lever room, and a sampler that
measures it.

Three warm starts, each a supervised fit (:func:`meta.rlvr.trainers.sft.fit_sft`) of the character LM on a data mix
built so that the statistic some methods act on exists before any RL step (``experiments/rlvr/headroom.py`` gates on
it):

* ``countdown`` (:mod:`envs.reasoning.countdown`): reach a target from 2-4 given numbers, with one reference
  derivation per task as the dominant mode (``reference_share`` of the examples) and other valid derivations for the
  rest, so sampling finds answers greedy decoding misses (pass@k well above pass@1: EEPO, DARS-B, HAPO, E3, BAPO); the
  5-number bucket gets a small weight, so it is rarely solved unaided but a partial solution in the context completes
  it (Guide, SEELE).
* ``carry`` (:mod:`envs.reasoning.carry`): sums of 2-5 single-digit operands with short (answer at once) and long
  (pairwise steps) correct traces on every difficulty, plus budget prompts, so correct answers of very different
  lengths coexist on the same prompt (HBPO, ALP, EHPO).
* ``toolmix`` (:func:`envs.reasoning.tooluse.make_tool_mix_sft_set`): calculator prompts that need the tool and
  single-fact prompts that do not, with calculator traces on a share ``overuse`` of the latter (ARPO's fewer calls).

:data:`TESTBEDS` holds their settings (:class:`WarmStart`); :func:`train_warm_start` trains and saves one (a few
minutes on one core); :func:`sample_responses` draws ``n`` responses per task, optionally after a hint, and returns
per-response correctness, length (sampled tokens), calculator calls and the mean token entropy.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from envs.reasoning import Task
from envs.reasoning.carry import CARRY_ALPHABET, CARRY_FAMILY, make_carry_set, make_carry_sft_set
from envs.reasoning.countdown import (
    COUNTDOWN_ALPHABET,
    COUNTDOWN_FAMILY,
    make_countdown_set,
    make_countdown_sft_set,
)
from envs.reasoning.registry import family_spec
from envs.reasoning.tooluse import CALC_FAMILY, CALL_OPEN, TOOL_ALPHABET, make_tool_mix_set, make_tool_mix_sft_set
from meta.rlvr.lm.charlm import CharLMConfig, build_model, load_model, save_model
from meta.rlvr.lm.sampling import sample
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.sft import fit_sft, suppressed_ids
from meta.rlvr.trainers.tools import CalculatorTool

#: Where warm starts are saved (git-ignored, like every checkpoint).
CHECKPOINT_DIR = Path("runs/rlvr/testbeds")


@dataclass
class WarmStart:
    """One warm start and the prompts it is measured on.

    Attributes:
        name: Key in :data:`TESTBEDS`, also the checkpoint's file stem.
        family: The registered task family (:mod:`envs.reasoning.registry`).
        train_difficulties: Difficulties in the SFT mix.
        train_weights: Relative frequency of each of ``train_difficulties`` in the mix.
        eval_difficulties: Difficulties the gate measures, one bucket each.
        steps: SFT optimizer steps.
        batch_size: SFT examples per step.
        lr: SFT AdamW learning rate.
        bank_size: SFT examples drawn once and resampled each step (the countdown solver is too slow to draw fresh
            examples every step; 0 draws fresh ones).
        mix: The family's data-mix settings (keyword arguments of its SFT-set maker: ``reference_share`` for
            countdown, ``long_share`` / ``digits`` / ``budgets`` / ``budget_share`` for carry, ``no_tool_share`` /
            ``overuse`` for toolmix).
        max_new_tokens: Completion budget when sampling (tool results included).
        model: Architecture of the character LM.
        seed: Seed of the data, the initialisation and the fit.
    """

    name: str
    family: str
    train_difficulties: list[int]
    train_weights: list[float]
    eval_difficulties: list[int]
    steps: int = 1500
    batch_size: int = 64
    lr: float = 3e-3
    bank_size: int = 0
    mix: dict[str, Any] = field(default_factory=dict)
    max_new_tokens: int = 48
    model: CharLMConfig = field(default_factory=CharLMConfig)
    seed: int = 0

    @property
    def checkpoint(self) -> Path:
        """``runs/rlvr/testbeds/<name>.pt``."""
        return CHECKPOINT_DIR / f"{self.name}.pt"

    @property
    def uses_tool(self) -> bool:
        """Whether sampling runs the calculator."""
        return family_spec(self.family).uses_tool

    def sft_examples(self, n: int, rng: np.random.Generator) -> list[Task]:
        """``n`` SFT examples of this testbed's mix, difficulties drawn with ``train_weights``."""
        w = np.asarray(self.train_weights, dtype=float)
        picks = rng.choice(len(self.train_difficulties), size=n, p=w / w.sum())
        out: list[Task] = []
        for i, count in enumerate(np.bincount(picks, minlength=len(self.train_difficulties))):
            diffs = (self.train_difficulties[i],)
            if self.family == COUNTDOWN_FAMILY:
                out += make_countdown_sft_set(int(count), rng, diffs, **self.mix)
            elif self.family == CARRY_FAMILY:
                out += make_carry_sft_set(int(count), rng, diffs, **self.mix)
            else:
                out += make_tool_mix_sft_set(int(count), rng, operations=diffs, **self.mix)
        return [out[int(i)] for i in rng.permutation(len(out))]

    def eval_tasks(self, per_bucket: int, seed: int) -> list[Task]:
        """``per_bucket`` held-out tasks per difficulty of ``eval_difficulties`` (toolmix: the same no-tool share as
        the mix, so both kinds of prompt are measured)."""
        rng = np.random.default_rng(seed)
        out: list[Task] = []
        for d in self.eval_difficulties:
            if self.family == COUNTDOWN_FAMILY:
                out += make_countdown_set(per_bucket, rng, (d,))
            elif self.family == CARRY_FAMILY:
                out += make_carry_set(per_bucket, rng, (d,), int(self.mix.get("digits", 2)))
            else:
                out += make_tool_mix_set(per_bucket, rng, float(self.mix.get("no_tool_share", 0.5)), (d,))
        return out


TESTBEDS: dict[str, WarmStart] = {
    t.name: t
    for t in (
        WarmStart(
            "countdown",
            COUNTDOWN_FAMILY,
            train_difficulties=[2, 3, 4, 5],
            train_weights=[1.0, 1.0, 1.0, 0.15],
            eval_difficulties=[2, 3, 4, 5],
            steps=600,
            bank_size=20_000,
            mix={"reference_share": 0.7},
            max_new_tokens=48,
            model=CharLMConfig(alphabet=COUNTDOWN_ALPHABET, hidden_size=96, intermediate_size=288, max_positions=72),
        ),
        WarmStart(
            "carry",
            CARRY_FAMILY,
            train_difficulties=[2, 3, 4, 5],
            train_weights=[1.0, 1.0, 1.0, 1.0],
            eval_difficulties=[2, 3, 4, 5],
            steps=500,
            # Single-digit operands: with two-digit ones, 500 steps left pass@1 at 0.013 and too few correct answers
            # to show a length spread (the gate's first try failed there).
            mix={"long_share": 0.5, "digits": 1, "budgets": [8, 16, 32, 64], "budget_share": 0.3},
            max_new_tokens=56,
            model=CharLMConfig(alphabet=CARRY_ALPHABET, max_positions=80),
        ),
        WarmStart(
            "toolmix",
            CALC_FAMILY,
            train_difficulties=[1, 2],
            train_weights=[1.0, 1.0],
            eval_difficulties=[1, 2],
            steps=500,
            mix={"no_tool_share": 0.5, "overuse": 0.6},
            max_new_tokens=64,
            model=CharLMConfig(alphabet=TOOL_ALPHABET, max_positions=88),
        ),
    )
}


def find_testbed(name: str) -> WarmStart:
    """The testbed ``name``.

    Raises:
        ValueError: An unknown name (the message lists the known ones).
    """
    if name not in TESTBEDS:
        raise ValueError(f"unknown testbed {name!r}; known: {', '.join(TESTBEDS)}")
    return TESTBEDS[name]


def train_warm_start(
    bed: WarmStart, path: Path | None = None, log: Any = print
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Fit the testbed's warm start (seeded by ``bed.seed``) and save it to ``path`` if given.

    Returns:
        ``(model, info)`` with the final loss, the seconds taken and the testbed's settings.
    """
    torch.manual_seed(bed.seed)
    rng = np.random.default_rng(bed.seed)
    vocab = CharVocab(bed.model.alphabet)
    model = build_model(bed.model)
    start = time.perf_counter()
    # A bank larger than the examples the fit draws would only cost time.
    bank = bed.sft_examples(min(bed.bank_size, bed.steps * bed.batch_size), rng) if bed.bank_size else []

    def make_batch(n: int, gen: np.random.Generator) -> list[Task]:
        if bank:
            return [bank[int(i)] for i in gen.integers(len(bank), size=n)]
        return bed.sft_examples(n, gen)

    loss = fit_sft(model, vocab, make_batch, bed.steps, bed.batch_size, bed.lr, rng, log)
    info = {"final_loss": loss, "seconds": time.perf_counter() - start, "testbed": asdict(bed)}
    if path is not None:
        save_model(path, model, bed.model, extra={"sft": info})
    return model, info


def load_or_train(bed: WarmStart, path: Path | None = None, log: Any = print) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The warm start at ``path`` (default :attr:`WarmStart.checkpoint`), trained and saved first if it is missing."""
    path = bed.checkpoint if path is None else path
    if path.is_file():
        model, _, extra = load_model(path)
        return model, dict(extra.get("sft", {}))
    path.parent.mkdir(parents=True, exist_ok=True)
    return train_warm_start(bed, path, log)


@dataclass
class Responses:
    """``n`` sampled responses to each of a list of tasks, row ``i·n + j`` the ``j``-th to task ``i``.

    Attributes:
        n: Responses per task.
        correct: 0/1 reward per response.
        lengths: Sampled tokens per response (EOS included, tool-inserted tokens left out).
        calls: Calculator calls per response.
        entropy: Mean next-token entropy (nats) over every sampled token.
        texts: The completions (hint included, EOS cut).
    """

    n: int
    correct: list[int]
    lengths: list[int]
    calls: list[int]
    entropy: float
    texts: list[str]

    def per_task(self, values: Sequence[int]) -> list[list[int]]:
        """``values`` (one per response) grouped per task."""
        return [list(values[i : i + self.n]) for i in range(0, len(values), self.n)]


def sample_responses(
    model: torch.nn.Module,
    bed: WarmStart,
    tasks: Sequence[Task],
    n: int,
    *,
    temperature: float = 1.0,
    hints: Sequence[str] | None = None,
    seed: int = 0,
    batch_rows: int = 512,
) -> Responses:
    """Sample ``n`` responses per task at ``temperature`` with a generator of their own (``seed``).

    With ``hints`` (one string per task), each response is sampled after ``prompt + hint`` and graded as
    ``hint + continuation``: the hint is a partial solution (Guide's and SEELE's contexts); its characters do not
    count in ``lengths``.
    """
    vocab = CharVocab(bed.model.alphabet)
    verify = family_spec(bed.family).verify
    tool = CalculatorTool(vocab, 1) if bed.uses_tool else None
    generator = torch.Generator().manual_seed(seed)
    hint_list = list(hints) if hints is not None else [""] * len(tasks)
    correct: list[int] = []
    lengths: list[int] = []
    calls: list[int] = []
    texts: list[str] = []
    entropy_sum, entropy_tokens = 0.0, 0
    per_chunk = max(1, batch_rows // n)
    for start in range(0, len(tasks), per_chunk):
        chunk = list(tasks[start : start + per_chunk])
        chunk_hints = hint_list[start : start + per_chunk]
        prompts = [
            vocab.encode(t.prompt + h, bos=True) for t, h in zip(chunk, chunk_hints, strict=True) for _ in range(n)
        ]
        out = sample(
            model,
            prompts,
            max_new_tokens=bed.max_new_tokens,
            eos_id=vocab.eos_id,
            pad_id=vocab.pad_id,
            temperature=temperature,
            generator=generator,
            suppress=suppressed_ids(vocab),
            tool=tool,
        )
        for row, completion in enumerate(out.completions):
            task, hint = chunk[row // n], chunk_hints[row // n]
            text = hint + vocab.decode(completion)
            sampled = len(completion) - (sum(out.inserted[row]) if out.inserted else 0)
            correct.append(int(verify(task, text) >= 0.5))
            lengths.append(sampled)
            calls.append(text.split("$", 1)[0].count(CALL_OPEN))
            texts.append(text.split("$", 1)[0])
            entropy_tokens += sampled
            entropy_sum += out.mean_entropy * sampled
    return Responses(n, correct, lengths, calls, entropy_sum / max(entropy_tokens, 1), texts)
