"""Helpers for the group coordinator's tests: a loaded shard over a few topics, request
builders, and the observable state that a shard rebuilt from its records must reproduce."""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from rillet.coordinator.group import (
    ClassicGroupState,
    Completion,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    CoordinatorRecord,
    CoordinatorResult,
    GroupCoordinatorConfig,
    GroupCoordinatorShard,
    JoinGroupProtocol,
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetFetchRequest,
    OwnedTopicPartitions,
    SyncGroupRequest,
    TopicInfo,
    encode_assignment,
    encode_subscription,
)
from rillet.coordinator.group.classic_group import ClassicGroup

FOO = uuid.UUID("00000000-0000-0000-0000-00000000f001")
BAR = uuid.UUID("00000000-0000-0000-0000-00000000ba02")
TOPICS: dict[str, TopicInfo] = {"foo": TopicInfo(FOO, 6), "bar": TopicInfo(BAR, 3)}
TEST_CONFIG = GroupCoordinatorConfig(
    offsets_topic_num_partitions=1,
    consumer_group_session_timeout_ms=45_000,
    consumer_group_heartbeat_interval_ms=5_000,
    classic_group_initial_rebalance_delay_ms=3_000,
)


class Log:
    """The partition as the driver sees it: every record a result carried, in order."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []

    def append(self, result: CoordinatorResult[Any]) -> None:
        for record in result.records:
            self.records.append((record.key_bytes(), record.value_bytes()))


def new_shard(
    config: GroupCoordinatorConfig = TEST_CONFIG,
    topics: Mapping[str, TopicInfo] | None = None,
    now_ms: int = 0,
    seed: int = 7,
) -> GroupCoordinatorShard:
    shard = GroupCoordinatorShard(
        0, config, rng=random.Random(seed), topics=TOPICS if topics is None else topics
    )
    shard.on_loaded(now_ms)
    return shard


def reload(
    records: Iterable[tuple[bytes, bytes | None]],
    config: GroupCoordinatorConfig = TEST_CONFIG,
    topics: Mapping[str, TopicInfo] | None = None,
    now_ms: int = 0,
) -> GroupCoordinatorShard:
    """A fresh shard that replayed ``records`` (binary, as read from the log)."""
    shard = GroupCoordinatorShard(
        0, config, rng=random.Random(99), topics=TOPICS if topics is None else topics
    )
    for key, value in records:
        shard.replay(key, value)
    shard.on_loaded(now_ms)
    return shard


def join(
    group_id: str,
    member_id: str,
    topics: tuple[str, ...] = ("foo",),
    *,
    instance_id: str | None = None,
    regex: str | None = None,
    assignor: str | None = None,
    rebalance_timeout_ms: int = 60_000,
) -> ConsumerGroupHeartbeatRequest:
    """A KIP-848 join (member epoch 0)."""
    return ConsumerGroupHeartbeatRequest(
        group_id,
        member_id=member_id,
        member_epoch=0,
        instance_id=instance_id,
        rebalance_timeout_ms=rebalance_timeout_ms,
        subscribed_topic_names=topics if regex is None else None,
        subscribed_topic_regex=regex,
        server_assignor=assignor,
        topic_partitions=(),
        client_id=f"client-{member_id}",
        client_host="/10.0.0.1",
    )


def owned_of(response: ConsumerGroupHeartbeatResponse) -> tuple[OwnedTopicPartitions, ...]:
    assert response.assignment is not None
    return tuple(OwnedTopicPartitions(a.topic_id, a.partitions) for a in response.assignment)


def beat(
    group_id: str,
    member_id: str,
    epoch: int,
    owned: tuple[OwnedTopicPartitions, ...] | None = None,
    instance_id: str | None = None,
) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        group_id,
        member_id=member_id,
        member_epoch=epoch,
        instance_id=instance_id,
        topic_partitions=owned,
        client_id=f"client-{member_id}",
        client_host="/10.0.0.1",
    )


def partitions_of(response: ConsumerGroupHeartbeatResponse) -> set[tuple[str | None, int]]:
    assert response.assignment is not None
    return {(a.topic_name, p) for a in response.assignment for p in a.partitions}


def commit(
    group_id: str,
    offsets: Mapping[tuple[str, int], int],
    *,
    member_id: str = "",
    generation: int = -1,
    metadata: str | None = None,
) -> OffsetCommitRequest:
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append(
            OffsetCommitRequestPartition(partition, offset, 3, metadata)
        )
    return OffsetCommitRequest(
        group_id,
        tuple(OffsetCommitRequestTopic(t, tuple(ps)) for t, ps in by_topic.items()),
        generation_id_or_member_epoch=generation,
        member_id=member_id,
    )


def committed(shard: GroupCoordinatorShard, group_id: str) -> dict[tuple[str, int], int]:
    response = shard.fetch_offsets(OffsetFetchRequest(group_id)).response
    assert response is not None and response.error is None
    return {
        (t.name, p.partition_index): p.committed_offset
        for t in response.topics
        for p in t.partitions
    }


def subscription(*topics: str) -> bytes:
    return encode_subscription(ConsumerProtocolSubscription(tuple(topics)))


def assignment_bytes(partitions: Mapping[str, tuple[int, ...]]) -> bytes:
    return encode_assignment(ConsumerProtocolAssignment(dict(partitions)))


def join_classic(
    group_id: str,
    member_id: str = "",
    *,
    topics: tuple[str, ...] = ("foo",),
    instance_id: str | None = None,
    protocols: tuple[str, ...] = ("range",),
    session_timeout_ms: int = 10_000,
    rebalance_timeout_ms: int = 30_000,
    client_id: str = "classic",
) -> JoinGroupRequest:
    metadata = subscription(*topics)
    return JoinGroupRequest(
        group_id,
        session_timeout_ms,
        rebalance_timeout_ms,
        member_id=member_id,
        group_instance_id=instance_id,
        protocols=tuple(JoinGroupProtocol(p, metadata) for p in protocols),
        client_id=client_id,
        client_host="/10.0.0.2",
    )


def sync(
    group_id: str,
    member_id: str,
    generation: int,
    assignments: Mapping[str, bytes] | None = None,
    instance_id: str | None = None,
) -> SyncGroupRequest:
    return SyncGroupRequest(
        group_id,
        generation,
        member_id,
        group_instance_id=instance_id,
        assignments=dict(assignments or {}),
    )


def completions(result: CoordinatorResult[Any]) -> dict[Hashable, Any]:
    return {c.handle: c.response for c in result.completions}


def _plain(value: Any) -> Any:
    """Dataclasses as dicts, errors as their names (KafkaError instances compare by id)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, BaseException):
        return type(value).__name__
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def observable_state(shard: GroupCoordinatorShard, skip: Iterable[str] = ()) -> dict[str, Any]:
    """What a client or tool can see of every group, plus the KIP-848 members' full state
    (epochs, reconciliation state, partitions pending revocation)."""
    skipped = set(skip)
    listed = shard.list_groups().response
    assert listed is not None and listed.error is None
    out: dict[str, Any] = {}
    for g in listed.groups:
        if g.group_id in skipped:
            continue
        entry: dict[str, Any] = {"listed": _plain(g)}
        if g.group_type == "consumer":
            described = shard.consumer_group_describe([g.group_id]).response
            assert described is not None
            entry["described"] = _plain(described[0])
            group = shard.state.consumer_group(g.group_id)
            assert group is not None
            entry["members"] = {m: _plain(v) for m, v in sorted(group.members.items())}
            entry["subscription_metadata"] = dict(sorted(group.subscription_metadata.items()))
        else:
            classic = shard.describe_groups([g.group_id]).response
            assert classic is not None
            entry["described"] = _plain(classic[0])
        entry["offsets"] = committed(shard, g.group_id)
        out[g.group_id] = entry
    return out


