"""Kafka's errors, by name and code.

Every error that crosses the wire carries one of Kafka's error names (``OFFSET_OUT_OF_RANGE``,
``CORRUPT_MESSAGE``, ...) and code; in Python each is a subclass of :class:`KafkaError` with
the ``code``, ``name`` and ``retriable`` of Kafka's table. The native core raises these
classes directly (``rust/py/src/errors.rs`` maps its one error enum onto them).
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "CorruptRecordError",
    "InvalidConfigurationError",
    "InvalidRecordError",
    "InvalidRequestError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "KafkaError",
    "KafkaStorageError",
    "OffsetOutOfRangeError",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "UnknownServerError",
    "UnsupportedCompressionTypeError",
    "error_for_code",
    "error_for_name",
]


class KafkaError(Exception):
    """Base of every Rillet error that has a Kafka error name."""

    code: ClassVar[int] = -1
    name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    retriable: ClassVar[bool] = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.name)
        self.message = message

    def __str__(self) -> str:
        return f"[{self.name}] {self.message}" if self.message else self.name


class UnknownServerError(KafkaError):
    """The server experienced an unexpected error when processing the request."""

    code = -1
    name = "UNKNOWN_SERVER_ERROR"
    retriable = False


class OffsetOutOfRangeError(KafkaError):
    """The requested offset is not within the range of offsets maintained by the server."""

    code = 1
    name = "OFFSET_OUT_OF_RANGE"
    retriable = False


class CorruptRecordError(KafkaError):
    """The record failed its CRC check, exceeds the valid size, has a null key for a
    compacted topic, or is otherwise corrupt."""

    code = 2
    name = "CORRUPT_MESSAGE"
    retriable = True


class RecordTooLargeError(KafkaError):
    """The request included a message larger than the max message size the server will
    accept."""

    code = 10
    name = "MESSAGE_TOO_LARGE"
    retriable = False


class InvalidTopicError(KafkaError):
    """The request attempted to perform an operation on an invalid topic."""

    code = 17
    name = "INVALID_TOPIC_EXCEPTION"
    retriable = False


class RecordBatchTooLargeError(KafkaError):
    """The request included message batch larger than the configured segment size on the
    server."""

    code = 18
    name = "RECORD_LIST_TOO_LARGE"
    retriable = False


class InvalidTimestampError(KafkaError):
    """The timestamp of the message is out of acceptable range."""

    code = 32
    name = "INVALID_TIMESTAMP"
    retriable = False


class InvalidRequestError(KafkaError):
    """This most likely occurs because of a request being malformed by the client library or
    the message was sent to an incompatible broker."""

    code = 42
    name = "INVALID_REQUEST"
    retriable = False


class InvalidConfigurationError(KafkaError):
    """Configuration is invalid."""

    code = 40
    name = "INVALID_CONFIG"
    retriable = False


class KafkaStorageError(KafkaError):
    """Disk error when trying to access log file on the disk."""

    code = 56
    name = "KAFKA_STORAGE_ERROR"
    retriable = True


class UnsupportedCompressionTypeError(KafkaError):
    """The requesting client does not support the compression type of given partition."""

    code = 76
    name = "UNSUPPORTED_COMPRESSION_TYPE"
    retriable = False


class InvalidRecordError(KafkaError):
    """This record has failed the validation on broker and hence will be rejected."""

    code = 87
    name = "INVALID_RECORD"
    retriable = False


# Aliases under kafka-python's names, so code ports by renaming imports.
MessageSizeTooLargeError = RecordTooLargeError
RecordListTooLargeError = RecordBatchTooLargeError

_BY_CODE: dict[int, type[KafkaError]] = {
    cls.code: cls
    for cls in [
        UnknownServerError,
        OffsetOutOfRangeError,
        CorruptRecordError,
        RecordTooLargeError,
        InvalidTopicError,
        RecordBatchTooLargeError,
        InvalidTimestampError,
        InvalidRequestError,
        InvalidConfigurationError,
        KafkaStorageError,
        UnsupportedCompressionTypeError,
        InvalidRecordError,
    ]
}
_BY_NAME: dict[str, type[KafkaError]] = {cls.name: cls for cls in _BY_CODE.values()}


def error_for_code(code: int) -> type[KafkaError]:
    """The error class for a Kafka error code (UnknownServerError if unknown)."""
    return _BY_CODE.get(code, UnknownServerError)


def error_for_name(name: str) -> type[KafkaError]:
    """The error class for a Kafka error name such as ``OFFSET_OUT_OF_RANGE``."""
    return _BY_NAME.get(name, UnknownServerError)
