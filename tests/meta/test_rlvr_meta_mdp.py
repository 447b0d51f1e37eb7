"""The RLVR meta-MDP (the compact GRPO trainer's group size G under a token budget) on the generic meta-MDP class."""

from __future__ import annotations

import pickle
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

from experiments.meta.rlvr_meta_arms import arm_names, run_arm, tokens_to_target
from meta.control.mdp import MetaEnv, MetaVecEnv
from meta.control.training import MetaAgentConfig, MetaTrainConfig, MetaTrainer
from meta.rlvr.learned import LearnedGroupSize, RandomGroupSize
from meta.rlvr.meta_mdp import (
    RLVR_FEATURE_NAMES,
    GroupSizeActions,
    GroupSizeEnv,
    GroupSizeFeedback,
    RLVRMetaConfig,
    RunDomain,
    WarmStart,
    solve_rate_histogram,
)
from meta.rollout_length.env import RolloutLengthEnv
from rolloutlab.checkpoint import CheckpointError
from rolloutlab.config import from_dict, to_dict

# A fresh tiny model (no SFT checkpoint): it solves little, but every path of the meta-MDP runs, in seconds.
TINY = RLVRMetaConfig(
    checkpoint=None,
    model={"hidden_size": 32, "intermediate_size": 64, "num_layers": 1, "num_heads": 2},
    token_budget=480,
    phases=3,
    prompts_per_step=4,
    max_new_tokens=6,
    grid=[2, 4],
    g_init=2,
    pool_size=16,
    held_out_size=16,
)


def _rollout(env: MetaEnv, actions: list[int], seed: int) -> tuple[list[np.ndarray], list[float], dict]:
    obs, info = env.reset(seed=seed)
    observations, rewards = [obs], []
    for a in actions:
        obs, reward, terminated, truncated, info = env.step(a)
        observations.append(obs)
        rewards.append(reward)
    assert terminated and not truncated
    return observations, rewards, info


def test_one_meta_mdp_class_serves_both_inner_learners() -> None:
    assert isinstance(GroupSizeEnv(TINY), MetaEnv)
    assert isinstance(RolloutLengthEnv(), MetaEnv)


def test_the_rlvr_meta_env_passes_gymnasium_and_sb3_checks() -> None:
    gym_check_env(GroupSizeEnv(TINY), skip_render_check=True)
    sb3_check_env(GroupSizeEnv(TINY), warn=False)


def test_rewards_telescope_to_the_final_accuracy_gain_and_the_budget_is_spent() -> None:
    env = GroupSizeEnv(TINY)
    obs, rewards, info = _rollout(env, [1, 0, 1], seed=3)
    j0 = env.runs.reset_infos[0]["j0"]
    assert sum(rewards) == pytest.approx((info["final_j"] - j0) / TINY.reward_scale)
    assert info["k_schedule"] == [4, 2, 4]
    assert TINY.token_budget <= info["completion_tokens"] < TINY.token_budget + TINY.prompts_per_step * 4 * 6
    assert obs[0].shape == (len(RLVR_FEATURE_NAMES),)
    assert obs[0][0] == 1.0 and obs[-1][0] <= 0.0  # the remaining budget is observed


def test_same_seed_same_meta_episode() -> None:
    a = _rollout(GroupSizeEnv(TINY), [0, 1, 1], seed=11)
    b = _rollout(GroupSizeEnv(TINY), [0, 1, 1], seed=11)
    for x, y in zip(a[0], b[0], strict=True):
        np.testing.assert_array_equal(x, y)
    assert a[1] == b[1]
    assert a[2]["domain"] == b[2]["domain"]


def test_a_run_does_not_depend_on_the_other_runs_of_its_round() -> None:
    venv = MetaVecEnv(TINY, num_runs=2, seed=5)
    venv.reset()
    other = MetaVecEnv(TINY, num_runs=2, seed=5)
    other.reset()
    # Run 0 takes the same actions in both; run 1 does not.
    for first, second in ([0, 0], [0, 1]), ([1, 1], [1, 0]), ([0, 0], [0, 1]):
        venv.step_async(np.asarray(first))
        _, rew_a, _, infos_a = venv.step_wait()
        other.step_async(np.asarray(second))
        _, rew_b, _, infos_b = other.step_wait()
        assert infos_a[0]["feedback"] == infos_b[0]["feedback"]
        assert rew_a[0] == rew_b[0]


