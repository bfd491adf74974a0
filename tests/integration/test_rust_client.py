"""examples/rust-client, a tonic client built from proto/, against a real server process.

The example creates a topic, produces structured records with acks=1 and fetches them back with
structured=true; these tests build it with cargo, run it, and read the topic back independently
through the Python stubs (the fast path, RecordBatch v2 bytes decoded by rillet.decode_batches).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.rust_client import build_rust_client
from tests.support.server_process import ServerProcess, fetch_all

# A cold build of tonic and protox takes about a minute (a debug build: a third less than a
# release one); it runs in the first test's setup.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def client_binary() -> Path:
    return build_rust_client()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    s = ServerProcess(tmp_path_factory.mktemp("rust-client") / "data")
    s.start()
    yield s
    s.stop()


def run_client(binary: Path, server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(binary), "--bootstrap-server", server.bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_creates_produces_and_reads_back(client_binary: Path, server: ServerProcess) -> None:
    r = run_client(client_binary, server, "--topic", "rust-orders", "--partitions", "3",
                   "--count", "8")  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Created topic rust-orders with 3 partitions (replication factor 1)."
    assert lines[1:4] == [
        "Produced 3 records to rust-orders-0 at base offset 0",
        "Produced 3 records to rust-orders-1 at base offset 0",
        "Produced 2 records to rust-orders-2 at base offset 0",
    ]
    # Record i went to partition i % 3, at offset i // 3.
    expected = {p: [i for i in range(8) if i % 3 == p] for p in range(3)}
    assert lines[4:12] == [
        f"rust-orders-{p} offset={n} key=key-{i} value=value-{i}"
        for p in range(3)
        for n, i in enumerate(expected[p])
    ]
    assert lines[12:] == ["Read back all 8 records; they match what was written."]

    for p in range(3):
        assert [
            (r.offset, r.key, r.value, r.headers)
            for r in fetch_all(server.bootstrap, "rust-orders", p)
        ] == [
            (n, b"key-%d" % i, b"value-%d" % i, [("seq", b"%d" % i)])
            for n, i in enumerate(expected[p])
        ]


def test_existing_topic_is_an_error_unless_asked(
    client_binary: Path, server: ServerProcess
) -> None:
    first = run_client(client_binary, server, "--topic", "rust-again", "--count", "2")
    assert first.returncode == 0, first.stderr
    again = run_client(client_binary, server, "--topic", "rust-again", "--count", "2")
    assert again.returncode == 1
    assert "TOPIC_ALREADY_EXISTS" in again.stderr and "Produced" not in again.stdout
    reuse = run_client(client_binary, server, "--topic", "rust-again", "--count", "2",
                       "--if-not-exists")  # fmt: skip
    assert reuse.returncode == 0, reuse.stderr
    assert "Produced 2 records to rust-again-0 at base offset 2" in reuse.stdout
    assert [(r.offset, r.key, r.value) for r in fetch_all(server.bootstrap, "rust-again", 0)] == [
        (0, b"key-0", b"value-0"),
        (1, b"key-1", b"value-1"),
        (2, b"key-0", b"value-0"),
        (3, b"key-1", b"value-1"),
    ]


def test_invalid_topic_name_names_kafkas_error(client_binary: Path, server: ServerProcess) -> None:
    r = run_client(client_binary, server, "--topic", "../x")
    assert r.returncode != 0
    assert "INVALID_TOPIC_EXCEPTION" in r.stderr
    assert "Produced" not in r.stdout
