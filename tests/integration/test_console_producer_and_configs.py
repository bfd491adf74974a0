"""``rillet console-producer`` and ``rillet configs`` against a real server process; what the
producer sent is read back with the gRPC Fetch."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import grpc
import pytest

from rillet._core import decode_batches
from rillet.protocol import fetch_pb2, fetch_pb2_grpc
from tests.support.server_process import ServerProcess

pytestmark = pytest.mark.slow

Rec = tuple[bytes | None, bytes | None]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    s = ServerProcess(tmp_path_factory.mktemp("producer-configs") / "data")
    s.start()
    yield s
    s.stop()


def rillet(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rillet.cli.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _fetch(server: ServerProcess, topic: str, structured: bool) -> fetch_pb2.FetchResponse:
    with grpc.insecure_channel(server.bootstrap) as ch:
        response: fetch_pb2.FetchResponse = fetch_pb2_grpc.FetchServiceStub(ch).Fetch(
            fetch_pb2.FetchRequest(
                max_wait_ms=0,
                structured=structured,
                topics=[
                    fetch_pb2.FetchRequest.Topic(
                        name=topic,
                        partitions=[fetch_pb2.FetchRequest.Partition(partition=0, fetch_offset=0)],
                    )
                ],
            ),
            timeout=30,
        )
    partition = response.topics[0].partitions[0]
    assert partition.error_code == 0, partition.error_message
    return response


def records(server: ServerProcess, topic: str) -> list[Rec]:
    """(key, value) of every record of partition 0, in offset order."""
    p = _fetch(server, topic, structured=True).topics[0].partitions[0]
    assert [r.offset for r in p.records] == list(range(len(p.records)))
    return [
        (r.key if r.HasField("key") else None, r.value if r.HasField("value") else None)
        for r in p.records
    ]


def compressions(server: ServerProcess, topic: str) -> list[str]:
    p = _fetch(server, topic, structured=False).topics[0].partitions[0]
    return [b.compression for b in decode_batches(p.record_batches)]


# -- console-producer ---------------------------------------------------------------------------


def test_produce_lines_with_and_without_keys(server: ServerProcess) -> None:
    b = ["--bootstrap-server", server.bootstrap]
    server.create_topic("lines")
    plain = rillet("console-producer", "--topic", "lines", *b, stdin="one\ntwo\tTAB\n\nthree\n")
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == ""  # no '>' prompt into a pipe
    keyed = rillet(
        "console-producer", "--topic", "lines", *b, "--property", "parse.key=true",
        stdin="k1\tv1\nk2\tv2\twith tab\n\tempty key\n",
    )  # fmt: skip
    assert keyed.returncode == 0, keyed.stderr
    custom = rillet(
        "console-producer", "--topic", "lines", "--broker-list", server.bootstrap, "--sync",
        "--property", "parse.key=true", "--property", "key.separator=:",
        "--property", "null.marker=NULL",
        stdin="a:b:c\r\nNULL:tombstone\nkey:NULL",
    )  # fmt: skip
    assert custom.returncode == 0, custom.stderr
    assert records(server, "lines") == [
        (None, b"one"),
        (None, b"two\tTAB"),
        (None, b""),
        (None, b"three"),
        (b"k1", b"v1"),
        (b"k2", b"v2\twith tab"),
        (b"", b"empty key"),
        (b"a", b"b:c"),
        (None, b"tombstone"),
        (b"key", None),
    ]


def test_a_line_without_separator_stops_with_kafkas_error(server: ServerProcess) -> None:
    b = ["--bootstrap-server", server.bootstrap]
    server.create_topic("sep")
    r = rillet(
        "console-producer", "--topic", "sep", *b, "--property", "parse.key=true",
        stdin="k\tfirst\nno separator here\nk\tnever sent\n",
    )  # fmt: skip
    assert r.returncode == 1
    assert "No key separator found on line number 2: 'no separator here'" in r.stderr
    assert records(server, "sep") == [(b"k", b"first")]  # the lines before it were sent
    lenient = rillet(
        "console-producer", "--topic", "sep", *b,
        "--property", "parse.key=true", "--property", "ignore.error=true",
        stdin="no separator here\n",
    )  # fmt: skip
    assert lenient.returncode == 0, lenient.stderr
    assert records(server, "sep")[-1] == (None, b"no separator here")


def test_bad_producer_properties_name_the_key(server: ServerProcess) -> None:
    b = ["--bootstrap-server", server.bootstrap, "--topic", "unused"]
    unknown = rillet("console-producer", *b, "--producer-property", "no.such.config=1")
    assert unknown.returncode == 1
    assert "INVALID_CONFIG" in unknown.stderr and "no.such.config" in unknown.stderr
    bad = rillet("console-producer", *b, "--producer-property", "linger.ms=soon")
    assert bad.returncode == 1
    assert "Invalid value soon for configuration linger.ms" in bad.stderr
    missing = rillet("console-producer", "--topic", "unused")
    assert missing.returncode == 1 and "bootstrap-server" in missing.stderr


def test_compression_codec_zstd_and_producer_config_file(
    server: ServerProcess, tmp_path_factory: pytest.TempPathFactory
) -> None:
    server.create_topic("zstd")
    props = tmp_path_factory.mktemp("props") / "producer.properties"
    props.write_text("acks=all\nlinger.ms=0\nclient.id=from-file\n")
    r = rillet(
        "console-producer", "--topic", "zstd", "--bootstrap-server", server.bootstrap,
        "--compression-codec", "zstd", "--producer.config", str(props),
        stdin="".join(f"line {i}\n" for i in range(50)),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert [v for _, v in records(server, "zstd")] == [f"line {i}".encode() for i in range(50)]
    assert set(compressions(server, "zstd")) == {"zstd"}


def test_refused_records_fail_the_command_unless_ignored(server: ServerProcess) -> None:
    server.create_topic("small", **{"max.message.bytes": "200"})
    b = ["--bootstrap-server", server.bootstrap, "--topic", "small"]
    big = "x" * 500 + "\n"
    r = rillet("console-producer", *b, stdin=big)
    assert r.returncode == 1
    assert "Error when sending message to topic small with key: null, value: 500 bytes" in r.stderr
    assert "MESSAGE_TOO_LARGE" in r.stderr
    ignored = rillet("console-producer", *b, "--property", "ignore.error=true", stdin=big)
    assert ignored.returncode == 0 and "MESSAGE_TOO_LARGE" in ignored.stderr
    assert records(server, "small") == []


# -- configs ------------------------------------------------------------------------------------


def test_configs_describe_alter_delete_round_trip(server: ServerProcess) -> None:
    b = ["--bootstrap-server", server.bootstrap]
    server.create_topic("events")
    empty = rillet("configs", *b, "--entity-type", "topics", "--entity-name", "events",
                   "--describe")  # fmt: skip
    assert empty.returncode == 0 and empty.stdout == "Dynamic configs for topic events are:\n"
    # An unknown cleanup.policy is refused, naming the key; compact is one.
    bad = rillet(
        "configs", *b, "--entity-type", "topics", "--entity-name", "events", "--alter",
        "--add-config", "cleanup.policy=[compact,shred]",
    )  # fmt: skip
    assert bad.returncode != 0
    assert "Invalid value shred for configuration cleanup.policy" in bad.stderr
    compact = rillet(
        "configs", *b, "--entity-type", "topics", "--entity-name", "events", "--alter",
        "--add-config", "cleanup.policy=[compact,delete]",
    )  # fmt: skip
    assert compact.returncode == 0, compact.stderr
    alter = rillet(
        "configs", *b, "--entity-type", "topics", "--entity-name", "events", "--alter",
        "--add-config", "retention.ms=100000,cleanup.policy=[delete]",
    )  # fmt: skip
    assert alter.returncode == 0, alter.stderr
    assert alter.stdout == "Completed updating config for topic events.\n"
    d = rillet("configs", *b, "--topic", "events", "--describe")
    assert d.returncode == 0, d.stderr
    assert d.stdout.splitlines() == [
        "Dynamic configs for topic events are:",
        "  cleanup.policy=delete sensitive=false synonyms="
        "{DYNAMIC_TOPIC_CONFIG:cleanup.policy=delete, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  retention.ms=100000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=100000}",
    ]
    everything = rillet("configs", *b, "--topic", "events", "--describe", "--all").stdout
    lines = everything.splitlines()
    assert lines[0] == "All configs for topic events are:"
    assert (
        "  segment.bytes=1073741824 sensitive=false synonyms="
        "{DEFAULT_CONFIG:log.segment.bytes=1073741824}" in lines
    )
    assert len(lines) > 10
    delete = rillet("configs", *b, "--topic", "events", "--alter",
                    "--delete-config", "cleanup.policy")  # fmt: skip
    assert delete.returncode == 0 and "Completed updating config" in delete.stdout
    after = rillet("configs", *b, "--topic", "events", "--describe").stdout.splitlines()
    assert [line.split()[0] for line in after[1:]] == ["retention.ms=100000"]
    again = rillet("configs", *b, "--topic", "events", "--alter",
                   "--delete-config", "cleanup.policy")  # fmt: skip
    assert again.returncode == 1 and "Invalid config(s): cleanup.policy" in again.stderr
    # The topic's config is what kafka-topics --describe shows too.
    assert (
        "Configs: retention.ms=100000"
        in rillet("topics", "--describe", "--topic", "events", *b).stdout
    )


def test_configs_bad_value_unknown_topic_and_zookeeper(server: ServerProcess) -> None:
    b = ["--bootstrap-server", server.bootstrap]
    server.create_topic("strict")
    bad = rillet("configs", *b, "--topic", "strict", "--alter", "--add-config", "retention.ms=abc")
    assert bad.returncode == 1
    assert "INVALID_CONFIG" in bad.stderr and "retention.ms" in bad.stderr and "abc" in bad.stderr
    unknown_key = rillet("configs", *b, "--topic", "strict", "--alter",
                         "--add-config", "no.such.key=1")  # fmt: skip
    assert unknown_key.returncode == 1 and "no.such.key" in unknown_key.stderr
    assert rillet("configs", *b, "--topic", "strict", "--describe").stdout == (
        "Dynamic configs for topic strict are:\n"
    )
    missing = rillet("configs", *b, "--topic", "missing", "--alter", "--add-config", "a=1")
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr
    described = rillet("configs", *b, "--topic", "missing", "--describe", "--all")
    assert described.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in described.stderr
    # Without --all, Kafka's current ConfigCommand checks existence first and says so.
    quiet = rillet("configs", *b, "--topic", "missing", "--describe")
    assert quiet.returncode == 0
    assert quiet.stdout == "The topic 'missing' doesn't exist and doesn't have dynamic config.\n"
    z = rillet("configs", "--zookeeper", "localhost:2181", "--topic", "strict", "--describe")
    assert z.returncode == 1 and "ZooKeeper" in z.stderr and "--bootstrap-server" in z.stderr


def test_configs_of_a_broker(server: ServerProcess) -> None:
    b = ["--bootstrap-server", server.bootstrap]
    alter = rillet("configs", *b, "--broker", "1", "--alter",
                   "--add-config", "log.retention.hours=48")  # fmt: skip
    assert alter.returncode == 0 and alter.stdout == "Completed updating config for broker 1.\n"
    d = rillet("configs", *b, "--entity-type", "brokers", "--entity-name", "1", "--describe")
    assert d.stdout.splitlines() == [
        "Dynamic configs for broker 1 are:",
        "  log.retention.hours=48 sensitive=false synonyms="
        "{DYNAMIC_BROKER_CONFIG:log.retention.hours=48, DEFAULT_CONFIG:log.retention.hours=168}",
    ]
    assert rillet("configs", *b, "--broker", "1", "--alter",
                  "--delete-config", "log.retention.hours").returncode == 0  # fmt: skip
    assert rillet("configs", *b, "--broker", "1", "--describe").stdout == (
        "Dynamic configs for broker 1 are:\n"
    )
    default = rillet("configs", *b, "--entity-type", "brokers", "--entity-default", "--describe")
    assert default.returncode == 1 and "--entity-default" in default.stderr
