"""Fuzz every sub-command's options and preset files: a refusal is exit code 2 in one line, never a traceback, and
leaves nothing on disk.

Each drawn command line ends with a *poison*: an option value refused before any work starts (parsed by the command
line library, or a malformed ``--config`` the one preset loader refuses), so no example ever trains, benchmarks or
serves. Placed last, it is checked last, so every drawn option before it is converted and checked first.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import pytest
import typer
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from rolloutlab.cli import app

#: Every leaf command and the argument refused up front that ends each drawn command line. ``wordle cache clear``
#: deletes the user's cache and takes no options, so it and ``wordle cache info`` are left out.
POISON: dict[str, list[str]] = {
    "bench": ["--out", "/proc/rolloutlab-fuzz"],
    "wordle play": ["--alternatives", "0"],
    "wordle serve": ["--alternatives", "0"],
    "wordle solve": ["--top-k", "not-a-number"],
    "wordle bench": ["--json", "/proc/rolloutlab-fuzz.json"],
    "mbrl train": ["--steps", "0"],
    "mbrl bench": ["--out", "/proc/rolloutlab-fuzz"],
    "meta train": ["--budget", "0"],
    "meta eval": ["--runs", "0"],
    "rlvr sft": ["--steps", "0"],
    "rlvr train": ["--steps", "0"],
    "rlvr bench": ["--out", "/proc/rolloutlab-fuzz"],
    "incontext train": ["--steps", "0"],
    "incontext eval": ["--tasks", "0"],
    "tokenizer train": ["--steps", "0"],
    "tokenizer eval": ["--images", "0"],
}
LEFT_OUT = {"wordle cache info", "wordle cache clear"}
#: The commands that read a YAML preset with ``--config``: a malformed preset alone must be refused up front.
CONFIG_COMMANDS = ["mbrl train", "mbrl train --algo dyna", "mbrl train --algo pets", "meta train", "rlvr sft"]
CONFIG_COMMANDS += ["rlvr train", "incontext train", "tokenizer train"]
#: Options that name a file or folder to read or write.
PATH_OPTIONS = {"--out", "--config", "--resume", "--checkpoint", "--run-dir", "--runs-root", "--json", "--lists"}
#: Resuming ignores ``--config``; the poison of the preset test must be the only way in.
RESUME_OPTIONS = {"--resume", "--run-dir"}


def _leaf_commands() -> dict[str, list[tuple[str, bool]]]:
    """``"pillar command"`` -> its options as ``(name, is_flag)``, positional arguments as ``("", False)``."""
    found: dict[str, list[tuple[str, bool]]] = {}

    def walk(command: object, path: list[str]) -> None:
        children = getattr(command, "commands", None)
        if children is not None:
            for name, child in children.items():
                walk(child, [*path, name])
            return
        params = getattr(command, "params", [])
        found[" ".join(path)] = [
            (
                param.opts[0] if getattr(param, "param_type_name", "") == "option" else "",
                bool(getattr(param, "is_flag", False)),
            )
            for param in params
        ]

    walk(typer.main.get_command(app), [])
    return found


COMMANDS = _leaf_commands()


def test_every_command_has_a_poison() -> None:
    assert set(COMMANDS) - LEFT_OUT == set(POISON), "add the new command to POISON (or LEFT_OUT, with why)"


# --- drawn values ---------------------------------------------------------------------------------------------------
# Text a shell can pass: no NUL (argv cannot hold one) and no lone surrogates.
_text = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=24)
_numbers = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.sampled_from(["0", "-1", "-0", "1e999", "-1e999", "nan", "inf", "-inf", "0x10", "1_000", " 5", "5 ", "", "½"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
_specs = st.one_of(
    st.sampled_from(
        [
            "nope:1",
            "fixed:",
            "fixed:-1",
            "fixed:1e999",
            "fixed:nan",
            ",",
            ",,",
            ":",
            "uniform:8",
            "uniform:0",
            "learned:/nonexistent/meta_policy.pt",
            "linear:1,2",
            "hapo:x",
            "arpo:0.5,1,0",
            "ehpo:1,0.1,1.5",
            "dart:0,0,0,nope",
            "guide:-1",
            "hbpo:",
            "knapsack:8,1",
            "gravity=",
            "=1",
            "nope=1",
            "gravity=x",
            "fixed:1,learned:",
            "cuda:x",
            "tpu",
            "mps:0",
            "a,b,c",
            "salet,",
            "zzzzz",
            "qqqqq",
            "none,none",
        ]
    ),
    st.builds(lambda name, args: f"{name}:{args}", _text, _text),
)
# Paths, relative to the example's own directory (the fixtures of `_fixtures`) or absolute.
_paths = st.one_of(
    st.sampled_from(
        [
            "list.yaml",
            "scalar.yaml",
            "nested.yaml",
            "latin1.yaml",
            "broken.yaml",
            "folder.yaml",
            "missing.yaml",
            "list.yaml/below",
            "missing/deeper/file",
            "/proc/rolloutlab-fuzz",
            "/proc/rolloutlab-fuzz/x.json",
            "/nonexistent/run",
            "/proc",
            "/",
            ".",
            "",
        ]
    ),
    _text,
)
_any_value = st.one_of(_numbers, _specs, _text, _paths)


@st.composite
def _command_line(draw: st.DrawFn, command: str, *, skip: frozenset[str] = frozenset()) -> list[str]:
    """``command``'s words, then drawn options (each at most once, in drawn order) and positional arguments."""
    args = command.split()
    params = [p for p in COMMANDS[command.split(" --")[0]] if p[0] not in skip]
    for name, is_flag in draw(st.lists(st.sampled_from(params), unique=True, max_size=6)) if params else []:
        if not name:  # a positional argument
            args.append(draw(st.one_of(_specs, _text, _paths).filter(lambda v: not v.startswith("-"))))
        elif is_flag:
            args.append(name)
        else:
            args += [name, draw(_paths if name in PATH_OPTIONS else _any_value)]
    return args


