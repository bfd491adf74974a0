"""``rillet dump-log``: Kafka's DumpLogSegments over segments written by rillet.Log."""

from __future__ import annotations

import re
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from rillet import BatchBuilder, Log, LogConfig, decode_batches
from rillet.cli.main import main

NOW_MS = 1_700_000_100_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd", "none"]


@dataclass
class WrittenLog:
    dir: Path
    log: Path
    index: Path
    timeindex: Path
    # (position, base offset, last offset, max timestamp, size, codec) per batch
    batches: list[tuple[int, int, int, int, int, str]]


def batch_bytes(i: int, codec: str) -> bytes:
    if i == 2:
        b = BatchBuilder(codec, producer_id=42, producer_epoch=3, base_sequence=0)
    else:
        b = BatchBuilder(codec)
    ts = 1_700_000_000_000 + 100 * i
    b.append(ts, f"key-{i}-0".encode(), f"payload-{i}-0".encode() * 3, [("trace", b"t")])
    b.append(ts + 1, None, f"payload-{i}-1".encode(), [("a", b"1"), ("b", None)])
    b.append(ts + 2, f"key-{i}-2".encode(), None)
    b.append(ts + 3, b"", b"")
    return b.build()


def write_log(path: Path, *, segment_bytes: int = 1 << 20) -> WrittenLog:
    log = Log.open(path, LogConfig(index_interval_bytes=1, segment_bytes=segment_bytes))
    for i, codec in enumerate(CODECS):
        log.append_as_leader(batch_bytes(i, codec), leader_epoch=5, now_ms=NOW_MS)
    log.close()
    seg = path / "00000000000000000000.log"
    raw = seg.read_bytes()
    batches = []
    pos = 0
    for b in decode_batches(raw):
        batches.append(
            (pos, b.base_offset, b.last_offset, b.max_timestamp, b.size_in_bytes, b.compression)
        )
        pos += b.size_in_bytes
    return WrittenLog(path, seg, seg.with_suffix(".index"), seg.with_suffix(".timeindex"), batches)


@pytest.fixture
def written(tmp_path: Path) -> WrittenLog:
    return write_log(tmp_path / "topic-0")


def dump(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    rc = main(["dump-log", *(str(a) for a in args)])
    out, err = capsys.readouterr()
    return rc, out, err


def batch_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("baseOffset:")]


def fields(line: str) -> dict[str, str]:
    """``key: value`` pairs of one dump line (values have no spaces, except headerKeys)."""
    return dict(re.findall(r"(\w+): (\S*)", line))


# ---------------------------------------------------------------------------------------------
# .log


