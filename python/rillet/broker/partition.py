"""Partition: one replica of a topic-partition on this broker, leader or follower.

The leader tracks every follower's log end offset (learned from its fetches) and the time it
was last caught up; the high watermark is the smallest log end offset over the in-sync
replicas (the leader included), and only moves forward. Consumers read below the high
watermark; followers read up to the log end. ISR changes are not made here: the leader asks
the controller (``alter_isr``), one change at a time, and applies the answer (or the
metadata log's record, whichever comes first).

While a change is in flight the high watermark is computed over the *maximal* ISR, the
committed one plus any replica the change adds (KIP-497): the controller may already have
committed the addition and may then elect that replica, so nothing it lacks may be
acknowledged meanwhile. A shrink counts the replicas it drops until it is committed.

Thread safety: owned by the broker's event loop; the Log underneath is thread safe.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from rillet import errors
from rillet._core import FetchDataInfo, Log, LogAppendInfo
from rillet.controller import AlterPartitionResult
from rillet.coordinator.end_txn_marker import end_txn_marker_batch
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
        alter_isr: Callable[[TopicPartition, tuple[int, ...]], bool] | None = None,
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
        # The ISR this leader asked the controller for and has no answer to yet.
        self.pending_isr: tuple[int, ...] | None = None
        # As checkpointed, never past the log end (the log may have been truncated since).
        self.high_watermark = min(high_watermark, log.log_end_offset)
        self.followers: dict[int, ReplicaState] = {}
        # Where this broker's current leader epoch began (a follower below it has not
        # truncated yet and cannot join the ISR).
        self.leader_epoch_start_offset = 0

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    # -- role changes (from the metadata log) ----------------------------------------------

    def apply_registration(self, reg: PartitionRegistration, now_ms: int) -> bool:
        """Become leader or follower as ``reg`` says. Returns whether the leader or its
        epoch changed (a follower then fetches from the new leader); the caller completes
        waiting requests afterwards."""
        was_leader = self.is_leader
        new_leadership = (reg.leader, reg.leader_epoch) != (self.leader_id, self.leader_epoch)
        if not new_leadership and reg.partition_epoch < self.partition_epoch:
            return False  # older than the AlterPartition answer already applied
        if new_leadership:
            self.pending_isr = None
        self.leader_id = reg.leader
        self.leader_epoch = reg.leader_epoch
        self.partition_epoch = reg.partition_epoch
        self.replicas = reg.replicas
        self.isr = reg.isr
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        if self.is_leader:
            if new_leadership:
                # The new epoch starts at the log end: a follower that diverged learns from
                # it where to truncate (KIP-101). Followers' positions are unknown until
                # they fetch from this leader; they count as caught up from now.
                self.log.assign_epoch_start_offset(self.leader_epoch, self.log.log_end_offset)
                self.leader_epoch_start_offset = self.log.log_end_offset
                old = self.followers if was_leader else {}
                self.followers = {
                    r: old.get(r) or ReplicaState(last_caught_up_ms=now_ms)
                    for r in reg.replicas
                    if r != self.broker_id
                }
            else:
                for r in reg.replicas:
                    if r != self.broker_id and r not in self.followers:
                        self.followers[r] = ReplicaState(last_caught_up_ms=now_ms)
                for r in [r for r in self.followers if r not in reg.replicas]:
                    del self.followers[r]
            self.maybe_increment_high_watermark()
        else:
            self.followers = {}
        return new_leadership

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

    def append_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
        now_ms: int,
    ) -> LogAppendInfo:
        """Append the COMMIT (``committed``) or ABORT marker of ``producer_id``'s transaction
        as leader (WriteTxnMarkers, always acks=all: the caller waits for the ISR with
        :meth:`check_enough_replicas_reach_offset`). The log checks the marker against the
        producer's state: an older producer epoch is INVALID_PRODUCER_EPOCH, an older
        coordinator epoch TRANSACTION_COORDINATOR_FENCED. A marker with nothing to end is
        written anyway, as Kafka does (the coordinator resends markers after a failover)."""
        self._require_leader()
        if len(self.isr) < self.min_insync_replicas:
            raise errors.NotEnoughReplicasError(
                f"The size of the current ISR {list(self.isr)} is insufficient to satisfy the "
                f"min.isr requirement of {self.min_insync_replicas} for partition {self.tp}"
            )
        batch = end_txn_marker_batch(
            producer_id, producer_epoch, coordinator_epoch, committed, now_ms
        )
        info = self.log.append_as_leader(
            batch, self.leader_epoch, allow_control=True, origin="coordinator"
        )
        self.maybe_increment_high_watermark()
        return info

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        """Whether ``producer_id`` has written to this partition in a transaction that no
        marker has ended yet (Kafka's ``UnifiedLog.hasOngoingTransaction``)."""
        return any(
            e.producer_id == producer_id and e.current_txn_start_offset is not None
            for e in self.log.producer_state()
        )

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The committed ISR plus the replicas an ISR change in flight adds."""
        if self.pending_isr is None:
            return self.isr
        return self.isr + tuple(r for r in self.pending_isr if r not in self.isr)

    def maybe_increment_high_watermark(self) -> bool:
        """HW = the smallest log end offset over the maximal ISR. Returns whether it moved.

        The HW stands still while the ISR is smaller than min.insync.replicas (KIP-966): the
        replicas that left it (the eligible leader replicas) hold everything below it, so
        one of them can lead without losing a record a consumer has seen."""
        if not self.is_leader or len(self.isr) < self.min_insync_replicas:
            return False
        leo = self.log.log_end_offset
        hw = min(
            [leo]
            + [
                self.followers[r].log_end_offset
                for r in self.maximal_isr
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
            and fetch_offset >= self.leader_epoch_start_offset
        ):
            self._propose_isr((*self.isr, replica_id))
        return self.maybe_increment_high_watermark()

    def _propose_isr(self, new_isr: tuple[int, ...]) -> None:
        if (
            self.pending_isr is None
            and self.alter_isr is not None
            and self.alter_isr(self.tp, new_isr)
        ):
            self.pending_isr = new_isr

    def alter_isr_completed(self, new_isr: tuple[int, ...], result: AlterPartitionResult) -> bool:
        """The controller's answer to the change that asked for ``new_isr``: on success the
        registration it returns applies at once (the metadata log brings it again later).
        Returns whether the high watermark moved."""
        if self.pending_isr != new_isr:
            return False  # leadership moved on since
        self.pending_isr = None
        if (
            result.error is None
            and result.leader_epoch == self.leader_epoch
            and result.partition_epoch > self.partition_epoch
        ):
            self.isr = result.isr
            self.partition_epoch = result.partition_epoch
        return self.maybe_increment_high_watermark()

    def maybe_shrink_isr(self, now_ms: int, replica_lag_time_max_ms: int) -> None:
        """Ask the controller to drop followers not caught up within the lag time."""
        if not self.is_leader or self.pending_isr is not None:
            return
        lagging = [
            r
            for r in self.isr
            if r != self.broker_id
            and now_ms - self.followers.get(r, ReplicaState()).last_caught_up_ms
            > replica_lag_time_max_ms
        ]
        if lagging:
            self._propose_isr(tuple(r for r in self.isr if r not in lagging))

    def check_enough_replicas_reach_offset(self, end_offset: int, leader_epoch: int) -> bool:
        """Whether an ``acks=all`` append that ended at ``end_offset`` in ``leader_epoch``
        is finished (Kafka's checkEnoughReplicasReachOffset). Raises when it failed: this
        broker stopped leading that epoch (NOT_LEADER_OR_FOLLOWER; the records may yet be
        truncated), or the ISR fell below min.insync.replicas before they were replicated
        (NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""
        if not self.is_leader or self.leader_epoch != leader_epoch:
            raise errors.NotLeaderOrFollowerError(
                f"Leadership of {self.tp} moved (now leader {self.leader_id} in epoch "
                f"{self.leader_epoch}) before the records were replicated."
            )
        if len(self.maximal_isr) < self.min_insync_replicas:
            # The high watermark stands still meanwhile (KIP-966): fail now, not at timeout.
            raise errors.NotEnoughReplicasAfterAppendError(
                f"The size of the current ISR {list(self.isr)} is insufficient to satisfy "
                f"the min.isr requirement of {self.min_insync_replicas} for partition "
                f"{self.tp}; the records were written but are not acknowledged"
            )
        return self.high_watermark >= end_offset

    # -- follower operations ---------------------------------------------------------------

    def append_records_to_follower(
        self,
        records: bytes | memoryview,
        leader_high_watermark: int,
        leader_log_start_offset: int,
    ) -> LogAppendInfo | None:
        """Write what the leader sent (keeping its offsets and epochs) and follow its high
        watermark and log start, never past this log's end."""
        info = self.log.append_as_follower(records) if len(records) else None
        leo = self.log.log_end_offset
        self.high_watermark = max(min(leader_high_watermark, leo), 0)
        if leader_log_start_offset > self.log.log_start_offset:
            self.log.maybe_increment_log_start_offset(min(leader_log_start_offset, leo))
        return info

    def truncate_on_divergence(self, leader_epoch: int, leader_end_offset: int) -> int:
        """The leader says this log diverged after ``leader_epoch`` ended at
        ``leader_end_offset`` (KIP-320's diverging epoch, the fetch-time form of KIP-279's
        OffsetsForLeaderEpoch). Truncate to where this log's matching epoch ends, never by
        the high watermark alone; if this log has no such epoch, to the end of the largest
        older one, and the next fetch finds out more. Returns the new log end offset."""
        log = self.log
        leo = log.log_end_offset
        if leader_end_offset < 0:
            # The leader knows no epoch this old: nothing is known to match above the HW.
            target = min(self.high_watermark, leo)
        else:
            local = log.end_offset_for_epoch(leader_epoch)
            if local.end_offset < 0:
                target = min(leader_end_offset, leo)
            else:
                target = min(local.end_offset, leader_end_offset, leo)
        # Even at the log end: an epoch this broker began as leader without writing to it
        # conflicts with the new leader's and goes (as in Kafka's truncateTo).
        log.truncate_to(target)
        self.high_watermark = min(self.high_watermark, log.log_end_offset)
        return log.log_end_offset

    def reset_to_leader_log_start(self, leader_log_start_offset: int) -> None:
        """This log ends before the leader's starts (the leader deleted what it would
        fetch): start over, empty, at the leader's log start."""
        self.log.truncate_fully_and_start_at(leader_log_start_offset)
        self.high_watermark = leader_log_start_offset

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
        """Read for a consumer (below the high watermark) or a follower (up to the log end).
        A fetcher whose last record's epoch (``last_fetched_epoch``) this log does not hold
        up to ``fetch_offset`` is told where the logs diverge instead (KIP-320): a follower
        truncates there, a consumer detects records it read and lost to an unclean
        election. The caller records a follower's position with
        :meth:`update_follower_fetch_state`."""
        self._require_leader()
        self._check_leader_epoch(current_leader_epoch)
        log = self.log
        if last_fetched_epoch is not None and last_fetched_epoch >= 0:
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
