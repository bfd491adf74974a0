"""The AdminClient's consumer-group calls (kafka-python's ``list_consumer_groups``,
``describe_consumer_groups``, ``list_consumer_group_offsets``, ``delete_consumer_groups``, and
Kafka's ``alterConsumerGroupOffsets`` / ``deleteConsumerGroupOffsets``): each goes to the
group's coordinator, found with FindCoordinator; ListGroups goes to every broker."""

from __future__ import annotations

import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from rillet.client.cluster import GRPC_OPTIONS
from rillet.client.consumer.assignors.protocol import decode_assignment
from rillet.client.sasl import ClientSasl
from rillet.client.security import open_channel, refusal
from rillet.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaError,
    KafkaTimeoutError,
    NotCoordinatorError,
    error_for_code,
)
from rillet.protocol.gen.v1 import group_pb2, group_pb2_grpc
from rillet.protocol.group import (
    offset_commit_request_to_pb,
    offset_fetch_request_to_pb,
    offset_fetch_response_from_pb,
    partition_errors_from_pb,
)
from rillet.security.tls import ClientTls
from rillet.types import OffsetAndMetadata, TopicPartition

__all__ = ["ConsumerGroupAdmin", "GroupDescription", "GroupListing", "MemberDescription"]

_RETRY = (NotCoordinatorError, CoordinatorNotAvailableError, CoordinatorLoadInProgressError)


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    type: str
    coordinator: int


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]
    member_epoch: int = -1


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    type: str
    coordinator: int
    members: tuple[MemberDescription, ...]
    assignor: str = ""
    group_epoch: int = -1
    error: KafkaError | None = None


def _error(code: int, message: str) -> KafkaError | None:
    return error_for_code(code)(message) if code else None


