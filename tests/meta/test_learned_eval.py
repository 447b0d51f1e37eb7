"""LearnedController, the arms comparison, the real Dyna-DQN inner learner, and the ``rolloutlab meta`` CLI."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from meta.controllers import make_controller
from meta.rollout_length.env import MetaEnvConfig, RolloutLengthEnv
from meta.rollout_length.evaluate import (
    RandomMetaPolicy,
    arm_controller,
    compare,
    mean_se,
    run_arm,
    run_arms,
    run_dqn_zoo,
)
from meta.rollout_length.inner import EnvFn
from meta.rollout_length.learned import LearnedController
from meta.rollout_length.train import POLICY_NAME, MetaAgentConfig, MetaTrainConfig, MetaTrainer
from rolloutlab.checkpoint import CheckpointError, save_checkpoint

TINY_DYNA = {
    "net_arch": [16],
    "num_model_rollouts": 20,
    "planning_updates": 5,
    "eval_episodes": 1,
    "buffer_size": 200,
    "model": {"hidden_size": 16, "max_epochs": 2, "ensemble_size": 3, "num_elites": 2},
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, MetaTrainer]:
    run_dir = tmp_path_factory.mktemp("meta")
    env = MetaEnvConfig(budget=500, phase_length=100, inner="toy")
    cfg = MetaTrainConfig(
        env=env, agent=MetaAgentConfig(learning_starts=10, net_arch=[16]), episodes=8, runs_per_round=4
    )
    trainer = MetaTrainer(cfg, run_dir, show_progress=False)
    trainer.train()
    return run_dir, trainer


class Scripted:
    """Inner learner replaying fixed feedback rows (one per phase)."""

    def __init__(self, rows: list[dict[str, float]]) -> None:
        self.rows, self.phase = rows, 0

    def run_phase(self, ks: Sequence[int]) -> list[dict[str, float]]:
        self.phase += 1
        return [dict(self.rows[self.phase - 1]) for _ in ks]

    def evaluate(self, episodes: int, env_fns: Sequence[EnvFn] | None = None) -> np.ndarray:
        return np.zeros(1)


def test_learned_controller_reproduces_the_meta_policy_in_the_meta_env(trained: tuple[Path, MetaTrainer]) -> None:
    run_dir, trainer = trained
    rng = np.random.default_rng(0)
    rows = [
        {
            "mean_return": float(rng.uniform(-200, -50)),
            "model_return_error": float(rng.normal(0, 20)),
            "model_length_error": float(rng.normal(0, 20)),
            "model_holdout_loss": float(rng.normal()),
            "disagreement_mean": float(rng.uniform()),
            "budget_fraction": (t + 1) / 5,
        }
        for t in range(5)
    ]
    env = RolloutLengthEnv(trainer.cfg.env, inner_factory=lambda fns, seed: Scripted(rows))
    obs, _ = env.reset(seed=0)
    assert trainer.model is not None
    env_ks = []
    for _ in range(5):
        action, _ = trainer.model.predict(obs, deterministic=True)
        obs, _, _, _, info = env.step(int(action))
        env_ks.append(info["k"])

    controller = make_controller(f"learned:{run_dir}")  # a directory resolves to its meta_policy.pt
    assert isinstance(controller, LearnedController)
    ks = [controller.decide({"budget_fraction": 0.0})]
    ks += [controller.decide(row) for row in rows[:4]]
    assert ks == env_ks

    saved = controller.state_dict()
    nxt = controller.decide(rows[4])
    controller.load_state_dict(saved)
    assert controller.decide(rows[4]) == nxt
    controller.reset()
    assert controller.state_dict() == {"k": 0, "j": -200.0, "j_prev": -200.0}


def test_learned_controller_rejects_other_files(tmp_path: Path) -> None:
    save_checkpoint(tmp_path / "x.pt", {"a": 1}, kind="mbpo-run")
    with pytest.raises(CheckpointError):
        LearnedController(tmp_path / "x.pt")
    with pytest.raises(ValueError, match="needs a path"):
        make_controller("learned:")


def test_random_meta_policy_is_seeded_and_resumable() -> None:
    a, b = RandomMetaPolicy(0, 32, seed=3), RandomMetaPolicy(0, 32, seed=3)
    seq_a = [a.decide({}) for _ in range(10)]
    assert seq_a == [b.decide({}) for _ in range(10)]
    c = RandomMetaPolicy(0, 32, seed=3)
    for _ in range(4):
        c.decide({})
    d = RandomMetaPolicy(0, 32, seed=3)
    d.load_state_dict(c.state_dict())
    assert [d.decide({}) for _ in range(6)] == seq_a[4:]
    assert len(set(seq_a)) > 1


def test_arm_controllers() -> None:
    cfg = MetaEnvConfig(budget=10_000, phase_length=1_000, k_cap=32)
    assert arm_controller("k16", cfg, 0).decide({}) == 16
    assert arm_controller("inc", cfg, 0).decide({"budget_fraction": 0.5}) == 16
    assert arm_controller("dec", cfg, 0).decide({"budget_fraction": 0.25}) == 24
    assert arm_controller("incdec", cfg, 0).decide({"budget_fraction": 0.5}) == 32
    linear = arm_controller("mbpo_linear", cfg, 0)
    assert [linear.decide({"epoch": e}) for e in (0, 5, 9)] == [1, 32, 32]
    assert arm_controller("uncertainty", cfg, 0).decide({}) == 32
    with pytest.raises(ValueError, match="unknown arm"):
        arm_controller("k7", cfg, 0)


def test_compare_is_paired() -> None:
    arms = {
        "k0": {"mean": -150.0, "finals": [-100.0, -200.0]},
        "inc": {"mean": -140.0, "finals": [-130.0, -150.0]},
        "random": {"mean": -100.0, "finals": [-100.0, -100.0]},  # not a heuristic: never "best"
        "meta": {"mean": -120.0, "finals": [-110.0, -130.0]},
    }
    result = compare(arms)
    assert result["best_heuristic"] == "inc"
    assert result["meta_minus_best_heuristic"] == pytest.approx({"mean": 20.0, "se": 0.0})
    assert result["meta_minus"]["k0"] == pytest.approx(mean_se([-10.0, 70.0]))


def test_real_batched_dyna_inner_learner_drives_the_meta_env_and_the_arms() -> None:
    """Tiny budget, real mbrl BatchedDynaDQN: the meta-env and an uncertainty-truncated arm run end to end."""
    cfg = MetaEnvConfig(env_id="Acrobot-v1", budget=100, phase_length=50, dyna=TINY_DYNA, final_eval_episodes=1)
    env = RolloutLengthEnv(cfg)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    total, done = 0.0, False
    while not done:
        obs, reward, done, _, info = env.step(2)
        assert env.observation_space.contains(obs)
        total += reward
    assert info["k_schedule"] == [1, 2]
    assert total == pytest.approx(info["final_j"] - cfg.initial_return)
    result = run_arm("uncertainty", cfg, runs=2, seed=1, final_episodes=1)
    assert len(result["finals"]) == 2 and result["k_schedules"] == [[32, 32], [32, 32]]


def test_cli_train_and_eval(tmp_path: Path) -> None:
    from meta.rollout_length.cli import app

    runner = CliRunner()
    args = ["--inner", "toy", "--budget", "300", "--phase", "100"]
    result = runner.invoke(app, ["train", *args, "--episodes", "2", "--runs-per-round", "2", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert (run_dir / POLICY_NAME).is_file()
    out = tmp_path / "eval"
    arms = f"k0,inc,random,learned:{run_dir / POLICY_NAME}"
    result = runner.invoke(app, ["eval", *args, "--runs", "2", "--arms", arms, "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "eval.json").read_text())
    assert set(report["arms"]) == {"k0", "inc", "random", "meta"}
    assert (out / "table.md").is_file() and (out / "eval.png").is_file()
    result = runner.invoke(app, ["eval", *args, "--arms", "k7", "--out", str(out)])
    assert result.exit_code != 0


def test_batched_arms_share_seeds_and_resume_from_a_phase_checkpoint(tmp_path: Path) -> None:
    from meta.rollout_length.toy import ToyFactory

    cfg = MetaEnvConfig(budget=500, phase_length=100, inner="toy")
    together = run_arms(["k0", "inc", "random"], cfg, runs=3, seed=5, physics={})
    alone = run_arm("inc", cfg, runs=3, seed=5, physics={})
    assert together["inc"]["finals"] == alone["finals"]  # batching with other arms changes nothing
    assert together["k0"]["k_schedules"] == [[0] * 5] * 3

    class Crash(RuntimeError):
        pass

    def crash_after_phase(phase: int) -> None:
        if phase == 2:
            raise Crash

    ckpt = tmp_path / "arms.pt"
    factory = ToyFactory(phase_length=100, budget=500)
    with pytest.raises(Crash):
        run_arms(["inc", "random"], cfg, 3, 5, {}, 10, factory, checkpoint=ckpt, on_phase=crash_after_phase)
    resumed = run_arms(["inc", "random"], cfg, 3, 5, {}, 10, factory, checkpoint=ckpt)
    for arm in ("inc", "random"):
        assert resumed[arm]["finals"] == together[arm]["finals"]
        assert resumed[arm]["k_schedules"] == together[arm]["k_schedules"]


def test_dqn_zoo_arm_keeps_finished_runs_and_resumes_at_the_next(tmp_path: Path) -> None:
    checkpoint = tmp_path / "zoo.json"
    seen: list[int] = []
    first = run_dqn_zoo("Acrobot-v1", 300, 1, 3, None, 1, checkpoint=checkpoint)
    assert len(first["finals"]) == 1 and json.loads(checkpoint.read_text())["finals"] == first["finals"]
    # A rerun asking for more runs keeps run 0 and trains only run 1.
    both = run_dqn_zoo("Acrobot-v1", 300, 2, 3, None, 1, checkpoint=checkpoint, on_run=lambda i, _: seen.append(i))
    assert seen == [1] and both["finals"][0] == first["finals"][0] and len(both["finals"]) == 2
    assert json.loads(checkpoint.read_text())["finals"] == both["finals"]
    # Other settings (here the budget) make the saved runs stale: everything runs again.
    seen.clear()
    run_dqn_zoo("Acrobot-v1", 200, 2, 3, None, 1, checkpoint=checkpoint, on_run=lambda i, _: seen.append(i))
    assert seen == [0, 1]