def _garbage_data() -> st.SearchStrategy[object]:
    leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), _text)
    return st.recursive(
        leaves,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_text, inner, max_size=4)),
        max_leaves=12,
    )


@st.composite
def _bad_preset(draw: st.DrawFn) -> bytes:
    """A preset file's bytes that no config accepts."""
    kind = draw(st.sampled_from(["mapping", "other", "not-utf8", "not-yaml"]))
    if kind == "mapping":
        # Settings of every shape, and always one name no config has: refused, whatever the rest holds.
        data = draw(st.dictionaries(_text, _garbage_data(), max_size=4))
        data["zz_no_such_setting"] = draw(_garbage_data())
        return yaml.safe_dump(data, allow_unicode=True).encode("utf-8")
    if kind == "other":  # a list or a scalar at the top
        data = draw(st.one_of(st.lists(_garbage_data(), min_size=1, max_size=4), st.integers(), st.floats(), _text))
        text = yaml.safe_dump(data, allow_unicode=True)
        return text.encode("utf-8") if yaml.safe_load(text) is not None else b"- 1\n"
    if kind == "not-utf8":
        return draw(st.binary(max_size=40)) + b"\xff"
    return draw(_text).encode("utf-8") + b"\n\x00"  # YAML refuses a NUL character anywhere


def _fixtures(where: Path) -> None:
    (where / "list.yaml").write_text("- total_steps\n- 10\n", encoding="utf-8")
    (where / "scalar.yaml").write_text("42\n", encoding="utf-8")
    (where / "nested.yaml").write_text("a: {b: [1, {c: [[[]]]}]}\n1: x\n", encoding="utf-8")
    (where / "latin1.yaml").write_bytes("env_id: \u00e9t\u00e9\n".encode("latin-1"))
    (where / "broken.yaml").write_text("steps: [1, 2\n", encoding="utf-8")
    (where / "folder.yaml").mkdir()


def _check_refused(args: list[str], preset: bytes | None = None) -> None:
    with tempfile.TemporaryDirectory() as scratch, contextlib.chdir(scratch):
        where = Path(scratch)
        _fixtures(where)
        if preset is not None:
            (where / "poison.yaml").write_bytes(preset)
        before = set(where.rglob("*"))
        result = CliRunner(env={"COLUMNS": "250"}).invoke(app, args, input="")
        left = set(where.rglob("*")) - before
    output = result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, output, result.exception)
    assert result.exit_code == 2, (args, output)
    assert "Traceback" not in output, (args, output)
    assert not left, (args, sorted(left))


_FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# A regression that lets a drawn command start its work fails here instead of training for minutes.
@pytest.mark.timeout(300)
@_FUZZ
@given(data=st.data(), command=st.sampled_from(sorted(POISON)))
def test_drawn_options_are_refused_in_one_line(data: st.DataObject, command: str) -> None:
    args = data.draw(_command_line(command)) + POISON[command]
    _check_refused(args)


@pytest.mark.timeout(300)
@_FUZZ
@given(data=st.data(), command=st.sampled_from(CONFIG_COMMANDS), preset=_bad_preset())
def test_a_malformed_preset_is_refused_before_any_work(data: st.DataObject, command: str, preset: bytes) -> None:
    # No parse-level poison here: the preset is the only thing refused, so the command's own checks all run first.
    args = data.draw(_command_line(command, skip=frozenset(RESUME_OPTIONS | {"--config", "--steps", "--algo"})))
    _check_refused([*args, "--config", "poison.yaml"], preset)
