"""Crash tests: a child process appends to a log and is killed with SIGKILL at random
moments; the parent then recovers the log and checks that nothing acknowledged was lost and
nothing corrupt is served. Then the active segment's tail is torn in the ways a crash (or a
bad disk) leaves it: cut mid-batch, followed by garbage, or with a flipped byte; recovery
must keep every batch before the damage, cut the rest, and let appends continue.

SIGKILL does not lose the page cache, so every append that returned (and so was printed by
the child) must survive it exactly; at most the one append in flight may also be there.
Record contents are a pure function of the offset, so the parent checks every byte.
"""

from __future__ import annotations

import gc
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rillet import BatchBuilder, Log, LogConfig, decode_batches, validate_record_batches
from rillet.errors import OffsetOutOfRangeError
from rillet.storage.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    LogManager,
)
from rillet.types import TopicPartition

pytestmark = pytest.mark.slow

# Shared by the parent and the child (exec'd in both): what the record at an offset holds.
CONTENT_SRC = textwrap.dedent(
    """
    import hashlib

    CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
    TS0 = 1_600_000_000_000

    def content(partition, offset):
        unit = hashlib.sha256(b"%d/%d" % (partition, offset)).digest()
        n = (offset * 7919 + partition * 131) % 400
        value = (unit * (n // 32 + 1))[:n]
        return TS0 + offset, b"k%d-%d" % (partition, offset), value

    def build_batch(partition, first, count):
        from rillet import BatchBuilder

        b = BatchBuilder(CODECS[first % len(CODECS)])
        for o in range(first, first + count):
            ts, key, value = content(partition, o)
            b.append(ts, key, value)
        return b.build()
    """
)
_ns: dict[str, object] = {}
exec(CONTENT_SRC, _ns)
content: Callable[[int, int], tuple[int, bytes, bytes]] = _ns["content"]  # type: ignore[assignment]
build_batch: Callable[[int, int, int], bytes] = _ns["build_batch"]  # type: ignore[assignment]

MAX_RECORDS_PER_APPEND = 12

CHILD_SRC = CONTENT_SRC + textwrap.dedent(
    """
    import random
    import sys

    from rillet import Log, LogConfig

    MAX_RECORDS_PER_APPEND = @MAX_RECORDS_PER_APPEND@

    def log_config():
        return LogConfig(segment_bytes=64 * 1024, index_interval_bytes=1024,
                         segment_index_bytes=8192)

    def ack(line):
        sys.stdout.write(line + "\\n")
        sys.stdout.flush()

    def run_log(path, seed):
        log = Log.open(path, log_config(), clean_shutdown=False, recovery_point=0)
        ack(f"ready {log.log_end_offset}")
        rng = random.Random(seed)
        for _ in range(10**6):
            first = log.log_end_offset
            n = rng.randint(1, MAX_RECORDS_PER_APPEND)
            info = log.append_as_leader(build_batch(0, first, n), 1)
            assert info.first_offset == first and info.last_offset == first + n - 1
            ack(str(info.last_offset))
            r = rng.random()
            if r < 0.05:
                log.flush()
            elif r < 0.06:
                log.roll()

    def run_manager(dirs, seed, partitions):
        from rillet.storage.log_manager import LogManager

        lm = LogManager(dirs, broker_config={"log.segment.bytes": 32 * 1024})
        lm.startup()
        logs = [lm.get_or_create_log("crash", p) for p in range(partitions)]
        ack("ready 0")
        rng = random.Random(seed)
        for i in range(10**6):
            p = rng.randrange(partitions)
            log = logs[p]
            first = log.log_end_offset
            n = rng.randint(1, MAX_RECORDS_PER_APPEND)
            info = log.append_as_leader(build_batch(p, first, n), 1)
            ack(f"{p} {info.last_offset}")
            if i % 50 == 49:
                lm.flush_dirty_logs()
                lm.checkpoint()

    if __name__ == "__main__":
        mode = sys.argv[1]
        if mode == "log":
            run_log(sys.argv[2], int(sys.argv[3]))
        else:
            run_manager(sys.argv[2].split(","), int(sys.argv[3]), int(sys.argv[4]))
    """
).replace("@MAX_RECORDS_PER_APPEND@", str(MAX_RECORDS_PER_APPEND))

