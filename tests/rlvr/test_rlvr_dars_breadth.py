"""DARS-B (meta/rlvr/allocators/dars_breadth.py, meta/rlvr/trainers/dars_breadth.py): the spec, the full-batch epochs
counted by hand (optimizer steps, every sample once per epoch), pass@k by hand, exact resume of the trainer and of an
``rlvr train`` run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from tiny_grpo import TINY_LM, resumed_alongside

from envs.reasoning import make_prompt_set
from meta.rlvr.allocators import make_allocator
from meta.rlvr.allocators.dars_breadth import DARSBreadth
from meta.rlvr.lm.charlm import build_model
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.dars_breadth import DARSBreadthTrainer, breadth_config, pass_at_k, sampled_pass_rates
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.grpo_groups import Group


class _Recording(DARSBreadthTrainer):
    """Records each step's groups and, per forward pass with gradients (one per optimizer step), its rows."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.groups: list[Group] = []
        self.passes: list[list[tuple[tuple[int, ...], tuple[int, ...]]]] = []

    def _update(self, groups: Any) -> dict[str, float]:
        self.groups = list(groups)
        self.passes = []
        return super()._update(groups)

    def _logprobs(self, model: Any, prompts: Any, completions: Any, mb: Any = None) -> Any:
        if torch.is_grad_enabled() and model is self.model:
            self.passes.append([(tuple(p), tuple(c)) for p, c in zip(prompts, completions, strict=True)])
        return super()._logprobs(model, prompts, completions, mb)


def _trainer(epochs: int = 3, breadth: int = 3, cls: type[DARSBreadthTrainer] = DARSBreadthTrainer) -> Any:
    torch.manual_seed(0)
    pool = make_prompt_set(8, np.random.default_rng(0), difficulties=[1, 2])
    allocator = DARSBreadth(base=4, max_total=8, epochs=epochs, breadth=breadth)
    # minibatches=4 on purpose: DARS-B replaces it with the full batch.
    cfg = GRPOConfig(prompts_per_step=2, minibatches=4, lr=0.02)
    return cls(build_model(TINY_LM), CharVocab(), pool, allocator, cfg, reward_fn=lambda t, s: float(len(s) % 2))


def test_spec_builds_dars_b_and_refuses_bad_input() -> None:
    allocator = make_allocator("dars_b:4,12,3,32")
    assert isinstance(allocator, DARSBreadth)
    assert (allocator.base, allocator.max_total, allocator.epochs, allocator.breadth) == (4, 12, 3, 32)
    default = make_allocator("dars_b")
    assert isinstance(default, DARSBreadth) and (default.epochs, default.breadth) == (2, 64)
    cfg = breadth_config(GRPOConfig(prompts_per_step=16, minibatches=4, epochs=1, lr=3e-4), allocator)
    assert (cfg.prompts_per_step, cfg.minibatches, cfg.epochs, cfg.lr) == (32, 1, 3, 3e-4)
    for bad in ("dars_b:4,16,0,8", "dars_b:4,16,2,0", "dars_b:4,2", "dars_b:1,2,3,4,5", "dars_b:a"):
        with pytest.raises(ValueError):
            make_allocator(bad)


def test_epochs_over_one_full_batch_by_hand() -> None:
    """E=3, B=3: one step makes exactly 3 optimizer steps, each on the whole batch of learning rows (each row once
    per epoch), and the groups have DARS's sizes (4, plus the extra responses for a stage-1 accuracy below 1/2)."""
    trainer = _recording = _trainer(epochs=3, breadth=3, cls=_Recording)
    assert (trainer.cfg.prompts_per_step, trainer.cfg.minibatches, trainer.cfg.epochs) == (3, 1, 3)
    metrics = trainer.step()
    assert len(_recording.groups) == 3  # the breadth: B groups, one per prompt
    allocator = trainer.allocator
    assert isinstance(allocator, DARSBreadth)
    for g in _recording.groups:
        first = g.rewards[:4]
        assert len(g.responses) == 4 + allocator.extra_for(sum(first) / 4)
    # Binary rewards: every response of a mixed group has a non-zero advantage, no response of another group does.
    rows = sorted(
        (tuple(g.prompt_ids), tuple(r.tokens))
        for g in _recording.groups
        if len(set(g.rewards)) > 1
        for r in g.responses
    )
    assert rows, "the hand-made reward should give at least one mixed group"
    assert metrics["optimizer_steps"] == 3
    assert len(_recording.passes) == 3
    for seen in _recording.passes:
        assert sorted(seen) == rows  # every learning row, each exactly once, in every epoch
    # The first epoch is on-policy (ratio 1); the later ones are not, so the ratio moves away from 1.
    assert metrics["ratio_max"] > 1.0 or metrics["ratio_min"] < 1.0
    assert trainer.costs.rows_trained == sum(len(g.responses) for g in _recording.groups)


