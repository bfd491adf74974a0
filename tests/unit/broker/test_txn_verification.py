"""KIP-890 part 1 on partition leaders (broker/txn_verification.py): which produce requests
are verified, the coordinator's answers as produce errors (Kafka 4.0's), requests batched
per coordinator, and the verification guard a marker removes."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rillet import BatchBuilder, errors
from rillet.broker.apis import BrokerApis
from rillet.broker.producer_id_manager import InitProducerIdRequest as BrokerInit
from rillet.broker.transaction_coordinator import TRANSACTION_STATE_TOPIC
from rillet.broker.txn_broker_clients import TxnMarkerEntry
from rillet.broker.txn_verification import transactional_producers
from rillet.config import BrokerConfig
from rillet.coordinator.end_txn_marker import end_txn_marker_batch
from rillet.coordinator.transaction import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    partition_for,
)
from rillet.storage.log_manager import LogManager
from rillet.types import TopicPartition
from tests.unit.broker.txn_world import T0, T1, TxnWorld

TID = "tx"


@pytest.fixture
async def world(log_manager: LogManager) -> AsyncIterator[TxnWorld]:
    w = TxnWorld(log_manager, replicas=(1, 2))
    await w.replicate(2)
    yield w
    await w.close()


def apis(w: TxnWorld, tmp_path: Path) -> BrokerApis:
    config = BrokerConfig.embedded_default(tmp_path)
    return BrokerApis(
        config,
        str(uuid.uuid4()),
        w.rm,
        lambda: w.image,
        None,
        txn_verifier=w.verifier,  # type: ignore[arg-type]
    )


async def started(w: TxnWorld, *tps: TopicPartition) -> tuple[int, int]:
    """A producer of ``tx`` with its transaction started on ``tps``."""
    await w.loaded()
    t = asyncio.create_task(w.coordinator.init_producer_id(BrokerInit(TID, 60_000)))
    while not t.done():
        await w.replicate(2)
        await asyncio.sleep(0.002)
    pid, epoch = t.result().producer_id, t.result().producer_epoch
    if tps:
        add = asyncio.create_task(
            w.coordinator.add_partitions_to_txn([AddPartitionsToTxnRequest(TID, pid, epoch, tps)])
        )
        while not add.done():
            await w.replicate(2)
            await asyncio.sleep(0.002)
        assert add.result()[0].error is None
    return pid, epoch


def test_the_producers_of_a_request_are_read_from_batch_headers() -> None:
    plain = BatchBuilder()
    plain.append(1, None, b"x")
    idempotent = BatchBuilder(producer_id=3, producer_epoch=0, base_sequence=0)
    idempotent.append(1, None, b"x")
    txn = BatchBuilder(producer_id=4, producer_epoch=2, base_sequence=0, is_transactional=True)
    txn.append(1, None, b"x")
    first = plain.build()
    data = first + idempotent.build() + txn.build() + end_txn_marker_batch(5, 0, 0, True, 1)
    assert transactional_producers(data) == {(4, 2)}
    assert transactional_producers(first) == set()
    assert transactional_producers(b"garbage") == set()


async def test_the_first_write_to_a_partition_is_verified(world: TxnWorld, tmp_path: Path) -> None:
    api = apis(world, tmp_path)
    pid, epoch = await started(world, T0)
    asked: list[AddPartitionsToTxnRequest] = []
    local = world.coordinator.add_partitions_to_txn

    async def counting(
        requests: list[AddPartitionsToTxnRequest],
    ) -> list[AddPartitionsToTxnResponse]:
        asked.extend(requests)
        return await local(requests)

    world.verifier.local = counting  # type: ignore[assignment]
    entries = [("t", 0, world.produce_batch(pid, epoch)), ("t", 1, world.produce_batch(pid, epoch))]
    r0, r1 = await api.handle_produce(entries, 1, 1000, TID)
    assert r0.error is None and r0.base_offset == 0
    # t-1 was never added: the producer must abort (Kafka 4.0: TRANSACTION_ABORTABLE).
    assert isinstance(r1.error, errors.TransactionAbortableError)
    assert world.rm.partitions[T1].log.log_end_offset == 0
    (request,) = asked
    assert request.verify_only and request.partitions == (T0, T1)
    # The transaction is ongoing on t-0 now: its next write is not verified.
    (r,) = await api.handle_produce(
        [("t", 0, world.produce_batch(pid, epoch, seq=1))], 1, 1000, TID
    )
    assert r.error is None and len(asked) == 1
    # Without a transactional id nothing is verified (Kafka skips it too).
    (r,) = await api.handle_produce([("t", 1, world.produce_batch(pid, epoch))], 1, 1000)
    assert r.error is None and len(asked) == 1
    assert len(world.verifier.guards) == 0


async def test_fenced_and_mixed_producers(world: TxnWorld, tmp_path: Path) -> None:
    api = apis(world, tmp_path)
    pid, epoch = await started(world, T0, T1)
    (r,) = await api.handle_produce([("t", 0, world.produce_batch(pid, epoch - 1))], 1, 1000, TID)
    assert isinstance(r.error, errors.InvalidProducerEpochError)  # PRODUCER_FENCED, mapped
    (r,) = await api.handle_produce([("t", 0, world.produce_batch(pid + 1, 0))], 1, 1000, TID)
    assert isinstance(r.error, errors.InvalidProducerIdMappingError)
    two = [("t", 0, world.produce_batch(pid, epoch)), ("t", 1, world.produce_batch(pid + 1, 0))]
    assert [type(r.error) for r in await api.handle_produce(two, 1, 1000, TID)] == [
        errors.InvalidProducerIdMappingError
    ] * 2
    assert world.rm.partitions[T0].log.log_end_offset == 0


async def test_a_marker_during_verification_refuses_the_write(
    world: TxnWorld, tmp_path: Path
) -> None:
    api = apis(world, tmp_path)
    pid, epoch = await started(world, T0)
    gate = asyncio.Event()
    local = world.coordinator.add_partitions_to_txn

    async def slow(requests: list[AddPartitionsToTxnRequest]) -> list[AddPartitionsToTxnResponse]:
        answer = await local(requests)
        await gate.wait()
        return answer

    world.verifier.local = slow  # type: ignore[assignment]
    produce = asyncio.create_task(
        api.handle_produce([("t", 0, world.produce_batch(pid, epoch))], 1, 1000, TID)
    )
    await asyncio.sleep(0.01)
    assert len(world.verifier.guards) == 1
    # The coordinator aborts meanwhile (say, a timeout): its marker reaches t-0 first.
    written = asyncio.create_task(
        world.writer.write_txn_markers([TxnMarkerEntry(pid, epoch, 0, False, (T0,))])
    )
    await asyncio.sleep(0.01)
    await world.replicate(2)
    assert await written == [{T0: None}]
    gate.set()
    (r,) = await produce
    assert isinstance(r.error, errors.InvalidTxnStateError)
    assert [b.is_control for b in world.batches(T0)] == [True]  # no data after the marker


async def test_verifications_are_batched_per_remote_coordinator(world: TxnWorld) -> None:
    world.move_leader(TRANSACTION_STATE_TOPIC, 0, 2)
    client = world._connect(2, "")
    gate = asyncio.Event()
    client.gate = gate
    verify = world.verifier.verify_transaction

    def request(tid: str, epoch: int = 0, tp: TopicPartition = T0) -> AddPartitionsToTxnRequest:
        return AddPartitionsToTxnRequest(tid, 7, epoch, (tp,), verify_only=True)

    first = asyncio.create_task(verify(request("a")))
    await asyncio.sleep(0.01)
    b = asyncio.create_task(verify(request("b")))
    c_old = asyncio.create_task(verify(request("c", 1)))
    await asyncio.sleep(0.01)
    # A newer epoch of c fences the one waiting; an older one is fenced at once.
    c_new = asyncio.create_task(verify(request("c", 2)))
    stale = await verify(request("c", 0))
    assert isinstance(stale[T0], errors.InvalidProducerEpochError)
    await asyncio.sleep(0.01)
    assert isinstance((await c_old)[T0], errors.InvalidProducerEpochError)
    # Another produce request of b's producer (gRPC serves them concurrently, so it is not
    # a retry) joins the entry waiting: one entry with both partitions, both answered.
    b_other = asyncio.create_task(verify(request("b", tp=T1)))
    await asyncio.sleep(0.01)
    assert not b.done()
    gate.set()
    assert await first == {} and await b == {} and await b_other == {} and await c_new == {}
    assert [[r.transactional_id for r in sent] for sent in client.verifications] == [
        ["a"],
        ["b", "c"],
    ]
    assert client.verifications[1][0].partitions == (T0, T1)
    assert all(r.verify_only for sent in client.verifications for r in sent)


async def test_coordinator_errors_as_produce_errors(world: TxnWorld, tmp_path: Path) -> None:
    api = apis(world, tmp_path)
    world.move_leader(TRANSACTION_STATE_TOPIC, 0, 2)
    client = world._connect(2, "")
    assert partition_for(TID, 1) == 0

    def answer(error: errors.KafkaError) -> None:
        client.verify_answer = lambda rs: [
            AddPartitionsToTxnResponse(r.transactional_id, dict.fromkeys(r.partitions, error))
            for r in rs
        ]

    batch = [("t", 0, world.produce_batch(9, 0))]
    answer(errors.ConcurrentTransactionsError("busy"))
    (r,) = await api.handle_produce(batch, 1, 1000, TID)
    assert isinstance(r.error, errors.NotEnoughReplicasError) and "CONCURRENT" in r.error.message
    answer(errors.InvalidTxnStateError("no"))
    (r,) = await api.handle_produce(batch, 1, 1000, TID)
    assert isinstance(r.error, errors.InvalidTxnStateError)
    assert r.error.message == "Partition was not added to the transaction"

    def lost(rs: object) -> list[AddPartitionsToTxnResponse]:
        raise errors.NetworkError("reset")

    client.verify_answer = lost  # type: ignore[assignment]
    (r,) = await api.handle_produce(batch, 1, 1000, TID)
    assert isinstance(r.error, errors.NotEnoughReplicasError) and "NETWORK" in r.error.message
    world.move_leader(TRANSACTION_STATE_TOPIC, 0, -1)
    (r,) = await api.handle_produce(batch, 1, 1000, TID)
    assert isinstance(r.error, errors.NotEnoughReplicasError)
    assert "COORDINATOR_NOT_AVAILABLE" in r.error.message
    assert world.rm.partitions[T0].log.log_end_offset == 0
    # Turned off: nothing is asked.
    world.verifier.enabled = False
    (r,) = await api.handle_produce(batch, 1, 1000, TID)
    assert r.error is None


async def test_a_failed_verification_leaves_a_concurrent_ones_guard(
    world: TxnWorld, tmp_path: Path
) -> None:
    """Two produce requests of one producer to one partition are verified at once (gRPC
    serves them concurrently). The first is refused (the previous transaction was still
    completing) and the second passes: the second is appended, since the first's failure
    does not take the guard they share."""
    api = apis(world, tmp_path)
    pid, epoch = await started(world, T0)
    local = world.coordinator.add_partitions_to_txn
    gates = [asyncio.Event(), asyncio.Event()]
    calls = 0

    async def answer(
        requests: list[AddPartitionsToTxnRequest],
    ) -> list[AddPartitionsToTxnResponse]:
        nonlocal calls
        call, calls = calls, calls + 1
        await gates[call].wait()
        if call == 0:
            busy = errors.ConcurrentTransactionsError("busy")
            return [
                AddPartitionsToTxnResponse(r.transactional_id, dict.fromkeys(r.partitions, busy))
                for r in requests
            ]
        return await local(requests)

    world.verifier.local = answer  # type: ignore[assignment]
    batch = [("t", 0, world.produce_batch(pid, epoch))]
    first = asyncio.create_task(api.handle_produce(batch, 1, 1000, TID))
    second = asyncio.create_task(api.handle_produce(batch, 1, 1000, TID))
    await asyncio.sleep(0.01)
    assert calls == 2 and len(world.verifier.guards) == 1
    gates[0].set()
    (r1,) = await first
    assert isinstance(r1.error, errors.NotEnoughReplicasError)  # retriable
    gates[1].set()
    while not second.done():
        await world.replicate(2)
        await asyncio.sleep(0.002)
    (r2,) = second.result()
    assert r2.error is None and r2.base_offset == 0
    assert len(world.verifier.guards) == 0
