"""The admin client's choice of server: one that does not answer in ``request_timeout_ms``
(a paused broker) is dropped for the next one in ``bootstrap_servers``."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet.client.admin import AdminClient
from rillet.errors import KafkaTimeoutError
from tests.support.mini_broker import MiniBroker


@pytest.fixture
def silent() -> Iterator[str]:
    """A listening socket nobody ever answers on: connections are accepted by the kernel and
    then nothing, as from a stopped (SIGSTOP) process."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"127.0.0.1:{s.getsockname()[1]}"


def test_a_server_that_does_not_answer_is_dropped_for_the_next(tmp_path: Path, silent: str) -> None:
    broker = MiniBroker(tmp_path, {"t": 1})
    try:
        with AdminClient(
            bootstrap_servers=f"{silent},{broker.bootstrap}", request_timeout_ms=500
        ) as admin:
            assert "t" in admin.list_topics()
            assert "t" in admin.list_topics()  # and it stays with the one that answered
    finally:
        broker.close()


def test_only_silent_servers_time_out(silent: str) -> None:
    with (
        AdminClient(bootstrap_servers=silent, request_timeout_ms=200) as admin,
        pytest.raises(KafkaTimeoutError, match="DEADLINE_EXCEEDED"),
    ):
        admin.list_topics()
