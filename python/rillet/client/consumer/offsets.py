"""Committed offsets of a consumer group (Kafka's CommitRequestManager): OffsetCommit with
the member's id and epoch (or generation), OffsetFetch of the offsets a consumer starts from.

A commit is retried while the coordinator moves or loads (NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS) until the request timeout; per
partition errors are raised as the first one (kafka-python's ``commit`` raises too)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping

from rillet.client.consumer.group_client import GroupClient
from rillet.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaError,
    KafkaTimeoutError,
    NotCoordinatorError,
    error_for_code,
)
from rillet.protocol.gen.v1 import group_pb2
from rillet.types import OffsetAndMetadata, TopicPartition

__all__ = ["OffsetsClient"]

_RETRY = (NotCoordinatorError, CoordinatorNotAvailableError, CoordinatorLoadInProgressError)


class OffsetsClient:
    def __init__(self, client: GroupClient, retry_backoff_ms: int, timeout_ms: int) -> None:
        self.client = client
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.timeout_s = timeout_ms / 1000

    def _retrying(self, attempt: Callable[[], dict[TopicPartition, KafkaError | None]]) -> None:
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                errors = attempt()
            except _RETRY:
                errors = None
            if errors is not None:
                retriable = [e for e in errors.values() if isinstance(e, _RETRY)]
                if not retriable:
                    for tp, err in sorted(errors.items()):
                        if err is not None:
                            raise type(err)(f"{tp}: {err}")
                    return
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(
                    f"offsets of group {self.client.group_id} were not committed within "
                    f"{self.timeout_s:.0f} s: the coordinator did not take them"
                )
            self.client.forget_coordinator()
            time.sleep(self.retry_backoff_s)

    def commit(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        member_id: str,
        epoch: int,
        instance_id: str | None = None,
    ) -> None:
        """Commit ``offsets`` as member ``member_id`` in ``epoch`` (member epoch or
        generation; -1 outside the group protocol)."""
        if not offsets:
            return
        request = group_pb2.OffsetCommitRequest(
            group_id=self.client.group_id,
            generation_id_or_member_epoch=epoch,
            member_id=member_id,
        )
        if instance_id is not None:
            request.group_instance_id = instance_id
        by_topic: dict[str, list[tuple[int, OffsetAndMetadata]]] = {}
        for tp, om in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append((tp.partition, om))
        for topic, parts in by_topic.items():
            t = request.topics.add(name=topic)
            for p, om in parts:
                part = t.partitions.add(
                    partition_index=p, committed_offset=om.offset, committed_metadata=om.metadata
                )
                if om.leader_epoch is not None:
                    part.committed_leader_epoch = om.leader_epoch

        def attempt() -> dict[TopicPartition, KafkaError | None]:
            response = self.client.call(
                lambda stub, t, md: stub.OffsetCommit(request, timeout=t, metadata=md)
            )
            return {
                TopicPartition(rt.name, rp.partition_index): (
                    error_for_code(rp.error_code)(rp.error_message) if rp.error_code else None
                )
                for rt in response.topics
                for rp in rt.partitions
            }

        self._retrying(attempt)

    def fetch(
        self,
        partitions: Iterable[TopicPartition] | None,
        member_id: str = "",
        member_epoch: int | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets of ``partitions`` (None: all it has); partitions
        without one are left out."""
        group = group_pb2.OffsetFetchRequest.Group(group_id=self.client.group_id)
        group.member_id = member_id
        if member_epoch is not None:
            group.member_epoch = member_epoch
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in sorted(partitions):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            group.topics.SetInParent()
            for topic, ps in by_topic.items():
                group.topics.topics.add(name=topic, partition_indexes=ps)
        request = group_pb2.OffsetFetchRequest(groups=[group])
        found: dict[TopicPartition, OffsetAndMetadata] = {}

        def attempt() -> dict[TopicPartition, KafkaError | None]:
            found.clear()
            response = self.client.call(
                lambda stub, t, md: stub.OffsetFetch(request, timeout=t, metadata=md),
                lambda r: _group_error(r),
            )
            (g,) = response.groups
            if g.error_code:
                raise error_for_code(g.error_code)(g.error_message)
            errors: dict[TopicPartition, KafkaError | None] = {}
            for rt in g.topics:
                for rp in rt.partitions:
                    tp = TopicPartition(rt.name, rp.partition_index)
                    if rp.error_code:
                        errors[tp] = error_for_code(rp.error_code)(rp.error_message)
                    elif rp.committed_offset >= 0:
                        epoch = rp.committed_leader_epoch
                        found[tp] = OffsetAndMetadata(
                            rp.committed_offset, rp.metadata, epoch if epoch >= 0 else None
                        )
            return errors

        self._retrying(attempt)
        return dict(found)


def _group_error(response: group_pb2.OffsetFetchResponse) -> KafkaError | None:
    for g in response.groups:
        if g.error_code:
            return error_for_code(g.error_code)(g.error_message)
    return None
