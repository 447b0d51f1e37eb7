"""The TRL releases the adapter supports: the version check before TRL is imported, the range agreed by the package
extra and the ``make test-trl-matrix`` job, and the version-dependent parts of :mod:`meta.rlvr.trl_internals`.

The version-check tests need no TRL (they run in every environment); the ``trl_internals`` tests need the installed
TRL and run in each venv of ``make test-trl-matrix``, so each end of the range checks its own branch.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from meta.rlvr.trl_limits import SUPPORTED_TRL, check_trl_version, require_supported_trl

ROOT = Path(__file__).resolve().parents[2]
LOW, HIGH = SUPPORTED_TRL
RANGE = re.escape(f">={LOW},<{HIGH}")


def _matrix() -> list[str]:
    """The TRL releases ``make test-trl-matrix`` tests, read from the Makefile."""
    match = re.search(r"^TRL_MATRIX \?= (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert match, "the Makefile sets no TRL_MATRIX"
    return match.group(1).split()


def test_every_release_of_the_range_is_accepted_and_every_other_refused_with_the_range() -> None:
    for version in (f"{LOW}.0", f"{LOW.major}.{LOW.minor}.3", f"{HIGH.major}.{HIGH.minor - 1}.0", "1.16.3"):
        check_trl_version(version)
    below = f"{LOW.major}.{LOW.minor - 1}.2"
    for version in (below, f"{HIGH}.0", "2.0.0", "0.29.1"):
        with pytest.raises(ImportError, match=rf"supports TRL {RANGE} .* found trl {re.escape(version)}\. Install"):
            check_trl_version(version)


def test_the_llm_extra_pins_the_supported_range() -> None:
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert f"trl>={LOW},<{HIGH}" in pyproject["project"]["optional-dependencies"]["llm"]


def test_the_version_matrix_tests_the_oldest_and_the_newest_supported_release() -> None:
    oldest, *_, newest = [Version(v) for v in _matrix()]
    assert oldest.release[:2] == LOW.release[:2], f"the matrix's oldest TRL {oldest} is not the range's low end {LOW}"
    assert newest < HIGH and newest.release[:2] == (HIGH.major, HIGH.minor - 1), (
        f"the matrix's newest TRL {newest} is not the last minor release below {HIGH}"
    )


def test_a_missing_trl_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    with pytest.raises(ImportError, match=rf"needs TRL, which is not installed: pip install 'trl{RANGE}'"):
        require_supported_trl()


def _fake_trl(root: Path, version: str) -> Path:
    """An installed-looking TRL ``version`` that lacks every name the adapter imports."""
    (root / "trl").mkdir(parents=True)
    (root / "trl" / "__init__.py").write_text(f'__version__ = "{version}"\n')
    info = root / f"trl-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: trl\nVersion: {version}\n")
    return root


@pytest.mark.parametrize(
    ("module", "version"),
    [("meta.rlvr.trl", "1.10.0"), ("meta.rlvr.trl_config", "1.10.0"), ("meta.rlvr.trl", "1.17.0")],
)
def test_an_unsupported_trl_is_refused_with_the_range_before_trl_is_imported(
    tmp_path: Path, module: str, version: str
) -> None:
    fake = _fake_trl(tmp_path / "site", version)
    code = f"import sys\ntry:\n    import {module}\nexcept ImportError as e:\n    print(e)\n"
    code += "    print('trl' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": f"{fake}{os.pathsep}{ROOT}", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    lines = out.stdout.strip().splitlines()
    assert out.returncode == 0 and len(lines) == 2, out.stdout + out.stderr
    assert lines[0] == (
        f"meta.rlvr.trl supports TRL >={LOW},<{HIGH} (it overrides private GRPOTrainer methods, tested on those "
        f"releases); found trl {version}. Install the tested range: pip install 'trl>={LOW},<{HIGH}'"
    )
    assert lines[1] == "False", "TRL was imported before the version check"


# --- the version-dependent parts of trl_internals (need the installed TRL) ------------------------------------------


@pytest.fixture
def internals() -> types.ModuleType:
    pytest.importorskip("trl")
    from meta.rlvr import trl_internals

    return trl_internals


class _Generates:
    """Stands in for a ``GRPOTrainer`` whose ``_generate`` returns ``out`` (and records ``num_generations``)."""

    def __init__(self, out: tuple[Any, ...]) -> None:
        self.out = out
        self.num_generations = 4
        self.seen: list[int] = []

    def _generate(self, prompts: list[Any]) -> tuple[Any, ...]:
        self.seen.append(self.num_generations)
        return self.out


def test_generate_rows_unpacks_the_eight_values_of_the_supported_releases(internals: types.ModuleType) -> None:
    logprobs = [[-0.5, -1.0], [-0.25]]
    out = ([[1, 2], [1, 3]], [[5, 6], [7]], None, ["ab", "c"], logprobs, {}, None, None)
    trainer = _Generates(out)
    rows = internals.generate_rows(trainer, ["p", "q"])
    assert rows.prompt_ids == [[1, 2], [1, 3]] and rows.completion_ids == [[5, 6], [7]]
    assert rows.completions == ["ab", "c"] and rows.logprobs == logprobs
    assert trainer.seen == [1] and trainer.num_generations == 4  # one sample per row, the group size restored


@pytest.mark.parametrize("arity", [7, 9])  # TRL 1.0 returned 7 values, 1.1 to 1.8 returned 9
def test_generate_rows_refuses_another_arity_with_the_count_and_the_release(
    internals: types.ModuleType, arity: int
) -> None:
    trainer = _Generates(tuple([[[1]]] * arity))
    with pytest.raises(RuntimeError, match=rf"returned {arity} values, not the 8 .* found trl {internals.TRL_VERSION}"):
        internals.generate_rows(trainer, ["p"])
    assert trainer.num_generations == 4


def _tokenizer_trainer(eos_token_ids: list[int] | None) -> Any:
    trainer = types.SimpleNamespace(_tokenizer=types.SimpleNamespace(eos_token_id=2, pad_token_id=0))
    if eos_token_ids is not None:
        trainer.eos_token_ids = eos_token_ids
    return trainer


def test_completions_end_at_every_declared_eos_from_1_14_and_at_the_tokenizers_before(
    internals: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(internals, "TRL_VERSION", "1.14.0")
    assert internals.completion_end_ids(_tokenizer_trainer([2, 7])) == {0, 2, 7}
    monkeypatch.setattr(internals, "TRL_VERSION", "1.13.0")
    assert internals.completion_end_ids(_tokenizer_trainer(None)) == {0, 2}  # no eos_token_ids attribute before 1.14


def test_the_loss_temperature_is_patched_only_where_trl_bakes_it_into_a_fused_head(
    internals: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    model = torch.nn.Linear(2, 2)
    forward = model.forward
    monkeypatch.setattr(internals, "TRL_VERSION", "1.14.2")
    assert internals.set_loss_temperature(model, 0.5, False, ("log_probs",)) is False
    assert model.forward == forward  # earlier releases divide by trainer.temperature at each call: nothing patched
    # The installed release's own branch; the fused head's effect on the loss is tested with a real trainer
    # (test_rlvr_trl.py::test_the_batch_holds_only_real_rows_and_its_loss_uses_the_temperature_in_force).
    installed = Version(metadata_version := require_supported_trl())
    monkeypatch.setattr(internals, "TRL_VERSION", metadata_version)
    if installed < internals.FUSED_LM_HEAD_SINCE:
        assert internals.set_loss_temperature(model, 0.5, False, ("log_probs",)) is False
    else:
        calls: list[tuple[Any, ...]] = []
        monkeypatch.setattr(internals._trl_utils, "add_fused_lm_head", lambda *a, **k: calls.append((a, k)))
        assert internals.set_loss_temperature(model, 0.5, True, ("log_probs",)) is True
        assert calls == [((model,), {"temperature": 0.5, "cast_lm_head_to_fp32": True, "outputs": ("log_probs",)})]
