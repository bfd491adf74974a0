"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs over Kafka's protocol, for
TOPIC and BROKER resources (the config half of :class:`~rillet.server.kafka.admin.KafkaAdmin`).

Describing follows Kafka's ``ConfigHelper``: a topic lists every topic config with its
effective value; a broker named by this broker's id lists every broker config, the empty
name (the cluster-wide default) only the dynamic defaults set. Each entry's source is the
head of its synonyms, found as Kafka finds them (its broker synonyms, per source in the
order dynamic per-broker, dynamic cluster default, static, default, from the entry's own
name on), so ``retention.ms`` has no synonyms unless ``log.retention.ms`` is set, as in
Kafka. Types and (``include_documentation``) documentation come from Rillet's config keys.

Altering does on the broker what Kafka's ``ConfigAdminManager`` does before forwarding to
the controller: a resource named twice, a config named twice in one resource, null values
and unknown operations are refused (INVALID_REQUEST), a BROKER resource must be this
broker's id or the empty name, and its new configs must be dynamic in Kafka (``Cannot
update these configs dynamically``), of the right type, and per-broker listener configs
must name a broker. APPEND and SUBTRACT are for LIST configs only (INVALID_CONFIG). The
controller then validates topic configs (unknown names, bad values: INVALID_CONFIG) and
writes the change. AlterConfigs replaces the resource's whole set of dynamic configs, as
Kafka's does.

Differences from Kafka: Rillet keeps no BROKER_LOGGER, CLIENT_METRICS or GROUP configs
(those resources are answered INVALID_REQUEST), and its brokers do not apply dynamic
broker configs to topics, so a topic's synonyms list only the static broker configs and
Kafka's defaults, which is where its values come from.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rillet.broker.apis import BrokerApis
from rillet.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    ConfigKey,
    config_value_to_string,
    parse_value,
    resolve_topic_config,
)
from rillet.controller import AlterConfigOp
from rillet.errors import (
    InvalidConfigurationError,
    InvalidRequestError,
    KafkaError,
    UnknownTopicOrPartitionError,
)
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import ConfigResourceType
from rillet.metadata.topic_names import validate_topic_name
from rillet.server.kafka.request import Body

__all__ = [
    "CONFIG_SOURCES",
    "DYNAMIC_BROKER_CONFIGS",
    "alter_configs",
    "describe_configs",
    "incremental_alter_configs",
]

TOPIC, BROKER = int(ConfigResourceType.TOPIC), int(ConfigResourceType.BROKER)
# Kafka's ConfigResource.Type names, for messages.
_RESOURCE_TYPES = {
    0: "UNKNOWN",
    2: "TOPIC",
    4: "BROKER",
    8: "BROKER_LOGGER",
    16: "CLIENT_METRICS",
    32: "GROUP",
}

# Kafka's DescribeConfigsResponse.ConfigSource ids.
DYNAMIC_TOPIC_CONFIG = "DYNAMIC_TOPIC_CONFIG"
DYNAMIC_BROKER_CONFIG = "DYNAMIC_BROKER_CONFIG"
DYNAMIC_DEFAULT_BROKER_CONFIG = "DYNAMIC_DEFAULT_BROKER_CONFIG"
STATIC_BROKER_CONFIG = "STATIC_BROKER_CONFIG"
DEFAULT_CONFIG = "DEFAULT_CONFIG"
CONFIG_SOURCES = {
    DYNAMIC_TOPIC_CONFIG: 1,
    DYNAMIC_BROKER_CONFIG: 2,
    DYNAMIC_DEFAULT_BROKER_CONFIG: 3,
    STATIC_BROKER_CONFIG: 4,
    DEFAULT_CONFIG: 5,
}

# Kafka's DescribeConfigsResponse.ConfigType ids (0 is UNKNOWN).
_CONFIG_TYPES = {
    "boolean": 1,
    "string": 2,
    "int": 3,
    "short": 4,
    "long": 5,
    "double": 6,
    "list": 7,
    "class": 8,
    "password": 9,
}

# IncrementalAlterConfigs' config_operation values (Kafka's AlterConfigOp.OpType).
_OPS = {0: "SET", 1: "DELETE", 2: "APPEND", 3: "SUBTRACT"}

