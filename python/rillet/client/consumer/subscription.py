"""SubscriptionState: what a consumer reads and where it is (Kafka's SubscriptionState).

It owns the assignment (chosen by ``assign()``, or every partition of the subscribed topics)
and, per assigned partition, a :class:`PartitionState`: the position, a pending reset, pause,
and what has been fetched but not handed out. Not thread safe: the consumer's thread only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from rillet._core import AbortedTransactionFilter, ConsumerRecord
from rillet.errors import IllegalStateError
from rillet.types import TopicPartition

__all__ = ["EARLIEST", "LATEST", "PartitionState", "SubscriptionState"]

EARLIEST = -2
LATEST = -1


@dataclass
class PartitionState:
    """One assigned partition: where the consumer is and what it has buffered.

    Fetches run one response ahead of the position: while one response is being decoded,
    the next is fetched from where it ends (``fetch_offset``), so a partition's reader does
    not wait a round trip each time its buffer drains. ``generation`` changes whenever the
    position moves (seek, reset, error), so a response to an older fetch is dropped."""

    position: int | None = None  # None: reset by auto_offset_reset before fetching
    reset_to: int | None = None  # EARLIEST/LATEST when a reset is pending
    paused: bool = False
    records: list[ConsumerRecord] = field(default_factory=list)
    index: int = 0  # records[index:] are not handed out yet
    # The offset after the batches `records` were decoded from: once they are all handed
    # out the position moves there, past any batch they skipped at the end.
    records_next_offset: int = -1
    # Fetched batch bytes not decoded yet: raw[raw_pos:raw_end] (raw is the whole fetch
    # response, read in place), then each (response, start, end, aborted) in `fetched`.
    # Batches are decoded a poll's worth at a time, as highly compressed batches can expand
    # a thousandfold. A read_committed response's aborted transactions come as a filter
    # (raw_aborted for raw), whose state carries across the decodes of that response.
    raw: bytes = b""
    raw_pos: int = 0
    raw_end: int = 0
    raw_aborted: AbortedTransactionFilter | None = None
    fetched: deque[tuple[bytes, int, int, AbortedTransactionFilter | None]] = field(
        default_factory=deque
    )
    # Where the next fetch starts: after the last batch buffered (None: at the position).
    fetch_offset: int | None = None
    generation: int = 0
    # The leader epoch of the record before the position (KIP-320): sent with a fetch at the
    # position, so the leader can say where its log diverged; None after a seek or reset.
    last_epoch: int | None = None
    high_watermark: int = -1
    last_stable_offset: int = -1
    fetching: bool = False  # a fetch for this partition is in flight
    retry_at: float = 0.0  # after an error: no fetch before this time.monotonic()

    @property
    def buffered(self) -> bool:
        return self.index < len(self.records) or self.raw_pos < self.raw_end or bool(self.fetched)

    @property
    def next_fetch_offset(self) -> int | None:
        return self.position if self.fetch_offset is None else self.fetch_offset

    def clear(self) -> None:
        """Drop everything buffered or in flight (the position moved)."""
        self.records, self.index, self.records_next_offset = [], 0, -1
        self.raw, self.raw_pos, self.raw_end, self.raw_aborted = b"", 0, 0, None
        self.fetched.clear()
        self.fetch_offset = None
        self.generation += 1

    def move(self, offset: int | None, reset_to: int | None) -> None:
        """Read from ``offset`` next, or (``offset`` None) reset to ``reset_to``."""
        self.position = offset
        self.reset_to = reset_to
        self.last_epoch = None
        self.clear()

    def add_fetched(
        self,
        data: bytes,
        start: int,
        end: int,
        next_offset: int,
        aborted: AbortedTransactionFilter | None = None,
    ) -> None:
        if self.raw_pos < self.raw_end:
            self.fetched.append((data, start, end, aborted))
        else:
            self.raw, self.raw_pos, self.raw_end, self.raw_aborted = data, start, end, aborted
        if next_offset >= 0:
            self.fetch_offset = next_offset


class SubscriptionState:
    """The assignment and each assigned partition's state. Manual assignment and topic
    subscription exclude each other, as in Kafka."""

    def __init__(self) -> None:
        self.assignment: dict[TopicPartition, PartitionState] = {}
        self.subscription: set[str] = set()
        self.pattern: str | None = None  # a regex subscription, instead of topic names
        self.manual = False

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        if self.subscription:
            raise IllegalStateError(
                "Subscription to topics, partitions and pattern are mutually exclusive"
            )
        wanted = [TopicPartition(*tp) for tp in partitions]
        for tp in wanted:
            if not isinstance(tp.topic, str) or not isinstance(tp.partition, int):
                raise TypeError(f"not a TopicPartition: {tp!r}")
        self.manual = bool(wanted)
        self.set_assignment(wanted)

    def subscribe(self, topics: Iterable[str], pattern: str | None = None) -> None:
        if self.manual:
            raise IllegalStateError(
                "Subscription to topics, partitions and pattern are mutually exclusive"
            )
        self.subscription = {topics} if isinstance(topics, str) else set(topics)
        self.pattern = pattern

    @property
    def subscribed(self) -> bool:
        return bool(self.subscription) or self.pattern is not None

    def unsubscribe(self) -> None:
        self.subscription = set()
        self.pattern = None
        self.manual = False
        self.set_assignment([])

    def set_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        """Assign exactly ``partitions``, keeping the state of those already assigned."""
        self.assignment = {tp: self.assignment.get(tp) or PartitionState() for tp in partitions}

    def state(self, tp: TopicPartition) -> PartitionState:
        state = self.assignment.get(tp)
        if state is None:
            raise IllegalStateError(f"No current assignment for partition {tp}")
        return state

    def __iter__(self) -> Iterator[tuple[TopicPartition, PartitionState]]:
        return iter(list(self.assignment.items()))

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self.assignment.items() if s.paused}

    def needing_reset(self) -> list[TopicPartition]:
        """Unpaused partitions without a position."""
        return [tp for tp, s in self.assignment.items() if s.position is None and not s.paused]
