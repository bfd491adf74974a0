"""Rillet: a KRaft-style distributed log broker with a Rust storage core.

The storage core lives in the native module :mod:`rillet._core`; this package re-exports
its public types and Kafka's errors.
"""

from __future__ import annotations

from rillet import errors
from rillet._core import (
    BatchBuilder,
    FetchDataInfo,
    FileRegion,
    Log,
    LogAppendInfo,
    LogConfig,
    Record,
    RecordBatch,
    RecoveryInfo,
    SegmentInfo,
    __version__,
    crc32c,
    decode_batches,
    transfer,
    validate_record_batches,
)

__all__ = [
    "BatchBuilder",
    "FetchDataInfo",
    "FileRegion",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "Record",
    "RecordBatch",
    "RecoveryInfo",
    "SegmentInfo",
    "__version__",
    "crc32c",
    "decode_batches",
    "errors",
    "transfer",
    "validate_record_batches",
]
