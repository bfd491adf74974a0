"""``rillet dump-log`` for idempotent and transactional producers: the producer fields of
each batch, transaction markers in control records, and producer-state ``.snapshot`` files,
in Kafka's DumpLogSegments format."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from rillet._core import BatchBuilder, Log, LogConfig
from rillet.cli.main import main

NOW_MS = 1_700_000_100_000
TS = 1_700_000_000_000


def dump(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    rc = main(["dump-log", *(str(a) for a in args)])
    out, err = capsys.readouterr()
    return rc, out, err


def fields(line: str) -> dict[str, str]:
    return dict(re.findall(r"(\w+): (\S*)", line))


def data_batch(
    producer_id: int, epoch: int, sequence: int, n: int, *, transactional: bool = False
) -> bytes:
    b = BatchBuilder(
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=transactional,
    )
    for i in range(n):
        b.append(TS + i, f"k{i}".encode(), b"value")
    return b.build()


def marker(producer_id: int, epoch: int, control_type: int, coordinator_epoch: int) -> bytes:
    b = BatchBuilder(
        producer_id=producer_id, producer_epoch=epoch, is_transactional=True, is_control=True
    )
    b.append(TS + 50, struct.pack(">hh", 0, control_type), struct.pack(">hi", 0, coordinator_epoch))
    return b.build()


@pytest.fixture
def txn_log(tmp_path: Path) -> Path:
    """Producer 9 commits a transaction, producer 10 aborts one, producer 12 leaves one
    open, producer 11 is known only from a marker, and the metadata log's kind of control
    batch (no producer id) sits at the end."""
    d = tmp_path / "txn-0"
    log = Log.open(d, LogConfig(), now_ms=NOW_MS)
    log.append_as_leader(data_batch(9, 2, 0, 3, transactional=True), now_ms=NOW_MS)  # 0..2
    log.append_as_leader(marker(9, 2, 1, 5), now_ms=NOW_MS, allow_control=True)  # 3
    log.append_as_leader(data_batch(10, 0, 0, 1, transactional=True), now_ms=NOW_MS)  # 4
    log.append_as_leader(marker(10, 0, 0, 6), now_ms=NOW_MS, allow_control=True)  # 5
    log.append_as_leader(marker(11, 1, 1, 7), now_ms=NOW_MS, allow_control=True)  # 6
    log.append_as_leader(data_batch(12, 0, 0, 2, transactional=True), now_ms=NOW_MS)  # 7..8
    raft = BatchBuilder(is_control=True)
    raft.append(TS, None, b"leader change")
    log.append_as_leader(raft.build(), now_ms=NOW_MS, allow_control=True)  # 9
    log.close()
    return d


def test_markers_are_printed_as_kafka_prints_them(
    txn_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = dump(capsys, "--print-data-log", "--files", txn_log / f"{0:020d}.log")
    assert rc == 0, err
    batches = [fields(x) for x in out.splitlines() if x.startswith("baseOffset:")]
    assert [(b["baseOffset"], b["isTransactional"], b["isControl"]) for b in batches] == [
        ("0", "true", "false"),
        ("3", "true", "true"),
        ("4", "true", "false"),
        ("5", "true", "true"),
        ("6", "true", "true"),
        ("7", "true", "false"),
        ("9", "false", "true"),
    ]
    assert (batches[1]["producerId"], batches[1]["producerEpoch"]) == ("9", "2")
    assert (batches[1]["baseSequence"], batches[1]["lastSequence"]) == ("-1", "-1")
    records = {int(fields(x)["offset"]): x for x in out.splitlines() if x.startswith("| ")}
    assert records[3].endswith(" endTxnMarker: COMMIT coordinatorEpoch: 5")
    assert records[5].endswith(" endTxnMarker: ABORT coordinatorEpoch: 6")
    assert records[6].endswith(" endTxnMarker: COMMIT coordinatorEpoch: 7")
    # Control records print no key or payload, even with --print-data-log.
    assert all(" payload:" not in records[o] for o in (3, 5, 6, 9))
    assert records[9].endswith(" controlType: UNKNOWN(invalid key of 0 bytes)")
    assert records[0].endswith(" key: k0 payload: value")


def test_last_sequence_wraps_as_in_kafka(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "wrap-0"
    log = Log.open(d, LogConfig(), now_ms=NOW_MS)
    log.append_as_leader(data_batch(3, 0, 2**31 - 2, 4), now_ms=NOW_MS)
    log.close()
    _, out, _ = dump(capsys, "--deep-iteration", "--files", d / f"{0:020d}.log")
    (batch,) = [fields(x) for x in out.splitlines() if x.startswith("baseOffset:")]
    assert (batch["baseSequence"], batch["lastSequence"]) == (str(2**31 - 2), "1")
    seqs = [fields(x)["sequence"] for x in out.splitlines() if x.startswith("| ")]
    assert seqs == [str(2**31 - 2), str(2**31 - 1), "0", "1"]


def test_producer_snapshot(txn_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = txn_log / f"{10:020d}.snapshot"
    assert snapshot.exists()
    rc, out, err = dump(capsys, "--files", snapshot)
    assert (rc, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"Dumping {snapshot}"
    # As in Kafka, a snapshot keeps one timestamp per producer (its last, a marker's too),
    # printed as the batch's timestamp as well.
    assert lines[1:] == [
        "producerId: 9 producerEpoch: 2 coordinatorEpoch: 5 "
        f"currentTxnFirstOffset: OptionalLong.empty lastTimestamp: {TS + 50} "
        f"firstSequence: 0 lastSequence: 2 lastOffset: 2 offsetDelta: 2 timestamp: {TS + 50}",
        "producerId: 10 producerEpoch: 0 coordinatorEpoch: 6 "
        f"currentTxnFirstOffset: OptionalLong.empty lastTimestamp: {TS + 50} "
        f"firstSequence: 0 lastSequence: 0 lastOffset: 4 offsetDelta: 0 timestamp: {TS + 50}",
        # Known from a marker alone: no batch.
        "producerId: 11 producerEpoch: 1 coordinatorEpoch: 7 "
        f"currentTxnFirstOffset: OptionalLong.empty lastTimestamp: {TS + 50} ",
        "producerId: 12 producerEpoch: 0 coordinatorEpoch: -1 "
        f"currentTxnFirstOffset: OptionalLong[7] lastTimestamp: {TS + 1} "
        f"firstSequence: 0 lastSequence: 1 lastOffset: 8 offsetDelta: 1 timestamp: {TS + 1}",
    ]


def test_a_corrupt_snapshot_is_reported_on_stderr(
    txn_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = txn_log / f"{10:020d}.snapshot"
    raw = bytearray(snapshot.read_bytes())
    raw[20] ^= 0x40
    snapshot.write_bytes(bytes(raw))
    rc, out, err = dump(capsys, "--files", snapshot)
    assert rc == 0
    assert out.splitlines() == [f"Dumping {snapshot}"]
    assert "CRC is no longer valid" in err
