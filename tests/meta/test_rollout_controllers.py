"""Hand-computed values of the rollout-length heuristics: INC / DEC / INC-DEC, the UP/DOWN/NOOP rule, uncertainty,
the random meta-policy; and the one spec registry (every kind's names in one table)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from meta.control import (
    BudgetLinear,
    RandomMetaPolicy,
    RolloutLengthController,
    StepAction,
    UncertaintyTruncation,
    available_controllers,
    make_controller,
    register_spec,
    split_specs,
    step_rollout_length,
)
from meta.control.spec import ROLLOUT_LENGTH

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        # budget fractions 0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0 with K_max = 32
        ("inc:32", [0, 3, 8, 16, 24, 29, 32]),
        ("dec:32", [32, 29, 24, 16, 8, 3, 0]),
        ("incdec:32", [0, 6, 16, 32, 16, 6, 0]),
    ],
)
def test_budget_linear_schedules(spec: str, expected: list[int]) -> None:
    controller = make_controller(spec)
    fractions = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]
    assert [controller.decide({"budget_fraction": f}) for f in fractions] == expected


def test_budget_linear_rounding_and_errors() -> None:
    # 0.15 * 10 = 1.4999999999999998 in floats; the schedule must still round half up to 2.
    assert BudgetLinear("inc", 10).decide({"budget_fraction": 0.15}) == 2
    assert BudgetLinear("inc", 32).decide({"budget_fraction": 1.7}) == 32  # clipped to [0, 1]
    with pytest.raises(KeyError, match="budget_fraction"):
        BudgetLinear("dec", 8).decide({})
    with pytest.raises(ValueError):
        BudgetLinear("sideways", 8)
    with pytest.raises(ValueError):
        make_controller("incdec:a")


@pytest.mark.parametrize(
    ("k", "up", "down"),
    [(0, 1, 0), (1, 2, 0), (2, 3, 1), (3, 5, 1), (5, 8, 2), (21, 32, 10), (22, 32, 11), (32, 32, 16)],
)
def test_up_down_rule_matches_paper(k: int, up: int, down: int) -> None:
    # UP: ceil(1.5 K) or 1 from 0; DOWN: floor(K / 2); capped at K_max = 32 (Bhatia et al. 2022, section 4).
    assert step_rollout_length(k, StepAction.UP, 32) == up
    assert step_rollout_length(k, StepAction.DOWN, 32) == down
    assert step_rollout_length(k, StepAction.NOOP, 32) == k


def test_up_chain_from_zero() -> None:
    k, chain = 0, []
    for _ in range(10):
        k = step_rollout_length(k, StepAction.UP, 32)
        chain.append(k)
    assert chain == [1, 2, 3, 5, 8, 12, 18, 27, 32, 32]
    with pytest.raises(ValueError):
        step_rollout_length(-1, StepAction.UP, 32)


def test_uncertainty_truncation() -> None:
    controller = make_controller("uncertainty:75")
    assert isinstance(controller, UncertaintyTruncation)
    assert controller.decide({}) == 32
    first = np.array([0.1, 0.2, 0.3, 0.4, 0.5])  # 75th percentile (linear interpolation) = 0.4
    np.testing.assert_array_equal(controller.keep(0, first), [True, True, True, True, False])
    assert controller.threshold == pytest.approx(0.4)
    # Later steps use the step-0 threshold.
    np.testing.assert_array_equal(controller.keep(3, np.array([0.39, 0.41, 5.0])), [True, False, False])
    saved = controller.state_dict()
    restored = UncertaintyTruncation(75)
    restored.load_state_dict(saved)
    np.testing.assert_array_equal(restored.keep(1, np.array([0.35, 0.45])), [True, False])
    # A new batch recalibrates at its step 0.
    controller.keep(0, np.array([1.0, 2.0, 3.0]))
    assert controller.threshold == pytest.approx(2.5)
    assert make_controller("uncertainty:95,16").decide({}) == 16
    with pytest.raises(ValueError):
        make_controller("uncertainty:0")


def test_uncertainty_threshold_is_xi_times_the_first_step_percentile() -> None:
    """MACURA's threshold xi * P_zeta: the third spec argument is xi; specs without it keep xi = 1."""
    first = np.array([0.1, 0.2, 0.3, 0.4, 0.5])  # 75th percentile 0.4
    macura = make_controller("uncertainty:75,16,2")
    assert isinstance(macura, UncertaintyTruncation) and (macura.k_max, macura.xi) == (16, 2.0)
    np.testing.assert_array_equal(macura.keep(0, first), [True] * 5)  # 2 x 0.4 = 0.8 keeps every first step
    assert macura.threshold == pytest.approx(0.8)
    np.testing.assert_array_equal(macura.keep(5, np.array([0.79, 0.81])), [True, False])
    old = make_controller("uncertainty:75,16")
    assert isinstance(old, UncertaintyTruncation) and old.xi == 1.0
    old.keep(0, first)
    assert old.threshold == pytest.approx(0.4)
    assert make_controller("uncertainty:95").k_max == 32  # type: ignore[attr-defined]
    assert "xi=2" in repr(macura) and "xi" not in repr(old)
    for bad in ("uncertainty:95,32,0", "uncertainty:95,32,-1", "uncertainty:95,32,2,1", "uncertainty:95,32.5"):
        with pytest.raises(ValueError, match="uncertainty"):
            make_controller(bad)


