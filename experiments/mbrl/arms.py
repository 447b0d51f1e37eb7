"""The arms of the sample-efficiency benchmark ("The model must pay off", ``experiments/mbrl/sample_efficiency.py``).

Arms are named by data, and an MBPO arm carries its rollout-length controller spec:

* ``mbpo:SPEC``: :class:`~mbrl.algorithms.mbpo.MBPO` with the controller ``SPEC`` (``mbpo:fixed:1``,
  ``mbpo:linear:20,100,1,15``) and ``G`` SAC updates per env step on mixed real/model batches;
* ``sac_same_utd``: SB3 ``SAC`` with ``gradient_steps=G`` (the "no model, same number of updates" control);
* ``sac_utd1``: SB3 ``SAC`` with one update per env step.

Every arm shares the seeds, the budget, the SAC networks, learning rate and batch size, the uniform-random warm-up
and the evaluation protocol: every ``eval_every`` env steps the deterministic policy plays ``eval_episodes`` episodes
whose seeds are fixed. The MBPO arms take :class:`~mbrl.algorithms.mbpo.MBPOConfig`'s defaults for everything the
settings do not name (model data scale, model fitting). :func:`run_arm` runs one (arm, seed); :func:`collect_runs`
runs every one, resumably.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import numpy as np

from experiments.sweep import Unit, grid, run_sweep
from meta.control import make_controller, split_specs

if TYPE_CHECKING:
    from mbrl.algorithms.mbpo import MBPOConfig

#: Stored in every run record and results file of this protocol; files without it are round one.
PROTOCOL = "model-must-pay-off"
#: The thresholds: the mean evaluation return that counts as solved (the MBPO and PETS benchmarks share them).
THRESHOLDS = {"Pendulum-v1": -200.0, "InvertedPendulum-v5": 950.0}
MBPO_PREFIX = "mbpo:"
SAC_SAME_UTD = "sac_same_utd"
SAC_UTD1 = "sac_utd1"
SAC_ARMS = (SAC_SAME_UTD, SAC_UTD1)
DEFAULT_ARMS = ("mbpo:fixed:1", "mbpo:fixed:3", SAC_SAME_UTD, SAC_UTD1)


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
            ``"model"`` / ``"sac"`` mapping overrides single :class:`~mbrl.models.ModelConfig` / ``SACConfig``
            fields, the shared SAC settings above excepted). Empty: the library's defaults. The controller comes
            from the arm name, never from here.
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
            **extra.pop("sac", {}),
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

    def reuse(unit: Unit, record: dict[str, Any]) -> bool:
        expected = {
            "arm": unit.arm,
            "seed": unit.seed,
            "protocol": PROTOCOL,
            "settings": arm_settings(settings, unit.arm),
        }
        stale = sorted(k for k, v in expected.items() if record.get(k) != v)
        if stale:
            raise ValueError(
                f"{unit.path} differs from this run in {stale}; it belongs to another benchmark: delete it or "
                "write to another folder (--tag)"
            )
        return True

    def report(unit: Unit, record: dict[str, Any], records: dict[Unit, dict[str, Any]]) -> None:
        if on_run is not None:
            on_run(record, list(records.values()))

    units = grid(arms, seeds, lambda arm, seed: run_file(partial_dir, arm, seed))
    records = run_sweep(
        units, lambda unit: run(unit.arm, settings, unit.seed), reuse=reuse, on_record=report, show_progress=False
    )
    return list(records.values())
