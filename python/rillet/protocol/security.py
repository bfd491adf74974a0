"""ACL and SCRAM admin messages (``security.proto``) to and from domain values, for the
AdminService and for a broker forwarding changes to the controller. The proto enums keep
Kafka's codes, so an enum converts by number; an unknown number becomes UNKNOWN, which
validation refuses."""

from __future__ import annotations

from collections.abc import Sequence

from rillet.controller.scram import ScramDeletion, ScramUpsertion
from rillet.errors import KafkaError
from rillet.protocol.errors import error_from_wire, set_error
from rillet.protocol.gen.v1 import security_pb2 as pb
from rillet.security.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = [
    "acl_binding_from_pb",
    "acl_binding_to_pb",
    "acl_filter_from_pb",
    "acl_filter_to_pb",
    "alter_scram_request_from_pb",
    "alter_scram_request_to_pb",
    "alter_scram_response",
    "alter_scram_results_from_pb",
    "create_acls_response",
    "create_acls_results_from_pb",
    "delete_acls_response",
    "delete_acls_results_from_pb",
]


def acl_binding_from_pb(m: pb.AclBinding) -> AclBinding:
    return AclBinding(
        ResourceType.from_code(m.resource_type),
        m.resource_name,
        PatternType.from_code(m.pattern_type),
        m.principal,
        m.host,
        AclOperation.from_code(m.operation),
        AclPermissionType.from_code(m.permission_type),
    )


def acl_binding_to_pb(acl: AclBinding) -> pb.AclBinding:
    return pb.AclBinding(
        resource_type=int(acl.resource_type),  # type: ignore[arg-type]
        resource_name=acl.resource_name,
        pattern_type=int(acl.pattern_type),  # type: ignore[arg-type]
        principal=acl.principal,
        host=acl.host,
        operation=int(acl.operation),  # type: ignore[arg-type]
        permission_type=int(acl.permission_type),  # type: ignore[arg-type]
    )


def acl_filter_from_pb(m: pb.AclBindingFilter) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.from_code(m.resource_type),
        m.resource_name if m.HasField("resource_name") else None,
        PatternType.from_code(m.pattern_type),
        m.principal if m.HasField("principal") else None,
        m.host if m.HasField("host") else None,
        AclOperation.from_code(m.operation),
        AclPermissionType.from_code(m.permission_type),
    )


def acl_filter_to_pb(flt: AclBindingFilter) -> pb.AclBindingFilter:
    m = pb.AclBindingFilter(
        resource_type=int(flt.resource_type),  # type: ignore[arg-type]
        pattern_type=int(flt.pattern_type),  # type: ignore[arg-type]
        operation=int(flt.operation),  # type: ignore[arg-type]
        permission_type=int(flt.permission_type),  # type: ignore[arg-type]
    )
    if flt.resource_name is not None:
        m.resource_name = flt.resource_name
    if flt.principal is not None:
        m.principal = flt.principal
    if flt.host is not None:
        m.host = flt.host
    return m


# -- CreateAcls and DeleteAcls -------------------------------------------------------------------


def create_acls_response(results: Sequence[KafkaError | None]) -> pb.CreateAclsResponse:
    response = pb.CreateAclsResponse()
    for err in results:
        out = response.results.add()
        if err is not None:
            set_error(out, err)
    return response


def create_acls_results_from_pb(response: pb.CreateAclsResponse) -> list[KafkaError | None]:
    return [error_from_wire(r.error_code, r.error_message) for r in response.results]


def delete_acls_response(
    results: Sequence[KafkaError | Sequence[AclBinding]],
) -> pb.DeleteAclsResponse:
    response = pb.DeleteAclsResponse()
    for result in results:
        out = response.filter_results.add()
        if isinstance(result, KafkaError):
            set_error(out, result)
        else:
            out.matching_acls.extend(acl_binding_to_pb(a) for a in result)
    return response


def delete_acls_results_from_pb(
    response: pb.DeleteAclsResponse,
) -> list[KafkaError | list[AclBinding]]:
    out: list[KafkaError | list[AclBinding]] = []
    for r in response.filter_results:
        err = error_from_wire(r.error_code, r.error_message)
        out.append(err if err is not None else [acl_binding_from_pb(a) for a in r.matching_acls])
    return out


# -- AlterUserScramCredentials -------------------------------------------------------------------


def alter_scram_request_from_pb(
    request: pb.AlterUserScramCredentialsRequest,
) -> tuple[list[ScramDeletion], list[ScramUpsertion]]:
    return (
        [ScramDeletion(d.name, int(d.mechanism)) for d in request.deletions],
        [
            ScramUpsertion(u.name, int(u.mechanism), u.iterations, u.salt, u.salted_password)
            for u in request.upsertions
        ],
    )


def alter_scram_request_to_pb(
    deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
) -> pb.AlterUserScramCredentialsRequest:
    request = pb.AlterUserScramCredentialsRequest()
    for d in deletions:
        request.deletions.add(name=d.name, mechanism=d.mechanism)
    for u in upsertions:
        request.upsertions.add(
            name=u.name,
            mechanism=u.mechanism,
            iterations=u.iterations,
            salt=u.salt,
            salted_password=u.salted_password,
        )
    return request


def alter_scram_response(
    results: Sequence[tuple[str, KafkaError | None]],
) -> pb.AlterUserScramCredentialsResponse:
    response = pb.AlterUserScramCredentialsResponse()
    for user, err in results:
        out = response.results.add(user=user)
        if err is not None:
            set_error(out, err)
    return response


def alter_scram_results_from_pb(
    response: pb.AlterUserScramCredentialsResponse,
) -> list[tuple[str, KafkaError | None]]:
    return [(r.user, error_from_wire(r.error_code, r.error_message)) for r in response.results]
