"""Fixtures of the broker's component tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rillet.storage.log_manager import LogManager


@pytest.fixture
async def log_manager(tmp_path: Path) -> AsyncIterator[LogManager]:
    """A started LogManager over one log directory (a module may define its own)."""
    lm = LogManager([tmp_path / "logs"])
    lm.startup()
    yield lm
    lm.shutdown()