# The broker configs Kafka can change dynamically (DynamicBrokerConfig.AllDynamicConfigs)
# that Rillet knows: the log cleaner's, the topic configs' broker synonyms, thread pools,
# listeners, and the producer-state ones. The others are read-only.
DYNAMIC_BROKER_CONFIGS = frozenset(
    {
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "log.cleaner.backoff.ms",
        "message.max.bytes",
        "num.io.threads",
        "num.network.threads",
        "num.replica.fetchers",
        "num.recovery.threads.per.data.dir",
        "background.threads",
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "producer.id.expiration.ms",
        "transaction.partition.verification.enable",
    }
    | {key.synonyms[0][0] for key in TOPIC_CONFIGS.values() if key.synonyms}
)
# Dynamic configs that only a broker, not the cluster-wide default, may set.
_PER_BROKER_CONFIGS = frozenset(
    {"listeners", "advertised.listeners", "listener.security.protocol.map"}
)

# Kafka's DynamicBrokerConfig.brokerConfigSynonyms: the keys one setting may come from.
_TIME_SYNONYMS: tuple[tuple[str, ...], ...] = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
_BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {
    name: group for group in _TIME_SYNONYMS for name in group
} | {"log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")}

_INT = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class _Synonym:
    name: str
    value: str | None
    source: str


# A config layer: where a value comes from and the values it holds, by key.
_Layer = tuple[str, Mapping[str, str | None]]


def _synonyms(name: str, candidates: Sequence[str], layers: Sequence[_Layer]) -> list[_Synonym]:
    """Kafka's ``configSynonyms``: each candidate set in each layer, layer by layer, from the
    first entry named ``name`` on."""
    found = [
        _Synonym(c, values[c], source)
        for source, values in layers
        for c in candidates
        if c in values
    ]
    for i, s in enumerate(found):
        if s.name == name:
            return found[i:]
    return []


def _error(e: KafkaError) -> tuple[int, str | None]:
    return e.code, e.message or None


def _broker_defaults() -> dict[str, str | None]:
    return {
        name: config_value_to_string(key.default)
        for name, key in BROKER_CONFIGS.items()
        if key.default is not None
    }


def _static_configs(apis: BrokerApis) -> dict[str, str | None]:
    """The broker configs set in this broker's properties, in Kafka's string form."""
    return {e.name: e.value for e in apis.config.describe() if e.source == STATIC_BROKER_CONFIG}


def _entry(
    name: str,
    value: str | None,
    synonyms: list[_Synonym],
    key: ConfigKey | None,
    read_only: bool,
    include_synonyms: bool,
    include_documentation: bool,
) -> Body:
    source = synonyms[0].source if synonyms else DEFAULT_CONFIG
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "is_default": source == DEFAULT_CONFIG,
        "config_source": CONFIG_SOURCES[source],
        "is_sensitive": key is not None and key.type == "password",
        "synonyms": [
            {"name": s.name, "value": s.value, "source": CONFIG_SOURCES[s.source]} for s in synonyms
        ]
        if include_synonyms
        else [],
        "config_type": _CONFIG_TYPES.get(key.type, 0) if key is not None else 0,
        "documentation": key.doc if include_documentation and key is not None else None,
    }


def _node_id(name: str) -> int | None:
    """A resource name as a broker id (Java's Integer.parseInt), None if it is not one."""
    return int(name) if _INT.fullmatch(name) and -(2**31) <= int(name) < 2**31 else None


def _unsupported(rtype: int) -> KafkaError:
    if rtype in _RESOURCE_TYPES and rtype not in (TOPIC, BROKER):
        return InvalidRequestError(
            f"Unsupported resource type: {_RESOURCE_TYPES[rtype]} (this broker keeps no "
            "such configs)"
        )
    return InvalidRequestError(f"Unknown resource type {rtype}")


# -- DescribeConfigs --------------------------------------------------------------------------


# Whether the sender may do what a request asks to a resource (its type and name): None, or
# the authorization error to answer it with.
Authorize = Callable[[int, str], KafkaError | None]


def _allowed(rtype: int, name: str) -> KafkaError | None:
    return None


