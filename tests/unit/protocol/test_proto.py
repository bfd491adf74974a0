"""The API contract (proto/rillet/v1) and its generated code (rillet.protocol).

- every message of every file survives a serialize/parse round trip with every field set,
  and realistic requests and responses do too (real RecordBatch v2 bytes on the fast path);
- the generated services are callable over a real gRPC channel;
- the package's conventions hold (enum prefixes, units in names);
- the committed generated code is what scripts/gen_proto.py produces.

The error table and its mapping are in test_errors.py.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from google.protobuf.message_factory import GetMessageClass

from rillet import BatchBuilder, decode_batches, validate_record_batches
from rillet.errors import NotLeaderOrFollowerError
from rillet.protocol import (
    admin_pb2,
    admin_pb2_grpc,
    common_pb2,
    controller_pb2,
    fetch_pb2,
    fetch_pb2_grpc,
    metadata_pb2,
    metadata_pb2_grpc,
    metadata_records_pb2,
    produce_pb2,
    produce_pb2_grpc,
    quorum_pb2,
    quorum_pb2_grpc,
)
from rillet.protocol.errors import error_from_wire, error_to_wire
from rillet.protocol.gen.v1 import sasl_pb2, transaction_pb2

ROOT = Path(__file__).resolve().parents[3]
ErrorCode = common_pb2.ErrorCode
FILES = [
    common_pb2,
    produce_pb2,
    fetch_pb2,
    metadata_pb2,
    admin_pb2,
    quorum_pb2,
    controller_pb2,
    metadata_records_pb2,
    transaction_pb2,
    sasl_pb2,
]

# ---------------------------------------------------------------------------------------------
# round trips: every message with every field set


def _all_messages() -> list[_descriptor.Descriptor]:
    def walk(desc: _descriptor.Descriptor) -> Iterator[_descriptor.Descriptor]:
        if desc.GetOptions().map_entry:
            return
        yield desc
        for nested in desc.nested_types:
            yield from walk(nested)

    out: list[_descriptor.Descriptor] = []
    for module in FILES:
        for desc in module.DESCRIPTOR.message_types_by_name.values():
            out.extend(walk(desc))
    return out


def _scalar(field: _descriptor.FieldDescriptor, salt: int) -> object:
    fd = _descriptor.FieldDescriptor
    t = field.type
    if t == fd.TYPE_ENUM:
        values = [v.number for v in field.enum_type.values]
        return values[salt % len(values)] if salt else values[-1]
    if t == fd.TYPE_BOOL:
        return True
    if t == fd.TYPE_STRING:
        return f"{field.name}-{salt}-é"
    if t == fd.TYPE_BYTES:
        return bytes([salt % 256, 0, 255]) + field.name.encode()
    if t in (fd.TYPE_DOUBLE, fd.TYPE_FLOAT):
        return 1.5 + salt
    if t in (fd.TYPE_INT64, fd.TYPE_SINT64, fd.TYPE_SFIXED64):
        return -(2**40) - salt  # negative and wider than 32 bits
    if t in (fd.TYPE_UINT64, fd.TYPE_FIXED64):
        return 2**40 + salt
    if t in (fd.TYPE_UINT32, fd.TYPE_FIXED32):
        return 7 + salt
    return -7 - salt  # int32, sint32, sfixed32: Kafka's sentinels are negative


def _fill(msg: _message.Message, depth: int = 0, oneof_choice: int = 0) -> None:
    """Set every field of msg (one member of each oneof), recursively."""
    desc = msg.DESCRIPTOR
    chosen = {
        oneof.name: oneof.fields[oneof_choice % len(oneof.fields)]
        for oneof in desc.oneofs
        if not oneof.name.startswith("_")  # proto3 `optional` is a synthetic oneof
    }
    for field in desc.fields:
        real_oneof = field.containing_oneof
        if (
            real_oneof is not None
            and not real_oneof.name.startswith("_")
            and chosen[real_oneof.name] is not field
        ):
            continue
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            key_field = field.message_type.fields_by_name["key"]
            value_field = field.message_type.fields_by_name["value"]
            target = getattr(msg, field.name)
            for salt in (1, 2):
                key = _scalar(key_field, salt)
                if value_field.message_type is None:
                    target[key] = _scalar(value_field, salt)
                else:
                    _fill(target[key], depth + 1)
        elif field.is_repeated:
            target = getattr(msg, field.name)
            for salt in (1, 2):
                if field.message_type is None:
                    target.append(_scalar(field, salt))
                elif depth < 4:
                    _fill(target.add(), depth + 1)
        elif field.message_type is not None:
            getattr(msg, field.name).SetInParent()  # present even when the message is empty
            if depth < 4:
                _fill(getattr(msg, field.name), depth + 1)
        else:
            setattr(msg, field.name, _scalar(field, 0))


MESSAGES = _all_messages()


@pytest.mark.parametrize("desc", MESSAGES, ids=lambda d: d.full_name)
def test_every_message_round_trips_with_every_field_set(desc: _descriptor.Descriptor) -> None:
    cls = GetMessageClass(desc)
    real_oneofs = [o for o in desc.oneofs if not o.name.startswith("_")]
    choices = max([len(o.fields) for o in real_oneofs], default=1)
    for choice in range(choices):
        msg = cls()
        _fill(msg, oneof_choice=choice)
        # Every field is set, except the unchosen members of each oneof.
        expected = {
            f.name
            for f in desc.fields
            if f.containing_oneof is None
            or f.containing_oneof.name.startswith("_")
            or f.containing_oneof.fields[choice % len(f.containing_oneof.fields)] is f
        }
        assert {f.name for f, _ in msg.ListFields()} == expected
        data = msg.SerializeToString(deterministic=True)
        parsed = cls.FromString(data)
        assert parsed == msg
        assert parsed.SerializeToString(deterministic=True) == data
        for field in desc.fields:
            if field.has_presence:
                assert parsed.HasField(field.name) == msg.HasField(field.name), field.name


def test_every_file_is_in_package_rillet_v1() -> None:
    for module in FILES:
        assert module.DESCRIPTOR.package == "rillet.v1"
        assert module.DESCRIPTOR.name == f"rillet/v1/{module.__name__.rsplit('.', 1)[1][:-4]}.proto"


def test_optional_fields_tell_absent_from_zero() -> None:
    record = common_pb2.Record(value=b"", offset=0)
    parsed = common_pb2.Record.FromString(record.SerializeToString())
    assert not parsed.HasField("key")  # null key
    assert parsed.HasField("value") and parsed.value == b""  # empty, not null
    assert not parsed.HasField("timestamp_ms")  # "now" on produce

    partition = fetch_pb2.FetchRequest.Partition(partition=0, fetch_offset=0)
    assert not partition.HasField("current_leader_epoch")
    partition.current_leader_epoch = 0
    assert fetch_pb2.FetchRequest.Partition.FromString(partition.SerializeToString()).HasField(
        "current_leader_epoch"
    )

    change = metadata_records_pb2.PartitionChangeRecord(partition_id=1, topic_id=b"\x01" * 16)
    change.isr.SetInParent()  # "now empty", unlike an absent isr ("unchanged")
    parsed_change = metadata_records_pb2.PartitionChangeRecord.FromString(
        change.SerializeToString()
    )
    assert parsed_change.HasField("isr") and list(parsed_change.isr.ids) == []
    assert not parsed_change.HasField("replicas")
    assert not parsed_change.HasField("leader")


# ---------------------------------------------------------------------------------------------
# round trips: realistic requests and responses


def _batch(*values: bytes, compression: str = "none") -> bytes:
    builder = BatchBuilder(compression)
    for i, value in enumerate(values):
        builder.append(1_700_000_000_000 + i, f"k{i}".encode(), value, [("h", b"v")])
    return builder.build()


def test_produce_request_fast_path_carries_batches_byte_for_byte() -> None:
    batches = _batch(b"a", b"b") + _batch(b"c" * 1000, compression="zstd")
    request = produce_pb2.ProduceRequest(
        acks=-1,
        timeout_ms=30_000,
        topics=[
            produce_pb2.ProduceRequest.Topic(
                name="events",
                partitions=[
                    produce_pb2.ProduceRequest.Partition(partition=p, record_batches=batches)
                    for p in range(6)
                ],
            )
        ],
    )
    parsed = produce_pb2.ProduceRequest.FromString(request.SerializeToString())
    assert parsed == request
    assert not parsed.HasField("transactional_id")
    data = parsed.topics[0].partitions[5].record_batches
    assert data == batches
    assert len(validate_record_batches(data)) == 2
    assert [r.value for b in decode_batches(data) for r in b.records] == [b"a", b"b", b"c" * 1000]


def test_produce_request_structured_path() -> None:
    records = [
        common_pb2.Record(
            key=b"user-1",
            value=b'{"n": 1}',
            headers=[common_pb2.Header(key="trace", value=b"\x00\x01"), common_pb2.Header(key="k")],
            timestamp_ms=1_700_000_000_000,
        ),
        common_pb2.Record(value=None),  # null key, null value: a tombstone without a key
    ]
    request = produce_pb2.ProduceRequest(
        acks=1,
        transactional_id="tx-1",
        topics=[
            produce_pb2.ProduceRequest.Topic(
                name="t",
                partitions=[
                    produce_pb2.ProduceRequest.Partition(
                        partition=0,
                        records=records,
                        compression=common_pb2.COMPRESSION_TYPE_LZ4,
                    )
                ],
            )
        ],
    )
    parsed = produce_pb2.ProduceRequest.FromString(request.SerializeToString())
    assert parsed == request
    first, second = parsed.topics[0].partitions[0].records
    assert first.headers[1].key == "k" and not first.headers[1].HasField("value")
    assert not second.HasField("key") and not second.HasField("value")
    assert parsed.topics[0].partitions[0].record_batches == b""


def test_produce_response() -> None:
    response = produce_pb2.ProduceResponse(
        topics=[
            produce_pb2.ProduceResponse.Topic(
                name="events",
                partitions=[
                    produce_pb2.ProduceResponse.Partition(
                        partition=0, base_offset=1200, log_append_time_ms=-1, log_start_offset=0
                    ),
                    produce_pb2.ProduceResponse.Partition(
                        partition=1,
                        error_code=ErrorCode.INVALID_RECORD,
                        error_message="one bad record",
                        base_offset=-1,
                        log_append_time_ms=-1,
                        log_start_offset=-1,
                        record_errors=[
                            produce_pb2.ProduceResponse.RecordError(
                                batch_index=3, batch_index_error_message="null key, compacted"
                            )
                        ],
                    ),
                    produce_pb2.ProduceResponse.Partition(
                        partition=2,
                        error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        current_leader=common_pb2.LeaderIdAndEpoch(leader_id=2, leader_epoch=7),
                    ),
                ],
            )
        ]
    )
    parsed = produce_pb2.ProduceResponse.FromString(response.SerializeToString())
    assert parsed == response
    assert parsed.topics[0].partitions[2].current_leader.leader_epoch == 7
    assert not parsed.topics[0].partitions[0].HasField("current_leader")


def test_fetch_request_and_response() -> None:
    request = fetch_pb2.FetchRequest(
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=52_428_800,
        isolation_level=fetch_pb2.ISOLATION_LEVEL_READ_COMMITTED,
        structured=True,
        rack_id="rack-a",
        topics=[
            fetch_pb2.FetchRequest.Topic(
                name="events",
                partitions=[
                    fetch_pb2.FetchRequest.Partition(
                        partition=0,
                        fetch_offset=42,
                        partition_max_bytes=1_048_576,
                        current_leader_epoch=3,
                    )
                ],
            )
        ],
    )
    parsed_request = fetch_pb2.FetchRequest.FromString(request.SerializeToString())
    assert parsed_request == request
    assert not parsed_request.HasField("replica_id")  # a consumer
    follower = fetch_pb2.FetchRequest(replica_id=0, replica_epoch=12)
    assert fetch_pb2.FetchRequest.FromString(follower.SerializeToString()).HasField("replica_id")

    batches = _batch(b"x", b"y")
    response = fetch_pb2.FetchResponse(
        topics=[
            fetch_pb2.FetchResponse.Topic(
                name="events",
                partitions=[
                    fetch_pb2.FetchResponse.Partition(
                        partition=0,
                        high_watermark=44,
                        last_stable_offset=44,
                        log_start_offset=0,
                        preferred_read_replica=-1,
                        record_batches=batches,
                        aborted_transactions=[
                            fetch_pb2.FetchResponse.AbortedTransaction(
                                producer_id=9, first_offset=40
                            )
                        ],
                    ),
                    fetch_pb2.FetchResponse.Partition(
                        partition=1,
                        high_watermark=10,
                        records=[
                            common_pb2.Record(
                                offset=8,
                                key=b"k",
                                value=b"v",
                                timestamp_ms=5,
                                timestamp_type=common_pb2.TIMESTAMP_TYPE_LOG_APPEND_TIME,
                                leader_epoch=2,
                            )
                        ],
                    ),
                    fetch_pb2.FetchResponse.Partition(
                        partition=2,
                        error_code=ErrorCode.OFFSET_OUT_OF_RANGE,
                        error_message="offset 99 > log end offset 44",
                        high_watermark=-1,
                        last_stable_offset=-1,
                        log_start_offset=-1,
                    ),
                    fetch_pb2.FetchResponse.Partition(
                        partition=3,
                        diverging_epoch=common_pb2.EpochEndOffset(epoch=4, end_offset=30),
                    ),
                ],
            )
        ]
    )
    parsed = fetch_pb2.FetchResponse.FromString(response.SerializeToString())
    assert parsed == response
    assert parsed.topics[0].partitions[0].record_batches == batches
    assert parsed.topics[0].partitions[3].diverging_epoch.end_offset == 30


def test_list_offsets() -> None:
    request = fetch_pb2.ListOffsetsRequest(
        topics=[
            fetch_pb2.ListOffsetsRequest.Topic(
                name="t",
                partitions=[
                    fetch_pb2.ListOffsetsRequest.Partition(partition=0, timestamp_ms=-2),
                    fetch_pb2.ListOffsetsRequest.Partition(partition=1, timestamp_ms=-1),
                    fetch_pb2.ListOffsetsRequest.Partition(partition=2, timestamp_ms=-3),
                    fetch_pb2.ListOffsetsRequest.Partition(
                        partition=3, timestamp_ms=1_700_000_000_000
                    ),
                ],
            )
        ]
    )
    assert fetch_pb2.ListOffsetsRequest.FromString(request.SerializeToString()) == request
    response = fetch_pb2.ListOffsetsResponse(
        topics=[
            fetch_pb2.ListOffsetsResponse.Topic(
                name="t",
                partitions=[
                    fetch_pb2.ListOffsetsResponse.Partition(
                        partition=0, timestamp_ms=-1, offset=0, leader_epoch=0
                    ),
                    fetch_pb2.ListOffsetsResponse.Partition(
                        partition=3,
                        error_code=ErrorCode.FENCED_LEADER_EPOCH,
                        timestamp_ms=-1,
                        offset=-1,
                        leader_epoch=-1,
                    ),
                ],
            )
        ]
    )
    assert fetch_pb2.ListOffsetsResponse.FromString(response.SerializeToString()) == response


def test_metadata() -> None:
    request = metadata_pb2.MetadataRequest(topics=["a", "b"], allow_auto_topic_creation=True)
    assert metadata_pb2.MetadataRequest.FromString(request.SerializeToString()) == request
    response = metadata_pb2.MetadataResponse(
        cluster_id="MkU3OEVBNTcwNTJENDM2Qk",
        controller_id=1,
        brokers=[
            common_pb2.Node(node_id=1, host="localhost", port=9092),
            common_pb2.Node(node_id=2, host="b2", port=9092, rack="r2"),
        ],
        topics=[
            metadata_pb2.MetadataResponse.Topic(
                name="a",
                topic_id=bytes(range(16)),
                partitions=[
                    metadata_pb2.MetadataResponse.Partition(
                        partition=0,
                        leader_id=1,
                        leader_epoch=0,
                        replica_nodes=[1, 2],
                        isr_nodes=[1],
                        offline_replicas=[2],
                    )
                ],
            ),
            metadata_pb2.MetadataResponse.Topic(
                name="b", error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            ),
        ],
    )
    parsed = metadata_pb2.MetadataResponse.FromString(response.SerializeToString())
    assert parsed == response
    assert not parsed.brokers[0].HasField("rack")
    assert len(parsed.topics[0].topic_id) == 16


def test_admin() -> None:
    create = admin_pb2.CreateTopicsRequest(
        topics=[
            admin_pb2.CreateTopicsRequest.Topic(
                name="orders",
                num_partitions=6,
                replication_factor=1,
                configs={"retention.ms": "3600000", "cleanup.policy": "compact"},
            ),
            admin_pb2.CreateTopicsRequest.Topic(
                name="placed",
                assignments=[
                    admin_pb2.CreateTopicsRequest.ReplicaAssignment(partition=0, broker_ids=[1]),
                    admin_pb2.CreateTopicsRequest.ReplicaAssignment(partition=1, broker_ids=[1]),
                ],
            ),
        ],
        timeout_ms=30_000,
        validate_only=True,
    )
    parsed = admin_pb2.CreateTopicsRequest.FromString(create.SerializeToString())
    assert parsed == create
    assert dict(parsed.topics[0].configs) == {
        "retention.ms": "3600000",
        "cleanup.policy": "compact",
    }
    assert not parsed.topics[1].HasField("num_partitions")

    entry = admin_pb2.ConfigEntry(
        name="retention.ms",
        value="3600000",
        source=admin_pb2.CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG,
        synonyms=[
            admin_pb2.ConfigSynonym(
                name="retention.ms",
                value="3600000",
                source=admin_pb2.CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG,
            ),
            admin_pb2.ConfigSynonym(
                name="log.retention.hours",
                value="168",
                source=admin_pb2.CONFIG_SOURCE_DEFAULT_CONFIG,
            ),
        ],
        config_type=admin_pb2.CONFIG_TYPE_LONG,
    )
    describe = admin_pb2.DescribeConfigsResponse(
        results=[
            admin_pb2.DescribeConfigsResponse.Result(
                resource_type=common_pb2.CONFIG_RESOURCE_TYPE_TOPIC,
                resource_name="orders",
                configs=[entry, admin_pb2.ConfigEntry(name="sasl.jaas.config", is_sensitive=True)],
            )
        ]
    )
    parsed_describe = admin_pb2.DescribeConfigsResponse.FromString(describe.SerializeToString())
    assert parsed_describe == describe
    assert not parsed_describe.results[0].configs[1].HasField("value")

    alter = admin_pb2.AlterConfigsRequest(
        resources=[
            admin_pb2.AlterConfigsRequest.Resource(
                resource_type=common_pb2.CONFIG_RESOURCE_TYPE_TOPIC,
                resource_name="orders",
                configs=[
                    admin_pb2.AlterConfigsRequest.AlterableConfig(
                        name="retention.ms",
                        config_operation=admin_pb2.ALTER_CONFIG_OP_SET,
                        value="1000",
                    ),
                    admin_pb2.AlterConfigsRequest.AlterableConfig(
                        name="segment.bytes", config_operation=admin_pb2.ALTER_CONFIG_OP_DELETE
                    ),
                    admin_pb2.AlterConfigsRequest.AlterableConfig(
                        name="cleanup.policy",
                        config_operation=admin_pb2.ALTER_CONFIG_OP_APPEND,
                        value="delete",
                    ),
                ],
            )
        ],
    )
    assert admin_pb2.AlterConfigsRequest.FromString(alter.SerializeToString()) == alter
    # Kafka's AlterConfigOp.OpType ids and ConfigResource.Type ids.
    ops = ["SET", "DELETE", "APPEND", "SUBTRACT"]
    assert [admin_pb2.AlterConfigOp.Value(f"ALTER_CONFIG_OP_{op}") for op in ops] == [0, 1, 2, 3]
    assert common_pb2.CONFIG_RESOURCE_TYPE_TOPIC == 2
    assert common_pb2.CONFIG_RESOURCE_TYPE_BROKER == 4


def test_quorum_messages() -> None:
    vote = quorum_pb2.VoteRequest(
        cluster_id="c",
        voter_id=2,
        candidate_epoch=5,
        candidate_id=1,
        last_offset_epoch=4,
        last_offset=100,
        pre_vote=True,
    )
    assert quorum_pb2.VoteRequest.FromString(vote.SerializeToString()) == vote
    fetch = quorum_pb2.QuorumFetchResponse(
        current_leader=common_pb2.LeaderIdAndEpoch(leader_id=1, leader_epoch=5),
        high_watermark=90,
        snapshot_id=quorum_pb2.SnapshotId(end_offset=50, epoch=3),
    )
    parsed = quorum_pb2.QuorumFetchResponse.FromString(fetch.SerializeToString())
    assert parsed == fetch
    assert parsed.HasField("snapshot_id") and not parsed.HasField("diverging_epoch")

    registration = quorum_pb2.BrokerRegistrationRequest(
        cluster_id="c",
        broker_id=1,
        incarnation_id=bytes(16),
        listeners=[
            common_pb2.Endpoint(
                name="PLAINTEXT",
                host="localhost",
                port=9092,
                security_protocol=common_pb2.SECURITY_PROTOCOL_PLAINTEXT,
            )
        ],
        features=[
            common_pb2.FeatureRange(
                name="metadata.version", min_supported_version=1, max_supported_version=1
            )
        ],
        previous_broker_epoch=-1,
    )
    assert (
        quorum_pb2.BrokerRegistrationRequest.FromString(registration.SerializeToString())
        == registration
    )
    control = quorum_pb2.ControlRecord(
        leader_change=quorum_pb2.LeaderChangeMessage(leader_id=1, voters=[1], granting_voters=[1])
    )
    assert quorum_pb2.ControlRecord.FromString(control.SerializeToString()) == control


def test_metadata_record_envelopes() -> None:
    topic_id = bytes(range(16))
    records = [
        metadata_records_pb2.MetadataRecord(
            topic=metadata_records_pb2.TopicRecord(name="t", topic_id=topic_id)
        ),
        metadata_records_pb2.MetadataRecord(
            partition=metadata_records_pb2.PartitionRecord(
                partition_id=0, topic_id=topic_id, replicas=[1], isr=[1], leader=1
            )
        ),
        metadata_records_pb2.MetadataRecord(
            partition_change=metadata_records_pb2.PartitionChangeRecord(
                partition_id=0, topic_id=topic_id, leader=-1
            )
        ),
        metadata_records_pb2.MetadataRecord(
            config=metadata_records_pb2.ConfigRecord(
                resource_type=common_pb2.CONFIG_RESOURCE_TYPE_TOPIC,
                resource_name="t",
                name="retention.ms",
            )
        ),
        metadata_records_pb2.MetadataRecord(no_op=metadata_records_pb2.NoOpRecord()),
    ]
    kinds = []
    for record in records:
        parsed = metadata_records_pb2.MetadataRecord.FromString(record.SerializeToString())
        assert parsed == record
        kinds.append(parsed.WhichOneof("record"))
    assert kinds == ["topic", "partition", "partition_change", "config", "no_op"]
    assert not records[3].config.HasField("value")  # a delete
    assert records[2].partition_change.HasField("leader")  # -1: no leader, not "unchanged"
    # Every record type of the envelope is a *Record message of this file.
    oneof = metadata_records_pb2.MetadataRecord.DESCRIPTOR.oneofs_by_name["record"]
    assert {f.message_type.name for f in oneof.fields} == {
        "TopicRecord",
        "PartitionRecord",
        "PartitionChangeRecord",
        "ConfigRecord",
        "RemoveTopicRecord",
        "RegisterBrokerRecord",
        "UnregisterBrokerRecord",
        "FenceBrokerRecord",
        "UnfenceBrokerRecord",
        "BrokerRegistrationChangeRecord",
        "FeatureLevelRecord",
        "ProducerIdsRecord",
        "AccessControlEntryRecord",
        "RemoveAccessControlEntryRecord",
        "UserScramCredentialRecord",
        "RemoveUserScramCredentialRecord",
        "ClientQuotaRecord",
        "NoOpRecord",
    }


# ---------------------------------------------------------------------------------------------
# services


SERVICES = {
    "rillet.v1.ProduceService": ["Produce"],
    "rillet.v1.FetchService": ["Fetch", "ListOffsets"],
    "rillet.v1.MetadataService": ["Metadata"],
    "rillet.v1.AdminService": [
        "CreateTopics",
        "DeleteTopics",
        "CreatePartitions",
        "DescribeCluster",
        "DescribeConfigs",
        "AlterConfigs",
        "DescribeQuorum",
        "ElectLeaders",
        "DescribeLogDirs",
        "AlterPartitionReassignments",
        "ListPartitionReassignments",
        "CreateAcls",
        "DescribeAcls",
        "DeleteAcls",
        "DescribeUserScramCredentials",
        "AlterUserScramCredentials",
        "DescribeClientQuotas",
        "AlterClientQuotas",
    ],
    "rillet.v1.ControllerService": [
        "AlterPartition",
        "AllocateProducerIds",
        "CreateTopics",
        "DeleteTopics",
        "CreatePartitions",
        "AlterConfigs",
        "ElectLeaders",
        "AlterPartitionReassignments",
        "DescribeQuorum",
        "CreateAcls",
        "DeleteAcls",
        "AlterUserScramCredentials",
        "AlterClientQuotas",
    ],
    "rillet.v1.TransactionService": [
        "InitProducerId",
        "AddPartitionsToTxn",
        "AddOffsetsToTxn",
        "EndTxn",
        "WriteTxnMarkers",
        "DescribeTransactions",
        "ListTransactions",
        "DescribeProducers",
    ],
    "rillet.v1.SaslService": ["Authenticate"],
    "rillet.v1.QuorumService": [
        "Vote",
        "BeginQuorumEpoch",
        "EndQuorumEpoch",
        "Fetch",
        "FetchSnapshot",
        "BrokerRegistration",
        "BrokerHeartbeat",
        "DescribeQuorum",
    ],
}


def test_services_and_methods() -> None:
    found = {
        service.full_name: [m.name for m in service.methods]
        for module in FILES
        for service in module.DESCRIPTOR.services_by_name.values()
    }
    assert found == SERVICES
    for module in FILES:
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                # unary-unary, request and response named after the method
                assert not method.client_streaming and not method.server_streaming
                assert method.input_type.name.endswith(f"{method.name}Request")
                assert method.output_type.name.endswith(f"{method.name}Response")


class _Produce(produce_pb2_grpc.ProduceServiceServicer):
    async def Produce(
        self, request: produce_pb2.ProduceRequest, context: object
    ) -> produce_pb2.ProduceResponse:
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                n = len(validate_record_batches(p.record_batches)) if p.record_batches else 0
                error = error_to_wire(NotLeaderOrFollowerError("not me")) if p.partition else None
                partitions.append(
                    produce_pb2.ProduceResponse.Partition(
                        partition=p.partition,
                        base_offset=n if error is None else -1,
                        **(error._asdict() if error else {}),
                    )
                )
            topics.append(produce_pb2.ProduceResponse.Topic(name=topic.name, partitions=partitions))
        return produce_pb2.ProduceResponse(topics=topics)


def test_generated_service_over_a_real_channel() -> None:
    async def run() -> produce_pb2.ProduceResponse:
        server = grpc.aio.server()
        produce_pb2_grpc.add_ProduceServiceServicer_to_server(_Produce(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = produce_pb2_grpc.ProduceServiceStub(channel)
                return await stub.Produce(
                    produce_pb2.ProduceRequest(
                        acks=1,
                        topics=[
                            produce_pb2.ProduceRequest.Topic(
                                name="t",
                                partitions=[
                                    produce_pb2.ProduceRequest.Partition(
                                        partition=p, record_batches=_batch(b"a") + _batch(b"b")
                                    )
                                    for p in (0, 1)
                                ],
                            )
                        ],
                    ),
                    timeout=10,
                )
        finally:
            await server.stop(None)

    response = asyncio.run(run())
    ok, moved = response.topics[0].partitions
    assert (ok.error_code, ok.base_offset) == (ErrorCode.NONE, 2)
    error = error_from_wire(moved.error_code, moved.error_message)
    assert isinstance(error, NotLeaderOrFollowerError)
    # The other services' generated modules expose stubs and servicers too.
    for module, service in [
        (fetch_pb2_grpc, "FetchService"),
        (metadata_pb2_grpc, "MetadataService"),
        (admin_pb2_grpc, "AdminService"),
        (quorum_pb2_grpc, "QuorumService"),
    ]:
        assert hasattr(module, f"{service}Stub")
        assert hasattr(module, f"add_{service}Servicer_to_server")


# ---------------------------------------------------------------------------------------------
# conventions


def _snake_upper(name: str) -> str:
    return "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(name)).upper()


def test_enum_values_are_prefixed_with_their_enum_name() -> None:
    for module in FILES:
        for enum in module.DESCRIPTOR.enum_types_by_name.values():
            if enum.full_name == "rillet.v1.ErrorCode":
                continue  # Kafka's error names, bare: they are the contract
            prefix = _snake_upper(enum.name) + "_"
            for value in enum.values:
                assert value.name.startswith(prefix), value.name


# Fields named before this rule covered their file, which clients already read.
UNITLESS_TIMES = {"rillet.v1.DescribeProducersResponse.ProducerState.last_timestamp"}


def test_times_carry_their_unit() -> None:
    fd = _descriptor.FieldDescriptor
    for desc in MESSAGES:
        for field in desc.fields:
            if field.type in (fd.TYPE_INT32, fd.TYPE_INT64) and (
                "time" in field.name or "wait" in field.name
            ):
                name = f"{desc.full_name}.{field.name}"
                assert field.name.endswith("_ms") or name in UNITLESS_TIMES, name


# ---------------------------------------------------------------------------------------------
# generated code is up to date


def test_generated_code_is_up_to_date() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_proto.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
