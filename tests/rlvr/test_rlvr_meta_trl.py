"""The RLVR meta-policy inside TRL: :class:`~meta.rlvr.learned.GroupSizeCallback` driving a tiny
:class:`~meta.rlvr.trl.AllocatingGRPOTrainer` on CPU (a fresh tiny Qwen2 char model, a few short steps)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

import numpy as np
import torch
from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig

from envs.reasoning import Task, make_prompt_set
from meta.control import Feedback
from meta.control.training import MetaAgentConfig, MetaTrainConfig, MetaTrainer
from meta.rlvr import AR3PO, DynamicSampling, Uniform
from meta.rlvr.learned import GroupSizeCallback, LearnedGroupSize, RandomGroupSize, TokenBudgetCallback
from meta.rlvr.lm.charlm import CharLMConfig, build_model
from meta.rlvr.lm.tokenizer import CharTokenizer
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.meta_mdp import GroupSizeFeedback, RLVRMetaConfig
from meta.rlvr.trainers.sft import solve_rate
from meta.rlvr.trl import AllocatingGRPOTrainer

PROMPTS = 4  # prompts per TRL step
MAX_TOKENS = 4  # TRL's max_completion_length and the meta-MDP's max_new_tokens
ARCH: dict[str, Any] = {"hidden_size": 32, "intermediate_size": 64, "num_layers": 1, "num_heads": 2}
# Three G values, so that a G reaching the allocator is told apart from its neighbours; a 2-4 G step costs 30-60 tokens.
META = RLVRMetaConfig(
    checkpoint=None,
    model=ARCH,
    token_budget=240,
    phases=4,
    prompts_per_step=PROMPTS,
    max_new_tokens=MAX_TOKENS,
    grid=[2, 3, 4],
    g_init=2,
    pool_size=16,
    held_out_size=8,
)


class Recording(RandomGroupSize):
    """A random meta-policy that keeps every feedback it got and the G it returned."""

    def __init__(self, config: RLVRMetaConfig, seed: int = 0) -> None:
        super().__init__(config, seed)
        self.seen: list[tuple[Feedback, int]] = []

    def decide(self, feedback: Feedback) -> int:
        g = super().decide(feedback)
        self.seen.append((feedback, g))
        return g


class StepLog(TrainerCallback):
    """What each training step did, read apart from GroupSizeCallback (passed in callbacks=[...], it runs first)."""

    def __init__(self) -> None:
        self.trainer: Any = None
        self.steps: list[dict[str, Any]] = []

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.steps.append({"tokens_before": int(self.trainer.ledger.completion_tokens)})

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        trainer = self.trainer
        self.steps[-1].update(
            tokens_after=int(trainer.ledger.completion_tokens),
            allocation=list(trainer.last_allocation),
            solve_rates=list(trainer.last_step["solve_rates"]),
            responses=int(trainer.last_step["responses"]),
            completion_tokens=int(trainer.last_step["completion_tokens"]),
            entropy=float(trainer._metrics["train"]["entropy"][-1]),
        )


def _dataset(n: int = 8) -> Dataset:
    tasks: list[Task] = make_prompt_set(n, np.random.default_rng(0), difficulties=[1])
    return Dataset.from_dict({"prompt": [t.prompt for t in tasks], "answer": [t.answer for t in tasks]})


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(CharLMConfig(**ARCH))


def _trainer(
    tmp_path: Path, allocator: Any, calls: list[list[float]] | None = None, **overrides: Any
) -> AllocatingGRPOTrainer:
    def parity(prompts: list[str], completion_ids: list[list[int]], **kwargs: Any) -> list[float]:
        # A stand-in verifier with mixed groups (a fresh model solves nothing): the parity of the token ids.
        rewards = [float(sum(c) % 2) for c in completion_ids]
        if calls is not None:
            calls.append(rewards)
        return rewards

    settings: dict[str, Any] = dict(
        output_dir=str(tmp_path / "trl"),
        per_device_train_batch_size=PROMPTS * 2,
        num_generations=2,
        max_completion_length=MAX_TOKENS,
        max_steps=60,
        learning_rate=1e-3,
        lr_scheduler_type="constant",
        loss_type="dapo",
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
        disable_tqdm=True,
    )
    callbacks = overrides.pop("callbacks", [])
    max_rows = overrides.pop("max_rows_per_step", PROMPTS * max(META.grid))  # the policy's largest G fits
    settings.update(overrides)
    trainer = AllocatingGRPOTrainer(
        model=_model(),
        reward_funcs=[parity],
        args=GRPOConfig(**settings),
        train_dataset=_dataset(),
        processing_class=CharTokenizer(),
        allocator=allocator,
        callbacks=callbacks,
        max_rows_per_step=max_rows,
    )
    for callback in callbacks:
        if isinstance(callback, StepLog):
            callback.trainer = trainer
    return trainer


def _counter() -> Any:
    """A fake held-out accuracy that differs at every call, so a stale or repeated value shows."""
    calls = [0]

    def evaluate() -> float:
        calls[0] += 1
        return calls[0] / 100

    return evaluate


def _g_in_force(schedule: list[tuple[int, float, int]], tokens: int) -> int:
    """The G of the last decision made with at most ``tokens`` spent (decisions come after the step that spent them)."""
    return [g for t, _, g in schedule if t <= tokens][-1]


def test_each_mark_sets_the_controllers_g_on_the_feedback_of_its_phase_and_the_budget_stops_training(
    tmp_path: Path,
) -> None:
    controller = Recording(META, seed=3)
    log = StepLog()
    rewards: list[list[float]] = []
    trainer = _trainer(tmp_path, Uniform(META.g_init), rewards, callbacks=[log])
    callback = GroupSizeCallback(controller, _counter()).attach(trainer)
    trainer.train()

    # One decision per phase, before the first step and after each step crossing a mark; then the budget stops it.
    assert len(callback.schedule) == META.phases == len(controller.seen)
    assert callback.schedule[0][0] == 0
    marks = [p * META.token_budget / META.phases for p in range(META.phases)]
    for (tokens, _, _), mark in zip(callback.schedule, marks, strict=True):
        assert tokens >= mark
    steps = log.steps
    assert (
        steps[-1]["tokens_before"] < META.token_budget <= steps[-1]["tokens_after"] == trainer.ledger.completion_tokens
    )
    assert trainer.state.global_step == len(steps) < 60 and callback.stopped

    # The G set is what the controller returned, on exactly the feedback the callback built ...
    assert [g for _, _, g in callback.schedule] == [g for _, g in controller.seen]
    assert callback.feedbacks == [fb for fb, _ in controller.seen]
    assert [fb["accuracy"] for fb in callback.feedbacks] == [p["accuracy"] for p in callback.curve[:-1]]
    assert callback.feedbacks[0] == {"budget_fraction": 0.0, "accuracy": callback.curve[0]["accuracy"]}
    # ... and every step generated that G for each of its prompts.
    assert len(set(g for _, _, g in callback.schedule)) > 1, "the random policy kept one G: nothing was tested"
    for s in steps:
        assert s["allocation"] == [_g_in_force(callback.schedule, s["tokens_before"])] * PROMPTS

    # Each phase's feedback aggregates exactly that phase's steps (as the meta-env's GroupSizeFeedback does).
    decisions = [t for t, _, _ in callback.schedule]
    for i in range(1, META.phases):
        expected = GroupSizeFeedback(MAX_TOKENS)
        for s in steps:
            if decisions[i - 1] <= s["tokens_before"] and s["tokens_after"] <= decisions[i]:
                expected.add(s["solve_rates"], s["responses"], s["completion_tokens"], s["entropy"])
        want = expected.feedback(decisions[i] / META.token_budget, callback.curve[i]["accuracy"])
        assert callback.feedbacks[i] == want
    # The solve rates are the per-prompt means of the verifier's rewards (one reward call per uniform step).
    assert len(rewards) == len(steps)
    for s, call in zip(steps, rewards, strict=True):
        g = len(call) // PROMPTS
        assert sorted(s["solve_rates"]) == pytest.approx(
            sorted(np.mean(call[i * g : (i + 1) * g]) for i in range(PROMPTS))
        )

    # The curve: the start, one point per mark, the end (the final model measured once more).
    assert [p["phase"] for p in callback.curve] == [*range(META.phases), None]
    assert callback.final_accuracy == callback.curve[-1]["accuracy"]


def test_a_step_crossing_several_marks_decides_once_per_mark_with_empty_phases(tmp_path: Path) -> None:
    # Marks every 6 tokens, steps of 8-32: most steps cross more than one mark.
    controller = Recording(META, seed=1)
    trainer = _trainer(tmp_path, Uniform(2))
    callback = GroupSizeCallback(controller, _counter(), token_budget=48, phases=8).attach(trainer)
    trainer.train()
    assert len(callback.schedule) == 8 and callback.stopped
    repeats = [i for i in range(1, 8) if callback.schedule[i][0] == callback.schedule[i - 1][0]]
    assert repeats, "no step crossed two marks"
    for i in repeats:
        fb = callback.feedbacks[i]
        assert fb["steps"] == 0 and fb["solve_rates"] == [0.0] * 5 and fb["response_length"] == 0.0
        # One evaluation per step: the model did not change between the two marks.
        assert fb["accuracy"] == callback.feedbacks[i - 1]["accuracy"]


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A meta-policy trained for a few seconds on a tiny meta-MDP (compact trainer; it has seen 4 meta-episodes)."""
    run_dir = tmp_path_factory.mktemp("rlvr_meta_trl")
    cfg = replace(META, token_budget=120)
    agent = MetaAgentConfig(batch_size=4, learning_starts=2, exploration_fraction=0.5)
    MetaTrainer(
        MetaTrainConfig(env=cfg, episodes=4, runs_per_round=2, agent=agent), run_dir, show_progress=False
    ).train()
    return run_dir / "meta_policy.pt"


