"""The metadata log on the Rust Log, against the RaftLog contract that the in-memory log of
the Raft tests follows."""

from __future__ import annotations

from pathlib import Path

from rillet.raft.log import Entry, EpochEndOffset, validate_offset_and_epoch
from rillet.raft.memory import MemoryRaftLog
from rillet.raft.metadata_log import MetadataLog


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
