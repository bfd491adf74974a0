"""Consumer groups against an in-process broker (the real server, real gRPC, real logs): the
KIP-848 protocol end to end, committed offsets in __consumer_offsets, and the errors a
misbehaving member gets."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import grpc
import pytest

from rillet import Consumer, Producer, TopicPartition
from rillet.client.consumer.listener import ConsumerRebalanceListener
from rillet.errors import IllegalStateError
from rillet.protocol.gen.v1 import common_pb2, group_pb2, group_pb2_grpc
from rillet.types import OffsetAndMetadata
from tests.support.mini_broker import MiniBroker

GROUP_SETTINGS = {
    "group.consumer.heartbeat.interval.ms": "200",
    "group.consumer.session.timeout.ms": "3000",
    "offsets.topic.num.partitions": "4",
}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[MiniBroker]:
    b = MiniBroker(tmp_path / "data", {"t": 6}, GROUP_SETTINGS)
    yield b
    b.close()


def produce(broker: MiniBroker, n: int, start: int = 0) -> None:
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=1) as p:
        for i in range(start, start + n):
            p.send("t", value=b"%d" % i, key=b"k%d" % i)


class Recorder(ConsumerRebalanceListener):
    """Keeps the member's own log of assignments and revocations, with a shared clock of
    events so that ownership can be checked across members."""

    def __init__(self, name: str, events: list[tuple[int, str, str, TopicPartition]]) -> None:
        self.name = name
        self.events = events

    def on_partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        for tp in assigned:
            self.events.append((len(self.events), self.name, "assign", tp))

    def on_partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        for tp in revoked:
            self.events.append((len(self.events), self.name, "revoke", tp))


class Member(threading.Thread):
    """A consumer in group ``g`` polling until stopped, recording what it read."""

    def __init__(
        self, broker: MiniBroker, name: str, events: list[tuple[int, str, str, TopicPartition]]
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.broker = broker
        self.records: list[tuple[int, int, bytes]] = []
        self.listener = Recorder(name, events)
        self.halt = threading.Event()
        self.error: BaseException | None = None
        self.consumer = Consumer(
            bootstrap_servers=broker.bootstrap,
            group_id="g",
            client_id=name,
            auto_offset_reset="earliest",
            auto_commit_interval_ms=200,
        )
        self.consumer.subscribe(["t"], listener=self.listener)

    def run(self) -> None:
        try:
            while not self.halt.is_set():
                for tp, recs in self.consumer.poll(timeout_ms=100).items():
                    self.records.extend((tp.partition, r.offset, r.value) for r in recs)
            self.consumer.close()
        except BaseException as e:
            self.error = e

    def stop(self) -> None:
        self.halt.set()
        self.join(30)
        assert self.error is None, self.error


def wait_for(check: object, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def check_one_owner(events: list[tuple[int, str, str, TopicPartition]]) -> None:
    """From the members' own logs: a partition is assigned to a member only after the one
    before it revoked it."""
    owner: dict[TopicPartition, str] = {}
    for _, name, what, tp in sorted(events):
        if what == "assign":
            assert tp not in owner, f"{tp} given to {name} while {owner.get(tp)} owns it"
            owner[tp] = name
        else:
            assert owner.pop(tp, None) == name, f"{name} revoked {tp} it did not own"


def test_members_share_partitions_and_every_record_is_read_once(broker: MiniBroker) -> None:
    events: list[tuple[int, str, str, TopicPartition]] = []
    produce(broker, 300)
    a = Member(broker, "a", events)
    a.start()
    wait_for(lambda: len(a.consumer.assignment()) == 6)
    b = Member(broker, "b", events)
    b.start()
    wait_for(lambda: len(a.consumer.assignment()) == 3 and len(b.consumer.assignment()) == 3)
    kept = set(a.consumer.assignment())
    before = len(a.records)
    produce(broker, 300, start=300)
    c = Member(broker, "c", events)
    c.start()
    wait_for(lambda: all(len(m.consumer.assignment()) == 2 for m in (a, b, c)))
    # The members whose partitions stayed kept theirs (no stop-the-world rebalance).
    assert set(a.consumer.assignment()) <= kept
    wait_for(lambda: sum(len(m.records) for m in (a, b, c)) >= 600)
    assert len(a.records) > before
    b.stop()  # leaves the group: its partitions go to the others
    wait_for(lambda: len(a.consumer.assignment()) + len(c.consumer.assignment()) == 6)
    produce(broker, 300, start=600)
    wait_for(lambda: sum(len(m.records) for m in (a, b, c)) >= 900)
    a.stop()
    c.stop()
    read = [r for m in (a, b, c) for r in m.records]
    assert sorted(int(v) for _, _, v in read) == list(range(900))  # each once
    check_one_owner(events)


def test_a_restarted_member_resumes_from_the_committed_offsets(broker: MiniBroker) -> None:
    produce(broker, 120)
    first = Consumer("t", bootstrap_servers=broker.bootstrap, group_id="g",
                     auto_offset_reset="earliest", enable_auto_commit=False)  # fmt: skip
    got: list[int] = []
    wait_for(lambda: got.extend(
        int(r.value) for rs in first.poll(timeout_ms=100).values() for r in rs
    ) or len(got) >= 120)  # fmt: skip
    first.commit()
    committed = {p: first.committed(TopicPartition("t", p)) for p in range(6)}
    assert sum(committed.values()) == 120
    first.close()
    produce(broker, 30, start=120)
    second = Consumer("t", bootstrap_servers=broker.bootstrap, group_id="g",
                      auto_offset_reset="earliest")  # fmt: skip
    more: list[int] = []
    wait_for(lambda: more.extend(
        int(r.value) for rs in second.poll(timeout_ms=100).values() for r in rs
    ) or len(more) >= 30)  # fmt: skip
    second.close()
    assert sorted(more) == list(range(120, 150))


def test_commit_and_committed_with_metadata(broker: MiniBroker) -> None:
    with Consumer(bootstrap_servers=broker.bootstrap, group_id="manual") as c:
        tp = TopicPartition("t", 2)
        c.assign([tp])
        c.commit({tp: OffsetAndMetadata(7, "seen", None)})
        assert c.committed(tp) == 7
        assert c.committed(tp, metadata=True) == OffsetAndMetadata(7, "seen", None)
        assert c.committed(TopicPartition("t", 3)) is None
        called: list[object] = []
        c.commit_async({tp: OffsetAndMetadata(9)}, lambda offsets, err: called.append(err))
        wait_for(lambda: c.poll(timeout_ms=50) is not None and called)
        assert called == [None] and c.committed(tp) == 9


def test_group_apis_need_a_group_id(broker: MiniBroker) -> None:
    with Consumer(bootstrap_servers=broker.bootstrap) as c:
        c.assign([TopicPartition("t", 0)])
        with pytest.raises(IllegalStateError, match=r"group\.id"):
            c.commit()


def _stub(broker: MiniBroker) -> group_pb2_grpc.GroupServiceStub:
    return group_pb2_grpc.GroupServiceStub(grpc.insecure_channel(broker.bootstrap))


def _heartbeat(
    stub: group_pb2_grpc.GroupServiceStub, **fields: object
) -> group_pb2.ConsumerGroupHeartbeatResponse:
    request = group_pb2.ConsumerGroupHeartbeatRequest(group_id="raw", **fields)  # type: ignore[arg-type]
    deadline = time.monotonic() + 30
    while True:
        response = stub.ConsumerGroupHeartbeat(request, timeout=10)
        # The first requests find __consumer_offsets still being created and loaded.
        if response.error_code not in (14, 15, 16) or time.monotonic() > deadline:
            return response
        time.sleep(0.1)


def test_a_fenced_or_unknown_member_gets_kafkas_errors(broker: MiniBroker) -> None:
    stub = _stub(broker)
    found = stub.FindCoordinator(group_pb2.FindCoordinatorRequest(coordinator_keys=["raw"]))
    wait_for(lambda: stub.FindCoordinator(
        group_pb2.FindCoordinatorRequest(coordinator_keys=["raw"])
    ).coordinators[0].error_code == 0)  # fmt: skip
    assert found.coordinators[0].key == "raw"
    joined = _heartbeat(
        stub,
        member_id="m-1",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=group_pb2.ConsumerGroupHeartbeatRequest.TopicNames(names=["t"]),
        topic_partitions=group_pb2.ConsumerGroupHeartbeatRequest.OwnedPartitions(),
    )
    assert joined.error_code == 0 and joined.member_epoch >= 1
    assert len(joined.assignment.topic_partitions[0].partitions) == 6
    stale = _heartbeat(stub, member_id="m-1", member_epoch=joined.member_epoch + 5)
    assert common_pb2.ErrorCode.Name(stale.error_code) == "FENCED_MEMBER_EPOCH"
    unknown = _heartbeat(stub, member_id="nobody", member_epoch=3)
    assert common_pb2.ErrorCode.Name(unknown.error_code) == "UNKNOWN_MEMBER_ID"
    # A commit that names no member, while the group has one, is refused.
    commit = stub.OffsetCommit(
        group_pb2.OffsetCommitRequest(
            group_id="raw",
            generation_id_or_member_epoch=-1,
            topics=[group_pb2.OffsetCommitRequest.Topic(
                name="t", partitions=[group_pb2.OffsetCommitRequest.Partition(
                    partition_index=0, committed_offset=1)])],
        )
    )  # fmt: skip
    assert commit.topics[0].partitions[0].error_code != 0
    deleted = stub.DeleteGroups(group_pb2.DeleteGroupsRequest(groups_names=["raw", "absent"]))
    errors = {r.group_id: common_pb2.ErrorCode.Name(r.error_code) for r in deleted.results}
    assert errors == {"raw": "NON_EMPTY_GROUP", "absent": "GROUP_ID_NOT_FOUND"}


@pytest.mark.parametrize("strategy", [("range",), ("cooperative-sticky",)])
def test_the_classic_protocol_shares_partitions_too(
    broker: MiniBroker, strategy: tuple[str, ...]
) -> None:
    """``group_protocol="classic"``: JoinGroup/SyncGroup with the leader assigning
    (EAGER with range, COOPERATIVE with cooperative-sticky)."""
    produce(broker, 120)
    events: list[tuple[int, str, str, TopicPartition]] = []

    def member(name: str) -> Consumer:
        c = Consumer(bootstrap_servers=broker.bootstrap, group_id="classic", client_id=name,
                     group_protocol="classic", partition_assignment_strategy=strategy,
                     auto_offset_reset="earliest", heartbeat_interval_ms=200,
                     auto_commit_interval_ms=200)  # fmt: skip
        c.subscribe(["t"], listener=Recorder(name, events))
        return c

    first = member("first")
    got: list[int] = []
    wait_for(lambda: got.extend(
        int(r.value) for rs in first.poll(timeout_ms=100).values() for r in rs
    ) or len(got) >= 60)  # fmt: skip
    second = member("second")
    done = threading.Event()

    def poll_second() -> None:
        while not done.is_set():
            for rs in second.poll(timeout_ms=100).values():
                got.extend(int(r.value) for r in rs)

    t = threading.Thread(target=poll_second, daemon=True)
    t.start()
    wait_for(lambda: first.poll(timeout_ms=100) is not None and len(first.assignment()) == 3
             and len(second.assignment()) == 3)  # fmt: skip
    produce(broker, 60, start=120)
    wait_for(lambda: got.extend(
        int(r.value) for rs in first.poll(timeout_ms=100).values() for r in rs
    ) or len(set(got)) >= 180)  # fmt: skip
    done.set()
    t.join(10)
    assert set(first.assignment()).isdisjoint(second.assignment())
    first.close()
    second.close()
    assert sorted(set(got)) == list(range(180))
    check_one_owner(events)
