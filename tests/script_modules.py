"""The repository's scripts (``experiments/``, ``examples/``: files, not packages) loaded as modules, so that tests can
call their ``main`` and read their constants.

Importable from every test as ``script_modules``: pytest puts ``tests/`` on ``sys.path`` for ``tests/conftest.py``.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


@functools.cache
def load_script(path: Path) -> ModuleType:
    """The script at ``path`` as a module, executed once per test session.

    Args:
        path: A Python file inside the repository, e.g. ``REPO / "experiments" / "mbrl" / "gate.py"``.

    Returns:
        The module, registered in ``sys.modules`` under a name made of its path (``experiments_mbrl_gate``): the
        dataclasses it defines look their module up there.
    """
    name = "_".join(path.resolve().relative_to(REPO).with_suffix("").parts)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
