"""A stateful (model-based) test of log compaction (:func:`rillet._core.clean_log`).

Hypothesis drives a compacted log on disk through appends of keyed records and tombstones
in every codec, rolls, the clock moving on, cleanings (with and without a high watermark,
from the checkpoint the previous cleaning returned) and clean or unclean reopens, and after
every step compares what the log serves with a model of Kafka's compaction rules:

* a cleaning covers ``[0, end)`` where ``end`` (the new checkpoint) is never past the active
  segment's base offset, nor past the high watermark's segment; records from ``end`` on are
  untouched;
* below ``end`` a record survives when it is the newest of its key below ``end``, and, if it
  is a tombstone, its batch's delete horizon has not passed: a batch that keeps a tombstone
  gets the horizon ``now + delete.retention.ms`` the first time, so a tombstone goes only in
  a later cleaning once that time has come (KIP-534);
* offsets are never renumbered or reused, timestamps, keys and values never change, and
  the newest value of every key stays readable until a tombstone for it has expired.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from rillet import BatchBuilder, Log, LogConfig, decode_batches
from rillet._core import CleanerConfig, clean_log

pytestmark = pytest.mark.slow

with warnings.catch_warnings(), contextlib.suppress(ImportError):
    # See test_log_stateful.py: hypothesis imports libcst on a failure, which warns.
    warnings.simplefilter("ignore", DeprecationWarning)
    import libcst.metadata  # noqa: F401

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
KEYS = 4
DELETE_RETENTION_MS = 5_000
T0 = 1_700_000_000_000

CONFIG = LogConfig(
    segment_bytes=400,
    segment_ms=365 * 24 * 3600 * 1000,
    segment_index_bytes=4096,
    index_interval_bytes=128,
    retention_ms=-1,
    compact=True,
    delete_retention_ms=DELETE_RETENTION_MS,
)
CLEANER = CleanerConfig(dedupe_buffer_size=1 << 20)


@dataclass
class MRec:
    offset: int
    timestamp: int
    key: bytes
    value: bytes | None
    batch: int  # the base offset of the batch it was appended in


record_spec = st.tuples(
    st.integers(0, KEYS - 1),  # key
    st.one_of(st.none(), st.binary(min_size=0, max_size=40)),  # value (None: tombstone)
    st.integers(0, 50),  # how far before now its timestamp is
)
batch_spec = st.tuples(st.sampled_from(CODECS), st.lists(record_spec, min_size=1, max_size=8))


class CompactedLogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="rillet-compaction-"))
        self.path = self.tmp / "topic-0"
        self.now = T0
        self.log: Log | None = Log.open(self.path, CONFIG, now_ms=self.now)
        self.records: list[MRec] = []
        self.horizons: dict[int, int] = {}  # batch base offset -> delete horizon
        self.next_offset = 0
        self.checkpoint: int | None = None
        # key -> the newest value ever appended (None: a tombstone), to check it stays
        # readable.
        self.newest: dict[bytes, bytes | None] = {}
        self.expired: set[bytes] = set()

    def teardown(self) -> None:
        try:
            if self.log is not None:
                self.log.close()
                self.log = None
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    @property
    def L(self) -> Log:
        assert self.log is not None
        return self.log

    # -- rules ------------------------------------------------------------------------------

    @rule(spec=batch_spec)
    def append(self, spec: tuple[str, list[tuple[int, bytes | None, int]]]) -> None:
        codec, recs = spec
        b = BatchBuilder(codec)
        for k, v, age in recs:
            b.append(self.now - age, b"key-%d" % k, v)
        info = self.L.append_as_leader(b.build(), 0, now_ms=self.now)
        assert info.first_offset == self.next_offset  # offsets are never reused
        for i, (k, v, age) in enumerate(recs):
            key = b"key-%d" % k
            self.records.append(
                MRec(info.first_offset + i, self.now - age, key, v, info.first_offset)
            )
            self.newest[key] = v
            self.expired.discard(key)
        self.next_offset = info.last_offset + 1

    @rule(spec=batch_spec)
    def append_and_roll(self, spec: tuple[str, list[tuple[int, bytes | None, int]]]) -> None:
        self.append(spec)
        self.L.roll(now_ms=self.now)

    @rule(ms=st.integers(0, 2 * DELETE_RETENTION_MS))
    def tick(self, ms: int) -> None:
        self.now += ms

    @rule(hw=st.one_of(st.none(), st.none(), st.floats(0, 1)))
    def clean(self, hw: float | None) -> None:
        active = self.L.active_segment_base_offset
        high_watermark = None if hw is None else int(hw * self.L.log_end_offset)
        first_uncleanable = self._first_uncleanable(high_watermark, active)
        stats = clean_log(
            self.L,
            CLEANER,
            last_clean_offset=self.checkpoint,
            high_watermark=high_watermark,
            now_ms=self.now,
        )
        assert not stats.aborted and stats.groups_discarded == 0
        end = stats.end_offset
        assert end <= active  # never the active segment
        if high_watermark is not None:
            assert end <= max(high_watermark, stats.first_dirty_offset)
        # What was cleaned: the segments below the first uncleanable one, and below end.
        cleaned_to = min(end, first_uncleanable)
        before = len(self.records)
        self._apply_clean(cleaned_to)
        assert stats.records_removed == before - len(self.records)
        event(f"cleaning removed records: {stats.records_removed > 0}")
        event(f"cleaning dropped expired tombstones: {stats.tombstones_removed > 0}")
        self.checkpoint = end

    @rule()
    def clean_after_delete_retention(self) -> None:
        """The clock passes delete.retention.ms, then the log is cleaned: the tombstones a
        previous cleaning kept go now."""
        self.now += DELETE_RETENTION_MS
        self.clean(None)

    @rule(clean_shutdown=st.booleans())
    def reopen(self, clean_shutdown: bool) -> None:
        self.L.close()
        self.log = None
        self.log = Log.open(
            self.path,
            CONFIG,
            recovery_point=0,
            clean_shutdown=clean_shutdown,
            now_ms=self.now,
        )
        assert self.L.recovery_info.truncated_bytes == 0

    # -- model ------------------------------------------------------------------------------

    def _first_uncleanable(self, high_watermark: int | None, active: int) -> int:
        """The base offset of the segment holding the high watermark (or the active one)."""
        if high_watermark is None:
            return active
        bases = [s.base_offset for s in self.L.segments()]
        below = [b for b in bases if b <= high_watermark]
        return min(below[-1] if below else bases[0], active)

    def _apply_clean(self, end: int) -> None:
        newest: dict[bytes, int] = {}
        for r in self.records:
            if r.offset < end:
                newest[r.key] = r.offset
        kept: list[MRec] = []
        for r in self.records:
            if r.offset >= end:
                kept.append(r)
                continue
            if newest[r.key] != r.offset:
                continue  # superseded
            horizon = self.horizons.get(r.batch)
            if r.value is None and horizon is not None and self.now >= horizon:
                if not any(o.key == r.key and o.offset >= end for o in self.records):
                    self.expired.add(r.key)
                continue  # a tombstone past its delete horizon
            kept.append(r)
        for r in kept:
            if r.offset < end and r.value is None and r.batch not in self.horizons:
                self.horizons[r.batch] = self.now + DELETE_RETENTION_MS
        self.records = kept

    # -- invariants -------------------------------------------------------------------------

    def read_everything(self) -> list[MRec]:
        out: list[MRec] = []
        offset = self.L.log_start_offset
        while offset < self.L.log_end_offset:
            data = self.L.read(offset, 2048).read_all()
            batches = decode_batches(data)
            assert batches and batches[-1].last_offset >= offset
            for b in batches:
                out.extend(
                    MRec(r.offset, r.timestamp, r.key or b"", r.value, b.base_offset)
                    for r in b.records
                    if r.offset >= offset
                )
            offset = batches[-1].last_offset + 1
        return out

    @invariant()
    def log_matches_the_model(self) -> None:
        got = self.read_everything()
        offsets = [r.offset for r in got]
        assert offsets == sorted(set(offsets))  # increasing, no duplicate
        assert [(r.offset, r.timestamp, r.key, r.value) for r in got] == [
            (r.offset, r.timestamp, r.key, r.value) for r in self.records
        ]
        assert self.L.log_end_offset == self.next_offset
        # The newest value of every key is readable, unless a tombstone for it expired
        # (then nothing of that key is left).
        last: dict[bytes, bytes | None] = {r.key: r.value for r in got}
        for key, value in self.newest.items():
            if key in self.expired:
                assert key not in last
            else:
                assert last[key] == value


CompactedLogMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestCompactedLog = CompactedLogMachine.TestCase
