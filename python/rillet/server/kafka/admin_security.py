"""Kafka's security admin api keys over its protocol: DescribeAcls, CreateAcls, DeleteAcls
(what ``kafka-acls.sh`` sends), DescribeUserScramCredentials and AlterUserScramCredentials
(what ``kafka-configs.sh --entity-type users`` sends), DescribeClientQuotas and
AlterClientQuotas (``kafka-configs.sh --entity-type users|clients`` with quota keys), over the
transport-agnostic :class:`~rillet.broker.security_apis.SecurityApis`.

As in Kafka, DescribeAcls needs DESCRIBE on the cluster, CreateAcls and DeleteAcls ALTER on
it; DescribeUserScramCredentials needs DESCRIBE on the cluster and AlterUserScramCredentials
ALTER; DescribeClientQuotas needs DESCRIBE_CONFIGS on it and AlterClientQuotas ALTER_CONFIGS.
A pattern type absent before v1 is LITERAL.
"""

from __future__ import annotations

from collections.abc import Mapping

from rillet.broker.quotas import QuotaFilterComponent
from rillet.broker.security_apis import SecurityApis
from rillet.controller.quotas import QuotaAlteration, QuotaOp
from rillet.controller.scram import ScramDeletion, ScramUpsertion, users_named
from rillet.errors import ClusterAuthorizationFailedError, KafkaError
from rillet.metadata.records import QuotaEntity
from rillet.security.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from rillet.server.kafka.request import Body, KafkaRequest, Served

__all__ = ["KafkaSecurityAdmin"]

_LITERAL = int(PatternType.LITERAL)


def _error(err: KafkaError | None) -> tuple[int, str | None]:
    if err is None:
        return 0, None
    return err.code, err.message or None


def _denied(req: KafkaRequest, operation: AclOperation) -> KafkaError | None:
    if req.allowed_on_cluster(operation):
        return None
    return ClusterAuthorizationFailedError(
        f"Not authorized to perform {operation.name} on the cluster"
    )


def _filter(f: Body, prefix: str = "") -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.from_code(f[f"resource_type{prefix}"]),
        f.get(f"resource_name{prefix}"),
        PatternType.from_code(f.get("pattern_type_filter", _LITERAL)),
        f.get("principal_filter"),
        f.get("host_filter"),
        AclOperation.from_code(f["operation"]),
        AclPermissionType.from_code(f["permission_type"]),
    )


def _binding_body(acl: AclBinding) -> Body:
    return {
        "resource_type": int(acl.resource_type),
        "resource_name": acl.resource_name,
        "pattern_type": int(acl.pattern_type),
        "principal": acl.principal,
        "host": acl.host,
        "operation": int(acl.operation),
        "permission_type": int(acl.permission_type),
    }


