from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch

from rolloutlab import checkpoint
from rolloutlab.checkpoint import CheckpointError, load_checkpoint, save_checkpoint


def _state() -> dict:
    net = torch.nn.Linear(3, 2)
    return {"net": net.state_dict(), "step": 7, "name": "x", "stats": {"mean": torch.arange(3.0)}}


def test_round_trip(tmp_path: Path) -> None:
    state = _state()
    path = save_checkpoint(tmp_path / "ckpt.pt", state, kind="unit", config={"lr": 0.1})
    loaded = load_checkpoint(path, kind="unit")
    assert loaded["format_version"] == checkpoint.FORMAT_VERSION
    assert loaded["config"] == {"lr": 0.1}
    assert loaded["state"]["step"] == 7
    assert torch.equal(loaded["state"]["net"]["weight"], state["net"]["weight"])
    assert torch.equal(loaded["state"]["stats"]["mean"], torch.arange(3.0))
    # No temp files are left behind.
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]


def test_crash_before_rename_keeps_previous_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, {"step": 1}, kind="unit")

    def crash(src: str, dst: str) -> None:
        raise OSError("simulated crash between write and rename")

    monkeypatch.setattr(checkpoint.os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        save_checkpoint(path, {"step": 2}, kind="unit")
    monkeypatch.undo()
    assert load_checkpoint(path, kind="unit")["state"]["step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]


def test_refuses_unknown_format_version(tmp_path: Path) -> None:
    path = tmp_path / "future.pt"
    torch.save({"format_version": 99, "kind": "unit", "config": None, "state": {}}, path)
    with pytest.raises(CheckpointError, match="format version 99"):
        load_checkpoint(path)


def test_refuses_other_kind_and_foreign_files(tmp_path: Path) -> None:
    path = save_checkpoint(tmp_path / "a.pt", {"x": 1}, kind="mbpo-run")
    with pytest.raises(CheckpointError, match="expected 'dyna-run'"):
        load_checkpoint(path, kind="dyna-run")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="cannot read"):
        load_checkpoint(tmp_path / "junk.pt")
    torch.save({"weights": torch.zeros(1)}, tmp_path / "bare.pt")
    with pytest.raises(CheckpointError, match="not a rolloutlab checkpoint"):
        load_checkpoint(tmp_path / "bare.pt")
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "missing.pt")


def test_refuses_pickled_objects(tmp_path: Path) -> None:
    class Evil:
        def __reduce__(self) -> tuple:
            return (os.system, ("echo pwned",))

    path = tmp_path / "evil.pt"
    torch.save({"format_version": 1, "kind": "unit", "config": None, "state": {"x": Evil()}}, path)
    with pytest.raises(CheckpointError, match="cannot read"):
        load_checkpoint(path)


def test_atomic_json(tmp_path: Path) -> None:
    target = checkpoint.atomic_write_json(tmp_path / "sub" / "r.json", {"a": [1, 2]})
    assert target.read_text() == '{\n  "a": [\n    1,\n    2\n  ]\n}\n'
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask


def test_json_nulls_makes_strict_json(tmp_path: Path) -> None:
    data = {"a": math.nan, "b": [1.5, math.inf, (-math.inf, 2)], "c": {"d": "x", "e": None, "f": 3}}
    assert checkpoint.json_nulls(data) == {"a": None, "b": [1.5, None, [None, 2]], "c": {"d": "x", "e": None, "f": 3}}
    text = checkpoint.atomic_write_json(tmp_path / "r.json", checkpoint.json_nulls(data)).read_text()
    assert "NaN" not in text and "Infinity" not in text
