#!/usr/bin/env python3
"""Log compaction benchmark: Rillet's log cleaner (``rillet._core.clean_log``) cleaning a
compacted log, against a raw sequential write of the same bytes on the same machine, in the
same run.

The log: ``--size-mb`` MiB of records with ``--record-bytes``-byte values in uncompressed
16 KiB batches (the producer's default ``batch.size`` and codec), written with the broker's
default topic settings (``cleanup.policy=compact``, 1 GiB segments), rolled so all of it is
cleanable, and fsynced. Its keys are written in rounds, each round every key once in a new
random order, so ``--live-fraction`` of the records are the newest of their key.

Measured (each ``--repeat`` times, interleaved, best kept):

* ``compaction_mb_s``: the log's size over the wall time of one ``clean_log`` call with the
  default cleaner settings (``log.cleaner.dedupe.buffer.size`` 128 MiB, one thread): building
  the offset map over the whole log, rewriting it, fsyncing the cleaned segments and swapping
  them in. The page cache holds the log, as it does on a broker for recently written data.
* ``raw_write_mb_s``: ``os.write`` of the same number of bytes in 1 MiB writes to a new file,
  then ``fsync`` (bench/storage.py's raw write baseline, made durable as the cleaner's output
  is), into recycled page-cache pages (see ``pagecache.py``).

After each cleaning the log is checked: exactly one record per key is left, the newest.
Progress goes to stderr, a human summary to stdout, and the last stdout line is one JSON
object (also written to ``bench/results/compaction.json``). 1 MB = 1e6 bytes.

    python bench/compaction.py                  # 1 GiB log, 10% live keys, best of 2
    python bench/compaction.py --size-mb 128    # quick run
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rillet import BatchBuilder, Log, LogConfig, decode_batches
from rillet._core import CleanerConfig, CleanerStats, clean_log

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pagecache import warm_page_cache

KIB = 1 << 10
MIB = 1 << 20
MB = 1e6
BATCH_BYTES = 16 * KIB
TARGET_RATIO = 0.3


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def config() -> LogConfig:
    """Kafka's topic defaults, compacted."""
    return LogConfig(compact=True)