def test_a_trained_policy_drives_trl_and_a_short_run_stops_short_of_the_budget(
    tmp_path: Path, tiny_policy: Path
) -> None:
    controller = LearnedGroupSize(tiny_policy)
    assert controller.config.token_budget == 120  # the callback's default budget and phases are the policy's
    held_out = make_prompt_set(8, np.random.default_rng(5), difficulties=[1])
    allocator = Uniform(2)
    trainer = _trainer(tmp_path, allocator, max_steps=2)
    model = trainer.model
    assert model is not None

    def accuracy() -> float:
        model.eval()  # left in eval mode on purpose: the callback restores the mode
        return float(np.mean(solve_rate(model, held_out, CharVocab(), temperature=0.0, max_new_tokens=4)))

    callback = GroupSizeCallback(controller, accuracy, token_budget=400).attach(trainer)
    assert callback.phases == META.phases
    with pytest.warns(UserWarning, match=r"raise max_steps to reach the budget"):
        trainer.train()
    assert not callback.stopped and trainer.state.global_step == 2
    spent = trainer.ledger.completion_tokens
    reached = 1 + sum(spent >= p * 400 / META.phases for p in range(1, META.phases))
    assert len(callback.schedule) == reached >= 1
    # The same policy, replayed on the feedback the callback built, makes the same choices.
    replay = LearnedGroupSize(tiny_policy)
    assert [replay.decide(fb) for fb in callback.feedbacks] == [g for _, _, g in callback.schedule]
    assert allocator.group_size == callback.schedule[-1][2]
    assert callback.curve[-1]["phase"] is None and 0.0 <= callback.final_accuracy <= 1.0
    model.train()
    callback.measure()
    assert model.training


