"""The states of a transactional id and their legal transitions (Kafka's ``TransactionState``).

=================  ==  ======================================  ==============================
state              id  entered from (``valid_previous_states``)  on
=================  ==  ======================================  ==============================
Empty              0   Empty, CompleteCommit, CompleteAbort    InitProducerId (new epoch/id)
Ongoing            1   Ongoing, Empty, CompleteCommit,         AddPartitionsToTxn,
                       CompleteAbort                           AddOffsetsToTxn
PrepareCommit      2   Ongoing                                 EndTxn(commit)
PrepareAbort       3   Ongoing, PrepareEpochFence              EndTxn(abort), a fence
CompleteCommit     4   PrepareCommit                           every commit marker written
CompleteAbort      5   PrepareAbort                            every abort marker written
Dead               6   Empty, CompleteCommit, CompleteAbort    expiry (a tombstone)
PrepareEpochFence  7   Ongoing                                 InitProducerId or the timeout
                                                               of an ongoing transaction
=================  ==  ======================================  ==============================

PrepareEpochFence and Dead are never written: a fence bumps the epoch and goes on to
PrepareAbort in the same step, and an expired id is removed by a tombstone. The ids are the
``TransactionStatus`` of a TransactionLogValue; the names are what DescribeTransactions and
ListTransactions report (and filter on).
"""

from __future__ import annotations

import enum

from rillet.errors import IllegalStateError

__all__ = ["TransactionState"]


class TransactionState(enum.Enum):
    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def state_name(self) -> str:
        """Kafka's name of the state (``Ongoing``, ``PrepareCommit``, ...)."""
        return self.value[1]

    def __str__(self) -> str:
        return self.state_name

    @property
    def valid_previous_states(self) -> frozenset[TransactionState]:
        return _VALID_PREVIOUS[self]

    @property
    def is_expiration_allowed(self) -> bool:
        """Whether an idle id in this state may expire (no transaction in progress)."""
        return self in (
            TransactionState.EMPTY,
            TransactionState.COMPLETE_COMMIT,
            TransactionState.COMPLETE_ABORT,
        )

    @property
    def is_prepare(self) -> bool:
        """PrepareCommit or PrepareAbort: the outcome is decided, markers are being written."""
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        for state in cls:
            if state.id == state_id:
                return state
        raise IllegalStateError(f"Unknown transaction state id {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        for state in cls:
            if state.state_name == name:
                return state
        return None


_S = TransactionState
_VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}
