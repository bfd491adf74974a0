"""The roles of a quorum replica, one class each, and :class:`QuorumState`, their owner.

A role object holds what the replica knows in that role (votes collected, replicas' progress,
timers as absolute deadlines in ms); it lives exactly as long as the replica keeps the role.
Only :class:`QuorumState` creates role objects, and it refuses every transition that the table
in its docstring does not list. Nothing here sends messages or touches the log: the node
(:mod:`rillet.raft.node`) decides *when* to move and *what* to say; this module decides whether
the move is legal and what must then be remembered durably.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, NoReturn, TypeAlias, TypeVar

from rillet.raft.config import RaftConfig
from rillet.raft.log import SnapshotId
from rillet.raft.messages import FetchRequest
from rillet.raft.store import ElectionState

__all__ = [
    "CandidateState",
    "EpochState",
    "FollowerState",
    "IllegalTransitionError",
    "LeaderState",
    "QuorumState",
    "ReplicaState",
    "ResignedState",
    "UnattachedState",
    "VotedState",
]


_S = TypeVar("_S", bound="EpochState")


class IllegalTransitionError(RuntimeError):
    """A role transition that the quorum's rules forbid; always a bug in the caller."""


class _Role:
    """What every role has: an epoch, a name, an answer to "whom do I follow"."""

    name: ClassVar[str] = "?"

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    @property
    def leader_id(self) -> int | None:
        """The leader this replica follows (or is) in :attr:`epoch`, if any."""
        return None

    def election(self) -> ElectionState:
        """The durable part of this role."""
        return ElectionState(self.epoch, None, None)

    def has_live_leader(self, now_ms: int) -> bool:
        """Whether this replica currently hears from a leader (KIP-996: it then rejects
        pre-votes, so an isolated voter cannot unseat a healthy leader)."""
        return False

    def can_grant_vote(self, candidate_id: int) -> bool:
        """Whether a real vote in this same epoch may go to ``candidate_id`` (log freshness
        aside): one vote per epoch (Raft §5.2)."""
        return False

    def deadlines(self, check_quorum: bool) -> list[int | None]:
        """When this role's timers fire (None: a timer not set); the node ticks at the
        earliest."""
        return []

    def __repr__(self) -> str:
        return f"{self.name}(epoch={self.epoch})"


class UnattachedState(_Role):
    """Knows an epoch but neither a leader nor a vote in it. A voter waits for the election
    deadline (then stands); an observer, which never stands, instead asks a random voter for the
    leader every ``discovery_at_ms``."""

    name = "Unattached"

    def __init__(
        self, epoch: int, *, election_deadline_ms: int | None, discovery_at_ms: int | None
    ) -> None:
        super().__init__(epoch)
        self.election_deadline_ms = election_deadline_ms
        self.discovery_at_ms = discovery_at_ms

    def deadlines(self, check_quorum: bool) -> list[int | None]:
        return [self.election_deadline_ms, self.discovery_at_ms]

    def can_grant_vote(self, candidate_id: int) -> bool:
        return True


class VotedState(_Role):
    """Has voted for ``voted_id`` in this epoch and waits for the outcome (or the deadline)."""

    name = "Voted"

    def __init__(self, epoch: int, *, voted_id: int, election_deadline_ms: int) -> None:
        super().__init__(epoch)
        self.voted_id = voted_id
        self.election_deadline_ms = election_deadline_ms

    def deadlines(self, check_quorum: bool) -> list[int | None]:
        return [self.election_deadline_ms]

    def election(self) -> ElectionState:
        return ElectionState(self.epoch, self.voted_id, None)

    def can_grant_vote(self, candidate_id: int) -> bool:
        # The same answer again: the first response may have been lost.
        return candidate_id == self.voted_id

    def __repr__(self) -> str:
        return f"Voted(epoch={self.epoch}, voted={self.voted_id})"