def describe_configs(
    apis: BrokerApis, version: int, body: Body, denied: Authorize = _allowed
) -> Body:
    """DescribeConfigs: each resource's configs (those of ``configuration_keys``, or all for
    null or empty), or the error that stopped it (``denied`` says which resources the
    sender may not describe). Only v0 says whether a value is a default (``is_default``);
    later versions give its source."""
    image = apis.image()
    include_synonyms = bool(body.get("include_synonyms", False))
    include_docs = bool(body.get("include_documentation", False))
    results = []
    for r in body["resources"]:
        rtype, rname = r["resource_type"], r["resource_name"]
        wanted = set(r.get("configuration_keys") or ())
        out: Body = {"resource_type": rtype, "resource_name": rname}
        try:
            refused = denied(rtype, rname)
            if refused is not None:
                raise refused
            if rtype == TOPIC:
                entries = _describe_topic(apis, image, rname, include_synonyms, include_docs)
            elif rtype == BROKER:
                entries = _describe_broker(apis, image, rname, include_synonyms, include_docs)
            else:
                raise _unsupported(rtype)
        except KafkaError as e:
            out["error_code"], out["error_message"] = _error(e)
            out["configs"] = []
            results.append(out)
            continue
        if version > 0:
            for entry in entries:
                del entry["is_default"]
        out.update(
            error_code=0,
            error_message=None,
            configs=[entry for entry in entries if not wanted or entry["name"] in wanted],
        )
        results.append(out)
    return {"results": results}


def _describe_topic(
    apis: BrokerApis, image: MetadataImage, name: str, include_synonyms: bool, include_docs: bool
) -> list[Body]:
    validate_topic_name(name)
    if image.topic(name) is None:
        raise UnknownTopicOrPartitionError()  # Kafka gives no message here
    overrides = dict(image.topic_config(name))
    resolved = resolve_topic_config(apis.config.topic_synonyms, overrides)
    layers: list[_Layer] = [
        (STATIC_BROKER_CONFIG, _static_configs(apis)),
        (DEFAULT_CONFIG, _broker_defaults()),
    ]
    entries = []
    for config, key in sorted(TOPIC_CONFIGS.items()):
        value = config_value_to_string(resolved.values[config])
        synonyms: list[_Synonym] = []
        if key.synonyms:
            primary = key.synonyms[0][0]
            synonyms = _synonyms(primary, _BROKER_SYNONYMS.get(primary, (primary,)), layers)
        if config in overrides:
            synonyms.insert(0, _Synonym(config, value, DYNAMIC_TOPIC_CONFIG))
        entries.append(_entry(config, value, synonyms, key, False, include_synonyms, include_docs))
    return entries


def _describe_broker(
    apis: BrokerApis, image: MetadataImage, name: str, include_synonyms: bool, include_docs: bool
) -> list[Body]:
    node_id = apis.config.node_id
    cluster = dict(image.broker_config(""))
    if not name:
        per_broker: dict[str, str] = {}
        names = sorted(cluster)
    elif _node_id(name) is None:
        raise InvalidRequestError(f"Broker id must be an integer, but it is: {name}")
    elif _node_id(name) == node_id:
        per_broker = dict(image.broker_config(name))
        names = sorted(set(BROKER_CONFIGS) | set(per_broker) | set(cluster))
    else:
        raise InvalidRequestError(
            f"Unexpected broker id, expected {node_id} or empty string, but received {name}"
        )
    layers: list[_Layer] = [
        (DYNAMIC_BROKER_CONFIG, per_broker),
        (DYNAMIC_DEFAULT_BROKER_CONFIG, cluster),
        (STATIC_BROKER_CONFIG, _static_configs(apis)),
        (DEFAULT_CONFIG, _broker_defaults()),
    ]
    entries = []
    for config in names:
        synonyms = _synonyms(config, _BROKER_SYNONYMS.get(config, (config,)), layers)
        if not name:
            synonyms = [s for s in synonyms if s.source == DYNAMIC_DEFAULT_BROKER_CONFIG]
            value: str | None = cluster[config]
        elif synonyms:
            value = synonyms[0].value
        else:
            value = config_value_to_string(apis.config.values.get(config))
        read_only = config not in DYNAMIC_BROKER_CONFIGS
        key = BROKER_CONFIGS.get(config)
        entries.append(
            _entry(config, value, synonyms, key, read_only, include_synonyms, include_docs)
        )
    return entries


# -- AlterConfigs and IncrementalAlterConfigs ---------------------------------------------------


