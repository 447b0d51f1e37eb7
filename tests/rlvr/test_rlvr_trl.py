"""The TRL adapter on CPU: a tiny Qwen2 model, the local character tokenizer, a few short training steps."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

import numpy as np
import torch
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from envs.reasoning import Task, make_prompt_set
from meta.rlvr import AR3PO, AdaptiveLengthPenalty, Allocator, DynamicSampling, EntropyTemperature, StatsTable
from meta.rlvr.lm.charlm import CharLMConfig, build_model
from meta.rlvr.lm.tokenizer import CharTokenizer
from meta.rlvr.trl import STATE_FILE, AllocatingGRPOTrainer, TemperatureCallback, _Group, set_temperature

G = 4


class Fixed(Allocator):
    """Test allocator: prompt i of a batch gets ``counts[i % len(counts)]`` responses in one stage."""

    name = "fixed-test"

    def __init__(self, counts: Sequence[int]) -> None:
        self.counts = list(counts)
        self.epochs_ended = 0

    def end_epoch(self) -> None:
        self.epochs_ended += 1

    def initial(self, keys: Sequence[str], stats: StatsTable) -> list[int]:
        return [self.counts[i % len(self.counts)] for i in range(len(keys))]


def _config(tmp_path: Path, **overrides: Any) -> GRPOConfig:
    settings: dict[str, Any] = dict(
        output_dir=str(tmp_path / "trl"),
        per_device_train_batch_size=4 * G,
        num_generations=G,
        max_completion_length=6,
        max_steps=2,
        learning_rate=1e-3,
        loss_type="dapo",
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
        temperature=1.0,
    )
    settings.update(overrides)
    return GRPOConfig(**settings)


def _dataset(n: int = 4) -> Dataset:
    tasks: list[Task] = make_prompt_set(n, np.random.default_rng(0), difficulties=[1])
    return Dataset.from_dict({"prompt": [t.prompt for t in tasks], "answer": [t.answer for t in tasks]})


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(CharLMConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2))


def _trainer(tmp_path: Path, allocator: Allocator, reward_funcs: list[Any], **kwargs: Any) -> AllocatingGRPOTrainer:
    config = kwargs.pop("config", None) or _config(tmp_path)
    return AllocatingGRPOTrainer(
        model=kwargs.pop("model", None) or _model(),
        reward_funcs=reward_funcs,
        args=config,
        train_dataset=kwargs.pop("train_dataset", None) or _dataset(),
        processing_class=CharTokenizer(),
        allocator=allocator,
        **kwargs,
    )


def _batch_inputs(trainer: AllocatingGRPOTrainer) -> list[dict[str, Any]]:
    rows = [dict(trainer.train_dataset[i]) for i in range(len(trainer.train_dataset))]
    return [r for r in rows for _ in range(G)]


def test_ar3po_stages_and_reuse_run_inside_trl(tmp_path: Path) -> None:
    prompts = list(_dataset()["prompt"])
    always, never = prompts[0], prompts[1]  # the other two are right at step 0 only
    calls: list[tuple[int, int]] = []

    def correct(prompts: list[str], completions: list[str], trainer_state: Any, **kwargs: Any) -> list[float]:
        calls.append((trainer_state.global_step, len(prompts)))
        step = trainer_state.global_step
        return [float(p == always or (p != never and step == 0)) for p in prompts]

    def brevity(prompts: list[str], completion_ids: list[list[int]], **kwargs: Any) -> list[float]:
        return [-0.01 * len(c) for c in completion_ids]

    trainer = _trainer(tmp_path, AR3PO(stage_size=1, max_stages=3), [brevity, correct], correctness_reward="correct")
    trainer.train()

    # Step 0: every prompt but `never` is right after one response; `never` gets all 3 stages: 1+3+1+1 rows, generated
    # in stages of 4, 1 and 1 rows. Step 1: `always` 1, the other three 3 each; the two that were right at step 0
    # (and stored a correct response) get it reused, one reward call each.
    step0 = [n for s, n in calls if s == 0]
    step1 = [n for s, n in calls if s == 1]
    assert step0 == [4, 1, 1]
    assert sorted(step1) == sorted([4, 3, 3, 1, 1])
    ledger = trainer.ledger
    assert ledger.responses == 6 + 10 < 2 * 4 * G  # fewer than uniform G on the same two steps
    assert ledger.reused_responses == 2
    assert trainer.last_allocation and sorted(trainer.last_allocation) == [1, 3, 3, 3]
    assert sorted(trainer.last_batch["group_sizes"]) == [1, 3, 4, 4]
    assert sum(trainer.last_batch["reused"]) == 2
    # The batch holds only real rows (generated or reused); the ledger counts them.
    assert ledger.rows_trained == 6 + 12
    # Statistics read the correctness reward only (the brevity penalty would make successes fractional).
    assert trainer.rlvr_stats.get(always).successes == 2 and trainer.rlvr_stats.get(never).successes == 0
    # TRL's own counters see the generated rows only: tokens = prompt tokens per generated row + generated tokens.
    history = [h for h in trainer.state.log_history if "ledger/step_responses" in h]
    assert len(history) == 2
    for h in history:
        assert h["completions/mean_length"] == pytest.approx(
            h["ledger/step_completion_tokens"] / h["ledger/step_responses"]
        )
    prompt_len = len(CharTokenizer()(always)["input_ids"])
    assert all(len(CharTokenizer()(p)["input_ids"]) == prompt_len for p in prompts)
    assert trainer.state.num_input_tokens_seen == prompt_len * ledger.responses + ledger.completion_tokens


def test_uniform_g_through_the_adapter_trains_exactly_as_plain_trl(tmp_path: Path) -> None:
    def correct(prompts: list[str], completion_ids: list[list[int]], **kwargs: Any) -> list[float]:
        return [float(sum(c) % 2) for c in completion_ids]

    def run(adapter: bool) -> tuple[list[torch.Tensor], list[float]]:
        kwargs: dict[str, Any] = dict(
            model=_model(),
            reward_funcs=[correct],
            args=_config(tmp_path / str(adapter), max_steps=3),
            train_dataset=_dataset(8),
            processing_class=CharTokenizer(),
        )
        trainer = AllocatingGRPOTrainer(**kwargs, allocator=Fixed([G])) if adapter else GRPOTrainer(**kwargs)
        trainer.train()
        rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
        return [p.detach().clone() for p in trainer.model.parameters()], rewards

    plain, plain_rewards = run(False)
    ours, our_rewards = run(True)
    assert our_rewards == plain_rewards and len(plain_rewards) == 3
    assert all(torch.equal(a, b) for a, b in zip(plain, ours, strict=True))


def test_counts_above_num_generations_are_generated_in_full(tmp_path: Path) -> None:
    seen: list[int] = []

    def correct(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
        seen.append(len(prompts))
        return [float(sum(map(ord, c)) % 2) for c in completions]

    allocator = Fixed([6, 1, 0, 2])
    trainer = _trainer(tmp_path, allocator, [correct], config=_config(tmp_path, max_steps=1))
    trainer.train()
    assert seen == [9]
    assert allocator.epochs_ended == 1  # one step of 4 prompts is one pass over the 4-prompt pool (E3 widens here)
    assert sorted(trainer.last_batch["group_sizes"]) == [1, 2, 6]
    assert trainer.ledger.rows_trained == trainer.ledger.responses == 9


def test_dapo_keeps_mixed_groups_and_counts_the_dropped(tmp_path: Path) -> None:
    def correct(prompts: list[str], completion_ids: list[list[int]], **kwargs: Any) -> list[float]:
        return [float(sum(c) % 2) for c in completion_ids]

    trainer = _trainer(
        tmp_path,
        DynamicSampling(G, max_rounds=2),
        [correct],
        config=_config(tmp_path, max_steps=3),
        train_dataset=_dataset(12),
    )
    trainer.train()
    ledger = trainer.ledger
    assert ledger.responses == ledger.rows_trained + ledger.dropped_responses
    assert ledger.groups == ledger.responses // G
    kept = trainer.last_step["groups_kept"]
    assert kept <= 4
    if kept:
        advantages = trainer.last_batch["advantages"].view(-1, G)
        assert torch.all(advantages.abs().sum(dim=1) > 0), "a zero-variance group entered the loss"


def _hand_dapo_loss(model: torch.nn.Module, batch: dict[str, Any], temperature: float) -> torch.Tensor:
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    logits = model(input_ids=ids, attention_mask=attention).logits
    width = batch["completion_ids"].size(1)
    logits = logits[:, -width - 1 : -1] / temperature
    logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, batch["completion_ids"].unsqueeze(-1)).squeeze(-1)
    mask = batch["completion_mask"].float()
    # At the sampling policy the ratio is 1 and the clipped surrogate's gradient is −A ∇log π (DAPO eq. 12).
    ratio = torch.exp(logp - logp.detach())
    per_token = -ratio * batch["advantages"].unsqueeze(1)
    return (per_token * mask).sum() / mask.sum()


def _grads(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


def test_the_batch_holds_only_real_rows_and_its_loss_uses_the_temperature_in_force(tmp_path: Path) -> None:
    def correct(prompts: list[str], completion_ids: list[list[int]], **kwargs: Any) -> list[float]:
        return [float(sum(c) % 2) for c in completion_ids]

    trainer = _trainer(tmp_path, Fixed([1, 3, 4, 0]), [correct])
    set_temperature(trainer, 0.5)
    trainer.model.train()
    torch.manual_seed(1)
    batch = trainer._generate_and_score_completions(_batch_inputs(trainer))
    assert batch["completion_ids"].shape[0] == 8 == trainer.ledger.rows_trained
    assert sorted(trainer.last_batch["group_sizes"]) == [1, 3, 4]
    assert trainer.generation_config.temperature == 0.5
    assert batch["advantages"].abs().sum() > 0, "no learning signal in the batch: the comparison below would be empty"

    trainer.model.zero_grad()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer's loop, which this test bypasses
    trainer.compute_loss(trainer.model, batch).backward()
    theirs = _grads(trainer.model)
    for temperature, same in ((0.5, True), (1.0, False)):
        trainer.model.zero_grad()
        _hand_dapo_loss(trainer.model, batch, temperature).backward()
        ours = _grads(trainer.model)
        close = all(torch.allclose(a, b, atol=1e-6, rtol=1e-4) for a, b in zip(theirs, ours, strict=True))
        assert close == same, f"gradient at T={temperature} {'differs from' if same else 'matches'} TRL's loss"


def test_alp_uses_the_groups_own_solve_rate(tmp_path: Path) -> None:
    def correct(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
        return [0.0] * len(prompts)

    alp = AdaptiveLengthPenalty(beta=0.5, max_length=6)
    trainer = _trainer(tmp_path, Fixed([G]), [correct], length_penalty=alp)
    group = _Group({"prompt": "x"}, "x")
    group.completion_ids = [[5, 6], [5, 6, 7, 8], [5], [5, 6, 7]]
    group.rewards_per_func = [[1.0], [1.0], [0.0], [1.0]]
    group.correct = [1.0, 1.0, 0.0, 1.0]
    group.reused = [False] * 4
    rewards, _ = trainer._advantages([group], learn=True)
    w = alp.weight(0.75, 4)  # 3 of 4 right in this group, whatever the table's stale average says
    expected = [1 - 2 * w, 1 - 4 * w, 0 - 1 * w, 1 - 3 * w]
    assert rewards.tolist() == pytest.approx(expected)


def test_temperature_callback_works_from_callbacks_and_reaches_the_loss(tmp_path: Path) -> None:
    def correct(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
        return [float(sum(map(ord, c)) % 2) for c in completions]

    callback = TemperatureCallback(EntropyTemperature(target_entropy=0.5, vocab_size=16))
    trainer = _trainer(tmp_path, Fixed([G]), [correct], callbacks=[callback])
    trainer.train()
    assert len(callback.history) == 2 and trainer.temperature == callback.history[-1] != 1.0

    ids = torch.tensor([[3, 4, 5, 6, 7]])
    mask = torch.ones_like(ids)
    logps, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, 3)
    with torch.no_grad():
        logits = trainer.model(input_ids=ids, attention_mask=mask).logits[:, -4:-1] / trainer.temperature
    expected = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, -3:].unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(logps, expected, atol=1e-5)


def test_an_unbound_temperature_callback_is_refused_at_train_begin(tmp_path: Path) -> None:
    callback = TemperatureCallback(EntropyTemperature(target_entropy=0.5, vocab_size=16))
    trainer = GRPOTrainer(
        model=_model(),
        reward_funcs=[lambda prompts, completions, **kw: [0.0] * len(prompts)],
        args=_config(tmp_path, max_steps=1),
        train_dataset=_dataset(),
        processing_class=CharTokenizer(),
        callbacks=[callback],
    )
    with pytest.raises(RuntimeError, match="attach"):
        trainer.train()


def test_unsupported_settings_are_refused_with_the_reason(tmp_path: Path) -> None:
    zero = [lambda prompts, completions, **kw: [0.0] * len(prompts)]
    with pytest.raises(ValueError, match="steps_per_generation=2"):
        _trainer(tmp_path, Fixed([G]), zero, config=_config(tmp_path, steps_per_generation=2, loss_type="grpo"))
    with pytest.raises(ValueError, match="correctness_reward 'exact' is not one of"):
        _trainer(tmp_path, Fixed([G]), zero, correctness_reward="exact")
    trainer = _trainer(tmp_path, Fixed([G]), zero)
    trainer._refuse_unsupported()
    trainer.model.train()
    with pytest.raises(ValueError, match="not whole groups"):
        trainer._generate_and_score_completions(_batch_inputs(trainer)[:6])
    shuffled = _batch_inputs(trainer)
    shuffled[0], shuffled[-1] = shuffled[-1], shuffled[0]
    with pytest.raises(ValueError, match="not one prompt's group"):
        trainer._generate_and_score_completions(shuffled)


def test_checkpoints_carry_the_adapters_state(tmp_path: Path) -> None:
    def correct(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
        return [float(sum(map(ord, c)) % 2) for c in completions]

    config = _config(tmp_path, save_strategy="steps", save_steps=1)
    trainer = _trainer(tmp_path, AR3PO(stage_size=2, max_stages=2), [correct], config=config)
    trainer.train()
    saved = json.loads((tmp_path / "trl" / "checkpoint-2" / STATE_FILE).read_text())
    assert saved["ledger"] == trainer.ledger.as_dict()

    # Resuming loads the adapter's state with TRL's optimizer and scheduler (HF Trainer's resume path).
    first = json.loads((tmp_path / "trl" / "checkpoint-1" / STATE_FILE).read_text())
    assert first["ledger"] != saved["ledger"]
    resumed = _trainer(tmp_path, AR3PO(stage_size=2, max_stages=2), [correct], config=config)
    resumed.create_optimizer_and_scheduler(num_training_steps=2)
    resumed._load_optimizer_and_scheduler(str(tmp_path / "trl" / "checkpoint-1"))
    assert json.loads(json.dumps(resumed.rlvr_state_dict())) == first
    resumed.train(resume_from_checkpoint=str(tmp_path / "trl" / "checkpoint-1"))
    assert resumed.state.global_step == 2 and resumed.ledger.responses > first["ledger"]["responses"]
