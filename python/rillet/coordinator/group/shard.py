"""GroupCoordinatorShard: the group coordinator of one ``__consumer_offsets`` partition, as
a pure state machine (Kafka's ``GroupCoordinatorShard``).

It owns the groups whose id maps to its partition (:func:`partition_for`) and their
committed offsets; its whole durable state is the replay of the partition's records. It has
no sockets, clocks, threads or files: time comes in as ``now_ms``, topics through
:meth:`on_metadata`, randomness (member ids) from an injected ``random.Random``. The same
object runs under the broker's driver and under the seeded simulation of ``tests/sim``.

Lifecycle (the legal transitions; anything else is refused loudly)::

    created --replay()*, replay_end_transaction_marker()*--> on_loaded(now)
        --> serving --unload()--> (thrown away)

Transactions: ``replay`` takes the producer id of a transactional batch (its offset commits
are pending for that producer), ``replay_end_transaction_marker`` a COMMIT/ABORT control
batch. Serving, :meth:`txn_offset_commit` returns records to write as that producer's
transactional batch and :meth:`complete_transaction` the marker to write; see
:mod:`rillet.coordinator.group.results` for ``producer``, ``marker`` and ``undo``.

While not loaded, every request is answered COORDINATOR_LOAD_IN_PROGRESS; a request for a
group of another partition NOT_COORDINATOR.

Every operation returns a :class:`~rillet.coordinator.group.results.CoordinatorResult`;
see :mod:`rillet.coordinator.group` for how the driver must use it.
"""

from __future__ import annotations

import functools
import random
import uuid
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

