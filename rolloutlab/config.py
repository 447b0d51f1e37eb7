"""Typed configuration: YAML presets at the edge, strict dataclasses inside.

:func:`from_dict` builds a dataclass from plain data and rejects unknown keys and values of the wrong type, naming the
offending field with its full dotted path (``trainer.lr: expected float, got 'fast'``). Nested dataclasses,
``Optional``, ``Literal``, ``list``/``tuple``/``dict`` of simple types are supported; ints are accepted where floats
are expected.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from rolloutlab.checkpoint import atomic_write_text

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value or key is invalid; the message names the field."""


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _convert(value: Any, tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin is typing.Union or origin is types.UnionType:
        if value is None and type(None) in args:
            return None
        reasons = []
        for option in args:
            if option is type(None):
                continue
            try:
                return _convert(value, option, where)
            except ConfigError as exc:
                reasons.append(f"as {_type_name(option)}: {exc}")
        # Every option's own reason: for a union of dataclasses the one meant is usually the first that knows the
        # keys, and its check (a bad grid, a bad range) is what the user has to see.
        raise ConfigError(f"{where}: expected {_type_name(tp)}, got {value!r} ({'; '.join(reasons)})")
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(f"{where}: expected one of {list(args)}, got {value!r}")
        return value
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping for {tp.__name__}, got {value!r}")
        return _build(tp, value, where)
    if origin in (list, tuple) or tp in (list, tuple):
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(args) != len(value):
                raise ConfigError(f"{where}: expected {len(args)} items, got {len(value)}")
            return tuple(_convert(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args, strict=True)))
        item_type = args[0] if args else Any
        items = [_convert(v, item_type, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if (origin is tuple or tp is tuple) else items
    if origin is dict or tp is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        key_type, val_type = args if args else (Any, Any)
        return {
            _convert(k, key_type, f"{where}.<key>"): _convert(v, val_type, f"{where}.{k}") for k, v in value.items()
        }
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected bool, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected int, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: expected float, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected str, got {value!r}")
        return value
    if tp is Path:
        if not isinstance(value, str | os.PathLike):
            raise ConfigError(f"{where}: expected a path, got {value!r}")
        return Path(value)
    if isinstance(tp, type):
        if not isinstance(value, tp):
            raise ConfigError(f"{where}: expected {tp.__name__}, got {value!r}")
        return value
    return value


def _build(cls: type[T], data: Mapping[str, Any], prefix: str) -> T:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(fields), key=str)  # YAML keys need not be strings
    if unknown:
        where = f"{prefix}." if prefix else ""
        raise ConfigError(
            f"unknown field {where}{unknown[0]!s} for {cls.__name__}; known fields: {', '.join(sorted(fields))}"
        )
    kwargs = {}
    for name, value in data.items():
        where = f"{prefix}.{name}" if prefix else name
        kwargs[name] = _convert(value, hints[name], where)
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a required field is missing
        raise ConfigError(f"{prefix or cls.__name__}: {exc}") from exc
    except ConfigError:
        raise
    except ValueError as exc:  # the dataclass's own check (__post_init__) refused the values
        raise ConfigError(f"{prefix or cls.__name__}: {exc}") from exc


def from_dict(cls: type[T], data: Mapping[str, Any] | None) -> T:
    """Build dataclass ``cls`` from a mapping, rejecting unknown and mistyped fields.

    Raises:
        ConfigError: naming the first offending field by its dotted path.
    """
    if not (dataclasses.is_dataclass(cls) and isinstance(cls, type)):
        raise TypeError(f"{cls!r} is not a dataclass type")
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"expected a mapping at the top level of the {cls.__name__} config, got {type(data).__name__}"
        )
    return _build(cls, data, "")


def load_config_or_defaults(
    cls: type[T], path: str | os.PathLike[str] | None, overrides: Mapping[str, Any] | None = None
) -> T:
    """Dataclass ``cls`` from an optional YAML preset plus overrides (overrides win); no preset: defaults plus
    overrides. Raises :class:`ConfigError` as :func:`load_yaml` and :func:`from_dict` do."""
    if path is None:
        return from_dict(cls, dict(overrides or {}))
    return load_yaml(cls, path, overrides)


def read_yaml_mapping(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The top-level mapping of a YAML preset file; an empty file is an empty mapping.

    Every way a preset can be unusable (missing, a directory, unreadable, not UTF-8, not YAML, a list or a scalar at
    the top level) is one :class:`ConfigError` naming the file, so every command answers it in one line.

    Raises:
        ConfigError: naming the file and what is wrong with it.
    """
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"config file not found: {source}") from exc
    except IsADirectoryError as exc:
        raise ConfigError(f"config {source} is a directory, not a YAML file") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config {source} is not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config {source}: {exc.strerror or exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        # The parser's message spans several lines; its first line names the problem, the mark says where.
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{source} is not valid YAML: {problem}{where}") from exc
    except RecursionError as exc:  # deeply nested flow collections exhaust the parser's stack
        raise ConfigError(f"{source} is not valid YAML: nested too deeply") from exc
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping of settings at the top level, got {type(data).__name__}")
    if not all(isinstance(key, str) for key in data):
        bad = next(key for key in data if not isinstance(key, str))
        raise ConfigError(f"{source}: setting names must be strings, got {bad!r}")
    return dict(data)


def load_yaml(cls: type[T], path: str | os.PathLike[str], overrides: Mapping[str, Any] | None = None) -> T:
    """Load a YAML preset into dataclass ``cls``; ``overrides`` (already typed) win over the file.

    Raises:
        ConfigError: the file is unusable (see :func:`read_yaml_mapping`) or a field is unknown or mistyped.
    """
    source = Path(path)
    merged = read_yaml_mapping(source)
    merged.update(overrides or {})
    try:
        return from_dict(cls, merged)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from exc


def to_dict(cfg: Any) -> dict[str, Any]:
    """Plain-data view of a dataclass config (paths as strings, tuples as lists), suitable for YAML/JSON."""

    def plain(value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, Path):
            return str(value)
        if isinstance(value, list | tuple):
            return [plain(v) for v in value]
        if isinstance(value, Mapping):
            return {str(k): plain(v) for k, v in value.items()}
        return value

    result = plain(cfg)
    if not isinstance(result, dict):
        raise TypeError(f"{cfg!r} is not a dataclass instance")
    return result


def save_yaml(cfg: Any, path: str | os.PathLike[str]) -> Path:
    """Atomically write a dataclass config (or plain mapping) as YAML."""
    data = to_dict(cfg) if dataclasses.is_dataclass(cfg) else dict(cfg)
    return atomic_write_text(path, yaml.safe_dump(data, sort_keys=False))
