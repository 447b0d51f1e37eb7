"""The compact GRPO trainer: advantages, sampling with a KV cache, and exact cost accounting on scripted rewards."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from envs.reasoning import Task, make_prompt_set
from meta.rlvr import AR3PO, DynamicSampling, Uniform
from meta.rlvr.lm.charlm import CharLMConfig, build_model, load_model, save_model
from meta.rlvr.lm.sampling import sample, sequence_logprobs
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.grpo import GRPOTrainer
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.grpo_loss import group_advantages

TINY = CharLMConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2)


def _pool(n: int = 8) -> list[Task]:
    return make_prompt_set(n, np.random.default_rng(0), difficulties=[1, 2])


class ScriptedReward:
    """Reward 1 for prompts in ``solved``; records generated text lengths (one char per token)."""

    def __init__(self, solved: set[str]) -> None:
        self.solved = solved
        self.tokens = 0
        self.calls = 0

    def __call__(self, task: Task, text: str) -> float:
        self.tokens += len(text)
        self.calls += 1
        return 1.0 if task.prompt in self.solved else 0.0


def test_group_advantages() -> None:
    assert group_advantages([1, 0, 0, 0], "dr_grpo") == pytest.approx([0.75, -0.25, -0.25, -0.25])
    std = np.sqrt(0.25 * 0.75)
    expected = [0.75 / std, -0.25 / std, -0.25 / std, -0.25 / std]
    assert group_advantages([1, 0, 0, 0], "grpo") == pytest.approx(expected, rel=1e-4)  # eps = 1e-6 in the std
    assert group_advantages([1, 1], "grpo") == [0.0, 0.0]
    assert group_advantages([1], "grpo") == [0.0]
    with pytest.raises(ValueError):
        group_advantages([1, 0], "ppo")


def test_cached_sampling_matches_uncached_greedy() -> None:
    torch.manual_seed(0)
    model = build_model(TINY)
    vocab = CharVocab()
    prompts = [vocab.encode("12+3=", bos=True), vocab.encode("1+1=", bos=True)]
    out = sample(model, prompts, max_new_tokens=5, eos_id=2, pad_id=0, temperature=0.0, suppress=(0, 1))
    for prompt, got in zip(prompts, out.completions, strict=True):
        ids = list(prompt)
        for _ in range(len(got)):
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
            logits[[0, 1]] = float("-inf")
            ids.append(int(logits.argmax()))
        assert ids[len(prompt) :] == got
    # log-probs of the greedy tokens are finite, padded positions are masked
    logp, mask = sequence_logprobs(model, prompts, out.completions, pad_id=0, suppress=(0, 1))
    assert torch.isfinite(logp).all() and mask.sum() == sum(len(c) for c in out.completions)


def test_uniform_costs_and_update() -> None:
    pool = _pool(4)
    reward = ScriptedReward({pool[0].prompt})
    model = build_model(TINY)
    before = [p.detach().clone() for p in model.parameters()]
    trainer = GRPOTrainer(model, CharVocab(), pool, Uniform(4), GRPOConfig(prompts_per_step=4), reward_fn=reward)
    metrics = trainer.step()
    c = trainer.costs
    assert c.responses == 16 and reward.calls == 16
    assert c.completion_tokens == reward.tokens
    assert c.prompt_tokens == sum(len(t.prompt) + 1 for t in pool)  # BOS included, one stage
    assert c.prompt_tokens_extra_stages == 0 and c.dropped_responses == 0 and c.reused_responses == 0
    assert c.groups == 4 and c.zero_variance_groups == 4  # scripted rewards: every group is constant
    assert metrics["groups_mixed"] == 0
    # all advantages zero -> no parameter moves
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_ar3po_stages_reuse_and_prompt_rereads() -> None:
    pool = _pool(4)
    solved = {pool[0].prompt, pool[1].prompt}
    reward = ScriptedReward(solved)
    trainer = GRPOTrainer(
        build_model(TINY), CharVocab(), pool, AR3PO(2, 3), GRPOConfig(prompts_per_step=4), reward_fn=reward
    )
    trainer.step()
    c = trainer.costs
    # solved prompts stop after stage 1 (2 responses); the others run 3 stages (6 responses)
    assert c.responses == 2 * 2 + 2 * 6
    unsolved_len = sum(len(t.prompt) + 1 for t in pool[2:])
    assert c.prompt_tokens_extra_stages == 2 * unsolved_len
    assert c.prompt_tokens == sum(len(t.prompt) + 1 for t in pool) + 2 * unsolved_len
    assert c.reused_responses == 0
    # next epoch: nothing is solved any more -> the buffered correct answers are injected into the all-wrong groups
    reward.solved = set()
    trainer.step()
    assert trainer.costs.reused_responses == 2
    assert trainer.costs.responses == 16 + 4 * 6
    assert trainer.costs.completion_tokens == reward.tokens


def test_dapo_drops_and_refills() -> None:
    pool = _pool(8)
    reward = ScriptedReward({t.prompt for t in pool[:4]})
    trainer = GRPOTrainer(
        build_model(TINY),
        CharVocab(),
        pool,
        DynamicSampling(4, max_rounds=2),
        GRPOConfig(prompts_per_step=4),
        reward_fn=reward,
    )
    metrics = trainer.step()
    c = trainer.costs
    # every group is constant: 1 initial round + 2 refills of 4 prompts x 4 responses, all dropped
    assert metrics["groups_kept"] == 0 and metrics["refill_rounds"] == 2
    assert c.responses == 3 * 16 == c.dropped_responses
    assert c.dropped_tokens == c.completion_tokens == reward.tokens


def test_checkpoint_round_trip(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "m.pt"
    model = build_model(TINY)
    save_model(path, model, TINY, extra={"note": "x"})
    loaded, cfg, extra = load_model(path)
    assert cfg == TINY and extra == {"note": "x"}
    for a, b in zip(model.state_dict().values(), loaded.state_dict().values(), strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("loss", ["dapo", "sequence"])
def test_learning_signal_moves_toward_correct_answer(loss: str) -> None:
    """A mixed group's update raises the log-probability of the rewarded response."""
    torch.manual_seed(0)
    task = Task("1+1=", "2", "add", 1)
    vocab = CharVocab()
    model = build_model(TINY)
    prompt = vocab.encode(task.prompt, bos=True)
    # The reward looks at the first character only, so that is what must become likelier (the token after it is not
    # rewarded and may go either way once several optimizer steps per batch sharpen the first one).
    target = vocab.encode("2")

    def logp_target() -> float:
        with torch.no_grad():
            lp, _ = sequence_logprobs(model, [prompt], [target], 0, suppress=(0, 1))
        return float(lp.sum())

    start = logp_target()
    cfg = GRPOConfig(prompts_per_step=1, lr=5e-3, loss=loss, max_new_tokens=2, kl_coef=0.01)  # type: ignore[arg-type]
    # reward the first character only, so that a random model's groups are mixed most of the time
    trainer = GRPOTrainer(model, vocab, [task], Uniform(16), cfg, reward_fn=lambda t, text: float(text[:1] == "2"))
    for _ in range(15):
        trainer.step()
    assert logp_target() > start


