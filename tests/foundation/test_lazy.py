"""``rolloutlab.lazy``: package names that load on first use."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rolloutlab.lazy import lazy_getattr


def test_a_lazy_name_loads_once_and_unknown_names_raise() -> None:
    code = (
        "import sys, mbrl\n"
        "assert 'torch' not in sys.modules\n"
        "first = mbrl.MBPO\n"
        "assert 'torch' in sys.modules and 'MBPO' in vars(mbrl) and mbrl.MBPO is first\n"
        "from mbrl.algorithms.mbpo import MBPO\n"
        "assert MBPO is first\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_name_outside_the_table_is_an_attribute_error() -> None:
    getattr_ = lazy_getattr("rolloutlab", {"Path": "pathlib"})
    assert getattr_("Path").__name__ == "Path"
    with pytest.raises(AttributeError, match="module 'rolloutlab' has no attribute 'nothing'"):
        getattr_("nothing")
