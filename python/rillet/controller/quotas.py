"""Client quotas (Kafka's ClientQuotaControlManager): AlterClientQuotas as
:class:`~rillet.metadata.records.ClientQuotaRecord` records.

An entity is a user, a client id, or a user with a client id, each named or the type's
default (``/config/users/<default>/clients/<default>`` in Kafka's tools). Every broker
enforces the byte-rate quotas, ``producer_byte_rate`` and ``consumer_byte_rate``
(:mod:`rillet.broker.quotas`); Kafka's other quota keys (``request_percentage``,
``controller_mutation_rate``, and ``connection_creation_rate`` of ``ip`` entities) are
refused by name rather than stored and silently ignored. Results are per entry, as in
Kafka: an entry any of whose operations is invalid changes nothing. Pure functions over a
:class:`~rillet.metadata.image.MetadataImage`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rillet import errors
from rillet.controller.results import ControllerResult
from rillet.errors import KafkaError
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import ClientQuotaRecord, MetadataRecord, QuotaEntity

__all__ = [
    "CLIENT_ID",
    "CONSUMER_BYTE_RATE",
    "IP",
    "PRODUCER_BYTE_RATE",
    "USER",
    "QuotaAlteration",
    "QuotaOp",
    "alter_client_quotas",
    "entity_text",
    "normalized_entity",
]

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE = "producer_byte_rate", "consumer_byte_rate"

# The quota keys Kafka defines that Rillet does not enforce, and why an alteration of one
# is refused.
_NOT_ENFORCED = {
    "request_percentage": "request time quotas are not enforced by Rillet",
    "controller_mutation_rate": "controller mutation quotas are not enforced by Rillet",
    "connection_creation_rate": "connection rate quotas are not enforced by Rillet",
}


@dataclass(frozen=True)
class QuotaOp:
    """Set ``key`` to ``value``, or remove it (``value`` None)."""

    key: str
    value: float | None


@dataclass(frozen=True)
class QuotaAlteration:
    """One entry of an AlterClientQuotas request: an entity as sent (its components in any
    order) and the operations on its quotas."""

    entity: QuotaEntity
    ops: tuple[QuotaOp, ...]


def entity_text(entity: QuotaEntity) -> str:
    """An entity as Kafka's messages show it: ``user=alice, client-id=<default>``."""
    return ", ".join(f"{kind}={'<default>' if name is None else name}" for kind, name in entity)


def normalized_entity(entity: QuotaEntity) -> QuotaEntity:
    """``entity`` with its components sorted by type, or INVALID_REQUEST naming what is
    wrong with it: empty, a type twice or unknown, an empty name, or an ``ip`` entity."""
    if not entity:
        raise errors.InvalidRequestError("Invalid empty client quota entity")
    kinds = [kind for kind, _ in entity]
    for kind, name in entity:
        if kinds.count(kind) > 1:
            raise errors.InvalidRequestError(
                f"Invalid client quota entity: entity type {kind} appears twice"
            )
        if kind == IP:
            raise errors.InvalidRequestError(
                "Quotas on ip entities (connection_creation_rate) are not supported"
            )
        if kind not in (USER, CLIENT_ID):
            raise errors.InvalidRequestError(f"Unhandled client quota entity type: {kind}")
        if name is not None and not name:
            raise errors.InvalidRequestError(
                f"Invalid client quota entity: an empty {kind} name (use the default instead)"
            )
    return tuple(sorted(entity, key=lambda component: component[0]))


def alter_client_quotas(
    image: MetadataImage, alterations: Sequence[QuotaAlteration]
) -> ControllerResult[list[KafkaError | None]]:
    """One result per alteration, in order. Removing a quota an entity does not have writes
    nothing; so does setting one to the value it has."""
    records: list[MetadataRecord] = []
    results: list[KafkaError | None] = []
    for alteration in alterations:
        try:
            records.extend(_alter(image, alteration))
        except KafkaError as e:
            results.append(e)
            continue
        results.append(None)
    return ControllerResult(records, results)


def _alter(image: MetadataImage, alteration: QuotaAlteration) -> list[ClientQuotaRecord]:
    entity = normalized_entity(alteration.entity)
    current = image.client_quotas.get(entity, {})
    keys = [op.key for op in alteration.ops]
    out: list[ClientQuotaRecord] = []
    for op in alteration.ops:
        if keys.count(op.key) > 1:
            raise errors.InvalidRequestError(
                f"Duplicate quota key {op.key} for entity {entity_text(entity)}"
            )
        _check_key(op.key)
        if op.value is None:
            if op.key in current:
                out.append(ClientQuotaRecord(entity, op.key, None))
            continue
        _check_value(op.key, op.value)
        if current.get(op.key) != op.value:
            out.append(ClientQuotaRecord(entity, op.key, op.value))
    return out


def _check_key(key: str) -> None:
    if key in (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE):
        return
    if key in _NOT_ENFORCED:
        raise errors.InvalidRequestError(f"Invalid quota key {key}: {_NOT_ENFORCED[key]}")
    raise errors.InvalidRequestError(f"Invalid configuration key {key}")


def _check_value(key: str, value: float) -> None:
    # Byte rates are Kafka LONG configs: whole numbers of bytes per second.
    if not math.isfinite(value) or value != math.floor(value):
        raise errors.InvalidRequestError(f"Configuration {key} must be a Long value")
    if value <= 0:
        raise errors.InvalidRequestError(
            f"Configuration {key} must be positive (bytes per second), not {value:.0f}"
        )
