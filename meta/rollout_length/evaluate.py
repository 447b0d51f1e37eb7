"""The arms comparison: every rollout-length schedule, a random meta-policy, the learned meta-policy and a model-free
DQN, each trained from scratch on the perturbed test environment with the same seeds and budget.

Scoring follows Bhatia, Thomas & Zilberstein (2022, sec. 5): an arm is a rollout-length controller driving a fresh
inner Dyna-DQN run on the *perturbed* env (MountainCar gravity 0.003; Acrobot g = 12, links x1.2 / x0.8, see
:mod:`envs.perturbed`); its score is the final greedy return of that run. Run ``i`` of every arm uses the same inner
seed (network initialization, env resets, exploration streams), so arms can be compared pairwise over seeds.

Arms are controller specs, the same strings as ``rolloutlab mbrl train --controller`` (see
:func:`meta.control.make_controller`): ``fixed:0``, ``fixed:16``, ``fixed:32`` (fixed K), ``dec:32``, ``inc:32``,
``incdec:32`` (linear in the budget used), ``linear:0,5,1,32`` (MBPO's truncated-linear epoch schedule over the 10
decisions of the default budget), ``uncertainty:95,32`` (MACURA-style per-step truncation at the 95th percentile of
first-step disagreement), ``random:K_INIT,K_CAP[,SEED]`` (a meta-policy choosing UP / DOWN / NOOP uniformly: the
sanity floor; without SEED run i gets its own seed), ``learned:PATH`` (a trained meta-policy, reported as ``meta``),
plus ``dqn_zoo`` (SB3 DQN with rl-zoo hyperparameters, no model), which is a baseline, not a controller. A result is
filed under its arm's spec (:func:`arm_key`). Results written before arms were specs use the old names
(:data:`LEGACY_ARMS`: ``k16`` is ``fixed:16``, ...); the old names are refused as arms, with the spec to use instead.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from envs.perturbed import TEST_PHYSICS, env_factory, make_perturbed
from mbrl.phases import RolloutLengthDriver
from meta.control import BudgetLinear, RandomMetaPolicy, RolloutLengthController, make_controller
from meta.rollout_length.env import MetaEnvConfig
from meta.rollout_length.inner import InnerFactory
from rolloutlab.checkpoint import atomic_write_json, load_checkpoint, save_checkpoint
from rolloutlab.seeding import run_seed
from rolloutlab.statistics import mean_with_stderr

#: Checkpoint kind of :func:`run_arms` (v2: the rollout-length driver's state replaces controllers/ks/feedback).
ARMS_CHECKPOINT_KIND = "meta-arms-v2"
#: Arms whose best mean defines "the best heuristic" (everything except meta, random and dqn_zoo).
HEURISTIC_ARMS: tuple[str, ...] = (
    "fixed:0",
    "fixed:16",
    "fixed:32",
    "dec:32",
    "inc:32",
    "incdec:32",
    "linear:0,5,1,32",
    "uncertainty:95,32",
)
#: The random meta-policy (every run seeded apart by :func:`run_arms`).
RANDOM_ARM = "random:0,32"
#: The baseline arm that is not a controller (:func:`run_dqn_zoo`).
DQN_ZOO_ARM = "dqn_zoo"
#: The default comparison without a learned policy.
DEFAULT_ARMS: tuple[str, ...] = (*HEURISTIC_ARMS, RANDOM_ARM, DQN_ZOO_ARM)
#: Old arm names, still the keys of the results committed before arms were specs, and the spec each stood for there
#: (K cap 32, 10 decisions, K_INIT 0). As arms they are refused, with the spec for the run's own settings.
LEGACY_ARMS: dict[str, str] = {
    "k0": "fixed:0",
    "k16": "fixed:16",
    "k32": "fixed:32",
    "dec": "dec:32",
    "inc": "inc:32",
    "incdec": "incdec:32",
    "mbpo_linear": "linear:0,5,1,32",
    "uncertainty": "uncertainty:95,32",
    "random": "random:0,32",
}


def _legacy_spec(name: str, config: MetaEnvConfig) -> str:
    """The spec an old arm name stood for under ``config`` (its K cap, decisions and K_INIT)."""
    cap = config.k_cap
    if name in ("k0", "k16", "k32"):
        return f"fixed:{min(int(name[1:]), cap)}"
    if name in BudgetLinear.KINDS:
        return f"{name}:{cap}"
    if name == "mbpo_linear":
        return f"linear:0,{max(1, config.horizon // 2)},1,{cap}"
    if name == "uncertainty":
        return f"uncertainty:95,{cap}"
    return f"random:{config.k_init},{cap}"


def arm_controller(arm: str, config: MetaEnvConfig, seed: int) -> RolloutLengthController:
    """The controller behind an arm: ``make_controller(arm)``; a ``random`` arm without SEED is seeded with ``seed``.

    Raises:
        ValueError: an old arm name (the message gives the spec that replaced it), ``dqn_zoo`` (not a controller),
            an unknown or malformed spec, a spec of another kind, or a controller that can choose K above
            ``config.k_cap``.
    """
    arm = arm.strip()
    if arm in LEGACY_ARMS:
        raise ValueError(
            f"arm name {arm} is now {_legacy_spec(arm, config)}: arms are controller specs "
            f"(the default arms: {','.join(DEFAULT_ARMS)})"
        )
    if arm == DQN_ZOO_ARM:
        raise ValueError("dqn_zoo is a model-free baseline, not a controller: run it with run_dqn_zoo")
    controller = make_controller(arm)
    if isinstance(controller, RandomMetaPolicy) and controller.seed is None:
        controller.seed = int(seed)
    longest = controller.max_length()
    if longest is not None and longest > config.k_cap:
        raise ValueError(f"arm {arm!r} can choose K = {longest}, above the K cap {config.k_cap}")
    return controller


def arm_key(arm: str) -> str:
    """The result-file key of an arm: its spec, except ``learned:PATH``, reported as ``meta``."""
    arm = arm.strip()
    return "meta" if arm.startswith("learned:") else arm


def mean_se(values: Sequence[float]) -> dict[str, float]:
    """``{"mean", "se"}`` of the result files: :func:`rolloutlab.statistics.mean_with_stderr` (0 for one value)."""
    mean, stderr = mean_with_stderr(values)
    return {"mean": mean, "se": stderr}


def run_arms(
    arms: Sequence[str],
    config: MetaEnvConfig,
    runs: int,
    seed: int,
    physics: Mapping[str, float] | None = None,
    final_episodes: int = 10,
    inner_factory: InnerFactory | None = None,
    checkpoint: str | Path | None = None,
    on_phase: Callable[[int], None] | None = None,
    first_run: int = 0,
) -> dict[str, dict[str, Any]]:
    """Train ``runs`` inner learners under each arm's controller and score their final greedy policies.

    All arms' runs advance together in *one* batched inner learner (``len(arms) * runs`` runs), so the DQN updates of
    every run cost one batched forward/backward. Run ``i`` of every arm gets the same inner seed
    (``seed * 10_000 + i``): the same network initialization, env resets and exploration stream. Runs are numbered
    from ``first_run``, so a long test can be split into slices of runs (see :func:`merge_run_slices`).

    Args:
        arms: Arm names (see module docstring), not ``dqn_zoo`` (see :func:`run_dqn_zoo`).
        config: Budget, phase length, K cap and inner-learner settings (``randomize_physics`` is ignored).
        runs: Independent inner runs per arm.
        seed: Inner seed shared by every arm.
        physics: Env physics; default the paper's test perturbation.
        final_episodes: Greedy episodes per run for the final score.
        inner_factory: Inner-learner override (tests); default from ``config``.
        checkpoint: If given, the whole state is saved there after every phase, and a matching file is resumed from.
        on_phase: Progress hook called with the finished phase index.
        first_run: Index of the first run: the call runs runs ``first_run .. first_run + runs - 1``.

    Returns:
        ``{arm_key: {"mean", "se", "finals": [per run], "k_schedules": [[K per phase] per run], "seconds"}}``.
    """
    started = time.perf_counter()
    arms = list(arms)
    physics = dict(TEST_PHYSICS[config.env_id] if physics is None else physics)
    indices = range(first_run, first_run + runs)
    controllers = [arm_controller(arm, config, seed * 1_000 + i) for arm in arms for i in indices]
    total = len(controllers)
    run_seeds = [run_seed(seed, i) for _ in arms for i in indices]
    factory = inner_factory or config.inner_factory()
    learner: Any = factory([env_factory(config.env_id, physics) for _ in range(total)], seed, run_seeds)
    driver = RolloutLengthDriver(controllers, k_cap=config.k_cap, k_init=config.k_init)
    first_phase, seconds_before = 0, 0.0
    identity = {"arms": arms, "runs": runs, "seed": seed, "physics": physics, "budget": config.budget}
    if first_run:  # (absent when 0, so checkpoints written before slicing existed still match)
        identity["first_run"] = first_run
    if checkpoint is not None and Path(checkpoint).exists():
        saved = load_checkpoint(checkpoint, kind=ARMS_CHECKPOINT_KIND)
        if saved["config"] == identity:
            state = saved["state"]
            learner.load_state_dict(state["learner"])
            driver.load_state_dict(state["driver"])
            first_phase, seconds_before = int(state["phase"]), float(state["seconds"])
    for t in range(first_phase, config.horizon):
        driver.run_phase(learner, budget_fraction=t * config.phase_length / config.budget)
        if checkpoint is not None:
            state = {
                "phase": t + 1,
                "learner": learner.state_dict(),
                "driver": driver.state_dict(),
                "seconds": seconds_before + time.perf_counter() - started,
            }
            save_checkpoint(checkpoint, state, kind=ARMS_CHECKPOINT_KIND, config=identity)
        if on_phase is not None:
            on_phase(t)
    schedules = driver.schedules
    finals = [float(x) for x in learner.evaluate(final_episodes)]
    seconds = seconds_before + time.perf_counter() - started
    results = {}
    for a, arm in enumerate(arms):
        part = slice(a * runs, (a + 1) * runs)
        results[arm_key(arm)] = {
            **mean_se(finals[part]),
            "finals": finals[part],
            "k_schedules": schedules[part],
            "seconds": seconds,
        }
    return results


def merge_run_slices(slices: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One arm's result from its slices of runs (``run_arms(..., first_run=...)`` results, in run order).

    Finals and K schedules are concatenated, so run i keeps its place and the comparison stays paired; ``seconds``
    is summed (the compute the arm cost, whichever slices ran side by side). Slices that recorded the machine they were
    scored on (``"arithmetic"``, :func:`rolloutlab.device.cpu_arithmetic`) keep it as ``{first run: machine}``.
    """
    if not slices:
        raise ValueError("no slices to merge")
    finals = [float(x) for part in slices for x in part["finals"]]
    merged: dict[str, Any] = {**mean_se(finals), "finals": finals}
    if all("k_schedules" in part for part in slices):
        merged["k_schedules"] = [list(k) for part in slices for k in part["k_schedules"]]
    merged["seconds"] = float(sum(part["seconds"] for part in slices))
    if any("arithmetic" in part for part in slices):  # where each slice was scored, by its first run
        starts = itertools.accumulate((len(part["finals"]) for part in slices[:-1]), initial=0)
        merged["arithmetic"] = {str(s): part.get("arithmetic") for s, part in zip(starts, slices, strict=True)}
    return merged


