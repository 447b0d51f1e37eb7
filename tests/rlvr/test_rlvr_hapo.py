"""HAPO: normalised log-entropy, per-token temperature and clip bounds on hand-computed cases, token-level group
advantages, the spec, the sampler's per-token temperatures and the trainer's checkpoint round trip."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from tiny_grpo import tiny_grpo_trainer

from meta.rlvr import BalancedClip, make_allocator
from meta.rlvr.lm.charlm import CharLMConfig, build_model
from meta.rlvr.lm.sampling import sample, sequence_logprobs
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.token import make_token_controller
from meta.rlvr.token.hapo import (
    HAPO,
    entropy_statistics,
    normalized_log_entropy,
    token_clip_bounds,
    token_group_advantages,
    token_temperatures,
)
from meta.rlvr.trainers.grpo import GRPOTrainer

TINY = CharLMConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2)
#: Log-entropies 0, 1, 2: median 1, std sqrt(2/3), so z = -1.2247, 0, +1.2247 and both sides scale to ±1.
BATCH = np.exp([0.0, 1.0, 2.0])


def test_normalised_log_entropy_hand_case() -> None:
    stats = entropy_statistics(BATCH)
    assert stats["center"] == pytest.approx(1.0)
    assert stats["spread"] == pytest.approx(math.sqrt(2.0 / 3.0))
    assert stats["scale_pos"] == pytest.approx(1.0 / 1.2247449, rel=1e-5)
    assert stats["scale_neg"] == pytest.approx(1.0 / 1.2247449, rel=1e-5)
    h = normalized_log_entropy(np.exp([0.0, 1.0, 2.0, 1.5, 5.0, -3.0]), stats)
    # e^1.5: z = 0.5 / sqrt(2/3) = 0.6124, times 1/1.2247 = 0.5; beyond the batch's extremes: clipped to ±1.
    assert h == pytest.approx([-1.0, 0.0, 1.0, 0.5, 1.0, -1.0], abs=1e-5)
    assert entropy_statistics(BATCH, quantile=0.25)["center"] == pytest.approx(0.5)


def test_temperature_per_token_hand_case_and_sign() -> None:
    """Sign convention: ĥ > 0 (a token more uncertain than the batch's median) samples hotter."""
    temps = token_temperatures(np.array([-1.0, -0.5, 0.0, 0.5, 1.0]), temperature=1.0, tau=0.2)
    assert temps == pytest.approx([0.8, 0.9, 1.0, 1.1, 1.2])
    ctl = HAPO(tau=0.1)
    assert ctl.temperatures(BATCH, 2.0) == pytest.approx([2.0, 2.0, 2.0])  # no statistics yet: T everywhere
    ctl.decide({"entropies": BATCH})
    assert ctl.temperatures(BATCH, 2.0) == pytest.approx([1.8, 2.0, 2.2], abs=1e-5)


def test_clip_bounds_per_token_hand_case() -> None:
    h = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    low, high = token_clip_bounds(h, eps_low=0.2, eps_high=0.28, alpha=1.0)  # one-sided: only ever widen
    assert low == pytest.approx([0.4, 0.3, 0.2, 0.2, 0.2])  # low-entropy tokens may lose more probability
    assert high == pytest.approx([0.28, 0.28, 0.28, 0.42, 0.56])  # high-entropy tokens may gain more
    low, high = token_clip_bounds(h, eps_low=0.2, eps_high=0.28, alpha=1.0, one_sided=False)
    assert low == pytest.approx([0.4, 0.3, 0.2, 0.1, 0.0])
    assert high == pytest.approx([0.0, 0.14, 0.28, 0.42, 0.56])
    low, high = token_clip_bounds(h, eps_low=0.2, eps_high=0.2, alpha=0.5)
    assert low == pytest.approx([0.3, 0.25, 0.2, 0.2, 0.2])
    assert high == pytest.approx([0.2, 0.2, 0.2, 0.25, 0.3])


def test_token_group_advantages_hand_case() -> None:
    # Tokens 1, 0, 0, 0: mean 0.25, std sqrt(0.25 * 0.75) = 0.4330.
    assert token_group_advantages([1.0, 0.0], [1, 3]) == pytest.approx([1.7320508, -0.5773503], rel=1e-5)
    assert token_group_advantages([1.0, 0.0], [1, 3], std=False) == pytest.approx([0.75, -0.25])
    # Equal lengths: the sequence-level GRPO advantages.
    assert token_group_advantages([1.0, 0.0, 0.0, 1.0], [2, 2, 2, 2]) == pytest.approx([1, -1, -1, 1], abs=1e-5)
    # One token against 99: A = 0.99 / 0.0995 = 9.95 >= 5, so the group falls back to GRPO's ±1.
    assert token_group_advantages([1.0, 0.0], [1, 99]) == pytest.approx([1.0, -1.0], abs=1e-5)
    assert token_group_advantages([1.0], [3]) == [0.0]
    assert token_group_advantages([1.0, 1.0], [2, 5]) == [0.0, 0.0]
    with pytest.raises(ValueError, match="one length per reward"):
        token_group_advantages([1.0, 0.0], [1])


def test_controller_state_and_spec() -> None:
    ctl = make_token_controller("hapo:0.1,0.5")
    assert (ctl.tau, ctl.alpha, ctl.quantile) == (0.1, 0.5, 0.5)
    assert make_token_controller("hapo").tau == 0.2
    ctl.decide({"entropies": BATCH})
    other = make_token_controller("hapo:0.1,0.5")
    other.load_state_dict(ctl.state_dict())
    assert other.h_hat([math.e**1.5]) == pytest.approx(ctl.h_hat([math.e**1.5]))
    assert other.updates == 1
    ctl.decide({"entropies": []})  # an empty batch keeps the statistics
    assert ctl.state_dict() == other.state_dict()
    with pytest.raises(KeyError, match="entropies"):
        ctl.decide({})
    with pytest.raises(ValueError, match="TAU,ALPHA"):
        make_token_controller("hapo:1,2,3,4")
    with pytest.raises(ValueError, match="must be numbers"):
        make_token_controller("hapo:x")
    with pytest.raises(ValueError, match="need 0 <= tau < 1"):
        make_token_controller("hapo:0.1,2")
    with pytest.raises(ValueError, match="make_allocator"):
        make_token_controller("uniform:8")
    with pytest.raises(ValueError, match="make_token_controller"):
        make_allocator("hapo:0.1,1")


def _sample_kwargs(vocab: CharVocab) -> dict[str, Any]:
    return {"max_new_tokens": 8, "eos_id": vocab.eos_id, "pad_id": vocab.pad_id, "suppress": (0, 1)}


def test_sampler_per_token_temperature() -> None:
    vocab = CharVocab()
    torch.manual_seed(0)
    model = build_model(TINY).eval()
    prompts = [vocab.encode("12+3=", bos=True)] * 5
    kw = _sample_kwargs(vocab)
    # A rule that returns 2 everywhere draws exactly what temperature 2 draws.
    flat = sample(model, prompts, temperature=2.0, generator=torch.Generator().manual_seed(1), **kw)
    rule = sample(
        model,
        prompts,
        temperature=2.0,
        generator=torch.Generator().manual_seed(1),
        token_temperature=lambda h: torch.full_like(h, 2.0),
        **kw,
    )
    assert rule.completions == flat.completions
    assert rule.temperatures == [[2.0] * len(c) for c in rule.completions]
    assert all(e > 0 for row in rule.entropies for e in row)
    # Per-token temperatures in the log-probabilities: a (rows, width) tensor of 2s equals the number 2.
    width = max(len(c) for c in rule.completions)
    a, mask = sequence_logprobs(model, prompts, rule.completions, vocab.pad_id, temperature=2.0, suppress=(0, 1))
    b, _ = sequence_logprobs(
        model, prompts, rule.completions, vocab.pad_id, temperature=torch.full((5, width), 2.0), suppress=(0, 1)
    )
    assert torch.equal(a * mask, b * mask)
    # Greedy decoding ignores the rule.
    greedy = sample(model, prompts, temperature=0.0, token_temperature=lambda h: h * 0 + 5.0, **kw)
    assert greedy.temperatures == []


def _trainer(**kwargs: Any) -> GRPOTrainer:
    return tiny_grpo_trainer(4, **kwargs)


def test_trainer_with_hapo_steps_and_resumes_exactly() -> None:
    full = _trainer(token_controller=HAPO(tau=0.3))
    metrics = [full.step() for _ in range(3)]
    assert full.token_controller is not None and full.token_controller.updates == 3
    assert metrics[-1]["optimizer_steps"] == 2
    # First step: no statistics yet, the flat bounds. Then per-token bounds, which only widen (one-sided).
    assert (metrics[0]["clip_low"], metrics[0]["clip_high"]) == pytest.approx((0.8, 1.28))
    assert any(m["clip_low"] < 0.8 - 1e-3 or m["clip_high"] > 1.28 + 1e-3 for m in metrics[1:])
    assert all(m["clip_low"] <= 0.8 + 1e-6 and m["clip_high"] >= 1.28 - 1e-6 for m in metrics)
    part = _trainer(token_controller=HAPO(tau=0.3))
    part.step()
    state = part.state_dict()
    resumed = _trainer(token_controller=HAPO(tau=0.3))
    resumed.load_state_dict(state)
    resumed.step()
    resumed.step()
    for p, q in zip(full.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(p, q)
    assert full.token_controller.state_dict() == resumed.token_controller.state_dict()  # type: ignore[union-attr]


def test_trainer_refuses_hapo_with_bapo() -> None:
    with pytest.raises(ValueError, match="HAPO sets"):
        _trainer(token_controller=HAPO(), clip_controller=BalancedClip())