class ConsumerGroupAdmin(ABC):
    """Mixed into :class:`~rillet.client.admin.AdminClient`."""

    _timeout: float
    _tls: ClientTls | None
    _sasl: ClientSasl | None

    @abstractmethod
    def describe_cluster(self) -> dict[str, Any]:
        """The AdminClient's: the brokers to ask."""

    def _group_call(self, address: str, name: str, request: Any) -> Any:
        channel = open_channel(address, self._tls, GRPC_OPTIONS, self._sasl)
        try:
            return getattr(group_pb2_grpc.GroupServiceStub(channel), name)(
                request, timeout=self._timeout
            )
        except grpc.RpcError as e:
            raise refusal(e) or CoordinatorNotAvailableError(
                f"{address} did not answer {name}"
            ) from e
        finally:
            channel.close()

    def _brokers(self) -> dict[int, str]:
        return {
            b["node_id"]: f"{b['host']}:{b['port']}"
            for b in self.describe_cluster()["brokers"]
            if not b.get("is_fenced") and b["port"] > 0
        }

    def _coordinator(self, group_id: str, key_type: int = 0) -> tuple[int, str]:
        """(node id, address) of ``group_id``'s coordinator (with ``key_type`` 1, of a
        transactional id's), retried while it is created."""
        deadline = time.monotonic() + self._timeout
        request = group_pb2.FindCoordinatorRequest(key_type=key_type, coordinator_keys=[group_id])
        while True:
            last: KafkaError | None = None
            for address in self._brokers().values():
                try:
                    found = self._group_call(address, "FindCoordinator", request).coordinators[0]
                except KafkaError as e:
                    last = e
                    continue
                err = _error(found.error_code, found.error_message)
                if err is None:
                    return found.node_id, f"{found.host}:{found.port}"
                last = err
                if not isinstance(err, _RETRY):
                    raise err
                break
            if time.monotonic() >= deadline:
                kind = "transactional id" if key_type else "group"
                raise KafkaTimeoutError(f"no coordinator found for {kind} {group_id}: {last}")
            time.sleep(0.1)

    def _on_coordinator(self, group_id: str, name: str, request: Any, error_of: Any) -> Any:
        """Send to the group's coordinator, finding it again while it moves or loads."""
        deadline = time.monotonic() + self._timeout
        while True:
            node, address = self._coordinator(group_id)
            try:
                response = self._group_call(address, name, request)
            except CoordinatorNotAvailableError:
                response, err = None, None
            else:
                err = error_of(response)
                if not isinstance(err, _RETRY):
                    return node, response
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"{name} for group {group_id}: {err}")
            time.sleep(0.1)

    # -- the calls ---------------------------------------------------------------------------

    def list_consumer_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> list[GroupListing]:
        """Every group of the cluster (asked of each broker: each lists what it
        coordinates), optionally only those in ``states`` or of ``types``."""
        request = group_pb2.ListGroupsRequest(states_filter=list(states), types_filter=list(types))
        out: dict[str, GroupListing] = {}
        for node, address in sorted(self._brokers().items()):
            response = self._group_call(address, "ListGroups", request)
            err = _error(response.error_code, response.error_message)
            if err is not None and not isinstance(err, _RETRY):
                raise err
            for g in response.groups:
                out[g.group_id] = GroupListing(
                    g.group_id, g.protocol_type, g.group_state, g.group_type, node
                )
        return [out[g] for g in sorted(out)]

    def describe_consumer_groups(self, group_ids: Sequence[str]) -> list[GroupDescription]:
        """Each group's state and members (ConsumerGroupDescribe for KIP-848 groups,
        DescribeGroups for classic ones). A group that does not exist is described as
        ``Dead`` with GROUP_ID_NOT_FOUND, as Kafka's tool reports it."""
        out = []
        for group_id in group_ids:
            node, response = self._on_coordinator(
                group_id,
                "ConsumerGroupDescribe",
                group_pb2.ConsumerGroupDescribeRequest(group_ids=[group_id]),
                lambda r: _error(r.groups[0].error_code, r.groups[0].error_message),
            )
            g = response.groups[0]
            err = _error(g.error_code, g.error_message)
            if err is None:
                members = tuple(
                    MemberDescription(
                        m.member_id,
                        m.instance_id if m.HasField("instance_id") else None,
                        m.client_id,
                        m.client_host,
                        tuple(
                            TopicPartition(t.topic_name or str(uuid.UUID(bytes=t.topic_id)), p)
                            for t in m.assignment
                            for p in t.partitions
                        ),
                        m.member_epoch,
                    )
                    for m in g.members
                )
                out.append(
                    GroupDescription(
                        group_id,
                        g.group_state,
                        "consumer",
                        node,
                        members,
                        g.assignor_name,
                        g.group_epoch,
                    )
                )
                continue
            out.append(self._describe_classic(group_id, node, err))
        return out

    def _describe_classic(self, group_id: str, node: int, err: KafkaError) -> GroupDescription:
        _, response = self._on_coordinator(
            group_id,
            "DescribeGroups",
            group_pb2.DescribeGroupsRequest(groups=[group_id]),
            lambda r: _error(r.groups[0].error_code, r.groups[0].error_message),
        )
        g = response.groups[0]
        classic_err = _error(g.error_code, g.error_message)
        if classic_err is not None or g.group_state in ("", "Dead"):
            return GroupDescription(group_id, "Dead", "", node, (), error=classic_err or err)
        members = tuple(
            MemberDescription(
                m.member_id,
                m.group_instance_id if m.HasField("group_instance_id") else None,
                m.client_id,
                m.client_host,
                _classic_assignment(bytes(m.member_assignment)),
            )
            for m in g.members
        )
        return GroupDescription(group_id, g.group_state, "classic", node, members, g.protocol_data)

    def list_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (of ``partitions``, or all it has)."""
        request = offset_fetch_request_to_pb(group_id, partitions)
        _, response = self._on_coordinator(
            group_id,
            "OffsetFetch",
            request,
            lambda r: _error(r.groups[0].error_code, r.groups[0].error_message),
        )
        g = response.groups[0]
        err = _error(g.error_code, g.error_message)
        if err is not None:
            raise err
        found, errors = offset_fetch_response_from_pb(g)
        for err in errors.values():
            raise err
        return found

    def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """Commit ``offsets`` for an inactive group (no members): what ``consumer-groups
        --reset-offsets --execute`` does. An active group refuses (Kafka's errors)."""
        request = offset_commit_request_to_pb(group_id, offsets)
        _, response = self._on_coordinator(
            group_id, "OffsetCommit", request, lambda r: _first_partition_error(r.topics)
        )
        err = _first_partition_error(response.topics)
        if err is not None:
            raise err

    def delete_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, KafkaError | None]:
        request = group_pb2.OffsetDeleteRequest(group_id=group_id)
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        for topic, ps in by_topic.items():
            request.topics.add(name=topic, partitions=ps)
        _, response = self._on_coordinator(
            group_id,
            "OffsetDelete",
            request,
            lambda r: _error(r.error_code, r.error_message),
        )
        err = _error(response.error_code, response.error_message)
        if err is not None:
            raise err
        return partition_errors_from_pb(response.topics)

    def delete_consumer_groups(self, group_ids: Sequence[str]) -> dict[str, KafkaError | None]:
        """Delete empty groups with their offsets; NON_EMPTY_GROUP / GROUP_ID_NOT_FOUND per
        group otherwise."""
        out: dict[str, KafkaError | None] = {}
        for group_id in group_ids:
            _, response = self._on_coordinator(
                group_id,
                "DeleteGroups",
                group_pb2.DeleteGroupsRequest(groups_names=[group_id]),
                lambda r: _error(r.results[0].error_code, r.results[0].error_message),
            )
            r = response.results[0]
            out[group_id] = _error(r.error_code, r.error_message)
        return out


def _first_partition_error(topics: Any) -> KafkaError | None:
    for t in topics:
        for p in t.partitions:
            if p.error_code:
                return error_for_code(p.error_code)(
                    f"{t.name}-{p.partition_index}: {p.error_message}"
                )
    return None


def _classic_assignment(data: bytes) -> tuple[TopicPartition, ...]:
    """A classic member's partitions, from its ConsumerProtocolAssignment bytes."""
    if not data:
        return ()
    try:
        assignment = decode_assignment(data)
    except KafkaError:
        return ()
    return tuple(sorted(TopicPartition(*tp) for tp in assignment.partitions))