class CandidateState(_Role):
    """Stands for election: collects votes from the voters, its own included.

    A pre-vote candidate (KIP-996) asks whether the voters *would* vote for it in
    ``epoch + 1`` without changing its own epoch; it keeps the vote and leader it had in
    ``epoch`` (``retained_*``), so what it persisted stays true. A real candidate stands in
    ``epoch`` itself, having voted for itself. After the election deadline without a majority,
    or after a majority said no, the candidate backs off until ``backoff_until_ms`` and then
    stands again.
    """

    name = "Candidate"

    def __init__(
        self,
        epoch: int,
        *,
        local_id: int,
        voters: frozenset[int],
        pre_vote: bool,
        retries: int,
        election_deadline_ms: int,
        vote_resend_at_ms: int,
        retained_voted_id: int | None = None,
        retained_leader_id: int | None = None,
    ) -> None:
        super().__init__(epoch)
        self.local_id = local_id
        self.voters = voters
        self.pre_vote = pre_vote
        self.retries = retries
        self.election_deadline_ms = election_deadline_ms
        self.vote_resend_at_ms = vote_resend_at_ms
        self.backoff_until_ms: int | None = None
        self.retained_voted_id = retained_voted_id
        self.retained_leader_id = retained_leader_id
        self.granted: set[int] = {local_id}
        self.rejected: set[int] = set()

    def deadlines(self, check_quorum: bool) -> list[int | None]:
        if self.backoff_until_ms is not None:
            return [self.backoff_until_ms]
        resend = [self.vote_resend_at_ms] if self.unrecorded_voters() else []
        return [self.election_deadline_ms, *resend]

    @property
    def target_epoch(self) -> int:
        """The epoch the election is for."""
        return self.epoch + 1 if self.pre_vote else self.epoch

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def record_vote(self, voter_id: int, granted: bool) -> None:
        """Count one voter's answer; the first answer of each voter stands."""
        if voter_id not in self.voters or voter_id in self.granted or voter_id in self.rejected:
            return
        (self.granted if granted else self.rejected).add(voter_id)

    def is_won(self) -> bool:
        return len(self.granted) >= self.majority

    def is_lost(self) -> bool:
        return len(self.rejected) > len(self.voters) - self.majority

    def unrecorded_voters(self) -> list[int]:
        return sorted(self.voters - self.granted - self.rejected)

    @property
    def is_backing_off(self) -> bool:
        return self.backoff_until_ms is not None

    def election(self) -> ElectionState:
        if self.pre_vote:
            return ElectionState(self.epoch, self.retained_voted_id, self.retained_leader_id)
        return ElectionState(self.epoch, self.local_id, None)

    def can_grant_vote(self, candidate_id: int) -> bool:
        # A real candidate voted for itself. A pre-vote candidate may repeat the vote it cast
        # in this epoch before it started its pre-vote.
        return self.pre_vote and candidate_id == self.retained_voted_id

    def __repr__(self) -> str:
        kind = "pre-vote, " if self.pre_vote else ""
        return f"Candidate({kind}epoch={self.epoch}, granted={sorted(self.granted)})"


@dataclass(slots=True)
class ReplicaState:
    """The leader's view of one replica: its log end offset (the last fetch offset) and when
    it last fetched and last was caught up (``metadata-quorum describe --replication``)."""

    replica_id: int
    log_end_offset: int = 0
    last_fetch_ms: int | None = None
    last_caught_up_ms: int | None = None


