"""The quorum state: the durable (epoch, vote, leader) of one replica, and its store Protocol.

Kafka keeps it in the ``quorum-state`` file of the metadata log directory. It must be durable
before the replica acknowledges a vote or an epoch (DESIGN.md, "Data on disk"): a replica that
forgot its vote after a crash could vote twice in one epoch and elect two leaders.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

__all__ = ["ElectionState", "QuorumStateStore"]


class ElectionState(NamedTuple):
    """What a replica must remember across restarts: its epoch, whom it voted for in that
    epoch (if anyone), and the leader of that epoch (if known)."""

    epoch: int
    voted_id: int | None
    leader_id: int | None


class QuorumStateStore(Protocol):
    """Durable home of the :class:`ElectionState`.

    The Raft node reads it once, when it is constructed (:meth:`load`). The driver writes it:
    whenever :attr:`~rillet.raft.node.Outputs.quorum_state` is set, the driver calls
    :meth:`persist` and waits until the write is durable (fsync) before sending any message of
    those outputs, the way etcd's application writes the HardState of a ``Ready``.
    """

    def load(self) -> ElectionState | None:
        """The last persisted state, or None if nothing was ever persisted."""
        ...

    def persist(self, epoch: int, voted_id: int | None, leader_id: int | None) -> None:
        """Replace the stored state; durable when this returns."""
        ...
