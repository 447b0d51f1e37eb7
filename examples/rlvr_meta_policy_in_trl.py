"""A trained meta-policy picks GRPO's responses per prompt G inside your own TRL training: copy this file and swap in
your model, data and verifier.

The meta-policy was trained on rolloutlab's RLVR meta-MDP (``experiments/meta/rlvr_meta.py``): over a run with a
fixed budget of generated completion tokens it chooses G from its grid (2, 4, 8, 16) at each of its phase marks
(six by default), from what it sees of the run (held-out accuracy and its trend, the spread of per-prompt solve
rates, response lengths, token entropy, the budget left). Here it runs inside TRL through three pieces:

* ``LearnedGroupSize(path)``: the exported ``meta_policy.pt`` as a controller;
* ``AllocatingGRPOTrainer(..., allocator=Uniform(controller.g))``: TRL's ``GRPOTrainer`` with rolloutlab's
  per-prompt allocation, here a uniform G the callback changes;
* ``GroupSizeCallback(controller, evaluate).attach(trainer)``: at every phase mark it measures held-out accuracy with
  your ``evaluate()``, gives the policy the phase's feedback and sets the allocator's G; it stops training once the
  budget is spent (set ``max_steps`` high enough; a constant learning rate keeps the schedule independent of it).

The demo: a tiny Qwen2 character model (built from a config, no download; warm-started by 800 supervised steps),
rolloutlab's local character tokenizer, reversed-digit arithmetic with an exact-match verifier, on the CPU. The budget,
phases, prompts per step and response length default to the policy's own training settings (32k tokens: about a
minute on one core, warm start included).

    python experiments/meta/rlvr_meta.py --no-test        # trains the policy (hours) if you have none
    python examples/rlvr_meta_policy_in_trl.py --policy experiments/meta/results/rlvr_meta/train/meta_policy.pt

Results (the arguments, every decision with the feedback it was made on, the ledger, held-out accuracy before and
after) go to ``<output-dir>/result.json``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import tyro
from datasets import Dataset
from trl import GRPOConfig

from envs.reasoning import Task, make_prompt_set, verify
from meta.rlvr.allocators import Uniform
from meta.rlvr.learned import GroupSizeCallback, LearnedGroupSize
from meta.rlvr.lm.charlm import CharLMConfig
from meta.rlvr.lm.tokenizer import CharTokenizer
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.sft import SFTConfig, solve_rate, train_sft
from meta.rlvr.trl import AllocatingGRPOTrainer
from rolloutlab.checkpoint import atomic_write_json

DEFAULT_POLICY = "experiments/meta/results/rlvr_meta/train/meta_policy.pt"


@dataclass
class Args:
    policy: str = DEFAULT_POLICY
    """the exported RLVR meta-policy (meta_policy.pt, or the meta-training directory holding it)"""
    token_budget: int | None = None
    """completion tokens of the run; default: the policy's training budget"""
    phases: int | None = None
    """decisions per run; default: the policy's"""
    prompts_per_step: int | None = None
    """prompts per GRPO step; default: the policy's training setting"""
    max_new_tokens: int | None = None
    """most tokens per response (TRL's max_completion_length); default: the policy's"""
    learning_rate: float = 3e-4
    """AdamW learning rate of the RL steps (constant)"""
    train_prompts: int = 128
    """training prompts (reversed-digit additions and multiplications, the policy's difficulties)"""
    held_out_prompts: int = 200
    """held-out prompts for greedy accuracy"""
    sft_steps: int = 800
    """supervised warm-start steps before RL (RLVR needs a policy that solves some prompts: about 20% here)"""
    seed: int = 0
    """seed of the model, the data and TRL"""
    output_dir: str = "runs/rlvr_meta_policy_in_trl"
    """where TRL writes its files and this script its result.json"""


def load_policy(path: str) -> LearnedGroupSize:
    """The meta-policy at ``path``, or a ``FileNotFoundError`` that says how to get one."""
    file = Path(path)
    if not (file.is_file() or (file / "meta_policy.pt").is_file()):
        raise FileNotFoundError(
            f"no RLVR meta-policy at {path}: train one with `python experiments/meta/rlvr_meta.py --no-test` (it "
            f"exports {DEFAULT_POLICY}), or pass --policy PATH to a meta_policy.pt exported by meta-training on an "
            "RLVRMetaConfig"
        )
    return LearnedGroupSize(path)


def tasks_to_dataset(tasks: list[Task]) -> Dataset:
    """TRL reads the ``prompt`` column; every other column reaches the reward functions as a keyword argument."""
    return Dataset.from_dict({"prompt": [t.prompt for t in tasks], "answer": [t.answer for t in tasks]})


