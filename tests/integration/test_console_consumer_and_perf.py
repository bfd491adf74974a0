"""console-consumer, producer-perf-test and consumer-perf-test against a real server process."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet import Producer
from tests.support.server_process import ServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    s = ServerProcess(tmp_path_factory.mktemp("tools") / "data")
    s.start()
    s.create_topic("words", 2)
    s.create_topic("perf", 3)
    with Producer(bootstrap_servers=s.bootstrap, linger_ms=1) as p:
        for i in range(6):
            p.send(
                "words",
                value=b"w%d" % i,
                key=b"k%d" % i,
                partition=i % 2,
                timestamp_ms=1_000 + i,
                headers=[("h", b"x")] if i == 0 else None,
            )
        p.send("words", value=None, key=None, partition=1, timestamp_ms=2_000)
    yield s
    s.stop()


def rillet(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rillet.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_console_consumer_from_beginning_with_properties(server: ServerProcess) -> None:
    r = rillet(
        "console-consumer",
        "--bootstrap-server",
        server.bootstrap,
        "--topic",
        "words",
        "--partition",
        "0",
        "--from-beginning",
        "--max-messages",
        "3",
        "--property",
        "print.key=true",
        "--property",
        "print.offset=true",
        "--property",
        "print.timestamp=true",
        "--property",
        "print.headers=true",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "CreateTime:1000\tOffset:0\th:x\tk0\tw0",
        "CreateTime:1002\tOffset:1\tNO_HEADERS\tk2\tw2",
        "CreateTime:1004\tOffset:2\tNO_HEADERS\tk4\tw4",
    ]
    assert "Processed a total of 3 messages" in r.stderr


def test_console_consumer_all_partitions_offset_and_timeout(server: ServerProcess) -> None:
    b = ["--bootstrap-server", server.bootstrap, "--topic", "words"]
    everything = rillet(
        "console-consumer",
        *b,
        "--from-beginning",
        "--timeout-ms",
        "1500",
        "--property",
        "key.separator=|",
        "--property",
        "print.key=true",
    )
    assert everything.returncode == 0, everything.stderr
    lines = everything.stdout.splitlines()
    assert sorted(lines) == sorted([f"k{i}|w{i}" for i in range(6)] + ["null|null"])
    assert "Processed a total of 7 messages" in everything.stderr
    at = rillet("console-consumer", *b, "--partition", "1", "--offset", "2", "--timeout-ms", "1000")
    assert at.stdout.splitlines() == ["w5", "null"]
    latest = rillet("console-consumer", *b, "--timeout-ms", "800")
    assert latest.stdout == "" and "Processed a total of 0 messages" in latest.stderr


def test_console_consumer_bad_input(server: ServerProcess) -> None:
    b = ["--bootstrap-server", server.bootstrap]
    cases = [
        (["--topic", "words", "--offset", "3"], "partition is required"),
        (["--topic", "words", "--partition", "0", "--offset", "soon"], "offset value 'soon'"),
        (["--topic", "words", "--partition", "7"], "partition 7 of topic words does not exist"),
        (["--topic", "nope", "--timeout-ms", "500"], "topic nope does not exist"),
        (["--topic", "words", "--property", "print.colour=true"], "print.colour"),
        (["--topic", "words", "--consumer-property", "fetch.min.bytes=lots"], "fetch.min.bytes"),
        (["--topic", "words", "--zookeeper", "localhost:2181"], "--bootstrap-server"),
    ]
    for args, message in cases:
        r = rillet("console-consumer", *b, *args)
        assert r.returncode != 0 and message in r.stderr, (args, r.stderr)


def test_producer_perf_test_prints_kafka_lines(server: ServerProcess, tmp_path: Path) -> None:
    out = tmp_path / "producer.json"
    r = rillet(
        "producer-perf-test",
        "--topic",
        "perf",
        "--num-records",
        "20000",
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--producer-props",
        f"bootstrap.servers={server.bootstrap}",
        "acks=1",
        "linger.ms=2",
        "compression.type=zstd",
        "--json",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    last = r.stdout.splitlines()[-1]
    assert re.fullmatch(
        r"20000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
        r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th\.",
        last,
    ), last
    figures = json.loads(out.read_text())
    assert figures["records"] == 20000 and figures["errors"] == 0
    assert figures["p50_ms"] <= figures["p99_ms"] <= figures["max_latency_ms"] + 1


def test_producer_perf_test_throttles_and_refuses_bad_props(server: ServerProcess) -> None:
    r = rillet(
        "producer-perf-test",
        "--topic",
        "perf",
        "--num-records",
        "300",
        "--record-size",
        "10",
        "--throughput",
        "200",
        "--bootstrap-server",
        server.bootstrap,
    )
    assert r.returncode == 0, r.stderr
    rate = float(re.search(r"sent, ([\d.]+) records/sec", r.stdout).group(1))  # type: ignore[union-attr]
    assert rate < 260  # 300 records at 200/s take at least 1.5 s
    bad = rillet(
        "producer-perf-test",
        "--topic",
        "perf",
        "--num-records",
        "1",
        "--record-size",
        "10",
        "--throughput",
        "-1",
        "--bootstrap-server",
        server.bootstrap,
        "--producer-props",
        "batch.size=big",
    )
    assert bad.returncode == 1 and "batch.size" in bad.stderr
    none = rillet(
        "producer-perf-test",
        "--topic",
        "perf",
        "--num-records",
        "1",
        "--record-size",
        "10",
        "--throughput",
        "-1",
    )
    assert none.returncode != 0 and "bootstrap.servers" in none.stderr


def test_consumer_perf_test_reads_every_partition(server: ServerProcess, tmp_path: Path) -> None:
    # Produce a known number into a fresh topic so the count is exact.
    server.create_topic("perf-read", 3)
    rillet(
        "producer-perf-test",
        "--topic",
        "perf-read",
        "--num-records",
        "3000",
        "--record-size",
        "200",
        "--throughput",
        "-1",
        "--bootstrap-server",
        server.bootstrap,
    )
    out = tmp_path / "consumer.json"
    r = rillet(
        "consumer-perf-test",
        "--bootstrap-server",
        server.bootstrap,
        "--topic",
        "perf-read",
        "--messages",
        "3000",
        "--json",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    header, line = r.stdout.splitlines()
    assert header.startswith("start.time, end.time, data.consumed.in.MB, MB.sec")
    cols = [c.strip() for c in line.split(",")]
    assert len(cols) == 10 and cols[4] == "3000"
    assert float(cols[2]) == pytest.approx(3000 * 200 / 1024 / 1024, rel=1e-3)
    assert json.loads(out.read_text())["records"] == 3000
    short = rillet(
        "consumer-perf-test",
        "--bootstrap-server",
        server.bootstrap,
        "--topic",
        "perf-read",
        "--messages",
        "5000",
        "--timeout",
        "1000",
        "--hide-header",
    )
    assert short.returncode == 0 and "timeout (1000 ms) exceeded" in short.stderr
    assert short.stdout.split(",")[4].strip() == "3000"
