"""What a Kafka API handler is given and how a group of handlers says what it serves.

A handler takes the decoded request (:class:`KafkaRequest`) and returns the response body,
or None for a request Kafka does not answer (Produce with acks=0). Each group of handlers
(records, groups, transactions, admin) is a :class:`KafkaService`: it maps the api keys it
serves to the versions its handlers read, and :class:`~rillet.server.kafka.apis.KafkaApis`
dispatches to them, so a new key is added where its handler lives.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Body", "Handler", "KafkaRequest", "KafkaService", "Served"]

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

    @property
    def client(self) -> tuple[str, str]:
        """Kafka's (client id, "/host") as group members record them."""
        return self.client_id, "/" + self.peer_host


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
