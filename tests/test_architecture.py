"""The house's structure, read from the code's own imports: no circles, dependencies only downward, short files.

The floors (``../shared/DESIGN.md``, and the README's folder map): ``envs`` is the ground floor; ``meta.control`` (the
controller protocol and its one spec grammar) sits on it; ``mbrl`` above; ``planning`` and ``meta.rollout_length`` above
``mbrl``; ``meta.rlvr`` and ``meta.incontext`` use ``envs`` and ``meta.control`` only. ``rolloutlab``'s plumbing imports
no pillar: only its command line does. No installed package imports the lab (``experiments``) or the tests.

Every ``import`` statement counts, inside functions and ``TYPE_CHECKING`` blocks too: a lazy import still ties two
modules together, it only changes when the tie is paid.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rolloutlab", "envs", "meta", "mbrl", "planning")
MAX_LINES = 800

# Which of our packages each floor may import (itself always allowed). The first matching prefix wins.
ALLOWED: list[tuple[str, set[str]]] = [
    ("rolloutlab.cli", {"rolloutlab", "envs", "meta", "mbrl", "planning"}),
    ("rolloutlab", {"rolloutlab"}),
    ("envs", {"envs"}),
    ("meta.control", {"meta.control", "rolloutlab"}),
    ("mbrl", {"mbrl", "meta.control", "envs", "rolloutlab"}),
    ("planning", {"planning", "mbrl", "meta.control", "envs", "rolloutlab"}),
    ("meta.rollout_length", {"meta.rollout_length", "mbrl", "meta.control", "envs", "rolloutlab"}),
    ("meta.rlvr", {"meta.rlvr", "meta.control", "envs", "rolloutlab"}),
    ("meta.incontext", {"meta.incontext", "meta.control", "envs", "rolloutlab"}),
    ("meta.tokenizer", {"meta.tokenizer", "meta.control", "envs", "rolloutlab"}),
    ("meta", {"meta.control"}),  # meta/__init__.py: the root names only
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The longest prefix of ``name`` that is one of our modules (``a.b.c`` is a module, or a name in ``a.b``)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in MODULES:
            return candidate
    return None


def _imports(module: str) -> set[str]:
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top in ("experiments", "tests"):
                targets.add(name)
                continue
            resolved = _resolve(name)
            if resolved is not None and resolved != module:
                targets.add(resolved)
    return targets


GRAPH = {module: _imports(module) for module in MODULES}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _room(module: str) -> str:
    """A module's room: the package folder that holds its file."""
    path = MODULES[module]
    return ".".join(path.relative_to(ROOT).parent.parts)


def _nested(a: str, b: str) -> bool:
    """Whether one room holds the other (or they are the same): a package and its own sub-rooms are one house, whose
    root modules (plumbing such as buffers, and the pillar's command line) may sit on both sides of a sub-room."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def test_the_graph_is_read() -> None:
    # A guard for the checks below: a parser that saw no imports would pass them all.
    assert "mbrl.algorithms.mbpo" in MODULES or "mbrl" in MODULES
    assert sum(len(targets) for targets in GRAPH.values()) > 200


def test_no_import_circles_between_files() -> None:
    assert _cycles(GRAPH) == []


def test_no_import_circles_between_rooms() -> None:
    rooms: dict[str, set[str]] = defaultdict(set)
    for module, targets in GRAPH.items():
        for target in targets:
            if target in MODULES and not _nested(_room(module), _room(target)):
                rooms[_room(module)].add(_room(target))
    assert _cycles(dict(rooms)) == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_dependencies_point_downward(module: str) -> None:
    allowed = next(allowed for prefix, allowed in ALLOWED if module == prefix or module.startswith(prefix + "."))
    bad = sorted(
        target for target in GRAPH[module] if not any(target == ok or target.startswith(ok + ".") for ok in allowed)
    )
    assert bad == [], f"{module} imports from above its floor: {bad}"


def test_no_package_file_is_over_the_size_limit() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in MODULES.values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_controller_layer_imports_no_torch_or_gymnasium() -> None:
    # An LLM training script drops a controller into its loop without paying for torch, gymnasium or SB3.
    heavy = ("torch", "gymnasium", "stable_baselines3", "transformers")
    code = f"import sys, meta, meta.control, meta.rlvr; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
