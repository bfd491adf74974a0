"""Scheduling log compaction (Kafka's ``LogCleaner`` and ``LogCleanerManager``).

The per-record work is Rust's (:func:`rillet._core.clean_log`); this module decides which
log to clean and when, and remembers how far each log is clean:

* :class:`LogCleanerConfig` holds the broker's ``log.cleaner.*`` settings.
* :class:`LogCleanerManager` owns the ``cleaner-offset-checkpoint`` file of every log dir
  (Kafka's offset checkpoint format: ``topic partition offset`` per line, each offset the
  first dirty offset of a compacted log), the set of logs being cleaned, and the choice of
  the next log (:meth:`LogCleanerManager.grab_filthiest_compacted_log`): among the logs with
  ``compact`` in their ``cleanup.policy``, the one with the highest dirty ratio above its
  ``min.cleanable.dirty.ratio``, or with dirty records older than ``max.compaction.lag.ms``;
  failing those, one whose tombstones' delete horizon has passed. A log is never cleaned past
  its partition's high watermark, and a log without a known high watermark is not cleaned.
* :class:`LogCleaner` runs ``log.cleaner.threads`` worker threads (off the asyncio loop: the
  cleaning itself releases the GIL), each cleaning the filthiest log, or sleeping
  ``log.cleaner.backoff.ms`` when none is worth cleaning.

Thread safety: the manager's state is guarded by one lock; the cleaner's methods may be
called from any thread. High watermarks come as snapshots (:meth:`LogCleaner.update_high_
watermarks`, called on the event loop), since the partitions they come from belong to the
loop. A stale snapshot only delays cleaning: a replica's high watermark never goes back.

After a crash the checkpoint may lag behind the cleaning that was swapped in; the next
cleaning then redoes some work, never undoes any.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from rillet._core import (
    CheckpointEntry,
    CleanerConfig,
    CleanerStats,
    CleaningAbort,
    Log,
    LogToClean,
    clean_log,
    cleanable_offsets,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from rillet.config import BROKER_CONFIGS, TopicConfig
from rillet.config.keys import INT_MAX
from rillet.errors import KafkaError, KafkaStorageError
from rillet.scheduler import Clock
from rillet.types import TopicPartition

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "CleanableLog",
    "LogCleaner",
    "LogCleanerConfig",
    "LogCleanerManager",
]

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LogCleanerConfig:
    """The broker's ``log.cleaner.*`` settings (Kafka's ``CleanerConfig``), Kafka's defaults."""

    enable: bool = True
    num_threads: int = 1
    dedupe_buffer_size: int = 128 << 20
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 512 << 10
    backoff_ms: int = 15_000

    def __post_init__(self) -> None:
        # The native config checks what it needs (INVALID_CONFIG, naming the key).
        self.cleaner_config()

    @classmethod
    def from_broker_config(cls, values: Mapping[str, Any]) -> LogCleanerConfig:
        """From parsed broker values (``BrokerConfig.values``); absent keys take Kafka's
        defaults."""

        def get(key: str) -> Any:
            return values[key] if key in values else BROKER_CONFIGS[key].default

        return cls(
            enable=get("log.cleaner.enable"),
            num_threads=get("log.cleaner.threads"),
            dedupe_buffer_size=get("log.cleaner.dedupe.buffer.size"),
            dedupe_buffer_load_factor=get("log.cleaner.io.buffer.load.factor"),
            io_buffer_size=get("log.cleaner.io.buffer.size"),
            backoff_ms=get("log.cleaner.backoff.ms"),
        )

    def cleaner_config(self) -> CleanerConfig:
        """One thread's settings: its share of the dedupe buffer, at most 2 GiB as in Kafka."""
        per_thread = min(self.dedupe_buffer_size // max(self.num_threads, 1), INT_MAX)
        return CleanerConfig(
            dedupe_buffer_size=max(per_thread, 0),
            dedupe_buffer_load_factor=self.dedupe_buffer_load_factor,
            io_buffer_size=self.io_buffer_size,
        )


class CleanableLog(NamedTuple):
    """A log as the cleaner sees it: where it lives and its topic's configs."""

    topic_partition: TopicPartition
    log_dir: Path
    log: Log
    config: TopicConfig

    @property
    def compacted(self) -> bool:
        return "compact" in self.config["cleanup.policy"]


@dataclass(frozen=True)
class LogToCleanChoice:
    """The log chosen for cleaning, what the choice saw, and how to abort its cleaning."""

    log: CleanableLog
    to_clean: LogToClean
    last_clean_offset: int
    high_watermark: int | None
    abort: CleaningAbort


class LogCleanerManager:
    """Kafka's ``LogCleanerManager``: checkpoints, the logs being cleaned, and the choice of
    the next one (see the module docs)."""

    def __init__(
        self,
        log_dirs: Sequence[Path],
        logs: Callable[[], Sequence[CleanableLog]],
        clock: Clock,
    ) -> None:
        self._logs = logs
        self._clock = clock
        self._lock = threading.Condition()
        self._checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        self._in_progress: dict[TopicPartition, CleaningAbort] = {}
        self._uncleanable: dict[TopicPartition, str] = {}
        self._paused: set[TopicPartition] = set()
        self._latest_delete_horizon: dict[TopicPartition, int] = {}
        self._high_watermarks: Mapping[TopicPartition, int] | None = None
        for d in log_dirs:
            self._checkpoints[d] = _read_checkpoint(d / CLEANER_OFFSET_CHECKPOINT)

    # -- state ----------------------------------------------------------------------------

    def update_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        """The partitions' high watermarks, as a snapshot; a log missing from it is not
        cleaned. Until the first snapshot, logs are cleaned up to their log end (a log
        manager without replication)."""
        snapshot = dict(high_watermarks)
        with self._lock:
            self._high_watermarks = snapshot

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        with self._lock:
            return {tp: o for cp in self._checkpoints.values() for tp, o in cp.items()}

    def uncleanable_partitions(self) -> dict[TopicPartition, str]:
        """Partitions whose cleaning failed (Kafka's ``uncleanablePartitions``), with why;
        they are skipped until the broker restarts or their log is deleted."""
        with self._lock:
            return dict(self._uncleanable)

    def in_progress(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._in_progress)

    # -- choosing -------------------------------------------------------------------------

    def grab_filthiest_compacted_log(self) -> LogToCleanChoice | None:
        """Choose the next log to clean and mark it in progress (see the module docs)."""
        with self._lock:
            now = self._clock()
            hws = self._high_watermarks
            candidates: list[tuple[CleanableLog, LogToClean, int, int | None]] = []
            for c in self._logs():
                tp = c.topic_partition
                if (
                    not c.compacted
                    or tp in self._in_progress
                    or tp in self._uncleanable
                    or tp in self._paused
                ):
                    continue
                if c.log.closed:
                    continue
                hw = None if hws is None else hws.get(tp)
                if hws is not None and hw is None:
                    continue  # not a replica here (yet): its high watermark is unknown
                checkpoint = self._checkpoints.setdefault(c.log_dir, {}).get(tp)
                try:
                    to_clean = cleanable_offsets(
                        c.log, last_clean_offset=checkpoint, high_watermark=hw, now_ms=now
                    )
                except KafkaStorageError:
                    continue  # closed or deleted meanwhile
                if to_clean.force_update_checkpoint:
                    # Kafka's rule: a checkpoint outside the log is reset to the log start.
                    self._update_checkpoint(c.log_dir, tp, to_clean.first_dirty_offset)
                candidates.append((c, to_clean, to_clean.first_dirty_offset, hw))
            cleanable = [
                x for x in candidates if x[1].should_clean(x[0].config["min.cleanable.dirty.ratio"])
            ]
            if not cleanable:
                # Nothing dirty enough: a log whose tombstones' delete horizon has passed
                # is cleaned to drop them (KIP-534).
                cleanable = [
                    x
                    for x in candidates
                    if 0 <= self._latest_delete_horizon.get(x[0].topic_partition, -1) <= now
                ]
            if not cleanable:
                return None
            c, to_clean, last_clean, hw = max(cleanable, key=lambda x: x[1].cleanable_ratio)
            abort = CleaningAbort()
            self._in_progress[c.topic_partition] = abort
            return LogToCleanChoice(c, to_clean, last_clean, hw, abort)

    # -- outcomes -------------------------------------------------------------------------

    def done_cleaning(self, choice: LogToCleanChoice, stats: CleanerStats | None) -> None:
        """A cleaning ended: with ``stats`` unless it failed. A complete cleaning moves the
        log's checkpoint to ``stats.end_offset``."""
        tp = choice.log.topic_partition
        with self._lock:
            self._in_progress.pop(tp, None)
            if stats is not None and not stats.aborted:
                self._latest_delete_horizon[tp] = stats.latest_delete_horizon_ms
                if stats.end_offset != choice.last_clean_offset:
                    self._update_checkpoint(choice.log.log_dir, tp, stats.end_offset)
            self._lock.notify_all()

    def mark_uncleanable(self, tp: TopicPartition, reason: str) -> None:
        with self._lock:
            self._uncleanable[tp] = reason

    def abort_and_pause_cleaning(self, tp: TopicPartition, timeout_s: float | None = None) -> bool:
        """Stop the cleaning of ``tp`` at its next batch, wait until it has ended, and start
        none until :meth:`resume_cleaning` or :meth:`remove_partition` (Kafka's
        ``abortAndPauseCleaning``). Returns False if it did not end within ``timeout_s``."""
        with self._lock:
            self._paused.add(tp)
            abort = self._in_progress.get(tp)
            if abort is not None:
                abort.abort()
            return self._lock.wait_for(lambda: tp not in self._in_progress, timeout_s)

    def resume_cleaning(self, tp: TopicPartition) -> None:
        with self._lock:
            self._paused.discard(tp)

    def abort_all(self, timeout_s: float | None = None) -> bool:
        with self._lock:
            for abort in self._in_progress.values():
                abort.abort()
            return self._lock.wait_for(lambda: not self._in_progress, timeout_s)

    def remove_partition(self, tp: TopicPartition) -> None:
        """Forget a deleted log: its checkpoint entry and whatever else is known of it."""
        with self._lock:
            self._paused.discard(tp)
            self._uncleanable.pop(tp, None)
            self._latest_delete_horizon.pop(tp, None)
            for d, cp in self._checkpoints.items():
                if cp.pop(tp, None) is not None:
                    self._write_checkpoint(d)

    def _update_checkpoint(self, log_dir: Path, tp: TopicPartition, offset: int) -> None:
        self._checkpoints.setdefault(log_dir, {})[tp] = offset
        self._write_checkpoint(log_dir)

    def _write_checkpoint(self, log_dir: Path) -> None:
        # As Kafka's updateCheckpoints: only logs that still exist in that dir are kept.
        live = {c.topic_partition for c in self._logs() if c.log_dir == log_dir}
        cp = self._checkpoints[log_dir]
        for tp in [tp for tp in cp if tp not in live]:
            del cp[tp]
        write_offset_checkpoint(
            log_dir / CLEANER_OFFSET_CHECKPOINT,
            [CheckpointEntry(tp.topic, tp.partition, o) for tp, o in sorted(cp.items())],
        )


class LogCleaner:
    """Kafka's ``LogCleaner``: worker threads that clean the filthiest compacted log, one
    cleaning per log at a time (see the module docs). :meth:`clean_filthiest_log` is one
    step of a worker, for callers that drive the cleaner themselves."""

    def __init__(
        self,
        config: LogCleanerConfig,
        log_dirs: Sequence[Path],
        logs: Callable[[], Sequence[CleanableLog]],
        clock: Clock,
    ) -> None:
        self.config = config
        self.manager = LogCleanerManager(log_dirs, logs, clock)
        self._clock = clock
        self._cleaner_config = config.cleaner_config()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def update_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        self.manager.update_high_watermarks(high_watermarks)

    def clean_filthiest_log(self) -> CleanerStats | None:
        """Clean the filthiest compacted log once (Kafka's ``tryCleanFilthiestLog``). Returns
        what the cleaning did, or None when no log was worth cleaning or the cleaning
        failed (the log is then marked uncleanable)."""
        choice = self.manager.grab_filthiest_compacted_log()
        if choice is None:
            return None
        stats: CleanerStats | None = None
        c = choice.log
        try:
            stats = clean_log(
                c.log,
                self._cleaner_config,
                last_clean_offset=choice.last_clean_offset,
                high_watermark=choice.high_watermark,
                now_ms=self._clock(),
                abort=choice.abort,
            )
        except KafkaError as e:
            if not c.log.closed:
                _log.error("the log cleaner failed on %s, which stays uncleaned: %s", c.log, e)
                self.manager.mark_uncleanable(c.topic_partition, str(e))
        finally:
            self.manager.done_cleaning(choice, stats)
        if stats is not None:
            _log_stats(c.topic_partition, stats)
        return stats

    # -- threads --------------------------------------------------------------------------

    def startup(self) -> None:
        """Start ``log.cleaner.threads`` workers (none if the cleaner is disabled)."""
        if self._threads or not self.config.enable:
            return
        self._stop.clear()
        for i in range(self.config.num_threads):
            t = threading.Thread(
                target=self._run, name=f"kafka-log-cleaner-thread-{i}", daemon=True
            )
            self._threads.append(t)
            t.start()

    def _run(self) -> None:
        backoff_s = self.config.backoff_ms / 1000
        while not self._stop.is_set():
            try:
                cleaned = self.clean_filthiest_log() is not None
            except Exception:
                _log.exception("the log cleaner thread %s failed", threading.current_thread().name)
                cleaned = False
            if not cleaned:
                self._stop.wait(backoff_s)

    def abort_and_pause_cleaning(self, tp: TopicPartition) -> None:
        """Stop cleaning ``tp``, wait for it, and clean it no more until it is resumed or
        removed (before its log is deleted)."""
        self.manager.abort_and_pause_cleaning(tp)

    def shutdown(self) -> None:
        """Abort every cleaning, stop the workers and wait for them."""
        self._stop.set()
        self.manager.abort_all()
        for t in self._threads:
            t.join()
        self._threads.clear()


def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    try:
        entries = read_offset_checkpoint(path)
    except KafkaStorageError as e:
        # As Kafka: an unreadable checkpoint means every log is dirty from its start.
        _log.warning("ignoring the cleaner checkpoint %s: %s", path, e)
        return {}
    return {TopicPartition(e.topic, e.partition): e.offset for e in entries}


def _log_stats(tp: TopicPartition, s: CleanerStats) -> None:
    if s.aborted:
        _log.info("cleaning of %s was aborted", tp)
        return
    reduction = 100 * (1 - s.bytes_written / s.bytes_read) if s.bytes_read else 0.0
    _log.info(
        "cleaned %s: offsets [%d, %d) dirty, %d segments into %d, %.1f MB read, %.1f MB "
        "written (%.1f%% size reduction), %d records removed, %.1f MB/s, %.0f messages/s",
        tp,
        s.first_dirty_offset,
        s.end_offset,
        s.segments_read,
        s.segments_written,
        s.bytes_read / 1e6,
        s.bytes_written / 1e6,
        reduction,
        s.records_removed,
        s.mb_per_sec,
        s.messages_per_sec,
    )
