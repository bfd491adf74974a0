"""Partition: one replica of a topic-partition on this broker, leader or follower.

The leader tracks every follower's log end offset (learned from its fetches) and the time it
was last caught up; the high watermark is the smallest log end offset over the in-sync
replicas (the leader included), and only moves forward. Consumers read below the high
watermark; followers read up to the log end. ISR changes are not made here: the leader asks
the controller (``alter_isr``) and applies the result when it arrives in the metadata log.

Thread safety: owned by the broker's event loop; the Log underneath is thread safe.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from rillet import errors
from rillet._core import FetchDataInfo, Log, LogAppendInfo
from rillet.metadata.image import PartitionRegistration
from rillet.metadata.records import NO_LEADER
from rillet.types import TopicPartition

__all__ = ["NO_TOPIC_ID", "FetchResult", "Partition", "ReplicaState"]

# The topic id of a partition made without one (tests).
NO_TOPIC_ID = uuid.UUID(int=0)


@dataclass
class ReplicaState:
    """What the leader knows of one follower."""

    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0


@dataclass(frozen=True)
class FetchResult:
    """One partition's share of a fetch."""

    data: FetchDataInfo | None
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    diverging_epoch: tuple[int, int] | None = None


class Partition:
    def __init__(
        self,
        tp: TopicPartition,
        log: Log,
        broker_id: int,
        *,
        topic_id: uuid.UUID = NO_TOPIC_ID,
        min_insync_replicas: int = 1,
        alter_isr: Callable[[TopicPartition, tuple[int, ...]], None] | None = None,
        high_watermark: int = 0,
    ) -> None:
        self.tp = tp
        self.topic_id = topic_id
        self.log = log
        self.broker_id = broker_id
        self.min_insync_replicas = min_insync_replicas
        self.alter_isr = alter_isr
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        # As checkpointed, never past the log end (the log may have been truncated since).
        self.high_watermark = min(high_watermark, log.log_end_offset)
        self.followers: dict[int, ReplicaState] = {}

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    # -- role changes (from the metadata log) ----------------------------------------------

    def apply_registration(self, reg: PartitionRegistration, now_ms: int) -> None:
        """Become leader or follower as ``reg`` says; returns nothing, the caller completes
        waiting requests afterwards."""
        was_leader = self.is_leader
        self.leader_id = reg.leader
        self.leader_epoch = reg.leader_epoch
        self.partition_epoch = reg.partition_epoch
        self.replicas = reg.replicas
        self.isr = reg.isr
        if self.is_leader:
            if not was_leader:
                # Followers' positions are unknown until they fetch from the new leader.
                self.followers = {
                    r: ReplicaState(last_caught_up_ms=now_ms)
                    for r in reg.replicas
                    if r != self.broker_id
                }
            self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
            self.maybe_increment_high_watermark()
        else:
            self.followers = {}
            self.high_watermark = min(self.high_watermark, self.log.log_end_offset)

    # -- leader operations -----------------------------------------------------------------

    def _check_leader_epoch(self, current_leader_epoch: int | None) -> None:
        if current_leader_epoch is None or current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise errors.FencedLeaderEpochError(
                f"{self.tp}: the request's leader epoch {current_leader_epoch} is older than "
                f"the current {self.leader_epoch}"
            )
        if current_leader_epoch > self.leader_epoch:
            raise errors.UnknownLeaderEpochError(
                f"{self.tp}: leader epoch {current_leader_epoch} is newer than this broker's "
                f"{self.leader_epoch}"
            )

    def _require_leader(self) -> None:
        if not self.is_leader:
            raise errors.NotLeaderOrFollowerError(
                f"This server is not the leader for {self.tp} (leader: {self.leader_id})."
            )

    def append_records_to_leader(
        self, records: bytes | memoryview, required_acks: int
    ) -> LogAppendInfo:
        self._require_leader()
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise errors.NotEnoughReplicasError(
                f"The size of the current ISR {list(self.isr)} is insufficient to satisfy the "
                f"min.isr requirement of {self.min_insync_replicas} for partition {self.tp}"
            )
        info = self.log.append_as_leader(records, self.leader_epoch)
        self.maybe_increment_high_watermark()
        return info

    def maybe_increment_high_watermark(self) -> bool:
        """HW = the smallest log end offset over the ISR. Returns whether it moved."""
        if not self.is_leader:
            return False
        leo = self.log.log_end_offset
        hw = min(
            [leo]
            + [
                self.followers[r].log_end_offset
                for r in self.isr
                if r != self.broker_id and r in self.followers
            ]
        )
        if hw > self.high_watermark:
            self.high_watermark = hw
            return True
        return False

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """A follower fetched at ``fetch_offset`` (so it holds everything below). Returns
        whether the high watermark moved. Asks the controller to add a caught-up follower
        back to the ISR."""
        state = self.followers.get(replica_id)
        if state is None:
            raise errors.NotLeaderOrFollowerError(
                f"Replica {replica_id} is not a replica of {self.tp}."
            )
        state.log_end_offset = fetch_offset
        state.last_fetch_ms = now_ms
        if fetch_offset >= self.log.log_end_offset:
            state.last_caught_up_ms = now_ms
        if (
            replica_id not in self.isr
            and fetch_offset >= self.high_watermark
            and self.alter_isr is not None
        ):
            self.alter_isr(self.tp, (*self.isr, replica_id))
        return self.maybe_increment_high_watermark()

    def maybe_shrink_isr(self, now_ms: int, replica_lag_time_max_ms: int) -> None:
        """Ask the controller to drop followers not caught up within the lag time."""
        if not self.is_leader or self.alter_isr is None:
            return
        lagging = [
            r
            for r in self.isr
            if r != self.broker_id
            and now_ms - self.followers.get(r, ReplicaState()).last_caught_up_ms
            > replica_lag_time_max_ms
        ]
        if lagging:
            self.alter_isr(self.tp, tuple(r for r in self.isr if r not in lagging))

    # -- reads -----------------------------------------------------------------------------

    def fetch(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        replica_id: int = -1,
        current_leader_epoch: int | None = None,
        last_fetched_epoch: int | None = None,
        min_one_batch: bool = True,
    ) -> FetchResult:
        """Read for a consumer (below the high watermark) or a follower (up to the log end;
        a follower whose log diverged is told where, KIP-320). The caller records a
        follower's position with :meth:`update_follower_fetch_state`."""
        self._require_leader()
        self._check_leader_epoch(current_leader_epoch)
        log = self.log
        if replica_id >= 0 and last_fetched_epoch is not None and last_fetched_epoch >= 0:
            found = log.end_offset_for_epoch(last_fetched_epoch)
            epoch, end = found.epoch, found.end_offset
            if epoch != last_fetched_epoch or end < fetch_offset:
                return FetchResult(
                    None,
                    self.high_watermark,
                    log.log_start_offset,
                    log.log_end_offset,
                    diverging_epoch=(epoch, end),
                )
        max_offset = None if replica_id >= 0 else self.high_watermark
        data = log.read(fetch_offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch)
        return FetchResult(data, self.high_watermark, log.log_start_offset, log.log_end_offset)

    def offset_for_timestamp(
        self, timestamp: int, isolation_committed: bool = False
    ) -> tuple[int, int, int | None] | None:
        """ListOffsets: (timestamp, offset, leader epoch); latest is the high watermark for
        consumers, as in Kafka."""
        self._require_leader()
        if timestamp == -1:
            return (-1, self.high_watermark, self.leader_epoch)
        found = self.log.fetch_offset_by_timestamp(timestamp)
        if found is None:
            return None
        if found.offset >= self.high_watermark and timestamp != -2:
            return None
        return (found.timestamp, found.offset, found.leader_epoch)
