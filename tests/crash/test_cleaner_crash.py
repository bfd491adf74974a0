"""Crash tests of log compaction: a child process cleans a big compacted log over and over
and is killed with SIGKILL at random moments; after each kill the parent reopens the log as a
broker would after a crash and checks it. Every kill lands somewhere in Kafka's swap protocol
(writing ``.cleaned`` files, renaming them ``.swap``, deleting the old segments, renaming to
the final names), so the reopened log must show, whatever the moment:

* no temporary file left, nothing torn, the log end unchanged;
* offsets strictly increasing, each record exactly as it was written at that offset;
* the newest record of every key whose newest record is a value (a live key, by the model).

Every other round starts again from the uncleaned log (so kills land in the first, heavy
cleaning); the others go on from where the previous kill left it. At the end a complete
cleaning gives exactly the model's compacted log. The deterministic version of every crash state is
in ``rust/core/tests/log_cleaner_crash.rs``.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rillet import BatchBuilder, Log, LogConfig, decode_batches
from rillet._core import CleanerConfig, clean_log

pytestmark = pytest.mark.slow

T0 = 1_700_000_000_000
RETENTION = 60_000
KEYS = 4000
RECORDS = 60_000
CODECS = ("none", "zstd", "lz4", "gzip", "snappy")
ROUNDS = 8

CONFIG_SRC = textwrap.dedent(
    """
    from rillet import LogConfig

    CONFIG = LogConfig(
        segment_bytes=512 * 1024,
        segment_ms=10**12,
        index_interval_bytes=4096,
        compact=True,
        delete_retention_ms=@RETENTION@,
    )
    """
).replace("@RETENTION@", str(RETENTION))
_ns: dict[str, object] = {}
exec(CONFIG_SRC, _ns)
CONFIG: LogConfig = _ns["CONFIG"]  # type: ignore[assignment]

# The child cleans the log again and again, once at T0 (stamping delete horizons) and once
# past the horizon (dropping tombstones), announcing each cleaning before it starts.
CHILD_SRC = CONFIG_SRC + textwrap.dedent(
    """
    import sys

    from rillet import Log
    from rillet._core import CleanerConfig, clean_log

    def say(line):
        sys.stdout.write(line + "\\n")
        sys.stdout.flush()

    log = Log.open(sys.argv[1], CONFIG, clean_shutdown=False, recovery_point=0)
    say("ready")
    for i in range(10**6):
        now = @T0@ + (i % 2) * 2 * @RETENTION@
        say(f"start {i}")
        clean_log(log, CleanerConfig(io_buffer_size=64 * 1024), now_ms=now)
        say(f"done {i}")
    """
).replace("@T0@", str(T0)).replace("@RETENTION@", str(RETENTION))

Rec = tuple[int, int, bytes | None, bytes | None]  # offset, timestamp, key, value


def record(offset: int) -> tuple[int, bytes, bytes | None]:
    """What was written at ``offset``: a pure function, so the parent checks every byte."""
    rng = random.Random(offset)
    key = b"key-%d" % rng.randrange(KEYS)
    value = None if rng.random() < 0.05 else rng.randbytes(rng.randrange(50, 500))
    return T0 + offset // 100, key, value


def build_log(path: Path) -> list[Rec]:
    log = Log.open(path, CONFIG, now_ms=T0)
    written: list[Rec] = []
    offset = 0
    while offset < RECORDS:
        b = BatchBuilder(CODECS[(offset // 40) % len(CODECS)])
        for o in range(offset, min(offset + 40, RECORDS)):
            ts, key, value = record(o)
            b.append(ts, key, value)
            written.append((o, ts, key, value))
        info = log.append_as_leader(b.build(), 0, now_ms=T0)
        offset = info.last_offset + 1
    log.roll(now_ms=T0)
    log.close()
    return written


def copy_dir(src: Path, dst: Path) -> None:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)


def read_all(log: Log) -> list[Rec]:
    data = log.read(log.log_start_offset, 1 << 31).read_all()
    return [
        (r.offset, r.timestamp, r.key, r.value) for b in decode_batches(data) for r in b.records
    ]


def check(path: Path, written: list[Rec]) -> Log:
    leftovers = [p.name for p in path.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    log = Log.open(path, CONFIG, clean_shutdown=False, recovery_point=0, now_ms=T0)
    assert log.recovery_info.truncated_bytes == 0
    assert not [p.name for p in path.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    assert log.log_end_offset == RECORDS
    got = read_all(log)
    offsets = [r[0] for r in got]
    assert offsets == sorted(set(offsets)), "duplicate or unordered offsets"
    for r in got:
        assert r == written[r[0]], f"offset {r[0]} changed"
    present = set(offsets)
    newest: dict[bytes | None, Rec] = {r[2]: r for r in written}
    lost = [r for r in newest.values() if r[3] is not None and r[0] not in present]
    assert not lost, f"{len(lost)} live keys lost (after {leftovers})"
    return log


def test_kill_9_while_cleaning_never_loses_a_live_key(tmp_path: Path) -> None:
    pristine = tmp_path / "pristine"
    written = build_log(pristine)
    path = tmp_path / "compacted-0"
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    # How long one cleaning takes here, so the kills spread over it.
    probe = tmp_path / "probe"
    copy_dir(pristine, probe)
    plog = Log.open(probe, CONFIG, now_ms=T0)
    started = time.perf_counter()
    clean_log(plog, CleanerConfig(io_buffer_size=64 * 1024), now_ms=T0)
    one_cleaning = time.perf_counter() - started
    plog.close()

    killed_while_cleaning = 0
    for round_ in range(ROUNDS):
        if round_ % 2 == 0:
            copy_dir(pristine, path)
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD_SRC, str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n", child.stderr.read() if child.stderr else ""
        time.sleep(rng.uniform(0, 2.5 * one_cleaning))
        child.send_signal(signal.SIGKILL)
        out, err = child.communicate()
        assert child.returncode == -signal.SIGKILL, f"seed {seed}, round {round_}: {err}"
        lines = out.splitlines()
        if lines and lines[-1].startswith("start"):
            killed_while_cleaning += 1
        try:
            check(path, written).close()
        except AssertionError as e:
            raise AssertionError(f"seed {seed}, round {round_}: {e}") from e
    assert killed_while_cleaning > 0, f"seed {seed}: no kill landed during a cleaning"

    # Finished off: exactly the model's compacted log (tombstones stamped, then expired).
    log = check(path, written)
    try:
        clean_log(log, CleanerConfig(), now_ms=T0)
        clean_log(log, CleanerConfig(), now_ms=T0 + 10 * RETENTION)
        newest = {r[2]: r for r in written}
        want = sorted(r for r in newest.values() if r[3] is not None)
        assert read_all(log) == want
    finally:
        log.close()
