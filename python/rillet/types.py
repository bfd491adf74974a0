"""Small value types shared by the broker, the client and the tools."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A topic and a partition number, as in kafka-python."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class ConsumerGroupMetadata(NamedTuple):
    """A group member's identity, for a transactional producer's offset commits
    (``send_offsets_to_transaction``): the coordinator fences a zombie member by it
    (KIP-447). ``Consumer.group_metadata()`` gives it; a bare group id means unknown
    generation and member."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class OffsetAndMetadata(NamedTuple):
    """A committed offset, as in kafka-python: the next offset to read, the application's
    metadata string, and the leader epoch of the last record read (KIP-320; None if unknown)."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None