def test_one_epoch_is_a_single_on_policy_full_batch_step() -> None:
    trainer = _trainer(epochs=1, breadth=4, cls=_Recording)
    metrics = trainer.step()
    assert metrics["optimizer_steps"] == 1 and metrics["clip_fraction"] == 0.0
    assert metrics["ratio_min"] == metrics["ratio_max"] == 1.0


def test_pass_at_k_by_hand() -> None:
    assert pass_at_k(4, 0, 1) == 0.0 and pass_at_k(4, 4, 4) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)  # 1 − C(3,2)/C(4,2)
    assert pass_at_k(8, 6, 4) == 1.0  # fewer wrong ones than k: some draw has a right one
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    trainer = _trainer()
    rates = sampled_pass_rates(trainer, trainer.tasks[:4], n=4, ks=(1, 4), seed=3)
    assert set(rates) == {"pass@1", "pass@4"} and 0.0 <= rates["pass@1"] <= rates["pass@4"] <= 1.0
    assert rates == sampled_pass_rates(trainer, trainer.tasks[:4], n=4, ks=(1, 4), seed=3)


def test_dars_b_trainer_resumes_exactly() -> None:
    full, resumed = resumed_alongside(lambda: _trainer(epochs=2, breadth=3))
    assert full.costs == resumed.costs
    assert full.stats.state_dict() == resumed.stats.state_dict()


def test_rlvr_train_run_with_dars_b_spec_resumes_exactly(tmp_path: Path) -> None:
    """``allocator: dars_b:...`` through :class:`GRPORun`: the resolved breadth is in config.yaml, and a run stopped
    after 2 of 4 steps and resumed from its checkpoint ends with the straight run's weights and costs."""
    from meta.rlvr.trainers.run import GRPORun, GRPORunConfig
    from meta.rlvr.trainers.sft import SFTConfig, train_sft

    sft = tmp_path / "sft.pt"
    sft_cfg = SFTConfig(
        steps=3, batch_size=8, difficulties=[1], difficulty_weights=[1.0], eval_per_difficulty=2, model=TINY_LM
    )
    train_sft(sft_cfg, sft, log=None)
    cfg = GRPORunConfig(
        sft_checkpoint=str(sft),
        allocator="dars_b:4,8,2,3",
        steps=4,
        eval_every=2,
        checkpoint_every=2,
        pool_size=8,
        held_out_size=4,
        difficulties=[1],
        grpo=GRPOConfig(max_new_tokens=4, lr=1e-2),
    )
    straight = GRPORun.start(cfg, root=tmp_path / "a").learn()
    assert straight.run_dir is not None
    saved = yaml.safe_load((straight.run_dir / "config.yaml").read_text())
    assert (saved["grpo"]["prompts_per_step"], saved["grpo"]["minibatches"], saved["grpo"]["epochs"]) == (3, 1, 2)
    half = GRPORun.start(cfg, root=tmp_path / "b")
    half.cfg = replace(half.cfg, steps=2)
    half.learn()
    half.cfg = replace(half.cfg, steps=4)
    assert half.run_dir is not None
    half.save()
    resumed = GRPORun.resume(half.run_dir).learn()
    assert resumed.trainer.num_steps == 4 and resumed.sessions == 2
    for p, q in zip(straight.trainer.model.parameters(), resumed.trainer.model.parameters(), strict=True):
        assert torch.equal(p, q)
    assert straight.trainer.costs == resumed.trainer.costs
    assert [e["accuracy"] for e in straight.evals] == [e["accuracy"] for e in resumed.evals]
