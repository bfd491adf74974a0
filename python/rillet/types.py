"""Small value types shared by the broker, the client and the tools."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A topic and a partition number, as in kafka-python."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class OffsetAndMetadata(NamedTuple):
    """A committed offset, as in kafka-python: the next offset to read, the application's
    metadata string, and the leader epoch of the last record read (KIP-320; None if unknown)."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None