CONFIG = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=1024, segment_index_bytes=8192)


# -- helpers ----------------------------------------------------------------------------------


def run_and_kill(tmp_path: Path, args: list[str], *, min_acks: int, delay: float) -> list[str]:
    """Run the child until it has acknowledged ``min_acks`` appends, wait ``delay`` more
    seconds, SIGKILL it, and return every complete line it printed (the first is "ready")."""
    script = tmp_path / "crash_child.py"
    if not script.exists():
        script.write_text(CHILD_SRC)
    lines: list[str] = []
    enough = threading.Event()
    with (
        open(tmp_path / "child.stderr", "wb") as err,
        subprocess.Popen(
            [sys.executable, str(script), *args], stdout=subprocess.PIPE, stderr=err
        ) as proc,
    ):
        assert proc.stdout is not None
        stdout = proc.stdout

        def reader() -> None:
            for raw in stdout:
                if raw.endswith(b"\n"):  # a line cut by the kill was not acknowledged
                    lines.append(raw.decode().strip())
                if len(lines) > min_acks:
                    enough.set()
            enough.set()

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        try:
            enough.wait(timeout=60)
            if delay:
                time.sleep(delay)
        finally:
            proc.kill()
            proc.wait()
            t.join(timeout=60)
    stderr = (tmp_path / "child.stderr").read_text()
    assert proc.returncode == -signal.SIGKILL, f"the child died by itself:\n{stderr}"
    assert lines and lines[0].startswith("ready"), stderr
    return lines


def read_all_checked(log: Log, partition: int = 0) -> int:
    """Read the whole log in fetch-sized pieces; every batch must pass its CRC, offsets must
    be contiguous from the log start, and every record must hold what the writer wrote.
    Returns the number of records."""
    expected = log.log_start_offset
    end = log.log_end_offset
    while expected < end:
        fetch = log.read(expected, 256 * 1024)
        data = fetch.read_all()
        assert len(data) == fetch.size > 0
        for batch in decode_batches(data):  # verifies every CRC and parses every record
            assert batch.base_offset == expected, "offsets must be contiguous"
            assert batch.record_count == len(batch.records)
            for r in batch.records:
                assert r.offset == expected
                ts, key, value = content(partition, r.offset)
                assert (r.timestamp, r.key, r.value) == (ts, key, value), r.offset
                expected += 1
            assert batch.last_offset == expected - 1
    assert expected == end
    return end - log.log_start_offset


def segment_files(path: Path) -> list[Path]:
    return sorted(path.glob("*.log"))


def batch_positions(seg: Path) -> list[tuple[int, int, int, int]]:
    """(position, size, base_offset, last_offset) of every batch in a segment file."""
    data = seg.read_bytes()
    spans = validate_record_batches(data)
    out = []
    for i, span in enumerate(spans):
        end = spans[i + 1].position if i + 1 < len(spans) else len(data)
        out.append((span.position, end - span.position, span.base_offset, span.last_offset))
    return out


def crash(log: Log) -> None:
    """Forget the log without close(): as far as the files know, the process died."""
    del log
    gc.collect()


# -- (a) kill -9 while appending ----------------------------------------------------------


def test_kill9_during_appends_loses_no_acknowledged_record(tmp_path: Path) -> None:
    path = tmp_path / "crash-0"
    acked_end = 0  # one past the highest acknowledged offset over all runs
    for iteration in range(10):
        rng = random.Random(7000 + iteration)
        lines = run_and_kill(
            tmp_path,
            ["log", str(path), str(rng.randrange(2**31))],
            min_acks=rng.randint(1, 1500),
            delay=rng.choice([0.0, 0.0, rng.uniform(0, 0.05)]),
        )
        start_end = int(lines[0].split()[1])
        assert start_end >= acked_end, "a reopen lost acknowledged records"
        acks = [int(x) for x in lines[1:]]
        assert acks == sorted(acks)
        if acks:
            acked_end = acks[-1] + 1

        log = Log.open(path, CONFIG, clean_shutdown=False, recovery_point=0)
        try:
            info = log.recovery_info
            assert info.recovered_segments == len(log.segments())
            assert info.deleted_segments == 0
            assert log.log_start_offset == 0
            end = log.log_end_offset
            # Every acknowledged offset is there; at most the append in flight is extra.
            assert acked_end <= end <= acked_end + MAX_RECORDS_PER_APPEND
            assert read_all_checked(log) == end
            assert log.recovery_point <= end
        finally:
            log.close()


