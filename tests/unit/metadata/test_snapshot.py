"""Metadata snapshots (KIP-630): an image's records rebuild it exactly; a snapshot replacing
an image reports what changed and what went; the bytes are CRC-checked; the policy."""

from __future__ import annotations

import random
import uuid
from dataclasses import replace

import pytest

from rillet.errors import KafkaStorageError
from rillet.metadata.image import MetadataDelta, MetadataImage, PartitionChange
from rillet.metadata.records import (
    AccessControlEntryRecord,
    BrokerEndpoint,
    ClientQuotaRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from rillet.metadata.snapshot import (
    SnapshotPolicy,
    decode_snapshot,
    encode_snapshot,
    image_from_records,
    image_records,
)

# Client quota entities of every shape (a None name is the type's default).
QUOTA_ENTITIES = [
    (("user", "alice"),),
    (("user", None),),
    (("client-id", "app"),),
    (("client-id", None), ("user", None)),
    (("client-id", "app"), ("user", "alice")),
]
EP = (BrokerEndpoint("PLAINTEXT", "localhost", 9092), BrokerEndpoint("INTERNAL", "h", 1))


def random_history(seed: int, length: int = 300) -> list[MetadataRecord]:
    """A valid stream of every kind of record, as a controller could write it."""
    r = random.Random(seed)
    records: list[MetadataRecord] = []
    brokers: dict[int, int] = {}  # id -> epoch
    topics: dict[uuid.UUID, tuple[str, int]] = {}  # id -> (name, partitions)
    acls: list[uuid.UUID] = []
    names = 0
    kinds = ["broker", "fence", "topic", "remove", "change", "config", "feature", "acl", "scram",
             "quota"]  # fmt: skip
    for _ in range(length):
        kind = r.choice(kinds)
        if kind == "broker" or not brokers:
            b = r.randint(1, 5)
            brokers[b] = brokers.get(b, 0) + r.randint(1, 9)
            rack = r.choice([None, "a", "b"])
            records.append(
                RegisterBrokerRecord(b, uuid.UUID(int=r.getrandbits(128)), brokers[b], EP, rack)
            )
        elif kind == "fence":
            b = r.choice(sorted(brokers))
            choice = r.choice([FenceBrokerRecord, UnfenceBrokerRecord, UnregisterBrokerRecord])
            records.append(choice(b, brokers[b]))
            if choice is UnregisterBrokerRecord:
                del brokers[b]
        elif kind == "topic" or not topics:
            names += 1
            tid = uuid.UUID(int=r.getrandbits(128))
            n = r.randint(1, 3)
            topics[tid] = (f"t{names}", n)
            records.append(TopicRecord(f"t{names}", tid))
            for p in range(n):
                replicas = tuple(r.sample(range(1, 6), 3))
                records.append(PartitionRecord(tid, p, replicas, replicas[:2], replicas[0]))
        elif kind == "remove":
            tid = r.choice(sorted(topics))
            name, _ = topics.pop(tid)
            records.append(RemoveTopicRecord(tid))
            if r.random() < 0.5:
                # A new topic of the same name: another id.
                records.append(TopicRecord(name, new := uuid.UUID(int=r.getrandbits(128))))
                records.append(PartitionRecord(new, 0, (1,), (1,), 1))
                topics[new] = (name, 1)
        elif kind == "change":
            tid = r.choice(sorted(topics))
            p = r.randrange(topics[tid][1])
            adding = r.random() < 0.2
            records.append(
                PartitionChangeRecord(
                    tid,
                    p,
                    isr=r.choice([None, (1,), (2, 3)]),
                    leader=r.choice([None, -1, 1, 2]),
                    replicas=(1, 2, 3, 4) if adding else None,
                    adding_replicas=(4,) if adding else None,
                    removing_replicas=(1,) if adding else None,
                )
            )
        elif kind == "config":
            rtype = r.choice([ConfigResourceType.TOPIC, ConfigResourceType.BROKER])
            name = (
                topics[r.choice(sorted(topics))][0]
                if rtype == ConfigResourceType.TOPIC
                else r.choice(["", "1"])
            )
            key = r.choice(["retention.ms", "cleanup.policy", "min.insync.replicas"])
            records.append(ConfigRecord(rtype, name, key, r.choice([None, "1", "2"])))
        elif kind == "acl":
            if acls and r.random() < 0.4:
                records.append(RemoveAccessControlEntryRecord(acls.pop(r.randrange(len(acls)))))
            else:
                acls.append(acl_id := uuid.UUID(int=r.getrandbits(128)))
                acl = AccessControlEntryRecord(
                    acl_id,
                    2,
                    f"t{r.randint(1, 9)}",
                    r.choice([3, 4]),
                    r.choice(["User:a", "User:*"]),
                    "*",
                    r.randint(2, 12),
                    r.choice([2, 3]),
                )
                records.append(acl)
        elif kind == "scram":
            user, mechanism = r.choice(["alice", "bob"]), r.choice([1, 2])
            if r.random() < 0.3:
                records.append(RemoveUserScramCredentialRecord(user, mechanism))
            else:
                salt = r.randbytes(16)
                records.append(
                    UserScramCredentialRecord(user, mechanism, salt, salt[::-1], salt * 2, 4096)
                )
        elif kind == "quota":
            entity = r.choice(QUOTA_ENTITIES)
            key = r.choice(["producer_byte_rate", "consumer_byte_rate"])
            value = None if r.random() < 0.3 else float(r.randint(1, 10**7))
            records.append(ClientQuotaRecord(entity, key, value))
        else:
            records.append(FeatureLevelRecord(r.choice(["metadata.version", "x"]), r.randint(0, 3)))
    return records


def replayed(records: list[MetadataRecord]) -> MetadataImage:
    return MetadataImage().replay(enumerate(records))


@pytest.mark.parametrize("seed", range(30))
def test_an_images_records_rebuild_it(seed: int) -> None:
    image = replayed(random_history(seed))
    rebuilt, _ = image_from_records(image_records(image), image.offset + 1)
    assert rebuilt == image
    # Through the bytes too, in batches.
    data = encode_snapshot(image, now_ms=1)
    assert decode_snapshot(data) == image_records(image)
    assert image_from_records(decode_snapshot(data), image.offset + 1)[0] == image


def test_a_snapshot_image_stands_at_its_last_offset() -> None:
    image = replayed(random_history(1, 20))
    rebuilt, _ = image_from_records(image_records(image), 1000)
    assert rebuilt.offset == 999 and replace(rebuilt, offset=image.offset) == image


def test_a_snapshot_replacing_an_image_reports_what_changed_and_what_went() -> None:
    history = random_history(7, 200)
    old = replayed(history[:120])
    new = replayed(history)
    _, delta = image_from_records(image_records(new), new.offset + 1, before=old)
    # The same partition changes as replaying the records between the two images.
    expected = {
        (c.topic_id, c.partition): (c.before, c.after)
        for c in _replay_changes(old, history[120:], first_offset=120)
    }
    got = {(c.topic_id, c.partition): (c.before, c.after) for c in delta.partition_changes()}
    assert got == expected
    assert delta.apply() == new
    gone = {t.name for t in old.topics()} - {t.name for t in new.topics()}
    assert set(delta.removed_topics()) >= gone


def _replay_changes(
    image: MetadataImage, records: list[MetadataRecord], first_offset: int
) -> list[PartitionChange]:
    delta = MetadataDelta(image)
    for i, record in enumerate(records):
        delta.replay(first_offset + i, record)
    # Net changes only: a partition created and removed within the records is no change.
    return [c for c in delta.partition_changes() if c.before != c.after]


def test_a_corrupt_snapshot_is_refused() -> None:
    data = bytearray(encode_snapshot(replayed(random_history(2, 30)), now_ms=1))
    data[len(data) // 2] ^= 0xFF
    with pytest.raises(KafkaStorageError, match="corrupt metadata snapshot"):
        decode_snapshot(bytes(data))
    with pytest.raises(KafkaStorageError):
        decode_snapshot(bytes(data[:-3]))


def test_policy_is_due_by_bytes_or_by_time() -> None:
    policy = SnapshotPolicy(max_bytes=100, max_interval_ms=1000)
    assert not policy.due(0)
    policy.record_applied(60, now_ms=10)
    assert not policy.due(500)
    policy.record_applied(40, now_ms=20)
    assert policy.due(21)
    policy.reset()
    policy.record_applied(1, now_ms=2000)
    assert not policy.due(2999) and policy.due(3000)
    # 0 turns the time rule off.
    never = SnapshotPolicy(max_bytes=100, max_interval_ms=0)
    never.record_applied(1, now_ms=0)
    assert not never.due(10**9)