def test_controllers_plug_into_the_trainer() -> None:
    """E3 temperature follows the step's entropy; BAPO bounds are consulted on every update; ALP shapes rewards."""
    from meta.rlvr import AdaptiveLengthPenalty, BalancedClip, EntropyTemperature

    pool = _pool(4)
    temperature = EntropyTemperature(target_entropy=0.01, vocab_size=16, initial=1.0, t_min=0.5, t_max=1.5)
    clip = BalancedClip()
    trainer = GRPOTrainer(
        build_model(TINY),
        CharVocab(),
        pool,
        Uniform(4),
        GRPOConfig(prompts_per_step=4, minibatches=2),
        reward_fn=lambda task, text: float(len(text) % 2),  # mixed groups from a random model
        temperature_controller=temperature,
        length_penalty=AdaptiveLengthPenalty(beta=0.1, max_length=8),
        clip_controller=clip,
    )
    metrics = trainer.step()
    # a random model's entropy is far above 0.01 nats -> the temperature drops (clamped at t_min)
    assert metrics["temperature"] < 1.0 and trainer.temperature == temperature.temperature
    assert metrics["groups_mixed"] > 0
    low, high = clip.bounds
    assert 0.6 <= low <= 0.9 and 1.2 <= high <= 3.0
    shaped = trainer._shaped_rewards(trainer._rollout(pool[:1])[0][0])
    assert all(s < 1.0 for s in shaped)  # every response pays a positive length penalty
