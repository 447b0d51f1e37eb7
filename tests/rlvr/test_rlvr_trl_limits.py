"""The TRL adapter's limits and metrics: refusals before a model is loaded, the row budget, gradient accumulation, the
config-style switch and the honest metrics (tiny model, CPU). The TRL version check: test_rlvr_trl_versions.py."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

import torch
from trl import GRPOConfig, GRPOTrainer

from meta.rlvr import AR3PO, DynamicSampling, Uniform
from meta.rlvr.lm.tokenizer import CharTokenizer
from meta.rlvr.trl import AdaptiveRolloutConfig, AllocatingGRPOTrainer
from meta.rlvr.trl_limits import fit_to_budget, groups_within_budget
from meta.rlvr.trl_metrics import per_prompt_mean
from tests.rlvr.test_rlvr_trl import Fixed, G, _config, _dataset, _model, _trainer

ROOT = Path(__file__).resolve().parents[2]
#: A model id that cannot be loaded: a refusal that comes after loading would raise OSError instead.
UNLOADABLE = str(Path("/nonexistent") / "model")


def _adaptive(tmp_path: Path, **overrides: Any) -> AdaptiveRolloutConfig:
    """An AdaptiveRolloutConfig with the settings of the adapter tests' ``_config``."""
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
    return AdaptiveRolloutConfig(**{**settings, **overrides})


def parity(prompts: list[str], completion_ids: list[list[int]], **kwargs: Any) -> list[float]:
    return [float(sum(c) % 2) for c in completion_ids]


def test_only_trl_internals_imports_trl_or_calls_its_private_generation() -> None:
    import ast

    offenders = []
    for path in sorted((ROOT / "meta" / "rlvr").rglob("*.py")):
        if path.name == "trl_internals.py":
            continue
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            offenders += [f"{path.name}: import {n}" for n in names if n == "trl" or n.startswith("trl.")]
        if path.name.startswith("trl"):  # the compact trainer has a _generate of its own
            offenders += [f"{path.name}: {call}" for call in ("._generate(", "._calculate_rewards(") if call in text]
    assert offenders == []


def _unloadable(config: GRPOConfig, **kwargs: Any) -> AllocatingGRPOTrainer:
    return AllocatingGRPOTrainer(
        model=UNLOADABLE, reward_funcs=[parity], args=config, processing_class=CharTokenizer(), **kwargs
    )


def test_a_g_that_disagrees_with_num_generations_is_refused_before_the_model_loads(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"uniform:16 samples G=16 .* but num_generations=4; set num_generations=16"):
        _unloadable(_config(tmp_path), allocator=Uniform(16))
    config = _adaptive(tmp_path, allocator="dapo:8,2")
    with pytest.raises(ValueError, match=r"dapo:8 samples G=8 .* num_generations=4"):
        _unloadable(config)


@pytest.mark.parametrize("mode", ["server", "colocate"])
def test_unsupported_vllm_settings_are_refused_before_any_backend_or_model_starts(tmp_path: Path, mode: str) -> None:
    config = _config(tmp_path, use_vllm=True, vllm_mode=mode, generation_kwargs={"seed": 3})
    with pytest.raises(ValueError, match=rf"generation_kwargs\['seed'\]=3 with use_vllm=True \(vllm_mode='{mode}'\)"):
        _unloadable(config, allocator=AR3PO())


def test_other_config_refusals_name_the_users_setting(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"multi_objective_aggregation='normalize_then_sum'"):
        _unloadable(_config(tmp_path, multi_objective_aggregation="normalize_then_sum"), allocator=AR3PO())
    with pytest.raises(ValueError, match="a custom rollout_func"):
        _unloadable(_config(tmp_path), allocator=AR3PO(), rollout_func=lambda prompts, trainer: {})
    with pytest.raises(ValueError, match="max_rows_per_step=0"):
        _unloadable(_config(tmp_path), allocator=AR3PO(), max_rows_per_step=0)
    with pytest.raises(ValueError, match="needs an allocator"):
        _unloadable(_config(tmp_path))