def test_the_config_round_trips_through_the_meta_training_config() -> None:
    cfg = MetaTrainConfig(env=TINY)
    again = from_dict(MetaTrainConfig, to_dict(cfg))
    assert again.env == TINY and isinstance(again.env, RLVRMetaConfig)
    assert from_dict(MetaTrainConfig, to_dict(MetaTrainConfig())) == MetaTrainConfig()
    assert pickle.loads(pickle.dumps(TINY)) == TINY


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="grid"):
        replace(TINY, grid=[1, 2])
    with pytest.raises(ValueError, match="g_init"):
        replace(TINY, g_init=8)
    with pytest.raises(ValueError, match="mix"):
        replace(TINY, mix=[1.0])
    with pytest.raises(ValueError, match="no inner_factory"):
        TINY.problem(inner_factory=lambda *a: None)
    with pytest.raises(ValueError, match="invalid meta-action"):
        env = GroupSizeEnv(TINY)
        env.reset(seed=0)
        env.step(2)


def test_group_size_actions() -> None:
    step = GroupSizeActions("step", (2, 4, 8))
    assert [step.apply(4, a) for a in range(3)] == [2, 4, 8]
    assert step.apply(2, 0) == 2 and step.apply(8, 2) == 8
    direct = GroupSizeActions("direct", (2, 4, 8))
    assert [direct.apply(2, a) for a in range(3)] == [2, 4, 8]
    assert direct.name(1) == "G=4" and step.name(2) == "UP"


def test_feedback_histogram_and_lengths() -> None:
    assert solve_rate_histogram([0.0, 0.25, 0.5, 0.75, 1.0]) == [0.2] * 5
    tracker = GroupSizeFeedback(max_new_tokens=8)
    tracker.add([0.0, 1.0, 0.5], responses=12, completion_tokens=48, entropy=0.5)
    tracker.add([0.0], responses=4, completion_tokens=16, entropy=1.5)
    fb = tracker.feedback(0.5, 0.3)
    assert fb["zero_variance_fraction"] == 0.75
    assert fb["response_length"] == pytest.approx(64 / 16 / 8)
    assert fb["token_entropy"] == pytest.approx((0.5 * 48 + 1.5 * 16) / 64)
    assert fb["steps"] == 2 and tracker.feedback(1.0, 0.3)["steps"] == 0


@pytest.fixture(scope="module")
def trained_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("rlvr_meta")
    agent = MetaAgentConfig(batch_size=4, learning_starts=2, exploration_fraction=0.5)
    cfg = MetaTrainConfig(env=TINY, episodes=4, runs_per_round=2, agent=agent)
    MetaTrainer(cfg, run_dir, show_progress=False).train()
    return run_dir / "meta_policy.pt"


def test_the_learned_controller_sees_what_the_meta_env_showed_the_agent(trained_policy: Path) -> None:
    controller = LearnedGroupSize(trained_policy)
    env = GroupSizeEnv(TINY)
    obs, info = env.reset(seed=2)
    feedback = {"budget_fraction": 0.0, "accuracy": info["j0"]}
    for _ in range(TINY.phases):
        np.testing.assert_array_equal(controller.observe(feedback), obs)
        action, _ = controller.policy.predict(obs, deterministic=True)
        g = controller.actions.apply(controller.g, int(action))
        controller.g = g
        obs, _, _, _, info = env.step(int(action))
        assert info["k"] == g
        feedback = info["feedback"]


def test_the_meta_arm_replays_the_meta_env_and_arms_are_paired(trained_policy: Path) -> None:
    env = GroupSizeEnv(TINY)
    _, info = env.reset(seed=4)
    domain = RunDomain(**info["domain"])
    controller = LearnedGroupSize(trained_policy)
    feedback = {"budget_fraction": 0.0, "accuracy": info["j0"]}
    schedule = []
    for _ in range(TINY.phases):
        g = controller.decide(feedback)
        action = TINY.grid.index(g)  # direct action set
        _, _, _, _, info = env.step(action)
        feedback = info["feedback"]
        schedule.append(g)
    warm = WarmStart(TINY)
    run = run_arm("meta", TINY, domain, warm, policy=str(trained_policy))
    assert run["g_schedule"] == schedule
    assert run["final_accuracy"] == info["final_j"]
    fixed = run_arm(f"fixed:{TINY.g_init}", TINY, domain, warm)
    assert fixed["curve"][0]["accuracy"] == run["curve"][0]["accuracy"]  # same warm start, same held-out set
    assert tokens_to_target(fixed, -1.0) == 0.0 and tokens_to_target(fixed, 2.0) is None
    assert arm_names([2, 4])[:2] == ["fixed:2", "fixed:4"] and arm_names([2])[-2:] == ["random", "meta"]


def test_random_arm_is_seeded() -> None:
    a, b = RandomGroupSize(TINY, seed=1), RandomGroupSize(TINY, seed=1)
    fb = {"budget_fraction": 0.0, "accuracy": 0.1}
    assert [a.decide(fb) for _ in range(6)] == [b.decide(fb) for _ in range(6)]


