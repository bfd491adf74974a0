"""KIP-890 part 1 on partition leaders: before a producer's first transactional write to a
partition, ask its transaction coordinator whether the partition is in the ongoing
transaction (Kafka's ``ReplicaManager.handleProduceAppend`` with the
``AddPartitionsToTxnManager`` and the log's ``VerificationGuard``).

Without it, a producer that wrote to a partition it never added (a client bug), or whose
transaction the coordinator aborted meanwhile (a timeout), leaves data no marker will ever
end: a *hanging transaction* that holds the partition's last stable offset back forever.

The flow for one produce request that carries a ``transactional_id`` (a request without one
costs nothing here, as in Kafka):

1. The batches' headers name the producer (id, epoch) of each partition's transactional
   batches; two producers in one request fail every partition with
   INVALID_PRODUCER_ID_MAPPING.
2. A partition this broker leads where the producer has no ongoing transaction in the log's
   producer state needs verifying: it gets a *verification guard* (:class:`VerificationGuards`).
3. The partitions are verified in one AddPartitionsToTxn(verify_only) to the transactional
   id's coordinator, batched with other requests for the same coordinator while one is in
   flight (one request per coordinator at a time); this broker's own coordinator is asked
   in-process. Two produce requests of one producer waiting at once are merged into one
   entry: gRPC serves a connection's requests concurrently, so a second one is not a retry
   of the first, as Kafka's broker (which takes them one at a time) may assume.
4. Just before the append (synchronously, with no await in between), each verified partition
   must still hold its guard, unless the transaction meanwhile started there: a marker
   written in between (the transaction was aborted) removes the guard, and the write is
   refused with INVALID_TXN_STATE rather than landing after the marker.

The coordinator's answers become produce errors as in Kafka 4.0 for current clients:
TRANSACTION_ABORTABLE for a partition not in the transaction (the producer must abort),
PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH, and the retriable coordinator errors
(CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) become NOT_ENOUGH_REPLICAS, which a producer
retries without refreshing its metadata.

``transaction.partition.verification.enable=false`` turns all of this off.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import struct
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from rillet import errors
from rillet.broker.partition import Partition
from rillet.broker.replica_manager import ReplicaManager
from rillet.broker.txn_broker_clients import BrokerClients
from rillet.coordinator.transaction import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    partition_for,
)
from rillet.errors import KafkaError
from rillet.metadata.image import MetadataImage
from rillet.types import TopicPartition

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "ProduceVerification",
    "TxnVerifier",
    "VerificationGuards",
    "transactional_producers",
]

_log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"

# RecordBatch v2 header fields read here (byte offsets in the batch).
_LENGTH = struct.Struct(">i")  # batchLength at 8: the bytes after the first 12
_MAGIC_AT = 16
_ATTRIBUTES = struct.Struct(">h")  # at 21
_PRODUCER = struct.Struct(">qh")  # producerId at 43, producerEpoch at 51
_HEADER_SIZE = 61
_TRANSACTIONAL = 0x10
_CONTROL = 0x20

# Coordinator errors a producer would not retry correctly: NOT_ENOUGH_REPLICAS instead.
_RETRY_AS_NOT_ENOUGH_REPLICAS = frozenset(
    {
        "CONCURRENT_TRANSACTIONS",
        "NETWORK_EXCEPTION",
        "COORDINATOR_LOAD_IN_PROGRESS",
        "COORDINATOR_NOT_AVAILABLE",
        "NOT_COORDINATOR",
    }
)

LocalVerify = Callable[
    [Sequence[AddPartitionsToTxnRequest]], Awaitable[list[AddPartitionsToTxnResponse]]
]


def transactional_producers(records: bytes | memoryview) -> set[tuple[int, int]]:
    """The (producer id, epoch) of every transactional data batch in ``records`` (headers
    only; a truncated or foreign batch is left to the log's validation)."""
    view = memoryview(records)
    out: set[tuple[int, int]] = set()
    pos = 0
    while pos + _HEADER_SIZE <= len(view):
        (length,) = _LENGTH.unpack_from(view, pos + 8)
        if length <= 0 or view[pos + _MAGIC_AT] != 2:
            break
        (attributes,) = _ATTRIBUTES.unpack_from(view, pos + 21)
        if attributes & _TRANSACTIONAL and not attributes & _CONTROL:
            producer_id, epoch = _PRODUCER.unpack_from(view, pos + 43)
            if producer_id >= 0:
                out.add((producer_id, epoch))
        pos += 12 + length
    return out


@dataclass(eq=False)
class _Guard:
    partition: Partition
    leader_epoch: int
    # Verifications of this guard still waiting for the coordinator.
    verifying: int = 0


class VerificationGuards:
    """The verification guards of the partitions this broker leads (Kafka keeps them in the
    log's producer state). A guard is made when a verification starts, and is gone once a
    marker is written for the producer (:meth:`clear`), once its partition changes hands (a
    guard only holds for the Partition object and leader epoch it was made under), or once
    its last verification failed (:meth:`verified`). Concurrent verifications of one
    producer on one partition share the guard: one failing (say, CONCURRENT_TRANSACTIONS
    while the previous transaction completes) does not take it from another that passed."""

    def __init__(self) -> None:
        self._guards: dict[tuple[TopicPartition, int], _Guard] = {}

    def start(self, partition: Partition, producer_id: int) -> object:
        """The producer's guard on ``partition`` (the one in place, else a new one), for a
        verification starting; end it with :meth:`verified`."""
        key = (partition.tp, producer_id)
        held = self._guards.get(key)
        if (
            held is None
            or held.partition is not partition
            or held.leader_epoch != partition.leader_epoch
        ):
            held = self._guards[key] = _Guard(partition, partition.leader_epoch)
        held.verifying += 1
        return held

    def verified(self, tp: TopicPartition, producer_id: int, guard: object, ok: bool) -> None:
        """A verification of ``guard`` ended; a failed one drops the guard unless another
        verification still holds it."""
        assert isinstance(guard, _Guard)
        guard.verifying -= 1
        if not ok and guard.verifying <= 0 and self._guards.get((tp, producer_id)) is guard:
            del self._guards[(tp, producer_id)]

    def holds(self, partition: Partition, producer_id: int, guard: object) -> bool:
        held = self._guards.get((partition.tp, producer_id))
        return (
            held is not None
            and held is guard
            and held.partition is partition
            and held.leader_epoch == partition.leader_epoch
            and partition.is_leader
        )

    def clear(self, tp: TopicPartition, producer_id: int) -> None:
        self._guards.pop((tp, producer_id), None)

    def __len__(self) -> int:
        return len(self._guards)


@dataclass
class ProduceVerification:
    """A produce request's verification: ``errors`` for partitions that failed it, and the
    guards to check again right before the append (:meth:`errors_before_append`)."""

    errors: dict[TopicPartition, KafkaError] = field(default_factory=dict)
    _checks: list[tuple[Partition, int, object]] = field(default_factory=list)
    _guards: VerificationGuards | None = None

    def errors_before_append(self) -> dict[TopicPartition, KafkaError]:
        """Every partition not to append: those that failed verification, and those whose
        guard went while the coordinator was asked (a marker ended the transaction). Call
        it with no await between it and the append, and :meth:`appended` after it. A guard
        is not used up here: requests of one producer may be verified out of order (gRPC
        serves a connection's requests concurrently, where Kafka's broker takes them one at a
        time), and one whose append fails (a sequence gap, because it overtook an earlier
        one) must not take the guard from the earlier one still being verified."""
        out = dict(self.errors)
        guards = self._guards
        for partition, producer_id, guard in self._checks:
            tp = partition.tp
            if tp in out or guards is None:
                continue
            ok = partition.has_ongoing_transaction(producer_id) or guards.holds(
                partition, producer_id, guard
            )
            if not ok and partition.is_leader:
                out[tp] = errors.InvalidTxnStateError(
                    f"the transaction of producer {producer_id} ended on {tp} while the "
                    "partition was being verified"
                )
        return out

    def appended(self, failed: Mapping[TopicPartition, KafkaError | None]) -> None:
        """After the append: a guard whose partition took the batch is used up (the
        transaction is ongoing there now); one whose append failed stays for the retry or
        a request still being verified."""
        if self._guards is None:
            return
        for partition, producer_id, _ in self._checks:
            if failed.get(partition.tp, KafkaError("not appended")) is None:
                self._guards.clear(partition.tp, producer_id)


@dataclass
class _Waiting:
    """One transactional id's entry in the next request: its partitions, and the
    verifications waiting for it, each with the partitions it asked for."""

    request: AddPartitionsToTxnRequest
    waiters: list[
        tuple[frozenset[TopicPartition], asyncio.Future[dict[TopicPartition, KafkaError]]]
    ]

    def merge(
        self,
        request: AddPartitionsToTxnRequest,
        future: asyncio.Future[dict[TopicPartition, KafkaError]],
    ) -> None:
        partitions = tuple(sorted(set(self.request.partitions) | set(request.partitions)))
        self.request = dataclasses.replace(self.request, partitions=partitions)
        self.waiters.append((frozenset(request.partitions), future))


@dataclass
class _CoordinatorQueue:
    """The verifications waiting for the next request to one coordinator broker."""

    waiting: dict[str, _Waiting] = field(default_factory=dict)
    sender: asyncio.Task[None] | None = None


class TxnVerifier:
    """Verifies transactional produce requests (see the module doc).

    ``image`` gives the current metadata (who leads each ``__transaction_state``
    partition); ``local`` answers verifications for the partitions this broker coordinates;
    ``clients`` reach the other coordinators."""

    def __init__(
        self,
        broker_id: int,
        replicas: ReplicaManager,
        image: Callable[[], MetadataImage],
        clients: BrokerClients,
        local: LocalVerify | None,
        *,
        num_partitions: int,
        request_timeout_ms: int,
        enabled: bool = True,
    ) -> None:
        self.broker_id = broker_id
        self.replicas = replicas
        self.image = image
        self.clients = clients
        self.local = local
        self.num_partitions = num_partitions
        self.request_timeout_ms = request_timeout_ms
        self.enabled = enabled
        self.guards = VerificationGuards()
        self._queues: dict[int, _CoordinatorQueue] = {}
        self._closed = False

    async def verify_produce(
        self, transactional_id: str, appends: Mapping[TopicPartition, bytes | memoryview]
    ) -> ProduceVerification:
        """Verify the partitions of one produce request that need it (see the module doc)."""
        by_partition: dict[TopicPartition, set[tuple[int, int]]] = {}
        producers: set[tuple[int, int]] = set()
        for tp, records in appends.items():
            found = transactional_producers(records)
            if found:
                by_partition[tp] = found
                producers |= found
        if not producers:
            return ProduceVerification()
        if len(producers) > 1:
            err = errors.InvalidProducerIdMappingError(
                "Transactional records contained more than one producer ID"
            )
            return ProduceVerification(dict.fromkeys(appends, err))
        if not self.enabled or self._closed:
            return ProduceVerification()
        ((producer_id, producer_epoch),) = producers
        checks: list[tuple[Partition, int, object]] = []
        for tp in by_partition:
            p = self.replicas.partitions.get(tp)
            if p is None or not p.is_leader or p.has_ongoing_transaction(producer_id):
                continue  # the append answers for a partition not led here
            checks.append((p, producer_id, self.guards.start(p, producer_id)))
        if not checks:
            return ProduceVerification()
        request = AddPartitionsToTxnRequest(
            transactional_id,
            producer_id,
            producer_epoch,
            tuple(sorted(p.tp for p, _, _ in checks)),
            verify_only=True,
        )
        try:
            failed = await self.verify_transaction(request)
        except BaseException:
            for p, pid, guard in checks:
                self.guards.verified(p.tp, pid, guard, ok=False)
            raise
        for p, pid, guard in checks:
            self.guards.verified(p.tp, pid, guard, ok=p.tp not in failed)
        return ProduceVerification(
            {tp: _produce_error(e) for tp, e in failed.items()}, checks, self.guards
        )

    # -- AddPartitionsToTxnManager ---------------------------------------------------------

    def coordinator_of(self, transactional_id: str) -> int | None:
        """The broker leading the ``__transaction_state`` partition of the id, if any."""
        index = partition_for(transactional_id, self.num_partitions)
        reg = self.image().partition(TRANSACTION_STATE_TOPIC, index)
        return reg.leader if reg is not None and reg.has_leader else None

    async def verify_transaction(
        self, request: AddPartitionsToTxnRequest
    ) -> dict[TopicPartition, KafkaError]:
        """The coordinator's errors for the partitions of ``request`` that are not verified
        (empty: all are), as the coordinator answers them but PRODUCER_FENCED, which is
        INVALID_PRODUCER_EPOCH here (Kafka's ``AddPartitionsToTxnManager``)."""
        node = self.coordinator_of(request.transactional_id)
        if node is None:
            err = errors.CoordinatorNotAvailableError(
                f"the coordinator of {request.transactional_id!r} has no leader"
            )
            return dict.fromkeys(request.partitions, err)
        if node == self.broker_id and self.local is not None:
            (response,) = await self.local([request])
            return _unverified(response)
        queue = self._queues.setdefault(node, _CoordinatorQueue())
        future: asyncio.Future[dict[TopicPartition, KafkaError]] = (
            asyncio.get_running_loop().create_future()
        )
        tid = request.transactional_id
        existing = queue.waiting.get(tid)
        if (
            existing is not None
            and existing.request.producer_id == request.producer_id
            and existing.request.producer_epoch == request.producer_epoch
        ):
            # One entry per transactional id in a request: the same producer's partitions
            # are asked together.
            existing.merge(request, future)
        else:
            if existing is not None:
                # A newer epoch fences the one waiting; an older one is fenced at once.
                if existing.request.producer_epoch > request.producer_epoch:
                    fenced = errors.InvalidProducerEpochError(
                        f"producer epoch {request.producer_epoch} of {tid} is fenced"
                    )
                    return dict.fromkeys(request.partitions, fenced)
                old = errors.InvalidProducerEpochError(f"a newer epoch of {tid} is being verified")
                _settle(existing, dict.fromkeys(existing.request.partitions, old))
            queue.waiting[tid] = _Waiting(request, [(frozenset(request.partitions), future)])
        if queue.sender is None or queue.sender.done():
            queue.sender = asyncio.get_running_loop().create_task(
                self._send(node, queue), name=f"verify-txn-partitions-{node}"
            )
        return await asyncio.shield(future)

    async def _send(self, node: int, queue: _CoordinatorQueue) -> None:
        """Send what waits for ``node``, one request at a time, until nothing waits."""
        while queue.waiting and not self._closed:
            batch = list(queue.waiting.values())
            queue.waiting.clear()
            client = self.clients.get(node)
            try:
                if client is None:
                    raise errors.NetworkError(f"broker {node} has no inter-broker endpoint")
                responses = await client.add_partitions_to_txn(
                    [w.request for w in batch], self.request_timeout_ms
                )
            except KafkaError as e:
                err = (
                    errors.InvalidTxnStateError(e.message)
                    if isinstance(e, errors.ClusterAuthorizationFailedError)
                    else e
                )
                for w in batch:
                    _settle(w, dict.fromkeys(w.request.partitions, err))
                continue
            except Exception as e:  # a bug: answer rather than leave producers hanging
                _log.exception("AddPartitionsToTxn to broker %d failed", node)
                bug = errors.UnknownServerError(str(e))
                for w in batch:
                    _settle(w, dict.fromkeys(w.request.partitions, bug))
                continue
            by_id = {r.transactional_id: r for r in responses}
            for w in batch:
                response = by_id.get(w.request.transactional_id)
                if response is None:
                    missing = errors.UnknownServerError(
                        f"broker {node} did not answer for {w.request.transactional_id!r}"
                    )
                    _settle(w, dict.fromkeys(w.request.partitions, missing))
                else:
                    _settle(w, _unverified(response))

    async def close(self) -> None:
        self._closed = True
        for queue in self._queues.values():
            for w in queue.waiting.values():
                _settle(w, dict.fromkeys(w.request.partitions, errors.NetworkError("closing")))
            queue.waiting.clear()
            if queue.sender is not None:
                queue.sender.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await queue.sender
        self._queues.clear()


def _settle(waiting: _Waiting, result: dict[TopicPartition, KafkaError]) -> None:
    """Answer each verification waiting on the entry with its own partitions' errors."""
    for partitions, future in waiting.waiters:
        if not future.done():
            future.set_result({tp: e for tp, e in result.items() if tp in partitions})


def _unverified(response: AddPartitionsToTxnResponse) -> dict[TopicPartition, KafkaError]:
    out: dict[TopicPartition, KafkaError] = {}
    for tp, err in response.errors.items():
        if err is None:
            continue
        if isinstance(err, errors.ProducerFencedError):
            err = errors.InvalidProducerEpochError(err.message)
        out[tp] = err
    return out


def _produce_error(err: KafkaError) -> KafkaError:
    """A coordinator's verification error as the produce response carries it."""
    if isinstance(err, errors.InvalidTxnStateError):
        return errors.InvalidTxnStateError("Partition was not added to the transaction")
    if err.name in _RETRY_AS_NOT_ENOUGH_REPLICAS:
        return errors.NotEnoughReplicasError(
            "Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {err.name}"
        )
    return err
