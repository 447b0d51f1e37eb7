"""``rolloutlab mbrl``: train MBPO or Dyna-DQN runs, resume them, and run the sample-efficiency benchmark.

Heavy libraries (torch, SB3) are imported inside the commands so ``rolloutlab --help`` stays fast.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from rolloutlab.device import DEVICE_HELP, device_option
from rolloutlab.runs import output_dir_option

#: ``--env`` when it is left out: a continuous-action env for MBPO and PETS, a discrete one with rl-zoo DQN settings
#: for Dyna-DQN.
DEFAULT_ENV = "Pendulum-v1"
DEFAULT_DYNA_ENV = "CartPole-v1"

app = typer.Typer(
    help="World-model learners: MBPO (SB3 SAC) and Dyna-DQN with a rollout-length controller.",
    no_args_is_help=True,
    add_completion=False,
)


def _check_controller(spec: str) -> None:
    from meta.control import make_controller

    try:
        make_controller(spec)
    except (ValueError, KeyError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--controller") from exc


def _check_sac_backend(backend: str, algo: str, resume: Path | None) -> None:
    """Refuse ``--sac-backend`` for anything but a new MBPO run, an unknown name, or ``sbx`` without its extra."""
    from mbrl.algorithms.sac_backends import check_backend

    if algo != "mbpo" or resume is not None:
        reason = "a resumed run keeps its saved backend" if resume is not None else f"--algo {algo} has no SAC"
        raise typer.BadParameter(f"--sac-backend applies to new MBPO runs only ({reason})", param_hint="--sac-backend")
    try:
        check_backend(backend)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--sac-backend") from exc


def _check_device(device: str) -> None:
    """Refuse a device this machine lacks that came from a preset or a resumed run (``--device`` checks its own)."""
    from rolloutlab.device import DeviceError, resolve_device

    try:
        resolve_device(device)
    except DeviceError as exc:
        raise typer.BadParameter(f"{exc}; choose another with --device", param_hint="--device") from exc


def _mbpo_trainer() -> tuple[Any, Callable[..., Any]]:
    from mbrl.algorithms.mbpo import MBPO, load_config

    return MBPO, load_config


#: ``--algo`` values run by the generic driver flow: name -> a loader returning ``(driver class, load_config)``. The
#: driver class has MBPO's interface (``cls(cfg, run_dir=...)``, ``cls.resume(run_dir, device=None)``, ``learn()``,
#: ``eval_history``, ``env_steps``, ``run_dir``; the config has a ``device`` field). Other pillars add theirs with
#: :func:`register_trainer` (planning.mpc registers ``pets`` when the ``rolloutlab`` command mounts this app), so this
#: module never imports them.
TRAINERS: dict[str, Callable[[], tuple[Any, Callable[..., Any]]]] = {"mbpo": _mbpo_trainer}


def register_trainer(name: str, load: Callable[[], tuple[Any, Callable[..., Any]]]) -> None:
    """Make ``rolloutlab mbrl train --algo NAME`` run the driver that ``load()`` returns (imported lazily)."""
    if name == "dyna":
        raise ValueError("'dyna' is built in")
    TRAINERS[name] = load


def _algo_names() -> str:
    return ", ".join(sorted([*TRAINERS, "dyna"]))


@app.command()
def train(
    algo: Annotated[
        str,
        typer.Option(
            help="mbpo (continuous actions, SB3 SAC), dyna (discrete, Dyna-DQN) or pets (MPC on the learned model; "
            "from the rolloutlab command)."
        ),
    ] = "mbpo",
    env: Annotated[
        str | None,
        typer.Option(
            "--env",
            help=f"Gymnasium id, e.g. Pendulum-v1 or rolloutlab/PointMass-v0 (default: {DEFAULT_ENV}; "
            f"{DEFAULT_DYNA_ENV} for dyna).",
        ),
    ] = None,
    steps: Annotated[
        int | None, typer.Option(min=1, help="Interaction budget in env steps (default: the config's).")
    ] = None,
    controller: Annotated[
        str | None,
        typer.Option(
            help="Rollout-length controller (for pets: the planning horizon): fixed:5, linear:20,150,1,15, incdec:32"
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for everything in the run.")] = 0,
    config: Annotated[Path | None, typer.Option(help="YAML preset loaded into the algorithm's config dataclass.")] = (
        None
    ),
    resume: Annotated[
        Path | None, typer.Option(help="Continue the run in this directory to its original budget.")
    ] = None,
    out: Annotated[
        Path, typer.Option(help="Parent directory of new run directories.", callback=output_dir_option)
    ] = Path("runs"),
    checkpoint_every: Annotated[
        int | None, typer.Option(min=0, help="Env steps between whole-run checkpoints (default: the config's).")
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(
            help=f"{DEVICE_HELP} With --resume: continue there instead of the saved device.", callback=device_option
        ),
    ] = None,
    sac_backend: Annotated[
        str | None,
        typer.Option(
            help="How MBPO's SAC updates run: sb3 (SB3's SAC.train), fused (the same update, less overhead) or sbx "
            "(SBX's JAX SAC, fastest on a CPU; pip install 'rolloutlab[sbx]'). Default: the config's (sb3)."
        ),
    ] = None,
) -> None:
    """Train one run (or resume one with --resume RUN_DIR) and print where it wrote its results."""
    from rolloutlab.threads import set_torch_threads

    set_torch_threads()
    if sac_backend is not None:
        _check_sac_backend(sac_backend, algo, resume)
    if algo == "dyna":
        _train_dyna(env or DEFAULT_DYNA_ENV, steps, controller, seed, config, resume, out, device)
        return
    if algo not in TRAINERS:
        raise typer.BadParameter(f"unknown algorithm {algo!r}; choose one of {_algo_names()}", param_hint="--algo")
    from rolloutlab.checkpoint import CheckpointError
    from rolloutlab.config import ConfigError
    from rolloutlab.device import DeviceError
    from rolloutlab.runs import run_dir_kept_on_success

    driver, load_config = TRAINERS[algo]()
    if resume is not None:
        try:
            run = driver.resume(resume, device=device)
        except CheckpointError as exc:
            raise typer.BadParameter(str(exc), param_hint="--resume") from exc
        except DeviceError as exc:  # the device the run was saved on is not here
            raise typer.BadParameter(f"{exc}; continue it elsewhere with --device", param_hint="--device") from exc
    else:
        overrides: dict[str, Any] = {"env_id": env or DEFAULT_ENV, "seed": seed}
        if device is not None:
            overrides["device"] = device
        if steps is not None:
            overrides["total_steps"] = steps
        if controller is not None:
            _check_controller(controller)
            overrides["controller"] = controller
        if checkpoint_every is not None:
            overrides["checkpoint_every"] = checkpoint_every
        try:
            cfg = load_config(config, overrides)
        except ConfigError as exc:
            raise typer.BadParameter(str(exc), param_hint="--config") from exc
        if sac_backend is not None:
            cfg.sac.backend = sac_backend  # the preset's other SAC settings stay
        import gymnasium as gym

        try:
            # A configuration the driver refuses before any work (PETS without a reward function, an unknown env
            # id) leaves no run directory behind that looks like a started run.
            with run_dir_kept_on_success(f"{algo}-{cfg.env_id}", cfg.seed, root=out, config=cfg) as run_dir:
                run = driver(cfg, run_dir=run_dir)
        except (ValueError, gym.error.Error) as exc:
            raise typer.BadParameter(str(exc), param_hint="--config/--env/--controller") from exc
    run.learn()
    final = run.eval_history[-1][1] if run.eval_history else float("nan")
    typer.echo(f"done: {run.env_steps} env steps, final eval return {final:.1f}; results in {run.run_dir}")


def _train_dyna(
    env: str,
    steps: int | None,
    controller: str | None,
    seed: int,
    config: Path | None,
    resume: Path | None,
    out: Path,
    device: str | None,
) -> None:
    """One Dyna-DQN run (:class:`mbrl.algorithms.dyna.DynaDQN`): rl-zoo's DQN values for the env, then the preset."""
    import dataclasses

    import gymnasium as gym

    from mbrl.algorithms.dyna import DynaConfig, DynaDQN
    from rolloutlab.checkpoint import CheckpointError
    from rolloutlab.config import ConfigError, from_dict, read_yaml_mapping
    from rolloutlab.device import DeviceError
    from rolloutlab.runs import run_dir_kept_on_success

    if resume is not None:
        try:
            run = DynaDQN.resume(resume, device=device)
        except CheckpointError as exc:
            raise typer.BadParameter(str(exc), param_hint="--resume") from exc
        except DeviceError as exc:
            raise typer.BadParameter(f"{exc}; choose another with --device", param_hint="--device") from exc
    else:
        spec = controller or "fixed:1"
        _check_controller(spec)
        try:
            values = dataclasses.asdict(DynaConfig.for_env(env))
            if config is not None:
                values.update(read_yaml_mapping(config))
            if steps is not None:
                values["budget"] = steps
            if device is not None:
                values["device"] = device
            cfg = from_dict(DynaConfig, values)
        except (ConfigError, ValueError, OSError) as exc:
            raise typer.BadParameter(str(exc), param_hint="--config/--env") from exc
        _check_device(cfg.device)
        try:
            # Refused before any work (continuous actions, an unknown env id): leave no run directory behind.
            with run_dir_kept_on_success(f"dyna-{env}", seed, root=out) as run_dir:
                run = DynaDQN(env, cfg, seed=seed, controller=spec, run_dir=run_dir)
        except (ValueError, TypeError, gym.error.Error) as exc:
            raise typer.BadParameter(str(exc), param_hint="--env/--config") from exc
    run.learn()
    final = run.eval_history[-1][1] if run.eval_history else float("nan")
    typer.echo(f"done: {run.env_steps} env steps, final greedy return {final:.1f}; results in {run.run_dir}")


@app.command()
def bench(
    out: Annotated[
        Path, typer.Option(help="Where the quick benchmark writes its JSON.", callback=output_dir_option)
    ] = Path("runs/mbrl-bench"),
) -> None:
    """Run the sample-efficiency benchmark at its small size (MBPO vs SAC, same budget and seeds; needs a clone)."""
    from rolloutlab.bench import CheckoutMissing, PillarEntry, expected_seconds, load_quick_bench, run_with_progress
    from rolloutlab.threads import set_torch_threads

    try:
        quick_bench = load_quick_bench("experiments.mbrl.quick")
    except CheckoutMissing as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(code=2) from exc
    set_torch_threads()
    for line in run_with_progress(PillarEntry("mbrl", quick_bench, expected_seconds("experiments.mbrl.quick")), out):
        ok = "—" if line.passed is None else ("yes" if line.passed else "NO")
        typer.echo(
            f"{line.benchmark}: {line.metric} = {line.value} (target {line.target}; ok {ok}; {line.seconds:.0f}s)"
        )
        typer.echo(f"  full benchmark: {line.command}")


if __name__ == "__main__":
    app()
