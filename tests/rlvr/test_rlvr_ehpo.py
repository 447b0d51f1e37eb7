"""ADR / EHPO: mode choice, unit starts, the difficulty-aware length penalty, branching at units, exact resume."""

from __future__ import annotations

import pytest
from tiny_grpo import EchoTool, resumed_alongside, tiny_grpo_trainer

from meta.rlvr.lm.vocab import CharVocab
from meta.rlvr.token import make_token_controller
from meta.rlvr.token.ehpo import EHPO, difficulty_length_penalty, response_mode, unit_starts
from meta.rlvr.trainers.grpo import GRPOTrainer


def _trainer(ehpo: EHPO, group_size: int = 6) -> GRPOTrainer:
    return tiny_grpo_trainer(group_size, tool=EchoTool(CharVocab()), branching=ehpo)


def test_mode_choice() -> None:
    assert response_mode("#86") == "fast"
    assert response_mode("45*2=90;3+90=93;93-7=86;#86") == "slow"
    assert response_mode("<calc>3+45*2-7</calc>86#86") == "slow"
    assert response_mode("86") == "fast"  # no reasoning before the (missing) mark


def test_unit_starts() -> None:
    assert unit_starts(list("1;2;#3"), [0] * 6) == [2, 4]
    # A tool result (inserted '7') ends at 3: the next unit starts there; an inserted ';' does not end a step.
    assert unit_starts(list("a>7b;c"), [0, 0, 1, 0, 1, 0]) == [3, 5]
    assert unit_starts(list("1;"), [0, 0]) == []  # nothing sampled after the last step


def test_length_penalty_per_difficulty_hand_cases() -> None:
    # d = 0.5, correct lengths 4 and 10 -> l = 0, 1: the long correct one loses 0.5 * (1 - 0.5) * 1.
    assert difficulty_length_penalty([1, 1, 0, 0], [4, 10, 6, 8], 0.5) == pytest.approx([1, 0.75, 0, 0])
    # An easy prompt, d = 0.25: l = 0, 1, 0.5 -> penalties 0, 0.375, 0.1875; the wrong one is untouched.
    assert difficulty_length_penalty([1, 1, 1, 0], [4, 10, 7, 2], 0.5) == pytest.approx([1, 0.625, 0.8125, 0])
    # The same long-vs-short pair costs more on the easier prompt.
    easy = difficulty_length_penalty([1, 1, 1, 1], [4, 10, 4, 4], 0.5)
    hard = difficulty_length_penalty([1, 1, 0, 0], [4, 10, 4, 4], 0.5)
    assert 1 - easy[1] == pytest.approx(0.5) and 1 - hard[1] == pytest.approx(0.25)
    assert difficulty_length_penalty([1, 0, 0, 0], [9, 1, 1, 1], 0.5) == [1, 0, 0, 0]  # one correct: l = 0
    assert difficulty_length_penalty([], [], 0.5) == []
    with pytest.raises(ValueError, match="one length per reward"):
        difficulty_length_penalty([1], [], 0.5)


def test_branch_points_at_high_entropy_units() -> None:
    ehpo = EHPO(threshold=1.0)
    ents = [0.1, 0.1, 1.5, 0.1, 2.0, 0.1]
    assert ehpo.branch_points(list("1;2;#3"), [0] * 6, ents) == [(4, 1.0), (2, 1.0)]  # most uncertain first
    ents[4] = 0.5
    assert ehpo.branch_points(list("1;2;#3"), [0] * 6, ents) == [(2, 1.0)]
    assert ehpo.points == 4
    with pytest.raises(KeyError, match="entropy"):
        ehpo.decide({})


def test_trainer_branches_within_budget_and_shapes_rewards() -> None:
    ehpo = EHPO(threshold=0.0, coef=0.5, branches=2)  # every unit start branches while the budget lasts
    trainer = _trainer(ehpo)
    groups, _ = trainer._rollout(trainer._draw(2))
    assert all(len(g.responses) == 6 for g in groups)
    assert ehpo.branch_responses > 0 and ehpo.branch_responses + ehpo.supplemented == 2 * 3
    g = groups[0]
    assert trainer._shaped_rewards(g) == difficulty_length_penalty(
        g.rewards, [r.policy_tokens for r in g.responses], 0.5
    )


def test_trainer_with_ehpo_resumes_exactly() -> None:
    full, resumed = resumed_alongside(lambda: _trainer(EHPO(threshold=0.5, coef=0.2)))
    assert full.branching is not None and resumed.branching is not None
    assert full.branching.state_dict() == resumed.branching.state_dict()
    assert full.costs.as_dict() == resumed.costs.as_dict()


def test_spec_and_refusals() -> None:
    ctl = make_token_controller("ehpo:0.5,0.2,3")
    assert isinstance(ctl, EHPO) and (ctl.threshold, ctl.coef, ctl.branches) == (0.5, 0.2, 3)
    with pytest.raises(ValueError, match="whole number"):
        make_token_controller("ehpo:1,0.1,1.5")
    with pytest.raises(ValueError, match="threshold >= 0"):
        EHPO(threshold=-1)
    from meta.rlvr.token.length_penalty import AdaptiveLengthPenalty

    with pytest.raises(ValueError, match="length penalty"):
        tiny_grpo_trainer(4, branching=EHPO(), length_penalty=AdaptiveLengthPenalty())
    tiny_grpo_trainer(4, branching=EHPO())  # needs no tool: ';' steps are its units