def _resource_errors(resources: Sequence[Body]) -> dict[int, KafkaError]:
    """Kafka's check that no resource is named twice: both get INVALID_REQUEST."""
    counts = Counter((r["resource_type"], r["resource_name"]) for r in resources)
    return {
        i: InvalidRequestError("Each resource must appear at most once.")
        for i, r in enumerate(resources)
        if counts[(r["resource_type"], r["resource_name"])] > 1
    }


def _check_config_names(configs: Sequence[Body], nulls: Sequence[str]) -> None:
    names = [c["name"] for c in configs]
    if len(set(names)) != len(names):
        raise InvalidRequestError("Error due to duplicate config keys")
    if nulls:
        raise InvalidRequestError("Null value not supported for : " + ", ".join(nulls))


def _check_broker_name(apis: BrokerApis, name: str) -> None:
    """A BROKER resource is this broker (its id) or the cluster-wide default (empty)."""
    if not name:
        return
    node = _node_id(name)
    if node is None:
        raise InvalidRequestError(f"Node id must be an integer, but it is: {name}")
    if node != apis.config.node_id:
        raise InvalidRequestError(
            f"Unexpected broker id, expected {apis.config.node_id}, but received {name}"
        )


def _kafka_set(names: Sequence[str]) -> str:
    return "Set(" + ", ".join(names) + ")"


