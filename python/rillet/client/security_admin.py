"""The AdminClient's security calls: ACLs (Kafka's ``Admin.createAcls``, ``describeAcls``,
``deleteAcls``), SCRAM credentials (``describeUserScramCredentials``,
``alterUserScramCredentials``, KIP-554) and client quotas (``describeClientQuotas``,
``alterClientQuotas``, KIP-546), each one AdminService request to the bootstrap
server, which forwards changes to the active controller.

As Kafka's admin client does, an upsertion of a SCRAM credential is salted and hashed here
(PBKDF2 with a random salt, RFC 5802's ``Hi``): the password never leaves the client, only the
salt, the iteration count and the salted password do.
"""

from __future__ import annotations

import secrets
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rillet.broker.quotas import QuotaFilterComponent
from rillet.controller.quotas import QuotaAlteration, entity_text
from rillet.controller.scram import ScramDeletion, ScramUpsertion
from rillet.errors import KafkaError
from rillet.metadata.records import QuotaEntity
from rillet.protocol.errors import error_from_wire
from rillet.protocol.gen.v1 import quota_pb2, security_pb2
from rillet.protocol.quotas import (
    alter_quotas_request_to_pb,
    alter_quotas_results_from_pb,
    entity_from_pb,
)
from rillet.protocol.security import (
    acl_binding_from_pb,
    acl_binding_to_pb,
    acl_filter_to_pb,
    alter_scram_request_to_pb,
    alter_scram_results_from_pb,
    create_acls_results_from_pb,
    delete_acls_results_from_pb,
)
from rillet.security.acls import ANY_FILTER, AclBinding, AclBindingFilter
from rillet.security.scram import ScramMechanism, salted_password

__all__ = [
    "DEFAULT_SCRAM_ITERATIONS",
    "SCRAM_SALT_BYTES",
    "ScramCredentialInfo",
    "SecurityAdmin",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
]

# Kafka's default iteration count for a new SCRAM credential (kafka-configs.sh's).
DEFAULT_SCRAM_ITERATIONS = 4096
# The length of the random salt of a new SCRAM credential.
SCRAM_SALT_BYTES = 32


@dataclass(frozen=True)
class ScramCredentialInfo:
    """One of a user's SCRAM credentials, as DescribeUserScramCredentials reports it."""

    mechanism: ScramMechanism
    iterations: int


@dataclass(frozen=True)
class UserScramCredentialUpsertion:
    """Set ``user``'s credential for ``mechanism`` from ``password`` (Kafka's
    ``UserScramCredentialUpsertion``); ``salt`` None means a fresh random one."""

    user: str
    mechanism: ScramMechanism
    password: str
    iterations: int = DEFAULT_SCRAM_ITERATIONS
    salt: bytes | None = None


@dataclass(frozen=True)
class UserScramCredentialDeletion:
    """Delete ``user``'s credential for ``mechanism`` (Kafka's
    ``UserScramCredentialDeletion``)."""

    user: str
    mechanism: ScramMechanism


def _mechanism(code: int) -> ScramMechanism:
    try:
        return ScramMechanism(code)
    except ValueError:
        return ScramMechanism.UNKNOWN


def _raise_first(errors: Mapping[str, KafkaError]) -> None:
    """Raise the error, or one of the first's class naming each failure when several."""
    if len(errors) == 1:
        raise next(iter(errors.values()))
    if errors:
        first = next(iter(errors.values()))
        raise type(first)("; ".join(f"{k}: {e}" for k, e in errors.items()))


