r"""Speed of the learners' inner loops on this machine: the code before the float32 planner and the fused updates (A)
against the code now (B), interleaved in one process.

A is the code of commit :data:`BASELINE`, loaded from git (``git show``) as modules beside the current ones, so both
sides run on the same weights, data and thread; each pair is timed A, B, A, B, ... (the order alternating), so load
from other work hits both alike, and the ratio of medians (B / A) is the result. Parts:

* ``pets``: one PETS plan (Pendulum-v1's dimensions, CEM 100 x 3, 5 particles TS-inf, H = 15, known reward) on a
  fitted 5 x 3 x 64 ensemble: numpy float64 planner + ``predict_members`` (A) against the float32 torch planner (B);
* ``fit``: gradient steps of a model fit, per step (Dyna's 5 x 3 x 64 on Pendulum transitions; MBPO's 7 x 4 x 200 on
  HalfCheetah's dimensions), with the step count capped so only the per-step cost is compared; B with
  ``ModelConfig(fused_optimizer=True)``;
  Also ``mbpo_refits_per_1k_env_steps``: the four warm refits of 1k MBPO env steps (real HalfCheetah-v5 transitions
  under random actions, buffers of 1250 to 2000 after a shared first fit on 1000), today's fixed 1000-step floor (A)
  against the data-scaled floor ``ModelConfig(min_train_epochs=FIT_FLOOR_EPOCHS)`` (B): seconds, steps per refit and
  NMSE on unseen transitions;
* ``fit_rule``: whole default fits on small Pendulum buffers (steps taken, seconds, holdout NMSE);
* ``rollout``: one step of MBPO's imagined rollouts (7 x 4 x 200 ensemble, HalfCheetah's dimensions) from 10k start
  states, whole ensemble per row (A) against one elite per row plus a disagreement subsample (B);
* ``sac``: one SAC update (HalfCheetah's dimensions, 256 x 256, batch 256): SB3's default (A) against SB3 with fused
  Adam (``optimizer_kwargs``), :class:`mbrl.algorithms.sac_backends.FusedSAC` and, with the ``sbx`` extra installed,
  :class:`mbrl.algorithms.sbx_backend.SBXSAC` (each B, in its own interleaved pairing);
* ``meta_round``: the inner runs of one meta-training round (the learner of
  ``experiments/meta/presets/acrobot_gate_8k_converged.yaml``: Dyna-DQN on Acrobot with K-step lookahead in a learned
  5 x 3 x 64 ensemble refit to convergence, ``--round-runs`` runs in lockstep, shortened to ``--round-budget`` env
  steps in four phases with K = 0, 2, 4, 8 and a refit every half budget), per meta-episode (round seconds / runs):
  each run's world model fitted and looked ahead in on its own (A, today's default) against all runs' models as one
  batched network (B, ``DynaConfig(batched_models=True)``); whole rounds, alternating which goes first, no warm-up.
* ``meta_workers``: the same rounds through meta-training's vector env, one process with per-run models (A, the
  former default) against two worker processes with the batched model (B, the default now), per meta-episode (the
  target counts both cores).
* ``bf16``: the ``ModelConfig(precision="bf16")`` opt-in against float32 (A), both today's code: fit steps (Dyna's
  5 x 3 x 64 and MBPO's 7 x 4 x 200, fused Adam on both sides) and one PETS plan as in ``pets`` (the same weights).
  A check that the opt-in runs and what it costs here, with short settings; whether it changes learning is for
  learning curves to say.

    OMP_NUM_THREADS=1 nice -n 10 python experiments/speed.py

Writes ``results/speed.json`` (per part: the medians in ms, the ratios, the settings and the targets).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import subprocess
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mbrl.algorithms.sac_backends import FusedSAC, sbx_available
from mbrl.model_env import ModelEnv
from mbrl.models import DynamicsModel, ModelConfig
from mbrl.rewards import reward_fn
from mbrl.termination import termination_fn
from planning.mpc import CEMOptimizer, MPCPlanner, TrajectoryEvaluator
from planning.mpc.planner import planner_generator
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.threads import set_torch_threads

REPO = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
#: The code measured as A: the last commit before the float32 planner, the fused model fits and the SAC backends.
BASELINE = "a4f6780ea25c19e252217be87600c7e1a7c28302"
PARTS = ("pets", "fit", "fit_rule", "rollout", "sac", "meta_round", "meta_workers", "bf16")
#: The meta-training preset whose inner learner ``meta_round`` times.
META_PRESET = REPO / "experiments" / "meta" / "presets" / "acrobot_gate_8k_converged.yaml"
#: The targets (B / A ratio or absolute ms) each part is judged against.
TARGETS = {
    "pets": {"ratio": 0.6, "ms": 16.0},
    "sac": {"ratio": 0.7},
    "meta_round": {"speedup": 3.0},
    "meta_workers": {"speedup": 3.0},
}
DYNA_ARCH = ModelConfig(ensemble_size=5, num_elites=3, hidden_size=64, num_layers=3)
PETS_ARCH = ModelConfig(ensemble_size=5, num_elites=5, hidden_size=64, num_layers=3)
MBPO_ARCH = ModelConfig()
CHEETAH_OBS, CHEETAH_ACT = 17, 6
#: ``ModelConfig.min_train_epochs`` of the data-scaled fit floor timed in the ``fit`` part.
FIT_FLOOR_EPOCHS = 20.0


@dataclass
class Args:
    """Command line (each field a ``--flag``)."""

    parts: str = ",".join(PARTS)
    """comma-separated parts to time (pets, fit, fit_rule, rollout, sac, meta_round, meta_workers, bf16)"""
    repeats: int = 15
    """timed pairs per measurement (the medians are over these)"""
    out: Path = RESULTS / "speed.json"
    """where the JSON goes"""
    round_runs: int = 8
    """meta_round, meta_workers: inner runs per round (B; meta-training's ``runs_per_round``)"""
    round_budget: int = 1200
    """meta_round, meta_workers: env steps per inner run (four phases; the preset's runs take 8000)"""


def baseline_module(path: str) -> types.ModuleType:
    """The file ``path`` as it was at :data:`BASELINE`, loaded as a fresh module (its imports resolve to today's
    packages, which the baseline's files below use only through interfaces that did not change)."""
    text = subprocess.run(
        ["git", "show", f"{BASELINE}:{path}"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    name = "baseline_" + path.removesuffix(".py").replace("/", "_")
    module = types.ModuleType(name)
    module.__file__ = f"{BASELINE[:7]}:{path}"
    sys.modules[name] = module  # dataclasses look their module up while the file executes
    exec(compile(text, module.__file__, "exec"), module.__dict__)
    return module


def interleaved(a: Callable[[], Any], b: Callable[[], Any], repeats: int) -> dict[str, Any]:
    """Median wall ms of ``a`` and ``b`` over ``repeats`` pairs, alternating which goes first; one warm-up each.

    Also the medians of the process's CPU ms (``a_cpu_ms``, ``b_cpu_ms``, ``cpu_ratio``): on a loaded machine the
    wall time of a single-threaded call includes the time it waited for a core, its CPU time does not.
    """
    a()
    b()
    times: dict[str, list[float]] = {"a": [], "b": [], "a_cpu": [], "b_cpu": []}
    for i in range(repeats):
        for key, fn in (("a", a), ("b", b)) if i % 2 == 0 else (("b", b), ("a", a)):
            started, cpu_started = time.perf_counter(), time.process_time()
            fn()
            times[key].append((time.perf_counter() - started) * 1000.0)
            times[f"{key}_cpu"].append((time.process_time() - cpu_started) * 1000.0)
    a_ms, b_ms = float(np.median(times["a"])), float(np.median(times["b"]))
    a_cpu, b_cpu = float(np.median(times["a_cpu"])), float(np.median(times["b_cpu"]))
    return {
        "a_ms": a_ms,
        "b_ms": b_ms,
        "ratio": b_ms / a_ms,
        "a_cpu_ms": a_cpu,
        "b_cpu_ms": b_cpu,
        "cpu_ratio": b_cpu / a_cpu,
        "a_all_ms": times["a"],
        "b_all_ms": times["b"],
    }


def random_transitions(env: gym.Env, n: int, seed: int) -> tuple[np.ndarray, ...]:
    """``n`` transitions of ``env`` under uniformly random actions (obs, action, reward, next obs, terminated)."""
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    rows = []
    for _ in range(n):
        action = env.action_space.sample()
        nxt, reward, terminated, truncated, _ = env.step(action)
        rows.append((obs, action, reward, nxt, terminated))
        obs = nxt if not (terminated or truncated) else env.reset()[0]
    o, a, r, nx, t = (np.array(x) for x in zip(*rows, strict=True))
    return o, a, r.astype(np.float64), nx, t.astype(bool)


def pendulum_data(n: int, seed: int) -> tuple[np.ndarray, ...]:
    """``n`` Pendulum-v1 transitions under uniformly random actions."""
    return random_transitions(gym.make("Pendulum-v1"), n, seed)


def cheetah_like_data(n: int, seed: int) -> tuple[np.ndarray, ...]:
    """``n`` transitions of a smooth random system with HalfCheetah-v5's dimensions (the cost depends only on them)."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, CHEETAH_OBS))
    act = rng.uniform(-1, 1, size=(n, CHEETAH_ACT))
    w_o, w_a = rng.normal(size=(CHEETAH_OBS, CHEETAH_OBS)) / 5, rng.normal(size=(CHEETAH_ACT, CHEETAH_OBS)) / 3
    nxt = obs + 0.1 * np.tanh(obs @ w_o + act @ w_a)
    return obs, act, -(nxt**2).sum(axis=1), nxt, np.zeros(n, bool)


def halfcheetah_data(n: int, seed: int) -> tuple[tuple[np.ndarray, ...], str]:
    """``n`` HalfCheetah-v5 transitions under uniformly random actions, and where they come from (the smooth random
    system of :func:`cheetah_like_data` where MuJoCo is not installed)."""
    try:
        env = gym.make("HalfCheetah-v5")
    except (gym.error.Error, ImportError):
        return cheetah_like_data(n, seed), "cheetah_like_data (MuJoCo not installed)"
    return random_transitions(env, n, seed), "HalfCheetah-v5, uniformly random actions"


def unseen_nmse(model: DynamicsModel, data: tuple[np.ndarray, ...]) -> float:
    """Mean over outputs (reward, state deltas) of the mean-prediction MSE on ``data`` over the output's variance."""
    obs, act, reward, nxt, _ = data
    step = model.predict(obs, act, np.random.default_rng(0), deterministic=True)
    target = np.concatenate([reward[:, None], nxt - obs], axis=1)
    got = np.concatenate([np.asarray(step.reward)[:, None], np.asarray(step.next_obs) - obs], axis=1)
    return float((((got - target) ** 2).mean(axis=0) / target.var(axis=0)).mean())


def time_mbpo_refits(pairs: int) -> dict[str, Any]:
    """Four warm refits (one model round per 250 env steps, 1k env steps) with the fixed floor (A) and the
    data-scaled floor (B), from one shared first fit; ``pairs`` A/B pairs, alternating which goes first."""
    import copy

    data, source = halfcheetah_data(2000, seed=5)
    unseen, _ = halfcheetah_data(2000, seed=6)
    first = DynamicsModel(CHEETAH_OBS, CHEETAH_ACT, False, MBPO_ARCH, seed=0)
    first.fit(*(x[:1000] for x in data))
    configs = {"a": MBPO_ARCH, "b": dataclasses.replace(MBPO_ARCH, min_train_epochs=FIT_FLOOR_EPOCHS)}
    runs: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
    for i in range(pairs):
        for side in ("a", "b") if i % 2 == 0 else ("b", "a"):
            model = copy.deepcopy(first)
            model.cfg = configs[side]
            started, cpu_started, steps = time.perf_counter(), time.process_time(), []
            for n in (1250, 1500, 1750, 2000):
                steps.append(int(model.fit(*(x[:n] for x in data))["model/train_steps"]))
            runs[side].append(
                {
                    "seconds": time.perf_counter() - started,
                    "cpu_seconds": time.process_time() - cpu_started,
                    "train_steps": steps,
                    "unseen_nmse": unseen_nmse(model, unseen),
                }
            )
    result: dict[str, Any] = {"a_runs": runs["a"], "b_runs": runs["b"]}
    for key in ("seconds", "cpu_seconds", "unseen_nmse"):
        for side in ("a", "b"):
            result[f"{side}_{key}"] = float(np.median([r[key] for r in runs[side]]))
    result["cpu_ratio"] = result["b_cpu_seconds"] / result["a_cpu_seconds"]
    result["ratio"] = result["b_seconds"] / result["a_seconds"]
    result["settings"] = (
        f"MBPO's 7x4x200 ensemble, {source}; refits at 1250, 1500, 1750, 2000 transitions after a shared fit on "
        f"1000; A min_train_steps=1000, B also min_train_epochs={FIT_FLOOR_EPOCHS}; NMSE on 2000 unseen transitions"
    )
    return result


def twin_models(old_dynamics: types.ModuleType, cfg: ModelConfig, obs_dim: int, act_dim: int, data: Any) -> tuple:
    """A fitted model of today's code and the baseline's class holding the same weights and statistics."""
    new = DynamicsModel(obs_dim, act_dim, False, cfg, seed=0)
    new.fit(*data)
    old = old_dynamics.DynamicsModel(obs_dim, act_dim, False, cfg, seed=0)
    old.load_state_dict(new.state_dict())
    return old, new


def time_pets(old: dict[str, types.ModuleType], repeats: int) -> dict[str, Any]:
    data = pendulum_data(1000, seed=0)
    cfg = dataclasses.replace(PETS_ARCH, min_train_steps=0, max_train_steps=500)
    old_model, new_model = twin_models(old["dynamics"], cfg, 3, 1, data)
    low, high = np.array([-2.0]), np.array([2.0])
    reward, done = reward_fn("Pendulum-v1"), termination_fn("Pendulum-v1")  # PETS's own (done: `never`)
    planner_a = old["planner"].MPCPlanner(
        old["trajectories"].TrajectoryEvaluator(old_model, reward, done, "tsinf", 5),
        old["optimizers"].CEMOptimizer(low, high, old["optimizers"].CEMConfig()),
        15,
        np.random.default_rng(0),
    )
    planner_b = MPCPlanner(
        TrajectoryEvaluator(new_model, reward, done, "tsinf", 5), CEMOptimizer(low, high), 15, planner_generator(0)
    )
    states = data[0][: repeats + 1]
    result = interleaved(planning(planner_a, states), planning(planner_b, states), repeats)
    result["settings"] = "Pendulum-v1 dims, 5x5x64 ensemble (5 elites), CEM 100x3, 5 particles TS-inf, H=15"
    result["met"] = result["ratio"] <= TARGETS["pets"]["ratio"] and result["b_ms"] <= TARGETS["pets"]["ms"]
    return result


def planning(planner: Any, states: np.ndarray) -> Callable[[], None]:
    """A call that makes ``planner`` plan from the next of ``states`` (so both sides walk the same states in the same
    order; for :func:`interleaved`)."""
    seen = [0]

    def call() -> None:
        planner.plan(states[seen[0] % len(states)])
        seen[0] += 1

    return call


def fitting(model: Any, data: tuple[np.ndarray, ...]) -> Callable[[], None]:
    """A call that fits ``model`` on ``data`` once (for :func:`interleaved`)."""

    def call() -> None:
        model.fit(*data)

    return call


def time_fit(old: dict[str, types.ModuleType], repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cases = {
        "dyna_5x3x64_pendulum_1000": (DYNA_ARCH, pendulum_data(1000, seed=1), 3, 1, 100),
        "mbpo_7x4x200_cheetah_5000": (MBPO_ARCH, cheetah_like_data(5000, seed=1), CHEETAH_OBS, CHEETAH_ACT, 20),
    }
    for name, (arch, data, obs_dim, act_dim, steps) in cases.items():
        cfg = dataclasses.replace(arch, min_train_steps=steps, max_train_steps=steps, max_epochs=10**6)
        old_model = old["dynamics"].DynamicsModel(obs_dim, act_dim, False, cfg, seed=0)
        # B: the opt-in fused Adam with the decay as parameter groups (the default keeps the baseline's arithmetic).
        new_model = DynamicsModel(obs_dim, act_dim, False, dataclasses.replace(cfg, fused_optimizer=True), seed=0)
        result = interleaved(fitting(old_model, data), fitting(new_model, data), repeats)
        result["a_ms_per_step"], result["b_ms_per_step"] = result["a_ms"] / steps, result["b_ms"] / steps
        result["steps_per_fit"] = steps
        out[name] = result
    out["mbpo_refits_per_1k_env_steps"] = time_mbpo_refits(max(1, repeats // 3))
    return out


def time_bf16(repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cases = {
        "fit_dyna_5x3x64_pendulum_1000": (DYNA_ARCH, pendulum_data(1000, seed=1), 3, 1, 50),
        "fit_mbpo_7x4x200_cheetah_5000": (MBPO_ARCH, cheetah_like_data(5000, seed=1), CHEETAH_OBS, CHEETAH_ACT, 10),
    }
    for name, (arch, data, obs_dim, act_dim, steps) in cases.items():
        cfg = dataclasses.replace(
            arch, min_train_steps=steps, max_train_steps=steps, max_epochs=10**6, fused_optimizer=True
        )
        a_model = DynamicsModel(obs_dim, act_dim, False, cfg, seed=0)
        b_model = DynamicsModel(obs_dim, act_dim, False, dataclasses.replace(cfg, precision="bf16"), seed=0)
        result = interleaved(fitting(a_model, data), fitting(b_model, data), max(3, repeats // 3))
        result["a_ms_per_step"], result["b_ms_per_step"] = result["a_ms"] / steps, result["b_ms"] / steps
        result["steps_per_fit"] = steps
        out[name] = result
    data = pendulum_data(1000, seed=0)
    cfg = dataclasses.replace(PETS_ARCH, min_train_steps=0, max_train_steps=500)
    a_model = DynamicsModel(3, 1, False, cfg, seed=0)
    a_model.fit(*data)
    b_model = DynamicsModel(3, 1, False, dataclasses.replace(cfg, precision="bf16"), seed=0)
    b_model.load_state_dict(a_model.state_dict())
    low, high = np.array([-2.0]), np.array([2.0])
    reward, done = reward_fn("Pendulum-v1"), termination_fn("Pendulum-v1")
    planners = [
        MPCPlanner(TrajectoryEvaluator(m, reward, done, "tsinf", 5), CEMOptimizer(low, high), 15, planner_generator(0))
        for m in (a_model, b_model)
    ]
    states = data[0][: repeats + 1]
    out["pets_plan"] = interleaved(planning(planners[0], states), planning(planners[1], states), repeats)
    out["settings"] = "A float32, B ModelConfig(precision='bf16'); fits with fused Adam; PETS plan as the pets part"
    return out


def time_fit_rule(old: dict[str, types.ModuleType], repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in (200, 500, 1000):
        data = pendulum_data(n, seed=3)
        rows: dict[str, Any] = {}
        for side, cls in (("a", old["dynamics"].DynamicsModel), ("b", DynamicsModel)):
            started = time.perf_counter()
            metrics = cls(3, 1, False, DYNA_ARCH, seed=0).fit(*data)
            rows[side] = {
                "seconds": time.perf_counter() - started,
                "train_steps": metrics["model/train_steps"],
                "holdout_nmse": metrics["model/holdout_nmse"],
            }
        rows["seconds_ratio"] = rows["b"]["seconds"] / rows["a"]["seconds"]
        out[f"dyna_5x3x64_pendulum_{n}"] = rows
    return out


def time_rollout(old: dict[str, types.ModuleType], repeats: int) -> dict[str, Any]:
    data = cheetah_like_data(5000, seed=2)
    cfg = dataclasses.replace(MBPO_ARCH, min_train_steps=0, max_train_steps=50)
    old_model, new_model = twin_models(old["dynamics"], cfg, CHEETAH_OBS, CHEETAH_ACT, data)
    starts = np.random.default_rng(0).normal(size=(10_000, CHEETAH_OBS)).astype(np.float32)
    policy_rng = np.random.default_rng(1)

    def policy(obs: np.ndarray) -> np.ndarray:
        return policy_rng.uniform(-1, 1, size=(obs.shape[0], CHEETAH_ACT)).astype(np.float32)

    env_a = old["model_env"].ModelEnv(old_model, None, CHEETAH_OBS, (CHEETAH_ACT,))
    env_b = ModelEnv(new_model, None, CHEETAH_OBS, (CHEETAH_ACT,))
    result = interleaved(
        lambda: env_a.rollout(starts, policy, 1, np.random.default_rng(0)),
        lambda: env_b.rollout(starts, policy, 1, np.random.default_rng(0)),
        max(3, repeats // 3),
    )
    result["settings"] = "7x4x200 ensemble (5 elites), HalfCheetah dims, 10k starts, one rollout step"
    return result


def time_sac(repeats: int, updates: int = 20) -> dict[str, Any]:
    from stable_baselines3 import SAC

    env = gym.make("Pendulum-v1")  # replaced by a Box env of HalfCheetah's dimensions below
    obs_space = gym.spaces.Box(-np.inf, np.inf, (CHEETAH_OBS,), np.float32)
    act_space = gym.spaces.Box(-1.0, 1.0, (CHEETAH_ACT,), np.float32)
    env.observation_space, env.action_space = obs_space, act_space

    def build(cls: type, **policy: Any) -> Any:
        sac = cls("MlpPolicy", env, buffer_size=10_000, policy_kwargs={"net_arch": [256, 256], **policy}, seed=0)
        rng = np.random.default_rng(0)
        for _ in range(2_000):
            o, n = rng.normal(size=(1, CHEETAH_OBS)), rng.normal(size=(1, CHEETAH_OBS))
            a = rng.uniform(-1, 1, size=(1, CHEETAH_ACT))
            sac.replay_buffer.add(o, n, a, rng.normal(size=1), np.zeros(1), [{}])
        sac._logger = __import__("stable_baselines3.common.logger", fromlist=["configure"]).configure(None, [])
        return sac

    default = build(SAC)
    fused_adam = build(SAC, optimizer_kwargs={"fused": True})
    fused = build(FusedSAC)

    def run(sac: Any) -> Callable[[], None]:
        return lambda: sac.train(gradient_steps=updates, batch_size=256)

    out: dict[str, Any] = {
        "sb3_fused_adam": interleaved(run(default), run(fused_adam), repeats),
        "fused_backend": interleaved(run(default), run(fused), repeats),
    }
    if sbx_available():
        from mbrl.algorithms.sbx_backend import SBXSAC

        # The backend as MBPO uses it: a batch drawn per update, the G updates of a call in one compiled loop (the
        # warm-up call of `interleaved` pays the compilation).
        out["sbx_backend"] = interleaved(run(default), run(build(SBXSAC)), repeats)
    for result in out.values():
        result["a_ms_per_update"], result["b_ms_per_update"] = result["a_ms"] / updates, result["b_ms"] / updates
        result["a_cpu_ms_per_update"] = result["a_cpu_ms"] / updates
        result["b_cpu_ms_per_update"] = result["b_cpu_ms"] / updates
    ratios = {name: result["ratio"] for name, result in out.items() if name.endswith("_backend")}
    out["settings"] = (
        f"HalfCheetah dims (17 obs, 6 act), 256x256, batch 256, {updates} updates per timed call; torch on "
        f"{torch.get_num_threads()} thread(s), XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}"
    )
    if "sbx_backend" not in out:
        out["sbx_backend_skipped"] = "the sbx extra is not installed (pip install 'rolloutlab[sbx]')"
    out["best_backend"] = min(ratios, key=ratios.__getitem__)
    out["met"] = ratios[out["best_backend"]] <= TARGETS["sac"]["ratio"]
    return out


def time_meta_round(runs: int, budget: int, repeats: int) -> dict[str, Any]:
    from meta.control.training import MetaTrainConfig
    from meta.rollout_length.env import MetaEnvConfig
    from meta.rollout_length.inner import DynaFactory
    from rolloutlab.config import load_yaml

    env = load_yaml(MetaTrainConfig, META_PRESET).env
    assert isinstance(env, MetaEnvConfig), f"{META_PRESET} is not a rollout-length preset"
    phase = budget // 4
    dyna = {**env.dyna, "model_train_freq": budget // 2}
    schedule = [0, 2, 4, 8]

    def round_(batched: bool) -> Callable[[], None]:
        factory = DynaFactory(env.env_id, phase, env.k_cap, budget, {**dyna, "batched_models": batched})

        def call() -> None:  # the same seeds on both sides: the same runs, fitted and looked ahead in two ways
            learner = factory([lambda: gym.make(env.env_id)] * runs, seed=0)
            for k in schedule:
                learner.run_phase([k] * runs)

        return call

    settings = (
        f"{META_PRESET.name}'s learner, B = {runs} runs of {budget} steps, phases of {phase} with K = {schedule}, "
        f"refit every {budget // 2} steps; one process, one thread"
    )
    # The target counts both cores (meta-training's worker processes); this is one process on one core (the part
    # ``meta_workers`` times both cores).
    return rounds_per_meta_episode(round_(False), round_(True), repeats, runs, settings)


def time_meta_workers(runs: int, budget: int, repeats: int) -> dict[str, Any]:
    from meta.control.training import MetaTrainConfig
    from meta.rollout_length.env import MetaEnvConfig
    from rolloutlab.config import load_yaml

    env = load_yaml(MetaTrainConfig, META_PRESET).env
    assert isinstance(env, MetaEnvConfig), f"{META_PRESET} is not a rollout-length preset"
    return time_meta_rounds_on_workers(env, runs, budget, [0, 2, 4, 8], repeats)


def rounds_per_meta_episode(
    a: Callable[[], Any], b: Callable[[], Any], repeats: int, runs: int, settings: str
) -> dict[str, Any]:
    """Seconds per meta-episode (a round's seconds / ``runs``) of rounds ``a`` and ``b``: medians of ``repeats``
    pairs whose order alternates (no warm-up), the speedup A / B and whether it meets the ``meta_round`` target."""
    times: dict[str, list[float]] = {"a": [], "b": []}
    for i in range(repeats):
        for key, fn in (("a", a), ("b", b)) if i % 2 == 0 else (("b", b), ("a", a)):
            started = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - started)
    a_s, b_s = float(np.median(times["a"])), float(np.median(times["b"]))
    return {
        "a_s_per_meta_episode": a_s / runs,
        "b_s_per_meta_episode": b_s / runs,
        "speedup": a_s / b_s,
        "a_all_s": times["a"],
        "b_all_s": times["b"],
        "settings": settings,
        "met": a_s / b_s >= TARGETS["meta_round"]["speedup"],
    }


def time_meta_rounds_on_workers(env: Any, runs: int, budget: int, schedule: list[int], repeats: int) -> dict[str, Any]:
    """Whole meta-training rounds through the meta vector env (:func:`meta.control.parallel.make_meta_vec_env`): one
    process with per-run world models (A, the former default) against two worker processes with the run-axis model
    (B); per meta-episode, so that B counts both cores. The same learner and shortened round as ``meta_round``; the
    meta-actions pick K from ``schedule``, one per phase; a round's time includes building the next round's learners
    (the vector env resets when a round ends), the workers' start-up does not (meta-training pays it once)."""
    from meta.control.parallel import make_meta_vec_env

    workers = min(2, runs)
    phase = budget // len(schedule)
    shortened = dataclasses.replace(env, budget=budget, phase_length=phase, action_set="direct", k_grid=list(schedule))

    def venv(batched: bool, workers: int) -> Any:
        dyna = {**env.dyna, "model_train_freq": budget // 2, "batched_models": batched}
        return make_meta_vec_env(dataclasses.replace(shortened, dyna=dyna), runs, seed=0, workers=workers)

    def round_(vec: Any) -> Callable[[], None]:
        def call() -> None:  # round r of both sides is the same runs (same seed, same round counter)
            for action in range(len(schedule)):
                vec.step_async(np.full(runs, action))
                vec.step_wait()

        return call

    settings = (
        f"whole rounds of the meta vector env, B = {runs} runs as in meta_round: A one process with per-run world "
        f"models, B {workers} worker processes with batched_models=True; one thread per process"
    )
    one, pool = venv(False, 1), venv(True, workers)
    try:
        one.reset()
        pool.reset()
        return rounds_per_meta_episode(round_(one), round_(pool), repeats, runs, settings)
    finally:
        one.close()
        pool.close()


def main(args: Args | None = None) -> dict[str, Any]:
    """Time the chosen parts and write the JSON (parts of an earlier file not timed now are kept)."""
    if args is None:
        args = tyro.cli(Args, description=__doc__)
    set_torch_threads()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if not parts or set(parts) - set(PARTS):
        raise SystemExit(f"--parts must name some of {list(PARTS)}, got {args.parts!r}")
    old = {
        "dynamics": baseline_module("mbrl/models/dynamics.py"),
        "optimizers": baseline_module("planning/mpc/optimizers.py"),
        "trajectories": baseline_module("planning/mpc/trajectories.py"),
        "planner": baseline_module("planning/mpc/planner.py"),
        "model_env": baseline_module("mbrl/model_env.py"),
    }
    import json

    report: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {}
    report.update(
        {
            "baseline": BASELINE,
            "machine": f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
            f"{torch.get_num_threads()} thread(s)",
            "targets": TARGETS,
        }
    )
    report.setdefault("parts", {})
    timers: dict[str, Callable[[], Any]] = {
        "pets": lambda: time_pets(old, args.repeats),
        "fit": lambda: time_fit(old, max(3, args.repeats // 3)),
        "fit_rule": lambda: time_fit_rule(old, args.repeats),
        "rollout": lambda: time_rollout(old, args.repeats),
        "sac": lambda: time_sac(args.repeats),
        "meta_round": lambda: time_meta_round(args.round_runs, args.round_budget, args.repeats),
        "meta_workers": lambda: time_meta_workers(args.round_runs, args.round_budget, args.repeats),
        "bf16": lambda: time_bf16(args.repeats),
    }
    for part in parts:
        started = time.perf_counter()
        load_before = os.getloadavg()[0]
        report["parts"][part] = timers[part]()
        # How busy the machine was (1-minute load average before and after): a shared machine's timings are only
        # comparable within a part, as A/B ratios.
        report["parts"][part]["load_average"] = [load_before, os.getloadavg()[0]]
        report["parts"][part]["command"] = (
            f"OMP_NUM_THREADS=1 nice -n 10 python experiments/speed.py --parts {part} --repeats {args.repeats}"
            + (
                f" --round-runs {args.round_runs} --round-budget {args.round_budget}"
                if part in ("meta_round", "meta_workers")
                else ""
            )
        )
        print(part, f"{time.perf_counter() - started:.0f} s", flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(args.out, report)
    return report


if __name__ == "__main__":
    main()