def test_log_batches(written: WrittenLog, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = dump(capsys, "--files", written.log)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == f"Dumping {written.log}"
    assert lines[1] == "Log starting offset: 0"
    got = batch_lines(out)
    assert len(got) == len(written.batches) == len(CODECS)
    raw = written.log.read_bytes()
    for line, (pos, base, last, max_ts, size, codec) in zip(got, written.batches, strict=True):
        f = fields(line)
        assert f["baseOffset"] == str(base)
        assert f["lastOffset"] == str(last)
        assert f["count"] == "4"
        assert f["position"] == str(pos)
        assert f["CreateTime"] == str(max_ts)
        assert f["size"] == str(size)
        assert f["magic"] == "2"
        assert f["compresscodec"] == codec
        (b,) = decode_batches(raw[pos : pos + size])
        assert f["crc"] == str(b.crc)
        assert f["isvalid"] == "true"
        assert f["partitionLeaderEpoch"] == "5"
        assert f["isTransactional"] == "false"
        assert f["isControl"] == "false"
    assert [fields(line)["compresscodec"] for line in got] == CODECS
    # No record lines without --deep-iteration / --print-data-log.
    assert not [line for line in lines if line.startswith("|")]


def test_log_producer_fields(written: WrittenLog, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = dump(capsys, "--files", written.log)
    f = fields(batch_lines(out)[2])
    assert (f["producerId"], f["producerEpoch"]) == ("42", "3")
    assert (f["baseSequence"], f["lastSequence"]) == ("0", "3")
    f = fields(batch_lines(out)[0])
    assert (f["producerId"], f["baseSequence"], f["lastSequence"]) == ("-1", "-1", "-1")


def test_print_data_log(written: WrittenLog, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = dump(capsys, "--print-data-log", "--files", written.log)
    assert rc == 0
    records = [line for line in out.splitlines() if line.startswith("| ")]
    assert len(records) == 4 * len(CODECS)
    for n, line in enumerate(records):
        i, j = divmod(n, 4)
        ts = 1_700_000_000_000 + 100 * i + j
        assert line.startswith(f"| offset: {n} CreateTime: {ts} ")
        f = fields(line)
        assert f["offset"] == str(n)
        assert f["sequence"] == (str(j) if i == 2 else "-1")
        if j == 0:
            assert f"keySize: {len(f'key-{i}-0')}" in line
            assert f" key: key-{i}-0 " in line
            assert line.endswith(f" payload: {f'payload-{i}-0' * 3}")
            assert "headerKeys: [trace]" in line
        elif j == 1:
            assert "keySize: -1" in line
            assert " key:" not in line
            assert line.endswith(f" payload: payload-{i}-1")
            assert "headerKeys: [a,b]" in line
        elif j == 2:
            assert "valueSize: -1" in line
            assert f" key: key-{i}-2" in line
            assert "headerKeys: []" in line
        else:
            assert "keySize: 0 valueSize: 0" in line
            assert "headerKeys: []" in line


def test_deep_iteration_prints_records_without_data(
    written: WrittenLog, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = dump(capsys, "--deep-iteration", "--files", written.log)
    records = [line for line in out.splitlines() if line.startswith("| ")]
    assert len(records) == 4 * len(CODECS)
    assert all("headerKeys: [" in line for line in records)
    assert not any(" payload:" in line or " key:" in line for line in records)


def test_print_data_log_null_value_has_no_payload(
    written: WrittenLog, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = dump(capsys, "--print-data-log", "--files", written.log)
    tombstone = next(line for line in out.splitlines() if line.startswith("| offset: 2 "))
    assert "valueSize: -1" in tombstone
    assert "payload:" not in tombstone


def test_log_append_time_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "lat-0"
    log = Log.open(d, LogConfig(message_timestamp_type="LogAppendTime"))
    log.append_as_leader(batch_bytes(0, "lz4"), now_ms=NOW_MS)
    log.close()
    _, out, _ = dump(capsys, "--print-data-log", "--files", d / "00000000000000000000.log")
    (line,) = batch_lines(out)
    assert fields(line)["LogAppendTime"] == str(NOW_MS)
    assert fields(line)["isvalid"] == "true"
    records = [x for x in out.splitlines() if x.startswith("| ")]
    assert all(f"LogAppendTime: {NOW_MS} " in x for x in records)


def test_second_segment_starts_at_its_base_offset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "multi-0"
    log = Log.open(d, LogConfig(index_interval_bytes=1, segment_bytes=300))
    for i in range(6):
        log.append_as_leader(batch_bytes(i, "none"), now_ms=NOW_MS)
    bases = [s.base_offset for s in log.segments()]
    log.close()
    assert len(bases) > 1
    seg = d / f"{bases[1]:020d}.log"
    _, out, _ = dump(capsys, "--files", seg)
    assert f"Log starting offset: {bases[1]}" in out
    first = fields(batch_lines(out)[0])
    assert (first["baseOffset"], first["position"]) == (str(bases[1]), "0")
    _, out, _ = dump(capsys, "--verify-index-only", "--files", seg.with_suffix(".index"))
    assert "Mismatch" not in out


def test_torn_tail(written: WrittenLog, capsys: pytest.CaptureFixture[str]) -> None:
    extra = batch_bytes(9, "none")[:40]
    with open(written.log, "ab") as f:
        f.write(extra)
    rc, out, _ = dump(capsys, "--files", written.log)
    assert rc == 0
    assert len(batch_lines(out)) == len(CODECS)
    assert f"Found {len(extra)} invalid bytes at the end of {written.log.name}" in out


@pytest.mark.parametrize("n", [1, 11, 12, 60, 61])
def test_torn_tail_of_any_length(
    written: WrittenLog, capsys: pytest.CaptureFixture[str], n: int
) -> None:
    with open(written.log, "ab") as f:
        f.write(batch_bytes(9, "zstd")[:n])
    _, out, _ = dump(capsys, "--files", written.log)
    assert out.rstrip().endswith(f"Found {n} invalid bytes at the end of {written.log.name}")


def test_corrupted_byte_is_invalid(written: WrittenLog, capsys: pytest.CaptureFixture[str]) -> None:
    pos, _, _, _, size, codec = written.batches[0]
    assert codec == "none"
    raw = bytearray(written.log.read_bytes())
    at = raw.index(b"payload-0-1", pos, pos + size)
    raw[at] ^= 0x01  # a byte of an uncompressed value: the batch still parses
    written.log.write_bytes(bytes(raw))
    _, out, _ = dump(capsys, "--files", written.log)
    valid = [fields(line)["isvalid"] for line in batch_lines(out)]
    assert valid == ["false"] + ["true"] * (len(CODECS) - 1)


def test_corrupted_compressed_batch_is_invalid(
    written: WrittenLog, capsys: pytest.CaptureFixture[str]
) -> None:
    pos, _, _, _, _, codec = written.batches[1]
    assert codec == "gzip"
    raw = bytearray(written.log.read_bytes())
    raw[pos + 70] ^= 0xFF  # inside the gzip stream
    written.log.write_bytes(bytes(raw))
    rc, out, _ = dump(capsys, "--print-data-log", "--files", written.log)
    assert rc == 0
    bad = [line for line in out.splitlines() if f"position: {pos} " in line]
    assert bad
    assert all("isvalid: false" in line for line in bad)
    # The batches after it are still dumped, and valid.
    after = [fields(line) for line in batch_lines(out) if int(fields(line)["position"]) > pos]
    assert len(after) == len(CODECS) - 2
    assert all(f["isvalid"] == "true" for f in after)


def test_max_bytes(written: WrittenLog, capsys: pytest.CaptureFixture[str]) -> None:
    first_size = written.batches[0][4]
    _, out, _ = dump(capsys, "--max-bytes", str(first_size), "--files", written.log)
    assert len(batch_lines(out)) == 1
    assert "invalid bytes" not in out
    _, out, _ = dump(capsys, "--max-bytes", str(first_size + 5), "--files", written.log)
    assert len(batch_lines(out)) == 1
    assert "Found 5 invalid bytes at the end" in out


# ---------------------------------------------------------------------------------------------
# .index / .timeindex


def index_entries(out: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in re.findall(r"^offset: (\d+) position: (\d+)$", out, re.M)]


def timeindex_entries(out: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in re.findall(r"^timestamp: (\d+) offset: (\d+)$", out, re.M)]


def test_offset_index(written: WrittenLog, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = dump(capsys, "--files", written.index)
    assert rc == 0
    assert out.startswith(f"Dumping {written.index}\n")
    entries = index_entries(out)
    assert len(entries) >= len(CODECS) - 1  # every batch but (perhaps) the first is indexed
    by_position = {pos: last for pos, _, last, _, _, _ in written.batches}
    for offset, position in entries:
        assert by_position[position] == offset
    assert entries == sorted(set(entries))
    assert "Mismatch" not in out
    # The file holds exactly these entries (8 bytes each: relative offset, position).
    raw = written.index.read_bytes()
    assert list(struct.iter_unpack(">II", raw)) == entries


def test_time_index(written: WrittenLog, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = dump(capsys, "--files", written.timeindex)
    assert rc == 0
    entries = timeindex_entries(out)
    assert len(entries) >= len(CODECS) - 1
    by_last = {last: max_ts for _, _, last, max_ts, _, _ in written.batches}
    for ts, offset in entries:
        assert by_last[offset] == ts
    assert [ts for ts, _ in entries] == sorted({ts for ts, _ in entries})
    assert "mismatch" not in out.lower()
    assert "not found" not in out


def test_index_and_log_in_one_call(written: WrittenLog, capsys: pytest.CaptureFixture[str]) -> None:
    files = ",".join(map(str, (written.log, written.index, written.timeindex)))
    rc, out, _ = dump(capsys, "--files", files)
    assert rc == 0
    assert [line for line in out.splitlines() if line.startswith("Dumping ")] == [
        f"Dumping {written.log}",
        f"Dumping {written.index}",
        f"Dumping {written.timeindex}",
    ]
    assert len(batch_lines(out)) == len(CODECS)
    assert index_entries(out)
    assert timeindex_entries(out)


def test_verify_index_only_good(written: WrittenLog, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = dump(
        capsys, "--verify-index-only", "--files", f"{written.index},{written.timeindex}"
    )
    assert rc == 0
    assert out.splitlines() == [f"Dumping {written.index}", f"Dumping {written.timeindex}"]


def test_verify_index_only_reports_a_tampered_offset(
    written: WrittenLog, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = bytearray(written.index.read_bytes())
    (rel, _) = struct.unpack_from(">II", raw, 0)
    struct.pack_into(">I", raw, 0, rel - 1)
    written.index.write_bytes(bytes(raw))
    _, out, _ = dump(capsys, "--verify-index-only", "--files", written.index)
    assert f"Mismatches in :{written.index}" in out
    assert f"Index offset: {rel - 1}, log offset: {rel}" in out
    assert index_entries(out) == []  # verify-only prints no entries


def test_verify_index_only_reports_a_tampered_position(
    written: WrittenLog, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = bytearray(written.index.read_bytes())
    (rel, pos) = struct.unpack_from(">II", raw, 8)
    struct.pack_into(">I", raw, 12, pos + 3)
    written.index.write_bytes(bytes(raw))
    _, out, _ = dump(capsys, "--verify-index-only", "--files", written.index)
    assert f"Mismatches in :{written.index}" in out
    assert f"Index offset: {rel}, log offset: -1" in out


def test_verify_time_index_reports_a_tampered_offset(
    written: WrittenLog, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = bytearray(written.timeindex.read_bytes())
    (ts, rel) = struct.unpack_from(">qI", raw, 0)
    struct.pack_into(">I", raw, 8, rel + 1)
    written.timeindex.write_bytes(bytes(raw))
    _, out, _ = dump(capsys, "--verify-index-only", "--files", written.timeindex)
    assert f"Indexed offsets not found in :{written.timeindex}" in out
    assert f"Index timestamp: {ts}, offset: {rel + 1}" in out


def test_index_sanity_check(written: WrittenLog, capsys: pytest.CaptureFixture[str]) -> None:
    files = f"{written.index},{written.timeindex}"
    _, out, _ = dump(capsys, "--index-sanity-check", "--files", files)
    assert f"{written.index} passed sanity check." in out
    assert f"{written.timeindex} passed sanity check." in out
    assert "out-of-order" not in out
    assert "mismatch" not in out


def swap_first_two_entries(path: Path, width: int) -> None:
    raw = bytearray(path.read_bytes())
    assert len(raw) >= 2 * width
    raw[:width], raw[width : 2 * width] = raw[width : 2 * width], raw[:width]
    path.write_bytes(bytes(raw))


def test_index_sanity_check_reports_out_of_order_entries(
    written: WrittenLog, capsys: pytest.CaptureFixture[str]
) -> None:
    swap_first_two_entries(written.index, 8)
    swap_first_two_entries(written.timeindex, 12)
    files = f"{written.index},{written.timeindex}"
    _, out, _ = dump(capsys, "--index-sanity-check", "--files", files)
    assert f"{written.index} has an out-of-order entry" in out
    assert f"Found timestamp mismatch in :{written.timeindex}" in out


@pytest.mark.parametrize(("suffix", "width"), [(".index", 8), (".timeindex", 12)])
def test_index_sanity_check_does_not_pass_a_bad_index(
    written: WrittenLog, capsys: pytest.CaptureFixture[str], suffix: str, width: int
) -> None:
    path = written.log.with_suffix(suffix)
    swap_first_two_entries(path, width)
    _, out, _ = dump(capsys, "--index-sanity-check", "--files", path)
    assert "passed sanity check" not in out


# ---------------------------------------------------------------------------------------------
# errors and the command line


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = dump(capsys, "--files", tmp_path / "00000000000000000000.log")
    assert rc == 1
    assert "Error: cannot read" in err


def test_unknown_suffix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "notes.txt"
    p.write_text("hi")
    rc, _, err = dump(capsys, "--files", p)
    assert rc == 1
    assert "Ignoring unknown file" in err


def test_badly_named_segment(written: WrittenLog, capsys: pytest.CaptureFixture[str]) -> None:
    renamed = written.dir / "segment.log"
    written.log.rename(renamed)
    rc, _, err = dump(capsys, "--files", renamed)
    assert rc == 1
    assert "20-digit base offset" in err


def test_files_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["dump-log"])
    assert e.value.code == 2
    assert "--files" in capsys.readouterr().err


def test_as_a_module(written: WrittenLog) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rillet.cli.main",
            "dump-log",
            "--print-data-log",
            "--files",
            f"{written.log},{written.index}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert len(batch_lines(proc.stdout)) == len(CODECS)
    assert "magic: 2" in proc.stdout
    assert "| offset: 0 " in proc.stdout
    assert index_entries(proc.stdout)
