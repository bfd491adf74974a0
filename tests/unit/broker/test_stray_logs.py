"""Topic ids on disk (``partition.metadata``) and stray logs: a broker whose metadata jumped
over records it never applied deletes the local logs the new image does not place on it, and
never serves an old topic's records as those of a new topic with the same name."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet import BatchBuilder
from rillet.broker.metadata_publisher import MetadataPublisher
from rillet.broker.replica_manager import ReplicaManager
from rillet.metadata.image import MetadataDelta, MetadataImage
from rillet.metadata.records import (
    BrokerEndpoint,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from rillet.metadata.snapshot import image_records
from rillet.storage.log_manager import LogManager
from rillet.storage.partition_metadata import (
    PARTITION_METADATA_FILE,
    read_topic_id,
    write_topic_id,
)
from rillet.types import TopicPartition

OLD_ID, NEW_ID, KEPT_ID, MOVED_ID = (uuid.UUID(int=i) for i in (101, 102, 103, 104))
EP = (BrokerEndpoint("PLAINTEXT", "localhost", 9092),)


def _image(*topics: tuple[str, uuid.UUID, tuple[int, ...]]) -> MetadataImage:
    records: list[MetadataRecord] = [
        RegisterBrokerRecord(1, uuid.UUID(int=11), 1, EP, None, True),
        UnfenceBrokerRecord(1, 1),
    ]
    for name, topic_id, replicas in topics:
        records += [
            TopicRecord(name, topic_id),
            PartitionRecord(topic_id, 0, replicas, replicas, replicas[0]),
        ]
    delta = MetadataDelta(MetadataImage())
    for i, r in enumerate(records):
        delta.replay(i, r)
    return delta.apply()


def _apply(rm: ReplicaManager, image: MetadataImage) -> None:
    delta = MetadataDelta(rm.image)
    for i, r in enumerate(image_records(image)):
        delta.replay(rm.image.offset + 1 + i, r)
    rm.apply_partition_changes(delta.partition_changes(), delta.apply())


def _append(lm: LogManager, topic: str, n: int) -> None:
    log = lm.get_log(topic, 0)
    assert log is not None
    b = BatchBuilder()
    for i in range(n):
        b.append(1_000, None, b"v%d" % i)
    log.append_as_leader(b.build(), leader_epoch=0)


@pytest.fixture
def logs_dir(tmp_path: Path) -> Path:
    return tmp_path / "logs"


@pytest.fixture
def log_manager(logs_dir: Path) -> Iterator[LogManager]:
    lm = LogManager([logs_dir])
    lm.startup()
    yield lm
    lm.shutdown()


def _restarted(lm: LogManager, logs_dir: Path) -> LogManager:
    lm.shutdown()
    again = LogManager([logs_dir])
    again.startup()
    return again


def test_partition_metadata_round_trips_in_kafkas_format(tmp_path: Path) -> None:
    assert read_topic_id(tmp_path) is None
    write_topic_id(tmp_path, NEW_ID)
    text = (tmp_path / PARTITION_METADATA_FILE).read_text()
    assert text == "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAZg\n"
    assert read_topic_id(tmp_path) == NEW_ID


@pytest.mark.parametrize(
    "text",
    ["", "version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAZg\n", "version: 0\ntopic_id: nope\n", "\xff"],
)
def test_an_unreadable_partition_metadata_file_is_named(tmp_path: Path, text: str) -> None:
    (tmp_path / PARTITION_METADATA_FILE).write_text(text, encoding="latin-1")
    with pytest.raises(ValueError, match=r"partition\.metadata"):
        read_topic_id(tmp_path)


def test_the_log_manager_records_and_reloads_topic_ids(
    log_manager: LogManager, logs_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log_manager.get_or_create_log("t", 0, None, NEW_ID)
    log_manager.get_or_create_log("legacy", 0)
    log_manager.get_or_create_log("broken", 0, None, OLD_ID)
    (logs_dir / "broken-0" / PARTITION_METADATA_FILE).write_text("garbage")
    assert log_manager.topic_id_of("legacy", 0) is None
    with caplog.at_level(logging.WARNING):
        lm = _restarted(log_manager, logs_dir)
    try:
        assert lm.topic_id_of("t", 0) == NEW_ID
        assert lm.topic_id_of("legacy", 0) is None
        assert lm.topic_id_of("broken", 0) is None  # unreadable: unknown, not fatal
        assert "the topic id of broken-0 is unknown" in caplog.text
        lm.get_or_create_log("legacy", 0, None, KEPT_ID)  # recorded once known
        assert read_topic_id(logs_dir / "legacy-0") == KEPT_ID
    finally:
        lm.shutdown()


def test_a_recreated_topic_does_not_inherit_the_old_topics_log(
    log_manager: LogManager, logs_dir: Path
) -> None:
    rm = ReplicaManager(1, log_manager, lambda: 1_000)
    _apply(rm, _image(("t", OLD_ID, (1,))))
    _append(log_manager, "t", 5)
    lm = _restarted(log_manager, logs_dir)
    try:
        # The broker comes back to find "t" deleted and created anew meanwhile.
        rm = ReplicaManager(1, lm, lambda: 1_000)
        _apply(rm, _image(("t", NEW_ID, (1,))))
        log = lm.get_log("t", 0)
        assert log is not None and log.log_end_offset == 0
        assert lm.topic_id_of("t", 0) == NEW_ID
        assert read_topic_id(logs_dir / "t-0") == NEW_ID
    finally:
        lm.shutdown()


def test_stray_logs_go_when_a_snapshot_skips_the_records_that_removed_them(
    log_manager: LogManager, logs_dir: Path
) -> None:
    before = _image(("gone", OLD_ID, (1,)), ("kept", KEPT_ID, (1,)), ("moved", MOVED_ID, (1,)))
    rm = ReplicaManager(1, log_manager, lambda: 1_000)
    publisher = MetadataPublisher(rm, log_manager)
    publisher.load_snapshot(image_records(before), before.offset + 1)
    for topic in ("gone", "kept", "moved"):
        _append(log_manager, topic, 3)
    lm = _restarted(log_manager, logs_dir)
    try:
        rm = ReplicaManager(1, lm, lambda: 1_000)
        publisher = MetadataPublisher(rm, lm)
        after = _image(("kept", KEPT_ID, (1,)), ("moved", MOVED_ID, (2,)), ("new", NEW_ID, (1,)))
        # Loading its own (older) snapshot at start-up deletes nothing: records after it
        # may yet place those logs here.
        older = _image(("kept", KEPT_ID, (1,)))
        publisher.load_snapshot(image_records(older), older.offset + 1)
        assert {tp.topic for tp, _ in lm.all_logs()} == {"gone", "kept", "moved"}
        publisher.load_snapshot(image_records(after), 1_000, skipped=True)
        assert sorted(tp.topic for tp, _ in lm.all_logs()) == ["kept", "new"]
        assert not (logs_dir / "gone-0").exists() and not (logs_dir / "moved-0").exists()
        kept = lm.get_log("kept", 0)
        assert kept is not None and kept.log_end_offset == 3  # its records stay
    finally:
        lm.shutdown()


def test_a_held_publisher_acts_only_when_released(log_manager: LogManager, logs_dir: Path) -> None:
    rm = ReplicaManager(1, log_manager, lambda: 1_000)
    publisher = MetadataPublisher(rm, log_manager)
    old = _image(("gone", OLD_ID, (1,)))
    publisher.load_snapshot(image_records(old), old.offset + 1)
    lm = _restarted(log_manager, logs_dir)
    try:
        rm = ReplicaManager(1, lm, lambda: 1_000)
        publisher = MetadataPublisher(rm, lm, held=True)
        now = _image(("kept", KEPT_ID, (1,)))
        publisher.load_snapshot(image_records(now), now.offset + 1)
        # The image moves on; nothing is led, created or deleted yet.
        assert publisher.image.topic("kept") is not None
        assert rm.partitions == {} and {tp.topic for tp, _ in lm.all_logs()} == {"gone"}
        publisher.release()
        assert list(rm.partitions) == [TopicPartition("kept", 0)]
        assert rm.partitions[TopicPartition("kept", 0)].is_leader
        assert {tp.topic for tp, _ in lm.all_logs()} == {"kept"}  # "gone" was a stray
    finally:
        lm.shutdown()