def test_a_token_budget_callback_stops_any_allocator_at_the_same_marks(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, AR3PO(stage_size=1, max_stages=3))
    budget = TokenBudgetCallback(_counter(), token_budget=100, phases=2).attach(trainer)
    trainer.train()
    assert budget.stopped and trainer.ledger.completion_tokens >= 100
    assert [p["phase"] for p in budget.curve] == [0, 1, None]
    assert budget.curve[1]["tokens"] >= 50


def test_a_non_uniform_allocator_an_unbound_callback_and_accumulation_are_refused(tmp_path: Path) -> None:
    controller = RandomGroupSize(META)
    for allocator, name in ((DynamicSampling(2), "DynamicSampling"), (AR3PO(), "AR3PO")):
        trainer = _trainer(tmp_path, allocator, max_steps=1)
        with pytest.raises(TypeError, match=rf"allocator=meta\.rlvr\.allocators\.Uniform\(G\), got {name}"):
            GroupSizeCallback(controller, _counter()).attach(trainer)
    trainer = _trainer(tmp_path, Uniform(2), max_steps=1, callbacks=[GroupSizeCallback(controller, _counter())])
    with pytest.raises(RuntimeError, match=r"not bound to a trainer: call GroupSizeCallback\(\.\.\.\)\.attach"):
        trainer.train()
    trainer = _trainer(tmp_path, Uniform(2), max_steps=1, gradient_accumulation_steps=2, steps_per_generation=1)
    with pytest.raises(ValueError, match="gradient_accumulation_steps=1"):
        GroupSizeCallback(controller, _counter()).attach(trainer)
    # The policy's largest G must fit the step's rows, or the adapter would cut its choice.
    trainer = _trainer(tmp_path, Uniform(2), max_steps=1, max_rows_per_step=PROMPTS * 2)
    top = max(META.grid)
    with pytest.raises(ValueError, match=rf"G up to {top} .* max_rows_per_step={PROMPTS * top} \(got .*=8\)"):
        GroupSizeCallback(controller, _counter()).attach(trainer)
    # The allocator is checked again when training begins (it may have been swapped after attach).
    trainer = _trainer(tmp_path, Uniform(2), max_steps=1)
    GroupSizeCallback(controller, _counter()).attach(trainer)
    trainer.allocator = DynamicSampling(2)
    with pytest.raises(TypeError, match="got DynamicSampling"):
        trainer.train()