def test_a_rollout_length_policy_is_refused_by_the_rlvr_controller(tmp_path: Path) -> None:
    from meta.rollout_length.env import MetaEnvConfig

    cfg = MetaTrainConfig(
        env=MetaEnvConfig(budget=300, phase_length=100, inner="toy"),
        episodes=2,
        runs_per_round=2,
        agent=MetaAgentConfig(batch_size=4, learning_starts=2),
    )
    MetaTrainer(cfg, tmp_path, show_progress=False).train()
    with pytest.raises(CheckpointError, match="not an RLVR meta-policy"):
        LearnedGroupSize(tmp_path / "meta_policy.pt")


def test_worker_processes_run_the_rlvr_meta_mdp_like_one_process() -> None:
    from meta.control.parallel import ProcessMetaVecEnv

    pooled = ProcessMetaVecEnv(TINY, num_runs=2, workers=2, seed=9)
    try:
        # Each worker draws the whole round and builds its share: the runs one process makes with all of them.
        whole = MetaVecEnv(TINY, num_runs=2, seed=9)
        np.testing.assert_array_equal(pooled.reset(), whole.reset())
        assert pooled.reset_infos == whole.reset_infos
        for _ in range(TINY.phases):
            pooled.step_async(np.asarray([1, 0]))
            whole.step_async(np.asarray([1, 0]))
            obs, rewards, dones, infos = pooled.step_wait()
            expected_obs, expected_rewards, _, expected_infos = whole.step_wait()
            np.testing.assert_array_equal(obs, expected_obs)
            assert list(rewards) == list(expected_rewards)
            assert [i["feedback"] for i in infos] == [i["feedback"] for i in expected_infos]
        assert dones.all()
    finally:
        pooled.close()


def test_a_finished_meta_training_reopens_with_its_agent_for_diagnostics(trained_policy: Path) -> None:
    from meta.rollout_length.diagnostics import value_check

    trainer = MetaTrainer.resume(trained_policy.parent, show_progress=False)
    summary = trainer.train()  # finished: nothing runs, no agent is built
    assert trainer.model is None and summary["episodes_done"] == 4
    agent = trainer.load_agent()
    check = value_check(agent)
    assert check["transitions"] == 4 * TINY.phases
    exported = LearnedGroupSize(trained_policy).policy.state_dict()
    for name, tensor in agent.policy.state_dict().items():
        assert (tensor == exported[name]).all(), name
    with pytest.raises(ValueError, match="resume"):
        MetaTrainer(MetaTrainConfig(env=TINY), trained_policy.parent).load_agent()


def test_the_committed_rlvr_meta_table_is_generated_from_its_json_and_quoted() -> None:
    import json

    from script_modules import REPO, load_script

    script = load_script(REPO / "experiments" / "meta" / "rlvr_meta.py")
    results = REPO / "experiments" / "meta" / "results"
    summary = json.loads((results / "rlvr_meta.json").read_text())
    table = script.table(summary)
    assert (results / "rlvr_meta.md").read_text() == table
    assert table in (REPO / "docs" / "results" / "meta.md").read_text()
    readme = (REPO / "docs" / "results" / "meta.md").read_text()
    compact, trl = summary["compact"], summary["trl"]
    poi = compact["prob_improvement_vs_best"]
    assert f"{poi['point']:.2f} [{poi['ci'][0]:.2f}, {poi['ci'][1]:.2f}]" in readme
    m = trl["meta_minus_best_heuristic"]
    assert f"{m['point']:.3f} [{m['ci'][0]:.3f}, {m['ci'][1]:.3f}]".replace("-", "−") in readme
    assert compact["target_met"] is False and trl["target_met"] is False and "**missed**" in readme


def test_the_in_distribution_table_is_generated_from_its_json_and_quoted() -> None:
    import json

    from script_modules import REPO, load_script

    script = load_script(REPO / "experiments" / "meta" / "rlvr_meta.py")
    results = REPO / "experiments" / "meta" / "results"
    summary = json.loads((results / "rlvr_meta_in_distribution.json").read_text())
    assert summary["args"]["test_mix"] is None and summary["args"]["test_lr"] is None
    table = script.table(summary)
    assert (results / "rlvr_meta_in_distribution.md").read_text() == table
    assert table in (REPO / "docs" / "results" / "meta.md").read_text()
    vs_random = summary["compact"]["meta_minus_random_final_accuracy"]
    assert (
        f"{vs_random['point']:+.3f} [{vs_random['ci'][0]:+.3f}, {vs_random['ci'][1]:+.3f}]"
        in (REPO / "docs" / "results" / "meta.md").read_text()
    )
