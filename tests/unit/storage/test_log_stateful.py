"""A stateful (model-based) test of :class:`rillet.Log`.

Hypothesis drives a real log on disk through random appends, reads, timestamp lookups,
truncations, log-start increments (DeleteRecords), rolls, retention passes, flushes and
clean/unclean reopens, and after every step compares it with an in-memory model: the
batches (with their records and stored sizes) grouped into segments. The model encodes the
documented semantics of ``rust/core/src/log``:

* offsets are assigned from the log end offset and the leader epoch is stamped in;
* an append rolls first when the non-empty active segment would grow past ``segment_bytes``
  (an append larger than ``segment_bytes`` is refused and changes nothing);
* ``read`` returns whole batches from the one holding the fetch offset: the longest run that
  fits ``max_bytes`` (at least one batch with ``min_one_batch``) and ends below
  ``max_offset``;
* ``truncate_to`` cuts at the batch holding the target (bringing a log start inside that
  batch down to the new end), and restarts an empty log at the target when it lies below
  the log start;
* retention deletes whole segments from the front while they are over ``retention.bytes`` or
  older than ``retention.ms``, never the empty active segment;
* a clean reopen changes nothing (and trusts the log: the recovery point becomes the log
  end), an unclean one re-reads every segment and loses nothing that is in the page cache;
* only a flush (or a clean open) advances the recovery point;
* the log start may be raised into the middle of a batch: reads from it return that whole
  batch, timestamp lookups ignore the records below it, and retention drops the segments
  wholly below it.

Regression tests for bugs the machine found follow it at the end of this file.
"""

from __future__ import annotations

import contextlib
import gc
import random
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import rillet
from rillet import BatchBuilder, Log, LogConfig, decode_batches
from rillet._core import TimestampAndOffset
from rillet.errors import OffsetOutOfRangeError, RecordBatchTooLargeError

pytestmark = pytest.mark.slow

# On a failure Hypothesis imports libcst (to write a patch with the failing example), whose
# import emits a DeprecationWarning (from mypy_extensions); with filterwarnings=error that
# becomes an INTERNALERROR that hides the failure. Import it now, quietly.
with warnings.catch_warnings(), contextlib.suppress(ImportError):
    warnings.simplefilter("ignore", DeprecationWarning)
    import libcst.metadata  # noqa: F401

SEGMENT_BYTES = 16 * 1024
RETENTION_BYTES = 24 * 1024
RETENTION_MS = 10_000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
TS0 = 1_600_000_000_000
NOW = TS0 + 1_000_000  # a fixed "now": the wall clock never matters

CONFIG = LogConfig(
    segment_bytes=SEGMENT_BYTES,
    segment_ms=365 * 24 * 3600 * 1000,
    segment_index_bytes=4096,
    index_interval_bytes=512,
    retention_bytes=RETENTION_BYTES,
    retention_ms=RETENTION_MS,
)

Rec = tuple[int, int, bytes | None, bytes | None]  # offset, timestamp, key, value


@dataclass
class MBatch:
    base: int
    last: int
    size: int
    epoch: int
    codec: str
    records: list[Rec]

    @property
    def max_ts(self) -> int:
        return max(r[1] for r in self.records)


@dataclass
class MSegment:
    base: int
    batches: list[MBatch] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(b.size for b in self.batches)