def test_registered_names() -> None:
    assert {"inc", "dec", "incdec", "uncertainty"} <= set(available_controllers())


def test_random_spec_round_trips_state_dict() -> None:
    controller = make_controller("random:2,16,7")
    assert isinstance(controller, RandomMetaPolicy)
    assert (controller.k_init, controller.k_cap, controller.seed) == (2, 16, 7)
    first = [controller.decide({}) for _ in range(4)]
    saved = controller.state_dict()
    later = [controller.decide({}) for _ in range(8)]
    restored = make_controller("random:2,16,7")
    restored.load_state_dict(saved)
    assert [restored.decide({}) for _ in range(8)] == later
    fresh = RandomMetaPolicy(2, 16, 7)
    assert first + later == [fresh.decide({}) for _ in range(12)]
    assert max(first + later) <= 16 and len(set(first + later)) > 1
    controller.reset()
    assert controller.state_dict() == {"k": 2, "draws": 0}
    # Without SEED the policy draws from seed 0 until a caller seeds it (the meta comparison seeds every run).
    unseeded = make_controller("random:0,32")
    assert isinstance(unseeded, RandomMetaPolicy) and unseeded.seed is None
    seeded_zero = RandomMetaPolicy(0, 32, 0)
    assert [unseeded.decide({}) for _ in range(6)] == [seeded_zero.decide({}) for _ in range(6)]
    for bad in ("random:8,4", "random:0", "random:0,32,-1", "random:0,32,1,2"):
        with pytest.raises(ValueError):
            make_controller(bad)


# Every rollout-length spec the docs and the meta comparison use; the docs' own specs are checked below too.
DOCUMENTED_SPECS = [
    "fixed:0", "fixed:1", "fixed:5", "fixed:16", "fixed:32", "dec:32", "inc:32", "incdec:8", "incdec:32",
    "linear:0,5,1,32", "linear:20,100,1,15", "linear:20,150,1,15", "uncertainty:95", "uncertainty:95,10",
    "uncertainty:95,32", "uncertainty:95,32,2", "random:0,32", "random:0,32,3",
]  # fmt: skip


@pytest.mark.parametrize("spec", DOCUMENTED_SPECS)
def test_every_documented_spec_parses(spec: str) -> None:
    controller = make_controller(spec)
    assert isinstance(controller, RolloutLengthController)
    assert controller.max_length() is not None
    feedback = {"epoch": 3, "budget_fraction": 0.3, "current_length": 1}
    assert 0 <= controller.decide(feedback) <= int(controller.max_length() or 0)


def test_specs_quoted_in_the_docs_parse() -> None:
    # Specs quoted in README.md and docs/: `--controller SPEC`, `--arms A,B,...` (rollout-length arms; dqn_zoo and
    # learned:PATH aside), `make_controller("SPEC")` and `SPEC` in backticks.
    names = "|".join(n for n in available_controllers() if n != "learned")
    patterns = [
        re.compile(r"--controller[ =]([^\s`|]+)"),
        re.compile(r"--arms[ =]([^\s`|]+)"),
        re.compile(r'make_controller\("([^"]+)"\)'),
        re.compile(rf"`((?:{names}):[0-9.,]+)`"),
    ]
    quoted = set()
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        # The RLVR benchmark scripts take --arms too, naming allocator arms (uniform_g8, ar3po): not this kind.
        lines = doc.read_text(encoding="utf-8").splitlines()
        text = "\n".join(line for line in lines if "experiments/rlvr/" not in line)
        for pattern in patterns:
            for match in pattern.finditer(text):
                quoted |= set(split_specs(match.group(1).replace("\\", "")))
    # Not controller specs: the SB3 baseline arm, saved policies, and the MBPO-vs-SAC benchmark's arm names
    # (`mbpo:SPEC` carries a spec, checked through its SPEC part; `sac_*` arms have none); the gate's arms are a spec
    # with an optional `+compute` / `+true` modifier, checked through the spec.
    quoted = {q.removeprefix("mbpo:").split("+")[0] for q in quoted if not q.startswith("sac_")}
    quoted = {q for q in quoted if q not in ("SPEC", "dqn_zoo") and not q.startswith("learned:")}
    assert {"fixed:1", "incdec:32", "linear:20,100,1,15", "fixed:16", "random:0,32"} <= quoted
    for spec in sorted(quoted):
        assert isinstance(make_controller(spec), RolloutLengthController), spec


