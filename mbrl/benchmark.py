"""The mbrl pillar's benchmarks: MBPO against SB3 SAC, the summary of its results, the Dyna-DQN gate, the quick bench.

**Sample efficiency** (the issue "The model must pay off", ``experiments/mbrl/sample_efficiency.py``). Arms are named
by data, and an MBPO arm carries its rollout-length controller spec:

* ``mbpo:SPEC``: :class:`~mbrl.algorithms.mbpo.MBPO` with the controller ``SPEC`` (``mbpo:fixed:1``,
  ``mbpo:linear:20,100,1,15``) and ``G`` SAC updates per env step on mixed real/model batches;
* ``sac_same_utd``: SB3 ``SAC`` with ``gradient_steps=G`` (the "no model, same number of updates" control);
* ``sac_utd1``: SB3 ``SAC`` with one update per env step.

Every arm shares the seeds, the budget, the SAC networks, learning rate and batch size, the uniform-random warm-up
and the evaluation protocol: every ``eval_every`` env steps the deterministic policy plays ``eval_episodes`` episodes
whose seeds are fixed. The MBPO arms take :class:`~mbrl.algorithms.mbpo.MBPOConfig`'s defaults for everything the
settings do not name (model data scale, model fitting).

Two summaries:

* *steps to threshold* (Pendulum, InvertedPendulum): the first evaluation step whose mean return reaches the
  threshold, a never-reached run counting as the budget. "MBPO" is the MBPO arm with the lowest median steps; the
  targets are ``ratio_sac_utd1_over_mbpo >= 5`` (MBPO's paper reports 5-10x) and ``ratio_best_sac_over_mbpo >= 1``,
  each a ratio of medians with a percentile-bootstrap interval over seeds (:func:`summarize_threshold`);
* *final return* (HalfCheetah): the paired (by seed) difference of final evaluation returns, MBPO minus
  ``sac_same_utd``, with a paired-bootstrap interval (:func:`summarize_final`).

**The results summary** (``experiments/mbrl/summary.py``): :func:`build_summary` recomputes every entry of
``results/summary.json`` from the per-seed records in the benchmark files, round one's apart; :func:`markdown` is the
table the docs quote.

**The gate** (``experiments/mbrl/gate.py``, ``gate_diagnosis.py``): do imagined rollouts help Dyna-DQN at all? Paired
inner runs of every arm (:func:`parse_gate_arm`) train in batched Dyna-DQN learners, in saved slices
(:func:`run_gate`); :func:`summarize_gate` gives the rliable aggregates and the verdict, :func:`gate_table` the table.

:func:`quick_bench` is the pillar's line in ``rolloutlab bench``: the sample-efficiency comparison at a small size.
"""

from __future__ import annotations

import dataclasses
import json
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import numpy as np

from meta.control import make_controller, split_specs
from rolloutlab.bench import BenchLine
from rolloutlab.checkpoint import atomic_write_json
from rolloutlab.statistics import bootstrap_interval, interval_estimates, iqm, mean_interval, paired_difference

if TYPE_CHECKING:
    from mbrl.algorithms.dyna import DynaConfig
    from mbrl.algorithms.mbpo import MBPOConfig

#: Stored in every run record and results file of this protocol; files without it are round one.
PROTOCOL = "model-must-pay-off"
#: Issue 4's thresholds: the mean evaluation return that counts as solved (the MBPO and PETS benchmarks share them).
THRESHOLDS = {"Pendulum-v1": -200.0, "InvertedPendulum-v5": 950.0}
MBPO_PREFIX = "mbpo:"
SAC_SAME_UTD = "sac_same_utd"
SAC_UTD1 = "sac_utd1"
SAC_ARMS = (SAC_SAME_UTD, SAC_UTD1)
DEFAULT_ARMS = ("mbpo:fixed:1", "mbpo:fixed:3", SAC_SAME_UTD, SAC_UTD1)
#: Steps-to-threshold targets: ``met`` when the ratio of medians is at least this.
RATIO_TARGETS = {"ratio_sac_utd1_over_mbpo": 5.0, "ratio_best_sac_over_mbpo": 1.0}
#: Bootstrap resamples behind the rliable intervals and paired standard errors of the summaries (summary.json, the
#: gate); the committed summaries were made with this many.
BOOTSTRAP_REPS = 2_000
#: Round one's SAC arm names in this protocol's vocabulary (its ``mbpo`` arm becomes ``mbpo:<its controller>``).
ROUND_ONE_SAC_NAMES = {"sac_same_utd": SAC_SAME_UTD, "sac_default": SAC_UTD1}


def is_mbpo(arm: str) -> bool:
    """Whether ``arm`` names an MBPO arm (``mbpo:SPEC``)."""
    return arm.startswith(MBPO_PREFIX)


def mbpo_controller(arm: str) -> str:
    """The rollout-length controller spec an MBPO arm carries (``"mbpo:fixed:3"`` -> ``"fixed:3"``)."""
    if not is_mbpo(arm):
        raise ValueError(f"{arm!r} is not an MBPO arm (mbpo:SPEC)")
    return arm[len(MBPO_PREFIX) :]


def parse_arm(name: str) -> str:
    """Check one arm name and return it stripped.

    Raises:
        ValueError: neither ``sac_same_utd``, ``sac_utd1`` nor ``mbpo:SPEC`` with a spec
            :func:`meta.control.make_controller` accepts (round one's bare ``mbpo`` and ``sac_default`` included).
    """
    name = name.strip()
    if name in SAC_ARMS:
        return name
    if is_mbpo(name):
        make_controller(mbpo_controller(name))  # raises on an unknown or malformed spec
        return name
    hint = ""
    if name in ("mbpo", "sac_default"):
        hint = " (round one's names: mbpo is now mbpo:fixed:1, sac_default is sac_utd1)"
    raise ValueError(f"unknown arm {name!r}; arms are mbpo:SPEC, {SAC_SAME_UTD}, {SAC_UTD1}{hint}")


def parse_arms(text: str) -> list[str]:
    """Parse a comma-separated arm list; a controller spec's own commas stay with it.

    ``"mbpo:linear:20,100,1,15,sac_utd1"`` gives ``["mbpo:linear:20,100,1,15", "sac_utd1"]``.

    Raises:
        ValueError: an unknown arm, a repeated arm or an empty list.
    """
    arms = [parse_arm(a) for a in split_specs(text)]
    if not arms:
        raise ValueError("no arms given")
    repeated = sorted({a for a in arms if arms.count(a) > 1})
    if repeated:
        raise ValueError(f"arms given twice: {repeated}")
    return arms


def arm_order(arms: Sequence[str]) -> list[str]:
    """MBPO arms first (in the given order), then ``sac_same_utd`` and ``sac_utd1``."""
    return [a for a in arms if is_mbpo(a)] + [a for a in SAC_ARMS if a in arms]


#: SAC hidden widths in every arm unless the settings name others.
DEFAULT_NET_ARCH = (64, 64)


@dataclass
class ArmSettings:
    """Settings shared by every arm of one comparison (the protocol's defaults).

    Attributes:
        env_id: Gymnasium id.
        budget: Env steps per run.
        updates_per_step: ``G`` for the MBPO arms and ``sac_same_utd`` (MBPOConfig's default).
        eval_every: Env steps between evaluations (the resolution of steps-to-threshold).
        eval_episodes: Episodes per evaluation.
        initial_random_steps: Uniform-random warm-up steps (SAC's ``learning_starts``) in every arm.
        learning_rate: SAC learning rate in every arm.
        batch_size: SAC batch size in every arm.
        net_arch: SAC hidden widths in every arm.
        mbpo: :class:`~mbrl.algorithms.mbpo.MBPOConfig` fields to override for the MBPO arms (plain data; a
            ``"model"`` mapping overrides single :class:`~mbrl.models.ModelConfig` fields). Empty: the library's
            defaults. The controller comes from the arm name, never from here.
        stop_at: End a run at its first evaluation whose mean return reaches this (steps-to-threshold mode); ``None``
            runs the whole budget. Runs are seeded, so a stopped run's evaluations are the first ones of the full
            run and its steps to threshold are the same; only the cost of running past the threshold is saved.
    """

    env_id: str
    budget: int
    updates_per_step: int = 10
    eval_every: int = 100
    eval_episodes: int = 5
    initial_random_steps: int = 200
    learning_rate: float = 1e-3
    batch_size: int = 128
    net_arch: list[int] = field(default_factory=lambda: list(DEFAULT_NET_ARCH))
    mbpo: dict[str, Any] = field(default_factory=dict)
    stop_at: float | None = None


def arm_settings(settings: ArmSettings, arm: str) -> dict[str, Any]:
    """The settings an arm's result depends on, as JSON data (the SAC arms do not depend on ``mbpo``).

    Stored in every run record; a finished run is reused only under the same value (:func:`collect_runs`).
    """
    data = dataclasses.asdict(settings)
    # Stopping at the threshold does not change a run's evaluations up to it (see ArmSettings.stop_at), so full-budget
    # and stopped runs of the same settings are the same runs as far as steps to threshold go.
    data.pop("stop_at")
    if not is_mbpo(arm):
        data.pop("mbpo")
    return dict(json.loads(json.dumps(data)))


