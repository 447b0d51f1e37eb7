"""Adaptive pixel reasoning: the zoom tool's crop geometry, the verifier, the tool-use arms and the rollout-guided
reward rule (hand-computed cases), the policy's block mask, an SFT + GRPO smoke run and kill-and-resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from envs.vision.zoom_queries import (
    ANSWERS,
    CANVAS,
    GRID,
    VIEW,
    cell_box,
    global_view,
    glyph,
    make_query_set,
    parse_response,
    resample,
    tool_calls,
    verify,
    zoom,
)
from meta.rlvr.allocators import make_allocator
from meta.rlvr.trainers.grpo_config import GRPOConfig
from meta.rlvr.vision.arms import (
    AlwaysZoom,
    FixedToolPenalty,
    NeverZoom,
    NoCallReward,
    PolicyDecides,
    RolloutGuidedReward,
    make_tool_arm,
)
from meta.rlvr.vision.policy import N_ANSWERS, PixelPolicy, encode_queries, response_text
from meta.rlvr.vision.run import CHECKPOINT_NAME, PixelReasoningConfig, PixelReasoningRun
from meta.rlvr.vision.trainer import PixelSFTConfig, ZoomGRPOTrainer, sample_responses

# --- crop geometry ---------------------------------------------------------------------------------------------------


def test_cell_box_partitions_the_canvas() -> None:
    assert cell_box(0, 0) == (0, 0, 16, 16)
    assert cell_box(1, 2) == (16, 32, 16, 16)  # column 1, row 2
    assert cell_box(3, 3, canvas=64, grid=4) == (48, 48, 16, 16)
    with pytest.raises(ValueError, match=r"zoom cell \(4, 0\) is outside the 4x4 grid"):
        cell_box(4, 0)


def test_resample_downsamples_by_block_means() -> None:
    image = np.arange(16, dtype=np.float64).reshape(1, 4, 4)
    out = resample(image, (0, 0, 4, 4), 2)
    # Blocks [[0,1],[4,5]] -> 2.5, [[2,3],[6,7]] -> 4.5, [[8,9],[12,13]] -> 10.5, [[10,11],[14,15]] -> 12.5.
    np.testing.assert_allclose(out[0], [[2.5, 4.5], [10.5, 12.5]])


def test_resample_upsamples_by_repeating_pixels() -> None:
    image = np.arange(16, dtype=np.float64).reshape(1, 4, 4)
    out = resample(image, (1, 2, 2, 2), 4)  # the 2x2 box [[9, 10], [13, 14]] at twice the size
    np.testing.assert_allclose(out[0], [[9, 9, 10, 10], [9, 9, 10, 10], [13, 13, 14, 14], [13, 13, 14, 14]])


def test_resample_weights_partly_covered_pixels() -> None:
    image = np.array([[[0.0, 2.0, 10.0]]])
    # The box [0.5, 2.5) covers half of pixel 0, all of pixel 1, half of pixel 2: (0*0.5 + 2*1 + 10*0.5) / 2 = 3.5.
    np.testing.assert_allclose(resample(image, (0.5, 0, 2, 1), 1)[0], [[3.5]])


def test_resample_refuses_a_box_outside_the_image() -> None:
    with pytest.raises(ValueError, match="outside the 4x4 image"):
        resample(np.zeros((1, 4, 4)), (3, 0, 2, 2), 2)


def test_zoom_is_the_full_resolution_cell_and_the_global_view_block_means() -> None:
    query = make_query_set(1, seed=3)[0]
    x, y = 2, 1
    side = CANVAS // GRID
    np.testing.assert_allclose(
        zoom(query.image, x, y), query.image[:, y * side : (y + 1) * side, x * side : (x + 1) * side], atol=1e-6
    )
    factor = CANVAS // VIEW
    blocks = query.image.reshape(3, VIEW, factor, VIEW, factor).mean(axis=(2, 4))
    np.testing.assert_allclose(global_view(query.image), blocks, atol=1e-6)


# --- the task and its verifier ---------------------------------------------------------------------------------------


def test_glyph_is_the_font_at_twice_its_size() -> None:
    one = glyph("1")
    assert one.shape == (10, 6)
    assert int(one.sum()) == 4 * 8  # '1' has 8 ink cells (1+2+1+1+3), each 2x2 pixels
    with pytest.raises(ValueError, match="digit must be one of"):
        glyph("x")


def test_query_sets_are_deterministic_and_need_is_known_by_kind() -> None:
    a, b = make_query_set(30, seed=5), make_query_set(30, seed=5)
    assert all(np.array_equal(p.image, q.image) and p.answer == q.answer for p, q in zip(a, b, strict=True))
    assert {q.kind for q in a} == {"colour", "count", "digit"}
    for q in a:
        assert q.answer in ANSWERS
        assert q.needs_zoom == (q.kind == "digit")
        assert q.image.shape == (3, CANVAS, CANVAS) and q.image.min() >= 0.0 and q.image.max() <= 1.0
    # The glyph's cell holds the white patch: its crop is brighter than the canvas on average.
    for q in a[:5]:
        assert zoom(q.image, *q.glyph_cell).mean() > q.image.mean() + 0.1


def test_parse_and_verify() -> None:
    query = next(q for q in make_query_set(20, seed=0) if q.kind == "digit")
    wrong = "0" if query.answer != "0" else "1"
    assert parse_response("<zoom 1 2>7") == ((1, 2), "7")
    assert parse_response("r") == (None, "r")
    assert parse_response("<zoom 9 0>7") == ((9, 0), None)  # outside the grid
    assert parse_response("<zoom 1 2>") == ((1, 2), None)  # a call without an answer
    assert verify(query, query.answer) == 1.0
    assert verify(query, f"<zoom 3 3>{query.answer}") == 1.0  # the verifier scores the answer, not the call
    assert verify(query, wrong) == 0.0
    assert verify(query, query.answer * 2) == 0.0
    assert verify(query, f"<zoom 4 0>{query.answer}") == 0.0
    assert tool_calls("<zoom 1 2>7") == 1 and tool_calls("7") == 0


# --- arms and the reward rule ----------------------------------------------------------------------------------------


def test_arm_specs_build_the_gates_and_call_rewards() -> None:
    assert isinstance(make_tool_arm("always_zoom").gate, AlwaysZoom)
    assert isinstance(make_tool_arm("never_zoom").gate, NeverZoom)
    free = make_tool_arm("free_zoom")
    assert isinstance(free.gate, PolicyDecides) and isinstance(free.call_reward, NoCallReward)
    penalty = make_tool_arm("zoom_penalty:0.3").call_reward
    assert isinstance(penalty, FixedToolPenalty) and penalty.penalty == 0.3
    guided = make_tool_arm("rollout_guided").call_reward
    assert isinstance(guided, RolloutGuidedReward) and (guided.bonus, guided.margin) == (0.2, 0.1)
    assert [make_tool_arm(s).gate.decide({}) for s in ("always_zoom", "never_zoom", "free_zoom")] == [
        "zoom",
        "answer",
        "policy",
    ]


def test_arm_specs_refuse_bad_input() -> None:
    with pytest.raises(ValueError, match="unknown tool arm 'sometimes'"):
        make_tool_arm("sometimes")
    with pytest.raises(ValueError, match="RLVR allocator spec"):
        make_tool_arm("uniform:8")
    with pytest.raises(ValueError, match="the tool penalty must be >= 0"):
        make_tool_arm("zoom_penalty:-1")
    with pytest.raises(ValueError, match="margin must be in"):
        make_tool_arm("rollout_guided:0.2,1.5")


def test_rollout_guided_rule_hand_cases() -> None:
    rule = RolloutGuidedReward(bonus=0.2, margin=0.1)
    # Needed: the tool lifts success from 0.1 to 0.9.
    assert rule.decide({"success_with": 0.9, "success_without": 0.1}) == pytest.approx(0.2)
    # Not needed: 0.8 vs 0.75 is within the margin; 0.5 vs 0.4 is exactly the margin (needs more than it).
    assert rule.decide({"success_with": 0.8, "success_without": 0.75}) == pytest.approx(-0.2)
    assert rule.decide({"success_with": 0.5, "success_without": 0.4}) == pytest.approx(-0.2)
    # The tool hurts: not needed.
    assert rule.decide({"success_with": 0.2, "success_without": 0.6}) == pytest.approx(-0.2)
    # One success rate unknown: no call reward.
    assert rule.decide({"success_with": None, "success_without": 0.6}) == 0.0
    with pytest.raises(KeyError, match="success_without"):
        rule.decide({"success_with": 0.5})
    assert FixedToolPenalty(0.1).decide({}) == pytest.approx(-0.1)
    assert NoCallReward().decide({}) == 0.0


def _tiny_trainer(arm: str, probes: int = 0) -> ZoomGRPOTrainer:
    data = encode_queries(make_query_set(8, seed=0))
    torch.manual_seed(0)
    cfg = GRPOConfig(prompts_per_step=4, max_new_tokens=2, lr=1e-3, minibatches=2, seed=0)
    return ZoomGRPOTrainer(PixelPolicy(), data, make_tool_arm(arm), make_allocator("uniform:4"), cfg, probes=probes)


def test_success_rates_with_and_without_the_tool_come_from_the_groups_rollouts() -> None:
    trainer = _tiny_trainer("rollout_guided")
    call, answer = N_ANSWERS, 0
    first = torch.as_tensor([call, call, answer, answer, answer])
    rates = trainer._success_rates([0, 1], [0, 0, 0, 1, 1], first, [1.0, 0.0, 1.0, 0.0, 1.0])
    assert rates == {0: (0.5, 1.0), 1: (None, 0.5)}


def test_probes_measure_both_tool_choices_on_every_query() -> None:
    trainer = _tiny_trainer("rollout_guided", probes=2)
    rates = trainer._success_rates([0, 1, 2], [], torch.zeros(0, dtype=torch.long), [])
    assert all(w is not None and wo is not None for w, wo in rates.values())
    assert trainer.totals["probe_rollouts"] == 12  # 3 queries x 2 probes x 2 choices


def test_a_call_reward_is_added_to_correctness() -> None:
    trainer = _tiny_trainer("zoom_penalty:0.5")
    metrics = trainer.step()
    # Every reward is correctness (0 or 1) minus 0.5 per call: the step's mean reward is accuracy - 0.5 * tool ratio.
    assert metrics["reward"] == pytest.approx(metrics["accuracy"] - 0.5 * metrics["tool_ratio"])


# --- policy and sampling ---------------------------------------------------------------------------------------------


def test_first_decision_logits_do_not_see_the_crop() -> None:
    data = encode_queries(make_query_set(4, seed=1))
    torch.manual_seed(0)
    policy = PixelPolicy().eval()
    first = torch.full((4,), N_ANSWERS + 5)
    alone = policy(data.views, data.kinds)[:, 0]
    with_crop = policy(data.views, data.kinds, first, data.crops[:, 5])[:, 0]
    other_crop = policy(data.views, data.kinds, first, torch.rand_like(data.crops[:, 5]))
    torch.testing.assert_close(alone, with_crop, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(with_crop, other_crop[:, 0], rtol=1e-5, atol=1e-5)
    assert not torch.allclose(policy(data.views, data.kinds, first, data.crops[:, 5])[:, 1], other_crop[:, 1])


def test_gates_force_and_forbid_the_tool() -> None:
    data = encode_queries(make_query_set(6, seed=2))
    torch.manual_seed(0)
    policy = PixelPolicy()
    gen = torch.Generator().manual_seed(0)
    rows = list(range(6)) * 4
    first, second = sample_responses(policy, data, rows, ["zoom"] * len(rows), temperature=1.0, generator=gen)
    assert bool((first >= N_ANSWERS).all()) and bool((second >= 0).all()) and bool((second < N_ANSWERS).all())
    first, second = sample_responses(policy, data, rows, ["answer"] * len(rows), temperature=1.0, generator=gen)
    assert bool((first < N_ANSWERS).all()) and bool((second == -1).all())
    assert response_text([N_ANSWERS + 1 * GRID + 2, 7]) == "<zoom 2 1>7"


# --- runs ------------------------------------------------------------------------------------------------------------


def _tiny_config(**overrides: object) -> PixelReasoningConfig:
    cfg = PixelReasoningConfig(
        steps=4,
        eval_every=2,
        checkpoint_every=1,
        train_size=24,
        held_out_size=12,
        sft=PixelSFTConfig(steps=5, batch=16),
        grpo=GRPOConfig(prompts_per_step=4, max_new_tokens=2, lr=1e-3, minibatches=2),
        allocator="uniform:4",
    )
    for key, value in overrides.items():
        setattr(cfg, key, value)
    return cfg


@pytest.mark.parametrize("arm", ["rollout_guided:0.2,0.1", "always_zoom", "never_zoom"])
def test_sft_then_grpo_smoke(arm: str) -> None:
    result = PixelReasoningRun(_tiny_config(arm=arm)).learn()
    assert result["steps"] == 4 and [e["step"] for e in result["evals"]] == [0.0, 2.0, 4.0]
    final = result["final"]
    assert 0.0 <= final["accuracy"] <= 1.0
    if arm == "always_zoom":
        assert final["tool_ratio"] == 1.0
    if arm == "never_zoom":
        assert final["tool_ratio"] == 0.0
    assert result["totals"]["probe_rollouts"] == (4 * 4 * 2 * 2 if arm.startswith("rollout") else 0)


def test_killed_run_resumes_to_the_uninterrupted_result(tmp_path) -> None:
    whole = PixelReasoningRun(_tiny_config(), tmp_path / "whole").learn()
    PixelReasoningRun(_tiny_config(), tmp_path / "cut").learn(stop_after=3)
    resumed_run = PixelReasoningRun.resume(tmp_path / "cut")
    assert resumed_run.trainer.num_steps == 3
    resumed = resumed_run.learn()
    assert resumed["evals"] == whole["evals"] and resumed["totals"] == whole["totals"]
    a = torch.load(tmp_path / "whole" / CHECKPOINT_NAME, weights_only=True)["state"]["trainer"]["policy"]
    b = torch.load(tmp_path / "cut" / CHECKPOINT_NAME, weights_only=True)["state"]["trainer"]["policy"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (tmp_path / "cut" / "result.json").is_file()


def test_runs_share_the_sft_checkpoint(tmp_path) -> None:
    path = tmp_path / "sft.pt"
    first = PixelReasoningRun(_tiny_config(steps=0, sft_checkpoint=str(path))).learn()
    assert path.is_file()
    second = PixelReasoningRun(_tiny_config(steps=0, arm="always_zoom", sft_checkpoint=str(path)))
    second.learn()
    free = PixelReasoningRun(_tiny_config(steps=0, arm="free_zoom", sft_checkpoint=str(path))).learn()
    assert free["evals"] == first["evals"] and free["sft"] == first["sft"]  # the same warm start, not retrained
    with pytest.raises(ValueError, match="was trained with other settings"):
        PixelReasoningRun(_tiny_config(steps=0, sft_seed=1, sft_checkpoint=str(path))).learn()