# -- (b) torn tails ---------------------------------------------------------------------------


def build_log(path: Path, *, segments: int = 3, active_batches: int = 5) -> Log:
    """A log of contiguous batches over at least ``segments`` segments, the active one
    holding at least ``active_batches`` batches."""
    config = LogConfig(segment_bytes=8 * 1024, index_interval_bytes=256, segment_index_bytes=4096)
    log = Log.open(path, config)
    rng = random.Random(99)
    while True:
        segs = log.segments()
        if len(segs) >= segments and len(batch_positions(segs[-1].path)) >= active_batches:
            return log
        first = log.log_end_offset
        log.append_as_leader(build_batch(0, first, rng.randint(1, 8)), 2)


def check_recovered(
    path: Path, *, recovery_point: int, want_end: int, want_truncated: int, want_deleted: int = 0
) -> None:
    config = LogConfig(segment_bytes=8 * 1024, index_interval_bytes=256, segment_index_bytes=4096)
    log = Log.open(path, config, clean_shutdown=False, recovery_point=recovery_point)
    try:
        info = log.recovery_info
        assert log.log_end_offset == want_end
        assert info.truncated_bytes == want_truncated
        assert info.deleted_segments == want_deleted
        assert read_all_checked(log) == want_end
        # Appends continue from the end of the last intact batch, and are readable.
        appended = log.append_as_leader(build_batch(0, want_end, 3), 2)
        assert (appended.first_offset, appended.last_offset) == (want_end, want_end + 2)
        assert read_all_checked(log) == want_end + 3
        with pytest.raises(OffsetOutOfRangeError):
            log.read(want_end + 4, 1024)
    finally:
        log.close()
    # And the repaired log reopens cleanly with the same contents.
    log = Log.open(path, config, clean_shutdown=True, recovery_point=want_end + 3)
    try:
        assert log.recovery_info.recovered_segments == 0
        assert read_all_checked(log) == want_end + 3
    finally:
        log.close()


def _flip(seg: Path, position: int) -> None:
    with open(seg, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x5A]))


@pytest.mark.parametrize("flushed", [False, True], ids=["rp=0", "rp=end"])
@pytest.mark.parametrize(
    "cut",
    [
        pytest.param(lambda size: 1, id="1-byte"),
        pytest.param(lambda size: 30, id="mid-header"),
        pytest.param(lambda size: 61, id="header-only"),
        pytest.param(lambda size: size // 2, id="mid-body"),
        pytest.param(lambda size: size - 1, id="all-but-last-byte"),
    ],
)
def test_recovery_cuts_a_torn_last_batch(
    tmp_path: Path, cut: Callable[[int], int], flushed: bool
) -> None:
    path = tmp_path / "torn-0"
    log = build_log(path)
    rp = log.log_end_offset if flushed else 0
    if flushed:
        log.flush()
    crash(log)
    seg = segment_files(path)[-1]
    pos, size, base, _last = batch_positions(seg)[-1]
    keep = min(cut(size), size - 1)
    os.truncate(seg, pos + keep)
    check_recovered(path, recovery_point=rp, want_end=base, want_truncated=keep)


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(lambda seg: random.Random(1).randbytes(1), id="1-random-byte"),
        pytest.param(lambda seg: random.Random(2).randbytes(5000), id="random"),
        pytest.param(lambda seg: bytes(4096), id="zeros"),
        pytest.param(
            # A whole valid batch again (a retried write): its offsets go backwards.
            lambda seg: seg.read_bytes()[batch_positions(seg)[-1][0] :],
            id="duplicate-last-batch",
        ),
        pytest.param(
            lambda seg: seg.read_bytes()[: batch_positions(seg)[0][1] // 2],
            id="half-of-first-batch",
        ),
    ],
)
def test_recovery_cuts_garbage_after_the_last_batch(
    tmp_path: Path, garbage: Callable[[Path], bytes]
) -> None:
    path = tmp_path / "garbage-0"
    log = build_log(path)
    end = log.log_end_offset
    crash(log)
    seg = segment_files(path)[-1]
    junk = garbage(seg)
    with open(seg, "ab") as f:
        f.write(junk)
    check_recovered(path, recovery_point=0, want_end=end, want_truncated=len(junk))


