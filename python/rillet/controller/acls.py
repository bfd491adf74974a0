"""ACLs (Kafka's AclControlManager): CreateAcls and DeleteAcls as metadata records.

Every ACL gets an id of its own and is one :class:`AccessControlEntryRecord`; deleting it
writes a :class:`RemoveAccessControlEntryRecord` with that id. Creating an ACL that exists
already writes nothing and succeeds, as in Kafka. Pure functions over a
:class:`~rillet.metadata.image.MetadataImage`.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence

from rillet.controller.results import ControllerResult
from rillet.errors import KafkaError
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import (
    AccessControlEntryRecord,
    MetadataRecord,
    RemoveAccessControlEntryRecord,
)
from rillet.security.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = ["binding_of", "create_acls", "delete_acls"]


def binding_of(record: AccessControlEntryRecord) -> AclBinding:
    """The ACL a record holds."""
    return AclBinding(
        ResourceType(record.resource_type),
        record.resource_name,
        PatternType(record.pattern_type),
        record.principal,
        record.host,
        AclOperation(record.operation),
        AclPermissionType(record.permission_type),
    )


def _record(acl_id: uuid.UUID, acl: AclBinding) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        acl_id,
        int(acl.resource_type),
        acl.resource_name,
        int(acl.pattern_type),
        acl.principal,
        acl.host,
        int(acl.operation),
        int(acl.permission_type),
    )


def create_acls(
    image: MetadataImage, rng: random.Random, acls: Sequence[AclBinding]
) -> ControllerResult[list[KafkaError | None]]:
    """One result per ACL, in order: None, or why it was refused."""
    existing = {binding_of(r) for r in image.acls.values()}
    records: list[MetadataRecord] = []
    results: list[KafkaError | None] = []
    for acl in acls:
        try:
            acl.validate()
        except KafkaError as e:
            results.append(e)
            continue
        results.append(None)
        if acl in existing:
            continue
        existing.add(acl)
        acl_id = uuid.UUID(int=rng.getrandbits(128), version=4)
        while acl_id in image.acls:
            acl_id = uuid.UUID(int=rng.getrandbits(128), version=4)
        records.append(_record(acl_id, acl))
    return ControllerResult(records, results)


def delete_acls(
    image: MetadataImage, filters: Sequence[AclBindingFilter]
) -> ControllerResult[list[KafkaError | list[AclBinding]]]:
    """One result per filter, in order: the ACLs it deleted, or why it was refused. An ACL
    two filters match is deleted once (and reported under both)."""
    records: list[MetadataRecord] = []
    removed: set[uuid.UUID] = set()
    results: list[KafkaError | list[AclBinding]] = []
    ordered = sorted(image.acls.values(), key=lambda r: r.id)
    for flt in filters:
        try:
            flt.validate()
        except KafkaError as e:
            results.append(e)
            continue
        matched: list[AclBinding] = []
        for record in ordered:
            acl = binding_of(record)
            if flt.matches(acl):
                matched.append(acl)
                if record.id not in removed:
                    removed.add(record.id)
                    records.append(RemoveAccessControlEntryRecord(record.id))
        results.append(matched)
    return ControllerResult(records, results)
