"""Committed offsets of a consumer group (Kafka's CommitRequestManager): OffsetCommit with
the member's id and epoch (or generation), OffsetFetch of the offsets a consumer starts from.

A commit is retried while the coordinator moves or loads (NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS) until the request timeout; per
partition errors are raised as the first one (kafka-python's ``commit`` raises too)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping

from rillet.client.consumer.group_client import GroupClient
from rillet.client.consumer.metrics import ConsumerCoordinatorMetrics
from rillet.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaError,
    KafkaTimeoutError,
    NotCoordinatorError,
    UnstableOffsetCommitError,
    error_for_code,
)
from rillet.protocol.gen.v1 import group_pb2
from rillet.protocol.group import (
    offset_commit_request_to_pb,
    offset_fetch_request_to_pb,
    offset_fetch_response_from_pb,
    partition_errors_from_pb,
)
from rillet.types import OffsetAndMetadata, TopicPartition

__all__ = ["OffsetsClient"]

_RETRY = (NotCoordinatorError, CoordinatorNotAvailableError, CoordinatorLoadInProgressError)
# UNSTABLE_OFFSET_COMMIT (only answered with require_stable): an open transaction will
# commit this partition's offset; ask again.
_RETRY_FETCH = (*_RETRY, UnstableOffsetCommitError)


class OffsetsClient:
    def __init__(
        self,
        client: GroupClient,
        retry_backoff_ms: int,
        timeout_ms: int,
        *,
        require_stable: bool = False,
        sensors: ConsumerCoordinatorMetrics | None = None,
    ) -> None:
        self.client = client
        self.sensors = sensors
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.timeout_s = timeout_ms / 1000
        self.require_stable = require_stable

    def _retrying(self, attempt: Callable[[], dict[TopicPartition, KafkaError | None]]) -> None:
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                errors = attempt()
            except _RETRY:
                errors = None
            if errors is not None:
                retriable = [e for e in errors.values() if isinstance(e, _RETRY_FETCH)]
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
        request = offset_commit_request_to_pb(
            self.client.group_id, offsets, member_id, epoch, instance_id
        )

        sensors = self.sensors

        def attempt() -> dict[TopicPartition, KafkaError | None]:
            sent_ms = sensors.metrics.clock() if sensors is not None else 0.0
            response = self.client.call(
                lambda stub, t, md: stub.OffsetCommit(request, timeout=t, metadata=md)
            )
            if sensors is not None:
                sensors.record_latency(sensors.commit_latency, sent_ms)
            return partition_errors_from_pb(response.topics)

        self._retrying(attempt)

    def fetch(
        self,
        partitions: Iterable[TopicPartition] | None,
        member_id: str = "",
        member_epoch: int | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets of ``partitions`` (None: all it has); partitions
        without one are left out."""
        request = offset_fetch_request_to_pb(
            self.client.group_id, partitions, member_id, member_epoch, self.require_stable
        )
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
            offsets, errors = offset_fetch_response_from_pb(g)
            found.update(offsets)
            return dict(errors)

        self._retrying(attempt)
        return dict(found)


def _group_error(response: group_pb2.OffsetFetchResponse) -> KafkaError | None:
    for g in response.groups:
        if g.error_code:
            return error_for_code(g.error_code)(g.error_message)
    return None
