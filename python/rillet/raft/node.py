"""RaftNode: one replica of the metadata quorum, as a pure state machine (KIP-595).

The node is Kafka's ``KafkaRaftClient`` without its I/O: inputs are :meth:`RaftNode.step`
(a message arrived), :meth:`RaftNode.tick` (time passed), :meth:`RaftNode.propose` (the
active controller wants records committed) and :meth:`RaftNode.resign` (graceful shutdown);
every input takes the current time as ``now_ms``. The node appends to and truncates its
:class:`~rillet.raft.log.RaftLog` itself, and queues everything else for the driver, which
collects it with :meth:`RaftNode.poll` (see the package docstring for the driver's contract).

Replication is pull-based: followers and observers send Fetch requests to the leader, the
leader answers with entries, with the point where their logs diverge, with the snapshot to
load when its log no longer goes back far enough (KIP-630; the fetcher then reads it with
FetchSnapshot), or parks the request until there is news. The leader's high watermark is
the offset a majority of voters have replicated, once that covers the leader-change entry it
appended at the start of its epoch.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from rillet.errors import NotLeaderError
from rillet.raft.config import RaftConfig
from rillet.raft.log import (
    Entry,
    EpochEndOffset,
    RaftLog,
    SnapshotId,
    end_offset_for_epoch,
    validate_offset_and_epoch,
)
from rillet.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Errors,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderChangeMessage,
    Message,
    RaftMessage,
    VoteRequest,
    VoteResponse,
)
from rillet.raft.outputs import LeaderAndEpoch, Outputs, QuorumInfo, RaftInvariantError
from rillet.raft.state import (
    CandidateState,
    EpochState,
    FollowerState,
    LeaderState,
    QuorumState,
    ResignedState,
    UnattachedState,
    VotedState,
)
from rillet.raft.store import QuorumStateStore

__all__ = [
    "LeaderAndEpoch",
    "Outputs",
    "QuorumInfo",
    "RaftInvariantError",
    "RaftNode",
]


class RaftNode:
    """One replica of the quorum: a voter (controller) or an observer (broker).

    Construction reads the persisted :class:`~rillet.raft.store.ElectionState` from ``store``
    and derives the starting role (see :class:`~rillet.raft.state.QuorumState`); call
    :meth:`tick` right after, and again whenever :meth:`next_deadline_ms` is reached. The node
    is deterministic: given the same inputs, times, log, store and seeded ``rng`` it produces
    the same outputs. It is not thread safe.

    ``applied_offset`` is the offset below which the driver has already applied committed
    entries (from a snapshot or an earlier run); those are committed, so the high watermark
    starts there and they are not handed out again. When the log starts above 0 the driver
    must have loaded a snapshot at least that far.
    """

    def __init__(
        self,
        *,
        node_id: int,
        voters: Iterable[int],
        log: RaftLog,
        store: QuorumStateStore,
        rng: random.Random,
        now_ms: int,
        config: RaftConfig | None = None,
        applied_offset: int = 0,
    ) -> None:
        if not log.log_start_offset <= applied_offset <= log.end_offset:
            raise ValueError(
                f"applied_offset {applied_offset} is outside the log "
                f"[{log.log_start_offset}, {log.end_offset}]"
            )
        self._config = config if config is not None else RaftConfig()
        self._log = log
        self._rng = rng
        self._now_ms = now_ms
        self._quorum = QuorumState(
            local_id=node_id,
            voters=voters,
            config=self._config,
            rng=rng,
            persisted=store.load(),
            log_last_epoch=log.last_fetched_epoch,
            now_ms=now_ms,
        )
        self._high_watermark = applied_offset
        self._applied_next = applied_offset
        self._messages: list[Message] = []
        self._flush_log = False
        self._reported = LeaderAndEpoch(None, -1)
        self._snapshot_to_load: SnapshotId | None = None

    # -- queries ---------------------------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self._quorum.local_id

    @property
    def voters(self) -> frozenset[int]:
        return self._quorum.voters

    @property
    def is_voter(self) -> bool:
        return self._quorum.is_voter

    @property
    def quorum(self) -> QuorumState:
        return self._quorum

    @property
    def state(self) -> EpochState:
        return self._quorum.state

    @property
    def role(self) -> str:
        """The current role's name: Unattached, Voted, Candidate, Leader, Follower, Resigned."""
        return self._quorum.state.name

    @property
    def epoch(self) -> int:
        return self._quorum.epoch

    @property
    def leader_id(self) -> int | None:
        return self._quorum.leader_id

    @property
    def is_leader(self) -> bool:
        return isinstance(self._quorum.state, LeaderState)

    @property
    def leader_ready(self) -> bool:
        """This node leads and has handed out (``poll``'s ``committed``) every entry up to
        the start of its epoch: the state machine above has seen all that earlier leaders
        committed, and may act as the leader (Kafka's KafkaRaftClient fires
        ``handleLeaderChange`` to its listener only then). Before that, a new leader's
        controller would decide on an image missing the entries of earlier epochs that are
        still committing."""
        state = self._quorum.state
        return isinstance(state, LeaderState) and self._applied_next > state.epoch_start_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def log(self) -> RaftLog:
        return self._log

    @property
    def config(self) -> RaftConfig:
        return self._config

    def leader_and_epoch(self) -> LeaderAndEpoch:
        return LeaderAndEpoch(self._quorum.leader_id, self._quorum.epoch)

    def describe_quorum(self) -> QuorumInfo | None:
        """Replication progress as the leader sees it; None on any other replica. The
        leader's own fetch and caught-up times are now (as in Kafka's DescribeQuorum)."""
        state = self._quorum.state
        if not isinstance(state, LeaderState):
            return None
        return QuorumInfo.of_leader(state, self._high_watermark, self._now_ms)

    def next_deadline_ms(self) -> int | None:
        """The earliest time at which :meth:`tick` has something to do (None: nothing)."""
        deadlines = self._quorum.state.deadlines(self._config.check_quorum)
        present = [d for d in deadlines if d is not None]
        return min(present) if present else None

    # -- inputs ----------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Let time pass: fire every timer that is due at ``now_ms``."""
        self._advance_clock(now_ms)
        self._poll_state(now_ms)

    def step(self, message: Message, now_ms: int) -> None:
        """Handle one message addressed to this replica."""
        if not isinstance(message, RaftMessage):
            raise TypeError(f"not a quorum message: {message!r}")
        if message.destination_id != self.node_id:
            raise ValueError(f"replica {self.node_id} got a message for {message.destination_id}")
        self._advance_clock(now_ms)
        if isinstance(message, FetchRequest):
            self._handle_fetch_request(message, now_ms)
        elif isinstance(message, FetchResponse):
            self._handle_fetch_response(message, now_ms)
        elif isinstance(message, VoteRequest):
            self._handle_vote_request(message, now_ms)
        elif isinstance(message, VoteResponse):
            self._handle_vote_response(message, now_ms)
        elif isinstance(message, BeginQuorumEpochRequest):
            self._handle_begin_quorum_epoch_request(message, now_ms)
        elif isinstance(message, BeginQuorumEpochResponse):
            self._handle_begin_quorum_epoch_response(message, now_ms)
        elif isinstance(message, EndQuorumEpochRequest):
            self._handle_end_quorum_epoch_request(message, now_ms)
        elif isinstance(message, EndQuorumEpochResponse):
            self._handle_end_quorum_epoch_response(message, now_ms)
        elif isinstance(message, FetchSnapshotRequest):
            self._handle_fetch_snapshot_request(message, now_ms)
        elif isinstance(message, FetchSnapshotResponse):
            self._handle_fetch_snapshot_response(message, now_ms)
        else:
            raise TypeError(f"not a quorum message: {message!r}")
        self._poll_state(now_ms)

    def propose(self, payloads: Sequence[bytes], now_ms: int) -> range:
        """Append ``payloads`` to the log as the leader; return their offsets.

        They are committed once the high watermark passes them (watch :meth:`poll`); until
        then a leader change may still discard them. Raises :class:`NotLeaderError` on any
        replica that is not the leader.
        """
        self._advance_clock(now_ms)
        state = self._quorum.state
        if not isinstance(state, LeaderState):
            raise NotLeaderError(
                f"replica {self.node_id} is not the leader",
                leader_id=self._quorum.leader_id,
                leader_epoch=self._quorum.epoch,
            )
        if not payloads:
            raise ValueError("propose needs at least one payload")
        offsets = self._log.append_as_leader(list(payloads), state.epoch)
        self._flush_log = True
        state.update_local_end_offset(self._log.end_offset, now_ms)
        self._complete_parked_fetches(state, now_ms)
        self._maybe_update_leader_high_watermark(state, now_ms)
        return offsets

    def resign(self, now_ms: int) -> None:
        """Graceful shutdown: a leader resigns and tells the voters (EndQuorumEpoch), naming
        the most caught-up ones as preferred successors. A no-op on any other replica. Keep
        the node running (ticking and stepping) a little while so the requests go out."""
        self._advance_clock(now_ms)
        state = self._quorum.state
        if isinstance(state, LeaderState):
            self._transition_to_resigned(state, now_ms)
            self._poll_state(now_ms)

    def poll(self) -> Outputs:
        """Collect what the inputs since the last poll produced (see :class:`Outputs`)."""
        committed: list[Entry] = []
        while self._applied_next < self._high_watermark:
            wanted = min(self._config.fetch_max_entries, self._high_watermark - self._applied_next)
            chunk = self._log.read(self._applied_next, wanted)
            if not chunk:
                raise RaftInvariantError(
                    f"committed offset {self._applied_next} is missing from the log"
                )
            committed.extend(chunk)
            self._applied_next += len(chunk)
        current = self.leader_and_epoch()
        leader_change = None
        if current != self._reported:
            leader_change = self._reported = current
        outputs = Outputs(
            messages=tuple(self._messages),
            quorum_state=self._quorum.take_unpersisted(),
            flush_log=self._flush_log,
            committed=tuple(committed),
            high_watermark=self._high_watermark,
            leader_change=leader_change,
            load_snapshot=self._snapshot_to_load,
        )
        self._messages = []
        self._flush_log = False
        self._snapshot_to_load = None
        return outputs

    # -- timers ----------------------------------------------------------------------------

    def _advance_clock(self, now_ms: int) -> None:
        if now_ms < self._now_ms:
            raise ValueError(f"time went backwards: {now_ms} < {self._now_ms}")
        self._now_ms = now_ms

    def _poll_state(self, now_ms: int) -> None:
        # A timer may move the replica to a role that has work due at once (an observer that
        # lost its leader looks for one at once), so poll the new role too, a few times at most.
        for _ in range(4):
            state = self._quorum.state
            if isinstance(state, LeaderState):
                self._poll_leader(state, now_ms)
            elif isinstance(state, CandidateState):
                self._poll_candidate(state, now_ms)
            elif isinstance(state, FollowerState):
                self._poll_follower(state, now_ms)
            elif isinstance(state, UnattachedState):
                self._poll_unattached(state, now_ms)
            elif isinstance(state, VotedState):
                if now_ms >= state.election_deadline_ms:
                    self._start_election(now_ms, pre_vote=self._config.pre_vote)
            else:
                self._poll_resigned(state, now_ms)
            if self._quorum.state is state:
                return

    def _poll_leader(self, state: LeaderState, now_ms: int) -> None:
        if self._config.check_quorum and not state.check_quorum(now_ms):
            # Check quorum: without fetches from a majority this leader may be partitioned
            # away while the others elect a new one; step aside instead of serving stale data.
            self._transition_to_resigned(state, now_ms)
            return
        expired = [rid for rid, (_, deadline) in state.parked_fetches.items() if deadline <= now_ms]
        for replica_id in expired:
            request, _ = state.parked_fetches.pop(replica_id)
            self._send(self._leader_fetch_response(state, request))
        if state.begin_quorum_unacked and now_ms >= state.begin_quorum_resend_at_ms:
            self._send_begin_quorum_epoch(state, now_ms)

    def _poll_candidate(self, state: CandidateState, now_ms: int) -> None:
        if state.backoff_until_ms is not None:
            if now_ms >= state.backoff_until_ms:
                self._start_election(now_ms, pre_vote=self._config.pre_vote)
            return
        if now_ms >= state.election_deadline_ms:
            self._start_backoff(state, now_ms)
            return
        if now_ms >= state.vote_resend_at_ms:
            self._send_vote_requests(state, now_ms)

    def _poll_follower(self, state: FollowerState, now_ms: int) -> None:
        if now_ms >= state.fetch_deadline_ms:
            if self._quorum.is_voter:
                self._start_election(now_ms, pre_vote=self._config.pre_vote)
            else:
                self._quorum.transition_to_unattached(state.epoch, now_ms)
            return
        if now_ms >= state.fetch_at_ms:
            self._send_fetch(state, now_ms)

    def _poll_unattached(self, state: UnattachedState, now_ms: int) -> None:
        if state.election_deadline_ms is not None and now_ms >= state.election_deadline_ms:
            self._start_election(now_ms, pre_vote=self._config.pre_vote)
        elif state.discovery_at_ms is not None and now_ms >= state.discovery_at_ms:
            # An observer gets no BeginQuorumEpoch: it asks a random voter, whose answer
            # names the leader (or is the leader's own answer).
            voter = self._rng.choice(sorted(self._quorum.voters))
            self._send(
                FetchRequest(
                    source_id=self.node_id,
                    destination_id=voter,
                    replica_id=self.node_id,
                    current_leader_epoch=state.epoch,
                    fetch_offset=self._log.end_offset,
                    last_fetched_epoch=self._log.last_fetched_epoch,
                    max_wait_ms=0,
                )
            )
            state.discovery_at_ms = now_ms + self._config.request_timeout_ms

    def _poll_resigned(self, state: ResignedState, now_ms: int) -> None:
        if self._quorum.is_voter and now_ms >= state.election_deadline_ms:
            self._start_election(now_ms, pre_vote=self._config.pre_vote)
            return
        if state.end_quorum_unacked and now_ms >= state.end_quorum_resend_at_ms:
            for voter in sorted(state.end_quorum_unacked):
                self._send(
                    EndQuorumEpochRequest(
                        source_id=self.node_id,
                        destination_id=voter,
                        leader_id=self.node_id,
                        leader_epoch=state.epoch,
                        preferred_successors=state.preferred_successors,
                    )
                )
            state.end_quorum_resend_at_ms = now_ms + self._config.request_timeout_ms

    # -- elections -------------------------------------------------------------------------

    def _start_election(self, now_ms: int, *, pre_vote: bool) -> None:
        state = self._quorum.transition_to_candidate(now_ms, pre_vote=pre_vote)
        if not self._maybe_conclude_election(state, now_ms):
            self._send_vote_requests(state, now_ms)

    def _start_backoff(self, state: CandidateState, now_ms: int) -> None:
        state.backoff_until_ms = now_ms + self._quorum.election_backoff_ms(state.retries)

    def _maybe_conclude_election(self, state: CandidateState, now_ms: int) -> bool:
        """Act on a decided election; True if the candidacy is over or backing off."""
        if state.is_won():
            if state.pre_vote:
                self._start_election(now_ms, pre_vote=False)
            else:
                self._on_become_leader(now_ms)
            return True
        if state.is_lost():
            if not state.is_backing_off:
                self._start_backoff(state, now_ms)
            return True
        return False

    def _send_vote_requests(self, state: CandidateState, now_ms: int) -> None:
        for voter in state.unrecorded_voters():
            self._send(
                VoteRequest(
                    source_id=self.node_id,
                    destination_id=voter,
                    candidate_epoch=state.target_epoch,
                    candidate_id=self.node_id,
                    last_offset_epoch=self._log.last_fetched_epoch,
                    last_offset=self._log.end_offset,
                    pre_vote=state.pre_vote,
                )
            )
        state.vote_resend_at_ms = now_ms + self._config.request_timeout_ms

    def _on_become_leader(self, now_ms: int) -> None:
        candidate = self._quorum.state
        assert isinstance(candidate, CandidateState)
        granting = tuple(sorted(candidate.granted))
        state = self._quorum.transition_to_leader(self._log.end_offset, now_ms)
        change = LeaderChangeMessage(
            leader_id=self.node_id,
            leader_epoch=state.epoch,
            voters=tuple(sorted(self._quorum.voters)),
            granting_voters=granting,
        )
        self._log.append_as_leader([change.encode()], state.epoch, control=True)
        self._flush_log = True
        state.update_local_end_offset(self._log.end_offset, now_ms)
        self._send_begin_quorum_epoch(state, now_ms)
        self._maybe_update_leader_high_watermark(state, now_ms)

    def _send_begin_quorum_epoch(self, state: LeaderState, now_ms: int) -> None:
        for voter in sorted(state.begin_quorum_unacked):
            self._send(
                BeginQuorumEpochRequest(
                    source_id=self.node_id,
                    destination_id=voter,
                    leader_id=self.node_id,
                    leader_epoch=state.epoch,
                )
            )
        state.begin_quorum_resend_at_ms = now_ms + self._config.request_timeout_ms

    # -- transitions with side effects -----------------------------------------------------

    def _transition_to_resigned(self, state: LeaderState, now_ms: int) -> None:
        successors = state.preferred_successors()
        parked = [request for request, _ in state.parked_fetches.values()]
        self._quorum.transition_to_resigned(successors, now_ms)
        for request in parked:
            self._send(self._error_fetch_response(request, Errors.NOT_LEADER_OR_FOLLOWER))

    def _handle_leader_hint(
        self, epoch: int, leader_id: int | None, now_ms: int, source_id: int
    ) -> None:
        """Follow what a message from ``source_id`` says about the quorum (KIP-595: any
        response or request carrying a newer epoch moves the receiver to it)."""
        quorum = self._quorum
        state = quorum.state
        if (
            isinstance(state, CandidateState)
            and state.pre_vote
            and epoch == quorum.epoch
            and leader_id is not None
            and leader_id == state.retained_leader_id
            and source_id != leader_id
        ):
            # It stands because that leader went quiet. Another voter that still follows it
            # is no news (KIP-996): going back to it would restart the fetch timeout, and two
            # voters timing out in turn would send each other back for ever.
            return
        known_leader = (
            leader_id is not None and leader_id != self.node_id and leader_id in quorum.voters
        )
        if epoch > quorum.epoch:
            if known_leader:
                assert leader_id is not None
                quorum.transition_to_follower(epoch, leader_id, now_ms)
            else:
                quorum.transition_to_unattached(epoch, now_ms)
        elif (
            epoch == quorum.epoch
            and known_leader
            and isinstance(quorum.state, UnattachedState | VotedState | CandidateState)
        ):
            # There is one leader per epoch, so a named leader of this epoch is the leader.
            assert leader_id is not None
            quorum.transition_to_follower(epoch, leader_id, now_ms)

    # -- Vote ------------------------------------------------------------------------------

    def _handle_vote_request(self, request: VoteRequest, now_ms: int) -> None:
        quorum = self._quorum
        candidate = request.candidate_id
        if not quorum.is_voter or candidate not in quorum.voters or candidate != request.source_id:
            self._send_vote_response(request, granted=False, error=Errors.INCONSISTENT_VOTER_SET)
            return
        if request.candidate_epoch < quorum.epoch:
            self._send_vote_response(request, granted=False, error=Errors.FENCED_LEADER_EPOCH)
            return
        if not request.pre_vote and request.candidate_epoch > quorum.epoch:
            # A real candidacy in a newer epoch ends ours (Raft §5.1); a pre-vote changes
            # nothing on the receiver (KIP-996).
            quorum.transition_to_unattached(
                request.candidate_epoch, now_ms, keep_election_timer=True
            )
        # Raft §5.4.1: only a log at least as up to date, by last epoch then end offset.
        up_to_date = (request.last_offset_epoch, request.last_offset) >= (
            self._log.last_fetched_epoch,
            self._log.end_offset,
        )
        state = quorum.state
        if request.pre_vote:
            granted = up_to_date and not state.has_live_leader(now_ms)
        else:
            granted = up_to_date and state.can_grant_vote(candidate)
            if granted and isinstance(state, UnattachedState):
                quorum.transition_to_voted(quorum.epoch, candidate, now_ms)
            elif isinstance(state, CandidateState) and not state.pre_vote:
                # A rival candidate of our epoch voted for itself: the vote is split. Back off
                # now (the short randomized backoff, still counting grants) instead of waiting
                # out the election timeout for a voter that may be the dead leader; giving up
                # early is safe, and the backoff grows with each retry.
                state.record_vote(candidate, granted=False)
                if not self._maybe_conclude_election(state, now_ms) and not state.is_backing_off:
                    self._start_backoff(state, now_ms)
        self._send_vote_response(request, granted=granted, error=Errors.NONE)

    def _send_vote_response(self, request: VoteRequest, *, granted: bool, error: Errors) -> None:
        self._send(
            VoteResponse(
                source_id=self.node_id,
                destination_id=request.source_id,
                error=error,
                leader_id=self._quorum.leader_id,
                leader_epoch=self._quorum.epoch,
                vote_granted=granted,
                candidate_epoch=request.candidate_epoch,
                pre_vote=request.pre_vote,
            )
        )

    def _handle_vote_response(self, response: VoteResponse, now_ms: int) -> None:
        self._handle_leader_hint(
            response.leader_epoch, response.leader_id, now_ms, response.source_id
        )
        state = self._quorum.state
        if not isinstance(state, CandidateState):
            return
        if response.pre_vote != state.pre_vote or response.candidate_epoch != state.target_epoch:
            return  # an answer to an earlier candidacy
        granted = response.vote_granted and response.error is Errors.NONE
        state.record_vote(response.source_id, granted)
        self._maybe_conclude_election(state, now_ms)

    # -- BeginQuorumEpoch ------------------------------------------------------------------

    def _handle_begin_quorum_epoch_request(
        self, request: BeginQuorumEpochRequest, now_ms: int
    ) -> None:
        error = Errors.NONE
        if request.leader_epoch < self._quorum.epoch:
            error = Errors.FENCED_LEADER_EPOCH
        elif request.leader_id != request.source_id:
            error = Errors.INVALID_REQUEST
        else:
            self._handle_leader_hint(
                request.leader_epoch, request.leader_id, now_ms, request.source_id
            )
        self._send(
            BeginQuorumEpochResponse(
                source_id=self.node_id,
                destination_id=request.source_id,
                error=error,
                leader_id=self._quorum.leader_id,
                leader_epoch=self._quorum.epoch,
            )
        )

    def _handle_begin_quorum_epoch_response(
        self, response: BeginQuorumEpochResponse, now_ms: int
    ) -> None:
        self._handle_leader_hint(
            response.leader_epoch, response.leader_id, now_ms, response.source_id
        )
        state = self._quorum.state
        if (
            isinstance(state, LeaderState)
            and response.leader_epoch == state.epoch
            and response.error is Errors.NONE
        ):
            state.begin_quorum_unacked.discard(response.source_id)

    # -- EndQuorumEpoch --------------------------------------------------------------------

    def _handle_end_quorum_epoch_request(self, request: EndQuorumEpochRequest, now_ms: int) -> None:
        quorum = self._quorum
        error = Errors.NONE
        if request.leader_epoch < quorum.epoch:
            error = Errors.FENCED_LEADER_EPOCH
        else:
            if request.leader_epoch > quorum.epoch:
                quorum.transition_to_unattached(request.leader_epoch, now_ms)
            successors = request.preferred_successors
            position = successors.index(self.node_id) if self.node_id in successors else None
            standby_ms = now_ms + quorum.end_quorum_backoff_ms(position)
            state = quorum.state
            if isinstance(state, FollowerState) and state.leader_id == request.leader_id:
                state.leader_resigned = True
                state.fetch_deadline_ms = min(state.fetch_deadline_ms, standby_ms)
            elif (
                isinstance(state, UnattachedState | VotedState)
                and state.election_deadline_ms is not None
            ):
                state.election_deadline_ms = min(state.election_deadline_ms, standby_ms)
        self._send(
            EndQuorumEpochResponse(
                source_id=self.node_id,
                destination_id=request.source_id,
                error=error,
                leader_id=quorum.leader_id,
                leader_epoch=quorum.epoch,
            )
        )

    def _handle_end_quorum_epoch_response(
        self, response: EndQuorumEpochResponse, now_ms: int
    ) -> None:
        self._handle_leader_hint(
            response.leader_epoch, response.leader_id, now_ms, response.source_id
        )
        state = self._quorum.state
        if (
            isinstance(state, ResignedState)
            and response.leader_epoch == state.epoch
            and response.error is Errors.NONE
        ):
            state.end_quorum_unacked.discard(response.source_id)

    # -- Fetch, leader side ----------------------------------------------------------------

    def _handle_fetch_request(self, request: FetchRequest, now_ms: int) -> None:
        state = self._quorum.state
        if request.current_leader_epoch < state.epoch:
            self._send(self._error_fetch_response(request, Errors.FENCED_LEADER_EPOCH))
            return
        if request.current_leader_epoch > state.epoch:
            self._send(self._error_fetch_response(request, Errors.UNKNOWN_LEADER_EPOCH))
            return
        if not isinstance(state, LeaderState):
            self._send(self._error_fetch_response(request, Errors.NOT_LEADER_OR_FOLLOWER))
            return
        if (
            request.replica_id != request.source_id
            or request.replica_id == self.node_id
            or request.fetch_offset < 0
            or request.last_fetched_epoch < 0
        ):
            self._send(self._error_fetch_response(request, Errors.INVALID_REQUEST))
            return
        position = validate_offset_and_epoch(
            self._log, request.fetch_offset, request.last_fetched_epoch
        )
        if position.snapshot is not None:
            self._send(self._leader_fetch_response(state, request, snapshot=position.snapshot))
            return
        if request.fetch_offset < self._log.log_start_offset:
            self._send(self._error_fetch_response(request, Errors.OFFSET_OUT_OF_RANGE))
            return
        if position.diverging is not None:
            self._send(self._leader_fetch_response(state, request, diverging=position.diverging))
            return
        state.update_replica(request.replica_id, request.fetch_offset, self._log.end_offset, now_ms)
        if request.fetch_offset < self._log.end_offset or request.max_wait_ms <= 0:
            self._send(self._leader_fetch_response(state, request))
        else:
            # Nothing new: park it (replacing an older one from the same replica) until an
            # append, a high-watermark move, or max_wait_ms.
            state.parked_fetches[request.replica_id] = (request, now_ms + request.max_wait_ms)
        # This fetch may be the acknowledgement that moves the high watermark, which then
        # completes the parked fetches, this one included.
        self._maybe_update_leader_high_watermark(state, now_ms)

    def _leader_fetch_response(
        self,
        state: LeaderState,
        request: FetchRequest,
        *,
        diverging: EpochEndOffset | None = None,
        snapshot: SnapshotId | None = None,
    ) -> FetchResponse:
        records: tuple[Entry, ...] = ()
        if diverging is None and snapshot is None and request.fetch_offset < self._log.end_offset:
            records = tuple(self._log.read(request.fetch_offset, self._config.fetch_max_entries))
        return FetchResponse(
            source_id=self.node_id,
            destination_id=request.source_id,
            leader_id=self.node_id,
            leader_epoch=state.epoch,
            high_watermark=self._high_watermark,
            fetch_offset=request.fetch_offset,
            last_fetched_epoch=request.last_fetched_epoch,
            records=records,
            diverging_epoch=diverging,
            snapshot_id=snapshot,
        )

    def _error_fetch_response(self, request: FetchRequest, error: Errors) -> FetchResponse:
        return FetchResponse(
            source_id=self.node_id,
            destination_id=request.source_id,
            error=error,
            leader_id=self._quorum.leader_id,
            leader_epoch=self._quorum.epoch,
            fetch_offset=request.fetch_offset,
            last_fetched_epoch=request.last_fetched_epoch,
        )

    def _complete_parked_fetches(self, state: LeaderState, now_ms: int) -> None:
        parked = [request for request, _ in state.parked_fetches.values()]
        state.parked_fetches.clear()
        for request in parked:
            self._send(self._leader_fetch_response(state, request))

    def _maybe_update_leader_high_watermark(self, state: LeaderState, now_ms: int) -> None:
        candidate = state.high_watermark_candidate()
        if candidate is not None and candidate > self._high_watermark:
            self._high_watermark = candidate
            self._complete_parked_fetches(state, now_ms)

    # -- Fetch, follower side --------------------------------------------------------------

    def _send_fetch(self, state: FollowerState, now_ms: int) -> None:
        if state.snapshot is not None:
            self._send(
                FetchSnapshotRequest(
                    source_id=self.node_id,
                    destination_id=state.leader_id,
                    replica_id=self.node_id,
                    current_leader_epoch=state.epoch,
                    snapshot_id=state.snapshot,
                    position=len(state.snapshot_data),
                    max_bytes=self._config.fetch_snapshot_max_bytes,
                )
            )
            state.fetch_at_ms = now_ms + self._config.request_timeout_ms
            return
        self._send(
            FetchRequest(
                source_id=self.node_id,
                destination_id=state.leader_id,
                replica_id=self.node_id,
                current_leader_epoch=state.epoch,
                fetch_offset=self._log.end_offset,
                last_fetched_epoch=self._log.last_fetched_epoch,
                max_wait_ms=self._config.fetch_max_wait_ms,
            )
        )
        # Presumed lost if no answer comes within the long poll plus the request timeout.
        state.fetch_at_ms = (
            now_ms + self._config.fetch_max_wait_ms + self._config.request_timeout_ms
        )

    def _follower_of(
        self, response: FetchResponse | FetchSnapshotResponse, now_ms: int
    ) -> FollowerState | None:
        """The follower state a fetch's response is for (None: not from our leader in our
        epoch), after noting the leader it names."""
        self._handle_leader_hint(
            response.leader_epoch, response.leader_id, now_ms, response.source_id
        )
        state = self._quorum.state
        if (
            not isinstance(state, FollowerState)
            or response.source_id != state.leader_id
            or response.leader_epoch != state.epoch
        ):
            return None
        return state

    def _handled_fetch_error(self, state: FollowerState, error: Errors, now_ms: int) -> bool:
        """Act on a fetch's (or snapshot fetch's) error common to both; whether there was
        one."""
        if error is Errors.NOT_LEADER_OR_FOLLOWER:
            # Our leader gave up this epoch (it resigned, or restarted) and will not lead it
            # again: stop fetching. An observer looks for the next leader at once; a voter
            # stands when the fetch timeout runs out.
            state.leader_resigned = True
            if self._quorum.is_voter:
                state.fetch_at_ms = state.fetch_deadline_ms
            else:
                self._quorum.transition_to_unattached(state.epoch, now_ms)
        elif error is Errors.FENCED_LEADER_EPOCH:
            # We asked in an older epoch; the hint moved us to the leader's: ask again.
            state.fetch_at_ms = now_ms
        elif error is not Errors.NONE:
            state.fetch_at_ms = now_ms + self._config.retry_backoff_ms
        return error is not Errors.NONE

    def _handle_fetch_response(self, response: FetchResponse, now_ms: int) -> None:
        state = self._follower_of(response, now_ms)
        if state is None:
            return
        position = (self._log.end_offset, self._log.last_fetched_epoch)
        if (response.fetch_offset, response.last_fetched_epoch) != position:
            return  # answers a position we have since left (a duplicate or a straggler)
        if self._handled_fetch_error(state, response.error, now_ms):
            return
        if not state.leader_resigned:
            state.fetch_deadline_ms = now_ms + self._config.fetch_timeout_ms
        if state.snapshot is not None:
            return  # a straggler from before the snapshot fetch began
        if response.snapshot_id is not None:
            if response.snapshot_id.end_offset < self._high_watermark:
                raise RaftInvariantError(
                    f"replica {self.node_id} was sent snapshot {response.snapshot_id}, below "
                    f"its high watermark {self._high_watermark}"
                )
            state.snapshot = response.snapshot_id
            state.snapshot_data = bytearray()
        elif response.diverging_epoch is not None:
            self._truncate_to_diverging(response.diverging_epoch)
        else:
            if response.records:
                if response.records[0].offset != self._log.end_offset:
                    raise RaftInvariantError(
                        f"fetch response for offset {response.fetch_offset} starts at "
                        f"{response.records[0].offset}"
                    )
                self._log.append_as_follower(response.records)
                self._flush_log = True
            if response.high_watermark is not None:
                # Below our end offset our log now equals the leader's (log matching), so
                # whatever the leader has committed there is committed here too.
                hw = min(response.high_watermark, self._log.end_offset)
                self._high_watermark = max(self._high_watermark, hw)
        state.fetch_at_ms = now_ms  # fetch again at once; the leader long-polls

    def _truncate_to_diverging(self, diverging: EpochEndOffset) -> None:
        """Truncate to where the leader's and our logs last agree on ``diverging.epoch``."""
        local = end_offset_for_epoch(self._log, diverging.epoch)
        offset = min(local.end_offset, diverging.end_offset, self._log.end_offset)
        if offset < self._high_watermark:
            raise RaftInvariantError(
                f"replica {self.node_id} asked to truncate to {offset}, below its high "
                f"watermark {self._high_watermark} (diverging epoch {diverging})"
            )
        self._log.truncate_to(offset)
        self._flush_log = True

    # -- FetchSnapshot (KIP-630) -----------------------------------------------------------

    def _handle_fetch_snapshot_request(self, request: FetchSnapshotRequest, now_ms: int) -> None:
        state = self._quorum.state
        error = Errors.NONE
        data = b""
        size = 0
        if request.current_leader_epoch < state.epoch:
            error = Errors.FENCED_LEADER_EPOCH
        elif request.current_leader_epoch > state.epoch:
            error = Errors.UNKNOWN_LEADER_EPOCH
        elif not isinstance(state, LeaderState):
            error = Errors.NOT_LEADER_OR_FOLLOWER
        elif (
            request.replica_id != request.source_id
            or request.replica_id == self.node_id
            or request.position < 0
            or request.max_bytes <= 0
        ):
            error = Errors.INVALID_REQUEST
        elif request.snapshot_id not in self._log.snapshot_ids():
            error = Errors.SNAPSHOT_NOT_FOUND
        else:
            size = self._log.snapshot_size(request.snapshot_id)
            if request.position > size:
                error = Errors.POSITION_OUT_OF_RANGE
            else:
                max_bytes = min(request.max_bytes, self._config.fetch_snapshot_max_bytes)
                data = self._log.read_snapshot(request.snapshot_id, request.position, max_bytes)
                state.touch_replica(request.replica_id, now_ms)
        self._send(
            FetchSnapshotResponse(
                source_id=self.node_id,
                destination_id=request.source_id,
                error=error,
                leader_id=self._quorum.leader_id,
                leader_epoch=self._quorum.epoch,
                snapshot_id=request.snapshot_id,
                size=size,
                position=request.position,
                data=data,
            )
        )

    def _handle_fetch_snapshot_response(self, response: FetchSnapshotResponse, now_ms: int) -> None:
        state = self._follower_of(response, now_ms)
        if (
            state is None
            or state.snapshot is None
            or response.snapshot_id != state.snapshot
            or response.position != len(state.snapshot_data)
        ):
            return  # not the chunk we wait for (a duplicate, a straggler, another epoch)
        if response.error is not Errors.NONE:
            if response.error in (Errors.SNAPSHOT_NOT_FOUND, Errors.POSITION_OUT_OF_RANGE):
                # The leader let that snapshot go for a newer one: a fetch names the newer one.
                state.snapshot = None
                state.fetch_at_ms = now_ms
                return
            if response.error is Errors.NOT_LEADER_OR_FOLLOWER:
                state.snapshot = None
            self._handled_fetch_error(state, response.error, now_ms)
            return
        end = response.position + len(response.data)
        if end > response.size or (not response.data and end < response.size):
            raise RaftInvariantError(
                f"snapshot {state.snapshot} chunk at {response.position} of "
                f"{len(response.data)} bytes does not fit its size {response.size}"
            )
        if not state.leader_resigned:
            state.fetch_deadline_ms = now_ms + self._config.fetch_timeout_ms
        state.snapshot_data += response.data
        if end == response.size:
            self._install_snapshot(state.snapshot, bytes(state.snapshot_data))
            state.snapshot = None
            state.snapshot_data = bytearray()
        state.fetch_at_ms = now_ms

    def _install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """The whole snapshot is here: keep it, restart the log at its end, and have the
        driver load it before anything committed after it."""
        if snapshot_id.end_offset < self._high_watermark:
            raise RaftInvariantError(
                f"replica {self.node_id} fetched snapshot {snapshot_id}, below its high "
                f"watermark {self._high_watermark}"
            )
        if snapshot_id not in self._log.snapshot_ids():
            self._log.create_snapshot(snapshot_id, data)
        # The snapshot's state replaces the log below its end: whatever this log holds there
        # is either the same committed entries or uncommitted ones a leader never kept.
        self._log.truncate_to_latest_snapshot(force=True)
        self._flush_log = True
        self._high_watermark = snapshot_id.end_offset
        self._applied_next = snapshot_id.end_offset
        self._snapshot_to_load = snapshot_id

    # -- plumbing --------------------------------------------------------------------------

    def _send(self, message: Message) -> None:
        self._messages.append(message)

    def __repr__(self) -> str:
        return (
            f"RaftNode(id={self.node_id}, {self._quorum.state!r}, "
            f"end_offset={self._log.end_offset}, high_watermark={self._high_watermark})"
        )