class LeaderState(_Role):
    """Leads ``epoch``: tracks each voter's replicated offset and computes the high watermark.

    The high watermark is the largest offset that a majority of voters (the leader included)
    have replicated, and it is only known once that includes ``epoch_start_offset`` (the
    leader-change entry): a leader commits entries of earlier epochs only by committing one of
    its own (Raft §5.4.2). Observers are tracked but never counted.

    Fetches with nothing new to return are parked in :attr:`parked_fetches` (one per replica,
    the newest) until an append, a high-watermark move or their deadline. For check quorum
    the leader notes which voters fetched since the last check; if by the check deadline they
    (with the leader) are no majority, the leader resigns.
    """

    name = "Leader"

    def __init__(
        self,
        epoch: int,
        *,
        local_id: int,
        voters: frozenset[int],
        epoch_start_offset: int,
        granting_voters: frozenset[int],
        now_ms: int,
        check_quorum_timeout_ms: int,
        begin_quorum_resend_at_ms: int,
    ) -> None:
        super().__init__(epoch)
        self.local_id = local_id
        self.voters = voters
        self.epoch_start_offset = epoch_start_offset
        self.granting_voters = granting_voters
        self.voter_states = {v: ReplicaState(v) for v in sorted(voters)}
        self.observer_states: dict[int, ReplicaState] = {}
        self.begin_quorum_unacked: set[int] = set(voters) - {local_id}
        self.begin_quorum_resend_at_ms = begin_quorum_resend_at_ms
        self.parked_fetches: dict[int, tuple[FetchRequest, int]] = {}
        self.check_quorum_timeout_ms = check_quorum_timeout_ms
        self.check_quorum_deadline_ms = now_ms + check_quorum_timeout_ms
        self.fetched_since_check: set[int] = {local_id}

    def deadlines(self, check_quorum: bool) -> list[int | None]:
        out: list[int | None] = [deadline for _, deadline in self.parked_fetches.values()]
        if check_quorum:
            out.append(self.check_quorum_deadline_ms)
        if self.begin_quorum_unacked:
            out.append(self.begin_quorum_resend_at_ms)
        return out

    @property
    def leader_id(self) -> int:
        return self.local_id

    def election(self) -> ElectionState:
        return ElectionState(self.epoch, self.local_id, self.local_id)

    def has_live_leader(self, now_ms: int) -> bool:
        return True

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def update_local_end_offset(self, end_offset: int, now_ms: int) -> None:
        state = self.voter_states[self.local_id]
        state.log_end_offset = end_offset
        state.last_fetch_ms = now_ms
        state.last_caught_up_ms = now_ms

    def touch_replica(self, replica_id: int, now_ms: int) -> None:
        """A voter is fetching a snapshot: it follows this leader (for check quorum), though
        its log end offset is not known yet."""
        if replica_id in self.voters:
            self.begin_quorum_unacked.discard(replica_id)
            self.fetched_since_check.add(replica_id)
            self.voter_states[replica_id].last_fetch_ms = now_ms

    def update_replica(
        self, replica_id: int, end_offset: int, leader_end_offset: int, now_ms: int
    ) -> None:
        """Record a fetch by ``replica_id`` whose position the leader validated."""
        if replica_id in self.voters:
            state = self.voter_states[replica_id]
            self.begin_quorum_unacked.discard(replica_id)
            self.fetched_since_check.add(replica_id)
        else:
            state = self.observer_states.setdefault(replica_id, ReplicaState(replica_id))
        state.log_end_offset = end_offset
        state.last_fetch_ms = now_ms
        if end_offset >= leader_end_offset:
            state.last_caught_up_ms = now_ms

    def majority_end_offset(self) -> int:
        """The largest offset that a majority of voters have replicated up to."""
        ends = sorted((s.log_end_offset for s in self.voter_states.values()), reverse=True)
        return ends[self.majority - 1]

    def high_watermark_candidate(self) -> int | None:
        """:meth:`majority_end_offset` once it covers this epoch's first entry, else None."""
        offset = self.majority_end_offset()
        return offset if offset > self.epoch_start_offset else None

    def check_quorum(self, now_ms: int) -> bool:
        """Whether a majority of voters fetched recently; False means: resign."""
        if len(self.fetched_since_check) >= self.majority:
            self.fetched_since_check = {self.local_id}
            self.check_quorum_deadline_ms = now_ms + self.check_quorum_timeout_ms
            return True
        return now_ms < self.check_quorum_deadline_ms

    def preferred_successors(self) -> tuple[int, ...]:
        """The other voters, most caught up first (KIP-595 EndQuorumEpoch)."""
        others = [s for v, s in self.voter_states.items() if v != self.local_id]
        others.sort(key=lambda s: (-s.log_end_offset, s.replica_id))
        return tuple(s.replica_id for s in others)

    def __repr__(self) -> str:
        return f"Leader(epoch={self.epoch})"


class FollowerState(_Role):
    """Follows ``leader_id`` in ``epoch``: fetches from it and takes its high watermark.

    ``fetch_deadline_ms`` moves forward with every successful fetch; when it passes, a voter
    stands for election and an observer forgets the leader. ``fetch_at_ms`` is when the next
    fetch goes out (a resend if one is in flight). After an EndQuorumEpoch from the leader
    (``leader_resigned``) the deadline is pulled in and the leader no longer counts as live.
    """

    name = "Follower"

    def __init__(
        self, epoch: int, *, leader_id: int, fetch_deadline_ms: int, fetch_at_ms: int
    ) -> None:
        super().__init__(epoch)
        self._leader_id = leader_id
        self.fetch_deadline_ms = fetch_deadline_ms
        self.fetch_at_ms = fetch_at_ms
        self.leader_resigned = False
        # A snapshot being fetched from the leader (KIP-630) and the bytes received so far.
        self.snapshot: SnapshotId | None = None
        self.snapshot_data = bytearray()

    def deadlines(self, check_quorum: bool) -> list[int | None]:
        return [self.fetch_deadline_ms, self.fetch_at_ms]

    @property
    def leader_id(self) -> int:
        return self._leader_id

    def election(self) -> ElectionState:
        return ElectionState(self.epoch, None, self._leader_id)

    def has_live_leader(self, now_ms: int) -> bool:
        return not self.leader_resigned and now_ms < self.fetch_deadline_ms

    def __repr__(self) -> str:
        return f"Follower(epoch={self.epoch}, leader={self._leader_id})"


