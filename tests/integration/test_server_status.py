"""``rillet server status`` against a real node (``rillet server start`` in its own
process): healthy with its role, metadata offsets and lag, partitions and request rates
while a producer runs; found through its server.properties; exit status 1 naming the
problem once a partition is under min ISR; 2 when nothing answers."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet import Producer
from tests.support.cluster import eventually
from tests.support.server_process import ServerProcess, free_port, serving

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, int]]:
    port = free_port()
    with serving(
        tmp_path_factory.mktemp("status") / "data",
        kafka=True,
        overrides={"metrics.port": str(port), "metrics.host": "127.0.0.1"},
    ) as server:
        server.create_topic("busy", 2)
        yield server, port


def status(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rillet.cli.main", "server", "status", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_healthy_node_under_load(node: tuple[ServerProcess, int]) -> None:
    server, port = node
    stop = threading.Event()

    def produce() -> None:
        producer = Producer(bootstrap_servers=server.bootstrap, linger_ms=5)
        while not stop.is_set():
            for i in range(50):
                producer.send("busy", value=b"%d" % i)
            producer.flush(30)
        producer.close()

    producing = threading.Thread(target=produce)
    producing.start()
    try:
        r = status(
            "--metrics-url",
            f"127.0.0.1:{port}",
            "--bootstrap-server",
            server.bootstrap,
            "--interval-ms",
            "2000",
        )
    finally:
        stop.set()
        producing.join(60)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert out.startswith(f"Node 1 (broker,controller) at http://127.0.0.1:{port}/metrics")
    assert re.search(r"Broker state +RUNNING", out)
    assert "active controller (quorum leader, epoch" in out
    assert re.search(r"high watermark \d+, log end offset \d+, lag 0 behind quorum leader 1", out)
    assert re.search(r"Partitions +2 held, 2 led", out)
    assert re.search(r"Under-replicated +0", out) and re.search(r"Offline +0", out)
    # The producer's appends and its gRPC Produce calls are counted between the scrapes.
    messages = re.search(r"messages in ([\d.]+)/s", out)
    assert messages is not None and float(messages.group(1)) > 0, out
    assert re.search(r"gRPC calls +[\d.]+/s \(.*Produce [\d.]+", out), out
    assert out.rstrip().endswith("Status: healthy")


def test_the_node_is_found_through_its_properties(
    node: tuple[ServerProcess, int], tmp_path: Path
) -> None:
    _, port = node
    properties = tmp_path / "server.properties"
    properties.write_text(f"node.id=1\nmetrics.host=127.0.0.1\nmetrics.port={port}\n")
    r = status(str(properties), "--interval-ms", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"at http://127.0.0.1:{port}/metrics\n" in r.stdout
    assert "(one scrape: no rates)" in r.stdout


def test_a_partition_under_min_isr_makes_the_node_unhealthy(
    node: tuple[ServerProcess, int],
) -> None:
    server, port = node
    # One broker, one replica: an ISR of one is below min.insync.replicas=2.
    server.create_topic("strict", 1, **{"min.insync.replicas": "2"})

    def unhealthy() -> subprocess.CompletedProcess[str] | None:
        r = status("--metrics-url", f"http://127.0.0.1:{port}/metrics", "--interval-ms", "0")
        return r if r.returncode != 0 else None  # until the broker has the new partition

    r = eventually(unhealthy)
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(r"Under min ISR +1", r.stdout)
    assert r.stdout.rstrip().endswith("Status: UNHEALTHY\n  - 1 partition under min ISR")


def test_an_endpoint_that_does_not_answer() -> None:
    r = status("--metrics-url", f"127.0.0.1:{free_port()}", "--interval-ms", "0")
    assert r.returncode == 2
    assert "Error: cannot read the node's metrics at http://127.0.0.1:" in r.stderr
