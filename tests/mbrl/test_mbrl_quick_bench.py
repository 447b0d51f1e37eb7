"""The quick bench runs end to end and returns one table line (slow: about a CPU-minute)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.mbrl.quick import quick_bench


@pytest.mark.slow
def test_quick_bench(tmp_path: Path) -> None:
    (line,) = quick_bench(tmp_path)
    assert line.pillar == "mbrl" and line.value is not None and line.value > 0
    data = json.loads((tmp_path / "quick_sample_efficiency.json").read_text())
    assert set(data["entry"]["arms"]) == {"mbpo:fixed:3", "sac_same_utd", "sac_utd1"}
    assert data["entry"]["seeds"] == [0]  # one seed: the suite's time budget (the line has no target)