@pytest.mark.parametrize("flushed", [False, True], ids=["rp=0", "rp=end"])
@pytest.mark.parametrize("which", ["first", "middle", "last"])
@pytest.mark.parametrize(
    "where",
    [
        pytest.param(lambda size, rng: rng.randrange(21, size), id="crc-covered"),
        pytest.param(lambda size, rng: rng.randrange(17, 21), id="crc-field"),
        pytest.param(lambda size, rng: rng.randrange(8, 12), id="length-field"),
        pytest.param(lambda size, rng: 16, id="magic"),
    ],
)
def test_recovery_cuts_at_a_flipped_byte_in_the_active_segment(
    tmp_path: Path,
    where: Callable[[int, random.Random], int],
    which: str,
    flushed: bool,
) -> None:
    path = tmp_path / "flip-0"
    log = build_log(path)
    rp = log.log_end_offset if flushed else 0
    if flushed:
        log.flush()
    crash(log)
    seg = segment_files(path)[-1]
    spans = batch_positions(seg)
    j = {"first": 0, "middle": len(spans) // 2, "last": len(spans) - 1}[which]
    pos, size, base, _last = spans[j]
    _flip(seg, pos + where(size, random.Random(pos)))
    seg_size = seg.stat().st_size
    check_recovered(path, recovery_point=rp, want_end=base, want_truncated=seg_size - pos)


def test_recovery_cuts_at_damage_in_an_older_segment_and_drops_the_later_ones(
    tmp_path: Path,
) -> None:
    path = tmp_path / "older-0"
    log = build_log(path, segments=4)
    crash(log)
    segs = segment_files(path)
    seg = segs[1]
    spans = batch_positions(seg)
    pos, size, base, _last = spans[len(spans) // 2]
    _flip(seg, pos + size // 2)
    check_recovered(
        path,
        recovery_point=0,
        want_end=base,
        want_truncated=seg.stat().st_size - pos,
        want_deleted=len(segs) - 2,
    )
    assert [p.name for p in segment_files(path)][:2] == [p.name for p in segs[:2]]


def test_torn_tails_after_kill9(tmp_path: Path) -> None:
    """The damage cases in turn, on a log a killed child wrote."""
    path = tmp_path / "crash-0"
    lines = run_and_kill(tmp_path, ["log", str(path), "4242"], min_acks=800, delay=0.0)
    acked_end = int(lines[-1]) + 1

    def reopen_and_check(want_end: int) -> None:
        log = Log.open(path, CONFIG, clean_shutdown=False, recovery_point=0)
        try:
            assert log.log_end_offset == want_end
            assert read_all_checked(log) == want_end
        finally:
            crash(log)

    log = Log.open(path, CONFIG, clean_shutdown=False, recovery_point=0)
    end = log.log_end_offset
    assert end >= acked_end
    crash(log)
    # 1. garbage after the last batch: nothing lost.
    seg = segment_files(path)[-1]
    with open(seg, "ab") as f:
        f.write(random.Random(5).randbytes(777))
    reopen_and_check(end)
    # 2. the last batch cut mid-way: back to its base offset.
    seg = segment_files(path)[-1]
    pos, size, base, _ = batch_positions(seg)[-1]
    os.truncate(seg, pos + size // 2)
    reopen_and_check(base)
    # 3. a flipped byte in an earlier batch of the active segment: back to that batch.
    seg = segment_files(path)[-1]
    spans = batch_positions(seg)
    pos, size, base, _ = spans[len(spans) // 2]
    _flip(seg, pos + 21 + (size - 21) // 2)
    reopen_and_check(base)
    # Appends continue from there.
    log = Log.open(path, CONFIG, clean_shutdown=False, recovery_point=0)
    try:
        info = log.append_as_leader(build_batch(0, base, 4), 1)
        assert info.first_offset == base
        assert read_all_checked(log) == base + 4
    finally:
        log.close()


# -- LogManager: the clean-shutdown marker -------------------------------------------------


def _manager(dirs: list[Path]) -> LogManager:
    return LogManager(dirs, broker_config={"log.segment.bytes": 32 * 1024})


def test_log_manager_kill9_then_recover_then_clean_shutdown(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    partitions = 4
    lm = _manager(dirs)
    assert lm.startup() == {}
    for p in range(partitions):
        lm.get_or_create_log("crash", p)
    lm.shutdown()
    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_FILE).exists()

    acked = [0] * partitions
    for iteration in range(3):
        rng = random.Random(500 + iteration)
        lines = run_and_kill(
            tmp_path,
            [
                "manager",
                ",".join(map(str, dirs)),
                str(rng.randrange(2**31)),
                str(partitions),
            ],
            min_acks=rng.randint(50, 1500),
            delay=rng.choice([0.0, rng.uniform(0, 0.03)]),
        )
        for line in lines[1:]:
            p, last = map(int, line.split())
            assert last + 1 > acked[p]
            acked[p] = last + 1
        # The child removed the markers once its logs were open; the kill left them absent.
        for d in dirs:
            assert not (d / CLEAN_SHUTDOWN_FILE).exists()

        lm = _manager(dirs)
        recovered = lm.startup()
        try:
            assert set(recovered) == {TopicPartition("crash", p) for p in range(partitions)}
            for tp, info in recovered.items():
                log = lm.get_log(*tp)
                assert log is not None
                # Unclean: segments from the checkpointed recovery point on were re-read.
                assert info.recovered_segments >= 1
                assert acked[tp.partition] <= log.log_end_offset
                assert log.log_end_offset <= acked[tp.partition] + MAX_RECORDS_PER_APPEND
                assert read_all_checked(log, tp.partition) == log.log_end_offset
            ends = {tp: log.log_end_offset for tp, log in lm.all_logs()}
            # The partitions are spread over both dirs.
            assert {lm.log_dir_of(*tp) for tp in ends} == {d.resolve() for d in dirs}
        finally:
            lm.shutdown()
        for d in dirs:
            assert (d / CLEAN_SHUTDOWN_FILE).exists()
            assert (d / RECOVERY_POINT_CHECKPOINT).exists()
            assert (d / LOG_START_OFFSET_CHECKPOINT).exists()

        # After a clean shutdown nothing needs recovering.
        lm = _manager(dirs)
        recovered = lm.startup()
        try:
            assert set(recovered) == set(ends)
            for tp, info in recovered.items():
                assert info.recovered_segments == 0
                assert info.truncated_bytes == 0
                log = lm.get_log(*tp)
                assert log is not None
                assert log.log_end_offset == ends[tp]
                assert log.recovery_point == ends[tp]
                assert read_all_checked(log, tp.partition) == ends[tp]
            for d in dirs:
                assert not (d / CLEAN_SHUTDOWN_FILE).exists()
        finally:
            lm.shutdown()


def test_batch_builder_content_is_deterministic() -> None:
    """The parent's checks rely on the writer and reader agreeing on contents."""
    a = decode_batches(build_batch(3, 10, 4))
    b = BatchBuilder("none")
    for o in range(10, 14):
        ts, key, value = content(3, o)
        b.append(ts, key, value)
    c = decode_batches(b.build())
    assert [(r.timestamp, r.key, r.value) for r in a[0].records] == [
        (r.timestamp, r.key, r.value) for r in c[0].records
    ]
