"""The seeds' walk-through with the ``rillet`` CLI against a real server process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet.client.producer import Producer
from tests.support.server_process import ServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    s = ServerProcess(tmp_path_factory.mktemp("cli") / "data")
    s.start()
    yield s
    s.stop()


def rillet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rillet.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_topics_create_list_describe_alter_delete(server: ServerProcess) -> None:
    b = ["--bootstrap-server", server.bootstrap]
    r = rillet("topics", "--create", "--topic", "events", "--partitions", "3", *b,
               "--config", "retention.ms=100000")  # fmt: skip
    assert r.returncode == 0 and r.stdout.strip() == "Created topic events."
    again = rillet("topics", "--create", "--topic", "events", *b)
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr
    assert rillet("topics", "--create", "--topic", "events", "--if-not-exists", *b).returncode == 0
    assert "events" in rillet("topics", "--list", *b).stdout.split()
    d = rillet("topics", "--describe", "--topic", "events", *b).stdout.splitlines()
    assert d[0].startswith("Topic: events\tTopicId: ")
    assert "PartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=100000" in d[0]
    assert d[1] == "\tTopic: events\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1"
    assert rillet("topics", "--alter", "--topic", "events", "--partitions", "5", *b).returncode == 0
    assert "PartitionCount: 5" in rillet("topics", "--describe", "--topic", "events", *b).stdout
    shrink = rillet("topics", "--alter", "--topic", "events", "--partitions", "2", *b)
    assert shrink.returncode == 1 and "INVALID_PARTITIONS" in shrink.stderr
    assert rillet("topics", "--delete", "--topic", "events", *b).returncode == 0
    assert "events" not in rillet("topics", "--list", *b).stdout.split()


def test_bad_names_zookeeper_and_unknown_topics(server: ServerProcess) -> None:
    b = ["--bootstrap-server", server.bootstrap]
    r = rillet("topics", "--create", "--topic", "../escape", *b)
    assert r.returncode == 1 and "INVALID_TOPIC_EXCEPTION" in r.stderr
    z = rillet("topics", "--list", "--zookeeper", "localhost:2181")
    assert z.returncode == 1 and "--bootstrap-server" in z.stderr and "ZooKeeper" in z.stderr
    u = rillet("topics", "--describe", "--topic", "missing", *b)
    assert u.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in u.stderr
    assert rillet("topics", "--delete", "--topic", "missing", "--if-exists", *b).returncode == 0


def test_dump_log_reads_what_the_server_wrote(server: ServerProcess) -> None:
    b = ["--bootstrap-server", server.bootstrap]
    assert rillet("topics", "--create", "--topic", "dumped", *b).returncode == 0
    with Producer(bootstrap_servers=server.bootstrap) as p:
        p.send("dumped", b"hello", key=b"k").get(30)
    seg = next(Path(server.data_dir).rglob("dumped-0/00000000000000000000.log"))
    out = rillet("dump-log", "--files", str(seg), "--print-data-log").stdout
    assert "isvalid: true" in out and "key: k payload: hello" in out