def test_sliced_accumulation_is_refused_by_the_users_own_setting_for_row_normalised_losses(tmp_path: Path) -> None:
    # GRPOConfig turns gradient_accumulation_steps=2 into steps_per_generation=2: the message names what was set.
    with pytest.raises(
        ValueError, match=r"does not support gradient_accumulation_steps=2 .* loss_type='grpo'.*steps_per_generation=1"
    ):
        _unloadable(_config(tmp_path, gradient_accumulation_steps=2, loss_type="grpo"), allocator=AR3PO())
    with pytest.raises(ValueError, match=r"does not support steps_per_generation=3 \(generation_batch_size=48\)"):
        _unloadable(_config(tmp_path, steps_per_generation=3, loss_type="dr_grpo"), allocator=AR3PO())


@pytest.mark.parametrize("sliced", [False, True])
def test_gradient_accumulation_trains_exactly_as_plain_trl(tmp_path: Path, sliced: bool) -> None:
    """Accumulating 2 micro-batches, each a fresh generation (steps_per_generation=1, AdaptiveRolloutConfig's default)
    or one generation cut in 2 (TRL's default for GRPOConfig, here with the dapo loss)."""

    def run(adapter: bool) -> list[torch.Tensor]:
        overrides: dict[str, Any] = dict(max_steps=2, gradient_accumulation_steps=2)
        kwargs: dict[str, Any] = dict(
            model=_model(),
            reward_funcs=[parity],
            train_dataset=_dataset(8),
            processing_class=CharTokenizer(),
        )
        overrides["steps_per_generation"] = 2 if sliced else 1
        if adapter:
            config = _adaptive(tmp_path / "a", allocator=f"uniform:{G}", **overrides)
            assert config.gradient_accumulation_steps == 2 and config.steps_per_generation == (2 if sliced else 1)
            trainer: GRPOTrainer = AllocatingGRPOTrainer(args=config, **kwargs)
        else:
            trainer = GRPOTrainer(args=_config(tmp_path / "p", **overrides), **kwargs)
        trainer.train()
        return [p.detach().clone() for p in trainer.model.parameters()]

    plain, ours = run(False), run(True)
    assert all(torch.equal(a, b) for a, b in zip(plain, ours, strict=True))


def test_a_batch_cut_into_slices_sums_to_the_whole_batchs_loss(tmp_path: Path) -> None:
    from trl.trainer.utils import split_tensor_dict

    from meta.rlvr.trl_internals import pad_to_slices
    from tests.rlvr.test_rlvr_trl import _batch_inputs, _grads, _hand_dapo_loss

    def spread(prompts: list[str], completion_ids: list[list[int]], **kwargs: Any) -> list[float]:
        return [float(sum(c) % 5) for c in completion_ids]

    config = _config(tmp_path, gradient_accumulation_steps=3)
    trainer = _trainer(tmp_path, Fixed([1, 3, 4, 0]), [spread], config=config)
    assert trainer.args.steps_per_generation == 3
    trainer.model.train()
    torch.manual_seed(1)
    batch = trainer._generate_and_score_completions(_batch_inputs(trainer))
    # 8 real rows padded to 9 for 3 slices; the filler row is inert (no mask, no advantage).
    assert batch["completion_ids"].shape[0] == 9 and trainer.ledger.rows_trained == 8
    assert batch["completion_mask"][8].sum() == 0 and batch["advantages"][8] == 0
    assert batch["num_items_in_batch"] == batch["completion_mask"][:8].sum()
    assert batch["advantages"].abs().sum() > 0

    trainer.model.zero_grad()
    trainer.current_gradient_accumulation_steps = 3  # set by Trainer's loop, which this test bypasses
    for part in split_tensor_dict(batch, 3):
        trainer.compute_loss(trainer.model, part).backward()
    sliced = _grads(trainer.model)
    trainer.model.zero_grad()
    real = {k: v[:8] if isinstance(v, torch.Tensor) and v.ndim > 0 else v for k, v in batch.items()}
    _hand_dapo_loss(trainer.model, real, 1.0).backward()
    assert all(torch.allclose(a, b, atol=1e-6, rtol=1e-4) for a, b in zip(sliced, _grads(trainer.model), strict=True))
    assert pad_to_slices(real, 2) is real  # already a multiple: nothing added