def mbpo_config(settings: ArmSettings, arm: str, seed: int) -> MBPOConfig:
    """The :class:`~mbrl.algorithms.mbpo.MBPOConfig` of one MBPO arm run.

    MBPOConfig's defaults, with the shared settings, the arm's controller and ``settings.mbpo`` laid over them; the
    ``sac`` and ``model`` sub-configs are merged field by field, so overriding one model field keeps the others at
    MBPOConfig's defaults.
    """
    from mbrl.algorithms.mbpo import MBPOConfig, SACConfig
    from mbrl.models import ModelConfig
    from rolloutlab.config import from_dict, to_dict

    extra = dict(settings.mbpo)
    if "controller" in extra:
        raise ValueError("the MBPO controller comes from the arm name (mbpo:SPEC), not from ArmSettings.mbpo")
    defaults = MBPOConfig()
    model = from_dict(ModelConfig, {**to_dict(defaults.model), **extra.pop("model", {})})
    sac = from_dict(
        SACConfig,
        {
            **to_dict(defaults.sac),
            "learning_rate": settings.learning_rate,
            "batch_size": settings.batch_size,
            "net_arch": list(settings.net_arch),
        },
    )
    return from_dict(
        MBPOConfig,
        {
            "env_id": settings.env_id,
            "total_steps": settings.budget,
            "seed": seed,
            "controller": mbpo_controller(arm),
            "updates_per_step": settings.updates_per_step,
            "eval_every": settings.eval_every,
            "eval_episodes": settings.eval_episodes,
            "initial_random_steps": settings.initial_random_steps,
            "checkpoint_every": 0,
            "log_every": max(settings.budget // 4, 1),
            **extra,
            "sac": sac,
            "model": model,
        },
    )


@dataclass(frozen=True)
class ArmStorage:
    """Where an arm run keeps its state while it runs, so that a run of hours survives a kill and a new machine.

    Attributes:
        work_dir: Parent of the runs' folders (``<arm, %-quoted>__<seed>/``, ignored by git): logs, the whole-run
            checkpoint every ``checkpoint_every`` env steps, and the run's accumulated wall seconds. A run whose
            folder holds a checkpoint continues from it exactly (same machine and thread count).
        carry_dir: Optional folder (meant to be committed) where each checkpoint is also written without the model
            buffer (:func:`save_carry`, a few MB instead of tens). A run with no local checkpoint but a carry file
            continues from that, refilling the model buffer from the restored model (not bit-identical; the record's
            ``resumed`` says so).
        checkpoint_every: Env steps between checkpoints.
    """

    work_dir: Path
    carry_dir: Path | None = None
    checkpoint_every: int = 1_000


def run_arm(arm: str, settings: ArmSettings, seed: int, storage: ArmStorage | None = None) -> dict[str, Any]:
    """Run one arm for one seed.

    Args:
        arm: The arm (:func:`parse_arm`).
        settings: The shared settings.
        seed: The seed.
        storage: Checkpoint and continue the run (:class:`ArmStorage`); ``None``: the run is not saved while it
            runs (every run of the threshold benchmarks takes minutes). An MBPO run continues exactly from a local
            checkpoint; a SAC run (networks, optimizers, replay buffer, random streams, evaluations) continues with a
            new episode, so not bit-identically.

    Returns:
        The run record: ``arm``, ``seed``, ``protocol``, ``settings`` (:func:`arm_settings`), ``eval``
        (``[[step, mean_return], ...]``), ``final_step`` and ``final_return`` (the last evaluation), wall
        ``seconds`` (evaluations included, summed over the sessions of a continued run), ``eval_seconds``,
        ``seconds_per_1k_steps``; for MBPO also ``imagined_transitions``, ``imagined_per_second``,
        ``rollout_seconds``, ``nan_restores``, ``resumed`` (``[[env_step, "checkpoint" | "carry"], ...]``) and the
        resolved ``mbpo_config``.
    """
    from rolloutlab.seeding import seed_everything

    parse_arm(arm)
    seed_everything(seed)
    started = time.perf_counter()
    if is_mbpo(arm):
        out = _run_mbpo(settings, arm, seed, storage)
    else:
        out = _run_sac(settings, seed, settings.updates_per_step if arm == SAC_SAME_UTD else 1, arm, storage)
    seconds = time.perf_counter() - started + float(out.pop("earlier_seconds", 0.0))
    last = out["eval"][-1] if out["eval"] else [None, None]
    steps_done = int(out.pop("steps_done"))
    return {
        "arm": arm,
        "seed": seed,
        "protocol": PROTOCOL,
        "settings": arm_settings(settings, arm),
        **out,
        "final_step": last[0],
        "final_return": last[1],
        "seconds": seconds,
        "steps_done": steps_done,
        "stopped_at_threshold": steps_done < settings.budget,
        "seconds_per_1k_steps": 1000.0 * seconds / max(steps_done, 1),
    }


def run_folder_name(arm: str, seed: int) -> str:
    """``<arm, %-quoted>__<seed>`` (no ``:`` in file names), the stem of a run's folder and carry file."""
    return f"{quote(arm, safe='')}__{seed}"


def save_carry(path: Path, state: Mapping[str, Any], kind: str, config: Mapping[str, Any]) -> Path:
    """Atomically write an MBPO checkpoint without its model buffer's data (see :class:`ArmStorage`).

    The epochs of the dropped chunks stay, as ``model_buffer["dropped_epochs"]``, so that the continuation refills
    one rollout round per dropped chunk (:meth:`~mbrl.algorithms.mbpo.MBPO.refill_model_buffer`).
    """
    from rolloutlab.checkpoint import save_checkpoint

    buffer = dict(state["model_buffer"])
    buffer["dropped_epochs"] = [int(chunk["epoch"]) for chunk in buffer["chunks"]]
    buffer["chunks"] = []
    return save_checkpoint(path, {**state, "model_buffer": buffer}, kind=kind, config=config)


def _run_mbpo(settings: ArmSettings, arm: str, seed: int, storage: ArmStorage | None = None) -> dict[str, Any]:
    import tempfile

    from mbrl.algorithms.base import CHECKPOINT_NAME
    from mbrl.algorithms.mbpo import MBPO
    from rolloutlab.checkpoint import load_checkpoint
    from rolloutlab.config import to_dict

    cfg = mbpo_config(settings, arm, seed)
    if storage is not None:
        cfg = dataclasses.replace(cfg, checkpoint_every=storage.checkpoint_every)
    config = to_dict(cfg)

    class _ArmMBPO(MBPO):
        # Evaluation time is kept apart so that the cost of learning can be told from the cost of measuring it.
        eval_seconds = 0.0
        earlier_seconds = 0.0  # wall seconds of the sessions before a continuation
        session_started = 0.0

        def evaluate(self) -> float:
            t0 = time.perf_counter()
            try:
                value = super().evaluate()
            finally:
                self.eval_seconds += time.perf_counter() - t0
            if settings.stop_at is not None and value >= settings.stop_at:
                self.stop_requested = True
            return value

        def save(self, path: str | Path | None = None) -> Path:
            target = Path(path) if path is not None else self.run_dir / CHECKPOINT_NAME
            if storage is None:
                # The run folder is temporary: a checkpoint would be deleted unread, and writing it (the model
                # buffer holds tens of MB on HalfCheetah) would be charged to the arm's wall seconds.
                return target
            state = self.state_dict()
            state["arm_timing"] = {
                "seconds": self.earlier_seconds + time.perf_counter() - self.session_started,
                "eval_seconds": self.eval_seconds,
            }
            state["arm_resumed"] = [list(r) for r in resumed]
            from rolloutlab.checkpoint import save_checkpoint

            save_checkpoint(target, state, kind=self.checkpoint_kind, config=config)
            if storage.carry_dir is not None:
                save_carry(storage.carry_dir / f"{run_folder_name(arm, seed)}.pt", state, self.checkpoint_kind, config)
            return target

    def continue_from(path: Path) -> dict[str, Any]:
        envelope = load_checkpoint(path, kind=MBPO.checkpoint_kind)
        if envelope["config"] != config:
            raise ValueError(f"{path} was saved by a run with another MBPOConfig; delete it to start this run afresh")
        return dict(envelope["state"])

    resumed: list[tuple[int, str]] = []
    with tempfile.TemporaryDirectory(prefix="mbpo-arm-") as tmp:
        run_dir = Path(tmp) if storage is None else storage.work_dir / run_folder_name(arm, seed)
        local = run_dir / CHECKPOINT_NAME
        carry = None if storage is None or storage.carry_dir is None else storage.carry_dir / f"{local.parent.name}.pt"
        state = None
        if storage is not None and local.exists():
            state, source = continue_from(local), "checkpoint"
        elif carry is not None and carry.exists():
            state, source = continue_from(carry), "carry"
        run = _ArmMBPO(cfg, run_dir=run_dir, log_formats=("csv",))
        if state is not None:
            run.load_state_dict(state)
            resumed.extend((int(s), str(k)) for s, k in state.get("arm_resumed", []))
            resumed.append((run.env_steps, source))
            run.earlier_seconds = float(state["arm_timing"]["seconds"])
            run.eval_seconds = float(state["arm_timing"]["eval_seconds"])
            dropped = state["model_buffer"].get("dropped_epochs")
            if dropped:
                added = run.refill_model_buffer(dropped)
                run.logger.log(f"continued from {carry} at env step {run.env_steps}; refilled {added} model samples")
        run.session_started = time.perf_counter()
        run.learn()
    return {
        "eval": [[s, r] for s, r in run.eval_history],
        "eval_seconds": run.eval_seconds,
        "imagined_transitions": run.imagined_total,
        "imagined_per_second": run.imagined_total / run.rollout_seconds if run.rollout_seconds > 0 else None,
        "rollout_seconds": run.rollout_seconds,
        "nan_restores": run.nan_restores,
        "mbpo_config": to_dict(mbpo_config(settings, arm, seed)),
        "resumed": [list(r) for r in resumed],
        "steps_done": run.env_steps,
        "earlier_seconds": run.earlier_seconds,
    }


def _run_sac(
    settings: ArmSettings, seed: int, gradient_steps: int, arm: str = SAC_SAME_UTD, storage: ArmStorage | None = None
) -> dict[str, Any]:
    import torch
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
    from stable_baselines3.common.vec_env import DummyVecEnv

    from mbrl.algorithms.base import make_env
    from rolloutlab.checkpoint import load_checkpoint, save_checkpoint
    from rolloutlab.run_state import capture_rng, capture_sac, restore_rng, restore_sac

    eval_env = DummyVecEnv([lambda: Monitor(make_env(settings.env_id))])
    history: list[list[float]] = []
    timing = {"eval_seconds": 0.0, "earlier_seconds": 0.0}
    resumed: list[list[Any]] = []
    config = {"arm": arm, "seed": seed, "gradient_steps": gradient_steps, "settings": arm_settings(settings, arm)}
    stem = run_folder_name(arm, seed)
    paths = [] if storage is None else [storage.work_dir / stem / "sac_checkpoint.pt"]
    if storage is not None and storage.carry_dir is not None:
        paths.append(storage.carry_dir / f"{stem}.pt")
    started = time.perf_counter()

    def replay_state(model: OffPolicyAlgorithm) -> dict[str, Any]:
        buffer = model.replay_buffer
        assert buffer is not None
        size = buffer.buffer_size if buffer.full else buffer.pos
        fields = ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")
        return {
            **{name: torch.as_tensor(np.ascontiguousarray(getattr(buffer, name)[:size])) for name in fields},
            "pos": int(buffer.pos),
            "full": bool(buffer.full),
        }

    def save(model: OffPolicyAlgorithm, steps: int) -> None:
        state = {
            "sac": {**capture_sac(model), "num_timesteps": steps},
            "replay": replay_state(model),
            "rng": capture_rng({}),
            "eval_history": [list(h) for h in history],
            "timing": {
                "seconds": timing["earlier_seconds"] + time.perf_counter() - started,
                "eval_seconds": timing["eval_seconds"],
            },
            "resumed": resumed,
            "episode_num": int(model._episode_num),
        }
        for path in paths:
            save_checkpoint(path, state, kind="sac-arm-run", config=config)

    class _Eval(BaseCallback):
        # Same protocol as MBPO.evaluate: deterministic policy, eval env reseeded identically before each evaluation.
        def _on_step(self) -> bool:
            if self.num_timesteps % settings.eval_every == 0:
                t0 = time.perf_counter()
                eval_env.seed(seed + 10_000)
                result = evaluate_policy(
                    self.model, eval_env, n_eval_episodes=settings.eval_episodes, deterministic=True
                )
                history.append([self.num_timesteps, float(np.mean(result[0]))])
                timing["eval_seconds"] += time.perf_counter() - t0
                if settings.stop_at is not None and history[-1][1] >= settings.stop_at:
                    return False  # SB3 ends learn() here
            # SB3 calls this before it stores the step's transition and after the updates of the step before, so
            # the state after ``checkpoint_every`` whole steps (stored and trained on) is the one seen a step later.
            done = self.num_timesteps - 1
            if storage is not None and done > 0 and done % storage.checkpoint_every == 0:
                assert isinstance(self.model, OffPolicyAlgorithm)
                save(self.model, done)
            return True

    model = SAC(
        "MlpPolicy",
        make_env(settings.env_id),
        learning_rate=settings.learning_rate,
        batch_size=settings.batch_size,
        # The buffer never holds more than the budget; a larger one only costs memory (same draws either way).
        buffer_size=max(settings.budget, 1),
        learning_starts=settings.initial_random_steps,  # uniform-random actions until then, as MBPO's warm-up
        train_freq=1,
        gradient_steps=gradient_steps,
        policy_kwargs={"net_arch": list(settings.net_arch)},
        seed=seed,
        device="cpu",
        verbose=0,
    )
    saved = next((p for p in paths if p.exists()), None)
    if saved is not None:
        envelope = load_checkpoint(saved, kind="sac-arm-run")
        if envelope["config"] != config:
            raise ValueError(f"{saved} was saved by a run with other settings; delete it to start this run afresh")
        state = envelope["state"]
        restore_sac(model, state["sac"])
        buffer = model.replay_buffer
        assert buffer is not None
        replay = state["replay"]
        for name in ("observations", "next_observations", "actions", "rewards", "dones", "timeouts"):
            data = replay[name].numpy()
            getattr(buffer, name)[: len(data)] = data
        buffer.pos, buffer.full = int(replay["pos"]), bool(replay["full"])
        restore_rng(state["rng"], {})
        model._episode_num = int(state["episode_num"])
        history[:] = [[int(s), float(r)] for s, r in state["eval_history"]]
        timing["earlier_seconds"] = float(state["timing"]["seconds"])
        timing["eval_seconds"] = float(state["timing"]["eval_seconds"])
        resumed[:] = [*state["resumed"], [model.num_timesteps, "checkpoint" if saved == paths[0] else "carry"]]
    # A continued run starts a new episode (SB3 resets its env in learn()); checkpoints every 1000 steps fall on
    # HalfCheetah's episode ends, so no episode is cut short, but the continuation is not bit-identical.
    remaining = settings.budget - model.num_timesteps
    if remaining > 0:
        model.learn(total_timesteps=remaining, callback=_Eval(), reset_num_timesteps=saved is None)
    return {
        "eval": history,
        "eval_seconds": timing["eval_seconds"],
        "gradient_steps": gradient_steps,
        "steps_done": model.num_timesteps,
        "resumed": resumed,
        "earlier_seconds": timing["earlier_seconds"],
    }


# --- resumable collection ---------------------------------------------------------------------------------------


def run_file(partial_dir: Path, arm: str, seed: int) -> Path:
    """Where a finished run is kept: ``<partial_dir>/<arm, %-quoted>__<seed>.json`` (no ``:`` in file names)."""
    return partial_dir / f"{run_folder_name(arm, seed)}.json"


def collect_runs(
    arms: Sequence[str],
    seeds: Sequence[int],
    settings: ArmSettings,
    partial_dir: Path,
    run: Callable[[str, ArmSettings, int], dict[str, Any]] = run_arm,
    on_run: Callable[[dict[str, Any], list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every (seed, arm) run, reusing finished ones from ``partial_dir`` and saving each new one as it finishes.

    Seed-major order, so an interrupted benchmark has whole seeds for every arm. A killed run loses only the run in
    progress; calling this again with the same settings resumes after the last finished one.

    Args:
        arms: Arm names (:func:`parse_arms`).
        seeds: Seeds, the same for every arm.
        settings: The shared settings; a kept run is reused only if it was made under the same ones.
        partial_dir: Folder of finished runs (created if missing).
        run: Runs one arm for one seed (:func:`run_arm`; tests pass a fake).
        on_run: Called after each new run with its record and all records so far.

    Returns:
        The run records in seed-major order.

    Raises:
        ValueError: a kept file for one of these runs was made under other settings or another protocol (round one's
            files included); delete it or write to another folder (the script's ``--tag``).
    """
    partial_dir.mkdir(parents=True, exist_ok=True)
    runs: list[dict[str, Any]] = []
    for seed in seeds:
        for arm in arms:
            path = run_file(partial_dir, arm, seed)
            if path.exists():
                record = json.loads(path.read_text())
                expected = {"arm": arm, "seed": seed, "protocol": PROTOCOL, "settings": arm_settings(settings, arm)}
                stale = sorted(k for k, v in expected.items() if record.get(k) != v)
                if stale:
                    raise ValueError(
                        f"{path} differs from this run in {stale}; it belongs to another benchmark: delete it or "
                        "write to another folder (--tag)"
                    )
                runs.append(record)
                continue
            record = run(arm, settings, seed)
            atomic_write_json(path, record)
            runs.append(record)
            if on_run is not None:
                on_run(record, runs)
    return runs


# --- steps to threshold -----------------------------------------------------------------------------------------


def steps_to_threshold(evals: Sequence[Sequence[float]], threshold: float) -> int | None:
    """First evaluation step whose mean return is ``>= threshold``; ``None`` if never."""
    for step, value in evals:
        if value >= threshold:
            return int(step)
    return None


def _filled(steps: Sequence[int | None], budget: int) -> np.ndarray:
    return np.array([budget if s is None else s for s in steps], dtype=float)


def median_steps(steps: Sequence[int | None], budget: int) -> float:
    """Median over seeds, a never-reached threshold counting as the budget."""
    return float(np.median(_filled(steps, budget)))


def median_censored(steps: Sequence[int | None]) -> bool:
    """Whether the median rests on runs that never reached the threshold (at least half of them)."""
    return 2 * sum(s is None for s in steps) >= len(steps) > 0


def best_by_median(arm_steps: Mapping[str, Sequence[int | None]], budget: int) -> str:
    """The arm with the lowest median steps; ties go to the lower mean, then to the earlier arm."""
    order = list(arm_steps)
    return min(
        order,
        key=lambda a: (median_steps(arm_steps[a], budget), float(_filled(arm_steps[a], budget).mean()), order.index(a)),
    )


def bootstrap_ratio(
    numerator: Mapping[str, Sequence[int | None]],
    denominator: Mapping[str, Sequence[int | None]],
    budget: int,
    rng: np.random.Generator,
    resamples: int = 10_000,
    level: float = 0.95,
) -> tuple[float, list[float]]:
    """``min median steps over numerator arms / min median steps over denominator arms`` and its bootstrap interval.

    Each arm's seeds are resampled independently with replacement (:func:`rolloutlab.statistics.bootstrap_interval`,
    ``paired=False``), and the best arm of each side is chosen again in every resample, so the interval carries the
    choice of the best arm. Never-reached thresholds count as the budget.

    Returns:
        ``(ratio, [low, high])``: the point ratio and the percentile interval at ``level``.
    """
    names = list(numerator)

    def best_median_ratio(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        medians = [np.median(x, axis=axis) for x in samples]
        return np.minimum.reduce(medians[: len(names)]) / np.minimum.reduce(medians[len(names) :])

    samples = [_filled(steps, budget) for steps in (*numerator.values(), *denominator.values())]
    estimate = bootstrap_interval(samples, best_median_ratio, paired=False, rng=rng, n_resamples=resamples, level=level)
    return estimate.value, [estimate.low, estimate.high]


def _ratio(
    numerator: Mapping[str, Sequence[int | None]],
    denominator: Mapping[str, Sequence[int | None]],
    budget: int,
    rng: np.random.Generator,
    target: float | None,
) -> dict[str, Any]:
    value, interval = bootstrap_ratio(numerator, denominator, budget, rng)
    sac_arm, mbpo_arm = best_by_median(numerator, budget), best_by_median(denominator, budget)
    out: dict[str, Any] = {
        "value": value,
        "ci": interval,
        "sac_arm": sac_arm,
        "mbpo_arm": mbpo_arm,
        # A censored SAC median makes the ratio a lower bound; a censored MBPO median makes it unreliable.
        "censored": {"sac": median_censored(numerator[sac_arm]), "mbpo": median_censored(denominator[mbpo_arm])},
    }
    if target is not None:
        out.update(target=target, met=bool(value >= target), ci_low_meets_target=bool(interval[0] >= target))
    return out


def _mbpo_ratios(
    sac: Mapping[str, Sequence[int | None]],
    mbpo: Mapping[str, Sequence[int | None]],
    budget: int,
    rng: np.random.Generator,
    targets: bool,
) -> dict[str, Any]:
    """The ratios of the SAC arms over the given MBPO arms (the best of them where there are several)."""
    out: dict[str, Any] = {}
    if SAC_UTD1 in sac:
        target = RATIO_TARGETS["ratio_sac_utd1_over_mbpo"] if targets else None
        out["ratio_sac_utd1_over_mbpo"] = _ratio({SAC_UTD1: sac[SAC_UTD1]}, mbpo, budget, rng, target)
    target = RATIO_TARGETS["ratio_best_sac_over_mbpo"] if targets else None
    out["ratio_best_sac_over_mbpo"] = _ratio(sac, mbpo, budget, rng, target)
    if SAC_SAME_UTD in sac:
        out["ratio_sac_same_utd_over_mbpo"] = _ratio({SAC_SAME_UTD: sac[SAC_SAME_UTD]}, mbpo, budget, rng, None)
    return out


def _common_seeds(runs: Sequence[dict[str, Any]]) -> tuple[list[str], list[int], dict[tuple[str, int], dict[str, Any]]]:
    """Arms (MBPO first), the seeds every arm has, and the records by ``(arm, seed)``."""
    names = [r["arm"] for r in runs]
    unknown = sorted({a for a in names if not (is_mbpo(a) or a in SAC_ARMS)})
    if unknown:
        raise ValueError(f"unknown arms {unknown} (round one's records need round_one_runs first)")
    arms = arm_order(sorted(set(names), key=names.index))
    seed_sets = [{r["seed"] for r in runs if r["arm"] == arm} for arm in arms]
    seeds = sorted(set.intersection(*seed_sets)) if seed_sets else []
    return arms, seeds, {(r["arm"], r["seed"]): r for r in runs}


def _cost(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    seconds = [r["seconds"] for r in rows]
    return {
        "seconds": seconds,
        "seconds_median": float(np.median(seconds)) if seconds else None,
        "eval_seconds": [r.get("eval_seconds") for r in rows],
        "seconds_per_1k_steps": [r["seconds_per_1k_steps"] for r in rows],
    }


def summarize_threshold(
    env_id: str,
    threshold: float,
    budget: int,
    runs: Sequence[dict[str, Any]],
    rng: np.random.Generator,
    targets: bool = True,
) -> dict[str, Any]:
    """One steps-to-threshold entry of ``summary.json`` from per-seed run records.

    Only seeds present in every arm are used, so the arms are compared on the same seeds. "MBPO" is the MBPO arm
    with the lowest median steps (``mbpo_arm``); the ratios are given for it (the best arm chosen again in every
    bootstrap resample) and for every MBPO arm alone (``ratios_by_mbpo_arm``).

    Args:
        targets: Add each target ratio's ``target``, ``met`` and ``ci_low_meets_target``; ``False`` for results of
            another protocol, whose numbers must not be read against this protocol's targets.

    Returns:
        ``env``, ``mode`` (``"threshold"``), ``threshold``, ``budget``, ``seeds``, ``arms`` (per arm:
        ``steps_to_threshold``, ``median_steps``, ``never_reached``, ``final_return``, ``seconds``, ``seconds_median``,
        ``eval_seconds``, ``seconds_per_1k_steps``), ``never_reached_counts_as_budget``, ``mbpo_arm``,
        ``ratio_sac_utd1_over_mbpo``, ``ratio_best_sac_over_mbpo``, ``ratio_sac_same_utd_over_mbpo`` (each ``None``
        without the arms it needs) and ``ratios_by_mbpo_arm``.
    """
    arm_names, seeds, by = _common_seeds(runs)
    arms: dict[str, Any] = {}
    for arm in arm_names:
        rows = [by[(arm, s)] for s in seeds]
        steps = [steps_to_threshold(r["eval"], threshold) for r in rows]
        arms[arm] = {
            "steps_to_threshold": steps,
            "median_steps": median_steps(steps, budget) if steps else None,
            "never_reached": sum(s is None for s in steps),
            "final_return": [r["final_return"] for r in rows],
            **_cost(rows),
        }
    entry: dict[str, Any] = {
        "env": env_id,
        "mode": "threshold",
        "threshold": threshold,
        "budget": budget,
        "seeds": seeds,
        "arms": arms,
        "never_reached_counts_as_budget": True,
        "mbpo_arm": None,
        "ratio_sac_utd1_over_mbpo": None,
        "ratio_best_sac_over_mbpo": None,
        "ratio_sac_same_utd_over_mbpo": None,
        "ratios_by_mbpo_arm": {},
    }
    mbpo = {a: arms[a]["steps_to_threshold"] for a in arms if is_mbpo(a)}
    sac = {a: arms[a]["steps_to_threshold"] for a in SAC_ARMS if a in arms}
    if not (mbpo and sac and seeds):
        return entry
    entry["mbpo_arm"] = best_by_median(mbpo, budget)
    entry.update(_mbpo_ratios(sac, mbpo, budget, rng, targets))
    for arm, steps in mbpo.items():
        entry["ratios_by_mbpo_arm"][arm] = _mbpo_ratios(sac, {arm: steps}, budget, rng, targets)
    return entry


# --- final return -----------------------------------------------------------------------------------------------


#: Fewest paired seeds a final-return verdict is given on (the issue's ">= 3 seeds"): with one pair the bootstrap
#: interval is a single point and "excludes zero" says nothing.
MIN_PAIRED_SEEDS = 3


def final_return_difference(
    a: Sequence[float],
    b: Sequence[float],
    rng: np.random.Generator,
    resamples: int = 10_000,
    level: float = 0.95,
    min_pairs: int = MIN_PAIRED_SEEDS,
) -> dict[str, Any]:
    """Mean of the paired differences ``a[i] - b[i]`` with a paired percentile-bootstrap interval.

    The pairs (seeds) are resampled together: :func:`rolloutlab.statistics.mean_interval` of the differences.
    ``met``: at least ``min_pairs`` pairs, the interval excludes zero and the mean is positive.

    Returns:
        ``{"differences", "mean", "ci": [low, high], "met"}``, plus ``"verdict": "too few seeds"`` below
        ``min_pairs`` pairs.
    """
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if diff.size == 0:
        raise ValueError("final_return_difference needs at least one pair")
    estimate = mean_interval(diff, rng=rng, n_resamples=resamples, level=level)
    low, high = estimate.low, estimate.high
    enough = diff.size >= min_pairs
    out: dict[str, Any] = {
        "differences": diff.tolist(),
        "mean": estimate.value,
        "ci": [low, high],
        "met": bool(enough and (low > 0.0 or high < 0.0) and estimate.value > 0.0),
    }
    if not enough:
        out["verdict"] = f"too few seeds ({diff.size} < {min_pairs}): no verdict yet"
    return out


def summarize_final(
    env_id: str, budget: int, runs: Sequence[dict[str, Any]], rng: np.random.Generator
) -> dict[str, Any]:
    """The final-return entry of ``summary.json`` (HalfCheetah) from per-seed run records.

    Only seeds present in every arm are used. ``mbpo_minus_sac_same_utd`` is the paired difference (by seed) of the
    final evaluation returns of the best MBPO arm (highest mean final return, ``mbpo_arm``) and ``sac_same_utd``;
    ``mbpo_minus_sac_same_utd_by_mbpo_arm`` holds it for every MBPO arm.

    Returns:
        ``env``, ``mode`` (``"final_return"``), ``budget``, ``seeds``, ``arms`` (per arm: ``final_return``,
        ``final_return_mean``, ``final_step``, ``seconds``, ``seconds_median``, ``eval_seconds``,
        ``seconds_per_1k_steps``), ``final_eval_at_budget`` (every final evaluation was taken at the budget),
        ``mbpo_arm``, ``mbpo_minus_sac_same_utd`` (``None`` without both arms) and
        ``mbpo_minus_sac_same_utd_by_mbpo_arm``; with a ``sac_utd1`` arm also ``mbpo_minus_sac_utd1``, the same
        paired difference against SAC at one update per step (context, no target, so no ``met``).
    """
    arm_names, seeds, by = _common_seeds(runs)
    arms: dict[str, Any] = {}
    for arm in arm_names:
        rows = [by[(arm, s)] for s in seeds]
        finals = [r["final_return"] for r in rows]
        arms[arm] = {
            "final_return": finals,
            "final_return_mean": float(np.mean(finals)) if finals and None not in finals else None,
            "final_step": [r.get("final_step") for r in rows],
            **_cost(rows),
        }
    entry: dict[str, Any] = {
        "env": env_id,
        "mode": "final_return",
        "budget": budget,
        "seeds": seeds,
        "arms": arms,
        "final_eval_at_budget": all(s == budget for row in arms.values() for s in row["final_step"]),
        "mbpo_arm": None,
        "mbpo_minus_sac_same_utd": None,
        "mbpo_minus_sac_same_utd_by_mbpo_arm": {},
    }
    mbpo = [a for a in arms if is_mbpo(a) and arms[a]["final_return_mean"] is not None]
    if not (mbpo and SAC_SAME_UTD in arms and seeds):
        return entry
    sac = arms[SAC_SAME_UTD]["final_return"]
    for arm in mbpo:
        entry["mbpo_minus_sac_same_utd_by_mbpo_arm"][arm] = {
            "mbpo_arm": arm,
            **final_return_difference(arms[arm]["final_return"], sac, rng),
        }
    best = max(mbpo, key=lambda a: (arms[a]["final_return_mean"], -mbpo.index(a)))
    entry["mbpo_arm"] = best
    entry["mbpo_minus_sac_same_utd"] = entry["mbpo_minus_sac_same_utd_by_mbpo_arm"][best]
    if SAC_UTD1 in arms and arms[SAC_UTD1]["final_return_mean"] is not None:
        # Context, not a target: SAC at one update per step tells whether same-UTD SAC lost to the model or to its
        # own update ratio (high replay ratios can hurt SAC without resets; Nikishin et al. 2022).
        diff = final_return_difference(arms[best]["final_return"], arms[SAC_UTD1]["final_return"], rng)
        entry["mbpo_minus_sac_utd1"] = {"mbpo_arm": best, **{k: v for k, v in diff.items() if k != "met"}}
    return entry


def summarize(
    mode: str,
    env_id: str,
    threshold: float | None,
    budget: int,
    runs: Sequence[dict[str, Any]],
    rng: np.random.Generator,
) -> dict[str, Any]:
    """:func:`summarize_threshold` (``mode="threshold"``) or :func:`summarize_final` (``mode="final_return"``)."""
    if mode == "final_return":
        return summarize_final(env_id, budget, runs, rng)
    if mode != "threshold" or threshold is None:
        raise ValueError(f"mode must be 'final_return', or 'threshold' with a threshold; got {mode!r}, {threshold!r}")
    return summarize_threshold(env_id, threshold, budget, runs, rng)


# --- round one --------------------------------------------------------------------------------------------------


def round_one_runs(runs: Sequence[dict[str, Any]], controller: str) -> list[dict[str, Any]]:
    """Round one's run records under this protocol's arm names.

    ``mbpo`` becomes ``mbpo:<controller>`` (round one ran ``fixed:1``), ``sac_default`` becomes ``sac_utd1`` and
    ``sac_same_utd`` keeps its name; each record keeps its old name as ``round_one_arm``. The renaming is of names
    only: round one ran another protocol (evaluation every 250 env steps, 250 warm-up steps, 5 seeds, 5000 imagined
    rollouts per round, at most 30 model epochs per refit), so its numbers are never this protocol's.

    Raises:
        ValueError: an arm name round one did not have.
    """
    out = []
    for run in runs:
        name = run["arm"]
        if name == "mbpo":
            new = MBPO_PREFIX + controller
        elif name in ROUND_ONE_SAC_NAMES:
            new = ROUND_ONE_SAC_NAMES[name]
        else:
            raise ValueError(f"{name!r} is not a round-one arm (mbpo, sac_same_utd, sac_default)")
        out.append({**run, "arm": new, "round_one_arm": name})
    return out


# --- the results summary ----------------------------------------------------------------------------------------

#: What the wall-clock numbers in ``summary.json`` measure.
COST_NOTE = "wall-clock on the shared 2-core machine, other benchmarks beside it; compare arms, not machines"
ROUND_ONE_LABEL = (
    "Round one: the superseded protocol (5 seeds, evaluation every 250 env steps, 250 warm-up steps, MBPO with 5000 "
    "imagined rollouts per round and at most 30 model epochs per refit). Arm names mapped to this protocol's "
    "(mbpo -> mbpo:<its controller>, sac_default -> sac_utd1); no targets are evaluated on these numbers."
)
#: The protocol and its targets in words, the head of ``summary.json``.
PROTOCOL_DESCRIPTION: dict[str, Any] = {
    "name": PROTOCOL,
    "arms": "mbpo:SPEC (one per rollout-length controller spec), sac_same_utd (SAC at MBPO's G updates per env step), "
    "sac_utd1 (SAC at 1 update per env step); same seeds, networks, warm-up and evaluation in every arm",
    "mbpo": "the MBPO arm with the lowest median steps to threshold (entry.mbpo_arm); every MBPO arm alone in "
    "entry.ratios_by_mbpo_arm",
    "steps_to_threshold": "first evaluation step whose mean deterministic return reaches the threshold; a run that "
    "never reaches it counts as the budget",
    "targets": {
        key: {
            "target": target,
            "met": f"median-steps ratio >= {target:g}",
            "ci_low_meets_target": f"lower end of its 95% bootstrap interval >= {target:g}",
        }
        for key, target in RATIO_TARGETS.items()
    }
    | {
        "halfcheetah.mbpo_minus_sac_same_utd": {
            "target": "> 0",
            "met": "the paired (by seed) bootstrap 95% interval of the mean final-return difference excludes 0 and "
            "the mean is > 0",
        }
    },
}


def iqm_by_arm(entry: dict[str, Any], reps: int) -> dict[str, Any]:
    """rliable IQM of the per-seed final returns of each arm, with a 95% stratified-bootstrap interval."""
    scores = {
        arm: np.asarray(row["final_return"], dtype=float)
        for arm, row in entry["arms"].items()
        if row["final_return"] and None not in row["final_return"]
    }
    if not scores or min(v.shape[0] for v in scores.values()) < 2:
        return {}
    estimates = interval_estimates(scores, {"iqm": iqm}, seed=0, reps=reps)
    return {arm: {"iqm": e["iqm"].value, "ci": [e["iqm"].low, e["iqm"].high]} for arm, e in estimates.items()}


def costs(entry: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median wall seconds per run, per 1k env steps and in evaluations, per arm; MBPO's imagined transitions / s."""
    used = [r for r in runs if r["seed"] in entry["seeds"]]

    def median(values: list[Any]) -> float | None:
        values = [v for v in values if v is not None]
        return float(np.median(values)) if values else None

    return {
        "seconds_median": {arm: row["seconds_median"] for arm, row in entry["arms"].items()},
        "seconds_per_1k_env_steps_median": {
            arm: median(row["seconds_per_1k_steps"]) for arm, row in entry["arms"].items()
        },
        "eval_seconds_median": {arm: median(row["eval_seconds"]) for arm, row in entry["arms"].items()},
        "mbpo_imagined_transitions_per_second_median": {
            arm: median([r.get("imagined_per_second") for r in used if r["arm"] == arm])
            for arm in entry["arms"]
            if is_mbpo(arm)
        },
        "note": COST_NOTE,
    }


def build_summary(
    results: Path, names: list[str] | None = None, bootstrap_reps: int = BOOTSTRAP_REPS
) -> dict[str, Any]:
    """The whole ``summary.json`` from the benchmark files in ``results`` (all, or those ``names``).

    Every entry is recomputed from the per-seed run records stored in ``sample_efficiency_<env>[_<tag>].json``
    (nothing is rerun). Files of this protocol give the steps-to-threshold entries (``sample_efficiency``) and the
    HalfCheetah final-return entry (``halfcheetah``), plus costs and rliable aggregates; files of round one (no
    ``protocol`` field) go under ``round_one`` with this protocol's arm names and without targets.

    Raises:
        ValueError: two files of this protocol for the same env and mode, or a final-return file for an env other
            than HalfCheetah (the summary has a place for HalfCheetah's only).
    """
    paths = [results / n for n in names] if names else sorted(results.glob("sample_efficiency_*.json"))
    summary: dict[str, Any] = {
        "protocol": PROTOCOL_DESCRIPTION,
        "sample_efficiency": [],
        "halfcheetah": None,
        "costs": {},
        "aggregate_iqm_final_return": {},
        "round_one": None,
        "sources": [],
    }
    round_one: dict[str, Any] = {
        "label": ROUND_ONE_LABEL,
        "sample_efficiency": [],
        "sources": [],
    }
    seen: dict[tuple[str, str], str] = {}
    for path in paths:
        data = json.loads(path.read_text())
        rng = np.random.default_rng(0)
        if data.get("protocol") != PROTOCOL:
            a = data["args"]
            runs = round_one_runs(data["runs"], a["controller"])
            entry = summarize_threshold(a["env_id"], a["threshold"], a["budget"], runs, rng, targets=False)
            entry.update(
                round_one_arm_names={"mbpo": f"mbpo:{a['controller']}", **ROUND_ONE_SAC_NAMES},
                settings=data["settings"],
                command=_round_one_command(a),
                source=path.name,
            )
            round_one["sample_efficiency"].append(entry)
            round_one["sources"].append(path.name)
            continue
        settings, mode = data["settings"], data["mode"]
        env = settings["env_id"]
        if (env, mode) in seen:
            raise ValueError(
                f"{path.name} and {seen[(env, mode)]} both hold {mode} results for {env}; pick one (--files)"
            )
        seen[(env, mode)] = path.name
        entry = summarize(mode, env, data["threshold"], settings["budget"], data["runs"], rng)
        entry.update(settings=settings, command=data["command"], source=path.name)
        if mode == "final_return":
            if not env.startswith("HalfCheetah"):
                raise ValueError(f"{path.name}: summary.json has a final-return place for HalfCheetah only, not {env}")
            summary["halfcheetah"] = entry
        else:
            summary["sample_efficiency"].append(entry)
        summary["costs"][env] = costs(entry, data["runs"])
        summary["aggregate_iqm_final_return"][env] = iqm_by_arm(entry, bootstrap_reps)
        summary["sources"].append(path.name)
    if round_one["sources"]:
        summary["round_one"] = round_one
    return summary


def _round_one_command(a: dict[str, Any]) -> str:
    return (
        f"python experiments/mbrl/sample_efficiency.py --env-id {a['env_id']} --threshold {a['threshold']:g} "
        f"--budget {a['budget']} --seeds {a['seeds']} --updates-per-step {a['updates_per_step']} "
        f"--controller {a['controller']}"
        + (f" --tag {a['tag']}" if a.get("tag") else "")
        + " (round one's script, before the protocol of 'The model must pay off')"
    )


def _fmt(x: float | None, digits: int = 0) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def ratio_text(ratio: dict[str, Any] | None) -> str:
    """A ratio entry as ``value [low, high] (target ≥ t: met)`` (``—`` for ``None``)."""
    if ratio is None:
        return "—"
    text = f"{ratio['value']:.2f} [{ratio['ci'][0]:.2f}, {ratio['ci'][1]:.2f}]"
    if "target" in ratio:
        text += f" (target ≥ {ratio['target']:g}: {'met' if ratio['met'] else 'not met'})"
    return text


def _threshold_table(entries: list[dict[str, Any]], iqm_final: dict[str, Any]) -> list[str]:
    lines = [
        "| env | threshold | budget | seeds | arm | steps to threshold (per seed) | median | never | final return "
        "(per seed) | IQM final [95% CI] | wall s per run (median) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in entries:
        env = entry["env"]
        for arm, row in entry["arms"].items():
            steps = ", ".join("never" if s is None else str(s) for s in row["steps_to_threshold"])
            finals = ", ".join(_fmt(v) for v in row["final_return"])
            agg = iqm_final.get(env, {}).get(arm)
            agg_text = f"{agg['iqm']:.0f} [{agg['ci'][0]:.0f}, {agg['ci'][1]:.0f}]" if agg else "—"
            lines.append(
                f"| {env} | {entry['threshold']:g} | {entry['budget']} | {len(entry['seeds'])} | {arm} | {steps} "
                f"| {_fmt(row['median_steps'])} | {row['never_reached']} | {finals} | {agg_text} "
                f"| {_fmt(row['seconds_median'])} |"
            )
        for key in ("ratio_sac_utd1_over_mbpo", "ratio_best_sac_over_mbpo", "ratio_sac_same_utd_over_mbpo"):
            if entry.get(key) is not None:
                label = f"**{key}** (MBPO = {entry['mbpo_arm']})"
                lines.append(f"| {env} | | | | {label} | | {ratio_text(entry[key])} | | | | |")
    return lines


def markdown(summary: dict[str, Any]) -> str:
    """The tables quoted in the docs: this protocol's results, then round one's, labelled as such."""
    lines = [f"## Protocol: {PROTOCOL}", ""]
    if summary["sample_efficiency"]:
        lines += _threshold_table(summary["sample_efficiency"], summary["aggregate_iqm_final_return"])
    else:
        lines.append("No steps-to-threshold results of this protocol yet.")
    lines.append("")
    hc = summary["halfcheetah"]
    if hc is None:
        lines.append("No HalfCheetah final-return results of this protocol yet.")
    else:
        lines += [
            "| env | budget | seeds | arm | final return (per seed) | mean | wall s per run (median) |",
            "|---|---|---|---|---|---|---|",
        ]
        for arm, row in hc["arms"].items():
            finals = ", ".join(_fmt(v) for v in row["final_return"])
            lines.append(
                f"| {hc['env']} | {hc['budget']} | {len(hc['seeds'])} | {arm} | {finals} "
                f"| {_fmt(row['final_return_mean'])} | {_fmt(row['seconds_median'])} |"
            )
        diff = hc["mbpo_minus_sac_same_utd"]
        if diff is not None:
            lines.append(
                f"| {hc['env']} | | | **mbpo_minus_sac_same_utd** (MBPO = {hc['mbpo_arm']}) | "
                f"{', '.join(_fmt(d) for d in diff['differences'])} | {diff['mean']:.0f} "
                f"[{diff['ci'][0]:.0f}, {diff['ci'][1]:.0f}] (target > 0: {'met' if diff['met'] else 'not met'}) | |"
            )
        context = hc.get("mbpo_minus_sac_utd1")
        if context is not None:
            lines.append(
                f"| {hc['env']} | | | mbpo_minus_sac_utd1 (MBPO = {context['mbpo_arm']}) | "
                f"{', '.join(_fmt(d) for d in context['differences'])} | {context['mean']:.0f} "
                f"[{context['ci'][0]:.0f}, {context['ci'][1]:.0f}] (no target) | |"
            )
    if summary["round_one"] is not None:
        lines += ["", "## Round one (superseded protocol; not evidence for this protocol's targets)", ""]
        lines += [summary["round_one"]["label"], ""]
        lines += _threshold_table(summary["round_one"]["sample_efficiency"], {})
    return "\n".join(lines) + "\n"


# --- the gate ---------------------------------------------------------------------------------------------------

#: gymnasium's reward_threshold for Acrobot-v1: a run whose mean greedy return reaches it solves the task.
GATE_SOLVED = -100.0
#: Gate settings added after slices were saved, with the behaviour those slices ran with. Such a setting is part of a
#: slice's protocol only when it differs from that behaviour, so the older slices are still reused.
_GATE_ADDED_SETTINGS: dict[str, Any] = {
    "target_clock": "updates",
    "multi_step_targets": False,
    "deterministic_rollouts": False,
    "model_use": "dyna",
    "lookahead_expectation": False,
    "lookahead_trust": 0.0,
}


@dataclass
class GateSettings:
    """Everything a saved slice of the gate depends on (its protocol, :func:`gate_protocol`), with the gate's values.

    On Acrobot-v1 with phases of 2k env steps, every arm trains paired inner runs (run ``i`` of every arm shares its
    seed: network init, env resets, exploration stream) in batched Dyna-DQN learners driven by
    :class:`mbrl.phases.RolloutLengthDriver`. ``experiments/mbrl/gate.py``'s ``Args`` adds the options that do not
    change a run (how many runs, workers, bootstrap resamples, output paths); these fields are its flags.
    """

    env_id: str = "Acrobot-v1"
    """inner environment (a discrete-action env with rl-zoo DQN settings)"""
    budget: int = 20_000
    """real env steps per run"""
    phase_length: int = 2_000
    """env steps between rollout-length decisions"""
    arms: str = "fixed:0,fixed:0+compute,fixed:1,fixed:2,fixed:4,fixed:8,fixed:16,incdec:16,fixed:8+true"
    """comma-separated arms: a controller spec, optionally +compute (K=0 with the extra updates on real data) or
    +true (the env's own dynamics as the model)"""
    runs_per_slice: int = 5
    """runs per saved slice (every arm's runs of a slice train in one batched learner)"""
    seed: int = 0
    """base seed; run i of every arm uses seed * 10_000 + i"""
    final_episodes: int = 10
    """greedy episodes behind each run's final score"""
    net_arch: str = "64,64"
    """Q-network hidden widths (rl-zoo: 256,256; 64,64 keeps 9 arms x 20 runs inside one session on 2 cores)"""
    model_train_freq: int = 2_000
    """env steps between world-model refits"""
    model_min_train_steps: int = 300
    """gradient steps every world-model refit takes (warm-started from the previous fit)"""
    model_patience_steps: int = 200
    """gradient steps without holdout improvement before a refit stops"""
    model_max_train_steps: int = 600
    """cap on gradient steps per refit: the 120 learned models x 10 refits dominate the gate's cost"""
    rollout_freq: int = 250
    """env steps between rounds of imagined rollouts"""
    num_model_rollouts: int = 1_000
    """imagined rollouts per round"""
    model_retain_rounds: int = 4
    """rounds of imagined data kept"""
    real_ratio: float = 0.5
    """real share of each minibatch of a model-using run"""
    model_gradient_steps: int = -1
    """extra updates per training round of a model-using (or compute-matched) run; -1: as many as the ordinary ones"""
    target_clock: str = "updates"
    """target-network sync clock: "updates" (each run's own gradient steps) or "env_steps" (SB3's)"""
    model_use: str = "dyna"
    """dyna (train on imagined rollouts of K steps) or lookahead (act by K-step rollouts in the model)"""
    multi_step_targets: bool = False
    """imagined transitions carry the model's rewards to the end of their rollout (model value expansion)"""
    deterministic_rollouts: bool = False
    """imagined steps use the elite's mean instead of sampling (Acrobot is deterministic)"""
    lookahead_expectation: bool = False
    """lookahead steps with the elites' average prediction instead of one random elite's mean"""
    lookahead_trust: float = 0.0
    """0, or keep the Q-function's choice where the chosen rollout's disagreement exceeds this times the usual one"""


def parse_gate_arm(arm: str) -> tuple[str, bool, bool]:
    """``(controller spec, compute_matched, true_model)`` of a gate arm name (``fixed:0+compute``, ``fixed:8+true``).

    Raises:
        ValueError: a modifier other than ``+compute`` or ``+true``.
    """
    spec, _, modifier = arm.partition("+")
    if modifier not in ("", "compute", "true"):
        raise ValueError(f"arm {arm!r}: unknown modifier {modifier!r} (use +compute or +true)")
    return spec, modifier == "compute", modifier == "true"


def gate_arms(settings: GateSettings) -> list[str]:
    """The settings' arm names, each checked (:func:`parse_gate_arm`)."""
    arms = [a.strip() for a in settings.arms.split(",") if a.strip()]
    for arm in arms:
        parse_gate_arm(arm)
    return arms


def gate_learner_config(settings: GateSettings) -> DynaConfig:
    """The Dyna-DQN config every arm of the gate shares."""
    from mbrl.algorithms.dyna import DynaConfig, dyna_model_config

    model = dataclasses.replace(
        dyna_model_config(),
        min_train_steps=settings.model_min_train_steps,
        patience_steps=settings.model_patience_steps,
        max_train_steps=settings.model_max_train_steps,
    )
    return DynaConfig.for_env(
        settings.env_id,
        budget=settings.budget,
        phase_length=settings.phase_length,
        k_cap=32,
        model_train_freq=settings.model_train_freq,
        rollout_freq=settings.rollout_freq,
        num_model_rollouts=settings.num_model_rollouts,
        model_retain_rounds=settings.model_retain_rounds,
        real_ratio=settings.real_ratio,
        model_gradient_steps=settings.model_gradient_steps,
        train_model_when_k0=False,  # plain K = 0 arms are plain DQN; no model is fit for them
        net_arch=[int(w) for w in settings.net_arch.split(",")],
        multi_step_targets=settings.multi_step_targets,
        target_clock=settings.target_clock,
        model_use=settings.model_use,
        deterministic_rollouts=settings.deterministic_rollouts,
        lookahead_expectation=settings.lookahead_expectation,
        lookahead_trust=settings.lookahead_trust,
        model=model,
    )


def gate_protocol(settings: GateSettings) -> dict[str, Any]:
    """What must match for a saved slice to be reused: every :class:`GateSettings` field, in order, less the settings
    added later that keep the behaviour older slices ran with."""
    keep = {f.name: getattr(settings, f.name) for f in dataclasses.fields(GateSettings)}
    for key, default in _GATE_ADDED_SETTINGS.items():
        if keep[key] == default:
            keep.pop(key)
    return keep


def run_gate_slice(settings: GateSettings, arms: Sequence[str], first_run: int, runs: int) -> dict[str, Any]:
    """Train runs ``first_run .. first_run + runs - 1`` of every arm (one batched learner) and score them.

    Every arm is scored at the same point of its cycle: the greedy policy after the last env step, over
    ``final_episodes`` episodes (with lookahead, also the same Q-networks acting without it).

    Returns:
        ``{"first_run", "runs", "arms": {arm: {"finals", "curves", "disagreement_by_step", "updates",
        "model_updates", "untrusted_decisions"[, "finals_q_greedy"]}}, "seconds"}``.
    """
    import gymnasium as gym

    from mbrl.algorithms.dyna import BatchedDynaDQN
    from mbrl.phases import RolloutLengthDriver
    from rolloutlab.threads import set_torch_threads

    set_torch_threads()
    started = time.perf_counter()
    parsed = [parse_gate_arm(a) for a in arms for _ in range(runs)]
    seeds = [settings.seed * 10_000 + first_run + i for _ in arms for i in range(runs)]
    env_fns = [lambda: gym.make(settings.env_id)] * len(parsed)
    models: list[Any] = [None] * len(parsed)
    if any(true for _, _, true in parsed):
        from mbrl.models.true_dynamics import TrueAcrobotModel

        models = [TrueAcrobotModel.from_env(gym.make(settings.env_id)) if true else None for _, _, true in parsed]
    learner = BatchedDynaDQN(
        env_fns,
        gate_learner_config(settings),
        seed=settings.seed,
        run_seeds=seeds,
        compute_matched=[c for _, c, _ in parsed],
        models=models,
    )
    driver = RolloutLengthDriver([make_controller(spec) for spec, _, _ in parsed], k_cap=learner.cfg.k_cap)
    curves: list[list[dict[str, float]]] = [[] for _ in parsed]
    horizons: list[list[list[float]]] = [[] for _ in parsed]
    while not learner.done:
        feedback = driver.run_phase(learner)
        for i, fb in enumerate(feedback):
            keys = ("mean_return", "model_return_error", "model_holdout_nmse", "model_transitions", "k")
            curves[i].append({k: float(fb[k]) for k in keys if k in fb})
            horizons[i].append(list(learner.last_disagreement_by_step[i]))
        means = [
            float(np.mean([fb["mean_return"] for fb in feedback[a * runs : (a + 1) * runs]])) for a in range(len(arms))
        ]
        print(f"runs {first_run}+{runs} step {learner.steps_done}: " + ", ".join(f"{m:.0f}" for m in means), flush=True)
    finals = learner.evaluate(settings.final_episodes)
    finals_q: np.ndarray | None = None
    if settings.model_use == "lookahead":
        # A diagnostic: the same final Q-networks acting greedily without lookahead, on the same evaluation episodes.
        # It tells a model that misleads the final decisions apart from a Q-function that learned less.
        in_force = list(learner.ks)
        learner.ks = [0] * len(in_force)
        finals_q = learner.evaluate(settings.final_episodes)
        learner.ks = in_force
    seconds = time.perf_counter() - started
    out: dict[str, Any] = {}
    for a, arm in enumerate(arms):
        rows = range(a * runs, (a + 1) * runs)
        out[arm] = {
            "finals": [float(finals[i]) for i in rows],
            "curves": [curves[i] for i in rows],
            "disagreement_by_step": [horizons[i] for i in rows],
            "updates": [int(learner.updates[i]) for i in rows],
            "model_updates": [int(learner.model_updates[i]) for i in rows],
            "untrusted_decisions": [int(learner.untrusted_decisions[i]) for i in rows],
        }
        if finals_q is not None:
            out[arm]["finals_q_greedy"] = [float(finals_q[i]) for i in rows]
    return {"first_run": first_run, "runs": runs, "arms": out, "seconds": seconds}


def _print(line: str) -> None:
    print(line, flush=True)


def gate_slice_path(out_dir: Path, first_run: int, runs: int) -> Path:
    """Where a finished slice is kept: ``<out_dir>/slice_<first run>_<runs>.json``."""
    return Path(out_dir) / f"slice_{first_run:03d}_{runs:03d}.json"


def run_gate(
    settings: GateSettings,
    runs: int,
    out_dir: Path,
    workers: int = 1,
    bootstrap_reps: int = BOOTSTRAP_REPS,
    log: Callable[[str], None] = _print,
) -> dict[str, Any]:
    """Train (or reuse) ``runs`` paired runs of every arm in slices and summarize them.

    Runs are split into slices of ``runs_per_slice`` saved to ``out_dir`` one by one, so a killed gate loses only the
    slice in progress and a rerun skips the slices saved under the same protocol; ``workers`` run slices side by side.

    Returns:
        :func:`gate_summary` of the slices, with ``protocol`` (:func:`gate_protocol` and ``runs``).
    """
    # Only the protocol's fields travel to the workers (a caller's subclass, such as a script's Args, may not pickle).
    settings = GateSettings(**{f.name: getattr(settings, f.name) for f in dataclasses.fields(GateSettings)})
    arms = gate_arms(settings)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    slices = [(first, min(settings.runs_per_slice, runs - first)) for first in range(0, runs, settings.runs_per_slice)]
    protocol = gate_protocol(settings)
    done: dict[int, dict[str, Any]] = {}
    todo = []
    for first, n in slices:
        path = gate_slice_path(out_dir, first, n)
        if path.exists():
            saved = json.loads(path.read_text())
            if saved.get("protocol") == protocol and set(arms) <= set(saved["arms"]):
                done[first] = saved
                continue
        todo.append((first, n))
    log(f"{len(done)} slices saved, {len(todo)} to run: {todo}")

    def keep(result: dict[str, Any]) -> None:
        result["protocol"] = protocol
        atomic_write_json(gate_slice_path(out_dir, result["first_run"], result["runs"]), result)
        done[result["first_run"]] = result
        log(f"saved slice {result['first_run']}+{result['runs']} ({result['seconds']:.0f} s)")

    if workers > 1 and len(todo) > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(run_gate_slice, settings, arms, first, n) for first, n in todo]
            for future in as_completed(futures):
                keep(future.result())
    else:
        for first, n in todo:
            keep(run_gate_slice(settings, arms, first, n))
    summary = gate_summary([done[first] for first, _ in slices], arms, settings.seed, bootstrap_reps)
    summary["protocol"] = {**protocol, "runs": runs}
    return summary


def summarize_gate(finals: Mapping[str, np.ndarray], seed: int, reps: int) -> dict[str, Any]:
    """Per-arm aggregates with rliable intervals, paired IQM differences against both K = 0 arms, and the verdict.

    Reported per arm: mean, median, IQM and the fraction of runs that solve the task (:data:`GATE_SOLVED`), with 95%
    stratified-bootstrap intervals; for every arm but the K = 0 ones, the paired difference in IQM against both K = 0
    arms (``fixed:0`` and ``fixed:0+compute``) with its paired-bootstrap standard error. The gate passes when the best
    learned-model arm beats *both* K = 0 arms by more than two paired standard errors in IQM.

    Args:
        finals: Per arm, the final score of every run (run ``i`` of every arm on the same seed).
        seed: Seed of the bootstrap streams.
        reps: Bootstrap resamples.

    Returns:
        ``{"arms", "paired_iqm_vs_k0", "best_model_arm", "gate_passed"}``.
    """
    from rliable import metrics

    # One task: rliable's aggregate_median is a median over *tasks* of per-task means, so the median over runs is
    # taken directly.
    aggregates = {
        "mean": metrics.aggregate_mean,
        "median": lambda x: float(np.median(x)),
        "iqm": iqm,
        "solved_fraction": lambda x: float(np.mean(x >= GATE_SOLVED)),
    }
    estimates = interval_estimates(finals, aggregates, seed=seed, reps=reps)
    arms: dict[str, Any] = {}
    for arm, values in finals.items():
        entry: dict[str, Any] = {"finals": values.tolist()}
        for name, estimate in estimates[arm].items():
            entry[name] = estimate.value
            entry[f"{name}_ci95"] = [estimate.low, estimate.high]
        arms[arm] = entry
    baselines = [b for b in ("fixed:0", "fixed:0+compute") if b in finals]
    paired: dict[str, Any] = {}
    for arm, values in finals.items():
        if parse_gate_arm(arm)[0] == "fixed:0":
            continue
        paired[arm] = {}
        for base in baselines:
            # A fresh generator from the same seed per pair: every comparison resamples the same run indices.
            d = paired_difference(values, finals[base], statistic=iqm, rng=seed, n_resamples=reps)
            se = d.standard_error
            paired[arm][base] = {"iqm_diff": d.value, "se": se, "z": d.value / se if se > 0 else float("inf")}
    model_arms = [a for a in paired if not parse_gate_arm(a)[2]]
    best = max(model_arms, key=lambda a: arms[a]["iqm"]) if model_arms else None
    # The verdict needs both K = 0 arms: beating only one of them is not the gate.
    passed = bool(best is not None and len(baselines) == 2 and all(paired[best][b]["z"] > 2.0 for b in baselines))
    return {"arms": arms, "paired_iqm_vs_k0": paired, "best_model_arm": best, "gate_passed": passed}


def gate_summary(slices: Sequence[Mapping[str, Any]], arms: Sequence[str], seed: int, reps: int) -> dict[str, Any]:
    """The gate's summary from its slices (in run order): :func:`summarize_gate` of the final scores, plus model
    error per rollout step and per phase, the return per phase, the Q-greedy finals of lookahead runs, wall seconds.
    """
    finals = {arm: np.array([x for s in slices for x in s["arms"][arm]["finals"]]) for arm in arms}
    summary = summarize_gate(finals, seed, reps)
    per_horizon = {}
    for arm in arms:
        last = [s["arms"][arm]["disagreement_by_step"][i][-1] for s in slices for i in range(s["runs"])]
        width = max((len(x) for x in last), default=0)
        if width:
            padded = np.array([x + [np.nan] * (width - len(x)) for x in last])
            per_horizon[arm] = np.nanmean(padded, axis=0).tolist()
    summary["final_disagreement_by_step"] = per_horizon
    if all("finals_q_greedy" in s["arms"][arm] for s in slices for arm in arms):
        q_greedy = {arm: np.array([x for s in slices for x in s["arms"][arm]["finals_q_greedy"]]) for arm in arms}
        summary["q_greedy_finals"] = {
            arm: {
                "finals": x.tolist(),
                "mean": float(x.mean()),
                "iqm": float(iqm(x)),
                "solved_fraction": float(np.mean(x >= GATE_SOLVED)),
            }
            for arm, x in q_greedy.items()
        }

    def by_phase(key: str) -> dict[str, list[float]]:
        return {
            arm: np.nanmean(
                [[c.get(key, np.nan) for c in curve] for s in slices for curve in s["arms"][arm]["curves"]], axis=0
            ).tolist()
            for arm in arms
        }

    with warnings.catch_warnings():  # K = 0 arms fit no model: their model errors are all NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        summary["model_holdout_nmse_by_phase"] = by_phase("model_holdout_nmse")
        summary["model_return_error_by_phase"] = by_phase("model_return_error")
    summary["mean_return_by_phase"] = {
        arm: np.mean(
            [[c["mean_return"] for c in curve] for s in slices for curve in s["arms"][arm]["curves"]], axis=0
        ).tolist()
        for arm in arms
    }
    summary["seconds"] = float(sum(s["seconds"] for s in slices))
    return summary


def gate_table(summary: Mapping[str, Any]) -> str:
    """The markdown table quoted by the README and docs/dyna.md (generated, never edited by hand)."""
    lines = [
        "| arm | mean | median | IQM [95% CI] | solved "
        "| IQM − fixed:0 (paired s.e.) | IQM − fixed:0+compute (paired s.e.) |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm, entry in summary["arms"].items():
        paired = summary["paired_iqm_vs_k0"].get(arm, {})
        diffs = [
            f"{paired[b]['iqm_diff']:+.1f} ({paired[b]['se']:.1f})" if b in paired else "—"
            for b in ("fixed:0", "fixed:0+compute")
        ]
        lo, hi = entry["iqm_ci95"]
        lines.append(
            f"| {arm} | {entry['mean']:.1f} | {entry['median']:.1f} | {entry['iqm']:.1f} [{lo:.1f}, {hi:.1f}] "
            f"| {entry['solved_fraction']:.2f} | {diffs[0]} | {diffs[1]} |"
        )
    return "\n".join(lines) + "\n"


def gate_report(summary: Mapping[str, Any]) -> str:
    """The gate's verdict as printed by its scripts: per-arm aggregates, paired differences, the best model arm."""
    lines = [f"{'arm':<18} {'mean':>8} {'median':>8} {'IQM':>8} {'solved':>7}"]
    for arm, entry in summary["arms"].items():
        lines.append(
            f"{arm:<18} {entry['mean']:8.1f} {entry['median']:8.1f} {entry['iqm']:8.1f} {entry['solved_fraction']:7.2f}"
        )
    for arm, vs in summary["paired_iqm_vs_k0"].items():
        diffs = {b: f"{v['iqm_diff']:+.1f} (z {v['z']:.1f})" for b, v in vs.items()}
        lines.append(f"{arm} {diffs}")
    lines.append(f"best model arm {summary['best_model_arm']}; gate passed: {summary['gate_passed']}")
    return "\n".join(lines)


# --- quick bench ------------------------------------------------------------------------------------------------

QUICK_SEEDS = (0, 1, 2)
#: The point mass's threshold per 30-step episode.
QUICK_THRESHOLD = -5.0
QUICK_ARMS = ("mbpo:fixed:3", SAC_SAME_UTD, SAC_UTD1)
FULL_COMMAND = "OMP_NUM_THREADS=1 nice -n 5 python experiments/mbrl/sample_efficiency.py --env-id Pendulum-v1"


def quick_settings(budget: int = 300) -> ArmSettings:
    """The quick benchmark's arm settings: the protocol's, on the point mass, with a small MBPO model and data scale.

    The evaluation period, warm-up, MBPO epoch and rollout batch are scaled to the 30-step point mass; every other
    setting is :class:`ArmSettings`'s.
    """
    return ArmSettings(
        env_id="rolloutlab/PointMass-v0",
        budget=budget,
        eval_every=30,
        initial_random_steps=60,
        mbpo={
            "epoch_length": 30,
            "model_train_freq": 30,
            "rollout_batch_size": 400,
            "model": {"ensemble_size": 5, "num_elites": 3, "hidden_size": 64, "num_layers": 2, "max_epochs": 30},
        },
    )


def quick_bench(out_dir: Path) -> list[BenchLine]:
    """``rolloutlab bench --only mbrl``: MBPO vs SAC on the point mass (3 seeds x 3 arms, 300 env steps).

    The full benchmark (Pendulum-v1, InvertedPendulum-v5, 10 seeds) takes far longer than a bench slot, so the quick
    version runs three arms (``mbpo:fixed:3``, SAC at the same updates per step, SAC at one update per step) on the
    point-mass toy (``rolloutlab/PointMass-v0``). It reports the measured ratio of steps-to-threshold (best SAC arm /
    MBPO) with its bootstrap interval; the targets (SAC at one update per step / MBPO >= 5, best SAC / MBPO >= 1) are
    for the full benchmark, so this line only records the number.
    """
    started = time.perf_counter()
    settings = quick_settings()
    runs = [run_arm(arm, settings, seed) for seed in QUICK_SEEDS for arm in QUICK_ARMS]
    entry = summarize_threshold(settings.env_id, QUICK_THRESHOLD, settings.budget, runs, np.random.default_rng(0))
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out_dir / "quick_sample_efficiency.json", {"entry": entry, "runs": runs})
    best = entry["ratio_best_sac_over_mbpo"]
    utd1 = entry["ratio_sac_utd1_over_mbpo"]
    return [
        BenchLine(
            pillar="mbrl",
            benchmark=f"PointMass-v0 {settings.budget} steps, 3 seeds: MBPO vs SAC (G={settings.updates_per_step})",
            metric="steps-to-threshold ratio best SAC / MBPO",
            value=best["value"] if best else None,
            target="full benchmark on Pendulum/InvertedPendulum: sac_utd1 / MBPO >= 5, best SAC / MBPO >= 1 "
            "(quick size records the number only)",
            passed=None,
            seconds=time.perf_counter() - started,
            command=FULL_COMMAND,
            details={
                "ratio_ci": best["ci"] if best else None,
                "ratio_sac_utd1_over_mbpo": {"value": utd1["value"], "ci": utd1["ci"]} if utd1 else None,
                "median_steps": {arm: entry["arms"][arm]["median_steps"] for arm in entry["arms"]},
                "final_return": {arm: entry["arms"][arm]["final_return"] for arm in entry["arms"]},
            },
        )
    ]
