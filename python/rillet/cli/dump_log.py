"""``rillet dump-log``: Kafka's DumpLogSegments (``kafka-dump-log.sh``).

Prints the batches of ``.log`` files (with each control record's transaction marker), the
entries of ``.index`` and ``.timeindex`` files, the producers of producer-state
``.snapshot`` files, and with ``--verify-index-only`` checks index entries against the log
they index.
"""

from __future__ import annotations

import argparse
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from rillet._core import (
    ProducerStateEntry,
    Record,
    RecordBatch,
    decode_batches,
    read_producer_snapshot,
    validate_record_batches,
)
from rillet.errors import KafkaError

HELP = "Dump segment files (.log, .index, .timeindex, .snapshot) like kafka-dump-log.sh"

LOG_OVERHEAD = 12
CHUNK = 8 << 20
INT32_MAX = 2**31 - 1
# Kafka's ControlRecordType ids.
CONTROL_RECORD_TYPES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--files", required=True, help="comma-separated list of files to dump")
    p.add_argument(
        "--print-data-log", action="store_true", help="print each record's key, payload and headers"
    )
    p.add_argument(
        "--deep-iteration",
        action="store_true",
        help="iterate records, not just batches (implied by --print-data-log)",
    )
    p.add_argument(
        "--verify-index-only",
        action="store_true",
        help="check index entries against the log without printing them",
    )
    p.add_argument(
        "--index-sanity-check",
        action="store_true",
        help="check that index entries are in order and within the log",
    )
    p.add_argument(
        "--max-bytes",
        type=int,
        default=2**31 - 1,
        help="read at most this many bytes of each log file",
    )


def run(args: argparse.Namespace) -> int:
    out = sys.stdout
    status = 0
    for name in (f.strip() for f in args.files.split(",") if f.strip()):
        path = Path(name)
        print(f"Dumping {path}", file=out)
        try:
            if path.suffix == ".log":
                dump_log_file(
                    path,
                    out,
                    deep=args.print_data_log or args.deep_iteration,
                    print_data=args.print_data_log,
                    max_bytes=args.max_bytes,
                )
            elif path.suffix == ".index":
                dump_offset_index(
                    path,
                    out,
                    verify_only=args.verify_index_only,
                    sanity_only=args.index_sanity_check,
                )
            elif path.suffix == ".timeindex":
                dump_time_index(
                    path,
                    out,
                    verify_only=args.verify_index_only,
                    sanity_only=args.index_sanity_check,
                )
            elif path.suffix == ".snapshot":
                dump_producer_snapshot(path, out)
            else:
                print(f"Ignoring unknown file {path}", file=sys.stderr)
                status = 1
        except OSError as e:
            print(f"Error: cannot read {path}: {e.strerror or e}", file=sys.stderr)
            status = 1
    return status


def base_offset_of(path: Path) -> int:
    stem = path.name.split(".")[0]
    if len(stem) != 20 or not stem.isdigit():
        raise KafkaError(f"{path.name} is not named after a 20-digit base offset")
    return int(stem)


def iter_batches(path: Path, max_bytes: int) -> Iterator[tuple[int, bytes | None, int]]:
    """(position, batch bytes, 0) for each whole batch; (position, None, n) for ``n`` torn
    bytes at the end."""
    with open(path, "rb") as f:
        size = min(f.seek(0, 2), max_bytes)
        pos = 0
        while pos < size:
            f.seek(pos)
            head = f.read(LOG_OVERHEAD)
            if len(head) < LOG_OVERHEAD:
                yield pos, None, size - pos
                return
            (length,) = struct.unpack_from(">i", head, 8)
            end = pos + LOG_OVERHEAD + length
            if length < 49 or end > size:
                yield pos, None, size - pos
                return
            yield pos, head + f.read(length), 0
            pos = end