def test_wrong_kind_and_unknown_specs_are_refused_at_parse_time() -> None:
    # No import of meta.rlvr needed: every spec name is in the one registry of meta.control.spec.
    pointer = (
        r"'uniform' is an RLVR allocator spec, not a rollout-length controller.*meta\.rlvr\.allocators\.make_allocator"
    )
    with pytest.raises(ValueError, match=pointer):
        make_controller("uniform:8")
    with pytest.raises(ValueError, match="'ar3po' is an RLVR allocator spec"):
        make_controller("ar3po")
    with pytest.raises(ValueError, match=r"unknown controller 'k16'.*fixed, .*linear, random, uncertainty"):
        make_controller("k16")
    assert not {"uniform", "ar3po"} & set(available_controllers())
    with pytest.raises(ValueError, match="already an RLVR allocator"):
        register_spec(ROLLOUT_LENGTH, "uniform", lambda spec: BudgetLinear("inc", 8))


def test_controllers_never_import_a_pillar() -> None:
    # Numpy only, and no pillar pulled in by building a rollout-length spec or refusing another kind's name: the
    # registry names factories by path and imports one only when a spec of its own is built.
    code = (
        "import sys\n"
        "for name in ('torch', 'gymnasium', 'stable_baselines3', 'trl', 'transformers'):\n"
        "    sys.modules[name] = None\n"
        "import meta.control as c\n"
        "for spec in ('fixed:4', 'linear:0,5,1,32', 'inc:8', 'uncertainty:95', 'random:0,32,1'):\n"
        "    c.make_controller(spec)\n"
        "for spec in ('uniform:8', 'hapo:0.2,1', 'dart:1'):\n"
        "    try:\n"
        "        c.make_controller(spec)\n"
        "    except ValueError as exc:\n"
        "        assert 'not a rollout-length controller' in str(exc), exc\n"
        "    else:\n"
        "        raise AssertionError(spec)\n"
        "print(sorted(m for m in sys.modules if m.startswith(('meta', 'mbrl', 'envs', 'planning', 'rolloutlab'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    expected = ["meta", "meta.control", "meta.control.protocol", "meta.control.rollout_length", "meta.control.spec"]
    assert result.stdout.strip() == str(expected)


@pytest.mark.parametrize("module", ["protocol", "spec", "rollout_length", "__init__"])
def test_control_sources_import_only_the_standard_library_numpy_and_meta_control(module: str) -> None:
    # Every import statement, a function-local one included, so a lazy import reaching a pillar cannot hide from the
    # subprocess check above (which sees only the imports the specs it builds happen to run).
    tree = ast.parse((ROOT / "meta" / "control" / f"{module}.py").read_text(encoding="utf-8"))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a relative import would reach into the meta package"
            imported.add(node.module or "")
    allowed = sys.stdlib_module_names | {"numpy"}
    outside = {name for name in imported if name.split(".")[0] not in allowed and not name.startswith("meta.control")}
    assert not outside, f"meta/control/{module}.py imports {sorted(outside)}"
    assert imported  # the walk sees the module's imports at all


def test_learned_spec_is_registered_without_importing_its_package() -> None:
    code = (
        "import sys\n"
        "import meta.control as c\n"
        "assert 'learned' in c.available_controllers()\n"
        "assert 'meta.rollout_length' not in sys.modules\n"
        "try:\n"
        "    c.make_controller('learned:')\n"
        "except ValueError as exc:\n"
        "    assert 'needs a path' in str(exc), exc\n"
        "else:\n"
        "    raise AssertionError('learned: without a path was accepted')\n"
        "assert 'meta.rollout_length.learned' in sys.modules  # imported lazily, once a learned spec was built\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_split_specs_keeps_spec_arguments_together() -> None:
    assert split_specs("fixed:0, linear:0,5,1,32,uncertainty:95,32,random:0,32,7,dqn_zoo,,learned:runs/x") == [
        "fixed:0",
        "linear:0,5,1,32",
        "uncertainty:95,32",
        "random:0,32,7",
        "dqn_zoo",
        "learned:runs/x",
    ]
    assert split_specs("") == []