class KafkaSecurityAdmin:
    """See the module doc."""

    def __init__(self, security: SecurityApis) -> None:
        self.security = security

    def served(self) -> Mapping[int, Served]:
        return {
            29: Served(0, 3, self.describe_acls),  # DescribeAcls
            30: Served(0, 3, self.create_acls),  # CreateAcls
            31: Served(0, 3, self.delete_acls),  # DeleteAcls
            50: Served(0, 0, self.describe_user_scram_credentials),
            51: Served(0, 0, self.alter_user_scram_credentials),
            48: Served(0, 1, self.describe_client_quotas),
            49: Served(0, 1, self.alter_client_quotas),
        }

    # -- ACLs ------------------------------------------------------------------------------

    async def describe_acls(self, req: KafkaRequest) -> Body:
        found = _denied(req, AclOperation.DESCRIBE) or self.security.describe_acls(
            _filter(req.body, "_filter")
        )
        if isinstance(found, KafkaError):
            code, message = _error(found)
            return {"error_code": code, "error_message": message, "resources": []}
        by_pattern: dict[tuple[int, str, int], list[Body]] = {}
        for acl in found:
            key = (int(acl.resource_type), acl.resource_name, int(acl.pattern_type))
            by_pattern.setdefault(key, []).append(
                {
                    "principal": acl.principal,
                    "host": acl.host,
                    "operation": int(acl.operation),
                    "permission_type": int(acl.permission_type),
                }
            )
        return {
            "error_code": 0,
            "error_message": None,
            "resources": [
                {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
                for (t, n, p), acls in by_pattern.items()
            ],
        }

    async def create_acls(self, req: KafkaRequest) -> Body:
        creations = req.body["creations"]
        denied = _denied(req, AclOperation.ALTER)
        if denied is not None:
            results: list[KafkaError | None] = [denied] * len(creations)
        else:
            bindings = [
                AclBinding(
                    ResourceType.from_code(c["resource_type"]),
                    c["resource_name"],
                    PatternType.from_code(c.get("resource_pattern_type", _LITERAL)),
                    c["principal"],
                    c["host"],
                    AclOperation.from_code(c["operation"]),
                    AclPermissionType.from_code(c["permission_type"]),
                )
                for c in creations
            ]
            results = await self.security.create_acls(bindings)
        out = []
        for err in results:
            code, message = _error(err)
            out.append({"error_code": code, "error_message": message})
        return {"results": out}

    async def delete_acls(self, req: KafkaRequest) -> Body:
        filters = [_filter(f, "_filter") for f in req.body["filters"]]
        denied = _denied(req, AclOperation.ALTER)
        results = (
            [denied] * len(filters)
            if denied is not None
            else await self.security.delete_acls(filters)
        )
        out: list[Body] = []
        for result in results:
            if isinstance(result, KafkaError):
                code, message = _error(result)
                out.append({"error_code": code, "error_message": message, "matching_acls": []})
                continue
            out.append(
                {
                    "error_code": 0,
                    "error_message": None,
                    "matching_acls": [
                        {"error_code": 0, "error_message": None, **_binding_body(acl)}
                        for acl in result
                    ],
                }
            )
        return {"filter_results": out}

    # -- SCRAM credentials -----------------------------------------------------------------

    async def describe_user_scram_credentials(self, req: KafkaRequest) -> Body:
        denied = _denied(req, AclOperation.DESCRIBE)
        if denied is not None:
            code, message = _error(denied)
            return {"error_code": code, "error_message": message, "results": []}
        users = req.body.get("users")
        described = self.security.describe_user_scram_credentials(
            None if users is None else [u["name"] for u in users]
        )
        results = []
        for d in described:
            code, message = _error(d.error)
            results.append(
                {
                    "user": d.user,
                    "error_code": code,
                    "error_message": message,
                    "credential_infos": [
                        {"mechanism": m, "iterations": i} for m, i in d.credentials
                    ],
                }
            )
        return {"error_code": 0, "error_message": None, "results": results}

    async def alter_user_scram_credentials(self, req: KafkaRequest) -> Body:
        body = req.body
        deletions = [ScramDeletion(d["name"], d["mechanism"]) for d in body["deletions"]]
        upsertions = [
            ScramUpsertion(
                u["name"],
                u["mechanism"],
                u["iterations"],
                bytes(u["salt"]),
                bytes(u["salted_password"]),
            )
            for u in body["upsertions"]
        ]
        denied = _denied(req, AclOperation.ALTER)
        if denied is not None:
            results: list[tuple[str, KafkaError | None]] = [
                (u, denied) for u in users_named(deletions, upsertions)
            ]
        else:
            results = await self.security.alter_user_scram_credentials(deletions, upsertions)
        out = []
        for user, err in results:
            code, message = _error(err)
            out.append({"user": user, "error_code": code, "error_message": message})
        return {"results": out}

    # -- client quotas ---------------------------------------------------------------------

    async def describe_client_quotas(self, req: KafkaRequest) -> Body:
        found = _denied(req, AclOperation.DESCRIBE_CONFIGS) or self.security.describe_client_quotas(
            [
                QuotaFilterComponent(c["entity_type"], c["match_type"], c.get("match"))
                for c in req.body["components"]
            ],
            req.body["strict"],
        )
        if isinstance(found, KafkaError):
            code, message = _error(found)
            return {"error_code": code, "error_message": message, "entries": None}
        return {
            "error_code": 0,
            "error_message": None,
            "entries": [
                {
                    "entity": _entity_body(entity),
                    "values": [{"key": k, "value": v} for k, v in sorted(values.items())],
                }
                for entity, values in found
            ],
        }

    async def alter_client_quotas(self, req: KafkaRequest) -> Body:
        alterations = [
            QuotaAlteration(
                tuple((e["entity_type"], e.get("entity_name")) for e in entry["entity"]),
                tuple(
                    QuotaOp(op["key"], None if op["remove"] else op["value"]) for op in entry["ops"]
                ),
            )
            for entry in req.body["entries"]
        ]
        denied = _denied(req, AclOperation.ALTER_CONFIGS)
        results = (
            [denied] * len(alterations)
            if denied is not None
            else await self.security.alter_client_quotas(alterations, req.body["validate_only"])
        )
        out = []
        for alteration, err in zip(alterations, results, strict=True):
            code, message = _error(err)
            out.append(
                {
                    "error_code": code,
                    "error_message": message,
                    "entity": _entity_body(alteration.entity),
                }
            )
        return {"entries": out}


def _entity_body(entity: QuotaEntity) -> list[Body]:
    return [{"entity_type": kind, "entity_name": name} for kind, name in entity]
