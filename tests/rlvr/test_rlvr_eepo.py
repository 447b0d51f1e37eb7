"""EEPO: the unlearning step is taken inside the block and undone exactly afterwards; the two-stage rollout."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from tiny_grpo import resumed_alongside, tiny_grpo_trainer

from meta.rlvr.lm.charlm import CharLMConfig, build_model
from meta.rlvr.lm.sampling import sample, sequence_logprobs
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.token.eepo import EEPO, perturbed
from meta.rlvr.token.hapo import HAPO
from meta.rlvr.trainers.grpo import GRPOTrainer
from meta.rlvr.trainers.grpo_groups import Group

TINY = CharLMConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2)


def _snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _setup() -> tuple[torch.nn.Module, CharVocab, list[list[int]], list[list[int]]]:
    vocab = CharVocab()
    torch.manual_seed(0)
    model = build_model(TINY)
    prompts = [vocab.encode("12+3=", bos=True), vocab.encode("4*2=", bos=True)] * 2
    out = sample(
        model, prompts, max_new_tokens=6, eos_id=vocab.eos_id, pad_id=vocab.pad_id, generator=torch.Generator()
    )
    return model, vocab, prompts, out.completions


def _likelihood(model: torch.nn.Module, vocab: CharVocab, prompts: Any, completions: Any) -> float:
    with torch.no_grad():
        logp, mask = sequence_logprobs(model, prompts, completions, vocab.pad_id)
    return float((logp * mask).sum() / mask.sum())


def test_unlearning_step_is_restored_bit_identically() -> None:
    model, vocab, prompts, completions = _setup()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    before = _snapshot(model)
    first = next(model.parameters())
    first.grad = torch.full_like(first, 0.5)  # a gradient in flight survives the block
    opt_state = {k: v for k, v in opt.state_dict().items()}
    rng_state = torch.get_rng_state()
    base = _likelihood(model, vocab, prompts, completions)
    with perturbed(model, prompts, completions, lr=0.5, pad_id=vocab.pad_id) as inside:
        assert inside is model and model.training
        changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
        assert changed  # the step moved the weights ...
        assert _likelihood(model, vocab, prompts, completions) < base  # ... away from the sampled responses
    after = model.state_dict()
    assert all(torch.equal(after[k], before[k]) for k in before)  # bit-identical
    assert first.grad is not None and torch.equal(first.grad, torch.full_like(first, 0.5))
    assert model.training
    assert opt.state_dict() == opt_state
    assert torch.equal(torch.get_rng_state(), rng_state)
    assert _likelihood(model, vocab, prompts, completions) == base


def test_restored_even_when_the_block_raises() -> None:
    model, _, prompts, completions = _setup()
    model.eval()
    before = _snapshot(model)
    with pytest.raises(RuntimeError, match="boom"), perturbed(model, prompts, completions, lr=1.0, pad_id=0):
        raise RuntimeError("boom")
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())
    assert not model.training


def test_gate() -> None:
    ctl = EEPO(lr=0.1, entropy_threshold=1.0)
    assert ctl.decide({"entropy": 0.5}) is True
    assert ctl.decide({"entropy": 1.5}) is False
    assert ctl.state_dict() == {"steps_taken": 1, "decisions": 2}
    other = EEPO(lr=0.1, entropy_threshold=1.0)
    other.load_state_dict(ctl.state_dict())
    assert other.steps_taken == 1
    with pytest.raises(KeyError, match="entropy"):
        ctl.decide({})
    with pytest.raises(ValueError, match="lr > 0"):
        EEPO(lr=0.0)


def _trainer(**kwargs: Any) -> GRPOTrainer:
    return tiny_grpo_trainer(3, **kwargs)


def test_trainer_two_stage_rollout_restores_the_policy() -> None:
    trainer = _trainer(eepo=EEPO(lr=5.0))
    before = _snapshot(trainer.model)
    groups, entropies = trainer._rollout(trainer._draw(2))
    assert all(torch.equal(trainer.model.state_dict()[k], v) for k, v in before.items())
    assert [len(g.responses) for g in groups] == [3, 3]  # ⌈3/2⌉ = 2 before the step, 1 after
    assert len(entropies) == 6
    assert trainer.eepo is not None and trainer.eepo.steps_taken == 1
    # The first halves are sampled before the step: the same as a same-seed run whose step is negligible.
    plain = _trainer(eepo=EEPO(lr=1e-12))
    plain_groups, _ = plain._rollout(plain._draw(2))
    assert [r.tokens for g in plain_groups for r in g.responses[:2]] == [
        r.tokens for g in groups for r in g.responses[:2]
    ]
    assert isinstance(groups[0], Group)


def test_trainer_with_eepo_resumes_exactly() -> None:
    full, resumed = resumed_alongside(lambda: _trainer(eepo=EEPO(lr=0.5)))
    assert full.eepo is not None and resumed.eepo is not None
    assert full.eepo.state_dict() == resumed.eepo.state_dict() == {"steps_taken": 3, "decisions": 3}


def test_trainer_refuses_eepo_with_hapo() -> None:
    with pytest.raises(ValueError, match="EEPO"):
        _trainer(eepo=EEPO(), token_controller=HAPO())


def test_spec() -> None:
    from meta.rlvr.token import make_token_controller

    ctl = make_token_controller("eepo:0.01,1.5")
    assert isinstance(ctl, EEPO) and (ctl.lr, ctl.entropy_threshold) == (0.01, 1.5)
    default = make_token_controller("eepo")
    assert isinstance(default, EEPO) and default.lr == 1e-3 and default.entropy_threshold == float("inf")
    with pytest.raises(ValueError, match="LR"):
        make_token_controller("eepo:1,2,3")
    with pytest.raises(ValueError, match="must be numbers"):
        make_token_controller("eepo:x")