def run_arm(arm: str, config: MetaEnvConfig, runs: int, seed: int, **kwargs: Any) -> dict[str, Any]:
    """One arm alone (see :func:`run_arms` for the arguments and the result)."""
    return run_arms([arm], config, runs, seed, **kwargs)[arm_key(arm)]


def run_dqn_zoo(
    env_id: str,
    budget: int,
    runs: int,
    seed: int,
    physics: Mapping[str, float] | None = None,
    final_episodes: int = 10,
    checkpoint: str | Path | None = None,
    on_run: Callable[[int, float], None] | None = None,
) -> dict[str, Any]:
    """SB3 DQN with rl-zoo's hyperparameters, ``budget`` env steps per run on the (perturbed) env, no model.

    Args:
        env_id: inner env id (``MountainCar-v0`` or ``Acrobot-v1``).
        budget: env steps per run.
        runs: number of runs; run i is seeded ``seed * 10_000 + i``.
        seed: base seed.
        physics: physics overrides (default: the env's test perturbation).
        final_episodes: greedy episodes behind each run's final score.
        checkpoint: JSON file keeping the finished runs' scores, rewritten atomically after every run: a rerun with
            the same settings skips them, so a kill loses only the run in progress (the runs are independent).
        on_run: called with ``(run index, final score)`` after every run (progress).

    Returns:
        ``{"mean", "se", "finals": [per run], "seconds"}``.
    """
    from stable_baselines3 import DQN
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    from mbrl.algorithms.dyna import ZOO_DQN
    from mbrl.termination import base_name

    started = time.perf_counter()
    physics = dict(TEST_PHYSICS[env_id] if physics is None else physics)
    hyper = dict(ZOO_DQN[base_name(env_id)])
    net_arch = hyper.pop("net_arch")
    settings = {"env_id": env_id, "budget": budget, "seed": seed, "physics": physics, "final_episodes": final_episodes}
    finals: list[float] = []
    seconds_before = 0.0
    if checkpoint is not None and Path(checkpoint).exists():
        saved = json.loads(Path(checkpoint).read_text())
        if saved.get("settings") == settings:
            finals = [float(x) for x in saved["finals"]][:runs]
            seconds_before = float(saved["seconds"])
    for i in range(len(finals), runs):
        inner_seed = run_seed(seed, i)
        model = DQN(
            "MlpPolicy",
            make_perturbed(env_id, physics),
            policy_kwargs={"net_arch": net_arch},
            seed=inner_seed,
            device="cpu",
            **hyper,
        )
        model.learn(budget)
        eval_env = Monitor(make_perturbed(env_id, physics))
        eval_env.reset(seed=inner_seed * 1_000 + 7)
        returns, _ = evaluate_policy(
            model, eval_env, n_eval_episodes=final_episodes, deterministic=True, return_episode_rewards=True
        )
        finals.append(float(np.mean(returns)))
        if checkpoint is not None:
            elapsed = seconds_before + time.perf_counter() - started
            atomic_write_json(checkpoint, {"settings": settings, "finals": finals, "seconds": elapsed})
        if on_run is not None:
            on_run(i, finals[-1])
    return {**mean_se(finals), "finals": finals, "seconds": seconds_before + time.perf_counter() - started}


def compare(arms: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Paired comparison of ``meta`` against the best heuristic arm (by mean) and against every heuristic.

    Returns:
        ``{"best_heuristic", "meta_minus_best_heuristic": {"mean", "se"}, "meta_minus": {arm: {"mean", "se"}}}``;
        empty if there is no ``meta`` arm or no heuristic arm.
    """
    heuristics = {name: r for name, r in arms.items() if name in HEURISTIC_ARMS}
    if "meta" not in arms or not heuristics:
        return {}
    meta = np.asarray(arms["meta"]["finals"])
    diffs = {name: mean_se(meta - np.asarray(r["finals"])) for name, r in heuristics.items()}
    best = max(heuristics, key=lambda name: heuristics[name]["mean"])
    return {"best_heuristic": best, "meta_minus_best_heuristic": diffs[best], "meta_minus": diffs}