class ResignedState(_Role):
    """A leader that gave up ``epoch`` (graceful shutdown, or check quorum failed, or it
    restarted after leading). It sends EndQuorumEpoch to the voters until they acknowledge,
    accepts no proposals, serves no fetches, and stands for election again at the deadline."""

    name = "Resigned"

    def __init__(
        self,
        epoch: int,
        *,
        local_id: int,
        voters: frozenset[int],
        preferred_successors: tuple[int, ...],
        election_deadline_ms: int,
        end_quorum_resend_at_ms: int,
    ) -> None:
        super().__init__(epoch)
        self.local_id = local_id
        self.preferred_successors = preferred_successors
        self.election_deadline_ms = election_deadline_ms
        self.end_quorum_unacked: set[int] = set(voters) - {local_id}
        self.end_quorum_resend_at_ms = end_quorum_resend_at_ms

    def deadlines(self, check_quorum: bool) -> list[int | None]:
        resend = [self.end_quorum_resend_at_ms] if self.end_quorum_unacked else []
        return [self.election_deadline_ms, *resend]

    def election(self) -> ElectionState:
        return ElectionState(self.epoch, self.local_id, self.local_id)


EpochState: TypeAlias = (
    UnattachedState | VotedState | CandidateState | LeaderState | FollowerState | ResignedState
)


