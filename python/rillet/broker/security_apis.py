"""The broker's security admin handlers, free of any transport: ACLs (DescribeAcls from the
broker's metadata image; CreateAcls and DeleteAcls forwarded to the active controller),
SCRAM credentials (DescribeUserScramCredentials from the image, AlterUserScramCredentials
forwarded), client quotas (DescribeClientQuotas from the image, AlterClientQuotas
forwarded), and the credential lookup a SCRAM listener authenticates against.

Without an authorizer the ACL requests are answered SECURITY_DISABLED, as Kafka answers them
("No Authorizer is configured"); SCRAM credentials do not need one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rillet.broker.authorizer import BrokerAuthorizer
from rillet.broker.controller_channel import ControllerChannel
from rillet.broker.quotas import QuotaFilterComponent, describe_client_quotas
from rillet.controller.quotas import QuotaAlteration
from rillet.controller.scram import ScramDeletion, ScramUpsertion, users_named
from rillet.errors import KafkaError, ResourceNotFoundError, SecurityDisabledError
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import QuotaEntity
from rillet.security.acls import AclBinding, AclBindingFilter
from rillet.security.scram import ScramCredential, ScramMechanism

__all__ = ["DescribedUser", "SecurityApis"]


@dataclass(frozen=True)
class DescribedUser:
    """A user's SCRAM credentials: (mechanism code, iterations) each, or why none."""

    user: str
    error: KafkaError | None
    credentials: list[tuple[int, int]]


def _disabled() -> SecurityDisabledError:
    return SecurityDisabledError("No Authorizer is configured.")


class SecurityApis:
    """See the module doc."""

    def __init__(
        self,
        channel: ControllerChannel,
        image: Callable[[], MetadataImage],
        authorizer: BrokerAuthorizer | None,
    ) -> None:
        self.channel = channel
        self.image = image
        self.authorizer = authorizer

    # -- ACLs ------------------------------------------------------------------------------

    def describe_acls(self, flt: AclBindingFilter) -> list[AclBinding] | KafkaError:
        if self.authorizer is None:
            return _disabled()
        try:
            flt.validate()
        except KafkaError as e:
            return e
        return self.authorizer.current().acls(flt)

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        if self.authorizer is None:
            return [_disabled()] * len(bindings)
        if not bindings:
            return []
        try:
            return await self.channel.create_acls(bindings)
        except KafkaError as e:
            return [e] * len(bindings)

    async def delete_acls(
        self, filters: Sequence[AclBindingFilter]
    ) -> list[KafkaError | list[AclBinding]]:
        if self.authorizer is None:
            return [_disabled()] * len(filters)
        if not filters:
            return []
        try:
            return await self.channel.delete_acls(filters)
        except KafkaError as e:
            return [e] * len(filters)

    # -- SCRAM credentials -----------------------------------------------------------------

    def describe_user_scram_credentials(self, users: Sequence[str] | None) -> list[DescribedUser]:
        """``users`` (None or empty: every user with a credential), each with its
        mechanisms; a user named without one is RESOURCE_NOT_FOUND."""
        by_user: dict[str, list[tuple[int, int]]] = {}
        for (name, mechanism), record in sorted(self.image().scram_credentials.items()):
            by_user.setdefault(name, []).append((mechanism, record.iterations))
        if not users:
            return [DescribedUser(u, None, creds) for u, creds in by_user.items()]
        out = []
        for user in dict.fromkeys(users):
            creds = by_user.get(user)
            out.append(
                DescribedUser(user, None, creds)
                if creds
                else DescribedUser(
                    user,
                    ResourceNotFoundError(
                        f"Attempt to describe a user credential that does not exist: {user}"
                    ),
                    [],
                )
            )
        return out

    async def alter_user_scram_credentials(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> list[tuple[str, KafkaError | None]]:
        if not deletions and not upsertions:
            return []
        try:
            return await self.channel.alter_user_scram_credentials(deletions, upsertions)
        except KafkaError as e:
            return [(u, e) for u in users_named(deletions, upsertions)]

    # -- client quotas ---------------------------------------------------------------------

    def describe_client_quotas(
        self, components: Sequence[QuotaFilterComponent], strict: bool
    ) -> list[tuple[QuotaEntity, Mapping[str, float]]] | KafkaError:
        try:
            return describe_client_quotas(self.image(), components, strict)
        except KafkaError as e:
            return e

    async def alter_client_quotas(
        self, alterations: Sequence[QuotaAlteration], validate_only: bool
    ) -> list[KafkaError | None]:
        if not alterations:
            return []
        try:
            return await self.channel.alter_client_quotas(alterations, validate_only)
        except KafkaError as e:
            return [e] * len(alterations)

    def scram_credential(self, mechanism: str, username: str) -> ScramCredential | None:
        """The credential a SCRAM listener checks ``username`` against, from the image."""
        record = self.image().scram_credentials.get(
            (username, int(ScramMechanism.from_name(mechanism)))
        )
        if record is None:
            return None
        return ScramCredential(record.salt, record.stored_key, record.server_key, record.iterations)
