"""The Wordle package's import structure: no circle between the book and the solver, a light package import."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "planning" / "wordle"


def _imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at module level or inside functions and ``TYPE_CHECKING`` blocks."""
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
        elif isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
    return modules


def test_the_book_does_not_import_the_solver() -> None:
    assert "planning.wordle.solver" not in _imported_modules(PACKAGE / "book.py")
    assert "planning.wordle.book" in _imported_modules(PACKAGE / "solver.py")  # one direction only


def test_package_names_load_on_first_use() -> None:
    code = (
        "import sys, planning.wordle as w\n"
        "assert not any(m.startswith('planning.wordle.') for m in sys.modules), sorted(sys.modules)\n"
        "from planning.wordle import Assistant, SolverConfig, WordleSolver, feedback\n"
        "from planning.wordle.solver import WordleSolver as home\n"
        "assert WordleSolver is home and feedback('crane', 'crane') == (2, 2, 2, 2, 2)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
