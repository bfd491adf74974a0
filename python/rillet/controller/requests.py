"""What a broker asks of the controller about itself (KIP-631), as the broker's lifecycle
sends it and the controller channel carries it, whatever the transport."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from rillet.metadata.records import BrokerEndpoint

__all__ = ["BrokerHeartbeatRequest", "BrokerRegistrationRequest"]


@dataclass(frozen=True)
class BrokerRegistrationRequest:
    """Register (or re-register after a restart) ``broker_id``; ``incarnation_id`` is new at
    every start, which tells a restart from a second broker with the same id."""

    broker_id: int
    incarnation_id: uuid.UUID
    listeners: tuple[BrokerEndpoint, ...]
    rack: str | None = None
    # The broker epoch this broker's last clean shutdown recorded; -1: unclean or first start.
    previous_broker_epoch: int = -1


@dataclass(frozen=True)
class BrokerHeartbeatRequest:
    """A registered broker's heartbeat: ``current_metadata_offset`` is the offset of the last
    metadata record it has applied (the controller unfences it once that has caught up); it
    may ask to stay fenced or to shut down (a controlled shutdown moves its leadership away
    first)."""

    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool = False
    want_shutdown: bool = False