def _show(b: bytes | None) -> str:
    return "" if b is None else b.decode("utf-8", errors="backslashreplace")


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment``, wrapping past 2**31 - 1 to 0 (Kafka's
    ``DefaultRecordBatch.incrementSequence``); -1 (no sequence) stays -1."""
    if sequence < 0:
        return -1
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def describe_control_record(record: Record) -> str:
    """Kafka's ``endTxnMarker: COMMIT coordinatorEpoch: 3`` for a transaction marker,
    ``controlType: NAME(id)`` for another control record."""
    key = record.key or b""
    if len(key) < 4 or struct.unpack_from(">h", key)[0] < 0:
        return f"controlType: UNKNOWN(invalid key of {len(key)} bytes)"
    (type_id,) = struct.unpack_from(">h", key, 2)
    name = CONTROL_RECORD_TYPES.get(type_id, "UNKNOWN")
    if name not in ("ABORT", "COMMIT"):
        return f"controlType: {name}({type_id})"
    value = record.value or b""
    if len(value) < 6 or struct.unpack_from(">h", value)[0] < 0:
        return f"endTxnMarker: {name} coordinatorEpoch: invalid ({len(value)} value bytes)"
    (coordinator_epoch,) = struct.unpack_from(">i", value, 2)
    return f"endTxnMarker: {name} coordinatorEpoch: {coordinator_epoch}"


def describe_batch(batch: RecordBatch, position: int, valid: bool) -> str:
    last_seq = increment_sequence(batch.base_sequence, batch.last_offset - batch.base_offset)
    return (
        f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} "
        f"count: {batch.record_count} "
        f"baseSequence: {batch.base_sequence} lastSequence: {last_seq} "
        f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
        f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
        f"isTransactional: {str(batch.is_transactional).lower()} "
        f"isControl: {str(batch.is_control).lower()} deleteHorizonMs: OptionalLong.empty "
        f"position: {position} {batch.timestamp_type}: {batch.max_timestamp} "
        f"size: {batch.size_in_bytes} magic: {batch.magic} compresscodec: {batch.compression} "
        f"crc: {batch.crc} isvalid: {str(valid).lower()}"
    )


def dump_log_file(path: Path, out: TextIO, *, deep: bool, print_data: bool, max_bytes: int) -> None:
    print(f"Log starting offset: {base_offset_of(path)}", file=out)
    for position, data, torn in iter_batches(path, max_bytes):
        if data is None:
            print(f"Found {torn} invalid bytes at the end of {path.name}", file=out)
            return
        try:
            validate_record_batches(data)
            valid = True
        except KafkaError:
            valid = False
        try:
            (batch,) = decode_batches(data, verify_crc=False)
        except KafkaError as e:
            print(f"position: {position} size: {len(data)} isvalid: false error: {e}", file=out)
            continue
        print(describe_batch(batch, position, valid), file=out)
        if not deep:
            continue
        for r in batch.records:
            seq = increment_sequence(batch.base_sequence, r.offset - batch.base_offset)
            line = (
                f"| offset: {r.offset} {batch.timestamp_type}: {r.timestamp} "
                f"keySize: {-1 if r.key is None else len(r.key)} "
                f"valueSize: {-1 if r.value is None else len(r.value)} sequence: {seq} "
                f"headerKeys: [{','.join(k for k, _ in r.headers)}]"
            )
            if batch.is_control:
                line += " " + describe_control_record(r)
            elif print_data:
                if r.key is not None:
                    line += f" key: {_show(r.key)}"
                if r.value is not None:
                    line += f" payload: {_show(r.value)}"
            print(line, file=out)


def describe_producer(entry: ProducerStateEntry) -> str:
    """One producer of a snapshot, as Kafka's DumpLogSegments prints it."""
    txn = entry.current_txn_start_offset
    line = (
        f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
        f"coordinatorEpoch: {entry.coordinator_epoch} "
        f"currentTxnFirstOffset: {'OptionalLong.empty' if txn is None else f'OptionalLong[{txn}]'} "
        f"lastTimestamp: {entry.last_timestamp} "
    )
    b = entry.last_batch
    if b is not None:
        line += (
            f"firstSequence: {b.first_sequence} lastSequence: {b.last_sequence} "
            f"lastOffset: {b.last_offset} offsetDelta: {b.offset_delta} timestamp: {b.timestamp}"
        )
    return line


