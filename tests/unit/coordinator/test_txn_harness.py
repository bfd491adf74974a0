"""Helpers for the transaction coordinator's tests (no tests here): a loaded shard with a log
of the records it wrote, request shortcuts, and the persisted view of its ids that a shard
rebuilt from the log must reproduce."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from rillet.coordinator.transaction import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    CoordinatorResult,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TransactionCoordinatorConfig,
    TransactionCoordinatorShard,
    TransactionMetadata,
    TransactionState,
    TxnMarker,
)
from rillet.errors import KafkaError
from rillet.types import TopicPartition

R = TypeVar("R")

TIMEOUT_MS = 60_000
CONFIG = TransactionCoordinatorConfig(transaction_state_log_num_partitions=1)
FOO0, FOO1, BAR0 = TopicPartition("foo", 0), TopicPartition("foo", 1), TopicPartition("bar", 0)


class TxnHarness:
    """A shard of ``__transaction_state`` partition 0, its log (every record it returned, as
    bytes, taken as committed at once), a virtual clock and a producer id source."""

    def __init__(
        self,
        config: TransactionCoordinatorConfig = CONFIG,
        coordinator_epoch: int = 7,
        now_ms: int = 1_000_000,
        first_producer_id: int = 1000,
    ) -> None:
        self.config = config
        self.now = now_ms
        self._producer_ids = itertools.count(first_producer_id)
        self.producer_id_error: KafkaError | None = None
        self.log: list[tuple[bytes, bytes | None]] = []
        self.last: CoordinatorResult[Any] = CoordinatorResult()
        self.handed_out: list[TxnMarker] = []
        self.shard = self.load(coordinator_epoch)

    def next_producer_id(self) -> int:
        if self.producer_id_error is not None:
            raise self.producer_id_error
        return next(self._producer_ids)

    def new_shard(self, coordinator_epoch: int) -> TransactionCoordinatorShard:
        """A shard that replayed the log, not loaded yet."""
        shard = TransactionCoordinatorShard(
            0, coordinator_epoch, self.config, producer_ids=self.next_producer_id
        )
        for key, value in self.log:
            shard.replay(key, value)
        return shard

    def load(self, coordinator_epoch: int) -> TransactionCoordinatorShard:
        """A new shard loaded from the log (the old one, if any, unloaded)."""
        if getattr(self, "shard", None) is not None:
            self.shard.unload()
        shard = self.new_shard(coordinator_epoch)
        self.shard = shard
        self.apply(shard.on_loaded(self.now))
        return shard

    def apply(self, result: CoordinatorResult[R]) -> R:
        self.log.extend((r.key_bytes(), r.value_bytes()) for r in result.records)
        self.last = result
        self.handed_out.extend(result.markers)
        return result.response  # type: ignore[return-value]

    @property
    def markers(self) -> tuple[TxnMarker, ...]:
        """The markers of the last result."""
        return self.last.markers

    # -- requests --------------------------------------------------------------------------

    def init(
        self,
        tid: str = "t",
        timeout_ms: int = TIMEOUT_MS,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> InitProducerIdResponse:
        request = InitProducerIdRequest(tid, timeout_ms, producer_id, producer_epoch)
        return self.apply(self.shard.init_producer_id(request, self.now))

    def add(
        self,
        tid: str,
        producer_id: int,
        producer_epoch: int,
        *partitions: TopicPartition,
        verify_only: bool = False,
    ) -> AddPartitionsToTxnResponse:
        request = AddPartitionsToTxnRequest(
            tid, producer_id, producer_epoch, partitions, verify_only
        )
        return self.apply(self.shard.add_partitions_to_txn(request, self.now))

    def add_offsets(
        self, tid: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> AddOffsetsToTxnResponse:
        request = AddOffsetsToTxnRequest(tid, producer_id, producer_epoch, group_id)
        return self.apply(self.shard.add_offsets_to_txn(request, self.now))

    def end(
        self, tid: str, producer_id: int, producer_epoch: int, committed: bool = True
    ) -> EndTxnResponse:
        request = EndTxnRequest(tid, producer_id, producer_epoch, committed)
        return self.apply(self.shard.end_txn(request, self.now))

    def ack(
        self,
        marker: TxnMarker | None = None,
        errors: Mapping[TopicPartition, KafkaError | None] | None = None,
        deleted: Iterable[TopicPartition] = (),
    ) -> CoordinatorResult[None]:
        """Answers a marker (the last one handed out by default): every partition written
        unless ``errors`` says otherwise."""
        if marker is None:
            marker = self.handed_out[-1]
        answers = dict.fromkeys(marker.partitions) if errors is None else errors
        result = self.shard.on_markers_written(marker, answers, self.now, deleted=deleted)
        self.apply(result)
        return result

    def tick(self, advance_ms: int = 0) -> CoordinatorResult[None]:
        self.now += advance_ms
        result = self.shard.tick(self.now)
        self.apply(result)
        return result

    def begin(self, tid: str = "t", *partitions: TopicPartition) -> tuple[int, int]:
        """A producer initialised for ``tid`` with a transaction on ``partitions``."""
        init = self.init(tid)
        assert init.error is None, init
        added = self.add(tid, init.producer_id, init.producer_epoch, *(partitions or (FOO0,)))
        assert added.error is None, added
        return init.producer_id, init.producer_epoch

    def metadata(self, tid: str = "t") -> TransactionMetadata:
        metadata = self.shard.state.get(tid)
        assert metadata is not None, f"no transactional id {tid}"
        return metadata

    def state_of(self, tid: str = "t") -> TransactionState:
        return self.metadata(tid).state


def persisted_view(shard: TransactionCoordinatorShard) -> dict[str, dict[str, Any]]:
    """Every id with everything its record carries (all but ``last_producer_epoch``)."""
    return {
        tid: {
            k: v
            for k, v in dataclasses.asdict(m).items()
            if k not in ("last_producer_epoch", "topic_partitions")
        }
        | {"topic_partitions": sorted(m.topic_partitions)}
        for tid, m in sorted(shard.state.transactions.items())
    }
