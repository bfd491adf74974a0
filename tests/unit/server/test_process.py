"""The composition root: one node in combined mode, in process."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest

from rillet.config import BrokerConfig
from rillet.server.process import RilletServer


def local_config(data_dir: Path, **overrides: str) -> BrokerConfig:
    return BrokerConfig.embedded_default(
        data_dir,
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
            "advertised.listeners": "PLAINTEXT://127.0.0.1:0",
            **overrides,
        },
    )


async def test_inert_settings_are_warned_about_once_at_start_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = local_config(
        tmp_path, **{"delete.topic.enable": "true", "controlled.shutdown.enable": "false"}
    )
    server = RilletServer(config, str(uuid.uuid4()))
    with caplog.at_level(logging.WARNING):
        await server.start()
        try:
            await server.wait_until_ready()
        finally:
            await server.stop()
    warnings = [r.getMessage() for r in caplog.records if "no effect yet" in r.getMessage()]
    assert warnings == [
        "These settings are accepted but have no effect yet: controlled.shutdown.enable "
        "(turning controlled shutdown off)"
    ]


async def test_a_plain_start_warns_about_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = RilletServer(local_config(tmp_path), str(uuid.uuid4()))
    with caplog.at_level(logging.WARNING):
        await server.start()
        try:
            await server.wait_until_ready()
            assert server.bound["PLAINTEXT"] > 0 and server.bound["CONTROLLER"] > 0
        finally:
            await server.stop()
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
