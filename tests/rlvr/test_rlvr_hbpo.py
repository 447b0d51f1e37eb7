"""HBPO and the scratchpad family: the budget-aware reward and the two-level advantages on hand-computed cases, the
subgroup split, the scratch tasks and their verifier, the trainer's budget prompts, the spec, and kill-and-resume
through the CLI."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from kill_resume import assert_same, guided_preset, kill_and_resume
from tiny_grpo import resumed_alongside

from envs.reasoning import Task
from envs.reasoning.scratchpad import (
    SCRATCH_ALPHABET,
    budget_prompt,
    carries,
    fitting_style,
    make_scratch_set,
    make_scratch_sft_set,
    trace,
    trace_tokens,
    verify_scratch,
)
from meta.rlvr import Uniform
from meta.rlvr.guidance import make_guidance
from meta.rlvr.guidance.hbpo import HBPO, budget_reward, cosine_length_reward, hierarchical_advantages
from meta.rlvr.lm.charlm import CharLMConfig, build_model, save_model
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.trainers.grpo import GRPOTrainer
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.sft import fit_sft

TINY = CharLMConfig(alphabet=SCRATCH_ALPHABET, hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2)


def test_budget_reward_hand_cases() -> None:
    # b_max = 10: f(x) = cos(pi x / 40).
    assert cosine_length_reward(10, 10) == pytest.approx(math.cos(math.pi / 4))
    assert budget_reward(True, 3, 4, 10, 0.05) == pytest.approx(math.cos(0.1 * math.pi))  # inside: f(b) = 0.9511
    assert budget_reward(True, 4, 4, 10, 0.05) == budget_reward(True, 1, 4, 10, 0.05)  # flat inside the budget
    assert budget_reward(True, 6, 4, 10, 0.05) == pytest.approx(math.cos(0.15 * math.pi) - 0.1)  # 0.8910 - 0.1
    assert budget_reward(False, 3, 4, 10, 0.05) == 0.0
    assert budget_reward(True, 3, 4, 10, 0.05) > budget_reward(True, 3, 10, 10, 0.05)  # a tighter budget pays more


def test_two_level_advantages_hand_case() -> None:
    # Subgroup a: rewards 1, 0 (mean 0.5, std 0.5); b: 1, 1 (mean 1, std 0); whole group: mean 0.75, std 0.4330.
    adv = hierarchical_advantages([1.0, 0.0, 1.0, 1.0], ["a", "a", "b", "b"])
    inter = 0.25 / math.sqrt(0.1875)  # 0.57735
    assert adv == pytest.approx([1.0 - inter, -1.0 - inter, inter, inter], abs=1e-5)
    assert hierarchical_advantages([1.0, 0.0, 1.0, 1.0], [4, 4, 6, 6], "dr_grpo") == pytest.approx(
        [0.25, -0.75, 0.25, 0.25]
    )
    # One budget: plain GRPO advantages; one response per subgroup: the inter term alone.
    assert hierarchical_advantages([1.0, 0.0], [4, 4]) == pytest.approx([1.0, -1.0], abs=1e-5)
    assert hierarchical_advantages([1.0, 0.0], [4, 6], "dr_grpo") == pytest.approx([0.5, -0.5])
    assert hierarchical_advantages([1.0], [4]) == [0.0]
    with pytest.raises(ValueError, match="one subgroup per reward"):
        hierarchical_advantages([1.0, 0.0], [4])


def test_subgroups_and_spec() -> None:
    hbpo = make_guidance("hbpo:0.1,8,4,6,10")
    assert isinstance(hbpo, HBPO) and hbpo.budgets == [4, 6, 8, 10] and hbpo.alpha == 0.1
    assert hbpo.decide({"group_size": 8}) == [4, 4, 6, 6, 8, 8, 10, 10]
    assert hbpo.decide({"group_size": 6}) == [4, 4, 6, 6, 8, 10]
    assert make_guidance("hbpo").budgets == [4, 6, 8, 10]  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="at least one budget"):
        make_guidance("hbpo:0.1")
    with pytest.raises(ValueError, match="whole numbers"):
        make_guidance("hbpo:0.1,4.5")


def test_scratch_tasks_hand_cases() -> None:
    task = Task("35+7=", "06", "scratch", 2)  # 53 + 7 = 60
    assert carries(task) == "10"
    assert trace(task, "scratch") == "10;#06" and trace(task, "direct") == "#06"
    assert trace_tokens(task, "scratch") == 7 and trace_tokens(task, "direct") == 4
    assert verify_scratch(task, "10;#06$") == verify_scratch(task, "#06$") == verify_scratch(task, "1;#06") == 1.0
    assert verify_scratch(task, "06$") == 0.0 and verify_scratch(task, "#6$") == 0.0
    assert budget_prompt("35+7=", 9) == "9<35+7="
    assert fitting_style(task, 7) == "scratch" and fitting_style(task, 6) == "direct"
    rng = np.random.default_rng(0)
    for t in make_scratch_set(50, rng, difficulties=[1, 2, 3]):
        a, b = t.prompt.removesuffix("=").split("+")
        assert int(t.answer[::-1]) == int(a[::-1]) + int(b[::-1])
        assert verify_scratch(t, trace(t, "scratch") + "$") == 1.0
    sft = make_scratch_sft_set(40, np.random.default_rng(1), budgets=[4, 10], budget_share=0.5)
    assert sft == make_scratch_sft_set(40, np.random.default_rng(1), budgets=[4, 10], budget_share=0.5)
    budgeted = [t for t in sft if "<" in t.prompt]
    assert budgeted and all(len(t.answer) + 1 <= int(t.prompt.split("<")[0]) or t.answer[0] == "#" for t in budgeted)
    with pytest.raises(ValueError, match="needs budgets"):
        make_scratch_sft_set(2, rng, budget_share=0.5)


def _trainer(minibatches: int = 1) -> GRPOTrainer:
    torch.manual_seed(0)
    pool = make_scratch_set(8, np.random.default_rng(0), difficulties=[1, 2])
    cfg = GRPOConfig(prompts_per_step=2, minibatches=minibatches, lr=0.02, max_new_tokens=8)
    return GRPOTrainer(
        build_model(TINY),
        CharVocab(SCRATCH_ALPHABET),
        pool,
        Uniform(4),
        cfg,
        reward_fn=lambda t, s: float(len(s) % 2),
        guidance=HBPO(budgets=[3, 6]),
    )


def test_trainer_samples_budget_subgroups() -> None:
    trainer = _trainer()
    groups, _ = trainer._rollout(trainer._draw(2))
    vocab = trainer.vocab
    for g in groups:
        assert [r.condition for r in g.responses] == [3, 3, 6, 6]
        for r in g.responses:
            assert r.context is not None and vocab.decode(r.context) == budget_prompt(g.task.prompt, int(r.condition))
    assert trainer.costs.responses == 8
    assert trainer.guidance is not None and trainer.guidance.state_dict()["responses_per_budget"] == {"3": 4, "6": 4}


def test_hbpo_resumes_exactly() -> None:
    full, resumed = resumed_alongside(lambda: _trainer(minibatches=2))
    assert full.guidance is not None and resumed.guidance is not None
    assert full.guidance.state_dict() == resumed.guidance.state_dict()


def test_cli_kill_and_resume_matches_straight_run(tmp_path: Path) -> None:
    """SIGKILL after a checkpoint, then ``--resume`` on the scratch family: bit-identical to a straight run."""
    torch.manual_seed(0)
    model = build_model(TINY)

    def batch(n: int, rng: np.random.Generator) -> list[Task]:
        return make_scratch_sft_set(n, rng, [1], budgets=[4, 6], budget_share=0.5)

    fit_sft(model, CharVocab(SCRATCH_ALPHABET), batch, 40, 32, 1e-2, np.random.default_rng(0), log=None)
    sft = save_model(tmp_path / "sft.pt", model, TINY)
    preset = guided_preset(tmp_path / "preset.yaml", sft, "hbpo:0.05,4,6", 16, ["scratch"])
    straight, resumed = kill_and_resume(tmp_path, preset, 16)
    assert_same(straight["state"]["trainer"], resumed["state"]["trainer"], "trainer")
    assert_same(straight["state"]["evals"], resumed["state"]["evals"], "evals")
    assert sum(resumed["state"]["trainer"]["guidance"]["responses_per_budget"].values()) == 16 * 4 * 8
