"""InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn over Kafka's protocol: the
same producer id manager and transaction coordinator the gRPC API drives, so idempotent and
transactional Kafka clients work unchanged. AddPartitionsToTxn is served at the versions
clients send (0-3); v4+ is Kafka's broker-to-broker verification, which Rillet's brokers
send each other over gRPC. EndTxn stops at v4 (transaction.version 1: no epoch bump at
each commit).

With an authorizer, each request is checked as Kafka's KafkaApis checks it:

- **InitProducerId**: with a transactional id, WRITE on it
  (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs IDEMPOTENT_WRITE on
  the cluster or, as from Kafka 3.0 (KIP-679), WRITE on some topic
  (CLUSTER_AUTHORIZATION_FAILED).
- **AddPartitionsToTxn**: WRITE on the transactional id (every partition
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then WRITE on each topic: if one is refused none
  is added, its partitions TOPIC_AUTHORIZATION_FAILED, the other partitions
  UNKNOWN_TOPIC_OR_PARTITION when the metadata does not have them, else
  OPERATION_NOT_ATTEMPTED.
- **AddOffsetsToTxn**: WRITE on the transactional id, then READ on the group
  (GROUP_AUTHORIZATION_FAILED).
- **EndTxn**: WRITE on the transactional id."""

from __future__ import annotations

from collections.abc import Mapping

