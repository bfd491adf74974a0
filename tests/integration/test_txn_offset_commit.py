"""Transactional offset commits against an in-process broker (the real server, gRPC, logs):
TxnOffsetCommit with a producer id from InitProducerId writes a transactional batch to
__consumer_offsets whose offsets stay pending (OffsetFetch with require_stable answers
UNSTABLE_OFFSET_COMMIT) until the group coordinator appends the producer's COMMIT or ABORT
marker (``GroupCoordinator.complete_transaction``, as WriteTxnMarkers does), and a restarted
broker rebuilds the same offsets, pending ones included, from the log."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar

import grpc
import pytest

from rillet.broker.group_coordinator import OFFSETS_TOPIC, GroupCoordinator
from rillet.errors import (
    InvalidProducerEpochError,
    KafkaError,
    NotCoordinatorError,
    TransactionCoordinatorFencedError,
    UnstableOffsetCommitError,
)
from rillet.protocol.gen.v1 import group_pb2, group_pb2_grpc, transaction_pb2_grpc
from rillet.protocol.group import (
    offset_commit_request_to_pb,
    offset_fetch_request_to_pb,
    offset_fetch_response_from_pb,
    partition_errors_from_pb,
    read_txn_offset_commit_response,
    txn_offset_commit_request,
)
from rillet.protocol.transaction import init_producer_id_request, read_init_producer_id_response
from rillet.types import OffsetAndMetadata, TopicPartition
from tests.support.mini_broker import MiniBroker

T = TypeVar("T")
SETTINGS = {"offsets.topic.num.partitions": "1"}
GROUP = "g"
OFFSETS_TP = TopicPartition(OFFSETS_TOPIC, 0)
T0, T1, T2 = (TopicPartition("t", p) for p in range(3))


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[MiniBroker]:
    b = MiniBroker(tmp_path / "data", {"t": 3}, SETTINGS)
    yield b
    if not b.loop.is_closed():  # a test that restarts the broker closed it already
        b.close()


class Client:
    """A transactional producer's and a consumer's calls to the group's coordinator."""

    def __init__(self, broker: MiniBroker) -> None:
        self.broker = broker
        self.channel = grpc.insecure_channel(broker.bootstrap)
        self.groups = group_pb2_grpc.GroupServiceStub(self.channel)
        self.txns = transaction_pb2_grpc.TransactionServiceStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    @property
    def coordinator(self) -> GroupCoordinator:
        groups = self.broker.server.groups
        assert groups is not None
        return groups

    def wait_for_coordinator(self) -> None:
        """FindCoordinator until the group's partition is led and loaded."""
        retry(lambda: self._find())

    def _find(self) -> None:
        request = group_pb2.FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP])
        (found,) = self.groups.FindCoordinator(request, timeout=10).coordinators
        assert found.error_code == 0 and found.node_id >= 0, found
        assert 0 in self.coordinator.coordinated_groups()

    def init_producer_id(self) -> tuple[int, int]:
        return retry(
            lambda: read_init_producer_id_response(
                self.txns.InitProducerId(init_producer_id_request(None), timeout=10)
            )
        )

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        request = offset_commit_request_to_pb(
            GROUP, {tp: OffsetAndMetadata(o, "") for tp, o in offsets.items()}
        )
        errors = partition_errors_from_pb(self.groups.OffsetCommit(request, timeout=10).topics)
        assert set(errors.values()) == {None}, errors

    def txn_commit(
        self, producer: tuple[int, int], offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, KafkaError | None]:
        request = txn_offset_commit_request(
            "txn",
            producer[0],
            producer[1],
            GROUP,
            {tp: OffsetAndMetadata(o, "m") for tp, o in offsets.items()},
        )
        return read_txn_offset_commit_response(self.groups.TxnOffsetCommit(request, timeout=10))

    def fetch(self, *, require_stable: bool) -> dict[TopicPartition, int | str]:
        request = offset_fetch_request_to_pb(GROUP, [T0, T1, T2], require_stable=require_stable)
        (group,) = self.groups.OffsetFetch(request, timeout=10).groups
        assert group.error_code == 0, group
        found, errors = offset_fetch_response_from_pb(group)
        out: dict[TopicPartition, int | str] = {tp: o.offset for tp, o in found.items()}
        out.update({tp: e.name for tp, e in errors.items()})
        return out

    def complete(self, producer: tuple[int, int], committed: bool) -> KafkaError | None:
        result: KafkaError | None = self.broker._call(
            self.coordinator.complete_transaction(
                OFFSETS_TP, producer[0], producer[1], 0, committed
            )
        )
        return result


