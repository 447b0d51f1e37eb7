"""Layering (README folder map): the Wordle rules and lists are ground floor in ``envs/``; ``planning/`` uses them."""

from __future__ import annotations

import ast
import importlib.resources
from pathlib import Path

import envs.wordle
import envs.wordle_rules
import planning.wordle

_UPPER_FLOORS = ("planning", "meta", "mbrl", "rolloutlab")


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def test_envs_wordle_imports_no_upper_floor() -> None:
    for module in (envs.wordle, envs.wordle_rules):
        assert module.__file__ is not None
        imported = _imported_modules(Path(module.__file__))
        assert not {m for m in imported if m.split(".")[0] in _UPPER_FLOORS}, module.__name__


def test_lists_ship_once_in_envs() -> None:
    data = importlib.resources.files("envs.wordle_data")
    names = {p.name for p in data.iterdir()}
    assert {"answers.txt", "allowed.txt", "nyt_answers_2309.txt", "nyt_allowed_14855.txt", "SOURCE.md"} <= names
    assert planning.wordle.__file__ is not None
    planning_root = Path(planning.wordle.__file__).parent
    assert not list(planning_root.rglob("*.txt")), "no copy of the word lists under planning/wordle"
    # The feedback rule is defined once, in envs.wordle_rules; planning only imports it.
    for path in planning_root.glob("*.py"):
        assert "def feedback(" not in path.read_text(), path
