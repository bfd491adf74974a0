"""Futures for sent records, as kafka-python's ``FutureRecordMetadata``."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

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


class ProduceRequestResult:
    """The outcome of one batch, shared by the futures of all its records (as Kafka's
    ``ProduceRequestResult``): one event per batch rather than one per record keeps
    ``send()`` cheap. Completed once by the sender thread."""

    __slots__ = (
        "_done",
        "_lock",
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
        self._done = threading.Event()
        self._lock = threading.Lock()
        self.base_offset = -1
        self.log_append_time = -1
        self.log_start_offset = -1
        self.error: BaseException | None = None
        self.futures: list[FutureRecordMetadata] = []
        # Futures with callbacks or errbacks waiting for this result.
        self.listeners: list[FutureRecordMetadata] = []

    @property
    def is_done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None) -> bool:
        return self._done.wait(timeout)

    def complete(
        self,
        base_offset: int,
        log_append_time: int,
        log_start_offset: int,
        error: BaseException | None = None,
    ) -> None:
        """Record the batch's outcome, wake every ``get()`` and run the callbacks."""
        with self._lock:
            if self._done.is_set():
                return
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.log_start_offset = log_start_offset
            self.error = error
            self._done.set()
            listeners, self.listeners = self.listeners, []
        for f in listeners:
            f._fire()


class FutureRecordMetadata:
    """One sent record's future; ``get()`` blocks until its batch is acknowledged."""

    __slots__ = (
        "_callbacks",
        "_errbacks",
        "_result",
        "relative_offset",
        "serialized_header_size",
        "serialized_key_size",
        "serialized_value_size",
        "timestamp",
    )

    def __init__(
        self,
        result: ProduceRequestResult,
        relative_offset: int,
        timestamp: int,
        serialized_key_size: int,
        serialized_value_size: int,
        serialized_header_size: int,
    ) -> None:
        self._result = result
        self.relative_offset = relative_offset
        self.timestamp = timestamp
        self.serialized_key_size = serialized_key_size
        self.serialized_value_size = serialized_value_size
        self.serialized_header_size = serialized_header_size
        self._callbacks: list[Callable[[RecordMetadata], Any]] | None = None
        self._errbacks: list[Callable[[BaseException], Any]] | None = None

    @property
    def is_done(self) -> bool:
        return self._result.is_done

    @property
    def produce_result(self) -> ProduceRequestResult:
        """The outcome shared by every record of this record's batch."""
        return self._result

    def succeeded(self) -> bool:
        return self.is_done and self._result.error is None

    def failed(self) -> bool:
        return self.is_done and self._result.error is not None

    @property
    def exception(self) -> BaseException | None:
        return self._result.error if self.is_done else None

    @property
    def value(self) -> RecordMetadata | None:
        r = self._result
        if not r.is_done or r.error is not None:
            return None
        tp = r.topic_partition
        return RecordMetadata(
            tp.topic,
            tp.partition,
            tp,
            r.base_offset + self.relative_offset if r.base_offset >= 0 else -1,
            r.log_append_time if r.log_append_time >= 0 else self.timestamp,
            r.log_start_offset,
            self.serialized_key_size,
            self.serialized_value_size,
            self.serialized_header_size,
        )

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata; raises the send's error, or KafkaTimeoutError."""
        if not self._result.wait(timeout):
            raise KafkaTimeoutError(f"Timeout after waiting for {timeout} secs.")
        if self._result.error is not None:
            raise self._result.error
        value = self.value
        assert value is not None
        return value

    def add_callback(
        self, fn: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> FutureRecordMetadata:
        """Call ``fn(*args, metadata, **kwargs)`` on success (at once if already done)."""

        def cb(value: RecordMetadata) -> Any:
            return fn(*args, value, **kwargs)

        if self._listen(cb, None):
            return self
        if self._result.error is None:
            value = self.value
            assert value is not None
            self._call(cb, value)
        return self

    def add_errback(
        self, fn: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> FutureRecordMetadata:
        """Call ``fn(*args, exception, **kwargs)`` on failure (at once if already failed)."""

        def eb(exc: BaseException) -> Any:
            return fn(*args, exc, **kwargs)

        if self._listen(None, eb):
            return self
        if self._result.error is not None:
            self._call(eb, self._result.error)
        return self

    def _listen(
        self,
        cb: Callable[[RecordMetadata], Any] | None,
        eb: Callable[[BaseException], Any] | None,
    ) -> bool:
        """Queue a callback or errback until the batch completes; False when it is already
        done (the caller runs it at once)."""
        r = self._result
        with r._lock:
            if r.is_done:
                return False
            if self._callbacks is None and self._errbacks is None:
                r.listeners.append(self)
            if cb is not None:
                self._callbacks = [*(self._callbacks or ()), cb]
            if eb is not None:
                self._errbacks = [*(self._errbacks or ()), eb]
            return True

    def _fire(self) -> None:
        error = self._result.error
        if error is None:
            value = self.value
            assert value is not None
            for cb in self._callbacks or ():
                self._call(cb, value)
        else:
            for eb in self._errbacks or ():
                self._call(eb, error)
        self._callbacks = self._errbacks = None

    @staticmethod
    def _call(fn: Callable[[Any], Any], arg: Any) -> None:
        try:
            fn(arg)
        except Exception:
            # A user callback's failure must not kill the sender thread.
            _log.exception("error in a producer callback")


def failed_future(exc: KafkaError, tp: TopicPartition) -> FutureRecordMetadata:
    """A future that has already failed with ``exc``."""
    result = ProduceRequestResult(tp)
    result.complete(-1, -1, -1, exc)
    return FutureRecordMetadata(result, 0, -1, -1, -1, -1)
