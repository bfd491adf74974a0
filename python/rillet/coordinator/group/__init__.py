"""The group coordinator as a pure state machine: one :class:`GroupCoordinatorShard` per
partition of ``__consumer_offsets`` (Kafka 4's ``GroupCoordinatorShard``).

It serves KIP-848 consumer groups (ConsumerGroupHeartbeat, server-side ``uniform`` and
``range`` assignors, incremental reconciliation, member epochs), classic groups (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup with client-side assignment), committed offsets
(OffsetCommit, OffsetFetch, OffsetDelete, expiry) and group administration (ListGroups,
DescribeGroups, ConsumerGroupDescribe, DeleteGroups). Its state is the replay of Kafka's own
``__consumer_offsets`` records (:mod:`.records`).

Layout::

    codec.py              Kafka's schema encoding rules (flexible versions, tagged fields)
    records.py            the record keys and values of __consumer_offsets, binary
    embedded_protocol.py  ConsumerProtocolSubscription/Assignment (classic metadata bytes)
    config.py             GroupCoordinatorConfig: Kafka's group.* and offsets.* settings
    partitioner.py        partition_for(group_id, n): Kafka's abs(hashCode) % n
    messages.py           requests and responses of every API, as domain values
    results.py            CoordinatorResult, Completion, Operation
    timers.py             timers as data
    consumer_group.py     KIP-848 group and member state
    classic_group.py      classic group and member state, its state machine
    state.py              all groups and offsets of a shard, and replay
    assignors.py          uniform and range
    reconciliation.py     one member's step toward its target assignment
    consumer_heartbeat.py ConsumerGroupHeartbeat, leave, session/rebalance timeouts
    classic_protocol.py   JoinGroup, SyncGroup, Heartbeat, LeaveGroup
    classic_rebalance.py  the join and sync phases of a classic rebalance, their timers
    offsets.py            OffsetCommit/Fetch/Delete, reset, expiry
    pending_offsets.py    offsets pending in open transactions, by producer
    txn_offsets.py        TxnOffsetCommit (KIP-98, KIP-447 fencing)
    admin.py              ListGroups, DescribeGroups, ConsumerGroupDescribe, DeleteGroups
    shard.py              GroupCoordinatorShard: the facade the driver calls

How a driver runs a shard (the contract)::

    # topics: every topic of the cluster (name -> (topic id, partitions)), before loading
    shard = GroupCoordinatorShard(partition, config, rng=random.Random(), topics=topics)
    for key, value in read_partition(partition):     # loading: replay the whole partition
        shard.replay(key, value)                     # value None is a tombstone
    shard.on_loaded(clock())                         # before this: LOAD_IN_PROGRESS answers
    while leader_of(partition):
        result = shard.consumer_group_heartbeat(request, clock())   # or any operation,
        result = shard.join_group(request, handle, clock())         # or a timer:
        result = shard.tick(clock())       # when clock() >= shard.next_deadline_ms()
        shard.on_metadata(topics)          # whenever the cluster's topics change
        # 1. append result.records (key_bytes(), value_bytes()) to the partition, acks=all
        # 2. once they and every record appended before them are committed (the high
        #    watermark passed them; at once if nothing is pending), send result.response
        #    to the requester and each completion.response to completion.handle
        # 3. if an append fails, or leadership moves: send NOT_COORDINATOR for every
        #    response not yet sent, add shard.unload() (the parked requests' answers),
        #    throw the shard away, and load a new one from the log if still leader

Transactions: ``result.producer`` means the records are one transactional batch of that
producer (id, epoch, no sequence); ``result.marker`` means append that COMMIT/ABORT control
batch instead; either may be refused by the log before it writes anything (a fenced
producer epoch), and then ``result.undo()`` puts the shard back. Loading passes a
transactional batch's producer id to ``replay(key, value, producer_id=...)`` and each
control batch to ``replay_end_transaction_marker(producer_id, committed)``.

JoinGroup and SyncGroup may have to wait for other members: their answer is never
``result.response`` but a :class:`Completion` for the ``handle`` the driver passed, in this
result or in the result of a later operation or tick. A read (OffsetFetch, describe, list)
returns a result with no records, which the driver still holds behind pending writes, as
Kafka's coordinator runtime does. The shard applies its records to itself as it produces
them; a shard loaded by replaying the same records has the same state (classic groups in a
rebalance come back at their last persisted generation, as in Kafka).
"""

from __future__ import annotations

from rillet.coordinator.group.assignors import ASSIGNORS, GroupSpec, MemberSubscription
from rillet.coordinator.group.classic_group import ClassicGroupState, JoinGroupProtocol
from rillet.coordinator.group.config import GroupCoordinatorConfig
from rillet.coordinator.group.consumer_group import ConsumerGroupState, MemberState, TopicInfo
from rillet.coordinator.group.embedded_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from rillet.coordinator.group.messages import (
    AssignedTopicPartitions,
    ConsumerGroupDescribeMember,
    ConsumerGroupDescribeResult,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DeletableGroupResult,
    DescribedGroup,
    DescribedGroupMember,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    JoinGroupResponseMember,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListedGroup,
    ListGroupsResponse,
    MemberIdentity,
    MemberResponse,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
    OwnedTopicPartitions,
    PartitionError,
    SyncGroupRequest,
    SyncGroupResponse,
    TopicPartitionErrors,
    TopicPartitionIndexes,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from rillet.coordinator.group.partitioner import java_string_hashcode, partition_for
from rillet.coordinator.group.records import CoordinatorRecord, decode_record
from rillet.coordinator.group.results import (
    Completion,
    CoordinatorResult,
    EndTxnMarker,
    ProducerIdAndEpoch,
)
from rillet.coordinator.group.shard import GroupCoordinatorShard

__all__ = [
    "ASSIGNORS",
    "CONSUMER_PROTOCOL_TYPE",
    "AssignedTopicPartitions",
    "ClassicGroupState",
    "Completion",
    "ConsumerGroupDescribeMember",
    "ConsumerGroupDescribeResult",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
    "ConsumerGroupState",
    "ConsumerProtocolAssignment",
    "ConsumerProtocolSubscription",
    "CoordinatorRecord",
    "CoordinatorResult",
    "DeletableGroupResult",
    "DescribedGroup",
    "DescribedGroupMember",
    "EndTxnMarker",
    "GroupCoordinatorConfig",
    "GroupCoordinatorShard",
    "GroupSpec",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "JoinGroupProtocol",
    "JoinGroupRequest",
    "JoinGroupResponse",
    "JoinGroupResponseMember",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "ListGroupsResponse",
    "ListedGroup",
    "MemberIdentity",
    "MemberResponse",
    "MemberState",
    "MemberSubscription",
    "OffsetCommitRequest",
    "OffsetCommitRequestPartition",
    "OffsetCommitRequestTopic",
    "OffsetCommitResponse",
    "OffsetDeleteRequest",
    "OffsetDeleteResponse",
    "OffsetFetchRequest",
    "OffsetFetchResponse",
    "OffsetFetchResponsePartition",
    "OffsetFetchResponseTopic",
    "OwnedTopicPartitions",
    "PartitionError",
    "ProducerIdAndEpoch",
    "SyncGroupRequest",
    "SyncGroupResponse",
    "TopicInfo",
    "TopicPartitionErrors",
    "TopicPartitionIndexes",
    "TxnOffsetCommitRequest",
    "TxnOffsetCommitResponse",
    "decode_assignment",
    "decode_record",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "java_string_hashcode",
    "partition_for",
]
