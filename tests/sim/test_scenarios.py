"""Scenario scripts (``testdata/*.txt``): commands with expected output, etcd style.

``RILLET_REWRITE=1 python -m pytest tests/sim/test_scenarios.py`` rewrites the expected output
from the actual one; review the diff before keeping it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from scenario import run_file

TESTDATA = Path(__file__).parent / "testdata"


@pytest.mark.parametrize("path", sorted(TESTDATA.glob("*.txt")), ids=lambda p: p.stem)
def test_scenario(path: Path) -> None:
    rewrite = os.environ.get("RILLET_REWRITE") == "1"
    for block, actual in run_file(path, rewrite=rewrite):
        if rewrite:
            continue
        assert actual == block.expected, (
            f"{path.name}: {block.command!r}\n"
            + "expected:\n  "
            + "\n  ".join(block.expected)
            + "\nactual:\n  "
            + "\n  ".join(actual)
        )
