"""The LogManager owns a broker's log directories.

Per log directory (``log.dirs``) it keeps, as Kafka does::

    .lock                              flock'ed while a process uses the directory
    .kafka_cleanshutdown               present only after a clean shutdown; names the broker
                                       epoch it ended (KIP-966)
    recovery-point-offset-checkpoint   offsets below which each log is fsynced
    log-start-offset-checkpoint        each log's log start offset
    replication-offset-checkpoint      each partition's high watermark
    cleaner-offset-checkpoint          how far each compacted log is clean (the log cleaner's)
    <topic>-<partition>/               one Log each, with partition.metadata naming its
                                       topic id

On startup the marker decides whether logs are trusted (clean) or recovered from their
recovery points (unclean). The marker is removed as soon as the logs are open, so a crash at
any later moment leads to recovery. On shutdown every log is flushed and closed, the
checkpoints written, and only then the marker created.

The background work is the LogManager's own (Kafka's kafka-log-flusher, kafka-log-retention
and kafka-recovery-point-checkpoint tasks, and each UnifiedLog's
PeriodicProducerExpirationCheck, here one task for every log): :meth:`LogManager.schedule`
hands it to the injected scheduler at the broker's intervals, and starts the log cleaner's
threads
(:mod:`rillet.storage.log_cleaner`), which compact the logs with ``compact`` in their
``cleanup.policy`` while retention deletes from those with ``delete`` in it (both for
``compact,delete``).

Thread safety: the methods are meant for the broker's event loop thread (each Log is itself
thread safe, so reads and appends may come from elsewhere).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from rillet._core import (
    CheckpointEntry,
    Log,
    LogConfig,
    RecoveryInfo,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from rillet.config import TopicConfig, resolve_topic_config
from rillet.config.broker_keys import BROKER_CONFIGS
from rillet.errors import InvalidTopicError, KafkaStorageError
from rillet.metadata.topic_names import (
    METADATA_TOPIC,
    parse_partition_dir_name,
    partition_dir_name,
)
from rillet.scheduler import Clock, Scheduler, wall_clock_ms
from rillet.storage.dir_lock import lock_dir
from rillet.storage.log_cleaner import CleanableLog, LogCleaner, LogCleanerConfig
from rillet.storage.partition_metadata import read_topic_id, write_topic_id
from rillet.types import TopicPartition

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
DELETE_DIR_SUFFIX = "-delete"

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProducerStateConfig:
    """The broker's producer-state settings (Kafka's ProducerStateManagerConfig and
    TransactionLogConfig): ``producer.id.expiration.ms``, after which an idle producer is
    forgotten (unless its transaction is open), and
    ``producer.id.expiration.check.interval.ms``, how often that is checked."""

    producer_id_expiration_ms: int = BROKER_CONFIGS["producer.id.expiration.ms"].default
    producer_id_expiration_check_interval_ms: int = BROKER_CONFIGS[
        "producer.id.expiration.check.interval.ms"
    ].default

    @classmethod
    def from_broker_config(cls, values: Mapping[str, Any]) -> ProducerStateConfig:
        """From parsed broker values (``BrokerConfig.values``); absent keys take Kafka's
        defaults."""

        def get(key: str) -> Any:
            return values[key] if key in values else BROKER_CONFIGS[key].default

        return cls(
            producer_id_expiration_ms=get("producer.id.expiration.ms"),
            producer_id_expiration_check_interval_ms=get(
                "producer.id.expiration.check.interval.ms"
            ),
        )


@dataclass
class _ManagedLog:
    log: Log
    dir: Path
    config: TopicConfig
    last_flush_ms: int
    topic_id: uuid.UUID | None = None


@dataclass
class LogManager:
    """Opens, creates, flushes, retains and closes the logs in ``log_dirs``."""

    log_dirs: Sequence[Path | str]
    broker_config: Mapping[str, object] = field(default_factory=dict)
    clock: Clock = wall_clock_ms
    # The broker's log.cleaner.* settings (LogCleanerConfig.from_broker_config).
    cleaner_config: LogCleanerConfig = field(default_factory=LogCleanerConfig)
    # The broker's producer.id.expiration.* settings (ProducerStateConfig.from_broker_config).
    producer_state_config: ProducerStateConfig = field(default_factory=ProducerStateConfig)
    # Told how long each flush by the log flusher took, in ms (Kafka's LogFlushStats).
    on_flush_ms: Callable[[float], None] | None = None
    _logs: dict[TopicPartition, _ManagedLog] = field(default_factory=dict, init=False)
    _locks: list[IO[bytes]] = field(default_factory=list, init=False)
    _dirs: list[Path] = field(default_factory=list, init=False)
    _topic_overrides: dict[str, Mapping[str, object]] = field(default_factory=dict, init=False)
    _high_watermarks: dict[TopicPartition, int] = field(default_factory=dict, init=False)
    # The broker epoch the last shutdown recorded in every dir's clean-shutdown marker; -1
    # when any dir was not shut down cleanly (or the marker names no epoch).
    previous_broker_epoch: int = field(default=-1, init=False)
    _cleaner: LogCleaner | None = field(default=None, init=False)

    def startup(self) -> dict[TopicPartition, RecoveryInfo]:
        """Lock every log dir and open every log in it (recovering after a crash). On failure
        nothing stays locked or open, and the manager may be started again."""
        if self._dirs:
            raise KafkaStorageError("the LogManager is already started")
        if not self.log_dirs:
            raise KafkaStorageError("log.dirs is empty: at least one log directory is needed")
        dirs = [Path(d).resolve() for d in self.log_dirs]
        recovered: dict[TopicPartition, RecoveryInfo] = {}
        try:
            for d in dirs:
                self._locks.append(lock_dir(d))
            epochs = {_read_clean_shutdown_epoch(d / CLEAN_SHUTDOWN_FILE) for d in dirs}
            self.previous_broker_epoch = epochs.pop() if len(epochs) == 1 else -1
            for d in dirs:
                recovered.update(self._load_dir(d))
        except BaseException:
            for m in self._logs.values():
                m.log.close()
            self._logs.clear()
            self._release_locks()
            raise
        self._dirs = dirs
        # Kafka's LogManager creates its LogCleaner here; its threads start with the other
        # background work (schedule).
        self._cleaner = LogCleaner(self.cleaner_config, dirs, self.cleanable_logs, self.clock)
        return recovered

    def _load_dir(self, d: Path) -> dict[TopicPartition, RecoveryInfo]:
        clean_marker = d / CLEAN_SHUTDOWN_FILE
        clean = clean_marker.exists()
        try:
            points = _read_checkpoint(d / RECOVERY_POINT_CHECKPOINT)
        except KafkaStorageError as e:
            # As Kafka: a damaged recovery-point file means every log here is recovered.
            _log.warning("recovering every log in %s: %s", d, e)
            points, clean = {}, False
        try:
            starts = _read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)
        except KafkaStorageError as e:
            _log.warning("ignoring the log start offsets of %s: %s", d, e)
            starts = {}
        try:
            self._high_watermarks.update(_read_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT))
        except KafkaStorageError as e:
            _log.warning("ignoring the high watermarks of %s: %s", d, e)
        recovered = {}
        for child in sorted(d.iterdir()):
            if not child.is_dir():
                continue
            if child.name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(child, ignore_errors=True)
                continue
            parsed = parse_partition_dir_name(child.name)
            if parsed is None or parsed[0] == METADATA_TOPIC:
                continue  # not a partition, or the quorum's metadata log (not the broker's)
            tp = TopicPartition(*parsed)
            if tp in self._logs:
                raise KafkaStorageError(
                    f"Duplicate log directories for {tp}: {self._logs[tp].dir} and {child}"
                )
            config = self._config_for(tp.topic)
            log = Log.open(
                child,
                self._log_config(config),
                recovery_point=points.get(tp, 0),
                log_start_offset=starts.get(tp, 0),
                clean_shutdown=clean,
                now_ms=self.clock(),
            )
            try:
                topic_id = read_topic_id(child)
            except ValueError as e:
                _log.warning("the topic id of %s is unknown: %s", tp, e)
                topic_id = None
            self._logs[tp] = _ManagedLog(log, d, config, self.clock(), topic_id)
            recovered[tp] = log.recovery_info
        if clean:
            clean_marker.unlink()
            _fsync_dir(d)
        return recovered

    def _config_for(self, topic: str) -> TopicConfig:
        return resolve_topic_config(self.broker_config, self._topic_overrides.get(topic))

    def _log_config(self, config: TopicConfig) -> LogConfig:
        """What the Rust log enforces: the topic's configs and the broker's
        ``producer.id.expiration.ms``."""
        return config.log_config().with_producer_id_expiration_ms(
            self.producer_state_config.producer_id_expiration_ms
        )

    def topic_config(self, topic: str) -> TopicConfig:
        """The resolved configs of ``topic``: its overrides over the broker's defaults."""
        return self._config_for(topic)

    # -- access ---------------------------------------------------------------------------

    @property
    def open_dirs(self) -> list[Path]:
        """The directories of ``log.dirs`` (resolved) while started, in their order."""
        return list(self._dirs)

    def logs_in(self, log_dir: Path) -> list[tuple[TopicPartition, Log]]:
        """The logs kept in ``log_dir``, by topic-partition."""
        return sorted((tp, m.log) for tp, m in self._logs.items() if m.dir == log_dir)

    def get_log(self, topic: str, partition: int) -> Log | None:
        m = self._logs.get(TopicPartition(topic, partition))
        return m.log if m else None

    @property
    def cleaner(self) -> LogCleaner | None:
        """The log cleaner, once started (its threads run only after :meth:`schedule`, and
        only with ``log.cleaner.enable``)."""
        return self._cleaner

    def cleanable_logs(self) -> list[CleanableLog]:
        """Every log with where it lives and its configs, for the log cleaner. Safe to call
        from the cleaner's threads: it copies the map first."""
        return [CleanableLog(tp, m.dir, m.log, m.config) for tp, m in list(self._logs.items())]

    def all_logs(self) -> Iterator[tuple[TopicPartition, Log]]:
        for tp, m in self._logs.items():
            yield tp, m.log

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        m = self._logs.get(TopicPartition(topic, partition))
        return m.dir if m else None

    def topic_id_of(self, topic: str, partition: int) -> uuid.UUID | None:
        """The topic id the partition's log was created for (None: not recorded)."""
        m = self._logs.get(TopicPartition(topic, partition))
        return m.topic_id if m else None

    def get_or_create_log(
        self,
        topic: str,
        partition: int,
        overrides: Mapping[str, object] | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> Log:
        """The log of a partition, created in the log dir holding the fewest partitions;
        ``topic_id``, when given, is recorded in its partition.metadata if none is yet."""
        tp = TopicPartition(topic, partition)
        if tp in self._logs:
            m = self._logs[tp]
            if topic_id is not None and m.topic_id is None:
                write_topic_id(Path(m.log.dir), topic_id)
                m.topic_id = topic_id
            return m.log
        name = partition_dir_name(topic, partition)
        if overrides is not None:
            self._topic_overrides[topic] = dict(overrides)
        config = self._config_for(topic)
        d = self._least_loaded_dir()
        path = d / name
        if path.resolve().parent != d:
            raise InvalidTopicError(f"partition directory {name!r} would escape {d}")
        log = Log.open(path, self._log_config(config), now_ms=self.clock())
        if topic_id is not None:
            write_topic_id(path, topic_id)
        self._logs[tp] = _ManagedLog(log, d, config, self.clock(), topic_id)
        return log

    def _least_loaded_dir(self) -> Path:
        if not self._dirs:
            raise KafkaStorageError("the LogManager has not been started")
        counts = {d: 0 for d in self._dirs}
        for m in self._logs.values():
            counts[m.dir] += 1
        return min(self._dirs, key=lambda d: (counts[d], self._dirs.index(d)))

    def update_topic_config(self, topic: str, overrides: Mapping[str, object]) -> None:
        """Apply new per-topic overrides to every partition of ``topic``."""
        self._topic_overrides[topic] = dict(overrides)
        config = self._config_for(topic)
        for tp, m in self._logs.items():
            if tp.topic == topic:
                m.config = config
                m.log.update_config(self._log_config(config))

    def delete_log(self, topic: str, partition: int) -> bool:
        """Remove a partition's log and its directory. Returns whether it existed."""
        tp = TopicPartition(topic, partition)
        if self._cleaner is not None:
            # Kafka's abortAndPauseCleaning: the cleaner lets go of the log before it goes.
            self._cleaner.abort_and_pause_cleaning(tp)
        try:
            m = self._logs.pop(tp, None)
            if m is None:
                return False
            m.log.delete()
            return True
        finally:
            if self._cleaner is not None:
                self._cleaner.manager.remove_partition(tp)

    # -- background work ------------------------------------------------------------------

    def schedule(
        self,
        scheduler: Scheduler,
        *,
        flush_check_ms: int,
        retention_check_ms: int,
        checkpoint_ms: int,
        high_watermarks: Callable[[], Mapping[TopicPartition, int]],
    ) -> None:
        """Run the flusher, retention, the recovery-point / log-start-offset checkpoints and
        producer id expiry on ``scheduler`` (``log.flush.scheduler.interval.ms``,
        ``log.retention.check.interval.ms``, ``log.flush.offset.checkpoint.interval.ms``,
        ``producer.id.expiration.check.interval.ms``), and start the log cleaner. Neither
        retention nor the cleaner goes past a partition's high watermark: the cleaner gets a
        snapshot of them taken on the scheduler's thread every ``log.cleaner.backoff.ms``, the
        pace at which it looks for work."""
        scheduler.schedule("kafka-log-flusher", self.flush_dirty_logs, flush_check_ms)
        scheduler.schedule(
            "kafka-log-retention",
            lambda: self.cleanup_logs(high_watermarks()),
            retention_check_ms,
        )
        scheduler.schedule("kafka-recovery-point-checkpoint", self.checkpoint, checkpoint_ms)
        scheduler.schedule(
            "PeriodicProducerExpirationCheck",
            self.remove_expired_producers,
            self.producer_state_config.producer_id_expiration_check_interval_ms,
        )
        cleaner = self._cleaner
        if cleaner is not None and cleaner.config.enable:
            cleaner.update_high_watermarks(high_watermarks())
            scheduler.schedule(
                "kafka-log-cleaner-high-watermarks",
                lambda: cleaner.update_high_watermarks(high_watermarks()),
                cleaner.config.backoff_ms,
            )
            cleaner.startup()

    def flush_dirty_logs(self) -> int:
        """Kafka's log flusher: fsync rolled segments, and whole logs whose ``flush.messages``
        or ``flush.ms`` is due. Returns how many logs were flushed."""
        now = self.clock()
        flushed = 0
        for m in self._logs.values():
            log = m.log
            unflushed = log.log_end_offset - log.recovery_point
            if unflushed <= 0:
                m.last_flush_ms = now
                continue
            if (
                unflushed >= m.config["flush.messages"]
                or now - m.last_flush_ms >= m.config["flush.ms"]
            ):
                self._flush(log, None)
                m.last_flush_ms = now
                flushed += 1
            elif log.recovery_point < log.active_segment_base_offset:
                self._flush(log, log.active_segment_base_offset)
                flushed += 1
        return flushed

    def _flush(self, log: Log, offset: int | None) -> None:
        started = time.perf_counter()
        log.flush(offset)
        if self.on_flush_ms is not None:
            self.on_flush_ms((time.perf_counter() - started) * 1000)

    def cleanup_logs(self, high_watermarks: Mapping[TopicPartition, int] | None = None) -> int:
        """Retention for every log with ``delete`` in its cleanup.policy (not for a
        compact-only one: the cleaner keeps its newest record per key whatever its age).
        Returns segments deleted."""
        now = self.clock()
        deleted = 0
        for tp, m in self._logs.items():
            if "delete" not in m.config["cleanup.policy"]:
                continue
            hw = high_watermarks.get(tp) if high_watermarks else None
            deleted += m.log.delete_old_segments(now_ms=now, high_watermark=hw)
        return deleted

    def remove_expired_producers(self) -> None:
        """Forget, in every log, the producers idle for ``producer.id.expiration.ms`` without
        an open transaction (Kafka's PeriodicProducerExpirationCheck)."""
        now = self.clock()
        for m in list(self._logs.values()):
            m.log.remove_expired_producers(now)

    def checkpoint(self) -> None:
        """Write every log dir's recovery-point and log-start-offset checkpoints."""
        for d in self._dirs:
            mine = [(tp, m.log) for tp, m in self._logs.items() if m.dir == d]
            write_offset_checkpoint(
                d / RECOVERY_POINT_CHECKPOINT,
                [CheckpointEntry(tp.topic, tp.partition, log.recovery_point) for tp, log in mine],
            )
            write_offset_checkpoint(
                d / LOG_START_OFFSET_CHECKPOINT,
                [CheckpointEntry(tp.topic, tp.partition, log.log_start_offset) for tp, log in mine],
            )

    def checkpointed_high_watermark(self, topic: str, partition: int) -> int:
        """The high watermark last checkpointed for a partition (0 if none)."""
        return self._high_watermarks.get(TopicPartition(topic, partition), 0)

    def checkpoint_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        """Write ``replication-offset-checkpoint`` in every log dir for the partitions it
        holds (Kafka's HighwaterMarkCheckpoint). Each log also learns its high watermark, so
        a follower forgets the completed transactions below it (they would otherwise only
        be forgotten at the next retention pass)."""
        self._high_watermarks.update(high_watermarks)
        for tp, hw in high_watermarks.items():
            m = self._logs.get(tp)
            if m is not None and not m.log.closed:
                m.log.update_high_watermark(hw)
        for d in self._dirs:
            write_offset_checkpoint(
                d / REPLICATION_OFFSET_CHECKPOINT,
                [
                    CheckpointEntry(tp.topic, tp.partition, self._high_watermarks.get(tp, 0))
                    for tp, m in self._logs.items()
                    if m.dir == d
                ],
            )

    def shutdown(self, broker_epoch: int = -1) -> None:
        """Flush and close every log, checkpoint, then mark each dir cleanly shut down (with
        the ``broker_epoch`` this run ends, which the next registration names). Does nothing
        if the manager is not started."""
        if not self._dirs:
            return
        if self._cleaner is not None:
            self._cleaner.shutdown()
            self._cleaner = None
        try:
            for m in self._logs.values():
                m.log.flush()
            self.checkpoint()
            for m in self._logs.values():
                m.log.close()
            marker = json.dumps({"version": 0, "brokerEpoch": broker_epoch})
            for d in self._dirs:
                with open(d / CLEAN_SHUTDOWN_FILE, "w", encoding="utf-8") as f:
                    f.write(marker)
                    f.flush()
                    os.fsync(f.fileno())
                _fsync_dir(d)
        finally:
            self._logs.clear()
            self._dirs = []
            self._release_locks()

    def _release_locks(self) -> None:
        for f in self._locks:
            f.close()
        self._locks.clear()


def _read_clean_shutdown_epoch(path: Path) -> int:
    """The broker epoch a clean-shutdown marker names; -1 without a marker, for an empty one
    (an older version's) or for one this version cannot read."""
    try:
        content = json.loads(path.read_text(encoding="utf-8") or "{}")
        epoch = content.get("brokerEpoch", -1) if isinstance(content, dict) else -1
    except (OSError, UnicodeDecodeError, ValueError):
        return -1
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else -1


def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    return {TopicPartition(e.topic, e.partition): e.offset for e in read_offset_checkpoint(path)}


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