class QuorumState:
    """Owns the local replica's role and the only legal moves between roles (KIP-595).

    ``e`` is the current epoch, ``e'`` the epoch of the target role. Legal transitions::

        from \\ to     Unattached      Voted       Candidate     Leader   Follower   Resigned
        Unattached    e' > e          e' = e      voter         -        e' >= e    -
        Voted         e' > e          -           voter         -        e' >= e    -
        Candidate     e' > e          -           voter         won      e' >= e    -
        Leader        e' > e          -           -             -        e' > e     e' = e
        Follower      e' > e, or      -           voter         -        e' > e     -
                      e' = e observer
        Resigned      e' > e          -           voter         -        e' > e     -

    A real candidacy is always for ``e + 1``; a pre-vote candidacy (KIP-996) keeps ``e``.
    Leader only from a real candidate that holds a majority, in its epoch. Voted only for
    another voter, and only from Unattached: one vote per epoch. Follower only of another
    voter. Observers (replicas that are not voters) are only ever Unattached or Follower.
    Anything else raises :class:`IllegalTransitionError`.

    The durable part of each role is its :class:`ElectionState`; after a transition that
    changes it, :meth:`take_unpersisted` returns it once, for the driver to persist before
    anything is sent. On construction the state is derived from the last persisted one:
    a leader restarts Resigned (its in-memory leadership is gone), a candidate restarts as a
    candidate of the same epoch (its vote for itself stands), a voter keeps its vote, and a
    replica whose log has a newer epoch than the persisted one starts Unattached in it.

    Not thread safe; the node that owns it is driven from one thread.
    """

    def __init__(
        self,
        *,
        local_id: int,
        voters: Iterable[int],
        config: RaftConfig,
        rng: random.Random,
        persisted: ElectionState | None,
        log_last_epoch: int,
        now_ms: int,
    ) -> None:
        self.local_id = local_id
        self.voters = frozenset(voters)
        if not self.voters:
            raise ValueError("a quorum needs at least one voter")
        self.config = config
        self._rng = rng
        election = persisted if persisted is not None else ElectionState(0, None, None)
        self._persisted = election
        self._unpersisted: ElectionState | None = None
        self._state: EpochState = self._initial_state(election, log_last_epoch, now_ms)
        self._note_election()

    # -- queries ---------------------------------------------------------------------------

    @property
    def state(self) -> EpochState:
        return self._state

    @property
    def epoch(self) -> int:
        return self._state.epoch

    @property
    def leader_id(self) -> int | None:
        return self._state.leader_id

    @property
    def is_voter(self) -> bool:
        return self.local_id in self.voters

    @property
    def is_only_voter(self) -> bool:
        return self.voters == {self.local_id}

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def take_unpersisted(self) -> ElectionState | None:
        """The election state to persist, once per change (None when nothing changed)."""
        pending, self._unpersisted = self._unpersisted, None
        return pending

    # -- timers ----------------------------------------------------------------------------

    def random_election_timeout_ms(self) -> int:
        """``election_timeout_ms`` plus jitter; zero when this replica is the only voter,
        since then there is nobody to wait for."""
        if self.is_only_voter:
            return 0
        timeout = self.config.election_timeout_ms
        return timeout + self._rng.randrange(timeout)

    def election_backoff_ms(self, retries: int) -> int:
        """Randomized binary exponential backoff after ``retries`` lost elections."""
        if self.is_only_voter:
            return 0
        base = max(1, self.config.retry_backoff_ms)
        ceiling = base * (1 << min(max(retries, 1), 16))
        return min(self.config.election_backoff_max_ms, self._rng.randrange(1, ceiling + 1))

    def end_quorum_backoff_ms(self, position: int | None) -> int:
        """How soon to stand after the leader resigned: immediately for the first preferred
        successor, exponentially later for the next ones, the full backoff cap plus jitter
        for voters not in the list (KIP-595, EndQuorumEpoch)."""
        if position is None:
            cap = self.config.election_backoff_max_ms
            return cap + self._rng.randrange(max(1, cap))
        if position == 0:
            return 0
        return min(
            self.config.election_backoff_max_ms,
            self.config.retry_backoff_ms * (1 << min(position - 1, 16)),
        )

    # -- transitions -----------------------------------------------------------------------

    def transition_to_unattached(
        self, epoch: int, now_ms: int, *, keep_election_timer: bool = False
    ) -> UnattachedState:
        """Move to ``epoch`` without a leader or a vote.

        With ``keep_election_timer`` a voter keeps the deadline it already had (its election
        or fetch timeout): learning of a newer epoch from a candidate it does not vote for
        must not postpone its own candidacy, or a candidate with a stale log that keeps
        standing would hold off every up-to-date voter forever (Raft §5.2: only granting a
        vote resets the timer).
        """
        current = self._state
        same_epoch_ok = (
            epoch == current.epoch and not self.is_voter and isinstance(current, FollowerState)
        )
        if epoch <= current.epoch and not same_epoch_ok:
            self._illegal(f"Unattached(epoch={epoch})")
        state = self._new_unattached(epoch, now_ms)
        if keep_election_timer and state.election_deadline_ms is not None:
            pending = self._pending_election_deadline()
            if pending is not None:
                state.election_deadline_ms = pending
        return self._set(state)

    def transition_to_voted(self, epoch: int, candidate_id: int, now_ms: int) -> VotedState:
        current = self._state
        if (
            not self.is_voter
            or not isinstance(current, UnattachedState)
            or epoch != current.epoch
            or candidate_id == self.local_id
            or candidate_id not in self.voters
        ):
            self._illegal(f"Voted(epoch={epoch}, voted={candidate_id})")
        state = VotedState(
            epoch,
            voted_id=candidate_id,
            election_deadline_ms=now_ms + self.random_election_timeout_ms(),
        )
        return self._set(state)

    def transition_to_candidate(self, now_ms: int, *, pre_vote: bool) -> CandidateState:
        current = self._state
        if not self.is_voter or isinstance(current, LeaderState):
            self._illegal(f"Candidate(pre_vote={pre_vote})")
        retries = current.retries + 1 if isinstance(current, CandidateState) else 1
        if pre_vote:
            kept = current.election()
            epoch = current.epoch
            retained_voted_id, retained_leader_id = kept.voted_id, kept.leader_id
        else:
            epoch = current.epoch + 1
            retained_voted_id = retained_leader_id = None
        state = CandidateState(
            epoch,
            local_id=self.local_id,
            voters=self.voters,
            pre_vote=pre_vote,
            retries=retries,
            election_deadline_ms=now_ms + self.random_election_timeout_ms(),
            vote_resend_at_ms=now_ms + self.config.request_timeout_ms,
            retained_voted_id=retained_voted_id,
            retained_leader_id=retained_leader_id,
        )
        return self._set(state)

    def transition_to_leader(self, epoch_start_offset: int, now_ms: int) -> LeaderState:
        current = self._state
        if not isinstance(current, CandidateState) or current.pre_vote or not current.is_won():
            self._illegal("Leader")
        state = LeaderState(
            current.epoch,
            local_id=self.local_id,
            voters=self.voters,
            epoch_start_offset=epoch_start_offset,
            granting_voters=frozenset(current.granted),
            now_ms=now_ms,
            check_quorum_timeout_ms=self.config.check_quorum_timeout_ms,
            begin_quorum_resend_at_ms=now_ms + self.config.request_timeout_ms,
        )
        return self._set(state)

    def transition_to_follower(self, epoch: int, leader_id: int, now_ms: int) -> FollowerState:
        current = self._state
        if (
            leader_id == self.local_id
            or leader_id not in self.voters
            or epoch < current.epoch
            or (
                epoch == current.epoch
                and not isinstance(current, UnattachedState | VotedState | CandidateState)
            )
        ):
            self._illegal(f"Follower(epoch={epoch}, leader={leader_id})")
        state = FollowerState(
            epoch,
            leader_id=leader_id,
            fetch_deadline_ms=now_ms + self.config.fetch_timeout_ms,
            fetch_at_ms=now_ms,
        )
        return self._set(state)

    def transition_to_resigned(
        self, preferred_successors: tuple[int, ...], now_ms: int
    ) -> ResignedState:
        current = self._state
        if not isinstance(current, LeaderState):
            self._illegal("Resigned")
        return self._set(self._new_resigned(current.epoch, preferred_successors, now_ms))

    # -- internals -------------------------------------------------------------------------

    def _initial_state(
        self, election: ElectionState, log_last_epoch: int, now_ms: int
    ) -> EpochState:
        epoch, voted_id, leader_id = election
        if log_last_epoch > epoch:
            # The log saw a newer epoch than the quorum state (it was flushed first): trust
            # the log's epoch, without a vote or a leader.
            return self._new_unattached(log_last_epoch, now_ms)
        if not self.is_voter:
            if leader_id is not None and leader_id in self.voters:
                return FollowerState(
                    epoch,
                    leader_id=leader_id,
                    fetch_deadline_ms=now_ms + self.config.fetch_timeout_ms,
                    fetch_at_ms=now_ms,
                )
            return self._new_unattached(epoch, now_ms)
        if leader_id == self.local_id:
            return self._new_resigned(epoch, (), now_ms)
        if leader_id is not None and leader_id in self.voters:
            return FollowerState(
                epoch,
                leader_id=leader_id,
                fetch_deadline_ms=now_ms + self.config.fetch_timeout_ms,
                fetch_at_ms=now_ms,
            )
        if voted_id == self.local_id:
            return CandidateState(
                epoch,
                local_id=self.local_id,
                voters=self.voters,
                pre_vote=False,
                retries=1,
                election_deadline_ms=now_ms + self.random_election_timeout_ms(),
                vote_resend_at_ms=now_ms,
            )
        if voted_id is not None and voted_id in self.voters:
            return VotedState(
                epoch,
                voted_id=voted_id,
                election_deadline_ms=now_ms + self.random_election_timeout_ms(),
            )
        return self._new_unattached(epoch, now_ms)

    def _pending_election_deadline(self) -> int | None:
        """When the current role would next stand for election on its own, if it would."""
        state = self._state
        if isinstance(state, UnattachedState | VotedState | ResignedState):
            return state.election_deadline_ms
        if isinstance(state, CandidateState):
            if state.backoff_until_ms is not None:
                return state.backoff_until_ms
            return state.election_deadline_ms
        if isinstance(state, FollowerState):
            return state.fetch_deadline_ms
        return None

    def _new_unattached(self, epoch: int, now_ms: int) -> UnattachedState:
        if self.is_voter:
            return UnattachedState(
                epoch,
                election_deadline_ms=now_ms + self.random_election_timeout_ms(),
                discovery_at_ms=None,
            )
        return UnattachedState(epoch, election_deadline_ms=None, discovery_at_ms=now_ms)

    def _new_resigned(
        self, epoch: int, preferred_successors: tuple[int, ...], now_ms: int
    ) -> ResignedState:
        return ResignedState(
            epoch,
            local_id=self.local_id,
            voters=self.voters,
            preferred_successors=preferred_successors,
            election_deadline_ms=now_ms + self.random_election_timeout_ms(),
            end_quorum_resend_at_ms=now_ms,
        )

    def _set(self, state: _S) -> _S:
        self._state = state
        self._note_election()
        return state

    def _note_election(self) -> None:
        election = self._state.election()
        if election != self._persisted:
            self._persisted = election
            self._unpersisted = election

    def _illegal(self, target: str) -> NoReturn:
        raise IllegalTransitionError(
            f"replica {self.local_id} ({'voter' if self.is_voter else 'observer'}): "
            f"illegal transition from {self._state!r} to {target}"
        )