def _validate_broker_configs(props: Mapping[str, str | None], per_broker: bool) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs over a broker resource's new configs
    (INVALID_REQUEST, as Kafka answers it: KAFKA-13609)."""
    fixed = sorted(k for k in props if k in BROKER_CONFIGS and k not in DYNAMIC_BROKER_CONFIGS)
    if fixed:
        raise InvalidRequestError(f"Cannot update these configs dynamically: {_kafka_set(fixed)}")
    for k, v in props.items():
        key = BROKER_CONFIGS.get(k)
        if key is not None and v is not None:
            try:
                parse_value(key, v)
            except InvalidConfigurationError as e:
                raise InvalidRequestError(e.message) from None
    if not per_broker:
        named = sorted(k for k in props if k in _PER_BROKER_CONFIGS)
        if named:
            raise InvalidRequestError(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {_kafka_set(named)}"
            )


def _list_value(op: AlterConfigOp, old: str | None, key: ConfigKey) -> str:
    """Kafka's APPEND or SUBTRACT on a LIST config: from its value, or from its default when
    it is not set."""
    base = old if old is not None else config_value_to_string(key.default)
    items = [v for v in (base or "").split(",") if v]
    given = (op.value or "").split(",")
    if op.op == "APPEND":
        items += [v for v in given if v not in items]
    else:
        items = [v for v in items if v not in given]
    return ",".join(items)


def _broker_changes(
    current: Mapping[str, str], ops: Sequence[AlterConfigOp]
) -> tuple[dict[str, str | None], list[AlterConfigOp]]:
    """A broker resource's configs after ``ops`` (Kafka's prepareIncrementalConfigs), and the
    ops with each APPEND and SUBTRACT turned into the SET of its result."""
    props: dict[str, str | None] = dict(current)
    resolved = []
    for op in ops:
        if op.op in ("APPEND", "SUBTRACT"):
            key = BROKER_CONFIGS.get(op.name)
            if key is None:
                raise InvalidConfigurationError(f"Unknown config name: {op.name}")
            if key.type != "list":
                raise InvalidConfigurationError(
                    f"Config value {op.op.lower()} is not allowed for config key: {op.name}"
                )
            op = AlterConfigOp(op.name, "SET", _list_value(op, props.get(op.name), key))
        if op.op == "SET":
            props[op.name] = op.value
        else:
            props.pop(op.name, None)
        resolved.append(op)
    return props, resolved


def _topic_changes(current: Mapping[str, str], ops: Sequence[AlterConfigOp]) -> list[AlterConfigOp]:
    """``ops`` with each APPEND and SUBTRACT turned into the SET of its result (Kafka's
    controller appends to the default of a config the topic does not set)."""
    resolved = []
    for op in ops:
        if op.op in ("APPEND", "SUBTRACT"):
            key = TOPIC_CONFIGS.get(op.name)
            if key is None or key.type != "list":
                raise InvalidConfigurationError(
                    f"Can't {op.op} to key {op.name} because its type is not LIST."
                )
            op = AlterConfigOp(op.name, "SET", _list_value(op, current.get(op.name), key))
        resolved.append(op)
    return resolved


def _check_topic_name(name: str) -> None:
    if not name:
        raise InvalidRequestError("Default topic resources are not allowed.")
    validate_topic_name(name)


async def _alter(
    apis: BrokerApis,
    resources: Sequence[Body],
    changes: Mapping[int, tuple[ConfigResourceType, str, list[AlterConfigOp]]],
    errors: Mapping[int, KafkaError],
    validate_only: bool,
) -> Body:
    """Forward ``changes`` (by resource index) to the controller; answer every resource, in
    the request's order, with its error from ``errors`` or the controller's answer."""
    order = sorted(changes)
    answers = await apis.handle_alter_configs([changes[i] for i in order], validate_only)
    results: dict[int, KafkaError | None] = dict(errors)
    results.update(zip(order, answers, strict=True))
    responses = []
    for i, r in enumerate(resources):
        err = results.get(i)
        code, message = _error(err) if err is not None else (0, None)
        responses.append(
            {
                "error_code": code,
                "error_message": message,
                "resource_type": r["resource_type"],
                "resource_name": r["resource_name"],
            }
        )
    return {"responses": responses}


async def incremental_alter_configs(
    apis: BrokerApis, body: Body, denied: Authorize = _allowed
) -> Body:
    """IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on TOPIC and BROKER
    resources; ``validate_only`` checks without changing anything."""
    image = apis.image()

    def ops_for(rtype: int, name: str, configs: list[Body]) -> list[AlterConfigOp]:
        _check_config_names(
            configs,
            [c["name"] for c in configs if c["config_operation"] != 1 and c["value"] is None],
        )
        ops: list[AlterConfigOp] = []
        for c in configs:
            kind = _OPS.get(c["config_operation"])
            if kind is None:
                raise InvalidRequestError(f"Unknown operations type {c['config_operation']}")
            ops.append(AlterConfigOp(c["name"], kind, c["value"] if kind != "DELETE" else None))
        if rtype == BROKER:
            _check_broker_name(apis, name)
            props, ops = _broker_changes(image.broker_config(name), ops)
            _validate_broker_configs(props, per_broker=bool(name))
            return ops
        if rtype == TOPIC:
            _check_topic_name(name)
            return _topic_changes(image.topic_config(name), ops)
        raise _unsupported(rtype)

    return await _alter_each(apis, body, ops_for, denied)


async def alter_configs(apis: BrokerApis, body: Body, denied: Authorize = _allowed) -> Body:
    """AlterConfigs (the legacy form): each resource's dynamic configs become exactly those
    given; the ones not given are removed."""
    image = apis.image()

    def ops_for(rtype: int, name: str, configs: list[Body]) -> list[AlterConfigOp]:
        _check_config_names(configs, [c["name"] for c in configs if c["value"] is None])
        given: dict[str, Any] = {c["name"]: c["value"] for c in configs}
        if rtype == BROKER:
            _check_broker_name(apis, name)
            _validate_broker_configs(given, per_broker=bool(name))
            current: Mapping[str, str] = image.broker_config(name)
        elif rtype == TOPIC:
            _check_topic_name(name)
            current = image.topic_config(name)
        else:
            raise _unsupported(rtype)
        ops = [AlterConfigOp(k, "SET", v) for k, v in given.items()]
        return ops + [AlterConfigOp(k, "DELETE") for k in sorted(current) if k not in given]

    return await _alter_each(apis, body, ops_for, denied)


async def _alter_each(
    apis: BrokerApis,
    body: Body,
    ops_for: Callable[[int, str, list[Body]], list[AlterConfigOp]],
    denied: Authorize,
) -> Body:
    """Each resource of an alter request turned into its changes by ``ops_for`` (a
    KafkaError is that resource's answer), then applied (or only checked); ``denied`` says
    which resources the sender may not alter."""
    resources: list[Body] = body["resources"]
    errors = _resource_errors(resources)
    changes: dict[int, tuple[ConfigResourceType, str, list[AlterConfigOp]]] = {}
    for i, r in enumerate(resources):
        if i in errors:
            continue
        rtype, name = r["resource_type"], r["resource_name"]
        try:
            refused = denied(rtype, name)
            if refused is not None:
                raise refused
            ops = ops_for(rtype, name, r["configs"])
        except KafkaError as e:
            errors[i] = e
            continue
        changes[i] = (ConfigResourceType(rtype), name, ops)
    return await _alter(apis, resources, changes, errors, bool(body["validate_only"]))
