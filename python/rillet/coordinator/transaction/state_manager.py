"""The transactional ids of one ``__transaction_state`` partition, their replay and their
writes (the pure part of Kafka's ``TransactionStateManager``).

:meth:`TransactionStateManager.replay` applies a record read from the log: a value replaces
the id's metadata whole (the topic is compacted: the last record of an id is its state), a
tombstone removes the id. :meth:`TransactionStateManager.write` is how a live shard changes
an id: it turns the prepared target into the record it appends and applies the target at
once, so that a shard rebuilt from the same records has the same ids (all but the unpersisted
``last_producer_epoch``, as in Kafka).

It also answers the scans behind the shard's timers (ongoing transactions past their timeout,
idle ids past ``transactional.id.expiration.ms``) and ListTransactions. Ids are visited in
sorted order, so that a run is reproducible.
"""

from __future__ import annotations

from collections.abc import Iterable

from rillet.coordinator.transaction.config import TransactionCoordinatorConfig
from rillet.coordinator.transaction.messages import ListedTransaction, ListTransactionsResponse
from rillet.coordinator.transaction.metadata import TransactionMetadata, TxnTransitMetadata
from rillet.coordinator.transaction.records import TransactionLogKey, TransactionRecord
from rillet.coordinator.transaction.results import Operation
from rillet.coordinator.transaction.state import TransactionState
from rillet.errors import IllegalStateError

__all__ = ["TransactionStateManager"]


class TransactionStateManager:
    """Transactional id -> :class:`TransactionMetadata`, for one partition."""

    def __init__(self, config: TransactionCoordinatorConfig) -> None:
        self.config = config
        self.transactions: dict[str, TransactionMetadata] = {}

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self.transactions.get(transactional_id)

    def replay(self, record: TransactionRecord) -> None:
        """Applies one record read from the log (value None: the id expired)."""
        tid = record.transactional_id
        if record.value is None:
            self.transactions.pop(tid, None)
        else:
            self.transactions[tid] = TransactionMetadata.from_record(tid, record.value)

    def write(
        self, op: Operation, metadata: TransactionMetadata, transit: TxnTransitMetadata
    ) -> None:
        """Appends ``transit`` (prepared from ``metadata``) as a record and applies it:
        ``metadata`` is added if new, and removed by the tombstone of a Dead target."""
        tid = metadata.transactional_id
        current = self.transactions.get(tid)
        if current is not None and current is not metadata:
            raise IllegalStateError(f"a second metadata object for transactional id {tid}")
        key = TransactionLogKey(tid)
        if transit.txn_state is TransactionState.DEAD:
            op.records.append(TransactionRecord(key, None))
            self.transactions.pop(tid, None)
            return
        version = self.config.transaction_log_value_version
        op.records.append(TransactionRecord(key, transit.to_record_value(), version))
        metadata.apply(transit)
        self.transactions[tid] = metadata

    # -- scans -----------------------------------------------------------------------------

    def _sorted(self) -> Iterable[TransactionMetadata]:
        return (self.transactions[tid] for tid in sorted(self.transactions))

    def timed_out_transactions(self, now_ms: int) -> list[TransactionMetadata]:
        """Ongoing transactions open for longer than their timeout (Kafka's
        ``timedOutTransactions``)."""
        return [
            m
            for m in self._sorted()
            if m.state is TransactionState.ONGOING
            and m.txn_start_timestamp + m.txn_timeout_ms < now_ms
        ]

    def expired_transactional_ids(self, now_ms: int) -> list[TransactionMetadata]:
        """Ids with no transaction in progress, not updated for
        ``transactional.id.expiration.ms`` (Kafka's ``shouldExpire``)."""
        horizon = now_ms - self.config.transactional_id_expiration_ms
        return [
            m
            for m in self._sorted()
            if m.state.is_expiration_allowed and m.txn_last_update_timestamp <= horizon
        ]

    def validate_transaction_timeout_ms(self, txn_timeout_ms: int) -> bool:
        return 0 < txn_timeout_ms <= self.config.transaction_max_timeout_ms

    def list_transaction_states(
        self,
        producer_id_filters: Iterable[int],
        state_filters: Iterable[str],
        duration_filter_ms: int,
        now_ms: int,
    ) -> ListTransactionsResponse:
        """ListTransactions (KIP-664, KIP-994): every id whose producer id and state match
        the filters (an empty filter matches all) and, with ``duration_filter_ms`` >= 0,
        whose transaction started more than that long ago. Unknown state names are
        reported back, and match nothing."""
        producer_ids = set(producer_id_filters)
        names = list(dict.fromkeys(state_filters))
        states = {s for s in map(TransactionState.from_name, names) if s is not None}
        unknown = tuple(n for n in names if TransactionState.from_name(n) is None)
        out = []
        for m in self._sorted():
            if m.state is TransactionState.DEAD:
                continue
            if producer_ids and m.producer_id not in producer_ids:
                continue
            if names and m.state not in states:
                continue
            if duration_filter_ms >= 0 and now_ms - m.txn_start_timestamp <= duration_filter_ms:
                continue
            out.append(ListedTransaction(m.transactional_id, m.producer_id, str(m.state)))
        return ListTransactionsResponse(None, unknown, tuple(out))
