"""Futures for sent records, as kafka-python's ``FutureRecordMetadata``.

A record's future (:class:`rillet._core.FutureRecordMetadata`, made in Rust by the
accumulator, one per record) holds what is particular to the record; its batch's
:class:`ProduceRequestResult`, shared by every record of the batch, holds the outcome and
runs the callbacks. One event per batch rather than one per record keeps ``send()`` cheap.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from rillet._core import FutureRecordMetadata
from rillet.errors import KafkaError, KafkaTimeoutError
from rillet.types import TopicPartition

__all__ = ["FutureRecordMetadata", "ProduceRequestResult", "RecordMetadata", "failed_future"]

_log = logging.getLogger(__name__)


class RecordMetadata(NamedTuple):
    """Where a sent record landed."""

    topic: str
    partition: int
    topic_partition: TopicPartition
    offset: int
    timestamp: int
    log_start_offset: int
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int


# A callback waiting for a batch: (the record's future, fn, args, kwargs, is an errback).
_Listener = tuple[FutureRecordMetadata, Callable[..., Any], tuple[Any, ...], dict[str, Any], bool]


class ProduceRequestResult:
    """The outcome of one batch, shared by the futures of all its records (as Kafka's
    ``ProduceRequestResult``). Completed once, by the producer's sender thread; callbacks
    added before that run on the completing thread, later ones at once on the caller's."""

    __slots__ = (
        "_done",
        "_lock",
        "_waiting",
        "base_offset",
        "error",
        "futures",
        "listeners",
        "log_append_time",
        "log_start_offset",
        "topic_partition",
    )

    def __init__(self, topic_partition: TopicPartition) -> None:
        self.topic_partition = topic_partition
        # Set once, under the lock. A condition to wait on is made only when a caller waits
        # for an unfinished batch: most batches complete through callbacks, and a batch of
        # Kafka's default 16 KiB is a few dozen records.
        self._done = False
        self._lock = threading.Lock()
        self._waiting: threading.Condition | None = None
        self.base_offset = -1
        self.log_append_time = -1
        self.log_start_offset = -1
        self.error: BaseException | None = None
        # The batch's futures, kept only when interceptors need each record's metadata.
        self.futures: list[FutureRecordMetadata] = []
        self.listeners: list[_Listener] = []

    @property
    def is_done(self) -> bool:
        return self._done

    def wait(self, timeout: float | None) -> bool:
        with self._lock:
            if self._done:
                return True
            if self._waiting is None:
                self._waiting = threading.Condition(self._lock)
            return self._waiting.wait_for(lambda: self._done, timeout)

    def complete(
        self,
        base_offset: int,
        log_append_time: int,
        log_start_offset: int,
        error: BaseException | None = None,
    ) -> None:
        """Record the batch's outcome, wake every ``get()`` and run the callbacks."""
        with self._lock:
            if self._done:
                return
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.log_start_offset = log_start_offset
            self.error = error
            self._done = True
            if self._waiting is not None:
                self._waiting.notify_all()
            listeners, self.listeners = self.listeners, []
        for future, fn, args, kwargs, errback in listeners:
            self._run(future, fn, args, kwargs, errback)

    # -- what FutureRecordMetadata hands over ----------------------------------------------

    def metadata_for(self, future: FutureRecordMetadata) -> RecordMetadata | None:
        """``future``'s record metadata once the batch is acknowledged, else None."""
        if not self._done or self.error is not None:
            return None
        tp = self.topic_partition
        return RecordMetadata(
            tp.topic,
            tp.partition,
            tp,
            self.base_offset + future.relative_offset if self.base_offset >= 0 else -1,
            self.log_append_time if self.log_append_time >= 0 else future.timestamp,
            self.log_start_offset,
            future.serialized_key_size,
            future.serialized_value_size,
            future.serialized_header_size,
        )

    def get_for(self, future: FutureRecordMetadata, timeout: float | None) -> RecordMetadata:
        if not self.wait(timeout):
            raise KafkaTimeoutError(f"Timeout after waiting for {timeout} secs.")
        if self.error is not None:
            raise self.error
        value = self.metadata_for(future)
        assert value is not None
        return value

    def add_listener(
        self,
        future: FutureRecordMetadata,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any] | None,
        errback: bool,
    ) -> None:
        """``future.add_callback`` (``errback`` False) or ``add_errback`` (True)."""
        self._listen((future, fn, args, kwargs or {}, errback))

    def _listen(self, listener: _Listener) -> None:
        with self._lock:
            if not self._done:
                self.listeners.append(listener)
                return
        self._run(*listener)

    def _run(
        self,
        future: FutureRecordMetadata,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        errback: bool,
    ) -> None:
        if errback != (self.error is not None):
            return
        arg = self.error if errback else self.metadata_for(future)
        try:
            fn(*args, arg, **kwargs)
        except Exception:
            # A user callback's failure must not kill the sender thread.
            _log.exception("error in a producer callback")


def failed_future(exc: KafkaError, tp: TopicPartition) -> FutureRecordMetadata:
    """A future that has already failed with ``exc``."""
    result = ProduceRequestResult(tp)
    result.complete(-1, -1, -1, exc)
    return FutureRecordMetadata(result, 0, -1, -1, -1, -1)
