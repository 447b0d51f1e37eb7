from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from rolloutlab.config import ConfigError, from_dict, load_yaml, read_yaml_mapping, save_yaml, to_dict


@dataclass
class Optim:
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)


@dataclass
class Cfg:
    env_id: str = "Pendulum-v1"
    steps: int = 1000
    algo: Literal["mbpo", "dyna"] = "mbpo"
    schedule: list[int] = field(default_factory=lambda: [20, 150, 1, 15])
    seed: int | None = None
    optim: Optim = field(default_factory=Optim)
    verbose: bool = False


def test_defaults_and_nested() -> None:
    cfg = from_dict(Cfg, {"steps": 50, "optim": {"lr": 3}, "seed": None})
    assert cfg.steps == 50
    assert cfg.optim.lr == 3.0 and isinstance(cfg.optim.lr, float)
    assert cfg.optim.betas == (0.9, 0.999)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"stepz": 1}, "unknown field stepz"),
        ({"optim": {"lrr": 1.0}}, "unknown field optim.lrr"),
        ({"steps": "many"}, "steps: expected int, got 'many'"),
        ({"steps": 1.5}, "steps: expected int"),
        ({"steps": True}, "steps: expected int"),
        ({"optim": {"lr": "fast"}}, "optim.lr: expected float, got 'fast'"),
        ({"algo": "ppo"}, "algo: expected one of \\['mbpo', 'dyna'\\]"),
        ({"schedule": [1, "b"]}, r"schedule\[1\]: expected int"),
        ({"optim": {"betas": [0.9]}}, "optim.betas: expected 2 items"),
        ({"verbose": "yes"}, "verbose: expected bool"),
        ({"optim": 3}, "optim: expected a mapping"),
    ],
)
def test_rejections_name_the_field(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_dict(Cfg, data)


def test_yaml_round_trip_and_file_errors(tmp_path: Path) -> None:
    cfg = from_dict(Cfg, {"steps": 9, "optim": {"lr": 0.5}})
    save_yaml(cfg, tmp_path / "c.yaml")
    assert load_yaml(Cfg, tmp_path / "c.yaml") == cfg
    assert load_yaml(Cfg, tmp_path / "c.yaml", overrides={"steps": 3}).steps == 3
    assert to_dict(cfg)["optim"]["betas"] == [0.9, 0.999]
    (tmp_path / "bad.yaml").write_text("steps: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_yaml(Cfg, tmp_path / "bad.yaml")
    (tmp_path / "typo.yaml").write_text("steps: 3\nalgoo: dyna\n")
    with pytest.raises(ConfigError, match=r"typo.yaml: unknown field algoo"):
        load_yaml(Cfg, tmp_path / "typo.yaml")
    with pytest.raises(ConfigError, match="not found"):
        load_yaml(Cfg, tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"- 1\n- 2\n", "expected a mapping of settings at the top level, got list"),
        (b"42\n", "expected a mapping of settings at the top level, got int"),
        (b"'text'\n", "expected a mapping of settings at the top level, got str"),
        (b"\xff\xfesteps: 3\n", "is not UTF-8 text"),
        (b"1: 2\n", "setting names must be strings"),
        (b"optim: {1: 2, lr: 0.1}\n", "unknown field optim.1"),
        (b"steps: 3\n  bad indent: [\n", "not valid YAML"),
        (b"[" * 5000, "not valid YAML"),
    ],
)
def test_every_malformed_preset_is_one_config_error(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "preset.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message) as info:
        load_yaml(Cfg, path)
    assert "\n" not in str(info.value)


def test_a_folder_or_an_empty_file_as_preset(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        load_yaml(Cfg, tmp_path)
    (tmp_path / "empty.yaml").write_text("")
    assert read_yaml_mapping(tmp_path / "empty.yaml") == {}
    assert load_yaml(Cfg, tmp_path / "empty.yaml") == Cfg()


@dataclass
class Left:
    k: int = 1

    def __post_init__(self) -> None:
        if self.k > 3:
            raise ValueError(f"k must be <= 3, got {self.k}")


@dataclass
class Right:
    g: int = 2


@dataclass
class Either:
    part: Left | Right = field(default_factory=Left)


def test_a_union_of_dataclasses_picks_the_option_that_fits_and_says_why_none_did() -> None:
    assert from_dict(Either, {"part": {"g": 4}}).part == Right(4)
    assert from_dict(Either, {"part": {"k": 2}}).part == Left(2)
    with pytest.raises(ConfigError, match=r"as Left: part: k must be <= 3, got 7; as Right: unknown field"):
        from_dict(Either, {"part": {"k": 7}})
