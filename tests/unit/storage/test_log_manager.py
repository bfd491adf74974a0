"""LogManager: placement over log dirs, checkpoints, the directory lock, topic-name safety,
retention, flushing, deletion and reloading."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from rillet import BatchBuilder, Log, decode_batches
from rillet.errors import (
    InvalidConfigurationError,
    InvalidTopicError,
    KafkaStorageError,
    OffsetOutOfRangeError,
)
from rillet.storage.dir_lock import LOCK_FILE
from rillet.storage.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    LogManager,
)
from rillet.types import TopicPartition

T0 = 1_700_000_000_000


class FakeClock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def managers() -> Iterator[list[LogManager]]:
    """Every LogManager a test starts is shut down afterwards (locks and files released)."""
    started: list[LogManager] = []
    yield started
    for lm in started:
        lm.shutdown()


def start(
    managers: list[LogManager],
    dirs: list[Path],
    broker_config: dict[str, object] | None = None,
    clock: FakeClock | None = None,
) -> LogManager:
    lm = LogManager(dirs, broker_config=broker_config or {}, clock=clock or FakeClock())
    lm.startup()
    managers.append(lm)
    return lm


def stop(managers: list[LogManager], lm: LogManager) -> None:
    managers.remove(lm)
    lm.shutdown()


def batch(n: int = 1, value_size: int = 100, ts: int = T0) -> bytes:
    b = BatchBuilder()
    for i in range(n):
        b.append(ts, b"k%d" % i, bytes([i % 251]) * value_size)
    return b.build()


def fill(log: Log, appends: int, *, n: int = 1, value_size: int = 100, ts: int = T0) -> None:
    for _ in range(appends):
        log.append_as_leader(batch(n, value_size, ts), 0, now_ms=ts)


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


# -- placement --------------------------------------------------------------------------------


def test_new_partitions_go_to_the_log_dir_with_the_fewest(
    tmp_path: Path, managers: list[LogManager]
) -> None:
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    lm = start(managers, dirs)
    for p in range(6):
        lm.get_or_create_log("t", p)
    per_dir = {d.resolve(): sorted(c.name for c in d.iterdir() if c.is_dir()) for d in dirs}
    assert [len(v) for v in per_dir.values()] == [2, 2, 2]
    assert sorted(n for v in per_dir.values() for n in v) == [f"t-{p}" for p in range(6)]
    for p in range(6):
        d = lm.log_dir_of("t", p)
        assert d is not None
        log = lm.get_log("t", p)
        assert log is not None
        assert log.dir.parent.resolve() == d
        assert f"t-{p}" in per_dir[d]
    # The same partition again is the same log, not a new directory.
    assert lm.get_or_create_log("t", 0) is lm.get_log("t", 0)
    assert sum(len(v) for v in per_dir.values()) == 6
    # A deleted partition frees room in its dir: the next one goes there.
    freed = lm.log_dir_of("t", 4)
    assert lm.delete_log("t", 4)
    lm.get_or_create_log("u", 0)
    assert lm.log_dir_of("u", 0) == freed


def test_placement_counts_partitions_loaded_at_startup(
    tmp_path: Path, managers: list[LogManager]
) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = start(managers, dirs[:1])
    for p in range(3):
        lm.get_or_create_log("t", p)
    stop(managers, lm)
    lm = start(managers, dirs)
    assert len(list(lm.all_logs())) == 3
    for p in range(3, 6):
        lm.get_or_create_log("t", p)
    counts = [len([c for c in d.iterdir() if c.is_dir()]) for d in dirs]
    assert counts == [3, 3]


# -- checkpoints and reload -----------------------------------------------------------------------


CHECKPOINT_LINE = re.compile(r"^(\S+) (\d+) (\d+)$")


def parse_checkpoint_text(text: str) -> dict[tuple[str, int], int]:
    lines = text.split("\n")
    assert lines[-1] == "", "the file ends with a newline"
    lines = lines[:-1]
    assert lines[0] == "0", "version 0"
    count = int(lines[1])
    assert len(lines) == 2 + count
    out = {}
    for line in lines[2:]:
        m = CHECKPOINT_LINE.match(line)
        assert m, f"bad checkpoint line {line!r}"
        out[(m.group(1), int(m.group(2)))] = int(m.group(3))
    assert len(out) == count
    return out


def test_checkpoints_are_written_in_kafkas_text_format(
    tmp_path: Path, managers: list[LogManager]
) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = start(managers, dirs, {"log.segment.bytes": 2048})
    for p in range(3):
        fill(lm.get_or_create_log("topic.with-dots_1", p), 5 * (p + 1))
    lm.get_or_create_log("empty", 0)
    a = lm.get_log("topic.with-dots_1", 0)
    assert a is not None
    a.flush()
    assert a.maybe_increment_log_start_offset(2)
    lm.checkpoint()

    recovery: dict[tuple[str, int], int] = {}
    starts: dict[tuple[str, int], int] = {}
    for d in dirs:
        text = (d / RECOVERY_POINT_CHECKPOINT).read_text()
        assert text.startswith("0\n")
        recovery.update(parse_checkpoint_text(text))
        starts.update(parse_checkpoint_text((d / LOG_START_OFFSET_CHECKPOINT).read_text()))
        # Only this dir's partitions are in this dir's files.
        mine = {
            (c.name.rsplit("-", 1)[0], int(c.name.rsplit("-", 1)[1]))
            for c in d.iterdir()
            if c.is_dir()
        }
        assert set(parse_checkpoint_text(text)) == mine
    tps = [("topic.with-dots_1", p) for p in range(3)] + [("empty", 0)]
    assert set(recovery) == set(tps) == set(starts)
    for topic, p in tps:
        log = lm.get_log(topic, p)
        assert log is not None
        assert recovery[(topic, p)] == log.recovery_point
        assert starts[(topic, p)] == log.log_start_offset
    assert recovery[("topic.with-dots_1", 0)] == 5
    assert starts[("topic.with-dots_1", 0)] == 2
    assert starts[("empty", 0)] == 0

    # An empty dir's checkpoint is just the header.
    lm2_dir = tmp_path / "lonely"
    lm2 = start(managers, [lm2_dir])
    lm2.checkpoint()
    assert (lm2_dir / RECOVERY_POINT_CHECKPOINT).read_text() == "0\n0\n"


def test_shutdown_and_reload_keep_offsets(tmp_path: Path, managers: list[LogManager]) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = start(managers, dirs, {"log.segment.bytes": 2048})
    for p in range(4):
        fill(lm.get_or_create_log("t", p), 10 + p)
    log0 = lm.get_log("t", 0)
    assert log0 is not None
    assert log0.maybe_increment_log_start_offset(3)
    placed = {p: lm.log_dir_of("t", p) for p in range(4)}
    stop(managers, lm)
    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_FILE).exists()

    lm = start(managers, dirs, {"log.segment.bytes": 2048})
    assert {tp for tp, _ in lm.all_logs()} == {TopicPartition("t", p) for p in range(4)}
    for d in dirs:
        assert not (d / CLEAN_SHUTDOWN_FILE).exists(), "removed once the logs are open"
    for p in range(4):
        log = lm.get_log("t", p)
        assert log is not None
        assert log.log_end_offset == 10 + p
        assert log.recovery_point == 10 + p
        assert lm.log_dir_of("t", p) == placed[p]
    log0 = lm.get_log("t", 0)
    assert log0 is not None
    assert log0.log_start_offset == 3
    with pytest.raises(OffsetOutOfRangeError):
        log0.read(2, 1 << 20)


def test_startup_removes_delete_dirs_and_ignores_strangers(
    tmp_path: Path, managers: list[LogManager]
) -> None:
    d = tmp_path / "a"
    (d / "t-0.abc123-delete").mkdir(parents=True)
    (d / "t-0.abc123-delete" / "00000000000000000000.log").write_bytes(b"")
    (d / "not a partition").mkdir()
    (d / "stray-file-0").write_text("x")
    (d / "__cluster_metadata-0").mkdir()  # the quorum's log, where metadata.log.dir is unset
    (d / "__cluster_metadata-0" / "00000000000000000000.log").write_bytes(b"x" * 10)
    lm = start(managers, [d])
    assert list(lm.all_logs()) == []
    assert not (d / "t-0.abc123-delete").exists()
    assert (d / "not a partition").exists()
    assert (d / "__cluster_metadata-0" / "00000000000000000000.log").read_bytes() == b"x" * 10


def test_duplicate_partition_in_two_dirs_is_refused(
    tmp_path: Path, managers: list[LogManager]
) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        lm = start(managers, [d])
        fill(lm.get_or_create_log("t", 0), 2)
        stop(managers, lm)
    lm = LogManager(dirs)
    with pytest.raises(KafkaStorageError, match="Duplicate"):
        lm.startup()
    # The failed startup let go of its locks.
    lm = start(managers, dirs[1:])
    assert lm.get_log("t", 0) is not None


# -- the lock -------------------------------------------------------------------------------------


def test_a_second_log_manager_on_the_same_dir_is_refused(
    tmp_path: Path, managers: list[LogManager]
) -> None:
    shared, other = tmp_path / "shared", tmp_path / "other"
    lm = start(managers, [shared])
    lm.get_or_create_log("t", 0)
    intruder = LogManager([other, shared])
    with pytest.raises(KafkaStorageError, match="lock") as exc:
        intruder.startup()
    assert LOCK_FILE in str(exc.value)
    assert str(shared.resolve()) in str(exc.value)
    # The refused manager released the lock it had taken on the other dir...
    lm2 = start(managers, [other])
    stop(managers, lm2)
    # ...and the first manager is unaffected.
    log = lm.get_log("t", 0)
    assert log is not None
    fill(log, 1)
    # Once the owner shuts down the dir is free again.
    stop(managers, lm)
    lm3 = start(managers, [shared])
    log3 = lm3.get_log("t", 0)
    assert log3 is not None and log3.log_end_offset == 1


def test_startup_without_log_dirs_and_use_before_startup(tmp_path: Path) -> None:
    with pytest.raises(KafkaStorageError):
        LogManager([]).startup()
    with pytest.raises(KafkaStorageError, match="not been started"):
        LogManager([tmp_path / "a"]).get_or_create_log("t", 0)


# -- topic names ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "topic",
    ["../evil", "a/b", "..", ".", "", "/abs", "a\\b", "tab\tname", "x" * 250, "..-0/../.."],
)
def test_topic_names_that_would_escape_the_dir_are_refused(
    tmp_path: Path, managers: list[LogManager], topic: str
) -> None:
    d = tmp_path / "logs" / "inner"
    lm = start(managers, [d])
    before = tree(tmp_path)
    with pytest.raises(InvalidTopicError):
        lm.get_or_create_log(topic, 0)
    assert tree(tmp_path) == before, "nothing may be created anywhere"
    assert list(lm.all_logs()) == []


@pytest.mark.parametrize("partition", [-1, True])
def test_bad_partition_numbers_are_refused(
    tmp_path: Path, managers: list[LogManager], partition: int
) -> None:
    lm = start(managers, [tmp_path / "a"])
    before = tree(tmp_path)
    with pytest.raises(InvalidTopicError):
        lm.get_or_create_log("t", partition)
    assert tree(tmp_path) == before


# -- retention ----------------------------------------------------------------------------------


def test_cleanup_logs_applies_retention_bytes(
    tmp_path: Path, managers: list[LogManager], clock: FakeClock
) -> None:
    retention = 10_000
    lm = start(
        managers,
        [tmp_path / "a"],
        {"log.retention.bytes": retention, "log.segment.bytes": 4096},
        clock,
    )
    log = lm.get_or_create_log("t", 0)
    # cleanup.policy without delete (empty: neither delete nor compact).
    compacted = lm.get_or_create_log("c", 0, overrides={"cleanup.policy": ""})
    fill(log, 120, value_size=300)
    fill(compacted, 120, value_size=300)
    end = log.log_end_offset
    segments_before = len(log.segments())
    assert log.size_in_bytes > 3 * retention

    deleted = lm.cleanup_logs()
    assert deleted > 0
    segs = log.segments()
    assert len(segs) == segments_before - deleted
    # Whole segments went from the front until one more would take the log under the limit.
    assert log.size_in_bytes - segs[0].size < retention <= log.size_in_bytes
    assert log.log_start_offset == segs[0].base_offset > 0
    assert log.log_end_offset == end
    with pytest.raises(OffsetOutOfRangeError):
        log.read(log.log_start_offset - 1, 1 << 20)
    data = log.read(log.log_start_offset, 1 << 24).read_all()
    batches = decode_batches(data)
    assert batches[0].base_offset == log.log_start_offset
    assert batches[-1].last_offset == end - 1
    # A topic without delete in its cleanup.policy is left alone; a second pass has nothing
    # to do.
    assert compacted.log_start_offset == 0
    assert lm.cleanup_logs() == 0


def test_a_compacted_log_is_created_with_its_compaction_configs(
    tmp_path: Path, managers: list[LogManager]
) -> None:
    lm = start(managers, [tmp_path / "a"])
    log = lm.get_or_create_log(
        "c", 0, overrides={"cleanup.policy": "compact", "delete.retention.ms": "5"}
    )
    assert log.config.compact and log.config.delete_retention_ms == 5
    fill(log, 3)  # keyed records: a compacted log takes them
    assert log.log_end_offset == 3
    with pytest.raises(InvalidConfigurationError, match=r"cleanup\.policy"):
        lm.get_or_create_log("x", 0, overrides={"cleanup.policy": "shred"})


def test_cleanup_logs_stops_at_the_high_watermark(
    tmp_path: Path, managers: list[LogManager], clock: FakeClock
) -> None:
    lm = start(
        managers,
        [tmp_path / "a"],
        {"log.retention.bytes": 0, "log.segment.bytes": 4096},
        clock,
    )
    log = lm.get_or_create_log("t", 0)
    fill(log, 60, value_size=300)
    segs = log.segments()
    assert len(segs) >= 4
    hw = segs[2].base_offset  # only the first two segments lie wholly below it
    assert lm.cleanup_logs({TopicPartition("t", 0): hw}) == 2
    assert log.log_start_offset == hw
    # Without a high watermark the log end is the limit: all but an empty active segment go.
    lm.cleanup_logs()
    assert log.log_start_offset == log.log_end_offset
    assert log.size_in_bytes == 0


def test_cleanup_logs_applies_retention_ms(
    tmp_path: Path, managers: list[LogManager], clock: FakeClock
) -> None:
    lm = start(
        managers,
        [tmp_path / "a"],
        {"log.retention.ms": 60_000, "log.segment.bytes": 4096},
        clock,
    )
    log = lm.get_or_create_log("t", 0)
    fill(log, 30, value_size=300, ts=clock.now)
    old_segments = len(log.segments())
    clock.now += 30_000
    fill(log, 30, value_size=300, ts=clock.now)
    assert lm.cleanup_logs() == 0, "nothing is older than retention.ms yet"
    clock.now += 45_000  # the first half is now 75 s old, the second 45 s
    deleted = lm.cleanup_logs()
    assert 0 < deleted <= old_segments
    first = log.read(log.log_start_offset, 1 << 20).read_all()
    assert decode_batches(first)[0].max_timestamp >= T0  # still readable from the new start
    clock.now += 60_000
    lm.cleanup_logs()
    assert log.log_start_offset == log.log_end_offset == 60


# -- flushing --------------------------------------------------------------------------------------


def test_flush_dirty_logs_flushes_rolled_segments(
    tmp_path: Path, managers: list[LogManager], clock: FakeClock
) -> None:
    lm = start(managers, [tmp_path / "a"], {"log.segment.bytes": 4096}, clock)
    log = lm.get_or_create_log("t", 0)
    assert lm.flush_dirty_logs() == 0
    fill(log, 40, value_size=300)
    assert len(log.segments()) > 1
    assert log.recovery_point == 0
    assert lm.flush_dirty_logs() == 1
    # Defaults (flush.messages and flush.ms unlimited): only the rolled segments.
    assert log.recovery_point == log.active_segment_base_offset < log.log_end_offset
    assert lm.flush_dirty_logs() == 0


def test_flush_dirty_logs_honours_flush_messages(
    tmp_path: Path, managers: list[LogManager], clock: FakeClock
) -> None:
    lm = start(managers, [tmp_path / "a"], {"log.flush.interval.messages": 10}, clock)
    log = lm.get_or_create_log("t", 0)
    quiet = lm.get_or_create_log("t", 1)
    fill(log, 9)
    fill(quiet, 9)
    assert lm.flush_dirty_logs() == 0
    assert log.recovery_point == 0
    fill(log, 1)
    assert lm.flush_dirty_logs() == 1
    assert log.recovery_point == log.log_end_offset == 10
    assert quiet.recovery_point == 0


def test_flush_dirty_logs_honours_flush_ms(
    tmp_path: Path, managers: list[LogManager], clock: FakeClock
) -> None:
    lm = start(managers, [tmp_path / "a"], {"log.flush.interval.ms": 1000}, clock)
    log = lm.get_or_create_log("t", 0)
    fill(log, 3)
    clock.now += 999
    assert lm.flush_dirty_logs() == 0
    assert log.recovery_point == 0
    clock.now += 1
    assert lm.flush_dirty_logs() == 1
    assert log.recovery_point == 3
    fill(log, 2)
    clock.now += 500
    assert lm.flush_dirty_logs() == 0
    clock.now += 500
    assert lm.flush_dirty_logs() == 1
    assert log.recovery_point == 5


# -- deletion and config ------------------------------------------------------------------------


def test_delete_log_removes_the_directory(tmp_path: Path, managers: list[LogManager]) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = start(managers, dirs)
    log = lm.get_or_create_log("t", 0)
    keep = lm.get_or_create_log("t", 1)
    fill(log, 5)
    fill(keep, 5)
    path = log.dir
    assert path.is_dir()
    assert lm.delete_log("t", 0) is True
    assert not path.exists()
    assert lm.get_log("t", 0) is None
    assert lm.log_dir_of("t", 0) is None
    assert lm.delete_log("t", 0) is False
    assert keep.log_end_offset == 5 and keep.dir.is_dir()
    # The checkpoints forget it, and a reload does not bring it back.
    lm.checkpoint()
    for d in dirs:
        assert ("t", 0) not in parse_checkpoint_text((d / RECOVERY_POINT_CHECKPOINT).read_text())
    stop(managers, lm)
    lm = start(managers, dirs)
    assert lm.get_log("t", 0) is None
    assert lm.get_log("t", 1) is not None
    # Re-creating it starts an empty log.
    again = lm.get_or_create_log("t", 0)
    assert again.log_end_offset == 0


def test_update_topic_config_reaches_every_partition(
    tmp_path: Path, managers: list[LogManager]
) -> None:
    lm = start(managers, [tmp_path / "a"])
    for p in range(3):
        lm.get_or_create_log("t", p)
    other = lm.get_or_create_log("u", 0)
    lm.update_topic_config("t", {"segment.bytes": 4096, "retention.bytes": 1234})
    for p in range(3):
        log = lm.get_log("t", p)
        assert log is not None
        assert log.config.segment_bytes == 4096
        assert log.config.retention_bytes == 1234
    assert other.config.segment_bytes == 1 << 30
    # New partitions of the topic get the overrides too.
    assert lm.get_or_create_log("t", 3).config.segment_bytes == 4096


# -- robustness -----------------------------------------------------------------------------------


def test_shutdown_twice_keeps_the_checkpoints(tmp_path: Path) -> None:
    """Regression: a second shutdown() used to rewrite both checkpoints empty (its logs were
    already cleared), so the next startup lost every log start offset."""
    d = tmp_path / "a"
    lm = LogManager([d], clock=FakeClock())
    lm.startup()
    log = lm.get_or_create_log("t", 0)
    fill(log, 3, n=5)
    assert log.maybe_increment_log_start_offset(7)  # DeleteRecords
    lm.shutdown()
    assert parse_checkpoint_text((d / LOG_START_OFFSET_CHECKPOINT).read_text()) == {("t", 0): 7}
    lm.shutdown()  # e.g. a signal handler and a finally block both shutting down
    assert parse_checkpoint_text((d / LOG_START_OFFSET_CHECKPOINT).read_text()) == {("t", 0): 7}
    lm = LogManager([d], clock=FakeClock())
    lm.startup()
    try:
        reloaded = lm.get_log("t", 0)
        assert reloaded is not None
        assert reloaded.log_start_offset == 7, "deleted records came back"
    finally:
        lm.shutdown()


def test_a_refused_second_startup_keeps_the_first_lock(tmp_path: Path) -> None:
    """Regression: a refused second startup() used to release the locks of the first, so
    another LogManager could open the directory while this one was running."""
    d = tmp_path / "a"
    lm = LogManager([d])
    lm.startup()
    try:
        with pytest.raises(KafkaStorageError):
            lm.startup()
        other = LogManager([d])
        try:
            other.startup()
        except KafkaStorageError as e:
            assert "lock" in str(e)
        else:
            other.shutdown()
            pytest.fail("a second LogManager opened a directory in use")
    finally:
        lm.shutdown()


def test_shutdown_after_a_refused_startup_leaves_the_owners_dir_alone(tmp_path: Path) -> None:
    """Regression: shutdown() of a manager whose startup was refused used to empty the
    owner's checkpoints and create .kafka_cleanshutdown in its dir, so that if the owner then
    crashed its logs were trusted without recovery."""
    d = tmp_path / "a"
    owner = LogManager([d], clock=FakeClock())
    owner.startup()
    try:
        fill(owner.get_or_create_log("t", 0), 3)
        owner.checkpoint()
        before = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}
        intruder = LogManager([d], clock=FakeClock())
        try:
            with pytest.raises(KafkaStorageError, match="lock"):
                intruder.startup()
        finally:
            intruder.shutdown()  # the usual try/finally cleanup of a failed start
        after = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}
        assert CLEAN_SHUTDOWN_FILE not in after, "the running owner's dir is marked clean"
        assert after == before
    finally:
        owner.shutdown()


@pytest.mark.parametrize("marker", [False, True], ids=["crashed", "marked-clean"])
def test_a_malformed_recovery_point_checkpoint_means_recover_everything(
    tmp_path: Path, marker: bool
) -> None:
    """As Kafka: a damaged recovery-point file is not fatal; every log in the dir is
    recovered from offset 0 (even with a clean-shutdown marker: the file cannot be trusted).
    Refusing to start used to be the behaviour."""
    d = tmp_path / "a"
    lm = LogManager([d], clock=FakeClock())
    lm.startup()
    fill(lm.get_or_create_log("t", 0), 4)
    lm.shutdown()
    (d / RECOVERY_POINT_CHECKPOINT).write_text("garbage\n")
    if not marker:
        (d / CLEAN_SHUTDOWN_FILE).unlink()
    lm = LogManager([d], clock=FakeClock())
    recovered = lm.startup()
    try:
        assert recovered[TopicPartition("t", 0)].recovered_segments == 1
        log = lm.get_log("t", 0)
        assert log is not None and log.log_end_offset == 4
    finally:
        lm.shutdown()


def test_a_malformed_log_start_checkpoint_is_ignored(tmp_path: Path) -> None:
    d = tmp_path / "a"
    lm = LogManager([d], clock=FakeClock())
    lm.startup()
    log = lm.get_or_create_log("t", 0)
    fill(log, 6)
    assert log.maybe_increment_log_start_offset(3)
    lm.shutdown()
    (d / LOG_START_OFFSET_CHECKPOINT).write_text("0\n1\nt 0\n")
    lm = LogManager([d], clock=FakeClock())
    lm.startup()
    try:
        log = lm.get_log("t", 0)
        assert log is not None
        assert log.log_end_offset == 6
        assert log.log_start_offset == 0  # the first segment's base, as Kafka
    finally:
        lm.shutdown()


def test_the_clean_shutdown_marker_carries_the_broker_epoch(
    tmp_path: Path, managers: list[LogManager]
) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = start(managers, dirs)
    assert lm.previous_broker_epoch == -1  # a first start
    managers.remove(lm)
    lm.shutdown(broker_epoch=42)
    assert json.loads((dirs[0] / CLEAN_SHUTDOWN_FILE).read_text()) == {
        "version": 0,
        "brokerEpoch": 42,
    }
    lm = start(managers, dirs)
    assert lm.previous_broker_epoch == 42
    managers.remove(lm)
    lm.shutdown(broker_epoch=43)
    # One dir without its marker (or with an unreadable one): the shutdown was not clean.
    (dirs[1] / CLEAN_SHUTDOWN_FILE).write_text("garbage")
    assert start(managers, dirs).previous_broker_epoch == -1