def rebalancing_classic_groups(shard: GroupCoordinatorShard) -> set[str]:
    """Classic groups in a rebalance, or holding members that were told MEMBER_ID_REQUIRED
    and have not joined again: neither is persisted (by design, as Kafka), so a reloaded
    shard may not have the group at all (an offset deletion then removes the simple group
    the reload sees, while the live one keeps it for its pending member)."""
    out = set()
    for gid, group in shard.state.groups.items():
        state = getattr(group, "state", None)
        if state in (
            ClassicGroupState.PREPARING_REBALANCE,
            ClassicGroupState.COMPLETING_REBALANCE,
        ) or getattr(group, "pending_join_members", None):
            out.add(gid)
        elif (
            isinstance(group, ClassicGroup)
            and not group.persisted
            and not group.members
            and not shard.state.offsets.get(gid)
        ):
            # Only in memory (a pending member came and went): the next offset-expiration
            # check deletes it; a reloaded shard never had it.
            out.add(gid)
    return out


def assert_replay_matches(shard: GroupCoordinatorShard, log: Log) -> None:
    """A shard rebuilt from the log shows what the live shard shows."""
    fresh = reload(log.records, shard.config, dict(shard.ctx.topics))
    skip = rebalancing_classic_groups(shard)
    assert observable_state(fresh, skip) == observable_state(shard, skip)


def records_of(result: CoordinatorResult[Any]) -> list[CoordinatorRecord]:
    return list(result.records)


def parked(result: CoordinatorResult[Any]) -> list[Completion]:
    return list(result.completions)