def _payload(seed: int, size: int, compressible: bool) -> bytes:
    if compressible:
        unit = seed.to_bytes(8, "big")
        return (unit * (size // 8 + 1))[:size]
    return random.Random(seed).randbytes(size)


record_spec = st.tuples(
    st.one_of(st.integers(0, 200), st.integers(0, 3000)),  # value size
    st.booleans(),  # compressible
    st.one_of(st.none(), st.integers(0, 40)),  # key size (None: null key)
    st.integers(0, 2**32),  # content seed
    st.booleans(),  # null value (only used for empty values)
    st.integers(0, 20),  # timestamp delta
)

batch_spec = st.tuples(
    st.sampled_from(CODECS),
    st.lists(record_spec, min_size=1, max_size=20),
    st.one_of(st.integers(0, 30), st.integers(-30, 0)),  # base timestamp step (mostly up)
)
BatchSpec = tuple[str, list[tuple[int, bool, int | None, int, bool, int]], int]

# One append_as_leader call: its batches, and whether the leader epoch goes up first.
append_spec = st.tuples(st.lists(batch_spec, min_size=1, max_size=3), st.integers(0, 1))


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="rillet-stateful-"))
        self.path = self.tmp / "topic-0"
        self.log: Log | None = Log.open(self.path, CONFIG, now_ms=NOW)
        self.segments: list[MSegment] = [MSegment(0)]
        self.log_start = 0
        self.log_end = 0
        self.recovery_point = 0
        self.epoch = 0
        self.last_ts = TS0

    def teardown(self) -> None:
        try:
            if self.log is not None:
                self.log.close()
                self.log = None
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- model helpers ----------------------------------------------------------------------

    @property
    def L(self) -> Log:
        assert self.log is not None
        return self.log

    def batches(self) -> list[MBatch]:
        return [b for s in self.segments for b in s.batches]

    def visible_batches(self) -> list[MBatch]:
        """The batches a reader from the log start gets: from the one holding it on."""
        if self.log_start >= self.log_end:
            return []
        return self.batches()[self.batch_index_holding(self.log_start) :]

    def records(self) -> list[Rec]:
        """The records at or after the log start."""
        return [r for b in self.batches() for r in b.records if r[0] >= self.log_start]

    def batch_index_holding(self, offset: int) -> int:
        for i, b in enumerate(self.batches()):
            if b.base <= offset <= b.last:
                return i
        raise AssertionError(f"model has no batch holding {offset}")

    def segment_holding(self, offset: int) -> MSegment:
        return [s for s in self.segments if s.base <= offset][-1]

    def check_batches(self, got: list[rillet.RecordBatch], want: list[MBatch]) -> None:
        assert [(b.base_offset, b.last_offset) for b in got] == [(b.base, b.last) for b in want]
        for g, w in zip(got, want, strict=True):
            assert g.partition_leader_epoch == w.epoch
            assert g.compression == w.codec
            assert g.size_in_bytes == w.size
            assert g.max_timestamp == w.max_ts
            assert [(r.offset, r.timestamp, r.key, r.value) for r in g.records] == w.records

    def read_everything(self) -> list[rillet.RecordBatch]:
        """Read the whole log with small fetches; every byte must decode with its CRC."""
        out: list[rillet.RecordBatch] = []
        offset = self.L.log_start_offset
        while offset < self.L.log_end_offset:
            fetch = self.L.read(offset, 4096)
            data = fetch.read_all()
            assert len(data) == fetch.size > 0
            got = decode_batches(data)
            assert got[0].base_offset <= offset <= got[0].last_offset
            out.extend(got)
            offset = got[-1].last_offset + 1
        return out

    # -- rules ------------------------------------------------------------------------------

    @initialize(appends=st.lists(append_spec, max_size=12))
    def prefill(self, appends: list[tuple[list[BatchSpec], int]]) -> None:
        for specs, epoch_step in appends:
            self.append(specs, epoch_step)

    @rule(appends=st.lists(append_spec, min_size=2, max_size=8))
    def append_many(self, appends: list[tuple[list[BatchSpec], int]]) -> None:
        for specs, epoch_step in appends:
            self.append(specs, epoch_step)

    @rule(specs=st.lists(batch_spec, min_size=1, max_size=3), epoch_step=st.integers(0, 1))
    def append(self, specs: list[BatchSpec], epoch_step: int) -> None:
        """One append_as_leader call of 1-3 batches of 1-20 records each."""
        self.epoch += epoch_step
        built: list[tuple[bytes, str, list[tuple[int, bytes | None, bytes | None]]]] = []
        ts = self.last_ts
        for codec, recs, step in specs:
            ts = max(TS0, ts + step)
            b = BatchBuilder(codec)
            rows = []
            for vsize, compressible, ksize, seed, null_value, dt in recs:
                rts = ts + dt
                key = None if ksize is None else _payload(seed + 1, ksize, compressible)
                value = None if vsize == 0 and null_value else _payload(seed, vsize, compressible)
                b.append(rts, key, value)
                rows.append((rts, key, value))
            built.append((b.build(), codec, rows))
        data = b"".join(d for d, _, _ in built)
        if len(data) > SEGMENT_BYTES:
            event("append refused: larger than segment.bytes")
            with pytest.raises(RecordBatchTooLargeError):
                self.L.append_as_leader(data, self.epoch, now_ms=NOW)
            return
        self.last_ts = ts
        info = self.L.append_as_leader(data, self.epoch, now_ms=NOW)
        assert info.first_offset == self.log_end
        assert info.batch_count == len(built)
        assert info.record_count == sum(len(rows) for _, _, rows in built)
        assert info.log_start_offset == self.log_start
        active = self.segments[-1]
        if active.size > 0 and active.size + len(data) > SEGMENT_BYTES:
            event("append rolled")
            active = MSegment(self.log_end)
            self.segments.append(active)
        offset = self.log_end
        for raw, codec, rows in built:
            records = [(offset + i, t, k, v) for i, (t, k, v) in enumerate(rows)]
            active.batches.append(
                MBatch(offset, offset + len(rows) - 1, len(raw), self.epoch, codec, records)
            )
            offset += len(rows)
        assert info.last_offset == offset - 1
        assert info.max_timestamp == max(t for _, _, rows in built for t, _, _ in rows)
        self.log_end = offset

    @rule(
        data=st.data(),
        max_bytes=st.one_of(st.integers(0, 200), st.integers(0, 40_000)),
        min_one_batch=st.booleans(),
        use_max_offset=st.booleans(),
    )
    def read(
        self, data: st.DataObject, max_bytes: int, min_one_batch: bool, use_max_offset: bool
    ) -> None:
        offset = data.draw(st.integers(self.log_start, self.log_end), label="offset")
        max_offset = (
            data.draw(st.integers(max(0, offset - 2), self.log_end + 2), label="max_offset")
            if use_max_offset
            else None
        )
        fetch = self.L.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch)
        assert fetch.fetch_offset == offset
        raw = fetch.read_all()
        assert len(raw) == fetch.size == sum(r.length for r in fetch.regions)
        got = decode_batches(raw)

        want: list[MBatch] = []
        upper = self.log_end if max_offset is None else min(max_offset, self.log_end)
        if offset < self.log_end:
            budget = max_bytes
            for b in self.batches()[self.batch_index_holding(offset) :]:
                if b.last >= upper:
                    break
                if b.size <= budget:
                    want.append(b)
                    budget -= b.size
                elif not want and min_one_batch:
                    want.append(b)
                    break
                else:
                    break
        self.check_batches(got, want)
        event(f"read returned {min(len(got), 3)}{'+' if len(got) > 3 else ''} batches")
        if got:
            assert got[0].base_offset <= offset <= got[0].last_offset
            assert fetch.segment_base_offset == self.segment_holding(offset).base
            assert len(raw) <= max_bytes or (len(got) == 1 and min_one_batch)

    @rule(below=st.integers(1, 5), above=st.integers(1, 5))
    def read_out_of_range(self, below: int, above: int) -> None:
        if self.log_start - below >= 0:
            with pytest.raises(OffsetOutOfRangeError):
                self.L.read(self.log_start - below, 1 << 20)
        with pytest.raises(OffsetOutOfRangeError):
            self.L.read(self.log_end + above, 1 << 20)

    @rule()
    def read_all(self) -> None:
        self.check_batches(self.read_everything(), self.visible_batches())

    @rule(data=st.data())
    def fetch_offset_by_timestamp(self, data: st.DataObject) -> None:
        recs = self.records()
        lo = min((r[1] for r in recs), default=TS0)
        hi = max((r[1] for r in recs), default=TS0)
        target = data.draw(st.integers(max(0, lo - 5), hi + 5), label="target")
        want = next(((r[1], r[0]) for r in recs if r[1] >= target), None)
        got = self.L.fetch_offset_by_timestamp(target)
        if want is None:
            assert got is None
        else:
            assert got is not None
            assert (got.timestamp, got.offset) == want
            assert got.leader_epoch == self.batches()[self.batch_index_holding(want[1])].epoch
        earliest = self.L.fetch_offset_by_timestamp(-2)
        latest = self.L.fetch_offset_by_timestamp(-1)
        assert earliest is not None and earliest.offset == self.log_start
        assert latest is not None and latest.offset == self.log_end
        # MAX_TIMESTAMP: the first record holding the largest timestamp (ties: the earliest).
        largest = self.L.fetch_offset_by_timestamp(-3)
        if recs:
            max_ts = max(r[1] for r in recs)
            first_max = next(o for o, t, _, _ in recs if t == max_ts)
            assert largest is not None
            assert (largest.timestamp, largest.offset) == (max_ts, first_max)
        else:
            assert largest is None

    @rule(data=st.data())
    def truncate_to(self, data: st.DataObject) -> None:
        target = data.draw(
            st.integers(max(0, self.log_start - 3), self.log_end + 3), label="target"
        )
        changed = self.L.truncate_to(target, now_ms=NOW)
        assert changed == (target < self.log_end)
        if target >= self.log_end:
            return
        if target < self.segments[0].base or target < self.log_start:
            event("truncate below the log start")
            self.segments = [MSegment(target)]
            self.log_start = self.log_end = self.recovery_point = target
            return
        cut = self.batches()[self.batch_index_holding(target)].base
        event("truncate mid-batch" if cut != target else "truncate at a batch boundary")
        if cut < self.log_start:
            # The batch holding a mid-batch log start goes too: the start comes down with it.
            event("truncate cut the batch holding the log start")
        self.segments = [s for s in self.segments if s.base <= target]
        self.segments[-1].batches = [b for b in self.segments[-1].batches if b.base < cut]
        self.log_end = cut
        self.log_start = min(self.log_start, cut)
        self.recovery_point = min(self.recovery_point, cut)

    @rule(data=st.data())
    def increment_log_start(self, data: st.DataObject) -> None:
        """DeleteRecords: raise the log start offset, often into the middle of a batch."""
        target = data.draw(st.integers(self.log_start, self.log_end + 2), label="new_start")
        if target > self.log_end:
            with pytest.raises(OffsetOutOfRangeError):
                self.L.maybe_increment_log_start_offset(target)
            return
        assert self.L.maybe_increment_log_start_offset(target) == (target > self.log_start)
        self.log_start = target
        with pytest.raises(OffsetOutOfRangeError):
            self.L.read(target - 1, 1 << 20)
        self.check_batches(self.read_everything(), self.visible_batches())

    @rule()
    def roll(self) -> None:
        self.L.roll(now_ms=NOW)
        if self.segments[-1].batches:
            self.segments.append(MSegment(self.log_end))

    @rule(partial=st.booleans(), data=st.data())
    def flush(self, partial: bool, data: st.DataObject) -> None:
        if partial:
            offset = data.draw(st.integers(0, self.log_end + 3), label="flush_offset")
            self.L.flush(offset)
        else:
            offset = self.log_end
            self.L.flush()
        offset = min(offset, self.log_end)
        if offset > self.recovery_point or offset == self.log_end:
            self.recovery_point = max(self.recovery_point, offset)

    @rule(data=st.data())
    def delete_old_segments(self, data: st.DataObject) -> None:
        recs = self.records()
        hi = max((r[1] for r in recs), default=TS0)
        # Mostly a "now" at which nothing is old; sometimes one that expires older segments.
        now = data.draw(
            st.one_of(st.just(TS0), st.integers(TS0, hi + RETENTION_MS + 5)), label="now"
        )
        deleted = self.L.delete_old_segments(now_ms=now, high_watermark=None)

        total = sum(s.size for s in self.segments)
        doomed = 0
        for i, seg in enumerate(self.segments):
            is_last = i + 1 == len(self.segments)
            if is_last and not seg.batches:
                break
            next_base = None if is_last else self.segments[i + 1].base
            by_time = now - max(b.max_ts for b in seg.batches) > RETENTION_MS
            by_size = total - seg.size >= RETENTION_BYTES
            by_start = next_base is not None and next_base <= self.log_start
            if not (by_time or by_size or by_start):
                break
            total -= seg.size
            doomed += 1
        assert deleted == doomed
        event(f"retention deleted {min(doomed, 2)}{'+' if doomed > 2 else ''} segments")
        if doomed == len(self.segments):
            self.segments.append(MSegment(self.log_end))
        old_start = self.log_start
        self.segments = self.segments[doomed:]
        self.log_start = max(self.log_start, self.segments[0].base)
        self.recovery_point = max(self.recovery_point, self.log_start)
        if doomed:
            with pytest.raises(OffsetOutOfRangeError):
                self.L.read(self.log_start - 1, 1 << 20)
            if old_start < self.log_start:
                with pytest.raises(OffsetOutOfRangeError):
                    self.L.read(old_start, 1 << 20)
            self.check_batches(self.read_everything(), self.visible_batches())

    @rule()
    def reopen_clean(self) -> None:
        recovery_point, log_start = self.L.recovery_point, self.L.log_start_offset
        self.L.close()
        assert self.L.closed
        self.log = None
        self.log = Log.open(
            self.path,
            CONFIG,
            clean_shutdown=True,
            recovery_point=recovery_point,
            log_start_offset=log_start,
            now_ms=NOW,
        )
        info = self.L.recovery_info
        assert info.recovered_segments == 0
        assert info.truncated_bytes == 0
        assert info.deleted_segments == 0
        # As Kafka's LogLoader: a clean open that recovered nothing trusts the whole log.
        self.recovery_point = self.log_end

    @rule()
    def reopen_unclean(self) -> None:
        log_start = self.L.log_start_offset
        log, self.log = self.log, None
        del log  # dropped without close(): a crash, as far as the files know
        gc.collect()
        self.log = Log.open(
            self.path,
            CONFIG,
            clean_shutdown=False,
            recovery_point=0,
            log_start_offset=log_start,
            now_ms=NOW,
        )
        info = self.L.recovery_info
        assert info.recovered_segments == len(self.segments)
        assert info.truncated_bytes == 0
        assert info.deleted_segments == 0
        # Only a flush advances the recovery point: a crash now would recover the same again.
        self.recovery_point = 0
        self.check_batches(self.read_everything(), self.visible_batches())

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def offsets_match_model(self) -> None:
        if self.log is None:
            return
        assert self.L.log_end_offset == self.log_end
        assert self.L.log_start_offset == self.log_start
        assert self.L.recovery_point == self.recovery_point
        assert self.recovery_point <= self.log_end
        # Offsets are contiguous from the first segment's base to the log end, and the log
        # start lies within (a batch may straddle it).
        expect = self.segments[0].base
        for b in self.batches():
            assert b.base == expect
            expect = b.last + 1
        assert expect == self.log_end
        assert self.segments[0].base <= self.log_start <= self.log_end

    @invariant()
    def segments_match_model(self) -> None:
        if self.log is None:
            return
        got = [(s.base_offset, s.size) for s in self.L.segments()]
        assert got == [(s.base, s.size) for s in self.segments]
        assert self.L.active_segment_base_offset == self.segments[-1].base
        assert self.L.size_in_bytes == sum(s.size for s in self.segments)


LogMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestLogStateful = LogMachine.TestCase


def test_unclean_reopen_rebuilds_more_index_entries_than_the_trimmed_index_held(
    tmp_path: Path,
) -> None:
    """Regression (found by the machine above): a rolled segment's indexes are trimmed to
    their entries; if it was appended to after a clean restart (the bytes-since-last-entry
    count restarts at 0) a from-scratch rebuild after a crash needs more entries than the
    trimmed file holds. The unclean open must make room instead of failing."""
    path = tmp_path / "t-0"

    def tiny_batch() -> bytes:
        b = BatchBuilder()
        b.append(TS0, None, b"x" * 30)  # a ~100-byte batch
        return b.build()

    log = Log.open(path, CONFIG, now_ms=NOW)
    for _ in range(4):  # 400 bytes < index.interval.bytes: no index entry yet
        log.append_as_leader(tiny_batch(), now_ms=NOW)
    log.close()
    log = Log.open(path, CONFIG, clean_shutdown=True, now_ms=NOW)
    for _ in range(4):
        log.append_as_leader(tiny_batch(), now_ms=NOW)
    log.roll(now_ms=NOW)
    del log
    gc.collect()
    log = Log.open(path, CONFIG, clean_shutdown=False, recovery_point=0, now_ms=NOW)
    try:
        assert log.recovery_info.truncated_bytes == 0
        assert log.log_end_offset == 8
        batches = decode_batches(log.read(0, 1 << 20).read_all())
        assert [b.base_offset for b in batches] == list(range(8))
        assert log.segments()[0].index_entries >= 1
    finally:
        log.close()


