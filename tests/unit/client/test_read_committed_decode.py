"""The read_committed half of the consumer's decoder (``decode_consumer_records`` with an
``AbortedTransactionFilter``, Kafka's ``CompletedFetch``), on batches as a fetch returns
them: interleaved producers, a producer aborting twice, commits, plain batches, an open
transaction, and decodes a few records at a time from anywhere in the run."""

from __future__ import annotations

from rillet._core import (
    AbortedTransaction,
    AbortedTransactionFilter,
    BatchBuilder,
    decode_consumer_records,
)

NOW = 1_700_000_000_000
ABORT_KEY = b"\x00\x00\x00\x00"  # version 0, type 0 (ABORT)
COMMIT_KEY = b"\x00\x00\x00\x01"  # version 0, type 1 (COMMIT)
MARKER_VALUE = b"\x00\x00\x00\x00\x00\x00"  # version 0, coordinator epoch 0


class Run:
    """Batches at consecutive offsets."""

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.offset = 0

    def data(self, pid: int, *values: str, transactional: bool = True) -> None:
        b = (
            BatchBuilder(base_offset=self.offset)
            if pid < 0
            else BatchBuilder(
                base_offset=self.offset,
                producer_id=pid,
                producer_epoch=0,
                base_sequence=self.offset,
                is_transactional=transactional,
            )
        )
        for v in values:
            b.append(NOW, None, v.encode())
        self.batches.append(b.build())
        self.offset += len(values)

    def marker(self, pid: int, *, commit: bool) -> None:
        b = BatchBuilder(
            base_offset=self.offset,
            producer_id=pid,
            producer_epoch=0,
            is_transactional=True,
            is_control=True,
        )
        b.append(NOW, COMMIT_KEY if commit else ABORT_KEY, MARKER_VALUE)
        self.batches.append(b.build())
        self.offset += 1

    def bytes(self) -> bytes:
        return b"".join(self.batches)


def interleaved() -> tuple[bytes, list[AbortedTransaction]]:
    r = Run()
    r.data(1, "x1")  # 0: producer 1's first transaction, aborted
    r.data(2, "y1", "y2")  # 1-2: producer 2, committed
    r.data(-1, "plain")  # 3
    r.data(3, "idem", transactional=False)  # 4: idempotent, never aborted
    r.data(1, "x2")  # 5
    r.marker(1, commit=False)  # 6
    r.data(2, "y3")  # 7
    r.data(1, "z1")  # 8: producer 1's second transaction, aborted too
    r.marker(2, commit=True)  # 9
    r.data(1, "z2")  # 10
    r.marker(1, commit=False)  # 11
    r.data(1, "w1")  # 12: producer 1's third transaction, open
    # As a fetch response lists them: any order.
    return r.bytes(), [AbortedTransaction(1, 8), AbortedTransaction(1, 0)]


def decode_all(
    data: bytes,
    aborted: list[AbortedTransaction] | None,
    *,
    limit: int | None = None,
    from_offset: int = 0,
) -> tuple[list[str], int]:
    """Decode the run as the consumer does: ``limit`` records per call, the position moving
    past skipped batches; one filter for the whole run."""
    f = AbortedTransactionFilter(aborted) if aborted is not None else None
    out: list[str] = []
    pos, position = 0, from_offset
    while pos < len(data):
        d = decode_consumer_records(data, "t", 0, position, start=pos, max_records=limit, aborted=f)
        out += [r.value.decode() for r in d.records]
        position = max(position, d.next_offset)
        assert d.end > pos
        pos = d.end
    return out, position


COMMITTED = ["y1", "y2", "plain", "idem", "y3", "w1"]


def test_aborted_transactions_are_dropped_per_producer_until_their_marker() -> None:
    data, aborted = interleaved()
    assert decode_all(data, aborted) == (COMMITTED, 13)


def test_the_filter_carries_its_state_across_small_decodes() -> None:
    data, aborted = interleaved()
    for limit in (1, 2, 3):
        assert decode_all(data, aborted, limit=limit) == (COMMITTED, 13)


def test_batches_before_the_position_still_move_the_filter() -> None:
    data, aborted = interleaved()
    assert decode_all(data, aborted, from_offset=7, limit=1) == (["y3", "w1"], 13)
    assert decode_all(data, aborted, from_offset=9) == (["w1"], 13)


def test_without_aborted_transactions_only_control_records_are_left_out() -> None:
    data, _ = interleaved()
    everything = ["x1", "y1", "y2", "plain", "idem", "x2", "y3", "z1", "z2", "w1"]
    assert decode_all(data, None) == (everything, 13)
    # An empty list filters nothing either (a read_committed fetch of committed data).
    assert decode_all(data, []) == (everything, 13)


def test_a_run_of_aborted_batches_and_markers_moves_the_position() -> None:
    r = Run()
    r.data(5, "gone1")
    r.data(5, "gone2")
    r.marker(5, commit=False)
    data = r.bytes()
    d = decode_consumer_records(
        data, "t", 0, 0, aborted=AbortedTransactionFilter([AbortedTransaction(5, 0)])
    )
    assert (list(d.records), d.next_offset, d.end) == ([], 3, len(data))