def build_log(
    path: Path, total: int, record_bytes: int, live_fraction: float, seed: int
) -> tuple[Log, int, int]:
    """Write the log (see the module docs); returns it, its record count and key count."""
    value = random.Random(seed).randbytes(record_bytes)
    key_bytes = 12
    per_record = record_bytes + key_bytes + 8  # value, key, record framing (approximately)
    records = total // per_record
    keys = max(1, int(records * live_fraction))
    rounds = max(1, records // keys)
    per_batch = max(1, (BATCH_BYTES - 61) // per_record)
    rng = random.Random(seed)
    lg = Log.open(path, config())
    now = time.time_ns() // 1_000_000
    batch_keys: list[bytes | None] = []
    written = 0
    for _ in range(rounds):
        order = list(range(keys))
        rng.shuffle(order)
        for k in order:
            batch_keys.append(b"key-%08d" % k)
            if len(batch_keys) == per_batch:
                b = BatchBuilder("none")
                b.append_values([value] * per_batch, now, batch_keys)
                lg.append_as_leader(b.build(), 0)
                written += per_batch
                batch_keys = []
    if batch_keys:
        b = BatchBuilder("none")
        b.append_values([value] * len(batch_keys), now, batch_keys)
        lg.append_as_leader(b.build(), 0)
        written += len(batch_keys)
    lg.roll()
    lg.flush()
    return lg, written, keys


def check_cleaned(lg: Log, keys: int) -> None:
    """One record per key is left, and it is the key's newest."""
    seen: dict[bytes, int] = {}
    offset = lg.log_start_offset
    while offset < lg.log_end_offset:
        batches = decode_batches(lg.read(offset, 8 * MIB).read_all())
        for b in batches:
            for r in b.records:
                assert r.key is not None and r.key not in seen, f"key {r.key!r} twice"
                seen[r.key] = r.offset
        offset = batches[-1].last_offset + 1
    assert len(seen) == keys, f"{len(seen)} keys left, {keys} written"


def bench_clean(lg: Log) -> tuple[float, CleanerStats]:
    t0 = time.perf_counter()
    stats = clean_log(lg, CleanerConfig())
    return time.perf_counter() - t0, stats


def bench_raw_write(path: Path, total: int) -> float:
    chunk = os.urandom(MIB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t0 = time.perf_counter()
        left = total
        while left > 0:
            n = os.write(fd, chunk[: min(MIB, left)])
            left -= n
        os.fsync(fd)
        elapsed = time.perf_counter() - t0
    finally:
        os.close(fd)
    path.unlink()
    return elapsed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--size-mb", type=int, default=1024, help="MiB of log (default 1024)")
    ap.add_argument("--record-bytes", type=int, default=1024, help="value size (default 1024)")
    ap.add_argument("--live-fraction", type=float, default=0.1, help="live keys (default 0.1)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per measurement; best is kept")
    ap.add_argument("--dir", default="/tmp", help="parent of the temp work dir (default /tmp)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--out",
        default=str(Path(__file__).resolve().parent / "results" / "compaction.json"),
        help="results JSON path",
    )
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    args = ap.parse_args(argv)
    if args.size_mb < 1 or not 0 < args.live_fraction <= 1:
        ap.error("--size-mb must be >= 1 and --live-fraction in (0, 1]")
    total = args.size_mb * MIB
    repeat = max(1, args.repeat)
    gc.disable()

    workdir = Path(tempfile.mkdtemp(prefix="rillet-bench-compaction-", dir=args.dir))
    log(f"work dir {workdir}; {args.size_mb} MiB log, {args.live_fraction:.0%} live keys")
    best: dict[str, float] = {}
    samples: dict[str, list[float]] = {"compaction_mb_s": [], "raw_write_mb_s": []}
    last: dict[str, Any] = {}
    try:
        for r in range(repeat):
            path = workdir / f"compacted-{r}"
            log(f"repeat {r + 1}: writing the log (untimed) ...")
            lg, records, keys = build_log(
                path, total, args.record_bytes, args.live_fraction, args.seed
            )
            log_bytes = lg.size_in_bytes

            segments_before = len(lg.segments())

            def run_clean(
                lg: Log = lg, log_bytes: int = log_bytes, before: int = segments_before
            ) -> None:
                elapsed, stats = bench_clean(lg)
                samples["compaction_mb_s"].append(round(log_bytes / elapsed / MB, 1))
                last.update(
                    elapsed_s=elapsed,
                    stats=stats,
                    segments_before=before,
                    segments_after=len(lg.segments()),
                )

            def run_raw(log_bytes: int = log_bytes) -> None:
                warm_page_cache(workdir, log_bytes)
                elapsed = bench_raw_write(workdir / "raw.bin", log_bytes)
                samples["raw_write_mb_s"].append(round(log_bytes / elapsed / MB, 1))

            first, second = (run_clean, run_raw) if r % 2 == 0 else (run_raw, run_clean)
            first()
            second()
            log(
                f"  compaction {samples['compaction_mb_s'][-1]:,.1f} MB/s, raw write "
                f"{samples['raw_write_mb_s'][-1]:,.1f} MB/s; checking the cleaned log ..."
            )
            check_cleaned(lg, keys)
            last.update(records=records, keys=keys, log_bytes=log_bytes)
            lg.delete()
        for k, v in samples.items():
            best[k] = max(v)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    s: CleanerStats = last["stats"]
    ratio = best["compaction_mb_s"] / best["raw_write_mb_s"]
    res: dict[str, Any] = {
        "compaction_mb_s": round(best["compaction_mb_s"], 1),
        "raw_write_mb_s": round(best["raw_write_mb_s"], 1),
        "compaction_vs_raw_write": round(ratio, 3),
        "targets": {"compaction_ge_0.3x_raw_write": ratio >= TARGET_RATIO},
        "samples": samples,
        "last_run": {
            "log_bytes": last["log_bytes"],
            "records": last["records"],
            "live_keys": last["keys"],
            "elapsed_s": round(last["elapsed_s"], 3),
            "map_elapsed_s": round(s.map_elapsed_secs, 3),
            "bytes_read": s.bytes_read,
            "bytes_written": s.bytes_written,
            "records_removed": s.records_removed,
            "messages_per_s": round(s.messages_per_sec),
            "segments_before": last["segments_before"],
            "segments_after": last["segments_after"],
            "offset_map_utilization": round(s.buffer_utilization, 3),
        },
        "params": {
            "size_mb": args.size_mb,
            "record_bytes": args.record_bytes,
            "live_fraction": args.live_fraction,
            "batch_bytes": BATCH_BYTES,
            "repeat": repeat,
            "dir": args.dir,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
    }
    lr = res["last_run"]
    ok = "ok" if ratio >= TARGET_RATIO else "MISSED"
    print(
        f"Rillet compaction benchmark: {args.size_mb} MiB log of {args.record_bytes}-byte "
        f"records, {args.live_fraction:.0%} live keys, best of {repeat} "
        f"(Python {platform.python_version()}, {os.cpu_count()} CPUs, dir {args.dir})"
    )
    print(
        f"clean_log: {res['compaction_mb_s']:,.1f} MB/s ({lr['elapsed_s']:.2f} s for "
        f"{lr['log_bytes'] / MB:,.0f} MB, offset map {lr['map_elapsed_s']:.2f} s; "
        f"{lr['records']:,} records -> {lr['live_keys']:,}, {lr['bytes_written'] / MB:,.1f} MB "
        f"written, {lr['segments_before']} segments -> {lr['segments_after']}, "
        f"{lr['messages_per_s']:,} messages/s)"
    )
    print(f"raw write + fsync: {res['raw_write_mb_s']:,.1f} MB/s")
    print(f"compaction / raw write: {ratio:.3f}  target >= {TARGET_RATIO}x {ok}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
