"""Metadata records on the wire and in the ``__cluster_metadata`` log: each record is one
serialized ``rillet.v1.MetadataRecord`` envelope (``proto/rillet/v1/metadata_records.proto``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from google.protobuf.message import DecodeError

from rillet.errors import CorruptRecordError
from rillet.metadata.records import (
    AccessControlEntryRecord,
    BrokerEndpoint,
    ClientQuotaRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from rillet.protocol.gen.v1 import common_pb2, quota_pb2
from rillet.protocol.gen.v1 import metadata_records_pb2 as pb
from rillet.raft.log import Entry

__all__ = ["decode_entries", "decode_record", "encode_record"]

_PROTOCOLS = {
    "PLAINTEXT": common_pb2.SECURITY_PROTOCOL_PLAINTEXT,
    "SSL": common_pb2.SECURITY_PROTOCOL_SSL,
    "SASL_PLAINTEXT": common_pb2.SECURITY_PROTOCOL_SASL_PLAINTEXT,
    "SASL_SSL": common_pb2.SECURITY_PROTOCOL_SASL_SSL,
}
_PROTOCOL_NAMES = {v: k for k, v in _PROTOCOLS.items()}


def _ids(ids: tuple[int, ...] | None) -> pb.BrokerIds | None:
    return None if ids is None else pb.BrokerIds(ids=ids)


def encode_record(record: MetadataRecord) -> bytes:
    """One record as the bytes of a ``MetadataRecord`` envelope."""
    m = pb.MetadataRecord()
    match record:
        case TopicRecord():
            m.topic.CopyFrom(pb.TopicRecord(name=record.name, topic_id=record.topic_id.bytes))
        case PartitionRecord():
            m.partition.CopyFrom(
                pb.PartitionRecord(
                    partition_id=record.partition_id,
                    topic_id=record.topic_id.bytes,
                    replicas=record.replicas,
                    isr=record.isr,
                    leader=record.leader,
                    leader_epoch=record.leader_epoch,
                    partition_epoch=record.partition_epoch,
                    removing_replicas=record.removing_replicas,
                    adding_replicas=record.adding_replicas,
                    eligible_leader_replicas=record.elr,
                )
            )
        case PartitionChangeRecord():
            change = pb.PartitionChangeRecord(
                partition_id=record.partition_id,
                topic_id=record.topic_id.bytes,
                isr=_ids(record.isr),
                replicas=_ids(record.replicas),
                removing_replicas=_ids(record.removing_replicas),
                adding_replicas=_ids(record.adding_replicas),
                eligible_leader_replicas=_ids(record.elr),
            )
            if record.leader is not None:
                change.leader = record.leader
            m.partition_change.CopyFrom(change)
        case ConfigRecord():
            config = pb.ConfigRecord(
                resource_type=int(record.resource_type),  # type: ignore[arg-type]
                resource_name=record.resource_name,
                name=record.name,
            )
            if record.value is not None:
                config.value = record.value
            m.config.CopyFrom(config)
        case RemoveTopicRecord():
            m.remove_topic.CopyFrom(pb.RemoveTopicRecord(topic_id=record.topic_id.bytes))
        case RegisterBrokerRecord():
            reg = pb.RegisterBrokerRecord(
                broker_id=record.broker_id,
                incarnation_id=record.incarnation_id.bytes,
                broker_epoch=record.broker_epoch,
                endpoints=[
                    common_pb2.Endpoint(
                        name=e.name,
                        host=e.host,
                        port=e.port,
                        security_protocol=_PROTOCOLS[e.security_protocol],
                    )
                    for e in record.endpoints
                ],
                fenced=record.fenced,
            )
            if record.rack is not None:
                reg.rack = record.rack
            m.register_broker.CopyFrom(reg)
        case UnregisterBrokerRecord():
            m.unregister_broker.CopyFrom(
                pb.UnregisterBrokerRecord(
                    broker_id=record.broker_id, broker_epoch=record.broker_epoch
                )
            )
        case FenceBrokerRecord():
            m.fence_broker.CopyFrom(
                pb.FenceBrokerRecord(broker_id=record.broker_id, broker_epoch=record.broker_epoch)
            )
        case UnfenceBrokerRecord():
            m.unfence_broker.CopyFrom(
                pb.UnfenceBrokerRecord(broker_id=record.broker_id, broker_epoch=record.broker_epoch)
            )
        case FeatureLevelRecord():
            m.feature_level.CopyFrom(
                pb.FeatureLevelRecord(name=record.name, feature_level=record.feature_level)
            )
        case ProducerIdsRecord():
            m.producer_ids.CopyFrom(
                pb.ProducerIdsRecord(
                    broker_id=record.broker_id,
                    broker_epoch=record.broker_epoch,
                    next_producer_id=record.next_producer_id,
                )
            )
        case AccessControlEntryRecord():
            m.access_control_entry.CopyFrom(
                pb.AccessControlEntryRecord(
                    id=record.id.bytes,
                    resource_type=record.resource_type,
                    resource_name=record.resource_name,
                    pattern_type=record.pattern_type,
                    principal=record.principal,
                    host=record.host,
                    operation=record.operation,
                    permission_type=record.permission_type,
                )
            )
        case RemoveAccessControlEntryRecord():
            m.remove_access_control_entry.CopyFrom(
                pb.RemoveAccessControlEntryRecord(id=record.id.bytes)
            )
        case UserScramCredentialRecord():
            m.user_scram_credential.CopyFrom(
                pb.UserScramCredentialRecord(
                    name=record.name,
                    mechanism=record.mechanism,
                    salt=record.salt,
                    stored_key=record.stored_key,
                    server_key=record.server_key,
                    iterations=record.iterations,
                )
            )
        case RemoveUserScramCredentialRecord():
            m.remove_user_scram_credential.CopyFrom(
                pb.RemoveUserScramCredentialRecord(name=record.name, mechanism=record.mechanism)
            )
        case ClientQuotaRecord():
            quota = m.client_quota
            quota.key = record.key
            quota.value = record.value or 0.0
            quota.remove = record.value is None
            for kind, name in record.entity:
                quota.entity.add(entity_type=kind, entity_name=name or "", default=name is None)
        case NoOpRecord():
            m.no_op.CopyFrom(pb.NoOpRecord())
    return m.SerializeToString()


def _uuid(raw: bytes) -> uuid.UUID:
    if len(raw) != 16:
        raise CorruptRecordError(f"a metadata record holds a {len(raw)}-byte UUID")
    return uuid.UUID(bytes=raw)


def decode_record(data: bytes) -> MetadataRecord:
    """Parse one ``MetadataRecord`` envelope; malformed bytes are CORRUPT_MESSAGE."""
    m = pb.MetadataRecord()
    try:
        m.ParseFromString(data)
    except DecodeError as e:
        raise CorruptRecordError(f"malformed metadata record: {e}") from None
    kind = m.WhichOneof("record")
    if kind == "topic":
        return TopicRecord(m.topic.name, _uuid(m.topic.topic_id))
    if kind == "partition":
        p = m.partition
        return PartitionRecord(
            _uuid(p.topic_id),
            p.partition_id,
            tuple(p.replicas),
            tuple(p.isr),
            p.leader,
            p.leader_epoch,
            p.partition_epoch,
            tuple(p.removing_replicas),
            tuple(p.adding_replicas),
            tuple(p.eligible_leader_replicas),
        )
    if kind == "partition_change":
        c = m.partition_change
        return PartitionChangeRecord(
            _uuid(c.topic_id),
            c.partition_id,
            isr=tuple(c.isr.ids) if c.HasField("isr") else None,
            leader=c.leader if c.HasField("leader") else None,
            replicas=tuple(c.replicas.ids) if c.HasField("replicas") else None,
            removing_replicas=(
                tuple(c.removing_replicas.ids) if c.HasField("removing_replicas") else None
            ),
            adding_replicas=tuple(c.adding_replicas.ids) if c.HasField("adding_replicas") else None,
            elr=(
                tuple(c.eligible_leader_replicas.ids)
                if c.HasField("eligible_leader_replicas")
                else None
            ),
        )
    if kind == "config":
        cfg = m.config
        try:
            rtype = ConfigResourceType(cfg.resource_type)
        except ValueError:
            raise CorruptRecordError(f"unknown config resource type {cfg.resource_type}") from None
        value = cfg.value if cfg.HasField("value") else None
        return ConfigRecord(rtype, cfg.resource_name, cfg.name, value)
    if kind == "remove_topic":
        return RemoveTopicRecord(_uuid(m.remove_topic.topic_id))
    if kind == "register_broker":
        r = m.register_broker
        endpoints = tuple(
            BrokerEndpoint(
                e.name, e.host, e.port, _PROTOCOL_NAMES.get(e.security_protocol, "PLAINTEXT")
            )
            for e in r.endpoints
        )
        rack = r.rack if r.HasField("rack") else None
        return RegisterBrokerRecord(
            r.broker_id, _uuid(r.incarnation_id), r.broker_epoch, endpoints, rack, r.fenced
        )
    if kind == "unregister_broker":
        u = m.unregister_broker
        return UnregisterBrokerRecord(u.broker_id, u.broker_epoch)
    if kind == "fence_broker":
        return FenceBrokerRecord(m.fence_broker.broker_id, m.fence_broker.broker_epoch)
    if kind == "unfence_broker":
        return UnfenceBrokerRecord(m.unfence_broker.broker_id, m.unfence_broker.broker_epoch)
    if kind == "feature_level":
        return FeatureLevelRecord(m.feature_level.name, m.feature_level.feature_level)
    if kind == "producer_ids":
        ids = m.producer_ids
        return ProducerIdsRecord(ids.broker_id, ids.broker_epoch, ids.next_producer_id)
    if kind == "access_control_entry":
        acl = m.access_control_entry
        return AccessControlEntryRecord(
            _uuid(acl.id),
            acl.resource_type,
            acl.resource_name,
            acl.pattern_type,
            acl.principal,
            acl.host,
            acl.operation,
            acl.permission_type,
        )
    if kind == "remove_access_control_entry":
        return RemoveAccessControlEntryRecord(_uuid(m.remove_access_control_entry.id))
    if kind == "user_scram_credential":
        cred = m.user_scram_credential
        return UserScramCredentialRecord(
            cred.name, cred.mechanism, cred.salt, cred.stored_key, cred.server_key, cred.iterations
        )
    if kind == "remove_user_scram_credential":
        removed = m.remove_user_scram_credential
        return RemoveUserScramCredentialRecord(removed.name, removed.mechanism)
    if kind == "client_quota":
        return _client_quota(m.client_quota)
    if kind == "no_op":
        return NoOpRecord()
    raise CorruptRecordError(f"unsupported metadata record type {kind!r}")


def _client_quota(quota: pb.ClientQuotaRecord) -> ClientQuotaRecord:
    entity = tuple(_component(c) for c in quota.entity)
    return ClientQuotaRecord(entity, quota.key, None if quota.remove else quota.value)


def _component(c: quota_pb2.QuotaEntityComponent) -> tuple[str, str | None]:
    return c.entity_type, None if c.default else c.entity_name


def decode_entries(entries: Sequence[Entry]) -> list[tuple[int, MetadataRecord]]:
    """The metadata records of committed quorum entries, with their offsets (control
    entries are the quorum's own and carry none)."""
    return [(e.offset, decode_record(e.payload)) for e in entries if not e.control]