def retry(call: Callable[[], T], timeout: float = 30) -> T:
    """``call()``, again while it fails with an assertion or a Kafka error."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except (AssertionError, KafkaError):
            if time.monotonic() > deadline:
                raise
        time.sleep(0.05)


UNSTABLE = UnstableOffsetCommitError.name


def test_txn_offsets_are_pending_until_the_marker_and_survive_a_restart(
    broker: MiniBroker, tmp_path: Path
) -> None:
    client = Client(broker)
    client.wait_for_coordinator()
    producer = client.init_producer_id()
    client.commit({T0: 5})

    assert client.txn_commit(producer, {T0: 10, T1: 11}) == {T0: None, T1: None}
    assert client.fetch(require_stable=True) == {T0: UNSTABLE, T1: UNSTABLE}
    assert client.fetch(require_stable=False) == {T0: 5}
    assert client.complete(producer, True) is None
    assert client.fetch(require_stable=True) == {T0: 10, T1: 11}

    # The next transaction aborts: nothing of it counts.
    assert client.txn_commit(producer, {T0: 20}) == {T0: None}
    assert client.complete(producer, False) is None
    assert client.fetch(require_stable=True) == {T0: 10, T1: 11}

    # A third one is still open when the broker stops.
    assert client.txn_commit(producer, {T2: 7}) == {T2: None}
    client.close()
    broker.close()

    again = MiniBroker(tmp_path / "data", {}, SETTINGS)
    try:
        client = Client(again)
        client.wait_for_coordinator()
        assert client.fetch(require_stable=True) == {T0: 10, T1: 11, T2: UNSTABLE}
        assert client.complete(producer, True) is None
        assert client.fetch(require_stable=True) == {T0: 10, T1: 11, T2: 7}
        client.close()
    finally:
        again.close()


def test_a_fenced_producer_epoch_is_refused_and_leaves_nothing_pending(
    broker: MiniBroker,
) -> None:
    client = Client(broker)
    client.wait_for_coordinator()
    pid, epoch = client.init_producer_id()
    # The transaction coordinator fenced the producer: its marker comes with the next epoch.
    assert client.txn_commit((pid, epoch), {T0: 10}) == {T0: None}
    assert client.complete((pid, epoch + 1), False) is None
    # The zombie's commit, and a marker with its old epoch, are refused by the log.
    errors = client.txn_commit((pid, epoch), {T0: 30})
    assert isinstance(errors[T0], InvalidProducerEpochError), errors
    assert isinstance(client.complete((pid, epoch), True), InvalidProducerEpochError)
    assert client.fetch(require_stable=True) == {}
    # The coordinator stayed loaded and serves the producer's new epoch.
    assert client.txn_commit((pid, epoch + 1), {T0: 40}) == {T0: None}
    assert client.complete((pid, epoch + 1), True) is None
    assert client.fetch(require_stable=True) == {T0: 40}
    client.close()


def test_markers_are_checked_by_the_log_and_a_refused_one_changes_nothing(
    broker: MiniBroker,
) -> None:
    client = Client(broker)
    client.wait_for_coordinator()
    pid, epoch = client.init_producer_id()
    client.commit({T0: 5})
    coordinator = client.coordinator

    def complete(producer_epoch: int, coordinator_epoch: int) -> KafkaError | None:
        result: KafkaError | None = broker._call(
            coordinator.complete_transaction(
                OFFSETS_TP, pid, producer_epoch, coordinator_epoch, True
            )
        )
        return result

    # A marker for a producer with nothing pending here is written all the same.
    log = broker.log(OFFSETS_TOPIC, 0)
    end = log.log_end_offset
    assert complete(epoch, 3) is None
    assert log.log_end_offset == end + 1
    # An older transaction coordinator, or an older producer epoch, is refused.
    fenced = complete(epoch, 2)
    assert isinstance(fenced, TransactionCoordinatorFencedError), fenced
    assert log.log_end_offset == end + 1
    # The coordinator stayed loaded and answers as before.
    assert 0 in coordinator.coordinated_groups()
    assert client.fetch(require_stable=True) == {T0: 5}
    assert complete(epoch + 1, 3) is None
    assert isinstance(complete(epoch, 3), InvalidProducerEpochError)
    # Not this broker's partition (another index of a topic with one).
    elsewhere = TopicPartition(OFFSETS_TOPIC, 1)
    assert isinstance(
        broker._call(coordinator.complete_transaction(elsewhere, pid, epoch + 1, 3, True)),
        NotCoordinatorError,
    )
    client.close()