def test_truncate_into_the_batch_holding_the_log_start_keeps_start_le_end(
    tmp_path: Path,
) -> None:
    """Regression: DeleteRecords may put the log start in the middle of a batch (Kafka allows
    any offset). Truncating to an offset in that same batch cuts the whole batch, so the log
    start must come down with the log end (it used to stay above it: "offsets [15, 10)")."""
    log = Log.open(tmp_path / "t-0", CONFIG, now_ms=NOW)
    try:
        for _ in range(2):
            b = BatchBuilder()
            for _ in range(10):
                b.append(TS0, None, b"v")
            log.append_as_leader(b.build(), now_ms=NOW)  # offsets 0-9, then 10-19
        assert log.maybe_increment_log_start_offset(15)
        assert log.truncate_to(15, now_ms=NOW)  # cuts the batch 10-19
        assert log.log_start_offset == log.log_end_offset == 10
        log.read(log.log_start_offset, 1 << 20)  # the log start is always readable
        b = BatchBuilder()
        b.append(TS0, None, b"w")
        first = log.append_as_leader(b.build(), now_ms=NOW).first_offset
        assert first >= log.log_start_offset, "a new record must not land below the start"
    finally:
        log.close()


def test_max_timestamp_lookup_with_the_log_start_inside_a_batch(tmp_path: Path) -> None:
    """Regression: ListOffsets MAX_TIMESTAMP is the earliest record with the largest timestamp
    at or after the log start. When the batch holding the log start had its max timestamp
    below it, the lookup used to find nothing and return None."""
    log = Log.open(tmp_path / "t-0", CONFIG, now_ms=NOW)
    try:
        b = BatchBuilder()
        for ts in (TS0 + 20, TS0, TS0, TS0):
            b.append(ts, None, b"v")
        log.append_as_leader(b.build(), 3, now_ms=NOW)  # offsets 0-3, the max at offset 0
        assert log.fetch_offset_by_timestamp(-3) == TimestampAndOffset(TS0 + 20, 0, 3)
        assert log.maybe_increment_log_start_offset(1)  # DeleteRecords before offset 1
        assert log.fetch_offset_by_timestamp(TS0) == TimestampAndOffset(TS0, 1, 3)
        assert log.fetch_offset_by_timestamp(-3) == TimestampAndOffset(TS0, 1, 3)
    finally:
        log.close()
