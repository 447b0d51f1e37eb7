"""The committed meta results agree with themselves: each ``table.md`` is the table its ``summary.json`` gives, and the
README quotes the scaled table verbatim (issue 5: the README table is generated from the experiments JSON)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "meta" / "results"


def _experiment_script() -> ModuleType:
    script = RESULTS.parent / "rollout_length.py"
    spec = importlib.util.spec_from_file_location("meta_rollout_length_experiment", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("results", [RESULTS, RESULTS / "scaled"], ids=["small", "scaled"])
def test_table_md_is_generated_from_summary_json(results: Path) -> None:
    summary = json.loads((results / "summary.json").read_text())
    assert (results / "table.md").read_text() == _experiment_script().table(summary)


def test_readme_quotes_the_scaled_table() -> None:
    table = (RESULTS / "scaled" / "table.md").read_text()
    assert table in (ROOT / "README.md").read_text()
