"""Timing and sizing knobs of the Raft core, under Kafka's names.

Kafka's keys map onto these attributes as ``controller.quorum.<key>`` (KIP-595):
``election.timeout.ms``, ``election.backoff.max.ms``, ``fetch.timeout.ms``,
``request.timeout.ms``, ``retry.backoff.ms``. The defaults are Kafka's.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RaftConfig"]


@dataclass(frozen=True, kw_only=True, slots=True)
class RaftConfig:
    """Immutable settings of one :class:`~rillet.raft.node.RaftNode`.

    ``election_timeout_ms``: how long an unattached or voted voter waits before it stands for
    election; each wait is drawn from ``[election_timeout_ms, 2 * election_timeout_ms)``.
    ``fetch_timeout_ms``: how long a follower goes without a successful fetch before it
    considers the leader gone (a voter then stands for election, an observer looks for the
    leader again). The leader resigns when a majority of voters have not fetched for 1.5 times
    this long (check quorum).
    ``election_backoff_max_ms``: cap of the randomized, exponentially growing backoff after a
    lost election.
    ``request_timeout_ms``: after this long an unanswered request is presumed lost and resent.
    ``retry_backoff_ms``: base of every backoff (after an error, and of the election backoff).
    ``fetch_max_wait_ms``: how long the leader parks a fetch that has nothing new to return.
    ``fetch_max_entries``: most entries one fetch response carries.
    ``fetch_snapshot_max_bytes``: most snapshot bytes one FetchSnapshot response carries.
    ``pre_vote``: run a pre-vote round (KIP-996) before bumping the epoch, so a voter that
    cannot reach the leader does not disrupt a healthy quorum.
    ``check_quorum``: let a leader that has not heard from a majority resign.
    """

    election_timeout_ms: int = 1000
    election_backoff_max_ms: int = 1000
    fetch_timeout_ms: int = 2000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    fetch_max_wait_ms: int = 500
    fetch_max_entries: int = 1000
    fetch_snapshot_max_bytes: int = 1 << 20
    pre_vote: bool = True
    check_quorum: bool = True

    def __post_init__(self) -> None:
        for name in (
            "election_timeout_ms",
            "fetch_timeout_ms",
            "request_timeout_ms",
            "fetch_max_entries",
            "fetch_snapshot_max_bytes",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("election_backoff_max_ms", "retry_backoff_ms", "fetch_max_wait_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")

    @property
    def check_quorum_timeout_ms(self) -> int:
        """How long a leader may go without fetches from a majority (Kafka: 1.5x fetch timeout)."""
        return self.fetch_timeout_ms * 3 // 2
