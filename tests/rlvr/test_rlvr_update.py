"""The compact trainer's update: clipping acts by default, Dr. GRPO's constant normaliser, reused responses' rewards."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from envs.reasoning import Task, make_prompt_set
from meta.rlvr import AR3PO, BalancedClip, Uniform
from meta.rlvr.lm.charlm import CharLMConfig, build_model
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.grpo import GRPOTrainer
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.grpo_groups import Group, Response
from meta.rlvr.trainers.grpo_loss import loss_normaliser

TINY = CharLMConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2)


def _pool(n: int = 4) -> list[Task]:
    return make_prompt_set(n, np.random.default_rng(0), difficulties=[1, 2])


def _odd_length(task: Task, text: str) -> float:
    """Reward 1 for an odd completion length: a random model's groups are mixed."""
    return float(len(text) % 2)


def _trainer(config: GRPOConfig, **kwargs: Any) -> GRPOTrainer:
    torch.manual_seed(0)
    return GRPOTrainer(build_model(TINY), CharVocab(), _pool(), Uniform(4), config, reward_fn=_odd_length, **kwargs)


def _params(trainer: GRPOTrainer) -> list[torch.Tensor]:
    return [p.detach().clone() for p in trainer.model.parameters()]


def test_default_update_is_minibatched_and_clipped() -> None:
    """With the default minibatches/epochs the policy moves between optimizer steps, so the clip bounds matter.

    Only the learning rate is raised (it sets how far one step moves the policy, hence how far the later minibatches'
    ratios get from 1 within a single step); the update schedule and the clip bounds are the defaults.
    """
    default = GRPOConfig(prompts_per_step=4, lr=0.02)
    clipped = _trainer(default)
    metrics = clipped.step()
    unclipped = _trainer(GRPOConfig(prompts_per_step=4, lr=0.02, clip_low=1.0, clip_high=1e9))
    unclipped.step()
    # Same seed, same samples: the two runs differ only where a ratio left [1 - 0.2, 1 + 0.28].
    assert any(not torch.equal(a, b) for a, b in zip(_params(clipped), _params(unclipped), strict=True))
    assert metrics["optimizer_steps"] == default.minibatches * default.epochs == 4
    assert metrics["clip_fraction"] > 0
    assert metrics["ratio_max"] > 1 + default.clip_high or metrics["ratio_min"] < 1 - default.clip_low


def test_first_minibatch_is_on_policy_and_one_minibatch_is_the_full_batch_step() -> None:
    seen: list[np.ndarray] = []

    class Spy(BalancedClip):
        def decide(self, feedback: Any) -> tuple[float, float]:
            seen.append(np.asarray(feedback["ratios"]))
            return super().decide(feedback)

    _trainer(GRPOConfig(prompts_per_step=4, lr=0.02), clip_controller=Spy()).step()
    # π_old is the sampling policy, computed with the same rows and padding: exactly 1 on the first step, then not.
    assert len(seen) == 4 and np.all(seen[0] == 1.0)
    assert any(np.any(r != 1.0) for r in seen[1:])  # BAPO now sees off-policy ratios in the default setting

    single = _trainer(GRPOConfig(prompts_per_step=4, minibatches=1))
    metrics = single.step()
    assert metrics["optimizer_steps"] == 1 and metrics["clip_fraction"] == 0.0
    assert metrics["ratio_min"] == metrics["ratio_max"] == 1.0


def _hand_batch(vocab: CharVocab) -> list[Group]:
    """Two groups: rewards [1, 0] with completion lengths 1 and 3; rewards [1, 1] with lengths 2 and 2."""
    eos, d = vocab.eos_id, vocab.encode("3")[0]
    task = Task("1+1=", "2", "add", 1)
    prompt = vocab.encode(task.prompt, bos=True)
    mixed = Group(task, prompt, [Response([eos], 1.0), Response([d, d, eos], 0.0)])
    solved = Group(task, prompt, [Response([d, eos], 1.0), Response([d, eos], 1.0)])
    return [mixed, solved]


@pytest.mark.parametrize(
    ("advantage", "expected"),
    [
        # Dr. GRPO: A = r - mean = [+0.5, -0.5]; at ratio 1 the token sum is -(0.5 * 1) + 0.5 * 3 = 1.0, over the
        # constant max_new_tokens * responses = 8 * 4 = 32 (the solved group's zero-advantage responses count).
        ("dr_grpo", 1.0 / 32),
        # GRPO keeps its own (default token-level, DAPO) normaliser: A = ±0.5/(0.5 + 1e-6) (population std 0.5),
        # token sum -A + 3A = 2A, over 1 + 3 + 2 + 2 = 8 tokens.
        ("grpo", 2 * 0.5 / (0.5 + 1e-6) / 8),
    ],
)
def test_loss_normaliser_on_a_hand_computed_batch(advantage: str, expected: float) -> None:
    vocab = CharVocab()
    trainer = GRPOTrainer(
        build_model(TINY),
        vocab,
        [Task("1+1=", "2", "add", 1)],
        Uniform(2),
        GRPOConfig(advantage=advantage, max_new_tokens=8, minibatches=1),  # type: ignore[arg-type]
    )
    assert trainer.loss_kind == ("dr_grpo" if advantage == "dr_grpo" else "dapo")
    metrics = trainer._update(_hand_batch(vocab))
    assert metrics["loss"] == pytest.approx(expected, rel=1e-6)


def test_loss_normaliser_values() -> None:
    lengths = [1, 3, 2, 2]
    assert loss_normaliser("dr_grpo", lengths, max_new_tokens=8) == 32.0
    assert loss_normaliser("dapo", lengths, max_new_tokens=8) == 8.0
    assert loss_normaliser("sequence", lengths, max_new_tokens=8) == 4.0
    with pytest.raises(ValueError, match="loss must be one of"):
        loss_normaliser("token", lengths, max_new_tokens=8)
    assert GRPOConfig(advantage="dr_grpo", loss="dapo").loss_kind == "dapo"  # an explicit ablation is honoured
    with pytest.raises(ValueError, match="minibatches"):
        GRPOConfig(minibatches=0)
    with pytest.raises(ValueError, match="loss must be one of"):
        GRPOConfig(loss="token")  # type: ignore[arg-type]


class ScaledReward:
    """A verifier on a non-unit scale: 2.5 for prompts in ``solved``, else 0."""

    def __init__(self, solved: set[str]) -> None:
        self.solved = solved

    def __call__(self, task: Task, text: str) -> float:
        return 2.5 if task.prompt in self.solved else 0.0


def test_reused_response_keeps_its_stored_verifier_reward() -> None:
    pool = _pool(4)
    reward = ScaledReward({pool[0].prompt, pool[1].prompt})
    trainer = GRPOTrainer(
        build_model(TINY), CharVocab(), pool, AR3PO(2, 3), GRPOConfig(prompts_per_step=4), reward_fn=reward
    )
    trainer.step()  # pool[0] and pool[1] are solved (reward 2.5) and stored
    reward.solved = set()
    groups, _ = trainer._rollout(pool[:2])  # now all wrong: the buffered responses are injected
    reused = [r for g in groups for r in g.responses if r.reused]
    assert len(reused) == 2
    assert all(r.reward == 2.5 for r in reused)  # the verifier's reward, not a fixed 1.0
    assert all(max(r.reward for r in g.responses if not r.reused) == 0.0 for g in groups)
