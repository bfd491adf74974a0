"""What a Kafka API handler is given and how a group of handlers says what it serves.

A handler takes the decoded request (:class:`KafkaRequest`), with who sent it, and returns
the response body,
or None for a request Kafka does not answer (Produce with acks=0). Each group of handlers
(records, groups, transactions, admin) is a :class:`KafkaService`: it maps the api keys it
serves to the versions its handlers read, and :class:`~rillet.server.kafka.apis.KafkaApis`
dispatches to them, so a new key is added where its handler lives.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from rillet.broker.authorizer import BrokerAuthorizer
from rillet.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from rillet.security.principal import ANONYMOUS, KafkaPrincipal

__all__ = ["Body", "Handler", "KafkaRequest", "KafkaService", "Served", "Throttle"]

Body = dict[str, Any]


@dataclass(frozen=True)
class KafkaRequest:
    """A decoded request: its header's fields, its body, and where it came from."""

    api_key: int
    version: int
    correlation_id: int
    client_id: str
    body: Body
    listener_name: str
    peer_host: str = ""
    # Who sent it (the connection's SASL or certificate principal), and the authorizer its
    # operations are checked with (None: no authorizer, everything is allowed).
    principal: KafkaPrincipal = ANONYMOUS
    authorizer: BrokerAuthorizer | None = None

    @property
    def client(self) -> tuple[str, str]:
        """Kafka's (client id, "/host") as group members record them."""
        return self.client_id, "/" + self.peer_host

    def allowed(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """Whether the sender may do ``operation`` on the resource (a denial is logged)."""
        return self.authorizer is None or self.authorizer.authorize(
            self.principal, self.peer_host, operation, resource_type, name
        )

    def allowed_quietly(
        self, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        """:meth:`allowed`, without logging a denial: for filtering what a listing shows."""
        return self.authorizer is None or self.authorizer.authorize(
            self.principal, self.peer_host, operation, resource_type, name, log_denied=False
        )

    def allowed_on_cluster(self, operation: AclOperation) -> bool:
        return self.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def allowed_on_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Whether the sender may do ``operation`` on some resource of the type."""
        return self.authorizer is None or self.authorizer.authorize_any(
            self.principal, self.peer_host, operation, resource_type
        )


Handler = Callable[[KafkaRequest], Awaitable[Body | None]]


@dataclass(frozen=True)
class Served:
    """One api key's handler and the versions it reads (both ends included)."""

    min_version: int
    max_version: int
    handler: Handler


class KafkaService(Protocol):
    def served(self) -> Mapping[int, Served]:
        """The api keys this service answers."""
        ...


class Throttle:
    """A connection's quota throttle (Kafka mutes a throttled client's channel): the
    monotonic time before which its next request is not read. ``clock`` gives seconds."""

    __slots__ = ("clock", "until")

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.until = 0.0

    def hold(self, ms: int) -> None:
        """Hold the connection back ``ms`` from now (or longer, if it already is)."""
        self.until = max(self.until, self.clock() + ms / 1000)

    def remaining_s(self) -> float:
        return max(0.0, self.until - self.clock())
