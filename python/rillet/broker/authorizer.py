"""The broker's authorizer (``authorizer.class.name`` set to Kafka's StandardAuthorizer):
:class:`~rillet.security.acls.Authorizer` over the ACLs of the broker's current metadata
image, rebuilt when a committed batch changes them (the image replaces its ACL map as a
whole on a change, so a change is seen by identity and a request costs no copying).

A denied request is logged as Kafka's ``kafka.authorizer.logger`` logs it, at INFO:
``Principal = User:bob is Denied operation = WRITE from host = 127.0.0.1 on resource =
Topic:LITERAL:orders``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping

from rillet.config import BrokerConfig
from rillet.config.authorizer_keys import STANDARD_AUTHORIZER
from rillet.controller.acls import binding_of
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import AccessControlEntryRecord
from rillet.security.acls import AclOperation, Authorizer, ResourceType
from rillet.security.principal import KafkaPrincipal

__all__ = ["BrokerAuthorizer", "broker_authorizer"]

_log = logging.getLogger("rillet.authorizer")

# How Kafka's authorizer log names resource types.
_TYPE_NAMES = {
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    ResourceType.DELEGATION_TOKEN: "DelegationToken",
    ResourceType.USER: "User",
}


class BrokerAuthorizer:
    """See the module doc."""

    def __init__(
        self,
        image: Callable[[], MetadataImage],
        super_users: list[str],
        allow_everyone_if_no_acl_found: bool,
    ) -> None:
        self._image = image
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: Mapping[uuid.UUID, AccessControlEntryRecord] | None = None
        self._authorizer = Authorizer()

    def image(self) -> MetadataImage:
        """The metadata image the ACLs are read from (which topics exist, by name and id)."""
        return self._image()

    def current(self) -> Authorizer:
        """The authorizer of the current image's ACLs."""
        acls = self._image().acls
        if acls is not self._acls:
            self._authorizer = Authorizer(
                (binding_of(r) for r in acls.values()),
                self.super_users,
                self.allow_everyone_if_no_acl_found,
            )
            self._acls = acls
        return self._authorizer

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_denied: bool = True,
    ) -> bool:
        allowed = self.current().authorize(str(principal), host, operation, resource_type, name)
        if not allowed and log_denied:
            _log.info(
                "Principal = %s is Denied operation = %s from host = %s on resource = %s:%s:%s",
                principal,
                operation.name,
                host,
                _TYPE_NAMES.get(resource_type, resource_type.name),
                "LITERAL",
                name,
            )
        return allowed

    def authorize_any(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """Whether ``principal`` may do ``operation`` on some resource of the type (Kafka's
        authorizeByResourceType, KIP-679)."""
        return self.current().authorize_any(str(principal), host, operation, resource_type)


def broker_authorizer(
    config: BrokerConfig, image: Callable[[], MetadataImage]
) -> BrokerAuthorizer | None:
    """The broker's authorizer, or None when ``authorizer.class.name`` is empty (every
    request is allowed)."""
    if config.get("authorizer.class.name") != STANDARD_AUTHORIZER:
        return None
    super_users = [u.strip() for u in str(config.get("super.users") or "").split(";")]
    return BrokerAuthorizer(
        image,
        [u for u in super_users if u],
        bool(config.get("allow.everyone.if.no.acl.found")),
    )
