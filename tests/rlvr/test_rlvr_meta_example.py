"""``examples/rlvr_meta_policy_in_trl.py`` runs as documented with a meta-policy trained here (tiny, seconds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from script_modules import load_script

pytest.importorskip("trl")

from meta.control.training import MetaAgentConfig, MetaTrainConfig, MetaTrainer
from meta.rlvr.learned import LearnedGroupSize
from meta.rlvr.meta_mdp import RLVRMetaConfig

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rlvr_meta_policy_in_trl.py"
# The example's defaults come from the policy's settings: a small budget keeps its TRL run to a few steps.
TINY = RLVRMetaConfig(
    checkpoint=None,
    model={"hidden_size": 32, "intermediate_size": 64, "num_layers": 1, "num_heads": 2},
    token_budget=400,
    phases=3,
    prompts_per_step=4,
    max_new_tokens=6,
    grid=[2, 4],
    g_init=2,
    difficulties=[1, 2],
    pool_size=16,
    held_out_size=16,
)


def test_the_meta_policy_example_trains_to_the_budget_and_saves_its_result(tmp_path: Path) -> None:
    agent = MetaAgentConfig(batch_size=4, learning_starts=2, exploration_fraction=0.5)
    train = MetaTrainConfig(env=TINY, episodes=2, runs_per_round=2, agent=agent)
    MetaTrainer(train, tmp_path / "meta", show_progress=False).train()

    example = load_script(EXAMPLE)
    args = example.Args(
        policy=str(tmp_path / "meta"),  # the meta-training directory also works
        train_prompts=16,
        held_out_prompts=16,
        sft_steps=10,
        output_dir=str(tmp_path / "run"),
    )
    result = example.main(args)
    saved = json.loads((tmp_path / "run" / "result.json").read_text())
    assert saved["g_schedule"] == result["g_schedule"] and saved["ledger"] == result["ledger"]
    # The policy's budget, phases and sizes were used: one decision per phase, training stopped at the budget.
    assert result["token_budget"] == 400 and len(result["g_schedule"]) == 3 and result["budget_spent"]
    ledger = result["ledger"]
    assert 400 <= ledger["completion_tokens"] < 400 + 4 * 4 * 6
    assert set(result["g_schedule"]) <= {2, 4}
    # The G schedule is the policy's own choice on the feedback recorded with it.
    replay = LearnedGroupSize(tmp_path / "meta")
    assert [replay.decide(d["feedback"]) for d in result["decisions"]] == result["g_schedule"]
    accuracy = result["held_out_accuracy"]
    assert accuracy["before"] == result["decisions"][0]["accuracy"]
    assert 0.0 <= accuracy["before"] <= 1.0 and 0.0 <= accuracy["after"] <= 1.0


def test_a_missing_policy_is_reported_with_how_to_get_one(tmp_path: Path) -> None:
    example = load_script(EXAMPLE)
    with pytest.raises(
        FileNotFoundError, match=r"no RLVR meta-policy at .*nothing\.pt: train one with .*rlvr_meta\.py"
    ):
        example.main(example.Args(policy=str(tmp_path / "nothing.pt"), output_dir=str(tmp_path / "run")))
    assert example.Args().policy == "experiments/meta/results/rlvr_meta/train/meta_policy.pt"
