"""A stateful (model-based) test of the producer state inside :class:`rillet._core.Log`.

Hypothesis drives a real log through idempotent producers' appends (in order, retries of
any of their last five batches, sequence gaps, zombie epochs, epoch bumps, several batches
of several producers in one append), expiry, rolls, clean and unclean reopens (with a torn
tail), reopens of a log whose snapshots are gone, and truncations, and after every step
compares it with a model written from the contract in ``rust/core/src/log/producer_log.rs``
and Kafka's rules (``ProducerStateManager``, ``ProducerAppendInfo``):

* a batch whose epoch and sequence range equal one of the producer's last five cached
  batches is a duplicate: not written, answered with its original offsets, taking none;
* an older epoch is INVALID_PRODUCER_EPOCH; a newer one must start at sequence 0 and the
  same one must continue the last sequence, else OUT_OF_ORDER_SEQUENCE_NUMBER; a producer
  the state does not know may start anywhere; any error fails the whole append;
* expiry forgets a producer whose last batch is ``producer.id.expiration.ms`` old;
* a snapshot keeps each producer's last batch only; one is written at every roll (at the
  new segment's base) and at close (at the log end);
* opening deletes the snapshots past the log end and the stray ones (not at a segment
  base) but the latest stray past the last base, loads the latest (leaving out expired
  producers) at or below the log end, or after a crash at or below the first segment
  recovery re-read (every one here), and replays the batches after it, writing a snapshot
  at each of the last two segment bases it passes and one at the log end if it replayed
  anything; a clean open without any snapshot replays the last two segments only;
* truncation keeps an empty state empty; otherwise it deletes the snapshots past the new
  end, reloads the latest and replays from it (a snapshot at the end if it replayed).

The model checks the set of snapshot files and what each holds, too.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from rillet._core import (
    BatchBuilder,
    Log,
    LogConfig,
    ProducerStateEntry,
    decode_batches,
    read_producer_snapshot,
)
from rillet.errors import InvalidProducerEpochError, KafkaError, OutOfOrderSequenceNumberError

pytestmark = pytest.mark.slow

with warnings.catch_warnings(), contextlib.suppress(ImportError):
    warnings.simplefilter("ignore", DeprecationWarning)
    import libcst.metadata  # noqa: F401

EXPIRATION_MS = 10_000
NOW0 = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=1 << 20, producer_id_expiration_ms=EXPIRATION_MS)
PIDS = (1, 2)
NUM_BATCHES_TO_RETAIN = 128  # rust/core/src/log/producer_state.rs


@dataclass(frozen=True)
class MBatch:
    """A batch in the log (pid -1: not idempotent)."""

    pid: int
    epoch: int
    first_seq: int
    last_seq: int
    base: int
    last: int
    ts: int
    size: int


@dataclass
class MProducer:
    """A producer as the log's state holds it: cached batches oldest first."""

    epoch: int
    batches: list[MBatch]
    last_ts: int

    def last_only(self) -> MProducer:
        return MProducer(self.epoch, self.batches[-1:], self.last_ts)


State = dict[int, MProducer]


class Refused(Exception):
    def __init__(self, error: type[KafkaError]) -> None:
        self.error = error


@dataclass
class Sent:
    """What a client sent and the log took: the bytes, to retry them."""

    epoch: int
    seq: int
    n: int
    data: bytes


@dataclass
class Client:
    epoch: int = 0
    next_seq: int = 0
    sent: list[Sent] = field(default_factory=list)


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1


def validate(entry: MProducer | None, epoch: int, first: int, last: int) -> MBatch | None:
    """Kafka's checks for a client batch: the cached duplicate, or None to append; raises
    Refused for an error."""
    if entry is None:
        return None
    if epoch == entry.epoch:
        for b in entry.batches:
            if (b.first_seq, b.last_seq) == (first, last):
                return b
    if epoch < entry.epoch:
        raise Refused(InvalidProducerEpochError)
    if epoch != entry.epoch:
        if first != 0:
            raise Refused(OutOfOrderSequenceNumberError)
    elif not in_sequence(entry.batches[-1].last_seq, first):
        raise Refused(OutOfOrderSequenceNumberError)
    return None


def update(state: State, b: MBatch) -> None:
    if b.pid < 0:
        return
    e = state.get(b.pid)
    if e is None:
        e = state[b.pid] = MProducer(b.epoch, [], b.ts)
    if e.epoch != b.epoch:
        e.batches.clear()
        e.epoch = b.epoch
    e.batches.append(b)
    del e.batches[:-NUM_BATCHES_TO_RETAIN]
    e.last_ts = b.ts


