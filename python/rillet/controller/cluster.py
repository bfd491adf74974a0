"""Cluster membership (Kafka's ClusterControlManager and BrokerHeartbeatManager): broker
registration, heartbeats, session expiry and fencing, unfencing once caught up.

A registered broker starts fenced: it leads nothing and is in no ISR. Its heartbeats unfence
it once it has caught up with the metadata log, and fence it when it asks (a controlled
shutdown). A broker whose heartbeats stop for ``broker.session.timeout.ms`` is fenced, and
its leadership moves to another in-sync replica (see :mod:`rillet.controller.elections`).

:class:`ClusterControl` holds the one piece of state that is not in the metadata log: when
each broker was last heard from. It is pure otherwise: time arrives as ``now_ms``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from rillet import errors
from rillet.controller.elections import elect_on_unfence, leave_isrs
from rillet.controller.elr import leave_after_unclean_shutdown
from rillet.controller.results import ControllerResult
from rillet.metadata.image import MetadataImage
from rillet.metadata.records import (
    BrokerEndpoint,
    FenceBrokerRecord,
    MetadataRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
)

__all__ = ["ClusterControl", "HeartbeatResult"]


@dataclass(frozen=True)
class HeartbeatResult:
    is_caught_up: bool
    is_fenced: bool
    should_shutdown: bool


class ClusterControl:
    """Brokers' sessions. Not thread safe."""

    def __init__(self, session_timeout_ms: int, unclean_leader_election: bool) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.unclean = unclean_leader_election
        self._last_heartbeat_ms: dict[int, int] = {}

    def restart_sessions(self) -> None:
        """This controller is becoming the active one: every broker's session starts at the
        next check, as in Kafka (timestamps from an earlier term here would fence brokers
        that have been heartbeating to another controller since)."""
        self._last_heartbeat_ms.clear()

    def register_broker(
        self,
        image: MetadataImage,
        broker_id: int,
        incarnation_id: uuid.UUID,
        endpoints: Sequence[BrokerEndpoint],
        rack: str | None,
        now_ms: int,
        previous_broker_epoch: int = -1,
    ) -> ControllerResult[int]:
        """Register (or re-register after a restart) a broker; it starts fenced. Returns its
        new broker epoch. A restarted broker whose ``previous_broker_epoch`` (from its
        clean-shutdown marker) is not the epoch it had shut down uncleanly and may have lost
        records it never fsynced: it leaves the ISRs and ELRs (KIP-966)."""
        existing = image.brokers.get(broker_id)
        if (
            existing is not None
            and existing.incarnation_id != incarnation_id
            and not existing.fenced
            and now_ms - self._last_heartbeat_ms.setdefault(broker_id, now_ms)
            < self.session_timeout_ms
        ):
            raise errors.DuplicateBrokerRegistrationError(
                f"Another broker is registered with id {broker_id}."
            )
        epoch = max((b.broker_epoch for b in image.brokers.values()), default=0) + 1
        self._last_heartbeat_ms[broker_id] = now_ms
        records: list[MetadataRecord] = [
            RegisterBrokerRecord(broker_id, incarnation_id, epoch, tuple(endpoints), rack, True)
        ]
        if existing is not None and not existing.fenced:
            records.extend(leave_isrs(image, broker_id, static_unclean=self.unclean))
        if (
            existing is not None
            and existing.incarnation_id != incarnation_id
            and previous_broker_epoch != existing.broker_epoch
        ):
            after = image.replay(enumerate(records, image.offset + 1))
            records.extend(leave_after_unclean_shutdown(after, broker_id))
        return ControllerResult(records, epoch)

    def broker_heartbeat(
        self,
        image: MetadataImage,
        broker_id: int,
        broker_epoch: int,
        now_ms: int,
        *,
        caught_up: bool = True,
        want_fence: bool = False,
        want_shutdown: bool = False,
    ) -> ControllerResult[HeartbeatResult]:
        """A broker's heartbeat: unfence it once caught up with the metadata log, fence it when
        it asks to (controlled shutdown moves its leadership away first)."""
        b = image.brokers.get(broker_id)
        if b is None:
            raise errors.BrokerIdNotRegisteredError(f"Broker {broker_id} is not registered.")
        if b.broker_epoch != broker_epoch:
            raise errors.StaleBrokerEpochError(
                f"Expected broker epoch {b.broker_epoch}, but got {broker_epoch}"
            )
        self._last_heartbeat_ms[broker_id] = now_ms
        records: list[MetadataRecord] = []
        fenced = b.fenced
        if (want_fence or want_shutdown) and not b.fenced:
            records.extend(self._fence(image, broker_id))
            fenced = True
        elif b.fenced and caught_up and not want_fence and not want_shutdown:
            records.append(UnfenceBrokerRecord(broker_id, broker_epoch))
            records.extend(elect_on_unfence(image, broker_id, static_unclean=self.unclean))
            fenced = False
        return ControllerResult(records, HeartbeatResult(caught_up, fenced, want_shutdown))

    def fence_stale_brokers(self, image: MetadataImage, now_ms: int) -> list[MetadataRecord]:
        """Fence every unfenced broker whose session expired. Each fencing is decided on the
        image the ones before it leave: a partition never moves to a broker fenced in the
        same pass."""
        records: list[MetadataRecord] = []
        for broker_id, b in sorted(image.brokers.items()):
            last = self._last_heartbeat_ms.setdefault(broker_id, now_ms)
            if not b.fenced and now_ms - last >= self.session_timeout_ms:
                fenced = self._fence(image, broker_id)
                records.extend(fenced)
                image = image.replay(enumerate(fenced, image.offset + 1))
        return records

    def _fence(self, image: MetadataImage, broker_id: int) -> list[MetadataRecord]:
        b = image.brokers[broker_id]
        return [
            FenceBrokerRecord(broker_id, b.broker_epoch),
            *leave_isrs(image, broker_id, static_unclean=self.unclean),
        ]
