"""ARPO: branch probability, tool-return points, prefix advantage attribution, budget and exact resume."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from tiny_grpo import EchoTool, resumed_alongside, tiny_calc_sft, tiny_grpo_trainer

from envs.reasoning import Task
from meta.rlvr import Uniform
from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.token import make_token_controller
from meta.rlvr.token.arpo import ARPO, branch_probability, prefix_advantages, tool_return_points, window_entropy
from meta.rlvr.token.eepo import EEPO
from meta.rlvr.trainers.grpo import GRPOTrainer
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.trainers.grpo_groups import Group, Response


def _trainer(arpo: ARPO | None = None, group_size: int = 6, **kwargs: object) -> GRPOTrainer:
    return tiny_grpo_trainer(group_size, tool=EchoTool(CharVocab()), branching=arpo, **kwargs)


def test_branch_probability_hand_cases() -> None:
    assert branch_probability(1.5, 1.0, alpha=0.5, beta=0.4) == pytest.approx(0.7)  # 0.5 + 0.4 * 0.5
    assert branch_probability(0.8, 1.0, alpha=0.5, beta=1.0) == pytest.approx(0.3)  # entropy fell: less likely
    assert branch_probability(3.0, 1.0, alpha=0.5, beta=1.0) == 1.0  # clipped
    assert branch_probability(0.0, 2.0, alpha=0.5, beta=1.0) == 0.0
    arpo = ARPO(alpha=0.2, beta=2.0)
    assert arpo.decide({"entropy_after": 1.1, "entropy_initial": 1.0}) == pytest.approx(0.4)
    assert arpo.points == 1
    with pytest.raises(KeyError, match="entropy_initial"):
        arpo.decide({"entropy_after": 1.0})


def test_tool_return_points_and_entropy_windows() -> None:
    assert tool_return_points([0, 1, 1, 0, 0, 1]) == [3, 6]
    assert tool_return_points([0, 0]) == []
    ents, flags = [1.0, 2.0, 9.0, 3.0, 5.0], [0, 0, 1, 0, 0]
    assert window_entropy(ents, flags, 0, 2) == pytest.approx(1.5)
    assert window_entropy(ents, flags, 2, 2) == pytest.approx(4.0)  # the inserted 9.0 is skipped
    assert math.isnan(window_entropy(ents, flags, 5, 2))


def test_prefix_advantages_two_branches_share_three_tokens() -> None:
    token_adv, owned = prefix_advantages([[1, 2, 3, 4, 5], [1, 2, 3, 6]], [1.0, -1.0], families=[0, 0])
    assert token_adv == [[0.0, 0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, -1.0]]
    assert owned == [[1, 1, 1, 1, 1], [0, 0, 0, 1]]  # the shared prefix is trained once
    # Three responses of one family: the root and two branches forking after its second token.
    token_adv, owned = prefix_advantages([[1, 2, 3], [1, 2, 4], [1, 2, 5]], [1.0, 0.5, -0.3], families=[7, 7, 7])
    assert token_adv[1] == pytest.approx([0.4, 0.4, 0.5])
    assert owned[2] == [0, 0, 1]
    # Different families never share, even with equal tokens.
    token_adv, owned = prefix_advantages([[1, 2], [1, 2]], [1.0, -1.0])
    assert token_adv == [[1.0, 1.0], [-1.0, -1.0]] and owned == [[1, 1], [1, 1]]


def test_shared_prefix_counts_once_in_the_loss() -> None:
    """dr_grpo advantages ±0.5 from rewards 1/0; the 3 shared tokens get 0 and count once: 5 + 1 tokens trained."""
    vocab = CharVocab()
    task = Task("1+2=", "3", "add", 1)
    cfg = GRPOConfig(prompts_per_step=1, advantage="dr_grpo", loss="dapo", minibatches=1)
    trainer = GRPOTrainer(
        tiny_grpo_trainer(2).model, vocab, [task], Uniform(2), cfg, tool=EchoTool(vocab), branching=ARPO()
    )
    group = Group(task, vocab.encode(task.prompt, bos=True))
    ids = vocab.encode("12345")
    group.responses = [
        Response(ids, 1.0, inserted=[0] * 5, family=0),
        Response([*ids[:3], ids[0]], 0.0, inserted=[0] * 4, family=0, shared=3),
    ]
    trainer._update([group])
    assert trainer.costs.tokens_trained == 6


def test_budget_is_the_group_size_and_branches_share_their_root_prefix() -> None:
    arpo = ARPO(alpha=1.0, beta=0.0, k=2, branches=2)  # p = 1: every tool result branches while budget lasts
    trainer = _trainer(arpo, group_size=6)
    branched = 0
    for _ in range(3):
        before = trainer.costs.completion_tokens
        groups, _ = trainer._rollout(trainer._draw(2))
        for g in groups:
            assert len(g.responses) == 6
            roots = {r.family: r for r in g.responses[:3]}  # the ⌈6/2⌉ initial responses come first
            for r in g.responses:
                if r.shared:
                    assert r.tokens[: r.shared] == roots[r.family].tokens[: r.shared]
                    assert r.inserted is not None and r.inserted[r.shared - 1] == 1  # forks right after a result
                    branched += 1
        generated = sum(len(r.tokens) - r.shared for g in groups for r in g.responses)
        assert trainer.costs.completion_tokens - before == generated
    assert branched > 0 and branched == arpo.branch_responses
    assert arpo.branch_responses + arpo.supplemented == 3 * 2 * 3  # the non-initial half of every group


def test_trainer_with_arpo_resumes_exactly() -> None:
    def make() -> GRPOTrainer:
        return _trainer(ARPO(alpha=0.5, beta=1.0, k=2, branches=2))

    full, resumed = resumed_alongside(make)
    assert full.branching is not None and resumed.branching is not None
    assert full.branching.state_dict() == resumed.branching.state_dict()
    assert full.branching.points > 0
    assert full.costs.as_dict() == resumed.costs.as_dict()


def test_refusals() -> None:
    with pytest.raises(ValueError, match="needs a tool"):
        tiny_grpo_trainer(4, branching=ARPO())
    with pytest.raises(ValueError, match="ARPO"):
        _trainer(ARPO(), eepo=EEPO())
    with pytest.raises(ValueError, match="k >= 1"):
        ARPO(k=0)
    with pytest.raises(ValueError, match="alpha"):
        ARPO(alpha=1.5)


def test_spec() -> None:
    ctl = make_token_controller("arpo:0.3,2,3,1")
    assert isinstance(ctl, ARPO)
    assert (ctl.alpha, ctl.beta, ctl.k, ctl.branches) == (0.3, 2.0, 3, 1)
    default = make_token_controller("arpo")
    assert isinstance(default, ARPO) and (default.alpha, default.beta, default.k, default.branches) == (0.5, 1, 4, 2)
    with pytest.raises(ValueError, match="K must be a whole number"):
        make_token_controller("arpo:0.5,1,2.5")


def test_arpo_run_checkpoints_its_state(tmp_path: Path) -> None:
    from meta.rlvr.trainers.run import GRPORun, GRPORunConfig

    tiny_calc_sft(tmp_path / "sft.pt", difficulties=[1], eval_per_difficulty=2)
    cfg = GRPORunConfig(
        sft_checkpoint=str(tmp_path / "sft.pt"),
        steps=2,
        pool_size=4,
        held_out_size=2,
        families=["calc"],
        difficulties=[1],
        token_controller="arpo:1,0,2,2",
        grpo=GRPOConfig(prompts_per_step=2, max_new_tokens=24),
    )
    run = GRPORun.start(cfg, root=tmp_path / "runs")
    run.learn()
    assert run.run_dir is not None and "arpo" in run.run_dir.name
    resumed = GRPORun.resume(run.run_dir).trainer
    assert resumed.branching is not None and run.trainer.branching is not None
    assert resumed.branching.state_dict() == run.trainer.branching.state_dict()
    with pytest.raises(ValueError, match="ARPO branches after tool results"):
        GRPORun.start(GRPORunConfig(sft_checkpoint=str(tmp_path / "sft.pt"), token_controller="arpo"), root=tmp_path)
