"""The AdminClient's transaction calls (Kafka's ``Admin.listTransactions``,
``describeTransactions``, ``describeProducers`` and ``abortTransaction``, KIP-664):
ListTransactions goes to every broker (each lists the transactional ids it coordinates),
DescribeTransactions to each id's coordinator, DescribeProducers to the partition's leader,
and an abort is a WriteTxnMarkers (ABORT) sent to the partition's leader, for a transaction
its coordinator no longer finishes (a hanging transaction)."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from rillet.client.cluster import GRPC_OPTIONS
from rillet.client.sasl import ClientSasl
from rillet.client.security import open_channel, refusal
from rillet.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaError,
    NotCoordinatorError,
    NotLeaderOrFollowerError,
    error_for_code,
)
from rillet.protocol.gen.v1 import transaction_pb2, transaction_pb2_grpc
from rillet.security.tls import ClientTls
from rillet.types import TopicPartition

__all__ = [
    "ProducerState",
    "TransactionAdmin",
    "TransactionDescription",
    "TransactionListing",
]

_RETRY = (NotCoordinatorError, CoordinatorNotAvailableError, CoordinatorLoadInProgressError)
COORDINATOR_TRANSACTION = 1


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int


@dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int  # -1 when no transaction is ongoing
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_transaction_start_offset: int  # -1 when no transaction is ongoing


def _error(code: int, message: str) -> KafkaError | None:
    return error_for_code(code)(message) if code else None


class TransactionAdmin(ABC):
    """Mixed into :class:`~rillet.client.admin.AdminClient`."""

    _timeout: float
    _tls: ClientTls | None
    _sasl: ClientSasl | None

    @abstractmethod
    def _brokers(self) -> dict[int, str]:
        """The live brokers, by node id."""

    @abstractmethod
    def _leader_address(self, tp: TopicPartition) -> tuple[int, str]:
        """The partition's leader (node id, address)."""

    @abstractmethod
    def _coordinator(self, group_id: str, key_type: int = 0) -> tuple[int, str]:
        """(node id, address) of a coordinator, found with FindCoordinator."""

    def _txn_call(self, address: str, name: str, request: Any) -> Any:
        channel = open_channel(address, self._tls, GRPC_OPTIONS, self._sasl)
        try:
            return getattr(transaction_pb2_grpc.TransactionServiceStub(channel), name)(
                request, timeout=self._timeout
            )
        except grpc.RpcError as e:
            raise refusal(e) or CoordinatorNotAvailableError(
                f"{address} did not answer {name}"
            ) from e
        finally:
            channel.close()

    # -- the calls ---------------------------------------------------------------------------

    def list_transactions(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_ms: int = -1,
    ) -> list[TransactionListing]:
        """Every transactional id of the cluster (each broker lists those it coordinates),
        optionally only in ``states``, of ``producer_ids``, or running longer than
        ``duration_ms``."""
        request = transaction_pb2.ListTransactionsRequest(
            state_filters=list(states),
            producer_id_filters=list(producer_ids),
            duration_filter_ms=duration_ms,
        )
        out: dict[str, TransactionListing] = {}
        for node, address in sorted(self._brokers().items()):
            response = self._txn_call(address, "ListTransactions", request)
            err = _error(response.error_code, response.error_message)
            if err is not None and not isinstance(err, _RETRY):
                raise err
            for t in response.transaction_states:
                out[t.transactional_id] = TransactionListing(
                    t.transactional_id, t.producer_id, t.transaction_state, node
                )
        return [out[t] for t in sorted(out)]

    def describe_transactions(
        self, transactional_ids: Sequence[str]
    ) -> list[TransactionDescription]:
        """Each transactional id's state from its coordinator; an unknown id raises
        TRANSACTIONAL_ID_NOT_FOUND."""
        out = []
        for tid in transactional_ids:
            deadline = time.monotonic() + self._timeout
            while True:
                node, address = self._coordinator(tid, COORDINATOR_TRANSACTION)
                response = self._txn_call(
                    address,
                    "DescribeTransactions",
                    transaction_pb2.DescribeTransactionsRequest(transactional_ids=[tid]),
                )
                t = response.transaction_states[0]
                err = _error(t.error_code, t.error_message)
                if err is None:
                    break
                if not isinstance(err, _RETRY) or time.monotonic() >= deadline:
                    raise err
                time.sleep(0.1)
            out.append(
                TransactionDescription(
                    tid,
                    node,
                    t.transaction_state,
                    t.producer_id,
                    t.producer_epoch,
                    t.transaction_timeout_ms,
                    t.transaction_start_time_ms,
                    tuple(
                        TopicPartition(topic.name, p)
                        for topic in t.topics
                        for p in topic.partitions
                    ),
                )
            )
        return out

    def describe_producers(self, tp: TopicPartition) -> list[ProducerState]:
        """The active producers of a partition, from its leader's producer state."""
        deadline = time.monotonic() + self._timeout
        while True:
            _, address = self._leader_address(tp)
            response = self._txn_call(
                address,
                "DescribeProducers",
                transaction_pb2.DescribeProducersRequest(
                    topics=[transaction_pb2.TxnTopic(name=tp.topic, partitions=[tp.partition])]
                ),
            )
            p = response.topics[0].partitions[0]
            err = _error(p.error_code, p.error_message)
            if err is None:
                return [
                    ProducerState(
                        s.producer_id,
                        s.producer_epoch,
                        s.last_sequence,
                        s.last_timestamp,
                        s.coordinator_epoch,
                        s.current_txn_start_offset,
                    )
                    for s in p.active_producers
                ]
            if not isinstance(err, NotLeaderOrFollowerError) or time.monotonic() >= deadline:
                raise err
            time.sleep(0.1)

    def abort_transaction(
        self, tp: TopicPartition, producer_id: int, producer_epoch: int, coordinator_epoch: int
    ) -> None:
        """Write an ABORT marker for the producer's open transaction on ``tp`` (Kafka's
        ``Admin.abortTransaction``, for a hanging transaction)."""
        _, address = self._leader_address(tp)
        response = self._txn_call(
            address,
            "WriteTxnMarkers",
            transaction_pb2.WriteTxnMarkersRequest(
                markers=[
                    transaction_pb2.WriteTxnMarkersRequest.Marker(
                        producer_id=producer_id,
                        producer_epoch=producer_epoch,
                        committed=False,
                        coordinator_epoch=coordinator_epoch,
                        topics=[transaction_pb2.TxnTopic(name=tp.topic, partitions=[tp.partition])],
                    )
                ]
            ),
        )
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    err = _error(p.error_code, p.error_message)
                    if err is not None:
                        raise err
