"""Futures for sent records, as kafka-python's ``FutureRecordMetadata``."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from rillet.errors import KafkaError, KafkaTimeoutError
from rillet.types import TopicPartition

__all__ = ["FutureRecordMetadata", "RecordMetadata"]

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


class FutureRecordMetadata:
    """Completed by the producer's sender thread; ``get()`` blocks until then."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._lock = threading.Lock()
        self.value: RecordMetadata | None = None
        self.exception: BaseException | None = None
        self._callbacks: list[Callable[[RecordMetadata], Any]] = []
        self._errbacks: list[Callable[[BaseException], Any]] = []

    @property
    def is_done(self) -> bool:
        return self._done.is_set()

    def succeeded(self) -> bool:
        return self.is_done and self.exception is None

    def failed(self) -> bool:
        return self.is_done and self.exception is not None

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata; raises the send's error, or KafkaTimeoutError."""
        if not self._done.wait(timeout):
            raise KafkaTimeoutError(f"Timeout after waiting for {timeout} secs.")
        if self.exception is not None:
            raise self.exception
        assert self.value is not None
        return self.value

    def add_callback(
        self, fn: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> FutureRecordMetadata:
        """Call ``fn(*args, metadata, **kwargs)`` on success (at once if already done)."""

        def cb(value: RecordMetadata) -> Any:
            return fn(*args, value, **kwargs)

        with self._lock:
            if not self.is_done:
                self._callbacks.append(cb)
                return self
        if self.exception is None and self.value is not None:
            self._call(cb, self.value)
        return self

    def add_errback(
        self, fn: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> FutureRecordMetadata:
        """Call ``fn(*args, exception, **kwargs)`` on failure (at once if already failed)."""

        def eb(exc: BaseException) -> Any:
            return fn(*args, exc, **kwargs)

        with self._lock:
            if not self.is_done:
                self._errbacks.append(eb)
                return self
        if self.exception is not None:
            self._call(eb, self.exception)
        return self

    def success(self, value: RecordMetadata) -> None:
        with self._lock:
            if self.is_done:
                return
            self.value = value
            self._done.set()
            callbacks, self._callbacks, self._errbacks = self._callbacks, [], []
        for cb in callbacks:
            self._call(cb, value)

    def failure(self, exc: BaseException) -> None:
        with self._lock:
            if self.is_done:
                return
            self.exception = exc
            self._done.set()
            errbacks, self._callbacks, self._errbacks = self._errbacks, [], []
        for eb in errbacks:
            self._call(eb, exc)

    @staticmethod
    def _call(fn: Callable[[Any], Any], arg: Any) -> None:
        try:
            fn(arg)
        except Exception:
            # A user callback's failure must not kill the sender thread.
            _log.exception("error in a producer callback")


def failed_future(exc: KafkaError) -> FutureRecordMetadata:
    f = FutureRecordMetadata()
    f.failure(exc)
    return f