def expired(e: MProducer, now: int) -> bool:
    return now - e.last_ts >= EXPIRATION_MS


class ProducerStateMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        # In memory where the machine has it: the log's fsyncs on a real disk were most of
        # this test's time, and the model checks the log's logic, not the disk.
        shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self.tmp = Path(tempfile.mkdtemp(prefix="rillet-producers-", dir=shm))
        self.path = self.tmp / "topic-0"
        self.now = NOW0
        self.log: Log | None = Log.open(self.path, CONFIG, now_ms=self.now)
        self.batches: list[MBatch] = []
        self.bases: list[int] = [0]
        self.state: State = {}
        # The snapshot files: offset -> what each holds (last batches only).
        self.snapshots: dict[int, State] = {}
        self.clients = {pid: Client() for pid in PIDS}

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

    @property
    def end(self) -> int:
        return self.batches[-1].last + 1 if self.batches else self.bases[-1]

    def snapshot_of(self, state: State) -> State:
        return {pid: e.last_only() for pid, e in state.items()}

    # -- appends ----------------------------------------------------------------------------

    def build(self, pid: int, epoch: int, seq: int, n: int) -> bytes:
        b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
        for i in range(n):
            b.append(self.now, f"{pid}-{epoch}-{seq + i}".encode(), b"v")
        return b.build()

    def append(self, parts: list[tuple[int, bytes]]) -> list[bool]:
        """Append the batches (pid, bytes) as one request; check the answer against the
        model. Returns, per batch, whether it was written."""
        scratch: State = {
            pid: MProducer(e.epoch, list(e.batches), e.last_ts) for pid, e in self.state.items()
        }
        offset = self.end
        new: list[MBatch] = []
        bases: list[int] = []
        answered: list[tuple[int, int]] = []
        written: list[bool] = []
        error: type[KafkaError] | None = None
        for pid, data in parts:
            (h,) = _headers(data)
            first, n = h.base_sequence, h.record_count
            last_seq = first + n - 1 if first >= 0 else -1
            try:
                dup = (
                    None
                    if pid < 0
                    else validate(scratch.get(pid), h.producer_epoch, first, last_seq)
                )
            except Refused as r:
                error = r.error
                break
            if dup is not None:
                bases.append(dup.base)
                answered.append((dup.base, dup.last))
                written.append(False)
                continue
            b = MBatch(
                pid,
                h.producer_epoch,
                first,
                last_seq,
                offset,
                offset + n - 1,
                h.max_timestamp,
                len(data),
            )
            update(scratch, b)
            new.append(b)
            bases.append(offset)
            answered.append((b.base, b.last))
            written.append(True)
            offset += n
        data = b"".join(d for _, d in parts)
        if error is not None:
            with pytest.raises(error):
                self.L.append_as_leader(data, 0, now_ms=self.now)
            return [False] * len(parts)
        info = self.L.append_as_leader(data, 0, now_ms=self.now)
        assert info.first_offset == answered[0][0]
        assert info.last_offset == max(last for _, last in answered)
        assert info.batch_base_offsets == (None if all(written) else bases)
        assert info.record_count == sum(b.last - b.base + 1 for b in new)
        self.batches.extend(new)
        self.state = scratch
        return written

    def send(self, pid: int, n: int, *, seq: int | None = None, epoch: int | None = None) -> bool:
        c = self.clients[pid]
        e = c.epoch if epoch is None else epoch
        s = c.next_seq if seq is None else seq
        data = self.build(pid, e, s, n)
        if not self.append([(pid, data)])[0]:
            return False
        c.sent.append(Sent(e, s, n, data))
        if e == c.epoch:
            c.next_seq = s + n
        return True

    @rule(pid=st.sampled_from(PIDS), n=st.integers(1, 3))
    def send_in_order(self, pid: int, n: int) -> None:
        self.send(pid, n)

    @rule(
        pid=st.sampled_from(PIDS),
        count=st.integers(2, NUM_BATCHES_TO_RETAIN + 1),
        back=st.integers(1, NUM_BATCHES_TO_RETAIN + 1),
    )
    def send_a_burst_then_retry(self, pid: int, count: int, back: int) -> None:
        """Several requests in a row, enough to fill (and overflow) the five cached, then a
        retry of one of the last six."""
        for _ in range(count):
            self.send(pid, 1)
        self.retry(pid, back)

    @rule(pid=st.sampled_from(PIDS), back=st.integers(1, NUM_BATCHES_TO_RETAIN + 1))
    def retry(self, pid: int, back: int) -> None:
        """One of the last five batches (a duplicate while the state caches it), or the
        sixth (out of order: no longer cached)."""
        c = self.clients[pid]
        if not c.sent:
            return
        s = c.sent[-min(back, len(c.sent))]
        self.append([(pid, s.data)])

    @rule(pid=st.sampled_from(PIDS), gap=st.integers(1, 3), n=st.integers(1, 2))
    def send_with_a_gap(self, pid: int, gap: int, n: int) -> None:
        self.send(pid, n, seq=self.clients[pid].next_seq + gap)

    @rule(pid=st.sampled_from(PIDS))
    def send_from_an_old_epoch(self, pid: int) -> None:
        c = self.clients[pid]
        if c.epoch > 0:
            self.send(pid, 1, epoch=c.epoch - 1, seq=0)

    @rule(pid=st.sampled_from(PIDS), n=st.integers(1, 2), at_zero=st.booleans())
    def bump_epoch(self, pid: int, n: int, at_zero: bool) -> None:
        c = self.clients[pid]
        c.epoch += 1
        c.next_seq = 0 if at_zero else 1  # 1: a new epoch not at 0 is out of order
        if not self.send(pid, n):
            c.next_seq = 0

    @rule(
        picks=st.lists(
            st.tuples(st.sampled_from((*PIDS, -1)), st.integers(0, NUM_BATCHES_TO_RETAIN)),
            min_size=2,
            max_size=5,
        )
    )
    def several_batches_in_one_append(self, picks: list[tuple[int, int]]) -> None:
        """New batches (back 0) and retries (back k) of several producers, in one request;
        a new batch may come twice."""
        parts: list[tuple[int, bytes]] = []
        pending: dict[int, int] = {}
        fresh: list[tuple[int, Sent]] = []
        for pid, back in picks:
            if pid < 0:
                b = BatchBuilder()
                b.append(self.now, b"plain", b"v")
                parts.append((-1, b.build()))
                continue
            c = self.clients[pid]
            if back == 0 or not c.sent:
                seq = pending.get(pid, c.next_seq)
                sent = Sent(c.epoch, seq, 1, self.build(pid, c.epoch, seq, 1))
                pending[pid] = seq + 1
                fresh.append((pid, sent))
                parts.append((pid, sent.data))
            elif back == NUM_BATCHES_TO_RETAIN and fresh:
                parts.append((fresh[-1][0], fresh[-1][1].data))  # the same new batch again
            else:
                parts.append((pid, c.sent[-min(back, len(c.sent))].data))
        written = self.append(parts)
        for pid, sent in fresh:
            i = next(i for i, (p, d) in enumerate(parts) if p == pid and d == sent.data)
            if written[i]:
                self.clients[pid].sent.append(sent)
                self.clients[pid].next_seq = sent.seq + 1

    @rule()
    def plain_batch(self) -> None:
        b = BatchBuilder()
        b.append(self.now, None, b"no producer")
        self.append([(-1, b.build())])

    # -- time, rolls, reopens, truncation -----------------------------------------------------

    @rule(advance=st.sampled_from([0, 1, EXPIRATION_MS // 2, EXPIRATION_MS - 1, EXPIRATION_MS]))
    def expire(self, advance: int) -> None:
        self.now += advance
        self.L.remove_expired_producers(self.now)
        self.state = {pid: e for pid, e in self.state.items() if not expired(e, self.now)}

    @rule()
    def roll(self) -> None:
        self.L.roll(now_ms=self.now)
        if self.bases[-1] != self.end:
            self.bases.append(self.end)
            self.snapshots[self.end] = self.snapshot_of(self.state)

    def model_open(self, *, clean: bool) -> None:
        end = self.end
        # An unclean open re-reads every segment from the recovery point (0 here), so the
        # state is rebuilt from a snapshot at or below the first of them (Kafka's
        # LogLoader.recoverSegment), which also rebuilds their transaction indexes.
        load_below = end if clean else min(self.bases[0], end)
        self.snapshots = {o: s for o, s in self.snapshots.items() if o <= end}
        strays = sorted(o for o in self.snapshots if o not in self.bases)
        for o in strays[:-1]:
            del self.snapshots[o]
        if strays and strays[-1] < self.bases[-1]:
            del self.snapshots[strays[-1]]
        last_two = self.bases[-2:]
        usable = [o for o in self.snapshots if o <= load_below]
        if usable:
            start = max(usable)
            self.state = {
                pid: replace(e, batches=list(e.batches))
                for pid, e in self.snapshots[start].items()
                if not expired(e, self.now)
            }
        elif clean and not self.snapshots:
            # No snapshot at all after a clean shutdown: only the last two segments.
            start = min(max(last_two[0], 0), load_below, end)
            self.state = {}
            if start > 0:
                self.snapshots[start] = {}
        else:
            start, self.state = 0, {}
        self.replay(start, last_two)

    def replay(self, start: int, snapshot_at: list[int]) -> None:
        if start >= self.end:
            return
        for b in self.batches:
            for base in snapshot_at:
                if start < base == b.base:
                    self.snapshots[base] = self.snapshot_of(self.state)
            if b.last >= start:
                update(self.state, b)
        for base in snapshot_at:
            if start < base == self.end:
                self.snapshots[base] = self.snapshot_of(self.state)
        self.snapshots[self.end] = self.snapshot_of(self.state)

    @rule()
    def close_and_reopen(self) -> None:
        self.L.close()
        self.log = None
        self.snapshots[self.end] = self.snapshot_of(self.state)
        self.log = Log.open(self.path, CONFIG, clean_shutdown=True, now_ms=self.now)
        self.model_open(clean=True)

    @rule(tear=st.integers(0, 200))
    def crash_and_reopen(self, tear: int) -> None:
        log, self.log = self.log, None
        del log  # dropped without close(): a crash, as far as the files know
        gc.collect()
        last = self.batches[-1] if self.batches else None
        if tear and last is not None and last.base >= self.bases[-1]:
            # A torn tail: the last batch loses some of its bytes, or all of them.
            active = self.path / f"{self.bases[-1]:020d}.log"
            size = active.stat().st_size
            with open(active, "r+b") as f:
                f.truncate(size - min(tear, last.size))
            self.batches.pop()
        self.log = Log.open(self.path, CONFIG, clean_shutdown=False, now_ms=self.now)
        self.model_open(clean=False)

    @rule()
    def reopen_without_snapshots(self) -> None:
        """A log written before producer state existed, shut down cleanly."""
        self.L.close()
        self.log = None
        for f in self.path.glob("*.snapshot"):
            f.unlink()
        self.snapshots = {}
        self.log = Log.open(self.path, CONFIG, clean_shutdown=True, now_ms=self.now)
        self.model_open(clean=True)

    @precondition(lambda self: bool(self.batches))
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        i = data.draw(st.integers(0, len(self.batches) - 1))
        offset = self.batches[i].base
        assert self.L.truncate_to(offset, now_ms=self.now)
        del self.batches[i:]
        self.bases = [b for b in self.bases if b <= offset]
        if not self.state:
            self.snapshots = {o: s for o, s in self.snapshots.items() if o <= offset}
            return
        self.snapshots = {o: s for o, s in self.snapshots.items() if o <= offset}
        start = max(self.snapshots, default=0)
        loaded = self.snapshots.get(start, {})
        self.state = {
            pid: replace(e, batches=list(e.batches))
            for pid, e in loaded.items()
            if not expired(e, self.now)
        }
        self.replay(start, [])

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def the_log_holds_the_models_batches(self) -> None:
        if self.log is None:
            return
        assert self.L.log_end_offset == self.end
        assert [s.base_offset for s in self.L.segments()] == self.bases

    @invariant()
    def the_producer_state_matches_the_model(self) -> None:
        if self.log is None:
            return
        assert _view(self.L.producer_state()) == _model_view(self.state)

    @invariant()
    def the_snapshot_files_match_the_model(self) -> None:
        files = {int(p.name.split(".")[0]): p for p in self.path.glob("*.snapshot")}
        assert sorted(files) == sorted(self.snapshots)
        for offset, path in files.items():
            assert _view(read_producer_snapshot(path)) == _model_view(self.snapshots[offset])


def _headers(data: bytes) -> list[_Header]:
    return [
        _Header(b.producer_epoch, b.base_sequence, b.record_count, b.max_timestamp)
        for b in decode_batches(data)
    ]


@dataclass(frozen=True)
class _Header:
    producer_epoch: int
    base_sequence: int
    record_count: int
    max_timestamp: int


View = dict[int, tuple[int, int, int, tuple[int, int, int, int] | None]]


def _view(entries: list[ProducerStateEntry]) -> View:
    out: View = {}
    for e in entries:
        b = e.last_batch
        batch = (
            None
            if b is None
            else (b.first_sequence, b.last_sequence, b.first_offset, b.last_offset)
        )
        out[e.producer_id] = (e.producer_epoch, e.last_sequence, e.last_timestamp, batch)
    return out


def _model_view(state: State) -> View:
    out: View = {}
    for pid, e in state.items():
        b = e.batches[-1]
        out[pid] = (e.epoch, b.last_seq, e.last_ts, (b.first_seq, b.last_seq, b.base, b.last))
    return out


ProducerStateMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestProducerStateModel = ProducerStateMachine.TestCase
