"""The metadata log on the Rust Log, against the RaftLog contract that the in-memory log of
the Raft tests follows."""

from __future__ import annotations

from pathlib import Path

import pytest

from rillet.raft.log import Entry, EpochEndOffset, SnapshotId, validate_offset_and_epoch
from rillet.raft.memory import MemoryRaftLog
from rillet.raft.metadata_log import (
    METADATA_TOPIC,
    MetadataLog,
    parse_snapshot_name,
    snapshot_name,
)


def fill(log: MetadataLog | MemoryRaftLog) -> None:
    log.append_as_leader([b"c"], 1, control=True)
    log.append_as_leader([b"a", b"b"], 1)
    log.append_as_leader([b"x"], 3, control=True)
    log.append_as_leader([b"y", b"z"], 3)


def test_matches_the_in_memory_log(tmp_path: Path) -> None:
    disk = MetadataLog.open(tmp_path)
    mem = MemoryRaftLog()
    for log in (disk, mem):
        assert (log.end_offset, log.last_fetched_epoch, log.log_start_offset) == (0, 0, 0)
        assert log.end_offset_for_epoch(2) == EpochEndOffset(2, 0)
        fill(log)
    assert disk.read(0, 100) == mem.read(0, 100)
    assert disk.read(2, 2) == [Entry(2, 1, b"b"), Entry(3, 3, b"x", True)]
    assert disk.read(6, 10) == []
    for epoch in (0, 1, 2, 3, 4, 9):
        assert disk.end_offset_for_epoch(epoch) == mem.end_offset_for_epoch(epoch), epoch
    for offset, epoch in ((0, 0), (3, 1), (4, 1), (6, 3), (5, 2)):
        assert validate_offset_and_epoch(disk, offset, epoch) == validate_offset_and_epoch(
            mem, offset, epoch
        )
    disk.truncate_to(3)
    mem.truncate_to(3)
    assert disk.read(0, 100) == mem.read(0, 100)
    assert disk.last_fetched_epoch == mem.last_fetched_epoch == 1
    entries = [Entry(3, 4, b"f1"), Entry(4, 4, b"f2"), Entry(5, 5, b"g", True)]
    disk.append_as_follower(entries)
    mem.append_as_follower(entries)
    assert disk.read(0, 100) == mem.read(0, 100)
    assert disk.end_offset_for_epoch(4) == mem.end_offset_for_epoch(4) == EpochEndOffset(4, 5)
    disk.flush()
    disk.close()
    again = MetadataLog.open(tmp_path)
    assert again.read(0, 100) == mem.read(0, 100)
    again.close()


# -- snapshots (KIP-630) ---------------------------------------------------------------------


def test_snapshots_match_the_in_memory_log(tmp_path: Path) -> None:
    disk = MetadataLog.open(tmp_path, segment_bytes=100)
    mem = MemoryRaftLog()
    for log in (disk, mem):
        for i in range(10):
            log.append_as_leader([b"r%d" % i], 1 if i < 6 else 2)
        log.create_snapshot(SnapshotId(4, 1), b"four")
        log.create_snapshot(SnapshotId(8, 2), b"eight!")
        assert log.snapshot_ids() == [SnapshotId(4, 1), SnapshotId(8, 2)]
        assert log.snapshot_size(SnapshotId(8, 2)) == 6
        assert log.read_snapshot(SnapshotId(8, 2), 2, 3) == b"ght"
        assert log.read_snapshot(SnapshotId(8, 2), 6, 3) == b""
        with pytest.raises(IndexError):
            log.read_snapshot(SnapshotId(8, 2), 7, 3)
        with pytest.raises(KeyError):
            log.read_snapshot(SnapshotId(5, 1), 0, 3)
        assert log.delete_before_snapshot(SnapshotId(8, 2))
        assert not log.delete_before_snapshot(SnapshotId(8, 2))
        assert (log.log_start_offset, log.end_offset, log.last_fetched_epoch) == (8, 10, 2)
        assert log.snapshot_ids() == [SnapshotId(8, 2)]
    for offset, epoch in ((7, 2), (8, 2), (8, 1), (9, 2), (10, 2), (9, 1)):
        assert validate_offset_and_epoch(disk, offset, epoch) == validate_offset_and_epoch(
            mem, offset, epoch
        ), (offset, epoch)
    assert disk.read(8, 10) == mem.read(8, 10)
    # Segments wholly below the new start are gone from the disk.
    assert all(seg.base_offset >= 4 for seg in disk.log.segments())
    assert not (tmp_path / f"{METADATA_TOPIC}-0" / snapshot_name(SnapshotId(4, 1))).exists()
    disk.close()


def test_reopening_keeps_complete_snapshots_only(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path, segment_bytes=100)
    for i in range(10):
        log.append_as_leader([b"r%d" % i], 1)
    log.create_snapshot(SnapshotId(6, 1), b"six")
    log.flush()
    log.close()
    part = tmp_path / f"{METADATA_TOPIC}-0" / (snapshot_name(SnapshotId(9, 1)) + ".part")
    part.write_bytes(b"torn")
    log = MetadataLog.open(tmp_path, segment_bytes=100)
    assert log.snapshot_ids() == [SnapshotId(6, 1)]
    assert not part.exists()
    assert log.end_offset == 10
    log.close()


def test_a_snapshot_ahead_of_the_log_restarts_it_on_open(tmp_path: Path) -> None:
    # A follower that crashed after storing a fetched snapshot, before cutting its log.
    log = MetadataLog.open(tmp_path)
    log.append_as_leader([b"a", b"b"], 1)
    log.create_snapshot(SnapshotId(7, 3), b"seven")
    log.flush()
    log.close()
    log = MetadataLog.open(tmp_path)
    assert (log.log_start_offset, log.end_offset, log.last_fetched_epoch) == (7, 7, 3)
    log.append_as_follower([Entry(7, 3, b"next")])
    assert log.read(7, 1) == [Entry(7, 3, b"next")]
    assert log.last_fetched_epoch == 3
    log.close()
    log = MetadataLog.open(tmp_path)
    assert (log.log_start_offset, log.end_offset, log.snapshot_ids()) == (7, 8, [SnapshotId(7, 3)])
    log.close()


def test_the_file_names_are_kafkas() -> None:
    assert snapshot_name(SnapshotId(1234, 5)) == "00000000000000001234-0000000005.checkpoint"
    assert parse_snapshot_name("00000000000000001234-0000000005.checkpoint") == (1234, 5)
    for other in ("00000000000000001234.log", "x-0000000005.checkpoint", "1-2.checkpoint"):
        assert parse_snapshot_name(other) is None
