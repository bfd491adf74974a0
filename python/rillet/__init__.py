"""Rillet: a KRaft-style distributed log broker with a Rust storage core.

The client is shaped like kafka-python, so code ports by renaming imports:
``from rillet import Producer, Consumer, AdminClient`` (kafka-python's ``KafkaProducer``,
``KafkaConsumer`` and ``KafkaAdminClient`` names are aliases). The storage core lives in the
native module :mod:`rillet._core`; this package re-exports its public types and Kafka's errors.
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
from rillet.client.admin import (
    AdminClient,
    ConfigResource,
    ConfigResourceType,
    NewPartitions,
    NewTopic,
)
from rillet.client.consumer import (
    Consumer,
    ConsumerRebalanceListener,
    ConsumerRecord,
    OffsetAndTimestamp,
)
from rillet.client.futures import FutureRecordMetadata, RecordMetadata
from rillet.client.producer import Producer
from rillet.types import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

KafkaProducer = Producer
KafkaConsumer = Consumer
KafkaAdminClient = AdminClient

__all__ = [
    "AdminClient",
    "BatchBuilder",
    "ConfigResource",
    "ConfigResourceType",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "FetchDataInfo",
    "FileRegion",
    "FutureRecordMetadata",
    "KafkaAdminClient",
    "KafkaConsumer",
    "KafkaProducer",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "NewPartitions",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "Producer",
    "Record",
    "RecordBatch",
    "RecordMetadata",
    "RecoveryInfo",
    "SegmentInfo",
    "TopicPartition",
    "__version__",
    "crc32c",
    "decode_batches",
    "errors",
    "transfer",
    "validate_record_batches",
]
