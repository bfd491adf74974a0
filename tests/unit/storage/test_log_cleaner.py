"""The log cleaner's scheduling (rillet.storage.log_cleaner) and its wiring in the LogManager:
which log is cleaned and when, ``cleaner-offset-checkpoint``, high watermarks, retention next
to compaction, aborting, the worker threads; and the configs with Kafka's error messages."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rillet import BatchBuilder, Log, decode_batches
from rillet._core import CleanerConfig
from rillet.config import BrokerConfig, resolve_topic_config
from rillet.errors import InvalidConfigurationError, InvalidRecordError
from rillet.storage.log_cleaner import CLEANER_OFFSET_CHECKPOINT, LogCleaner, LogCleanerConfig
from rillet.storage.log_manager import LogManager
from rillet.types import TopicPartition

T0 = 1_700_000_000_000
COMPACT = {"cleanup.policy": "compact", "segment.bytes": 2048}


class FakeClock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class FakeScheduler:
    """Records the periodic tasks handed to it; the test runs them."""

    def __init__(self) -> None:
        self.tasks: dict[str, tuple[Callable[[], object], int]] = {}

    def schedule(self, name: str, fn: Callable[[], object], interval_ms: int) -> None:
        self.tasks[name] = (fn, interval_ms)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def managers() -> Iterator[list[LogManager]]:
    started: list[LogManager] = []
    yield started
    for lm in started:
        lm.shutdown()


def start(
    managers: list[LogManager],
    d: Path,
    clock: FakeClock,
    cleaner_config: LogCleanerConfig | None = None,
    broker_config: dict[str, object] | None = None,
) -> LogManager:
    lm = LogManager(
        [d],
        broker_config=broker_config or {},
        clock=clock,
        cleaner_config=cleaner_config or LogCleanerConfig(),
    )
    lm.startup()
    managers.append(lm)
    return lm


def put(log: Log, records: list[tuple[bytes, bytes | None]], ts: int = T0) -> None:
    b = BatchBuilder("lz4")
    for k, v in records:
        b.append(ts, k, v)
    log.append_as_leader(b.build(), 0, now_ms=ts)


def churn(log: Log, rounds: int, keys: int, ts: int = T0) -> None:
    """``rounds`` batches of 8 records over ``keys`` keys, then roll: all of it cleanable."""
    for r in range(rounds):
        put(log, [(b"k%d" % ((r * 8 + i) % keys), b"v%d-%d" % (r, i) * 10) for i in range(8)], ts)
    log.roll(now_ms=ts)


def contents(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    data = log.read(log.log_start_offset, 1 << 30).read_all()
    return [(r.offset, r.key, r.value) for b in decode_batches(data) for r in b.records]


def latest(log: Log) -> dict[bytes | None, bytes | None]:
    return {k: v for _, k, v in contents(log)}


def cleaner_of(lm: LogManager) -> LogCleaner:
    assert lm.cleaner is not None
    return lm.cleaner


# -- configs ----------------------------------------------------------------------------------


def test_cleaner_config_comes_from_the_broker_keys(tmp_path: Path) -> None:
    assert LogCleanerConfig.from_broker_config({}) == LogCleanerConfig()
    assert (
        LogCleanerConfig.from_broker_config(BrokerConfig.embedded_default(tmp_path).values)
        == LogCleanerConfig()
    )
    broker = BrokerConfig.embedded_default(
        tmp_path,
        {
            "log.cleaner.enable": "false",
            "log.cleaner.threads": "4",
            "log.cleaner.dedupe.buffer.size": str(64 << 20),
            "log.cleaner.io.buffer.load.factor": "0.5",
            "log.cleaner.io.buffer.size": "65536",
            "log.cleaner.backoff.ms": "100",
        },
    )
    c = LogCleanerConfig.from_broker_config(broker.values)
    assert c == LogCleanerConfig(False, 4, 64 << 20, 0.5, 65536, 100)
    # Each thread gets its share of the dedupe buffer, as in Kafka.
    assert c.cleaner_config() == CleanerConfig(
        dedupe_buffer_size=16 << 20, dedupe_buffer_load_factor=0.5, io_buffer_size=65536
    )


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"log.cleaner.io.buffer.load.factor": "2"},
            "Invalid value 2.0 for configuration log.cleaner.io.buffer.load.factor: "
            "Value must be between 0 and 1",
        ),
        (
            {"log.cleaner.min.cleanable.ratio": "1.5"},
            "Invalid value 1.5 for configuration log.cleaner.min.cleanable.ratio: "
            "Value must be between 0 and 1",
        ),
        (
            {"log.cleaner.threads": "-1"},
            "Invalid value -1 for configuration log.cleaner.threads: Value must be at least 0",
        ),
        (
            {"log.cleanup.policy": "compact,shred"},
            "Invalid value shred for configuration log.cleanup.policy: "
            "String must be one of: delete, compact",
        ),
    ],
)
def test_broker_cleaner_keys_are_validated(props: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigurationError) as info:
        BrokerConfig(props)
    assert info.value.message == message
    assert info.value.name == "INVALID_CONFIG"


def test_a_dedupe_buffer_that_cannot_hold_a_slot_is_refused() -> None:
    with pytest.raises(InvalidConfigurationError, match=r"log\.cleaner\.dedupe\.buffer\.size"):
        LogCleanerConfig(dedupe_buffer_size=100, num_threads=8)
    with pytest.raises(InvalidConfigurationError, match=r"log\.cleaner\.io\.buffer\.load\.factor"):
        LogCleanerConfig(dedupe_buffer_load_factor=0.0)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"cleanup.policy": "compact,shred"},
            "Invalid value shred for configuration cleanup.policy: "
            "String must be one of: delete, compact",
        ),
        (
            {"min.cleanable.dirty.ratio": "1.01"},
            "Invalid value 1.01 for configuration min.cleanable.dirty.ratio: "
            "Value must be between 0 and 1",
        ),
        (
            {"min.compaction.lag.ms": "-1"},
            "Invalid value -1 for configuration min.compaction.lag.ms: Value must be at least 0",
        ),
        (
            {"max.compaction.lag.ms": "0"},
            "Invalid value 0 for configuration max.compaction.lag.ms: Value must be at least 1",
        ),
        (
            {"delete.retention.ms": "-5"},
            "Invalid value -5 for configuration delete.retention.ms: Value must be at least 0",
        ),
        (
            {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
            "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)",
        ),
    ],
)
def test_topic_compaction_configs_are_validated(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigurationError) as info:
        resolve_topic_config({}, overrides)
    assert info.value.message == message


def test_topic_compaction_configs_reach_the_log() -> None:
    cfg = resolve_topic_config(
        {"log.cleaner.min.cleanable.ratio": 0.2, "log.cleaner.delete.retention.ms": 7},
        {"cleanup.policy": "compact,delete", "max.compaction.lag.ms": "9000"},
    )
    lc = cfg.log_config()
    assert (lc.compact, lc.delete_retention_ms, lc.min_cleanable_dirty_ratio) == (True, 7, 0.2)
    assert (lc.min_compaction_lag_ms, lc.max_compaction_lag_ms) == (0, 9000)
    assert cfg.sources["min.cleanable.dirty.ratio"] == "STATIC_BROKER_CONFIG"
    assert not resolve_topic_config().log_config().compact


# -- appends ----------------------------------------------------------------------------------


def test_a_compacted_topic_refuses_records_without_a_key(
    tmp_path: Path, managers: list[LogManager], clock: FakeClock
) -> None:
    lm = start(managers, tmp_path / "logs", clock)
    log = lm.get_or_create_log("c", 0, overrides=COMPACT)
    with pytest.raises(InvalidRecordError) as info:
        put(log, [(b"k", b"v"), (None, b"no key")])  # type: ignore[list-item]
    assert info.value.message == (
        "Compacted topic cannot accept message without key in topic partition c-0."
    )
    assert log.log_end_offset == 0
    # A delete topic takes them; turning it compacted makes the log refuse them.
    plain = lm.get_or_create_log("d", 0)
    put(plain, [(None, b"x")])  # type: ignore[list-item]
    lm.update_topic_config("d", {"cleanup.policy": "compact"})
    with pytest.raises(InvalidRecordError):
        put(plain, [(None, b"y")])  # type: ignore[list-item]


# -- choosing and checkpointing ---------------------------------------------------------------


def test_the_filthiest_log_is_cleaned_first_and_checkpointed(
    tmp_path: Path, managers: list[LogManager], clock: FakeClock
) -> None:
    d = tmp_path / "logs"
    lm = start(managers, d, clock)
    dirty = lm.get_or_create_log("c", 0, overrides=COMPACT)
    less = lm.get_or_create_log("c", 1, overrides=COMPACT)
    plain = lm.get_or_create_log("d", 0, overrides={"segment.bytes": 2048})
    churn(dirty, 30, 3)
    churn(less, 30, 200)
    churn(plain, 30, 3)
    cleaner = cleaner_of(lm)
    first = cleaner.clean_filthiest_log()
    assert first is not None and first.end_offset == dirty.log_end_offset
    assert len(contents(dirty)) < 10
    second = cleaner.clean_filthiest_log()
    assert second is not None and second.end_offset == less.log_end_offset
    # Both clean now, and the delete topic is never compacted.
    assert cleaner.clean_filthiest_log() is None
    assert len(contents(plain)) == 240
    text = (d / CLEANER_OFFSET_CHECKPOINT).read_text()
    assert text == f"0\n2\nc 0 {dirty.log_end_offset}\nc 1 {less.log_end_offset}\n"
    # A restarted manager knows how far each log is clean.
    managers.remove(lm)
    lm.shutdown()
    again = start(managers, d, clock)
    assert cleaner_of(again).manager.all_cleaner_checkpoints() == {
        TopicPartition("c", 0): 240,
        TopicPartition("c", 1): 240,
    }
    assert cleaner_of(again).clean_filthiest_log() is None


def test_dirty_ratio_and_max_compaction_lag_decide(
    tmp_path: Path, managers: list[LogManager], clock: FakeClock
) -> None:
    lm = start(managers, tmp_path / "logs", clock)
    log = lm.get_or_create_log("c", 0, overrides={**COMPACT, "min.cleanable.dirty.ratio": "0.9"})
    churn(log, 30, 3)
    cleaner = cleaner_of(lm)
    assert cleaner.clean_filthiest_log() is not None
    churn(log, 3, 3)  # a little more: far below the 0.9 ratio
    assert cleaner.clean_filthiest_log() is None
    # max.compaction.lag.ms passes for the new records: cleaned whatever the ratio.
    lm.update_topic_config("c", {**COMPACT, "min.cleanable.dirty.ratio": "0.9",
                                  "max.compaction.lag.ms": "60000"})  # fmt: skip
    clock.now += 60_001
    stats = cleaner.clean_filthiest_log()
    assert stats is not None and stats.end_offset == log.log_end_offset


def test_logs_are_not_cleaned_past_their_high_watermark(
    tmp_path: Path, managers: list[LogManager], clock: FakeClock
) -> None:
    lm = start(managers, tmp_path / "logs", clock)
    log = lm.get_or_create_log("c", 0, overrides=COMPACT)
    churn(log, 30, 3)
    before = contents(log)
    cleaner = cleaner_of(lm)
    tp = TopicPartition("c", 0)
    # A partition whose high watermark is unknown is left alone.
    cleaner.update_high_watermarks({TopicPartition("other", 0): 5})
    assert cleaner.clean_filthiest_log() is None
    hw = 100
    cleaner.update_high_watermarks({tp: hw})
    stats = cleaner.clean_filthiest_log()
    assert stats is not None
    assert stats.end_offset <= hw
    # Everything from the segment holding the high watermark on is as it was.
    assert [r for r in contents(log) if r[0] >= stats.end_offset] == [
        r for r in before if r[0] >= stats.end_offset
    ]
    assert len([r for r in contents(log) if r[0] < stats.end_offset]) <= 3


def test_expired_tombstones_are_removed_by_a_later_cleaning(
    tmp_path: Path, managers: list[LogManager], clock: FakeClock
) -> None:
    lm = start(managers, tmp_path / "logs", clock)
    log = lm.get_or_create_log("c", 0, overrides={**COMPACT, "delete.retention.ms": "1000"})
    put(log, [(b"a", b"1"), (b"b", b"1")])
    put(log, [(b"a", None)])
    log.roll(now_ms=T0)
    cleaner = cleaner_of(lm)
    first = cleaner.clean_filthiest_log()
    assert first is not None and first.latest_delete_horizon_ms == T0 + 1000
    assert latest(log) == {b"b": b"1", b"a": None}
    # Nothing is dirty, but once the horizon passes the log is chosen for its tombstone.
    assert cleaner.clean_filthiest_log() is None
    clock.now = T0 + 1000
    second = cleaner.clean_filthiest_log()
    assert second is not None and second.tombstones_removed == 1
    assert latest(log) == {b"b": b"1"}
    assert cleaner.clean_filthiest_log() is None


def test_retention_spares_compact_only_logs_and_applies_to_compact_delete(
    tmp_path: Path, managers: list[LogManager], clock: FakeClock
) -> None:
    lm = start(managers, tmp_path / "logs", clock, broker_config={"log.retention.ms": 1000})
    compact = lm.get_or_create_log("c", 0, overrides=COMPACT)
    both = lm.get_or_create_log("b", 0, overrides={**COMPACT, "cleanup.policy": "compact,delete"})
    churn(compact, 20, 5)
    churn(both, 20, 5)
    clock.now += 10_000
    assert lm.cleanup_logs() > 0
    assert compact.log_start_offset == 0
    assert both.log_start_offset == both.log_end_offset  # every old segment went
    # ...and the compacted one is still compacted.
    assert cleaner_of(lm).clean_filthiest_log() is not None
    assert len(contents(compact)) == 5


def test_a_corrupt_log_is_left_uncleaned_and_the_others_still_cleaned(
    tmp_path: Path, managers: list[LogManager], clock: FakeClock
) -> None:
    lm = start(managers, tmp_path / "logs", clock)
    bad = lm.get_or_create_log("c", 0, overrides=COMPACT)
    good = lm.get_or_create_log("c", 1, overrides=COMPACT)
    churn(bad, 30, 2)
    churn(good, 20, 4)
    first = bad.segments()[0].path
    with open(first, "r+b") as f:
        f.seek(80)  # inside the first batch's records: its CRC fails
        byte = f.read(1)
        f.seek(80)
        f.write(bytes([byte[0] ^ 0xFF]))
    cleaner = cleaner_of(lm)
    assert cleaner.clean_filthiest_log() is None
    reason = cleaner.manager.uncleanable_partitions()[TopicPartition("c", 0)]
    assert "CORRUPT_MESSAGE" in reason or "crc" in reason
    assert cleaner.clean_filthiest_log() is not None
    assert len(contents(good)) == 4


# -- concurrency, aborts, threads -------------------------------------------------------------


def big_log(lm: LogManager, topic: str) -> Log:
    log = lm.get_or_create_log(topic, 0, overrides={**COMPACT, "segment.bytes": 256 * 1024})
    value = bytes(range(256)) * 2
    for r in range(600):
        b = BatchBuilder("none")
        for i in range(20):
            b.append(T0, b"key-%d" % ((r * 20 + i) % 500), value)
        log.append_as_leader(b.build(), 0, now_ms=T0)
    log.roll(now_ms=T0)
    return log


def test_appends_and_reads_go_on_while_a_log_is_cleaned(
    tmp_path: Path, managers: list[LogManager], clock: FakeClock
) -> None:
    lm = start(managers, tmp_path / "logs", clock)
    log = big_log(lm, "c")
    cleaner = cleaner_of(lm)
    done = threading.Event()
    results: list[object] = []

    def clean() -> None:
        try:
            results.append(cleaner.clean_filthiest_log())
        finally:
            done.set()

    t = threading.Thread(target=clean)
    t.start()
    appended = 0
    while not done.is_set() or appended < 5:
        put(log, [(b"key-%d" % appended, b"new")])
        appended += 1
        assert decode_batches(log.read(0, 1 << 16).read_all())
    t.join()
    stats = results[0]
    assert stats is not None
    got = latest(log)
    for i in range(appended):
        assert got[b"key-%d" % i] == b"new"
    assert len(got) == max(500, appended)
    offsets = [o for o, _, _ in contents(log)]
    assert offsets == sorted(set(offsets))


def test_deleting_a_log_aborts_its_cleaning_and_forgets_its_checkpoint(
    tmp_path: Path, managers: list[LogManager], clock: FakeClock
) -> None:
    d = tmp_path / "logs"
    lm = start(managers, d, clock)
    log = big_log(lm, "c")
    keep = lm.get_or_create_log("k", 0, overrides=COMPACT)
    churn(keep, 20, 2)
    cleaner = cleaner_of(lm)
    while cleaner.clean_filthiest_log() is not None:
        pass
    churn(log, 1, 1)
    t = threading.Thread(target=cleaner.clean_filthiest_log)
    t.start()
    assert lm.delete_log("c", 0)
    t.join()
    assert not log.dir.exists()
    assert cleaner.manager.in_progress() == set()
    assert TopicPartition("c", 0) not in cleaner.manager.uncleanable_partitions()
    assert TopicPartition("c", 0) not in cleaner.manager.all_cleaner_checkpoints()
    assert "c 0" not in (d / CLEANER_OFFSET_CHECKPOINT).read_text()
    # The other log is still cleaned.
    churn(keep, 20, 2)
    assert cleaner.clean_filthiest_log() is not None
    assert len(contents(keep)) == 2


def test_the_cleaner_threads_compact_in_the_background(
    tmp_path: Path, managers: list[LogManager], clock: FakeClock
) -> None:
    config = LogCleanerConfig(num_threads=2, backoff_ms=10)
    lm = start(managers, tmp_path / "logs", clock, config)
    logs = [lm.get_or_create_log("c", p, overrides=COMPACT) for p in range(3)]
    for log in logs:
        churn(log, 30, 3)
    scheduler = FakeScheduler()
    lm.schedule(
        scheduler,
        flush_check_ms=1000,
        retention_check_ms=1000,
        checkpoint_ms=1000,
        high_watermarks=lambda: {TopicPartition("c", p): logs[p].log_end_offset for p in range(3)},
    )
    assert scheduler.tasks["kafka-log-cleaner-high-watermarks"][1] == 10
    names = {t.name for t in threading.enumerate()}
    assert {"kafka-log-cleaner-thread-0", "kafka-log-cleaner-thread-1"} <= names
    # Wait (not a timing assertion: the bound only ends a hung run) for the workers.
    deadline = time.monotonic() + 60
    while any(len(contents(log)) > 3 for log in logs) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(len(contents(log)) == 3 for log in logs)
    lm.shutdown()
    managers.remove(lm)
    assert not any(t.name.startswith("kafka-log-cleaner") for t in threading.enumerate())


def test_a_disabled_cleaner_runs_no_thread(
    tmp_path: Path, managers: list[LogManager], clock: FakeClock
) -> None:
    lm = start(managers, tmp_path / "logs", clock, LogCleanerConfig(enable=False))
    log = lm.get_or_create_log("c", 0, overrides=COMPACT)
    churn(log, 10, 2)
    scheduler = FakeScheduler()
    lm.schedule(
        scheduler, flush_check_ms=1, retention_check_ms=1, checkpoint_ms=1, high_watermarks=dict
    )
    assert "kafka-log-cleaner-high-watermarks" not in scheduler.tasks
    assert not any(t.name.startswith("kafka-log-cleaner") for t in threading.enumerate())
    assert len(contents(log)) == 80