def test_fit_to_budget_takes_from_the_largest_counts_first() -> None:
    assert fit_to_budget([6, 1, 0, 2], 16) == [6, 1, 0, 2]
    assert fit_to_budget([8, 8, 8, 8], 16) == [4, 4, 4, 4]
    assert fit_to_budget([9, 1, 3, 5], 10) == [3, 1, 3, 3]  # water level 3 fills the budget exactly
    assert fit_to_budget([5, 5, 1], 8) == [4, 3, 1]  # level 3 (7), one more to the first prompt above it
    assert fit_to_budget([2, 2], 0) == [0, 0] == fit_to_budget([2, 2], -3)


def test_rows_per_step_stay_within_the_batch_unless_the_user_opts_in(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, Fixed([8]), [parity], config=_config(tmp_path, max_steps=1))
    trainer.train()
    # 4 prompts x 8 asked = 32 rows, the batch the user set is 4 x G = 16: every prompt keeps 4.
    assert trainer.last_batch["group_sizes"] == [4, 4, 4, 4]
    assert trainer.ledger.rows_trained == trainer.ledger.responses == 16
    (step,) = [h for h in trainer.state.log_history if "rlvr/rows_cut" in h]
    assert step["rlvr/rows_cut"] == 16

    opted = _trainer(tmp_path, Fixed([8]), [parity], config=_config(tmp_path, max_steps=1), max_rows_per_step=32)
    opted.train()
    assert opted.last_batch["group_sizes"] == [8, 8, 8, 8] and opted.ledger.rows_trained == 32


def test_groups_within_budget_counts_the_leading_groups_that_fit() -> None:
    assert groups_within_budget([4, 4, 4, 4], 16) == 4
    assert groups_within_budget([4, 4, 4, 4, 4], 16) == 4
    assert groups_within_budget([6, 6, 6], 16) == 2
    assert groups_within_budget([20], 16) == 1