def exact_match(prompts: list[str], completions: list[str], answer: list[str], **kwargs: Any) -> list[float]:
    """The verifier: 1.0 for the exact answer (up to the EOS character), else 0.0."""
    return [verify(Task(p, a, "", 0), c) for p, c, a in zip(prompts, completions, answer, strict=True)]


def greedy_accuracy(model: torch.nn.Module, tasks: list[Task], max_new_tokens: int) -> float:
    """Share of ``tasks`` answered exactly with greedy decoding: the meta-MDP's J (its measure of held-out accuracy)."""
    model.eval()
    return float(np.mean(solve_rate(model, tasks, CharVocab(), temperature=0.0, max_new_tokens=max_new_tokens)))


def main(args: Args) -> dict[str, Any]:
    torch.set_num_threads(1)
    controller = load_policy(args.policy)
    meta = controller.config  # the settings the policy was trained on
    budget = args.token_budget or meta.token_budget
    prompts_per_step = args.prompts_per_step or meta.prompts_per_step
    max_new_tokens = args.max_new_tokens or meta.max_new_tokens

    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    difficulties = [int(d) for d in meta.difficulties]
    train = make_prompt_set(args.train_prompts, rng, difficulties=difficulties)
    held_out = make_prompt_set(args.held_out_prompts, rng, difficulties=difficulties)
    architecture = CharLMConfig(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4)
    sft = SFTConfig(seed=args.seed, steps=args.sft_steps, difficulties=difficulties, eval_per_difficulty=20)
    sft.difficulty_weights = [1.0] * len(difficulties)
    sft.model = architecture
    model, _ = train_sft(sft, log=None)

    # TRL's data loader hands each step `prompts_per_step` prompts repeated num_generations times; the allocator then
    # decides how many responses each really gets, so num_generations only sets the batch's grouping.
    num_generations = controller.g
    # An upper bound on the steps the budget allows (every response has at least one token); the callback stops
    # training at the budget, and the constant learning rate makes the bound irrelevant to the updates.
    max_steps = budget // (min(meta.grid) * prompts_per_step) + 1
    config = GRPOConfig(
        output_dir=args.output_dir,
        per_device_train_batch_size=prompts_per_step * num_generations,
        num_generations=num_generations,
        max_completion_length=max_new_tokens,
        max_steps=max_steps,
        learning_rate=args.learning_rate,
        lr_scheduler_type="constant",
        loss_type="dapo",
        beta=0.0,
        logging_steps=10,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=args.seed,
        disable_tqdm=True,
    )
    trainer = AllocatingGRPOTrainer(
        model=model,
        reward_funcs=[exact_match],
        args=config,
        train_dataset=tasks_to_dataset(train),
        processing_class=CharTokenizer(),
        allocator=Uniform(controller.g),
        correctness_reward="exact_match",
        # The policy picks G up to the top of its grid: opt into the rows that takes (the adapter otherwise keeps a
        # step to per_device_train_batch_size rows and cuts larger requests).
        max_rows_per_step=prompts_per_step * max(meta.grid),
    )
    callback = GroupSizeCallback(
        controller,
        evaluate=lambda: greedy_accuracy(model, held_out, max_new_tokens),  # the model TRL trains, in place
        token_budget=budget,
        phases=args.phases,
    ).attach(trainer)
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start

    decisions = [
        {"tokens": tokens, "accuracy": accuracy, "g": g, "feedback": feedback}
        for (tokens, accuracy, g), feedback in zip(callback.schedule, callback.feedbacks, strict=True)
    ]
    result: dict[str, Any] = {
        "args": asdict(args),
        "policy": controller.path,
        "token_budget": budget,
        "phases": callback.phases,
        "g_schedule": [d["g"] for d in decisions],
        "decisions": decisions,
        "curve": callback.curve,
        "held_out_accuracy": {"before": callback.curve[0]["accuracy"], "after": callback.final_accuracy},
        "budget_spent": callback.stopped,
        "grpo_steps": int(trainer.state.global_step),
        "ledger": trainer.ledger.as_dict(),
        "seconds": seconds,
    }
    out = Path(args.output_dir)
    atomic_write_json(out / "result.json", result)
    accuracy = result["held_out_accuracy"]
    print(
        f"G schedule {result['g_schedule']} over {result['ledger']['completion_tokens']} tokens "
        f"({result['grpo_steps']} steps); held-out accuracy {accuracy['before']:.3f} -> {accuracy['after']:.3f} in "
        f"{seconds:.0f} s"
    )
    return result


if __name__ == "__main__":
    try:
        main(tyro.cli(Args, description=__doc__))
    except FileNotFoundError as exc:
        raise SystemExit(str(exc)) from None
