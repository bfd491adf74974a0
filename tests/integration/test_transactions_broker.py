"""Transactions against a real ``rillet server start`` process, over raw gRPC (no client
library): FindCoordinator(TRANSACTION), InitProducerId, AddPartitionsToTxn, a transactional
Produce, EndTxn, and the COMMIT/ABORT markers that end up in the partition's log; fencing,
Kafka's errors, KIP-890 verification, the timeout abort, and a coordinator killed with -9
that keeps its committed state and completes its Prepare* transactions once back."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest

from rillet import BatchBuilder, decode_batches
from rillet.coordinator.end_txn_marker import COMMIT
from rillet.errors import KafkaError, error_for_code
from rillet.protocol.gen.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    common_pb2,
    fetch_pb2,
    fetch_pb2_grpc,
    group_pb2,
    group_pb2_grpc,
    produce_pb2,
    produce_pb2_grpc,
    transaction_pb2,
    transaction_pb2_grpc,
)
from tests.support.server_process import ServerProcess

pytestmark = pytest.mark.slow

T = TypeVar("T")

SETTINGS = {
    "transaction.state.log.num.partitions": "3",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
    "num.partitions": "2",
}


class TxnServer(ServerProcess):
    def argv(self) -> list[str]:
        extra = [a for k, v in SETTINGS.items() for a in ("--override", f"{k}={v}")]
        return [*super().argv(), *extra]


def error_name(code: int) -> str:
    return "NONE" if code == 0 else error_for_code(code).__name__


def retrying(call: Callable[[], T], ok: Callable[[T], bool], timeout: float = 30) -> T:
    """``call()`` until ``ok`` holds of its answer (retriable errors, markers on their way)."""
    deadline = time.monotonic() + timeout
    while True:
        answer = call()
        if ok(answer) or time.monotonic() > deadline:
            return answer
        time.sleep(0.05)


class Client:
    """The requests of a transactional producer, spelled out."""

    def __init__(self, bootstrap: str) -> None:
        self.channel = grpc.insecure_channel(bootstrap)
        self.txn = transaction_pb2_grpc.TransactionServiceStub(self.channel)
        self.groups = group_pb2_grpc.GroupServiceStub(self.channel)
        self.produce_stub = produce_pb2_grpc.ProduceServiceStub(self.channel)
        self.fetch_stub = fetch_pb2_grpc.FetchServiceStub(self.channel)
        self.admin = admin_pb2_grpc.AdminServiceStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def find_coordinator(self, tid: str) -> Any:
        request = group_pb2.FindCoordinatorRequest(key_type=1, coordinator_keys=[tid])
        (found,) = retrying(
            lambda: self.groups.FindCoordinator(request, timeout=10).coordinators,
            lambda cs: cs[0].error_code == 0,
        )
        return found

    def init(self, tid: str, timeout_ms: int = 60_000) -> Any:
        request = transaction_pb2.InitProducerIdRequest(
            transactional_id=tid,
            transaction_timeout_ms=timeout_ms,
            producer_id=-1,
            producer_epoch=-1,
        )
        return retrying(
            lambda: self.txn.InitProducerId(request, timeout=10),
            lambda r: error_name(r.error_code) not in _RETRIABLE,
        )

    def add(self, tid: str, pid: int, epoch: int, topic: str, *partitions: int) -> dict[int, str]:
        request = transaction_pb2.AddPartitionsToTxnRequest(
            transactions=[
                transaction_pb2.AddPartitionsToTxnRequest.Transaction(
                    transactional_id=tid,
                    producer_id=pid,
                    producer_epoch=epoch,
                    topics=[transaction_pb2.TxnTopic(name=topic, partitions=partitions)],
                )
            ]
        )
        response = self.txn.AddPartitionsToTxn(request, timeout=10)
        assert response.error_code == 0, response.error_message
        return {
            p.partition: error_name(p.error_code) for p in response.results[0].topics[0].partitions
        }

    def end(self, tid: str, pid: int, epoch: int, committed: bool) -> str:
        request = transaction_pb2.EndTxnRequest(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=committed
        )
        response = retrying(
            lambda: self.txn.EndTxn(request, timeout=10),
            lambda r: error_name(r.error_code) not in _RETRIABLE,
        )
        return error_name(response.error_code)

    def produce(
        self,
        tid: str | None,
        pid: int,
        epoch: int,
        topic: str,
        partition: int,
        seq: int = 0,
        acks: int = -1,
    ) -> str:
        batch = BatchBuilder(
            producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
        )
        batch.append(int(time.time() * 1000), None, b"value-%d" % seq)
        request = produce_pb2.ProduceRequest(acks=acks, timeout_ms=10_000)
        if tid is not None:
            request.transactional_id = tid
        request.topics.add(name=topic).partitions.add(
            partition=partition, record_batches=batch.build()
        )
        (part,) = self.produce_stub.Produce(request, timeout=10).topics[0].partitions
        return error_name(part.error_code)

    def batches(self, topic: str, partition: int) -> list[tuple[str, int, int]]:
        """Each batch of the partition (below its high watermark): ("data" or the marker's
        COMMIT/ABORT, producer id, producer epoch)."""
        request = fetch_pb2.FetchRequest()
        request.topics.add(name=topic).partitions.add(partition=partition, fetch_offset=0)
        (p,) = self.fetch_stub.Fetch(request, timeout=10).topics[0].partitions
        assert p.error_code == common_pb2.NONE, p.error_message
        out = []
        for b in decode_batches(p.record_batches):
            kind = "data"
            if b.is_control:
                key = b.records[0].key
                assert key is not None
                kind = "COMMIT" if int.from_bytes(key[2:4], "big") == COMMIT else "ABORT"
            out.append((kind, b.producer_id, b.producer_epoch))
        return out

    def describe(self, tid: str) -> Any:
        request = transaction_pb2.DescribeTransactionsRequest(transactional_ids=[tid])
        (state,) = self.txn.DescribeTransactions(request, timeout=10).transaction_states
        return state

    def set_topic_config(self, topic: str, key: str, value: str) -> None:
        request = admin_pb2.AlterConfigsRequest(
            resources=[
                admin_pb2.AlterConfigsRequest.Resource(
                    resource_type=common_pb2.CONFIG_RESOURCE_TYPE_TOPIC,
                    resource_name=topic,
                    configs=[admin_pb2.AlterConfigsRequest.AlterableConfig(name=key, value=value)],
                )
            ]
        )
        (result,) = self.admin.AlterConfigs(request, timeout=10).results
        assert result.error_code == 0, result.error_message


_RETRIABLE = frozenset(
    {
        "CoordinatorNotAvailableError",
        "CoordinatorLoadInProgressError",
        "NotCoordinatorError",
        "ConcurrentTransactionsError",
    }
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TxnServer]:
    s = TxnServer(tmp_path_factory.mktemp("txn") / "data")
    s.start()
    s.create_topic("t", 2)
    yield s
    s.kill()


@pytest.fixture
def client(server: TxnServer) -> Iterator[Client]:
    c = Client(server.bootstrap)
    yield c
    c.close()


def begin(client: Client, tid: str, topic: str, *partitions: int) -> tuple[int, int]:
    """A new producer of ``tid`` with ``partitions`` of ``topic`` in its transaction."""
    assert client.find_coordinator(tid).node_id == 1
    init = client.init(tid)
    assert error_name(init.error_code) == "NONE", init.error_message
    assert client.add(
        tid, init.producer_id, init.producer_epoch, topic, *partitions
    ) == dict.fromkeys(partitions, "NONE")
    return init.producer_id, init.producer_epoch


def markers_of(client: Client, topic: str, partition: int, pid: int) -> list[tuple[str, int]]:
    return [(k, e) for k, p, e in client.batches(topic, partition) if p == pid and k != "data"]


def test_commit_and_abort_end_with_markers(client: Client) -> None:
    pid, epoch = begin(client, "commit-1", "t", 0, 1)
    assert client.produce("commit-1", pid, epoch, "t", 0) == "NONE"
    assert client.produce("commit-1", pid, epoch, "t", 1) == "NONE"
    assert client.describe("commit-1").transaction_state == "Ongoing"
    assert client.end("commit-1", pid, epoch, committed=True) == "NONE"
    for partition in (0, 1):
        found = retrying(
            lambda p=partition: markers_of(client, "t", p, pid),  # type: ignore[misc]
            lambda ms: bool(ms),
        )
        assert found == [("COMMIT", epoch)]
        assert client.batches("t", partition)[-1] == ("COMMIT", pid, epoch)
    done = retrying(
        lambda: client.describe("commit-1"), lambda s: s.transaction_state == "CompleteCommit"
    )
    assert done.transaction_state == "CompleteCommit"

    # The next transaction of the same producer aborts.
    assert client.add("commit-1", pid, epoch, "t", 0) == {0: "NONE"}
    assert client.produce("commit-1", pid, epoch, "t", 0, seq=1) == "NONE"
    assert client.end("commit-1", pid, epoch, committed=False) == "NONE"
    aborted = retrying(lambda: markers_of(client, "t", 0, pid), lambda ms: len(ms) == 2)
    assert aborted == [("COMMIT", epoch), ("ABORT", epoch)]
    listed = client.txn.ListTransactions(
        transaction_pb2.ListTransactionsRequest(state_filters=["CompleteAbort", "Nope"]),
        timeout=10,
    )
    assert list(listed.unknown_state_filters) == ["Nope"]
    assert "commit-1" in [t.transactional_id for t in listed.transaction_states]
    producers = client.txn.DescribeProducers(
        transaction_pb2.DescribeProducersRequest(
            topics=[transaction_pb2.TxnTopic(name="t", partitions=[0])]
        ),
        timeout=10,
    )
    (active,) = [
        p for p in producers.topics[0].partitions[0].active_producers if p.producer_id == pid
    ]
    assert (active.producer_epoch, active.last_sequence, active.current_txn_start_offset) == (
        epoch,
        1,
        -1,
    )


def test_a_second_instance_fences_the_first(client: Client) -> None:
    pid, epoch = begin(client, "fenced-1", "t", 0)
    assert client.produce("fenced-1", pid, epoch, "t", 0) == "NONE"
    # The new instance aborts the first's transaction (CONCURRENT_TRANSACTIONS, retried)...
    second = client.init("fenced-1")
    assert error_name(second.error_code) == "NONE"
    assert (second.producer_id, second.producer_epoch) == (pid, epoch + 2)
    assert markers_of(client, "t", 0, pid) == [("ABORT", epoch + 1)]
    # ... and the first is fenced wherever it goes next.
    assert client.end("fenced-1", pid, epoch, committed=True) == "ProducerFencedError"
    assert client.add("fenced-1", pid, epoch, "t", 1) == {1: "ProducerFencedError"}
    assert client.produce("fenced-1", pid, epoch, "t", 1) == "InvalidProducerEpochError"
    assert client.produce("fenced-1", pid, epoch, "t", 0, seq=1) == "InvalidProducerEpochError"


def test_kafka_errors(client: Client) -> None:
    pid, epoch = begin(client, "errors-1", "t", 0)
    assert client.end("errors-1", pid, epoch, committed=False) == "NONE"
    retrying(lambda: client.describe("errors-1"), lambda s: s.transaction_state == "CompleteAbort")
    # EndTxn with no transaction (a new producer's, or the other outcome of the last one),
    # and for an id the coordinator does not know.
    fresh = client.init("errors-2")
    assert client.end("errors-2", fresh.producer_id, 0, committed=True) == "InvalidTxnStateError"
    assert client.end("errors-1", pid, epoch, committed=True) == "InvalidTxnStateError"
    assert client.end("errors-1", pid, epoch, committed=False) == "NONE"  # a retry
    client.find_coordinator("never-seen")
    assert client.end("never-seen", 12345, 0, committed=True) == "InvalidProducerIdMappingError"
    # A partition that does not exist fails the whole request.
    request = transaction_pb2.AddPartitionsToTxnRequest(
        transactions=[
            transaction_pb2.AddPartitionsToTxnRequest.Transaction(
                transactional_id="errors-1",
                producer_id=pid,
                producer_epoch=epoch,
                topics=[
                    transaction_pb2.TxnTopic(name="t", partitions=[0]),
                    transaction_pb2.TxnTopic(name="nope", partitions=[0]),
                ],
            )
        ]
    )
    (result,) = client.txn.AddPartitionsToTxn(request, timeout=10).results
    assert {t.name: error_name(t.partitions[0].error_code) for t in result.topics} == {
        "t": "OperationNotAttemptedError",
        "nope": "UnknownTopicOrPartitionError",
    }
    # Bad InitProducerId requests.
    bad_timeout = client.init("errors-1", timeout_ms=-5)
    assert error_name(bad_timeout.error_code) == "InvalidTransactionTimeoutError"
    too_long = client.init("errors-1", timeout_ms=900_001)
    assert error_name(too_long.error_code) == "InvalidTransactionTimeoutError"
    empty = client.init("")
    assert error_name(empty.error_code) == "InvalidRequestError"
    # A transactional write to a partition not added: KIP-890 refuses it.
    assert client.add("errors-1", pid, epoch, "t", 0) == {0: "NONE"}
    assert client.produce("errors-1", pid, epoch, "t", 1) == "TransactionAbortableError"
    assert all(p != pid for _, p, _ in client.batches("t", 1))


def test_a_transaction_left_open_is_aborted(client: Client) -> None:
    assert client.find_coordinator("slow-1").node_id == 1
    init = client.init("slow-1", timeout_ms=1000)
    pid, epoch = init.producer_id, init.producer_epoch
    assert client.add("slow-1", pid, epoch, "t", 1) == {1: "NONE"}
    assert client.produce("slow-1", pid, epoch, "t", 1) == "NONE"
    found = retrying(lambda: markers_of(client, "t", 1, pid), lambda ms: bool(ms), timeout=15)
    assert found == [("ABORT", epoch + 1)]
    assert client.end("slow-1", pid, epoch, committed=True) == "ProducerFencedError"


def test_a_killed_coordinator_keeps_its_state_and_completes_prepared_transactions(
    tmp_path: Path,
) -> None:
    server = TxnServer(tmp_path / "data")
    server.start()
    client = Client(server.bootstrap)
    try:
        server.create_topic("t", 1)
        # On "stuck", min.insync.replicas is 2 with one broker: acks=1 data is written, but a
        # marker (always acks=all) is refused until the setting goes back down.
        server.create_topic("stuck", 1, **{"min.insync.replicas": "2"})
        pid, epoch = begin(client, "kept-1", "t", 0)
        assert client.produce("kept-1", pid, epoch, "t", 0) == "NONE"
        assert client.end("kept-1", pid, epoch, committed=True) == "NONE"
        retrying(
            lambda: client.describe("kept-1"), lambda s: s.transaction_state == "CompleteCommit"
        )
        spid, sepoch = begin(client, "stuck-1", "stuck", 0)
        assert client.produce("stuck-1", spid, sepoch, "stuck", 0, acks=1) == "NONE"
        assert client.end("stuck-1", spid, sepoch, committed=True) == "NONE"
        time.sleep(0.5)
        assert client.describe("stuck-1").transaction_state == "PrepareCommit"

        server.kill()
        client.close()
        server.start()
        client = Client(server.bootstrap)
        kept = retrying(lambda: client.describe("kept-1"), lambda s: s.error_code == 0)
        assert (kept.transaction_state, kept.producer_id, kept.producer_epoch) == (
            "CompleteCommit",
            pid,
            epoch,
        )
        assert markers_of(client, "t", 0, pid) == [("COMMIT", epoch)]
        stuck = retrying(lambda: client.describe("stuck-1"), lambda s: s.error_code == 0)
        assert stuck.transaction_state == "PrepareCommit"
        # The new process resends the marker; it lands once the partition can take it.
        client.set_topic_config("stuck", "min.insync.replicas", "1")
        done = retrying(
            lambda: client.describe("stuck-1"), lambda s: s.transaction_state == "CompleteCommit"
        )
        assert done.transaction_state == "CompleteCommit"
        assert client.batches("stuck", 0)[-1] == ("COMMIT", spid, sepoch)
        # The same transactional id goes on with the same producer id, the next epoch.
        again = client.init("kept-1")
        assert (again.producer_id, again.producer_epoch) == (pid, epoch + 1)
    finally:
        client.close()
        server.kill()


def test_unknown_coordinator_key_types_are_refused(client: Client) -> None:
    request = group_pb2.FindCoordinatorRequest(key_type=2, coordinator_keys=["x"])
    (found,) = client.groups.FindCoordinator(request, timeout=10).coordinators
    assert error_name(found.error_code) == "InvalidRequestError"
    assert isinstance(error_for_code(found.error_code)(""), KafkaError)


def test_offsets_in_a_transaction_end_with_the_group_coordinators_marker(client: Client) -> None:
    request = group_pb2.FindCoordinatorRequest(key_type=0, coordinator_keys=["g-1"])
    retrying(
        lambda: client.groups.FindCoordinator(request, timeout=10).coordinators,
        lambda cs: cs[0].error_code == 0,
    )
    pid, epoch = begin(client, "offsets-1", "t", 0)
    offsets = transaction_pb2.AddOffsetsToTxnRequest(
        transactional_id="offsets-1", producer_id=pid, producer_epoch=epoch, group_id="g-1"
    )
    added = retrying(
        lambda: client.txn.AddOffsetsToTxn(offsets, timeout=10),
        lambda r: error_name(r.error_code) not in _RETRIABLE,
    )
    assert error_name(added.error_code) == "NONE", added.error_message
    described = client.describe("offsets-1")
    (offsets_topic,) = [t for t in described.topics if t.name == "__consumer_offsets"]
    assert client.end("offsets-1", pid, epoch, committed=True) == "NONE"
    done = retrying(
        lambda: client.describe("offsets-1"), lambda s: s.transaction_state == "CompleteCommit"
    )
    assert done.transaction_state == "CompleteCommit"
    (partition,) = offsets_topic.partitions
    assert markers_of(client, "__consumer_offsets", partition, pid) == [("COMMIT", epoch)]
