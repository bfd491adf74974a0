"""Client quota messages (``quota.proto``) to and from domain values, for the AdminService,
for a broker forwarding alterations to the controller, and for the metadata log's
ClientQuotaRecord."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from rillet.broker.quotas import QuotaFilterComponent
from rillet.controller.quotas import QuotaAlteration, QuotaOp
from rillet.errors import KafkaError
from rillet.metadata.records import QuotaEntity
from rillet.protocol.errors import error_from_wire, set_error
from rillet.protocol.gen.v1 import quota_pb2 as pb

__all__ = [
    "alter_quotas_request_from_pb",
    "alter_quotas_request_to_pb",
    "alter_quotas_response",
    "alter_quotas_results_from_pb",
    "describe_quotas_request_from_pb",
    "describe_quotas_response",
    "entity_from_pb",
    "entity_to_pb",
]


def entity_from_pb(components: Iterable[pb.QuotaEntityComponent]) -> QuotaEntity:
    return tuple((c.entity_type, None if c.default else c.entity_name) for c in components)


def entity_to_pb(entity: QuotaEntity) -> list[pb.QuotaEntityComponent]:
    return [
        pb.QuotaEntityComponent(entity_type=kind, entity_name=name or "", default=name is None)
        for kind, name in entity
    ]


# -- AlterClientQuotas ----------------------------------------------------------------------


def alter_quotas_request_from_pb(
    request: pb.AlterClientQuotasRequest,
) -> tuple[list[QuotaAlteration], bool]:
    alterations = [
        QuotaAlteration(
            entity_from_pb(entry.entity),
            tuple(QuotaOp(op.key, None if op.remove else op.value) for op in entry.ops),
        )
        for entry in request.entries
    ]
    return alterations, request.validate_only


def alter_quotas_request_to_pb(
    alterations: Sequence[QuotaAlteration], validate_only: bool
) -> pb.AlterClientQuotasRequest:
    request = pb.AlterClientQuotasRequest(validate_only=validate_only)
    for alteration in alterations:
        entry = request.entries.add()
        entry.entity.extend(entity_to_pb(alteration.entity))
        for op in alteration.ops:
            entry.ops.add(key=op.key, value=op.value or 0.0, remove=op.value is None)
    return request


def alter_quotas_response(
    alterations: Sequence[QuotaAlteration], results: Sequence[KafkaError | None]
) -> pb.AlterClientQuotasResponse:
    response = pb.AlterClientQuotasResponse()
    for alteration, err in zip(alterations, results, strict=True):
        out = response.results.add()
        out.entity.extend(entity_to_pb(alteration.entity))
        if err is not None:
            set_error(out, err)
    return response


def alter_quotas_results_from_pb(
    response: pb.AlterClientQuotasResponse,
) -> list[KafkaError | None]:
    return [error_from_wire(r.error_code, r.error_message) for r in response.results]


# -- DescribeClientQuotas -------------------------------------------------------------------


def describe_quotas_request_from_pb(
    request: pb.DescribeClientQuotasRequest,
) -> tuple[list[QuotaFilterComponent], bool]:
    components = [
        QuotaFilterComponent(
            c.entity_type,
            int(c.match_type),
            c.match if c.match_type == pb.DescribeClientQuotasRequest.MATCH_TYPE_EXACT else None,
        )
        for c in request.components
    ]
    return components, request.strict


def describe_quotas_response(
    found: Sequence[tuple[QuotaEntity, Mapping[str, float]]] | KafkaError,
) -> pb.DescribeClientQuotasResponse:
    response = pb.DescribeClientQuotasResponse()
    if isinstance(found, KafkaError):
        set_error(response, found)
        return response
    for entity, values in found:
        entry = response.entries.add()
        entry.entity.extend(entity_to_pb(entity))
        entry.values.update(values)
    return response