from rillet.coordinator.group.admin import GroupAdmin
from rillet.coordinator.group.classic_protocol import ClassicGroupProtocol
from rillet.coordinator.group.classic_rebalance import HEARTBEAT_TIMER, JOIN_TIMER, SYNC_TIMER
from rillet.coordinator.group.config import GroupCoordinatorConfig
from rillet.coordinator.group.consumer_group import ConsumerGroup, TopicInfo
from rillet.coordinator.group.consumer_heartbeat import (
    REBALANCE_TIMER,
    SESSION_TIMER,
    ConsumerGroupProtocol,
)
from rillet.coordinator.group.context import ShardContext
from rillet.coordinator.group.messages import (
    ConsumerGroupDescribeResult,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DeletableGroupResult,
    DescribedGroup,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from rillet.coordinator.group.offsets import EXPIRATION_TIMER, OffsetManager, error_commit_response
from rillet.coordinator.group.partitioner import partition_for
from rillet.coordinator.group.records import CoordinatorRecord, decode_record
from rillet.coordinator.group.results import (
    Completion,
    CoordinatorResult,
    EndTxnMarker,
    Operation,
    ProducerIdAndEpoch,
)
from rillet.coordinator.group.state import NO_PRODUCER_ID, ShardState
from rillet.coordinator.group.txn_offsets import TxnOffsetManager, error_txn_commit_response
from rillet.errors import (
    CoordinatorLoadInProgressError,
    IllegalStateError,
    KafkaError,
    NotCoordinatorError,
)

__all__ = ["GroupCoordinatorShard"]

R = TypeVar("R")


class GroupCoordinatorShard:
    """The coordinator of partition ``partition_index`` of ``__consumer_offsets``."""

    def __init__(
        self,
        partition_index: int,
        config: GroupCoordinatorConfig | None = None,
        *,
        rng: random.Random,
        topics: Mapping[str, TopicInfo | tuple[uuid.UUID, int]] | None = None,
    ) -> None:
        self.partition_index = partition_index
        self.ctx = ShardContext(config or GroupCoordinatorConfig(), rng)
        self.ctx.set_topics(topics or {})
        self._consumer = ConsumerGroupProtocol(self.ctx)
        self._classic = ClassicGroupProtocol(self.ctx)
        self._offsets = OffsetManager(self.ctx, self._classic)
        self._txn_offsets = TxnOffsetManager(self.ctx)
        self._admin = GroupAdmin(self.ctx, self._offsets)
        self.loaded = False
        self.unloaded = False

    @property
    def config(self) -> GroupCoordinatorConfig:
        return self.ctx.config

    @property
    def state(self) -> ShardState:
        """The groups and offsets (read-only for callers: change them through records)."""
        return self.ctx.state

    # -- loading ---------------------------------------------------------------------------

    def replay(
        self,
        key: bytes,
        value: bytes | None,
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
    ) -> None:
        """Applies one record of the partition, read from the log (value None: tombstone);
        ``producer_id`` (and epoch) of its batch when the batch is transactional."""
        self.replay_record(decode_record(key, value), producer_id=producer_id)

    def replay_record(
        self, record: CoordinatorRecord, *, producer_id: int = NO_PRODUCER_ID
    ) -> None:
        self._require_loading("replay")
        self.ctx.state.replay(record, producer_id)

    def replay_end_transaction_marker(
        self, producer_id: int, committed: bool, *, producer_epoch: int = -1
    ) -> None:
        """Applies a COMMIT (``committed``) or ABORT marker of ``producer_id`` read from the
        log: its pending offsets become committed, or are dropped."""
        self._require_loading("replay_end_transaction_marker")
        self.ctx.state.replay_end_transaction_marker(producer_id, committed)

    def _require_loading(self, what: str) -> None:
        if self.loaded or self.unloaded:
            raise IllegalStateError(f"{what} after on_loaded: a loaded shard writes its records")

    def on_loaded(self, now_ms: int) -> None:
        """The partition is replayed up to its end: start serving. Members' sessions start
        now, and the offset expiry check is scheduled."""
        if self.loaded or self.unloaded:
            raise IllegalStateError("on_loaded twice, or after unload")
        self.loaded = True
        self._consumer.on_loaded(now_ms)
        self._classic.on_loaded(now_ms)
        self._offsets.schedule_expiration(now_ms)

    def unload(self) -> list[Completion]:
        """The shard is being thrown away (the partition moved, or an append failed): the
        parked JoinGroup/SyncGroup requests, answered NOT_COORDINATOR."""
        self.unloaded = True
        self.loaded = False
        return self._classic.unload()

    # -- metadata and time -----------------------------------------------------------------

    def on_metadata(self, topics: Mapping[str, TopicInfo | tuple[uuid.UUID, int]]) -> None:
        """The cluster's topics (name -> id and partition count), all of them: a topic left
        out is a topic that does not exist, and groups subscribed to it lose its partitions.
        Groups re-check their subscribed topics on their next heartbeat (and on the first
        after loading), so the driver passes the topics before :meth:`on_loaded`."""
        self.ctx.set_topics(topics)
        for group in self.ctx.state.groups.values():
            if isinstance(group, ConsumerGroup):
                group.metadata_refresh_needed = True

    def next_deadline_ms(self) -> int | None:
        """When :meth:`tick` next has something to do (None: nothing scheduled)."""
        return self.ctx.timers.next_deadline_ms() if self.loaded else None

    def tick(self, now_ms: int) -> CoordinatorResult[None]:
        """Runs every timer due at ``now_ms``, in deadline order: session and rebalance
        timeouts, the classic join and sync deadlines, offset expiry. Each runs as of its own
        deadline, so a late tick does what ticks on time would have done."""
        op = Operation(self.ctx.state.replay)
        if not self.loaded:
            return op.result()
        while (timer := self.ctx.timers.pop_due(now_ms)) is not None:
            at_ms = timer.deadline_ms
            if timer.kind in (SESSION_TIMER, REBALANCE_TIMER):
                self._consumer.on_timer(op, timer)
            elif timer.kind in (HEARTBEAT_TIMER, JOIN_TIMER, SYNC_TIMER):
                self._classic.on_timer(op, timer, at_ms)
            elif timer.kind == EXPIRATION_TIMER:
                self._offsets.cleanup_group_metadata(op, at_ms)
            else:  # pragma: no cover
                raise IllegalStateError(f"unknown timer {timer}")
        return op.result()

    # -- the plumbing ----------------------------------------------------------------------

    def _refusal(self, group_id: str | None) -> KafkaError | None:
        if self.unloaded:
            return NotCoordinatorError(f"partition {self.partition_index} was unloaded")
        if not self.loaded:
            return CoordinatorLoadInProgressError(f"partition {self.partition_index} is loading")
        if group_id is not None and group_id.strip():
            n = self.ctx.config.offsets_topic_num_partitions
            if partition_for(group_id, n) != self.partition_index:
                return NotCoordinatorError(
                    f"group {group_id} is coordinated by partition {partition_for(group_id, n)}"
                )
        return None

    def _run(
        self,
        group_id: str | None,
        handler: Callable[[Operation], R],
        on_error: Callable[[KafkaError], R],
        producer: ProducerIdAndEpoch | None = None,
    ) -> CoordinatorResult[R]:
        if producer is None:
            op = Operation(self.ctx.state.replay)
        else:
            replay = functools.partial(self.ctx.state.replay, producer_id=producer.producer_id)
            op = Operation(replay, producer=producer)
        refusal = self._refusal(group_id)
        if refusal is not None:
            return op.result(on_error(refusal))
        try:
            response = handler(op)
        except KafkaError as e:
            # Handlers validate before writing; should a refusal come after a record, the
            # record stays (it is already applied) and is appended with the refusal.
            return op.result(on_error(e))
        return op.result(response)

    def _run_parked(
        self,
        group_id: str,
        handle: Hashable,
        handler: Callable[[Operation], None],
        on_error: Callable[[KafkaError], object],
    ) -> CoordinatorResult[None]:
        op = Operation(self.ctx.state.replay)
        refusal = self._refusal(group_id)
        if refusal is not None:
            op.complete(handle, on_error(refusal))
            return op.result()
        handler(op)
        return op.result()

    # -- KIP-848 ---------------------------------------------------------------------------

    def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest, now_ms: int
    ) -> CoordinatorResult[ConsumerGroupHeartbeatResponse]:
        return self._run(
            request.group_id,
            lambda op: self._consumer.heartbeat(op, request, now_ms),
            lambda e: ConsumerGroupHeartbeatResponse(error=e),
        )

    # -- classic ---------------------------------------------------------------------------

    def join_group(
        self, request: JoinGroupRequest, handle: Hashable, now_ms: int
    ) -> CoordinatorResult[None]:
        """JoinGroup; its answer, now or later, is a completion for ``handle``."""
        return self._run_parked(
            request.group_id,
            handle,
            lambda op: self._classic.join_group(op, request, handle, now_ms),
            lambda e: JoinGroupResponse(error=e, member_id=request.member_id),
        )

    def sync_group(
        self, request: SyncGroupRequest, handle: Hashable, now_ms: int
    ) -> CoordinatorResult[None]:
        """SyncGroup; its answer, now or later, is a completion for ``handle``."""
        return self._run_parked(
            request.group_id,
            handle,
            lambda op: self._classic.sync_group(op, request, handle, now_ms),
            lambda e: SyncGroupResponse(error=e),
        )

    def heartbeat(
        self, request: HeartbeatRequest, now_ms: int
    ) -> CoordinatorResult[HeartbeatResponse]:
        return self._run(
            request.group_id,
            lambda op: self._classic.heartbeat(op, request, now_ms),
            lambda e: HeartbeatResponse(error=e),
        )

    def leave_group(
        self, request: LeaveGroupRequest, now_ms: int
    ) -> CoordinatorResult[LeaveGroupResponse]:
        return self._run(
            request.group_id,
            lambda op: self._classic.leave_group(op, request, now_ms),
            lambda e: LeaveGroupResponse(error=e),
        )

    # -- offsets ---------------------------------------------------------------------------

    def commit_offsets(
        self, request: OffsetCommitRequest, now_ms: int
    ) -> CoordinatorResult[OffsetCommitResponse]:
        return self._run(
            request.group_id,
            lambda op: self._offsets.commit(op, request, now_ms),
            lambda e: error_commit_response(request, e),
        )

    def reset_offsets(
        self, request: OffsetCommitRequest, now_ms: int
    ) -> CoordinatorResult[OffsetCommitResponse]:
        """``--reset-offsets``: commits as generation -1, NON_EMPTY_GROUP unless the group
        has no members (its member id and generation are ignored)."""
        return self._run(
            request.group_id,
            lambda op: self._offsets.reset(op, request, now_ms),
            lambda e: error_commit_response(request, e),
        )

    def txn_offset_commit(
        self, request: TxnOffsetCommitRequest, now_ms: int
    ) -> CoordinatorResult[TxnOffsetCommitResponse]:
        """TxnOffsetCommit: records to write as one transactional batch of
        ``result.producer``; pending until that producer's marker (see the module doc)."""
        producer = ProducerIdAndEpoch(request.producer_id, request.producer_epoch)
        undo = self.ctx.state.save_transaction(request.producer_id, [request.group_id])
        result = self._run(
            request.group_id,
            lambda op: self._txn_offsets.commit(op, request, now_ms),
            lambda e: error_txn_commit_response(request, e),
            producer,
        )
        return replace(result, undo=undo) if result.records else result

    def complete_transaction(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, committed: bool
    ) -> CoordinatorResult[KafkaError]:
        """The transaction coordinator's COMMIT (``committed``) or ABORT for ``producer_id``
        (WriteTxnMarkers): applies it, and returns the ``marker`` to append. Refused (the
        error as the response, no marker) while loading or after unload."""
        op = Operation(self.ctx.state.replay)
        refusal = self._refusal(None)
        if refusal is not None:
            return op.result(refusal)
        undo = self.ctx.state.save_transaction(producer_id)
        self.ctx.state.replay_end_transaction_marker(producer_id, committed)
        marker = EndTxnMarker(producer_id, producer_epoch, coordinator_epoch, committed)
        return CoordinatorResult(marker=marker, undo=undo)

    def fetch_offsets(self, request: OffsetFetchRequest) -> CoordinatorResult[OffsetFetchResponse]:
        return self._run(
            request.group_id,
            lambda op: self._offsets.fetch(request),
            lambda e: OffsetFetchResponse(request.group_id, error=e),
        )

    def delete_offsets(
        self, request: OffsetDeleteRequest
    ) -> CoordinatorResult[OffsetDeleteResponse]:
        return self._run(
            request.group_id,
            lambda op: self._offsets.delete(op, request),
            lambda e: OffsetDeleteResponse(error=e),
        )

    # -- groups ----------------------------------------------------------------------------

    def list_groups(
        self, states_filter: Iterable[str] = (), types_filter: Iterable[str] = ()
    ) -> CoordinatorResult[ListGroupsResponse]:
        return self._run(
            None,
            lambda op: ListGroupsResponse(
                groups=tuple(self._admin.list_groups(states_filter, types_filter))
            ),
            lambda e: ListGroupsResponse(error=e),
        )

    def describe_groups(self, group_ids: Sequence[str]) -> CoordinatorResult[list[DescribedGroup]]:
        def handle(op: Operation) -> list[DescribedGroup]:
            mine = [g for g in group_ids if self._refusal(g) is None]
            described = {d.group_id: d for d in self._admin.describe_groups(mine)}
            return [
                described.get(g) or DescribedGroup(g, "", error=self._refusal(g)) for g in group_ids
            ]

        return self._run(
            None, handle, lambda e: [DescribedGroup(g, "", error=e) for g in group_ids]
        )

    def consumer_group_describe(
        self, group_ids: Sequence[str]
    ) -> CoordinatorResult[list[ConsumerGroupDescribeResult]]:
        def handle(op: Operation) -> list[ConsumerGroupDescribeResult]:
            mine = [g for g in group_ids if self._refusal(g) is None]
            described = {d.group_id: d for d in self._admin.consumer_group_describe(mine)}
            return [
                described.get(g) or ConsumerGroupDescribeResult(g, self._refusal(g))
                for g in group_ids
            ]

        return self._run(
            None, handle, lambda e: [ConsumerGroupDescribeResult(g, e) for g in group_ids]
        )

    def delete_groups(
        self, group_ids: Sequence[str]
    ) -> CoordinatorResult[list[DeletableGroupResult]]:
        def handle(op: Operation) -> list[DeletableGroupResult]:
            out = []
            for g in group_ids:
                refusal = self._refusal(g)
                if refusal is not None:
                    out.append(DeletableGroupResult(g, refusal))
                else:
                    out.extend(self._admin.delete_groups(op, [g]))
            return out

        return self._run(None, handle, lambda e: [DeletableGroupResult(g, e) for g in group_ids])
