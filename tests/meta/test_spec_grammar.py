"""The one spec grammar of meta.control.spec: parsing, the one number parser, kind refusals, and the registry's
factories; and ``import meta.control`` pulling in no torch or gymnasium."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from meta.control import make_controller
from meta.control.spec import (
    ALLOCATOR,
    DART,
    GUIDANCE,
    KINDS,
    ROLLOUT_LENGTH,
    SPECS,
    TOKEN_CONTROLLER,
    Spec,
    SpecKind,
    available_specs,
    build_spec,
    parse_spec,
)


def test_parse_spec_reads_name_and_arguments() -> None:
    spec = parse_spec(" Fixed : 5 , ", ROLLOUT_LENGTH)
    assert (spec.name, spec.args, spec.kind) == ("fixed", ("5",), ROLLOUT_LENGTH)
    assert parse_spec("uniform", ALLOCATOR).args == ()
    assert parse_spec("learned:runs/a,b/meta_policy.pt", ROLLOUT_LENGTH).raw_args == "runs/a,b/meta_policy.pt"


def test_numbers_is_the_one_number_parser() -> None:
    spec = parse_spec("hapo:0.2,1e0,5", TOKEN_CONTROLLER)
    assert spec.numbers("A,B,C", 3, 3) == [0.2, 1.0, 5.0]
    whole = spec.numbers("A,B,C", whole=(2,))
    assert whole == [0.2, 1.0, 5] and isinstance(whole[2], int)
    assert parse_spec("fixed:8.0", ROLLOUT_LENGTH).numbers("K", 1, 1, whole=True) == [8]
    with pytest.raises(ValueError, match=r"token controller spec 'hapo:0.2,1e0,5' takes A,B, got 3 number\(s\)"):
        spec.numbers("A,B", 0, 2)
    with pytest.raises(ValueError, match="takes A,B,C,D, got 3"):
        spec.numbers("A,B,C,D", 4)
    with pytest.raises(ValueError, match=r"A must be a whole number, got '0\.2' \(A,B,C\)"):
        spec.numbers("A,B,C", whole=True)
    for bad in ("fixed:x", "fixed:nan", "fixed:inf"):
        with pytest.raises(ValueError, match="controller spec"):
            make_controller(bad)


@pytest.mark.parametrize(
    ("text", "right_kind", "wrong_kind"),
    [
        ("uniform:8", ALLOCATOR, ROLLOUT_LENGTH),
        ("fixed:4", ROLLOUT_LENGTH, ALLOCATOR),
        ("hapo:0.2,1", TOKEN_CONTROLLER, GUIDANCE),
        ("hbpo:0.05,4,6", GUIDANCE, TOKEN_CONTROLLER),
        ("dart:1,4,8,2", DART, ALLOCATOR),
        ("learned:x.pt", ROLLOUT_LENGTH, DART),
    ],
)
def test_a_spec_of_another_kind_is_refused_with_its_builder(
    text: str, right_kind: SpecKind, wrong_kind: SpecKind
) -> None:
    name = text.partition(":")[0]
    message = (
        f"'{name}' is {right_kind.article} {right_kind.title} spec, not {wrong_kind.article} {wrong_kind.title}: "
        f"build '{text}' with {right_kind.builder}"
    )
    with pytest.raises(ValueError) as info:
        parse_spec(text, wrong_kind)
    assert str(info.value) == message


def test_unknown_names_list_the_kinds_own_names() -> None:
    with pytest.raises(
        ValueError, match=r"unknown allocator 'nope' in spec 'nope:1'; known RLVR allocator specs: ar3po, "
    ):
        build_spec(ALLOCATOR, "nope:1")
    with pytest.raises(ValueError, match=r"known DART trainer specs: dart, dart_sync$"):
        build_spec(DART, "darts")


def test_every_name_has_one_kind_and_an_importable_factory() -> None:
    assert set(KINDS.values()) == {entry.kind for entry in SPECS.values()}
    assert sorted(SPECS) == sorted(name for kind in KINDS.values() for name in available_specs(kind))
    for name, entry in SPECS.items():
        assert isinstance(entry.factory, str), name
        module, _, function = entry.factory.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), name
        builder_module, _, builder = entry.kind.builder.rpartition(".")
        assert callable(getattr(importlib.import_module(builder_module), builder)), entry.kind.builder


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("fixed:3", ROLLOUT_LENGTH, "Fixed(3)"),
        ("random:0,32,7", ROLLOUT_LENGTH, "RandomMetaPolicy(0, 32, seed=7)"),
        ("hbpo:0.05,4,6", GUIDANCE, "HBPO(budgets=[4, 6], alpha=0.05)"),
        ("arpo:0.5,1,4,2", TOKEN_CONTROLLER, "ARPO(alpha=0.5, beta=1.0, k=4, branches=2)"),
    ],
)
def test_build_spec_builds_through_the_registry(text: str, kind: SpecKind, expected: str) -> None:
    assert repr(build_spec(kind, text)) == expected


def test_allocator_and_dart_specs_refuse_fractions() -> None:
    with pytest.raises(ValueError, match=r"allocator spec 'uniform:8\.5': G must be a whole number"):
        build_spec(ALLOCATOR, "uniform:8.5")
    with pytest.raises(ValueError, match=r"DART spec 'dart:1,4\.5': N_MIN must be a whole number"):
        build_spec(DART, "dart:1,4.5")
    config = build_spec(DART, "dart_sync:4,8,2,inline")
    assert (config.n_min, config.n_max, config.workers, config.backend, config.synchronous) == (4, 8, 2, "inline", True)


def test_spec_is_plain_data() -> None:
    spec = Spec(text="fixed:1", name="fixed", args=("1",), kind=ROLLOUT_LENGTH)
    assert spec == parse_spec("fixed:1", ROLLOUT_LENGTH)


@pytest.mark.parametrize("module", ["meta", "meta.control"])
def test_import_pulls_in_no_torch_or_gymnasium(module: str) -> None:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True, text=True, check=True
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if "|" in line}
    heavy = {
        m for m in imported if m.split(".")[0] in ("torch", "gymnasium", "stable_baselines3", "transformers", "trl")
    }
    assert not heavy, sorted(heavy)[:5]
    assert "numpy" in imported
