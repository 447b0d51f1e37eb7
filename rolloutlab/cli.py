"""The ``rolloutlab`` command: one sub-command per pillar plus ``bench``.

Typer is the CLI library: each pillar owns a small ``typer.Typer`` app in its own package (``planning/wordle/cli.py``,
``mbrl/cli.py``, ...) and this top floor mounts them, so a pillar's commands live beside its code while ``--help``
shows one tree. Pillar CLI modules import heavy dependencies (torch, SB3, transformers) inside their commands, which
keeps ``rolloutlab --help`` fast.
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path
from typing import Annotated

import typer

from rolloutlab import __version__
from rolloutlab.bench import (
    CheckoutMissing,
    PillarEntry,
    expected_seconds,
    load_quick_bench,
    previous_seconds,
    run_suite,
)
from rolloutlab.runs import output_dir_option

# (name, module holding the pillar's Typer `app` or None, the checkout module holding its `quick_bench`), in the order
# the bench runs them. PETS has no sub-command of its own: it trains as `rolloutlab mbrl train --algo pets`. The quick
# benches are benchmark protocol, in the clone's experiments/ (not installed): see rolloutlab.bench.load_quick_bench.
PILLARS: list[tuple[str, str | None, str]] = [
    ("wordle", "planning.wordle.cli", "experiments.wordle.quick"),
    ("mbrl", "mbrl.cli", "experiments.mbrl.quick"),
    ("mpc", None, "experiments.mbrl.pets_quick"),
    ("meta", "meta.rollout_length.cli", "experiments.meta.quick"),
    ("rlvr", "meta.rlvr.cli", "experiments.rlvr.quick"),
    ("incontext", "meta.incontext.cli", "experiments.incontext.quick"),
]

# Sub-commands with no line in the bench: (name, module holding its Typer `app`).
COMMANDS: list[tuple[str, str]] = [("tokenizer", "meta.tokenizer.cli")]

# Modules imported before mounting, for what they register into a lower pillar that must not import them itself:
# planning.mpc adds --algo pets to `rolloutlab mbrl train`. (Every spec name, `learned:PATH` and the RLVR ones included,
# is in the one registry of meta.control.spec, so no spec needs an import here.)
EXTENSIONS: list[str] = ["planning.mpc.cli"]

app = typer.Typer(
    name="rolloutlab",
    help="Model-based and planning RL: deciding how far, and how much, to roll out.",
    no_args_is_help=True,
    add_completion=False,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"rolloutlab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version_callback, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """rolloutlab: model-based and planning RL."""


@app.command()
def bench(
    out: Annotated[
        Path, typer.Option(help="Parent directory for the bench-<time> folder.", callback=output_dir_option)
    ] = Path("runs"),
    only: Annotated[
        str | None,
        typer.Option(help=f"Comma-separated pillars to run: {','.join(n for n, _, _ in PILLARS)} (default: all)."),
    ] = None,
) -> None:
    """Run each pillar's headline benchmark at its small default size and print one summary table."""
    from rolloutlab.threads import set_torch_threads

    set_torch_threads()
    wanted = None if only is None else {name.strip() for name in only.split(",") if name.strip()}
    if wanted is not None and not wanted:
        raise typer.BadParameter("no pillar named; leave --only out to run them all", param_hint="--only")
    known = {name for name, _, _ in PILLARS}
    if wanted is not None and not wanted <= known:
        raise typer.BadParameter(
            f"unknown pillar(s) {sorted(wanted - known)}; known: {sorted(known)}", param_hint="--only"
        )
    # Each pillar's progress bar runs against its time in the last suite under --out (this machine), else the figure
    # its quick bench declares.
    last = previous_seconds(out)
    try:
        entries = [
            PillarEntry(name, load_quick_bench(module), last.get(name) or expected_seconds(module))
            for name, _, module in PILLARS
            if wanted is None or name in wanted
        ]
    except CheckoutMissing as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(code=2) from exc
    out_dir = out / f"bench-{time.strftime('%Y%m%d-%H%M%S')}"
    summary = run_suite(entries, out_dir)
    if not summary["passed"]:  # a row that says NO, or a pillar that failed
        raise typer.Exit(code=1)


def _mount_pillars() -> None:
    for extension in EXTENSIONS:
        importlib.import_module(extension)
    for name, cli_module, _ in PILLARS:
        if cli_module is not None:
            app.add_typer(importlib.import_module(cli_module).app, name=name)
    for name, cli_module in COMMANDS:
        app.add_typer(importlib.import_module(cli_module).app, name=name)


_mount_pillars()


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
