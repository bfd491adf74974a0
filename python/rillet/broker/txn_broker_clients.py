"""What brokers ask each other for transactions, and the connections they ask over.

Two inter-broker requests serve transactions (KIP-98, KIP-890):

- **WriteTxnMarkers**: a transaction coordinator asks a partition leader to append COMMIT or
  ABORT markers (:class:`TxnMarkerEntry`, Kafka's ``TxnMarkerEntry``); the answer is an error
  (or None) per partition of each entry, in the request's order.
- **AddPartitionsToTxn** with ``verify_only``: a partition leader asks a transaction
  coordinator whether partitions are in a producer's ongoing transaction before the first
  transactional write to them.

:class:`TxnBrokerClient` is the transport-free face of one connection (the gRPC one is
:class:`rillet.server.grpc.txn_client.GrpcTxnBrokerClient`); a method that gets no answer
raises NETWORK_EXCEPTION (:class:`~rillet.errors.NetworkError`). :class:`BrokerClients` keeps
one connection per broker, made from its inter-broker endpoint in the current metadata and
made again when that endpoint changes. Runs on the broker's event loop.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from rillet.coordinator.transaction import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from rillet.errors import KafkaError
from rillet.types import TopicPartition

__all__ = ["BrokerClients", "MarkerErrors", "TxnBrokerClient", "TxnMarkerEntry"]

_log = logging.getLogger(__name__)

# One marker entry's answer: an error, or None when written, for each of its partitions.
MarkerErrors = dict[TopicPartition, KafkaError | None]


@dataclass(frozen=True)
class TxnMarkerEntry:
    """One marker of a WriteTxnMarkers request: a COMMIT (``committed``) or ABORT control
    batch for ``producer_id`` at ``producer_epoch`` into each of ``partitions``, stamped with
    the coordinator's epoch (the leader epoch of its ``__transaction_state`` partition)."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    committed: bool
    partitions: tuple[TopicPartition, ...]


class TxnBrokerClient(Protocol):
    """A connection to one broker's inter-broker listener."""

    async def write_txn_markers(
        self, markers: Sequence[TxnMarkerEntry], timeout_ms: int
    ) -> list[MarkerErrors]:
        """The leader's answer for each entry, in order."""
        ...

    async def add_partitions_to_txn(
        self, transactions: Sequence[AddPartitionsToTxnRequest], timeout_ms: int
    ) -> list[AddPartitionsToTxnResponse]:
        """The coordinator's answer for each transaction, in order; raises the whole
        request's error when it has one."""
        ...

    async def close(self) -> None: ...


class BrokerClients:
    """One :class:`TxnBrokerClient` per broker. ``address`` gives a broker's inter-broker
    endpoint (``host:port``) from the current metadata, None while it has none; ``connect``
    makes a client for an address."""

    def __init__(
        self,
        address: Callable[[int], str | None],
        connect: Callable[[int, str], TxnBrokerClient],
    ) -> None:
        self.address = address
        self.connect = connect
        self._clients: dict[int, tuple[str, TxnBrokerClient]] = {}
        self._closing: list[TxnBrokerClient] = []

    def get(self, broker_id: int) -> TxnBrokerClient | None:
        address = self.address(broker_id)
        if address is None:
            return None
        known = self._clients.get(broker_id)
        if known is not None and known[0] == address:
            return known[1]
        if known is not None:
            self._closing.append(known[1])  # closed at shutdown: a request may still use it
        client = self.connect(broker_id, address)
        self._clients[broker_id] = (address, client)
        return client

    async def close(self) -> None:
        clients = [c for _, c in self._clients.values()] + self._closing
        self._clients.clear()
        self._closing.clear()
        for client in clients:
            with contextlib.suppress(Exception):
                await client.close()
