"""Unmodified Kafka clients as test writers and readers: kcat (librdkafka's command-line
tool), confluent-kafka (librdkafka), kafka-python, aiokafka, and Rillet's own gRPC client.
Each writer sends the same records; each reader returns what it read as :data:`Read`
tuples, so a test can check every pair byte for byte."""

from __future__ import annotations

import asyncio
import subprocess
import warnings
from collections.abc import Callable, Sequence

from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition

from rillet import Producer as RilletProducer
from tests.support.server_process import fetch_all

with warnings.catch_warnings():
    # kafka-python reads its JSON schemas with importlib.resources' deprecated API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KPTopicPartition

import aiokafka

# (key, value, headers) as written.
Written = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes], ...]]
# (key, value, headers, timestamp) as read.
Read = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes], ...], int]


def binary_records(tag: str, n: int = 20) -> list[Written]:
    """Records with null keys, empty and null values, every byte value, and headers."""
    out: list[Written] = []
    for i in range(n):
        key = None if i % 5 == 0 else f"{tag}-k{i}".encode()
        value: bytes | None = bytes(range(256)) + f"{tag}-{i}\n\x00".encode() * (i + 1)
        if i == 3:
            value = b""
        elif i == 4:
            value = None
        # Binary header values, without the NUL, "," and "=" kcat's %h cannot show.
        headers = () if i % 2 else (("h", f"{tag}{i}".encode()), ("é", b"\x01\xfe\x7f"))
        out.append((key, value, headers))
    return out


def text_records(tag: str, n: int = 20) -> list[Written]:
    """What kcat -P can write: one line each, a key before a tab, one fixed header."""
    return [
        (f"{tag}-k{i}".encode(), f"{tag} välue {i}".encode(), (("src", b"kcat"),)) for i in range(n)
    ]


# -- writers ---------------------------------------------------------------------------------


def write_confluent(bootstrap: str, topic: str, records: Sequence[Written]) -> None:
    p = CKProducer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for key, value, headers in records:
        p.produce(topic, value=value, key=key, headers=list(headers), partition=0)
    assert p.flush(30) == 0


def write_kafka_python(bootstrap: str, topic: str, records: Sequence[Written]) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for key, value, headers in records:
            p.send(topic, value=value, key=key, headers=list(headers), partition=0)
        p.flush(30)
    finally:
        p.close()


def write_aiokafka(bootstrap: str, topic: str, records: Sequence[Written]) -> None:
    async def run() -> None:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await p.start()
        try:
            for key, value, headers in records:
                await p.send_and_wait(
                    topic, value=value, key=key, headers=list(headers), partition=0
                )
        finally:
            await p.stop()

    asyncio.run(run())


def write_rillet(bootstrap: str, topic: str, records: Sequence[Written]) -> None:
    p = RilletProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for key, value, headers in records:
            p.send(topic, value=value, key=key, headers=list(headers), partition=0)
        p.flush(30)
    finally:
        p.close(30)


def write_kcat(bootstrap: str, topic: str, records: Sequence[Written]) -> None:
    lines = []
    for key, value, headers in records:
        assert key is not None and value is not None and headers == (("src", b"kcat"),)
        lines.append(key + b"\t" + value)
    subprocess.run(
        ["kcat", "-b", bootstrap, "-P", "-t", topic, "-p", "0", "-K", "\t", "-H", "src=kcat"],
        input=b"\n".join(lines) + b"\n",
        check=True,
        timeout=60,
    )


# -- readers ---------------------------------------------------------------------------------


def read_confluent(bootstrap: str, topic: str, n: int) -> list[Read]:
    c = CKConsumer(
        {"bootstrap.servers": bootstrap, "group.id": f"r-{topic}", "enable.auto.commit": False}
    )
    try:
        c.assign([CKTopicPartition(topic, 0, 0)])
        out: list[Read] = []
        for _ in range(300):
            if len(out) >= n:
                break
            for m in c.consume(n - len(out), 0.2):
                assert m.error() is None, m.error()
                out.append((m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1]))
        return out
    finally:
        c.close()


def read_kafka_python(bootstrap: str, topic: str, n: int) -> list[Read]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = KPTopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        out: list[Read] = []
        for _ in range(300):
            if len(out) >= n:
                break
            for records in c.poll(200).values():
                out += [(r.key, r.value, tuple(r.headers), r.timestamp) for r in records]
        return out
    finally:
        c.close()


def read_aiokafka(bootstrap: str, topic: str, n: int) -> list[Read]:
    async def run() -> list[Read]:
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await c.start()
        try:
            tp = aiokafka.TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, 0)
            out: list[Read] = []
            for _ in range(300):
                if len(out) >= n:
                    break
                for records in (await c.getmany(timeout_ms=200)).values():
                    out += [(r.key, r.value, tuple(r.headers), r.timestamp) for r in records]
            return out
        finally:
            await c.stop()

    return asyncio.run(run())


def read_grpc(bootstrap: str, topic: str, n: int) -> list[Read]:
    return [
        (r.key, r.value, tuple((k, v or b"") for k, v in r.headers), r.timestamp)
        for r in fetch_all(bootstrap, topic, 0)
    ]


def read_kcat(bootstrap: str, topic: str, n: int) -> list[Read]:
    """Binary-safe: each message as its key's and value's lengths, then their bytes."""
    out = subprocess.run(
        [
            "kcat",
            "-b",
            bootstrap,
            "-C",
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-c",
            str(n),
            "-f",
            "%K %S %T %h|%k%s\n",
        ],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    reads: list[Read] = []
    at = 0
    while at < len(out):
        head, _, _ = out[at:].partition(b"|")
        klen, vlen, ts, hdrs = head.split(b" ", 3)
        at += len(head) + 1
        key = value = None
        if int(klen) >= 0:
            key, at = out[at : at + int(klen)], at + int(klen)
        if int(vlen) >= 0:
            value, at = out[at : at + int(vlen)], at + int(vlen)
        assert out[at : at + 1] == b"\n"
        at += 1
        headers = tuple(
            (name.decode(), v) for name, _, v in (h.partition(b"=") for h in hdrs.split(b",") if h)
        )
        reads.append((key, value, headers, int(ts)))
    return reads


Writer = Callable[[str, str, Sequence[Written]], None]
Reader = Callable[[str, str, int], list[Read]]

# name -> (writer, records it can write, speaks Kafka's protocol)
WRITERS: dict[str, tuple[Writer, Callable[[str], list[Written]], bool]] = {
    "confluent": (write_confluent, binary_records, True),
    "kafka_python": (write_kafka_python, binary_records, True),
    "aiokafka": (write_aiokafka, binary_records, True),
    "kcat": (write_kcat, text_records, True),
    "rillet_grpc": (write_rillet, binary_records, False),
}
READERS: dict[str, tuple[Reader, bool]] = {
    "confluent": (read_confluent, True),
    "kafka_python": (read_kafka_python, True),
    "aiokafka": (read_aiokafka, True),
    "kcat": (read_kcat, True),
    "grpc": (read_grpc, False),
}


def as_written(reads: list[Read]) -> list[Written]:
    return [(k, v, h) for k, v, h, _ in reads]