from rillet.broker.producer_id_manager import (
    InitProducerIdRequest,
    InitProducerIdResult,
    ProducerIdManager,
    handle_init_producer_id,
    init_transactional_producer_id,
)
from rillet.broker.transaction_coordinator import TransactionCoordinator
from rillet.coordinator.transaction import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
)
from rillet.errors import (
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    KafkaError,
    OperationNotAttemptedError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from rillet.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from rillet.server.kafka.groups import denied_topics, group_denied, transactional_id_denied
from rillet.server.kafka.request import Body, KafkaRequest, Served
from rillet.types import TopicPartition

__all__ = ["KafkaTransactions"]


def _not_served() -> KafkaError:
    return InvalidRequestError("transactions are not served by this broker")


def _init_denied(req: KafkaRequest, transactional_id: str | None) -> KafkaError | None:
    """Kafka's InitProducerId checks: WRITE on the transactional id, or for an idempotent
    producer IDEMPOTENT_WRITE on the cluster (a denial not logged, as Kafka) or WRITE on
    some topic (KIP-679)."""
    if transactional_id is not None:
        return transactional_id_denied(req, transactional_id)
    if req.allowed_quietly(
        AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME
    ) or req.allowed_on_any(AclOperation.WRITE, ResourceType.TOPIC):
        return None
    return ClusterAuthorizationFailedError(
        "Not authorized to write idempotently: neither IDEMPOTENT_WRITE on the cluster nor "
        "WRITE on any topic"
    )


class KafkaTransactions:
    def __init__(
        self, producer_ids: ProducerIdManager, coordinator: TransactionCoordinator | None
    ) -> None:
        self.producer_ids = producer_ids
        self.coordinator = coordinator

    def served(self) -> Mapping[int, Served]:
        return {
            22: Served(0, 5, self.init_producer_id),  # InitProducerId
            24: Served(0, 3, self.add_partitions_to_txn),  # AddPartitionsToTxn
            25: Served(0, 3, self.add_offsets_to_txn),  # AddOffsetsToTxn
            26: Served(0, 4, self.end_txn),  # EndTxn
        }

    async def _transactional(self, request: InitProducerIdRequest) -> InitProducerIdResult:
        if self.coordinator is None:
            return await init_transactional_producer_id(request)
        return await self.coordinator.init_producer_id(request)

    async def init_producer_id(self, req: KafkaRequest) -> Body:
        body = req.body
        request = InitProducerIdRequest(
            transactional_id=body.get("transactional_id"),
            transaction_timeout_ms=body["transaction_timeout_ms"],
            producer_id=body.get("producer_id", -1),
            producer_epoch=body.get("producer_epoch", -1),
        )
        try:
            denied = _init_denied(req, request.transactional_id)
            if denied is not None:
                raise denied
            result = await handle_init_producer_id(request, self.producer_ids, self._transactional)
        except KafkaError as e:
            return {"error_code": e.code, "producer_id": -1, "producer_epoch": -1}
        return {
            "error_code": 0,
            "producer_id": result.producer_id,
            "producer_epoch": result.producer_epoch,
        }

    async def add_partitions_to_txn(self, req: KafkaRequest) -> Body:
        body = req.body
        # Versions 0-3 name their fields v3_and_below_* (v4+ batch transactions).
        partitions = tuple(
            dict.fromkeys(
                TopicPartition(t["name"], p)
                for t in body["v3_and_below_topics"]
                for p in t["partitions"]
            )
        )
        denied = transactional_id_denied(req, body["v3_and_below_transactional_id"])
        errors: dict[TopicPartition, KafkaError | None]
        if denied is not None:
            errors = dict.fromkeys(partitions, denied)
        elif refused := denied_topics(req, AclOperation.WRITE, (tp.topic for tp in partitions)):
            errors = self._refused_partitions(partitions, refused)
        elif self.coordinator is None:
            errors = dict.fromkeys(partitions, _not_served())
        else:
            request = AddPartitionsToTxnRequest(
                body["v3_and_below_transactional_id"],
                body["v3_and_below_producer_id"],
                body["v3_and_below_producer_epoch"],
                partitions,
            )
            (response,) = await self.coordinator.add_partitions_to_txn([request])
            errors = dict(response.errors)
        by_topic: dict[str, list[Body]] = {}
        for tp in partitions:
            err = errors.get(tp)
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "partition_error_code": err.code if err else 0}
            )
        return {
            "results_by_topic_v3_and_below": [
                {"name": name, "results_by_partition": parts} for name, parts in by_topic.items()
            ]
        }

    def _refused_partitions(
        self, partitions: tuple[TopicPartition, ...], refused: set[str]
    ) -> dict[TopicPartition, KafkaError | None]:
        """As Kafka, when a topic may not be written none is added: TOPIC_AUTHORIZATION_FAILED
        for its partitions, UNKNOWN_TOPIC_OR_PARTITION for those of the others the metadata
        does not have, OPERATION_NOT_ATTEMPTED for the rest."""
        image = self.coordinator.image if self.coordinator is not None else None
        errors: dict[TopicPartition, KafkaError | None] = {}
        for tp in partitions:
            if tp.topic in refused:
                errors[tp] = TopicAuthorizationFailedError(
                    f"Not authorized to access topics: [{tp.topic}]"
                )
            elif image is not None and image.partition(*tp) is None:
                errors[tp] = UnknownTopicOrPartitionError(f"{tp} does not exist")
            else:
                errors[tp] = OperationNotAttemptedError()
        return errors

    async def add_offsets_to_txn(self, req: KafkaRequest) -> Body:
        body = req.body
        denied = transactional_id_denied(req, body["transactional_id"]) or group_denied(
            req, AclOperation.READ, body["group_id"]
        )
        if denied is not None:
            return {"error_code": denied.code}
        if self.coordinator is None:
            return {"error_code": _not_served().code}
        response = await self.coordinator.add_offsets_to_txn(
            AddOffsetsToTxnRequest(
                body["transactional_id"],
                body["producer_id"],
                body["producer_epoch"],
                body["group_id"],
            )
        )
        return {"error_code": response.error.code if response.error else 0}

    async def end_txn(self, req: KafkaRequest) -> Body:
        body = req.body
        denied = transactional_id_denied(req, body["transactional_id"])
        if denied is not None:
            return {"error_code": denied.code}
        if self.coordinator is None:
            return {"error_code": _not_served().code}
        response = await self.coordinator.end_txn(
            EndTxnRequest(
                body["transactional_id"],
                body["producer_id"],
                body["producer_epoch"],
                bool(body["committed"]),
            )
        )
        return {"error_code": response.error.code if response.error else 0}