def dump_producer_snapshot(path: Path, out: TextIO) -> None:
    """The producers of a producer-state snapshot; a corrupt one is reported on stderr, as
    Kafka reports a CorruptSnapshotException."""
    try:
        entries = read_producer_snapshot(path)
    except KafkaError as e:
        print(e, file=sys.stderr)
        return
    for entry in entries:
        print(describe_producer(entry), file=out)


def _log_batches_by_position(log_path: Path) -> dict[int, tuple[int, int]]:
    """position -> (last offset, max timestamp) for every whole batch in the log file."""
    found = {}
    for position, data, _ in iter_batches(log_path, 2**63 - 1):
        if data is None:
            break
        try:
            (batch,) = decode_batches(data, verify_crc=False)
        except KafkaError:
            break
        found[position] = (batch.last_offset, batch.max_timestamp)
    return found


def dump_offset_index(path: Path, out: TextIO, *, verify_only: bool, sanity_only: bool) -> None:
    base = base_offset_of(path)
    raw = path.read_bytes()
    entries = [
        (base + rel, pos) for rel, pos in struct.iter_unpack(">II", raw[: len(raw) // 8 * 8])
    ]
    # A preallocated (active) index ends in zero entries; they are not entries.
    while len(entries) > 1 and entries[-1] == (base, 0):
        entries.pop()
    log_path = path.with_suffix(".log")
    batches = _log_batches_by_position(log_path) if log_path.exists() else {}
    mismatches = []
    prev = None
    insane = False
    for offset, position in entries:
        if sanity_only:
            if prev is not None and (offset <= prev[0] or position <= prev[1]):
                insane = True
                print(
                    f"{path} has an out-of-order entry: offset {offset} position {position}",
                    file=out,
                )
            prev = (offset, position)
            continue
        actual = batches.get(position)
        if actual is not None and actual[0] != offset:
            mismatches.append((offset, actual[0]))
        elif actual is None and log_path.exists():
            mismatches.append((offset, -1))
        if not verify_only:
            print(f"offset: {offset} position: {position}", file=out)
    if mismatches:
        print(f"Mismatches in :{path}", file=out)
        for index_offset, log_offset in mismatches:
            print(f"  Index offset: {index_offset}, log offset: {log_offset}", file=out)
    elif sanity_only and not insane:
        print(f"{path} passed sanity check.", file=out)


def dump_time_index(path: Path, out: TextIO, *, verify_only: bool, sanity_only: bool) -> None:
    base = base_offset_of(path)
    raw = path.read_bytes()
    entries = [
        (ts, base + rel) for ts, rel in struct.iter_unpack(">qI", raw[: len(raw) // 12 * 12])
    ]
    while len(entries) > 1 and entries[-1] == (0, base):
        entries.pop()
    log_path = path.with_suffix(".log")
    batches = _log_batches_by_position(log_path) if log_path.exists() else {}
    by_last = {last: ts for last, ts in batches.values()}
    prev_ts = -1
    mismatches = []
    insane = False
    for ts, offset in entries:
        if ts <= prev_ts:
            insane = True
            print(f"Found timestamp mismatch in :{path}", file=out)
            print(f"  Index timestamp: {ts}, previous index timestamp: {prev_ts}", file=out)
        prev_ts = ts
        if not sanity_only and batches and by_last.get(offset) is None:
            mismatches.append((ts, offset))
        if not verify_only and not sanity_only:
            print(f"timestamp: {ts} offset: {offset}", file=out)
    if mismatches:
        print(f"Indexed offsets not found in :{path}", file=out)
        for ts, offset in mismatches:
            print(f"  Index timestamp: {ts}, offset: {offset}", file=out)
    elif sanity_only and not insane:
        print(f"{path} passed sanity check.", file=out)
