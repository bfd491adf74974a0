"""The seeds' walk through Kafka, in their order, with the ``rillet`` CLI against a real
server process: start, create a topic, list it, produce from the console, consume
``--from-beginning``, add partitions, describe, run both perf tests, look inside the segment
files, stop cleanly and start again with everything still there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.server_process import ServerProcess

pytestmark = pytest.mark.slow


def rillet(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(
        [sys.executable, "-m", "rillet.cli.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return r


def ok(*args: str, stdin: str | None = None) -> str:
    r = rillet(*args, stdin=stdin)
    assert r.returncode == 0, f"rillet {' '.join(args)} failed:\n{r.stdout}\n{r.stderr}"
    return r.stdout


def test_the_seeds_sequence_end_to_end(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data")
    server.start()
    b = ["--bootstrap-server", server.bootstrap]
    topic = "quickstart-events"
    try:
        assert ok("topics", "--create", "--topic", topic, "--partitions", "1", *b).strip() == (
            f"Created topic {topic}."
        )
        assert topic in ok("topics", "--list", *b).split()

        lines = "This is my first event\nThis is my second event\n"
        ok("console-producer", "--topic", topic, *b, stdin=lines)
        out = ok(
            "console-consumer", "--topic", topic, "--from-beginning", "--timeout-ms", "1500", *b
        )
        assert out.splitlines() == ["This is my first event", "This is my second event"]

        ok("topics", "--alter", "--topic", topic, "--partitions", "3", *b)
        described = ok("topics", "--describe", "--topic", topic, *b).splitlines()
        assert "PartitionCount: 3" in described[0] and len(described) == 4

        perf = ok(
            "producer-perf-test",
            "--topic",
            topic,
            "--num-records",
            "5000",
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--producer-props",
            f"bootstrap.servers={server.bootstrap}",
            "acks=1",
        )
        assert perf.splitlines()[-1].startswith("5000 records sent, ")
        read = ok("consumer-perf-test", "--topic", topic, "--messages", "5002", *b).splitlines()
        assert read[1].split(", ")[4] == "5002"

        segment = next((tmp_path / "data").rglob(f"{topic}-0/00000000000000000000.log"))
        dump = ok("dump-log", "--files", str(segment), "--print-data-log")
        assert "payload: This is my first event" in dump
    finally:
        assert server.stop() == 0
    # A clean restart keeps every record.
    server.start()
    try:
        out = ok(
            "console-consumer",
            "--topic",
            topic,
            "--partition",
            "0",
            "--offset",
            "0",
            "--max-messages",
            "2",
            *b,
        )
        assert out.splitlines() == ["This is my first event", "This is my second event"]
    finally:
        server.stop()
