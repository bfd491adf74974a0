"""Dynamic configs (Kafka's ConfigurationControlManager): IncrementalAlterConfigs on topics
and brokers, validated as Kafka validates them, written as ConfigRecords of what changed.

Pure functions over a :class:`~rillet.metadata.image.MetadataImage`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rillet import errors
from rillet.config import resolve_topic_config
from rillet.controller.results import ControllerResult
from rillet.errors import KafkaError
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import ConfigRecord, ConfigResourceType, MetadataRecord

__all__ = ["AlterConfigOp", "incremental_alter_configs"]


@dataclass(frozen=True)
class AlterConfigOp:
    """IncrementalAlterConfigs: ``op`` is SET, DELETE, APPEND or SUBTRACT."""

    name: str
    op: str
    value: str | None = None


def incremental_alter_configs(
    image: MetadataImage,
    broker_config: Mapping[str, object],
    resources: Sequence[tuple[ConfigResourceType, str, Sequence[AlterConfigOp]]],
    validate_only: bool = False,
) -> ControllerResult[list[KafkaError | None]]:
    """One result per resource; ``broker_config`` is the broker's topic-config synonyms,
    which a topic's new configs are resolved against."""
    records: list[MetadataRecord] = []
    results: list[KafkaError | None] = []
    for rtype, rname, ops in resources:
        try:
            recs = _alter_configs(image, broker_config, rtype, rname, ops)
        except KafkaError as e:
            results.append(e)
            continue
        results.append(None)
        if not validate_only:
            records.extend(recs)
    return ControllerResult(records, results)


def _alter_configs(
    image: MetadataImage,
    broker_config: Mapping[str, object],
    rtype: ConfigResourceType,
    rname: str,
    ops: Sequence[AlterConfigOp],
) -> list[MetadataRecord]:
    if rtype == ConfigResourceType.TOPIC:
        if image.topic(rname) is None:
            raise errors.UnknownTopicOrPartitionError(f"Topic {rname} does not exist.")
        before = image.topic_config(rname)
    else:
        before = image.broker_config(rname)
    current = dict(before)
    for op in ops:
        if op.op == "SET":
            if op.value is None:
                raise errors.InvalidRequestError(f"SET of {op.name} needs a value")
            current[op.name] = op.value
        elif op.op == "DELETE":
            current.pop(op.name, None)
        elif op.op in ("APPEND", "SUBTRACT"):
            items = [v for v in current.get(op.name, "").split(",") if v]
            given = [v for v in (op.value or "").split(",") if v]
            if op.op == "APPEND":
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            current[op.name] = ",".join(items)
        else:
            raise errors.InvalidRequestError(f"unknown config operation {op.op}")
    if rtype == ConfigResourceType.TOPIC:
        resolve_topic_config(broker_config, current)
    records: list[MetadataRecord] = []
    for name in sorted(set(before) | set(current)):
        if before.get(name) != current.get(name):
            records.append(ConfigRecord(rtype, rname, name, current.get(name)))
    return records
