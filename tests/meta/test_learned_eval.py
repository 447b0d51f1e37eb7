"""LearnedController, the arms comparison, the real Dyna-DQN inner learner, and the ``rolloutlab meta`` CLI."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from meta.control import Fixed, RandomMetaPolicy, TruncatedLinear, UncertaintyTruncation, make_controller
from meta.control.training import POLICY_NAME, MetaAgentConfig, MetaTrainConfig, MetaTrainer
from meta.rollout_length.env import MetaEnvConfig, RolloutLengthEnv
from meta.rollout_length.evaluate import (
    DEFAULT_ARMS,
    HEURISTIC_ARMS,
    LEGACY_ARMS,
    arm_controller,
    arm_key,
    compare,
    mean_se,
    run_arm,
    run_arms,
    run_dqn_zoo,
)
from meta.rollout_length.inner import EnvFn
from meta.rollout_length.learned import LearnedController
from rolloutlab.checkpoint import CheckpointError, save_checkpoint

TINY_DYNA = {
    "net_arch": [16],
    "num_model_rollouts": 20,
    "model_train_freq": 50,
    "rollout_freq": 50,
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
    env = RolloutLengthEnv(trainer.cfg.env, inner_factory=lambda fns, seed, **_: Scripted(rows))
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
    assert controller.state_dict() == {"k": 1, "j": -200.0, "j_prev": -200.0}  # K_INIT 1 by default


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


def test_arm_controllers_are_controller_specs() -> None:
    cfg = MetaEnvConfig(budget=10_000, phase_length=1_000, k_cap=32)
    fixed = arm_controller("fixed:16", cfg, 0)
    assert isinstance(fixed, Fixed) and fixed.decide({}) == 16
    assert arm_controller("inc:32", cfg, 0).decide({"budget_fraction": 0.5}) == 16
    assert arm_controller("dec:32", cfg, 0).decide({"budget_fraction": 0.25}) == 24
    assert arm_controller("incdec:32", cfg, 0).decide({"budget_fraction": 0.5}) == 32
    linear = arm_controller("linear:0,5,1,32", cfg, 0)
    assert isinstance(linear, TruncatedLinear) and [linear.decide({"epoch": e}) for e in (0, 5, 9)] == [1, 32, 32]
    uncertainty = arm_controller("uncertainty:95,32", cfg, 0)
    assert isinstance(uncertainty, UncertaintyTruncation) and uncertainty.decide({}) == 32
    # The random arm gets the run's seed unless its spec has one.
    seeded = arm_controller("random:0,32", cfg, 1_003)
    assert isinstance(seeded, RandomMetaPolicy) and seeded.seed == 1_003
    explicit = arm_controller("random:0,32,9", cfg, 1_003)
    assert isinstance(explicit, RandomMetaPolicy) and explicit.seed == 9
    for arm in DEFAULT_ARMS:
        if arm != "dqn_zoo":
            assert 0 <= (arm_controller(arm, cfg, 0).max_length() or 0) <= 32
    assert [arm_key(a) for a in HEURISTIC_ARMS] == list(HEURISTIC_ARMS) and arm_key("learned:x/y.pt") == "meta"
    with pytest.raises(ValueError, match="unknown controller 'k7'"):
        arm_controller("k7", cfg, 0)
    with pytest.raises(ValueError, match="not a controller"):
        arm_controller("dqn_zoo", cfg, 0)
    with pytest.raises(ValueError, match="above the K cap 16"):
        arm_controller("fixed:32", MetaEnvConfig(k_cap=16), 0)


def test_old_arm_names_are_refused_with_their_new_spec() -> None:
    cfg = MetaEnvConfig(budget=10_000, phase_length=1_000, k_cap=32, k_init=0)  # round one's K_INIT
    for old, spec in LEGACY_ARMS.items():
        with pytest.raises(ValueError, match=f"{old} is now {spec}:"):
            arm_controller(old, cfg, 0)
        make_controller(spec)  # the spec it stood for in the committed results
    # The hint follows the run's own settings (the old arms took the K cap and the horizon from the config).
    small = MetaEnvConfig(budget=6_000, phase_length=1_000, k_cap=16, k_init=2)
    hints = (("k32", "fixed:16"), ("inc", "inc:16"), ("mbpo_linear", "linear:0,3,1,16"), ("random", "random:2,16"))
    for old, spec in hints:
        with pytest.raises(ValueError, match=f"{old} is now {spec}:"):
            arm_controller(old, small, 0)
    with pytest.raises(ValueError, match="k16 is now fixed:16"):
        run_arms(["inc:32", "k16"], MetaEnvConfig(budget=500, phase_length=100, inner="toy"), runs=1, seed=0)


def test_cli_default_arms_are_the_default_arms() -> None:
    from meta.control import split_specs
    from meta.rollout_length import cli

    assert split_specs(cli._DEFAULT_ARMS) == [a for a in DEFAULT_ARMS if a != "dqn_zoo"]


def test_committed_results_keep_loading_under_their_old_keys() -> None:
    root = Path(__file__).resolve().parents[2] / "experiments" / "meta" / "results"
    for path in (root / "summary_small.json", root / "scaled" / "summary.json"):
        summary = json.loads(path.read_text())
        for env_id, entry in summary["envs"].items():
            arms = entry["arms"]
            assert set(LEGACY_ARMS) <= set(arms), (path, env_id)
            for old, spec in LEGACY_ARMS.items():  # every old key names a spec that still builds
                assert (make_controller(spec).max_length() or 0) <= summary["protocol"]["k_cap"]
                assert len(arms[old]["finals"]) == len(arms["meta"]["finals"])
            # compare() over them, keyed by the specs they stood for, reproduces the stored comparison.
            renamed = {LEGACY_ARMS.get(name, name): r for name, r in arms.items()}
            again = compare(renamed)
            assert LEGACY_ARMS[entry["best_heuristic"]] == again["best_heuristic"]
            assert again["meta_minus_best_heuristic"] == pytest.approx(entry["meta_minus_best_heuristic"])


def test_compare_is_paired() -> None:
    arms = {
        "fixed:0": {"mean": -150.0, "finals": [-100.0, -200.0]},
        "inc:32": {"mean": -140.0, "finals": [-130.0, -150.0]},
        "random:0,32": {"mean": -100.0, "finals": [-100.0, -100.0]},  # not a heuristic: never "best"
        "meta": {"mean": -120.0, "finals": [-110.0, -130.0]},
    }
    result = compare(arms)
    assert result["best_heuristic"] == "inc:32"
    assert result["meta_minus_best_heuristic"] == pytest.approx({"mean": 20.0, "se": 0.0})
    assert result["meta_minus"]["fixed:0"] == pytest.approx(mean_se([-10.0, 70.0]))


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
    assert info["k_schedule"] == [2, 3]  # UP twice from K_INIT = 1
    assert total == pytest.approx((info["final_j"] - cfg.initial_return) / 500)  # Acrobot's step limit
    result = run_arm("uncertainty:95,32", cfg, runs=2, seed=1, final_episodes=1)
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
    arms = f"fixed:0,inc:32,linear:0,1,1,4,random:0,32,learned:{run_dir / POLICY_NAME}"
    result = runner.invoke(app, ["eval", *args, "--runs", "2", "--arms", arms, "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "eval.json").read_text())
    assert set(report["arms"]) == {"fixed:0", "inc:32", "linear:0,1,1,4", "random:0,32", "meta"}
    assert report["arms"]["linear:0,1,1,4"]["k_schedules"] == [[1, 4, 4]] * 2
    assert report["best_heuristic"] in {"fixed:0", "inc:32", "linear:0,1,1,4"}
    assert (out / "table.md").is_file() and (out / "eval.png").is_file()
    import meta.rlvr.allocators  # noqa: F401 - declares the allocator spec kind, as `rolloutlab` (mounting rlvr) does

    for bad, message in (
        ("k7", "unknown controller 'k7'"),
        ("k0,inc:32", "k0 is now fixed:0"),
        ("fixed:0,mbpo_linear", "mbpo_linear is now linear:0,1,1,32"),
        ("uniform:8", "RLVR allocator"),
        ("fixed:33", "above the K cap 32"),
        ("fixed:0,fixed:0", "same result key"),
    ):
        result = runner.invoke(app, ["eval", *args, "--arms", bad, "--out", str(out)])
        text = " ".join(result.output.replace("│", " ").split())  # the error box wraps long messages
        assert result.exit_code != 0 and message in text, (bad, result.output)

    # The test physics from the command line, recorded in the report; a bad one refused before any run.
    mine = tmp_path / "mine"
    result = runner.invoke(
        app, ["eval", *args, "--runs", "1", "--arms", "fixed:0", "--physics", "gravity=0.0028", "--out", str(mine)]
    )
    assert result.exit_code == 0, result.output
    assert json.loads((mine / "eval.json").read_text())["physics"] == {"gravity": 0.0028}
    result = runner.invoke(app, ["eval", *args, "--arms", "fixed:0", "--physics", "mass=2", "--out", str(mine)])
    assert result.exit_code == 2 and "unknown physics parameter 'mass'" in result.output

    # The direct action set from the command line.
    direct = tmp_path / "direct"
    result = runner.invoke(
        app,
        [
            "train",
            *args,
            "--episodes",
            "2",
            "--runs-per-round",
            "2",
            "--out",
            str(direct),
            "--action-set",
            "direct",
            "--k-grid",
            "0,4,8",
        ],
    )
    assert result.exit_code == 0, result.output
    (direct_run,) = [p for p in direct.iterdir() if p.is_dir()]
    controller = make_controller(f"learned:{direct_run}")
    assert controller.decide({"budget_fraction": 0.0}) in (0, 4, 8)
    result = runner.invoke(app, ["train", *args, "--action-set", "direct", "--k-grid", "0,64", "--out", str(direct)])
    assert result.exit_code == 2 and "within [0, k_cap=32]" in " ".join(result.output.replace("│", " ").split())


def test_batched_arms_share_seeds_and_resume_from_a_phase_checkpoint(tmp_path: Path) -> None:
    from meta.rollout_length.toy import ToyFactory

    cfg = MetaEnvConfig(budget=500, phase_length=100, inner="toy")
    together = run_arms(["fixed:0", "inc:32", "random:0,32"], cfg, runs=3, seed=5, physics={})
    alone = run_arm("inc:32", cfg, runs=3, seed=5, physics={})
    assert together["inc:32"]["finals"] == alone["finals"]  # batching with other arms changes nothing
    assert together["fixed:0"]["k_schedules"] == [[0] * 5] * 3
    # Run i of the random arm draws from its own seed (seed * 1000 + i): the runs' schedules differ.
    assert len({tuple(k) for k in together["random:0,32"]["k_schedules"]}) > 1

    class Crash(RuntimeError):
        pass

    def crash_after_phase(phase: int) -> None:
        if phase == 2:
            raise Crash

    ckpt = tmp_path / "arms.pt"
    factory = ToyFactory(phase_length=100, budget=500)
    with pytest.raises(Crash):
        run_arms(["inc:32", "random:0,32"], cfg, 3, 5, {}, 10, factory, checkpoint=ckpt, on_phase=crash_after_phase)
    resumed = run_arms(["inc:32", "random:0,32"], cfg, 3, 5, {}, 10, factory, checkpoint=ckpt)
    for arm in ("inc:32", "random:0,32"):
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