class SecurityAdmin(ABC):
    """Mixed into :class:`~rillet.client.admin.AdminClient`."""

    @abstractmethod
    def _call(self, name: str, request: Any) -> Any:
        """The AdminClient's: send an AdminService request to the bootstrap server."""

    # -- ACLs --------------------------------------------------------------------------------

    def create_acls(self, acls: Sequence[AclBinding]) -> None:
        """Create ``acls`` (one that exists already is left as it is). An ACL the broker
        refuses (INVALID_REQUEST for a malformed one, SECURITY_DISABLED without an authorizer,
        CLUSTER_AUTHORIZATION_FAILED) raises; with several failures the message names each."""
        if not acls:
            return
        request = security_pb2.CreateAclsRequest(creations=[acl_binding_to_pb(a) for a in acls])
        results = create_acls_results_from_pb(self._call("CreateAcls", request))
        _raise_first(
            {str(acl): err for acl, err in zip(acls, results, strict=False) if err is not None}
        )

    def describe_acls(self, acl_filter: AclBindingFilter = ANY_FILTER) -> list[AclBinding]:
        """The ACLs ``acl_filter`` matches (every ACL by default)."""
        response = self._call(
            "DescribeAcls", security_pb2.DescribeAclsRequest(filter=acl_filter_to_pb(acl_filter))
        )
        err = error_from_wire(response.error_code, response.error_message)
        if err is not None:
            raise err
        return [acl_binding_from_pb(a) for a in response.acls]

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Delete every ACL one of ``filters`` matches; returns, per filter, the ACLs it
        deleted. A filter the broker refuses raises."""
        if not filters:
            return []
        request = security_pb2.DeleteAclsRequest(filters=[acl_filter_to_pb(f) for f in filters])
        results = delete_acls_results_from_pb(self._call("DeleteAcls", request))
        _raise_first(
            {str(f): r for f, r in zip(filters, results, strict=False) if isinstance(r, KafkaError)}
        )
        return [r for r in results if not isinstance(r, KafkaError)]

    # -- SCRAM credentials -------------------------------------------------------------------

    def describe_user_scram_credentials(
        self, users: Sequence[str] | None = None
    ) -> dict[str, list[ScramCredentialInfo] | KafkaError]:
        """Each user's SCRAM credentials (mechanism and iterations; never a secret), for
        ``users``, or every user that has one when None or empty. A user named that has none
        maps to its error (RESOURCE_NOT_FOUND); an error for the whole request raises."""
        response = self._call(
            "DescribeUserScramCredentials",
            security_pb2.DescribeUserScramCredentialsRequest(users=list(users or [])),
        )
        err = error_from_wire(response.error_code, response.error_message)
        if err is not None:
            raise err
        out: dict[str, list[ScramCredentialInfo] | KafkaError] = {}
        for r in response.results:
            user_err = error_from_wire(r.error_code, r.error_message)
            out[r.user] = (
                user_err
                if user_err is not None
                else [
                    ScramCredentialInfo(_mechanism(int(c.mechanism)), c.iterations)
                    for c in r.credential_infos
                ]
            )
        return out

    def alter_user_scram_credentials(
        self,
        alterations: Sequence[UserScramCredentialUpsertion | UserScramCredentialDeletion],
    ) -> None:
        """Apply the upsertions and deletions (Kafka's ``alterUserScramCredentials``). Each
        user's changes succeed or fail together; a user's failure raises (with several, the
        message names each user)."""
        deletions: list[ScramDeletion] = []
        upsertions: list[ScramUpsertion] = []
        for a in alterations:
            if isinstance(a, UserScramCredentialDeletion):
                deletions.append(ScramDeletion(a.user, int(a.mechanism)))
                continue
            if a.mechanism not in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
                raise ValueError(f"not a SCRAM mechanism: {a.mechanism!r}")
            salt = a.salt if a.salt is not None else secrets.token_bytes(SCRAM_SALT_BYTES)
            upsertions.append(
                ScramUpsertion(
                    a.user,
                    int(a.mechanism),
                    a.iterations,
                    salt,
                    salted_password(a.mechanism, a.password, salt, a.iterations),
                )
            )
        if not deletions and not upsertions:
            return
        results = alter_scram_results_from_pb(
            self._call(
                "AlterUserScramCredentials", alter_scram_request_to_pb(deletions, upsertions)
            )
        )
        _raise_first({user: err for user, err in results if err is not None})

    # -- client quotas -----------------------------------------------------------------------

    def describe_client_quotas(
        self, components: Sequence[QuotaFilterComponent] = (), strict: bool = False
    ) -> list[tuple[QuotaEntity, dict[str, float]]]:
        """The client quota entities ``components`` all match (Kafka's
        ``describeClientQuotas``), each with its quotas; ``strict`` leaves out entities of
        types no component names. An invalid filter raises (INVALID_REQUEST)."""
        request = quota_pb2.DescribeClientQuotasRequest(strict=strict)
        for c in components:
            request.components.add(
                entity_type=c.entity_type, match_type=c.match_type, match=c.match or ""
            )
        response = self._call("DescribeClientQuotas", request)
        err = error_from_wire(response.error_code, response.error_message)
        if err is not None:
            raise err
        return [(entity_from_pb(e.entity), dict(e.values)) for e in response.entries]

    def alter_client_quotas(
        self, alterations: Sequence[QuotaAlteration], validate_only: bool = False
    ) -> None:
        """Set and remove client quotas (Kafka's ``alterClientQuotas``). Each entity's
        changes succeed or fail together; a failure raises (with several, the message names
        each entity)."""
        if not alterations:
            return
        request = alter_quotas_request_to_pb(alterations, validate_only)
        results = alter_quotas_results_from_pb(self._call("AlterClientQuotas", request))
        _raise_first(
            {
                entity_text(a.entity): err
                for a, err in zip(alterations, results, strict=False)
                if err is not None
            }
        )