def test_a_dapo_step_with_nothing_kept_trains_no_more_than_the_batch(tmp_path: Path) -> None:
    def wrong(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
        return [0.0] * len(prompts)

    # Every group is all-wrong: DAPO refills twice (3 rounds x 16 rows generated) and trains with zero advantage.
    trainer = _trainer(
        tmp_path,
        DynamicSampling(G, max_rounds=2),
        [wrong],
        config=_config(tmp_path, max_steps=1),
        train_dataset=_dataset(12),
    )
    trainer.train()
    assert trainer.ledger.responses == 48
    assert trainer.ledger.rows_trained == 16 == sum(trainer.last_batch["group_sizes"])


def test_reuse_is_skipped_when_the_budget_is_full(tmp_path: Path) -> None:
    def wrong_after_step_0(prompts: list[str], completions: list[str], trainer_state: Any, **kw: Any) -> list[float]:
        return [float(trainer_state.global_step == 0)] * len(prompts)

    # AR3PO: 2 each, then 2 more per all-wrong prompt for two stages; at step 1 all are wrong: 4 x (2 + 2 + 2) = 24
    # asked, the budget (16) cuts the last stage and leaves no room for the 4 stored correct responses.
    def run(max_rows: int | None) -> AllocatingGRPOTrainer:
        trainer = _trainer(
            tmp_path, AR3PO(stage_size=2, max_stages=3), [wrong_after_step_0], max_rows_per_step=max_rows
        )
        trainer.train()
        return trainer

    bounded = run(None)
    assert (
        max(h["ledger/step_rows_trained"] for h in bounded.state.log_history if "ledger/step_rows_trained" in h) == 16
    )
    assert bounded.ledger.reused_responses == 0
    assert run(64).ledger.reused_responses == 4


def test_per_prompt_mean_weighs_every_group_once() -> None:
    assert per_prompt_mean([1.0, 0.0, 0.0, 0.0, 1.0, 1.0], [1, 3, 2]) == pytest.approx((1 + 0 + 1) / 3)
    assert per_prompt_mean([float("nan"), 1.0, 0.5], [1, 2]) == pytest.approx(0.75)
    assert math.isnan(per_prompt_mean([float("nan")], [1]))
    with pytest.raises(ValueError, match="sum to 2, not the 3"):
        per_prompt_mean([1.0, 0.0, 0.0], [1, 1])


def test_logged_metrics_count_what_was_generated_and_trained(tmp_path: Path) -> None:
    order = sorted(_dataset()["prompt"])
    calls: list[list[str]] = []

    def rank(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
        calls.append(list(prompts))
        return [float(order.index(p)) for p in prompts]

    trainer = _trainer(tmp_path, Fixed([1, 3, 4, 0]), [rank], config=_config(tmp_path, max_steps=2))
    output = trainer.train()
    steps = [h for h in trainer.state.log_history if "rlvr/stages" in h]
    assert len(steps) == 2 == len(calls)
    for h, call in zip(steps, calls, strict=True):
        assert h["rlvr/stages"] == 1 and h["rlvr/rollout_seconds"] > 0
        assert h["rlvr/stage_seconds"] == pytest.approx(h["rlvr/rollout_seconds"])
        assert h["ledger/step_rows_trained"] == h["ledger/step_responses"] == 8
        assert h["reward"] == pytest.approx(sum(order.index(p) for p in call) / 8)
        distinct = set(call)
        assert h["rlvr/reward_per_prompt"] == pytest.approx(sum(order.index(p) for p in distinct) / len(distinct))
    # Real speeds beside TRL's nominal one (TRL counts 2 steps x 16 rows; 16 rows were trained in all).
    metrics = output.metrics
    runtime = metrics["train_runtime"]
    assert metrics["train_rows_per_second"] == pytest.approx(16 / runtime, rel=0.02)
    assert metrics["train_responses_per_second"] == pytest.approx(16 / runtime, rel=0.02)
    assert metrics["train_samples_per_second"] == pytest.approx(32 / runtime, rel=0.02)
    assert metrics["train_generated_tokens_per_second"] == pytest.approx(
        trainer.ledger.completion_tokens / runtime, rel=0.02
    )
    assert any("train_rows_per_second" in h for h in trainer.state.log_history)


def test_uniform_g_logs_the_same_reward_per_prompt_as_per_row(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, Uniform(G), [parity])
    trainer.train()
    for h in (h for h in trainer.state.log_history if "reward" in h):
        assert h["rlvr/reward_per_prompt"] == pytest.approx(h["reward"])


def test_the_config_switch_sets_the_allocator_and_refuses_a_setting_made_twice(tmp_path: Path) -> None:
    config = _adaptive(tmp_path, max_steps=1, allocator="ar3po:1,2", correctness_reward="parity")
    trainer = AllocatingGRPOTrainer(
        model=_model(), reward_funcs=[parity], args=config, train_dataset=_dataset(), processing_class=CharTokenizer()
    )
    assert isinstance(trainer.allocator, AR3PO) and trainer.allocator.stage_size == 1
    assert trainer.response_buffer is not None and trainer.max_rows_per_step == 4 * G
    trainer.train()
    assert trainer.ledger.responses > 0
    with pytest.raises(ValueError, match=r"allocator is set twice, AdaptiveRolloutConfig\(allocator='ar3po:1,2'\)"):
        _unloadable(config, allocator=AR3PO())
    with pytest.raises(ValueError, match=r"max_rows_per_step is set twice"):
        _unloadable(_adaptive(tmp_path, allocator="ar3po", max_rows_per_step=32), max_rows_per_step=8)
    with pytest.raises(ValueError, match="unknown"):
        _adaptive(tmp_path, allocator="nope:3")
