"""The transaction coordinator's driver over real logs (broker/transaction_coordinator.py):
loading on leadership, answers after the high watermark, markers after the decision is
durable, reload from the log (Prepare* transactions completed), unload when leadership moves,
the timeout scan, topic creation, a failed write, the request checks it makes itself, and
markers sent even when the request that decided them is cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from rillet import errors
from rillet.broker.producer_id_manager import InitProducerIdRequest as BrokerInit
from rillet.broker.transaction_coordinator import TRANSACTION_STATE_TOPIC
from rillet.coordinator.transaction import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    TransactionState,
    decode_record,
)
from rillet.storage.log_manager import LogManager
from rillet.types import TopicPartition
from tests.unit.broker.txn_world import T0, T1, TXN0, TxnWorld

TID = "tx"


@pytest.fixture
async def world(log_manager: LogManager) -> AsyncIterator[TxnWorld]:
    w = TxnWorld(log_manager)
    await w.loaded()
    yield w
    await w.close()


async def init(w: TxnWorld, tid: str = TID, timeout_ms: int = 60_000) -> tuple[int, int]:
    result = await w.coordinator.init_producer_id(BrokerInit(tid, timeout_ms))
    return result.producer_id, result.producer_epoch


async def add(w: TxnWorld, pid: int, epoch: int, *tps: TopicPartition, tid: str = TID) -> None:
    (r,) = await w.coordinator.add_partitions_to_txn(
        [AddPartitionsToTxnRequest(tid, pid, epoch, tps)]
    )
    assert r.error is None, r.errors


def state(w: TxnWorld, tid: str = TID) -> TransactionState:
    (loaded,) = w.coordinator._loaded.values()
    metadata = loaded.shard.state.get(tid)
    assert metadata is not None
    return metadata.state


def logged_states(w: TxnWorld, tp: TopicPartition = TXN0) -> list[str]:
    """The state of each record of a ``__transaction_state`` partition, in log order."""
    out = []
    for b in w.batches(tp):
        for r in b.records:
            record = decode_record(r.key, r.value)
            value = record.value
            out.append(
                "tombstone"
                if value is None
                else str(TransactionState.from_id(value.transaction_status))
            )
    return out


async def until(check: object, what: str = "") -> None:
    for _ in range(1000):
        if check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.002)
    raise AssertionError(f"timed out waiting for {what or check}")


async def replicating(w: TxnWorld, check: object, what: str) -> None:
    """``until``, with broker 2 fetching everything meanwhile."""
    for _ in range(500):
        await w.replicate(2)
        if check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.004)
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_transaction_commits_with_markers_after_the_decision(world: TxnWorld) -> None:
    pid, epoch = await init(world)
    assert (pid, epoch) == (1000, 0)
    await add(world, pid, epoch, T0, T1)
    for tp in (T0, T1):
        res = await world.rm.append_records({tp: world.produce_batch(pid, epoch)}, -1, 1000)
        assert res[tp].error is None
    response = await world.coordinator.end_txn(EndTxnRequest(TID, pid, epoch, committed=True))
    assert response.error is None
    await until(lambda: state(world) is TransactionState.COMPLETE_COMMIT, "CompleteCommit")
    assert world.markers(T0) == world.markers(T1) == [(pid, epoch, "COMMIT")]
    assert logged_states(world) == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
    # A retry of the same EndTxn is answered again; the other outcome is refused.
    again = await world.coordinator.end_txn(EndTxnRequest(TID, pid, epoch, committed=True))
    assert again.error is None
    other = await world.coordinator.end_txn(EndTxnRequest(TID, pid, epoch, committed=False))
    assert isinstance(other.error, errors.InvalidTxnStateError)


async def test_answers_and_markers_wait_for_the_high_watermark(log_manager: LogManager) -> None:
    w = TxnWorld(log_manager, replicas=(1, 2))
    try:
        await w.loaded()
        init_task = asyncio.create_task(init(w))
        await asyncio.sleep(0.02)
        assert not init_task.done()  # the Empty record is not replicated yet
        await w.replicate(2)
        pid, epoch = await asyncio.wait_for(init_task, 5)
        add_task = asyncio.create_task(add(w, pid, epoch, T0))
        await asyncio.sleep(0.01)
        await w.replicate(2)
        await asyncio.wait_for(add_task, 5)
        end = asyncio.create_task(
            w.coordinator.end_txn(EndTxnRequest(TID, pid, epoch, committed=False))
        )
        await asyncio.sleep(0.02)
        # PrepareAbort is written, not committed: no answer, and no marker anywhere yet.
        assert not end.done() and w.markers(T0) == []
        assert logged_states(w)[-1] == "PrepareAbort"
        await w.replicate(2)
        assert (await asyncio.wait_for(end, 5)).error is None
        await until(lambda: w.markers(T0) == [(pid, epoch, "ABORT")], "the ABORT marker")
        # The marker itself is acks=all: CompleteAbort follows once the follower has it.
        await asyncio.sleep(0.02)
        assert logged_states(w)[-1] == "PrepareAbort"
        await w.replicate(2)
        await until(lambda: logged_states(w)[-1] == "CompleteAbort", "CompleteAbort")
    finally:
        await w.close()


async def test_requests_before_loading_and_elsewhere(log_manager: LogManager) -> None:
    w = TxnWorld(log_manager, txn_partitions=3, with_state_topic=False)
    try:
        with pytest.raises(errors.NotCoordinatorError):
            await init(w)
        (r,) = await w.coordinator.add_partitions_to_txn(
            [AddPartitionsToTxnRequest(TID, 1, 0, (T0,))]
        )
        assert isinstance(r.errors[T0], errors.NotCoordinatorError)
        # FindCoordinator creates the topic, with Kafka's configs.
        found = await w.coordinator.find_coordinator(TID)
        assert isinstance(found, errors.CoordinatorNotAvailableError)
        (created,) = w.controller.created
        assert (created.name, created.num_partitions, created.replication_factor) == (
            TRANSACTION_STATE_TOPIC,
            3,
            1,
        )
        assert created.configs == {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "min.insync.replicas": "1",
            "segment.bytes": str(100 << 20),
            "unclean.leader.election.enable": "false",
        }
        assert isinstance(await w.coordinator.find_coordinator(""), errors.InvalidRequestError)
        w.apply(w.topic_records(TRANSACTION_STATE_TOPIC, 3, (1,)))
        assert await w.coordinator.find_coordinator(TID) == 1
        # Loading: COORDINATOR_LOAD_IN_PROGRESS until the shard is replayed.
        with pytest.raises(errors.CoordinatorLoadInProgressError):
            await init(w)
        await w.loaded(0, 1, 2)
        assert (await init(w))[1] == 0
    finally:
        await w.close()


async def test_a_reloaded_coordinator_completes_prepared_transactions(
    log_manager: LogManager,
) -> None:
    w = TxnWorld(log_manager, replicas=(1, 2), topics={"t": 2, "u": 1})
    try:
        await w.loaded()
        for _ in range(2):
            t = asyncio.create_task(init(w))
            await asyncio.sleep(0.01)
            await w.replicate(2)
            pid, epoch = await asyncio.wait_for(t, 5)
        assert epoch == 1
        t = asyncio.create_task(add(w, pid, epoch, T0, TopicPartition("u", 0)))
        await asyncio.sleep(0.01)
        await w.replicate(2)
        await t
        # u-0 moves to broker 2: its marker goes over the (fake) network, and is not
        # answered; t-0's marker is written here but not replicated.
        w.move_leader("u", 0, 2)
        gate = asyncio.Event()
        w._connect(2, "localhost:9092").gate = gate
        end = asyncio.create_task(w.coordinator.end_txn(EndTxnRequest(TID, pid, epoch, True)))
        await asyncio.sleep(0.01)
        await w.replicate(2)
        assert (await asyncio.wait_for(end, 5)).error is None
        await until(lambda: w.markers(T0) == [(pid, epoch, "COMMIT")], "the local marker")
        await until(lambda: len(w.clients[2].markers) == 1, "the remote marker")
        (sent,) = w.clients[2].markers[0]
        assert (sent.producer_id, sent.coordinator_epoch, sent.committed) == (pid, 0, True)
        assert state(w) is TransactionState.PREPARE_COMMIT

        # Leadership of __transaction_state-0 moves away: the shard goes, requests get
        # NOT_COORDINATOR, and the answer to the old marker is ignored.
        w.move_leader(TRANSACTION_STATE_TOPIC, 0, 2)
        assert w.coordinator.coordinated_partitions() == []
        with pytest.raises(errors.NotCoordinatorError):
            await init(w)
        gate.set()
        await asyncio.sleep(0.02)
        # ... and back, in a new epoch: the new shard sends the markers again, stamped with
        # the new coordinator epoch, and completes the commit.
        w.move_leader(TRANSACTION_STATE_TOPIC, 0, 1)
        await w.loaded()
        # (Markers wait until the new leader's high watermark covers the loaded log.)
        await replicating(w, lambda: len(w.clients[2].markers) == 2, "the markers sent again")
        (resent,) = w.clients[2].markers[1]
        assert resent.coordinator_epoch == 2 and resent.partitions == (TopicPartition("u", 0),)
        await replicating(w, lambda: state(w) is TransactionState.COMPLETE_COMMIT, "Complete")
        assert w.markers(T0) == [(pid, epoch, "COMMIT"), (pid, epoch, "COMMIT")]
        # PrepareCommit was loaded from the log, not from memory.
        assert logged_states(w)[-2:] == ["PrepareCommit", "CompleteCommit"]
    finally:
        await w.close()


async def test_timed_out_transactions_are_aborted_and_their_producer_fenced(
    log_manager: LogManager,
) -> None:
    w = TxnWorld(
        log_manager,
        config={"transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000},
    )
    try:
        await w.loaded()
        pid, epoch = await init(w, timeout_ms=5000)
        await add(w, pid, epoch, T0)
        res = await w.rm.append_records({T0: w.produce_batch(pid, epoch)}, -1, 1000)
        assert res[T0].error is None
        w.clock.now += 5_500  # past the timeout, at the next scan
        w.coordinator._loaded[0].wake.set()
        await until(lambda: state(w) is TransactionState.COMPLETE_ABORT, "the abort")
        # The abort bumped the epoch: the old producer is fenced.
        assert w.markers(T0) == [(pid, epoch + 1, "ABORT")]
        response = await w.coordinator.end_txn(EndTxnRequest(TID, pid, epoch, True))
        assert isinstance(response.error, errors.ProducerFencedError)
        # Its data is refused by the log too (an older epoch than the marker's).
        res = await w.rm.append_records({T0: w.produce_batch(pid, epoch, seq=1)}, -1, 1000)
        assert isinstance(res[T0].error, errors.InvalidProducerEpochError)
    finally:
        await w.close()


async def test_a_second_instance_fences_the_first(world: TxnWorld) -> None:
    pid, epoch = await init(world)
    await add(world, pid, epoch, T0)
    # The ongoing transaction is aborted first: CONCURRENT_TRANSACTIONS until it completes.
    with pytest.raises(errors.ConcurrentTransactionsError):
        await init(world)
    await until(lambda: state(world) is TransactionState.COMPLETE_ABORT, "the fence's abort")
    pid2, epoch2 = await init(world)
    assert (pid2, epoch2) == (pid, epoch + 2)
    (r,) = await world.coordinator.add_partitions_to_txn(
        [AddPartitionsToTxnRequest(TID, pid, epoch, (T1,))]
    )
    assert isinstance(r.errors[T1], errors.ProducerFencedError)
    offsets = await world.coordinator.add_offsets_to_txn(
        AddOffsetsToTxnRequest(TID, pid, epoch, "g")
    )
    assert isinstance(offsets.error, errors.ProducerFencedError)


async def test_request_checks(world: TxnWorld) -> None:
    # EndTxn of an unknown transactional id, and without a transaction.
    unknown = await world.coordinator.end_txn(EndTxnRequest("nope", 5, 0, True))
    assert isinstance(unknown.error, errors.InvalidProducerIdMappingError)
    pid, epoch = await init(world)
    empty = await world.coordinator.end_txn(EndTxnRequest(TID, pid, epoch, True))
    assert isinstance(empty.error, errors.InvalidTxnStateError)
    # A partition that does not exist fails the transaction's request, untried elsewhere.
    missing = TopicPartition("missing", 0)
    (r,) = await world.coordinator.add_partitions_to_txn(
        [AddPartitionsToTxnRequest(TID, pid, epoch, (T0, missing, TopicPartition("t", 9)))]
    )
    assert isinstance(r.errors[missing], errors.UnknownTopicOrPartitionError)
    assert isinstance(r.errors[TopicPartition("t", 9)], errors.UnknownTopicOrPartitionError)
    assert isinstance(r.errors[T0], errors.OperationNotAttemptedError)
    assert state(world) is TransactionState.EMPTY
    # Timeouts beyond transaction.max.timeout.ms, and empty ids.
    with pytest.raises(errors.InvalidTransactionTimeoutError):
        await init(world, timeout_ms=900_001)
    with pytest.raises(errors.InvalidRequestError):
        await init(world, tid="")
    empty = await world.coordinator.end_txn(EndTxnRequest("", pid, epoch, True))
    assert isinstance(empty.error, errors.InvalidRequestError)


async def test_describe_and_list_transactions(world: TxnWorld) -> None:
    pid, epoch = await init(world)
    await add(world, pid, epoch, T1, T0)
    described = await world.coordinator.describe_transactions([TID, "nope"])
    assert described[0].transaction_state == "Ongoing"
    assert described[0].topic_partitions == (T0, T1)
    assert (described[0].producer_id, described[0].producer_epoch) == (pid, epoch)
    assert isinstance(described[1].error, errors.TransactionalIdNotFoundError)
    listed = await world.coordinator.list_transactions(["Ongoing", "Bogus"])
    assert listed.unknown_state_filters == ("Bogus",)
    assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [
        (TID, "Ongoing")
    ]
    assert (await world.coordinator.list_transactions(["Empty"])).transaction_states == ()
    assert len((await world.coordinator.list_transactions([], [pid])).transaction_states) == 1


async def test_a_failed_write_reloads_the_shard_from_the_log(log_manager: LogManager) -> None:
    w = TxnWorld(log_manager, replicas=(1, 2))
    try:
        await w.loaded()
        t = asyncio.create_task(init(w))
        await asyncio.sleep(0.01)
        await w.replicate(2)
        pid, epoch = await t
        # The follower stops: the next write is not replicated within the commit timeout.
        (r,) = await w.coordinator.add_partitions_to_txn(
            [AddPartitionsToTxnRequest(TID, pid, epoch, (T0,))]
        )
        assert isinstance(r.errors[T0], errors.CoordinatorNotAvailableError)
        # The shard was rebuilt from the log (where the Ongoing record still is).
        await w.loaded()
        await w.replicate(2)
        described = await w.coordinator.describe_transactions([TID])
        assert described[0].transaction_state == "Ongoing"
    finally:
        await w.close()


async def test_markers_are_sent_when_the_request_that_decided_them_is_cancelled(
    log_manager: LogManager,
) -> None:
    # gRPC cancels a handler when its client goes away or its deadline passes: a producer
    # killed (or timed out) while its EndTxn waits for the high watermark. The decision is
    # in the log and will be committed, so its markers must still go out; otherwise the
    # transaction stays PrepareCommit (every retry answered CONCURRENT_TRANSACTIONS) and
    # read_committed consumers stall on the LSO until the coordinator moves.
    w = TxnWorld(log_manager, replicas=(1, 2))
    try:
        await w.loaded()
        t = asyncio.create_task(init(w))
        await asyncio.sleep(0.01)
        await w.replicate(2)
        pid, epoch = await t
        t2 = asyncio.create_task(add(w, pid, epoch, T0))
        await asyncio.sleep(0.01)
        await w.replicate(2)
        await t2
        end = asyncio.create_task(
            w.coordinator.end_txn(EndTxnRequest(TID, pid, epoch, committed=True))
        )
        await asyncio.sleep(0.02)
        assert logged_states(w)[-1] == "PrepareCommit" and not end.done()
        end.cancel()
        with pytest.raises(asyncio.CancelledError):
            await end
        await replicating(w, lambda: w.markers(T0) == [(pid, epoch, "COMMIT")], "COMMIT")
        await replicating(w, lambda: logged_states(w)[-1] == "CompleteCommit", "CompleteCommit")
    finally:
        await w.close()
