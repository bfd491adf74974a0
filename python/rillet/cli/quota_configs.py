"""Client quotas in ``rillet configs``, as Kafka's ``kafka-configs.sh`` handles them with
``--bootstrap-server``: ``--entity-type users|clients`` (or ``--user``, ``--client``,
``--user-defaults``, ``--client-defaults``; a user and a client id together name one entity),
``--add-config 'producer_byte_rate=1048576,consumer_byte_rate=2097152'`` and
``--delete-config producer_byte_rate`` (AlterClientQuotas), and ``--describe``, which prints
Kafka's lines::

    Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=1048576.0
    Quota configs for the default client-id are consumer_byte_rate=2097152.0

An entity with no name given describes every named entity of the type; ``--entity-default``
(or ``--user-defaults``/``--client-defaults``) is the type's default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal

from rillet.broker.quotas import MATCH_DEFAULT, MATCH_EXACT, MATCH_SPECIFIED, QuotaFilterComponent
from rillet.client.admin import AdminClient
from rillet.controller.quotas import CLIENT_ID, USER, QuotaAlteration, QuotaOp
from rillet.metadata.records import QuotaEntity

__all__ = [
    "CLIENTS",
    "QUOTA_KEYS",
    "QuotaUsageError",
    "alter_quotas",
    "describe_quotas",
    "format_quotas",
    "java_double",
    "quota_alteration",
    "quota_filter",
]

CLIENTS = "clients"
# Kafka's user and client quota configs (Rillet's brokers refuse those they do not enforce).
QUOTA_KEYS = (
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
)
# The quota entity type of each of kafka-configs.sh's entity types.
_QUOTA_TYPE = {"users": USER, CLIENTS: CLIENT_ID}
_SHOWN_TYPE = {USER: "user-principal", CLIENT_ID: "client-id"}

# A given entity: (kafka-configs.sh entity type, name; "" the default, None every name).
Entity = tuple[str, str | None]


class QuotaUsageError(ValueError):
    """A quota flag or value ``rillet configs`` refuses before sending anything."""


def quota_alteration(
    entities: Sequence[Entity], to_add: Mapping[str, str], to_delete: Sequence[str]
) -> QuotaAlteration:
    """The AlterClientQuotas entry ``--alter`` asks for: values parsed as Kafka parses them
    (as doubles), keys checked against Kafka's quota configs."""
    unknown = [k for k in [*to_add, *to_delete] if k not in QUOTA_KEYS]
    if unknown:
        raise QuotaUsageError(
            f"Only quota configs ({', '.join(QUOTA_KEYS)}) can be altered for "
            f"{' and '.join(t for t, _ in entities)}. Unexpected config names: "
            f"{','.join(unknown)}"
        )
    ops: list[QuotaOp] = []
    for key, text in to_add.items():
        try:
            value = float(text)
        except ValueError:
            raise QuotaUsageError(
                f"Cannot parse quota configuration value for {key}: {text}"
            ) from None
        ops.append(QuotaOp(key, value))
    ops.extend(QuotaOp(key, None) for key in to_delete)
    entity: QuotaEntity = tuple(
        (_QUOTA_TYPE[kind], None if name == "" else name) for kind, name in entities
    )
    return QuotaAlteration(entity, tuple(ops))


def quota_filter(entities: Sequence[Entity]) -> list[QuotaFilterComponent]:
    """Kafka's describe filter: a name matches exactly, the default only the default, no
    name any named entity of the type (the filter is strict)."""
    out = []
    for kind, name in entities:
        if name is None:
            out.append(QuotaFilterComponent(_QUOTA_TYPE[kind], MATCH_SPECIFIED))
        elif name == "":
            out.append(QuotaFilterComponent(_QUOTA_TYPE[kind], MATCH_DEFAULT))
        else:
            out.append(QuotaFilterComponent(_QUOTA_TYPE[kind], MATCH_EXACT, name))
    return out


def java_double(value: float) -> str:
    """``value`` as Java's ``Double.toString`` writes it (Kafka prints quotas so):
    ``1024.0``, ``1.048576E7``."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    power = exponent + len(text) - 1
    fraction = text[1:] or "0"
    return f"{'-' if sign else ''}{text[0]}.{fraction}E{power}"


def format_quotas(entity: QuotaEntity, values: Mapping[str, float]) -> str:
    """Kafka's line for one entity's quotas."""
    names = dict(entity)
    parts = []
    for kind in (USER, CLIENT_ID):
        if kind in names:
            name = names[kind]
            shown = _SHOWN_TYPE[kind]
            parts.append(f"the default {shown}" if name is None else f"{shown} '{name}'")
    entries = ", ".join(f"{k}={java_double(values[k])}" for k in sorted(values))
    return f"Quota configs for {', '.join(parts)} are {entries}"


def describe_quotas(admin: AdminClient, entities: Sequence[Entity]) -> None:
    for entity, values in admin.describe_client_quotas(quota_filter(entities), strict=True):
        print(format_quotas(entity, values))


def alter_quotas(
    admin: AdminClient, entities: Sequence[Entity], alteration: QuotaAlteration
) -> None:
    admin.alter_client_quotas([alteration])
    kind, name = entities[0]
    if name:
        print(f"Completed updating config for {kind[:-1]} {name}.")
    else:
        print(f"Completed updating default config for {kind} in the cluster.")
