//! Integration tests of `rillet_core::log::Log` through its public API: rolling, reads,
//! offset lookup by timestamp, retention, truncation, the leader-epoch cache, recovery on
//! open and the validation of appends.
//!
//! Every test works in its own temporary directory, uses fixed clocks (`NOW`) and fixed record
//! timestamps, and never looks at wall-clock time.

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rillet_core::log::{
    log_file_name, EpochEntry, FetchDataInfo, Log, LogAppendInfo, LogConfig, OpenOptions,
    RecoveryInfo, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP,
};
use rillet_core::record::batch::{decode_batches, BatchHeader};
use rillet_core::record::{BatchBuilder, Compression, TimestampType};
use rillet_core::{Error, Result};
use tempfile::TempDir;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// The broker's clock in every test.
const NOW: i64 = 1_700_000_000_000;
/// Default record timestamps: a minute before `NOW`, plus the record's offset.
const TS: i64 = NOW - 60_000;
const CHECKPOINT: &str = "leader-epoch-checkpoint";

/// A config with small, test-friendly sizes: an index entry for every batch but a segment's
/// first, no time-based rolls and no retention unless a test asks for them.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1 << 20,
        segment_ms: i64::MAX,
        segment_jitter_ms: 0,
        segment_index_bytes: 4096,
        index_interval_bytes: 0,
        max_message_bytes: 1 << 20,
        retention_ms: -1,
        retention_bytes: -1,
        message_timestamp_type: TimestampType::CreateTime,
    }
}

fn config_with(f: impl FnOnce(&mut LogConfig)) -> LogConfig {
    let mut c = config();
    f(&mut c);
    c
}

fn opts(clean_shutdown: bool, recovery_point: i64, log_start_offset: i64) -> OpenOptions {
    OpenOptions {
        recovery_point,
        log_start_offset,
        clean_shutdown,
        now_ms: NOW,
    }
}

struct Fixture {
    _tmp: TempDir,
    dir: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("topic-0");
    Fixture { _tmp: tmp, dir }
}

/// Open a log in a fresh directory.
fn open_new(dir: &Path, config: LogConfig) -> Log {
    let (log, info) = Log::open(dir, config, opts(true, 0, 0)).unwrap();
    assert_eq!(info, RecoveryInfo::default());
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.segment_count(), 1);
    log
}

fn reopen(dir: &Path, config: LogConfig, o: OpenOptions) -> (Log, RecoveryInfo) {
    Log::open(dir, config, o).unwrap()
}

/// A batch of `n` records meant for offsets `first..first + n`: key `k{offset:08}`, value
/// `{tag}{offset:08}`, timestamp `ts(offset)`. Batches with the same `n` (and small timestamp
/// deltas) have the same size.
fn batch_with(first: i64, n: usize, ts: impl Fn(i64) -> i64, c: Compression, tag: char) -> Vec<u8> {
    let mut b = BatchBuilder::new(c);
    b.base_offset(first);
    for o in first..first + n as i64 {
        let key = format!("k{o:08}");
        let value = format!("{tag}{o:08}");
        b.append(ts(o), Some(key.as_bytes()), Some(value.as_bytes()), &[]);
    }
    b.build().unwrap()
}

fn batch(first: i64, n: usize) -> Vec<u8> {
    batch_with(first, n, |o| TS + o, Compression::None, 'v')
}

/// The size of one `batch(_, n)`.
fn batch_size(n: usize) -> u64 {
    batch(0, n).len() as u64
}

/// Append one `n`-record batch at the log end as leader in epoch 0.
fn append(log: &mut Log, n: usize) -> LogAppendInfo {
    let first = log.log_end_offset();
    log.append_as_leader(&batch(first, n), 0, NOW, false)
        .unwrap()
}

fn append_ts(log: &mut Log, n: usize, ts: i64) -> LogAppendInfo {
    let first = log.log_end_offset();
    log.append_as_leader(
        &batch_with(first, n, |_| ts, Compression::None, 'v'),
        0,
        NOW,
        false,
    )
    .unwrap()
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Rec {
    offset: i64,
    timestamp: i64,
    value: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct BatchInfo {
    base: i64,
    last: i64,
    epoch: i32,
    size: usize,
    records: Vec<Rec>,
}

/// Decode whole batches (CRC-checked); a partial batch is an error.
fn decode(buf: &[u8]) -> Vec<BatchInfo> {
    decode_batches(buf, true, false)
        .unwrap()
        .iter()
        .map(|b| {
            let recs = b.records_buf(buf);
            BatchInfo {
                base: b.header.base_offset,
                last: b.header.last_offset(),
                epoch: b.header.partition_leader_epoch,
                size: b.header.size_in_bytes(),
                records: b
                    .records
                    .iter()
                    .map(|s| {
                        let r = s.resolve(&b.header, recs);
                        Rec {
                            offset: r.offset,
                            timestamp: r.timestamp,
                            value: r.value.unwrap().to_vec(),
                        }
                    })
                    .collect(),
            }
        })
        .collect()
}

/// The bytes of a read; every region on its own must hold whole batches.
fn fetch_bytes(info: &FetchDataInfo) -> Vec<u8> {
    let mut all = Vec::new();
    for r in &info.regions {
        let mut one = Vec::new();
        r.read_into(&mut one).unwrap();
        assert_eq!(one.len() as u64, r.length);
        decode(&one); // whole batches per region
        all.extend_from_slice(&one);
    }
    assert_eq!(all.len() as u64, info.size());
    all
}

fn read_batches(
    log: &Log,
    start: i64,
    max_bytes: u64,
    max_offset: Option<i64>,
    min_one: bool,
) -> Vec<BatchInfo> {
    decode(&fetch_bytes(
        &log.read(start, max_bytes, max_offset, min_one).unwrap(),
    ))
}

fn records(batches: &[BatchInfo]) -> Vec<Rec> {
    batches.iter().flat_map(|b| b.records.clone()).collect()
}

/// Every record from the log start to the log end.
fn read_all(log: &Log) -> Vec<Rec> {
    records(&read_batches(
        log,
        log.log_start_offset(),
        u64::MAX,
        None,
        false,
    ))
}

/// Check that `recs` are exactly offsets `from..to`, each with value `{tag}{offset:08}`
/// where `tag` is the tag for that offset.
fn assert_values(recs: &[Rec], from: i64, to: i64, tag: impl Fn(i64) -> char) {
    let offsets: Vec<i64> = recs.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (from..to).collect::<Vec<_>>());
    for r in recs {
        assert_eq!(
            r.value,
            format!("{}{:08}", tag(r.offset), r.offset).into_bytes(),
            "value at offset {}",
            r.offset
        );
    }
}

fn bases(log: &Log) -> Vec<i64> {
    log.segments().map(|s| s.base_offset()).collect()
}

fn sizes(log: &Log) -> Vec<u64> {
    log.segments().map(|s| s.size()).collect()
}

fn seg_path(dir: &Path, base: i64, suffix: &str) -> PathBuf {
    dir.join(format!("{base:020}{suffix}"))
}

/// Sorted file names of segment files in `dir`.
fn segment_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".log") || n.ends_with(".index") || n.ends_with(".timeindex"))
        .collect();
    v.sort();
    v
}

fn expected_files(bases: &[i64]) -> Vec<String> {
    let mut v: Vec<String> = bases
        .iter()
        .flat_map(|b| {
            [
                format!("{b:020}.index"),
                format!("{b:020}.log"),
                format!("{b:020}.timeindex"),
            ]
        })
        .collect();
    v.sort();
    v
}

/// (position, header) of every batch in a `.log` file.
fn log_file_batches(path: &Path) -> Vec<(u64, BatchHeader)> {
    let buf = fs::read(path).unwrap();
    decode_batches(&buf, true, false)
        .unwrap()
        .iter()
        .map(|b| (b.position as u64, b.header))
        .collect()
}

/// (relative offset, position) entries of an `.index` file, every 8 bytes of it.
fn offset_index_file(path: &Path) -> Vec<(u32, u32)> {
    let b = fs::read(path).unwrap();
    assert_eq!(b.len() % 8, 0, "{} is not whole entries", path.display());
    b.chunks(8)
        .map(|e| {
            (
                u32::from_be_bytes(e[..4].try_into().unwrap()),
                u32::from_be_bytes(e[4..].try_into().unwrap()),
            )
        })
        .collect()
}

/// (timestamp, relative offset) entries of a `.timeindex` file, every 12 bytes of it.
fn time_index_file(path: &Path) -> Vec<(i64, u32)> {
    let b = fs::read(path).unwrap();
    assert_eq!(b.len() % 12, 0, "{} is not whole entries", path.display());
    b.chunks(12)
        .map(|e| {
            (
                i64::from_be_bytes(e[..8].try_into().unwrap()),
                u32::from_be_bytes(e[8..].try_into().unwrap()),
            )
        })
        .collect()
}

fn file_len(p: &Path) -> u64 {
    fs::metadata(p).unwrap().len()
}

/// Everything observable about a log that an append must not change when it fails.
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    log_end_offset: i64,
    log_start_offset: i64,
    segments: Vec<(i64, u64, u64)>,
    epochs: Vec<EpochEntry>,
    files: Vec<String>,
    records: Vec<Rec>,
}

fn snapshot(log: &Log) -> Snapshot {
    Snapshot {
        log_end_offset: log.log_end_offset(),
        log_start_offset: log.log_start_offset(),
        segments: log
            .segments()
            .map(|s| (s.base_offset(), s.size(), file_len(s.log_path())))
            .collect(),
        epochs: log.epoch_cache().entries().to_vec(),
        files: segment_files(log.dir()),
        records: read_all(log),
    }
}

fn assert_out_of_range<T: std::fmt::Debug>(r: Result<T>, offset: i64, start: i64, end: i64) {
    match r {
        Err(Error::OffsetOutOfRange {
            offset: o,
            log_start_offset: s,
            log_end_offset: e,
        }) => {
            assert_eq!((o, s, e), (offset, start, end))
        }
        other => panic!("expected OffsetOutOfRange for {offset}, got {other:?}"),
    }
}

/// A log of `segments` full segments of three 3-record batches each (9 offsets per segment)
/// plus an active segment holding `tail_batches` batches (batch `k` holds offsets 3k..3k+3),
/// record `o` timestamped `ts_of(o)` (which must keep batches the same size).
fn build_log(
    dir: &Path,
    segments: usize,
    tail_batches: usize,
    ts_of: impl Fn(i64) -> i64,
) -> (Log, u64) {
    let s = batch_size(3);
    let mut log = open_new(dir, config_with(|c| c.segment_bytes = 3 * s));
    for k in 0..(segments * 3 + tail_batches) as i64 {
        let data = batch_with(3 * k, 3, &ts_of, Compression::None, 'v');
        assert_eq!(data.len() as u64, s);
        log.append_as_leader(&data, 0, NOW, false).unwrap();
    }
    let want: Vec<i64> = (0..segments as i64 + (tail_batches > 0) as i64)
        .map(|i| 9 * i)
        .collect();
    assert_eq!(bases(&log), want);
    (log, s)
}

// ---------------------------------------------------------------------------------------------
// Rolling
// ---------------------------------------------------------------------------------------------

#[test]
fn roll_on_segment_bytes() {
    let f = fixture();
    let s = batch_size(3);
    let mut log = open_new(&f.dir, config_with(|c| c.segment_bytes = 3 * s));
    for k in 0..10 {
        let info = append(&mut log, 3);
        assert_eq!(
            (
                info.first_offset,
                info.last_offset,
                info.record_count,
                info.batch_count
            ),
            (3 * k, 3 * k + 2, 3, 1)
        );
    }
    // size + batch > segment_bytes rolls: three batches fit exactly, the fourth rolls.
    assert_eq!(bases(&log), vec![0, 9, 18, 27]);
    assert_eq!(sizes(&log), vec![3 * s, 3 * s, 3 * s, s]);
    assert_eq!(log.size_in_bytes(), 10 * s);
    assert_eq!(log.active_segment_base_offset(), 27);
    assert_eq!(log.log_end_offset(), 30);
    assert_eq!(segment_files(&f.dir), expected_files(&[0, 9, 18, 27]));
    for seg in log.segments() {
        assert_eq!(file_len(seg.log_path()), seg.size());
    }
    assert_values(&read_all(&log), 0, 30, |_| 'v');

    // A segment_bytes that is not a multiple of the batch size: a batch never straddles.
    let g = fixture();
    let mut log = open_new(&g.dir, config_with(|c| c.segment_bytes = 3 * s - 1));
    for _ in 0..5 {
        append(&mut log, 3);
    }
    assert_eq!(bases(&log), vec![0, 6, 12]);
    assert!(log.segments().all(|seg| seg.size() < 3 * s));
}

#[test]
fn explicit_roll_starts_a_segment_at_the_log_end_and_is_idempotent_when_empty() {
    let f = fixture();
    let mut log = open_new(&f.dir, config());
    log.roll(NOW).unwrap(); // empty active segment at the log end: no-op
    assert_eq!(bases(&log), vec![0]);
    append(&mut log, 4);
    log.roll(NOW).unwrap();
    assert_eq!(bases(&log), vec![0, 4]);
    log.roll(NOW).unwrap();
    assert_eq!(bases(&log), vec![0, 4]);
    assert_eq!(sizes(&log), vec![batch_size(4), 0]);
    append(&mut log, 2);
    assert_eq!(sizes(&log), vec![batch_size(4), batch_size(2)]);
    assert_values(&read_all(&log), 0, 6, |_| 'v');
    assert_eq!(segment_files(&f.dir), expected_files(&[0, 4]));
}

#[test]
fn roll_on_segment_ms_uses_record_timestamps_and_jitter() {
    let f = fixture();
    let cfg = config_with(|c| {
        c.segment_ms = 100;
        c.segment_jitter_ms = 10;
    });
    let mut log = open_new(&f.dir, cfg.clone());
    // Roll when (new batch's max timestamp - first batch's max timestamp) > 100 - 10.
    for (ts, want_active) in [
        (1000, 0), // offset 0: starts the clock
        (1050, 0),
        (1090, 0), // exactly 90: no roll
        (1091, 3), // 91 > 90: roll, offset 3 starts a new clock at 1091
        (1000, 3), // older than the clock: never rolls
        (1181, 3), // 90
        (1182, 6), // 91: roll
    ] {
        append_ts(&mut log, 1, ts);
        assert_eq!(
            log.active_segment_base_offset(),
            want_active,
            "after appending ts {ts}"
        );
    }
    assert_eq!(bases(&log), vec![0, 3, 6]);
    // now_ms plays no part while records carry timestamps.
    let first = log.log_end_offset();
    log.append_as_leader(
        &batch_with(first, 1, |_| 1182, Compression::None, 'v'),
        0,
        NOW + 1_000_000,
        false,
    )
    .unwrap();
    assert_eq!(bases(&log), vec![0, 3, 6]);

    // The clock survives a clean reopen: it is read back from the active segment's first batch.
    log.close().unwrap();
    let leo = log.log_end_offset();
    drop(log);
    let (mut log, _) = reopen(&f.dir, cfg.clone(), opts(true, leo, 0));
    append_ts(&mut log, 1, 1272); // 90 after 1182
    assert_eq!(log.active_segment_base_offset(), 6);
    append_ts(&mut log, 1, 1273); // 91
    assert_eq!(bases(&log), vec![0, 3, 6, 9]);
    assert_values(&read_all(&log), 0, 10, |_| 'v');

    // The clock starts at the first batch's *max* timestamp (Kafka's rollingBasedTimestamp).
    let g = fixture();
    let mut log = open_new(&g.dir, cfg);
    log.append_as_leader(
        &batch_with(0, 2, |o| 2000 + 50 * o, Compression::None, 'v'),
        0,
        NOW,
        false,
    )
    .unwrap();
    append_ts(&mut log, 1, 2140); // 2140 - 2050 = 90
    assert_eq!(bases(&log), vec![0]);
    append_ts(&mut log, 1, 2141);
    assert_eq!(bases(&log), vec![0, 3]);
}

#[test]
fn roll_on_full_offset_index() {
    let f = fixture();
    // 24 bytes: 3 offset-index entries, 2 time-index entries. Constant timestamps add only one
    // time-index entry per segment, so the offset index fills first: an entry for every batch
    // but the first makes a segment of 4 batches.
    let mut log = open_new(&f.dir, config_with(|c| c.segment_index_bytes = 24));
    for _ in 0..10 {
        append_ts(&mut log, 2, TS);
    }
    assert_eq!(bases(&log), vec![0, 8, 16]);
    let s = batch_size(2);
    assert_eq!(sizes(&log), vec![4 * s, 4 * s, 2 * s]);
    for base in [0, 8] {
        assert_eq!(file_len(&seg_path(&f.dir, base, ".index")), 3 * 8);
        assert_eq!(file_len(&seg_path(&f.dir, base, ".timeindex")), 12);
        assert_eq!(
            offset_index_file(&seg_path(&f.dir, base, ".index")),
            vec![(3, s as u32), (5, 2 * s as u32), (7, 3 * s as u32)]
        );
        // The only time entry: the max timestamp, first reached by the first batch (offsets 0-1).
        assert_eq!(
            time_index_file(&seg_path(&f.dir, base, ".timeindex")),
            vec![(TS, 1)]
        );
    }
    assert_values(&read_all(&log), 0, 20, |_| 'v');
}

#[test]
fn roll_on_full_time_index() {
    let f = fixture();
    // 24 bytes again, but increasing timestamps: every index point adds a time entry too, so the
    // 2-entry time index fills after the third batch and the fourth rolls.
    let mut log = open_new(&f.dir, config_with(|c| c.segment_index_bytes = 24));
    for _ in 0..7 {
        append(&mut log, 2);
    }
    assert_eq!(bases(&log), vec![0, 6, 12]);
    let s = batch_size(2) as u32;
    for base in [0i64, 6] {
        assert_eq!(file_len(&seg_path(&f.dir, base, ".index")), 2 * 8);
        assert_eq!(file_len(&seg_path(&f.dir, base, ".timeindex")), 2 * 12);
        assert_eq!(
            offset_index_file(&seg_path(&f.dir, base, ".index")),
            vec![(3, s), (5, 2 * s)]
        );
        assert_eq!(
            time_index_file(&seg_path(&f.dir, base, ".timeindex")),
            vec![(TS + base + 3, 3), (TS + base + 5, 5)]
        );
    }
    assert_values(&read_all(&log), 0, 14, |_| 'v');
}

#[test]
fn segment_files_are_named_by_20_digit_base_offsets() {
    let f = fixture();
    let s = batch_size(3);
    let mut log = open_new(&f.dir, config_with(|c| c.segment_bytes = 2 * s));
    assert_eq!(segment_files(&f.dir), expected_files(&[0]));
    assert!(f.dir.join("00000000000000000000.log").is_file());
    assert!(f.dir.join("00000000000000000000.index").is_file());
    assert!(f.dir.join("00000000000000000000.timeindex").is_file());
    for _ in 0..9 {
        append(&mut log, 3);
    }
    assert_eq!(bases(&log), vec![0, 6, 12, 18, 24]);
    assert_eq!(segment_files(&f.dir), expected_files(&[0, 6, 12, 18, 24]));
    assert!(f.dir.join("00000000000000000024.log").is_file());
    assert_eq!(log_file_name(24), "00000000000000000024.log");
    for seg in log.segments() {
        assert_eq!(seg.log_path(), seg_path(&f.dir, seg.base_offset(), ".log"));
    }

    log.truncate_fully_and_start_at(87_654_321, NOW).unwrap();
    assert_eq!(
        segment_files(&f.dir),
        vec![
            "00000000000087654321.index",
            "00000000000087654321.log",
            "00000000000087654321.timeindex"
        ]
    );
    append(&mut log, 3);
    append(&mut log, 3);
    append(&mut log, 3);
    assert_eq!(bases(&log), vec![87_654_321, 87_654_327]);
    assert!(f.dir.join("00000000000087654327.log").is_file());
}

#[test]
fn rolled_segment_indexes_are_trimmed_to_their_entries() {
    let f = fixture();
    let s = batch_size(3);
    let cfg = config_with(|c| c.segment_bytes = 4 * s);
    let mut log = open_new(&f.dir, cfg.clone());
    for _ in 0..10 {
        append(&mut log, 3);
    }
    assert_eq!(bases(&log), vec![0, 12, 24]);
    for base in [0i64, 12] {
        let batches = log_file_batches(&seg_path(&f.dir, base, ".log"));
        assert_eq!(batches.len(), 4);
        // index_interval_bytes = 0: an entry (last offset, position) for every batch but the first.
        let want: Vec<(u32, u32)> = batches[1..]
            .iter()
            .map(|(p, h)| ((h.last_offset() - base) as u32, *p as u32))
            .collect();
        let got = offset_index_file(&seg_path(&f.dir, base, ".index"));
        assert_eq!(got, want);
        assert_eq!(
            file_len(&seg_path(&f.dir, base, ".index")),
            want.len() as u64 * 8
        );
        // Increasing timestamps: one time entry per index point, the last being the max.
        let want_t: Vec<(i64, u32)> = batches[1..]
            .iter()
            .map(|(_, h)| (h.max_timestamp, (h.last_offset() - base) as u32))
            .collect();
        let got_t = time_index_file(&seg_path(&f.dir, base, ".timeindex"));
        assert_eq!(got_t, want_t);
        assert_eq!(
            file_len(&seg_path(&f.dir, base, ".timeindex")),
            want_t.len() as u64 * 12
        );
        assert_eq!(got_t.last().unwrap().0, TS + base + 11);
    }
    // The active segment's indexes stay preallocated to segment.index.bytes (whole entries).
    assert_eq!(file_len(&seg_path(&f.dir, 24, ".index")), 4096);
    assert_eq!(
        file_len(&seg_path(&f.dir, 24, ".timeindex")),
        4096 / 12 * 12
    );

    // A segment with a single batch has no offset-index entry and one (final) time entry.
    log.roll(NOW).unwrap();
    assert_eq!(bases(&log), vec![0, 12, 24, 30]);
    assert_eq!(file_len(&seg_path(&f.dir, 24, ".index")), 8); // batches at 24 and 27: one entry
    append(&mut log, 3);
    log.roll(NOW).unwrap();
    assert_eq!(file_len(&seg_path(&f.dir, 30, ".index")), 0);
    assert_eq!(
        time_index_file(&seg_path(&f.dir, 30, ".timeindex")),
        vec![(TS + 32, 2)]
    );
    // Inactive segments pass their own sanity check.
    let segs: Vec<_> = log.segments().collect();
    for w in segs.windows(2) {
        w[0].sanity_check(w[1].base_offset() - 1).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Reads
// ---------------------------------------------------------------------------------------------

#[test]
fn read_from_every_offset_returns_whole_batches_from_the_one_holding_it() {
    let f = fixture();
    let (log, s) = build_log(&f.dir, 2, 2, |o| TS + o);
    let leo = log.log_end_offset();
    assert_eq!(leo, 24);
    for o in 0..leo {
        let info = log.read(o, u64::MAX, None, false).unwrap();
        // One region per segment from the one holding `o`: the read crosses segment boundaries.
        let seg_base = 9 * (o / 9);
        assert_eq!(
            info.regions.len() as i64,
            3 - o / 9,
            "regions for a read at {o}"
        );
        let batch_base = 3 * (o / 3);
        assert_eq!(info.fetch_offset_metadata.message_offset, o);
        assert_eq!(info.fetch_offset_metadata.segment_base_offset, seg_base);
        assert_eq!(
            info.fetch_offset_metadata.relative_position,
            (batch_base - seg_base) as u64 / 3 * s
        );
        let batches = decode(&fetch_bytes(&info));
        assert!(
            batches[0].base <= o && o <= batches[0].last,
            "read at {o} starts at batch {}",
            batches[0].base
        );
        assert_eq!(batches[0].base, batch_base);
        assert!(batches.iter().all(|b| b.size as u64 == s && b.epoch == 0));
        assert_values(&records(&batches), batch_base, leo, |_| 'v');
    }
}

#[test]
fn read_respects_max_bytes_and_min_one_batch() {
    let f = fixture();
    let (mut log, s) = build_log(&f.dir, 2, 2, |o| TS + o);
    let bases_of = |b: &[BatchInfo]| b.iter().map(|b| b.base).collect::<Vec<_>>();

    // Only whole batches that fit.
    assert_eq!(
        bases_of(&read_batches(&log, 0, 2 * s + s / 2, None, false)),
        vec![0, 3]
    );
    assert_eq!(
        bases_of(&read_batches(&log, 0, 2 * s, None, false)),
        vec![0, 3]
    );
    assert_eq!(
        bases_of(&read_batches(&log, 4, 2 * s - 1, None, false)),
        vec![3]
    );
    // Across a segment boundary, the budget carries over.
    assert_eq!(
        bases_of(&read_batches(&log, 3, 4 * s, None, false)),
        vec![3, 6, 9, 12]
    );
    let info = log.read(3, 4 * s, None, false).unwrap();
    assert_eq!(info.regions.len(), 2);
    assert_eq!(info.size(), 4 * s);
    // Less than a batch: nothing, unless min_one_batch.
    let info = log.read(0, s - 1, None, false).unwrap();
    assert_eq!(info.size(), 0);
    assert!(info.regions.is_empty());
    assert_eq!(bases_of(&read_batches(&log, 0, s - 1, None, true)), vec![0]);
    assert_eq!(bases_of(&read_batches(&log, 10, 0, None, true)), vec![9]);
    // min_one_batch only matters for the first batch.
    assert_eq!(bases_of(&read_batches(&log, 0, s + 1, None, true)), vec![0]);

    // A batch far bigger than max_bytes comes whole with min_one_batch.
    log.update_config(LogConfig {
        segment_bytes: 1 << 20,
        ..log.config().clone()
    })
    .unwrap();
    let big_first = log.log_end_offset();
    let big = batch_with(big_first, 50, |o| TS + o, Compression::None, 'v');
    log.append_as_leader(&big, 0, NOW, false).unwrap();
    assert_eq!(bases(&log), vec![0, 9, 18]);
    let info = log.read(big_first + 7, 100, None, true).unwrap();
    assert_eq!(info.size(), big.len() as u64);
    let got = decode(&fetch_bytes(&info));
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].base, got[0].last), (big_first, big_first + 49));
    assert_eq!(log.read(big_first + 7, 100, None, false).unwrap().size(), 0);
    // A read that fills up before the big batch stops before it, never cutting it.
    let got = read_batches(&log, 18, 2 * s + 100, None, false);
    assert_eq!(bases_of(&got), vec![18, 21]);
}

#[test]
fn read_with_max_offset_excludes_batches_reaching_it() {
    let f = fixture();
    let (log, _s) = build_log(&f.dir, 2, 2, |o| TS + o);
    let last_offsets = |start: i64, hw: i64| -> Vec<i64> {
        read_batches(&log, start, u64::MAX, Some(hw), false)
            .iter()
            .map(|b| b.last)
            .collect()
    };
    // Batches are [0-2] [3-5] [6-8] | [9-11] ... ; a batch is served only if last < max_offset.
    assert_eq!(last_offsets(0, 6), vec![2, 5]);
    assert_eq!(last_offsets(0, 5), vec![2]);
    assert_eq!(last_offsets(0, 3), vec![2]);
    assert_eq!(last_offsets(0, 2), Vec::<i64>::new());
    assert_eq!(last_offsets(0, 0), Vec::<i64>::new());
    assert_eq!(last_offsets(4, 5), Vec::<i64>::new());
    // Across segment boundaries.
    assert_eq!(last_offsets(0, 13), vec![2, 5, 8, 11]);
    assert_eq!(last_offsets(7, 21), vec![8, 11, 14, 17, 20]);
    assert_eq!(last_offsets(9, 9), Vec::<i64>::new());
    // A max_offset past the log end is the log end.
    assert_eq!(last_offsets(15, 1000), vec![17, 20, 23]);
    assert_eq!(last_offsets(15, 24), vec![17, 20, 23]);
    assert_eq!(last_offsets(15, 23), vec![17, 20]);
    // With max_bytes too: the tighter limit wins, min_one_batch does not override max_offset.
    let got = read_batches(&log, 0, 1, Some(6), true);
    assert_eq!(got.iter().map(|b| b.last).collect::<Vec<_>>(), vec![2]);
    assert!(log.read(3, 1, Some(5), true).unwrap().regions.is_empty());
}

#[test]
fn read_out_of_range_and_at_log_end() {
    let f = fixture();
    let (mut log, s) = build_log(&f.dir, 1, 1, |o| TS + o);
    assert_eq!(log.log_end_offset(), 12);
    assert_out_of_range(log.read(13, u64::MAX, None, false), 13, 0, 12);
    assert_out_of_range(log.read(1_000, u64::MAX, None, true), 1_000, 0, 12);
    assert_out_of_range(log.read(-1, u64::MAX, None, false), -1, 0, 12);
    // At the log end: nothing, positioned at the end of the active segment.
    let info = log.read(12, u64::MAX, None, true).unwrap();
    assert!(info.regions.is_empty());
    assert_eq!(info.fetch_offset_metadata.message_offset, 12);
    assert_eq!(info.fetch_offset_metadata.segment_base_offset, 9);
    assert_eq!(info.fetch_offset_metadata.relative_position, s);
    assert_eq!(log.log_end_offset_metadata(), info.fetch_offset_metadata);
    // Below the log start.
    assert!(log.maybe_increment_log_start_offset(4).unwrap());
    assert_out_of_range(log.read(3, u64::MAX, None, false), 3, 4, 12);
    assert_out_of_range(log.read(0, u64::MAX, None, true), 0, 4, 12);
    assert_eq!(read_batches(&log, 4, u64::MAX, None, false)[0].base, 3);
    // An empty log: offset 0 is the log end.
    let g = fixture();
    let log = open_new(&g.dir, config());
    assert!(log.read(0, 100, None, true).unwrap().regions.is_empty());
    assert_out_of_range(log.read(1, 100, None, true), 1, 0, 0);
}

#[test]
fn read_regions_outlive_deleted_segments() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 2, 1, |o| TS + o);
    let info = log.read(0, u64::MAX, None, false).unwrap();
    log.truncate_fully_and_start_at(100, NOW).unwrap();
    assert!(!seg_path(&f.dir, 0, ".log").exists());
    assert_values(&records(&decode(&fetch_bytes(&info))), 0, 21, |_| 'v');
}

// ---------------------------------------------------------------------------------------------
// Offset for timestamp
// ---------------------------------------------------------------------------------------------

#[test]
fn offset_for_timestamp_special_values() {
    let f = fixture();
    // The batch holding offset 10 is a byte bigger (its timestamp delta needs two bytes).
    let mut log = open_new(
        &f.dir,
        config_with(|c| c.segment_bytes = 3 * batch_size(3) + 1),
    );
    // An empty log.
    let earliest = log
        .fetch_offset_by_timestamp(EARLIEST_TIMESTAMP)
        .unwrap()
        .unwrap();
    assert_eq!(
        (earliest.timestamp, earliest.offset, earliest.leader_epoch),
        (-1, 0, None)
    );
    let latest = log
        .fetch_offset_by_timestamp(LATEST_TIMESTAMP)
        .unwrap()
        .unwrap();
    assert_eq!(
        (latest.timestamp, latest.offset, latest.leader_epoch),
        (-1, 0, None)
    );
    assert_eq!(log.fetch_offset_by_timestamp(MAX_TIMESTAMP).unwrap(), None);
    assert_eq!(log.fetch_offset_by_timestamp(0).unwrap(), None);

    // Timestamps by offset: the max (5000) is at offset 10, in the second segment.
    let ts_of = |o: i64| if o == 10 { 5000 } else { 1000 + o };
    for k in 0..6 {
        let epoch = if k < 4 { 2 } else { 4 };
        log.append_as_leader(
            &batch_with(3 * k, 3, ts_of, Compression::None, 'v'),
            epoch,
            NOW,
            false,
        )
        .unwrap();
    }
    assert_eq!(bases(&log), vec![0, 9]);
    let earliest = log
        .fetch_offset_by_timestamp(EARLIEST_TIMESTAMP)
        .unwrap()
        .unwrap();
    assert_eq!(
        (earliest.timestamp, earliest.offset, earliest.leader_epoch),
        (-1, 0, Some(2))
    );
    let latest = log
        .fetch_offset_by_timestamp(LATEST_TIMESTAMP)
        .unwrap()
        .unwrap();
    assert_eq!(
        (latest.timestamp, latest.offset, latest.leader_epoch),
        (-1, 18, Some(4))
    );
    let max = log
        .fetch_offset_by_timestamp(MAX_TIMESTAMP)
        .unwrap()
        .unwrap();
    assert_eq!(
        (max.timestamp, max.offset, max.leader_epoch),
        (5000, 10, Some(2))
    );
    // EARLIEST follows the log start offset.
    log.maybe_increment_log_start_offset(13).unwrap();
    let earliest = log
        .fetch_offset_by_timestamp(EARLIEST_TIMESTAMP)
        .unwrap()
        .unwrap();
    assert_eq!((earliest.offset, earliest.leader_epoch), (13, Some(4)));
    // Other negative timestamps are not lookups.
    assert!(matches!(
        log.fetch_offset_by_timestamp(-4),
        Err(Error::InvalidRequest(_))
    ));
    assert!(matches!(
        log.fetch_offset_by_timestamp(i64::MIN),
        Err(Error::InvalidRequest(_))
    ));
}

#[test]
fn offset_for_timestamp_search_across_segments_and_zstd_batches() {
    let f = fixture();
    // 40 records in zstd batches of 5, record o timestamped 1000 + 10 * o.
    let ts_of = |o: i64| 1000 + 10 * o;
    let data: Vec<Vec<u8>> = (0..8)
        .map(|k| batch_with(5 * k, 5, ts_of, Compression::Zstd, 'v'))
        .collect();
    let max = data.iter().map(|d| d.len()).max().unwrap() as u64;
    let mut log = open_new(&f.dir, config_with(|c| c.segment_bytes = 2 * max + 1));
    for d in &data {
        log.append_as_leader(d, 7, NOW, false).unwrap();
    }
    assert!(
        log.segment_count() >= 3,
        "expected several segments, got {:?}",
        bases(&log)
    );
    assert!(log.segments().all(|s| s.size() > 0));
    let check = |log: &Log| {
        for t in 0..=1400 {
            let got = log.fetch_offset_by_timestamp(t).unwrap();
            let want_offset = if t <= 1000 { 0 } else { (t - 1000 + 9) / 10 };
            if want_offset >= 40 {
                assert_eq!(got, None, "lookup of {t}");
            } else {
                let got = got.unwrap_or_else(|| panic!("lookup of {t} found nothing"));
                assert_eq!(
                    (got.offset, got.timestamp, got.leader_epoch),
                    (want_offset, ts_of(want_offset), Some(7)),
                    "lookup of {t}"
                );
            }
        }
    };
    check(&log);
    // The same after a clean reopen (timestamps come back from the time indexes).
    log.close().unwrap();
    let leo = log.log_end_offset();
    let cfg = log.config().clone();
    drop(log);
    let (log, _) = reopen(&f.dir, cfg, opts(true, leo, 0));
    check(&log);
    let max_ts = log
        .fetch_offset_by_timestamp(MAX_TIMESTAMP)
        .unwrap()
        .unwrap();
    assert_eq!((max_ts.offset, max_ts.timestamp), (39, 1390));
}

#[test]
fn offset_for_timestamp_with_out_of_order_timestamps() {
    let f = fixture();
    // Offsets 0..8, two records per batch, two batches per segment (big timestamp deltas make
    // three of the batches a byte bigger).
    let mut log = open_new(
        &f.dir,
        config_with(|c| c.segment_bytes = 2 * batch_size(2) + 2),
    );
    let ts = [100, 400, 200, 300, 500, 150, 450, 460];
    for k in 0..4 {
        log.append_as_leader(
            &batch_with(2 * k, 2, |o| ts[o as usize], Compression::None, 'v'),
            0,
            NOW,
            false,
        )
        .unwrap();
    }
    assert_eq!(bases(&log), vec![0, 4]);
    // The first offset whose timestamp is >= the target.
    for (target, want) in [
        (0, Some(0)),
        (100, Some(0)),
        (101, Some(1)),
        (250, Some(1)),
        (400, Some(1)),
        (401, Some(4)),
        (455, Some(4)),
        (500, Some(4)),
        (501, None),
    ] {
        let got = log
            .fetch_offset_by_timestamp(target)
            .unwrap()
            .map(|t| (t.offset, t.timestamp));
        assert_eq!(
            got,
            want.map(|o: i64| (o, ts[o as usize])),
            "lookup of {target}"
        );
    }
    let max = log
        .fetch_offset_by_timestamp(MAX_TIMESTAMP)
        .unwrap()
        .unwrap();
    assert_eq!((max.offset, max.timestamp), (4, 500));
}

#[test]

fn offset_for_max_timestamp_ties_resolve_to_the_earliest_offset() {
    let f = fixture();
    let mut log = open_new(&f.dir, config_with(|c| c.segment_bytes = batch_size(2)));
    // One batch per segment, all with the same max timestamp.
    for _ in 0..3 {
        append_ts(&mut log, 2, 777);
    }
    assert_eq!(bases(&log), vec![0, 2, 4]);
    // Within one segment the first record with the max timestamp is returned (offset 0 of 0-1);
    // across segments Kafka (`segments.maxBy(_.maxTimestampSoFar)`) also keeps the first.
    let max = log
        .fetch_offset_by_timestamp(MAX_TIMESTAMP)
        .unwrap()
        .unwrap();
    assert_eq!((max.offset, max.timestamp), (0, 777));
}

// ---------------------------------------------------------------------------------------------
// Retention
// ---------------------------------------------------------------------------------------------

#[test]
fn retention_by_time_deletes_expired_prefix_and_advances_log_start() {
    let f = fixture();
    // Segments (9 offsets each): two old ones, two recent ones, an active one.
    let ts_of = |o: i64| match o / 9 {
        0 => NOW - 10_000,
        1 => NOW - 9_000,
        2 => NOW - 100,
        3 => NOW - 8_000, // old again, but behind a recent segment
        _ => NOW - 50,
    };
    let (mut log, _s) = build_log(&f.dir, 4, 1, ts_of);
    log.update_config(LogConfig {
        retention_ms: 1_000,
        ..log.config().clone()
    })
    .unwrap();
    assert_eq!(bases(&log), vec![0, 9, 18, 27, 36]);
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 2);
    assert_eq!(bases(&log), vec![18, 27, 36]);
    assert_eq!(log.log_start_offset(), 18);
    assert!(log.recovery_point() >= 18);
    assert_eq!(segment_files(&f.dir), expected_files(&[18, 27, 36]));
    assert_out_of_range(log.read(17, u64::MAX, None, false), 17, 18, 39);
    assert_values(&read_all(&log), 18, 39, |_| 'v');
    assert_eq!(
        log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP)
            .unwrap()
            .unwrap()
            .offset,
        18
    );
    assert_eq!(
        log.epoch_cache().entries(),
        &[EpochEntry {
            epoch: 0,
            start_offset: 18
        }]
    );
    // Nothing more is expired.
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 0);
    // The boundary: a segment goes when now - its newest timestamp > retention.ms, not ==.
    assert_eq!(log.delete_old_segments(NOW - 100 + 1_000, None).unwrap(), 0);
    assert_eq!(log.delete_old_segments(NOW - 100 + 1_001, None).unwrap(), 2);
    assert_eq!(bases(&log), vec![36]);
    assert_eq!(log.log_start_offset(), 36);
}

#[test]
fn retention_by_time_of_everything_keeps_an_empty_active_segment() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 2, 2, |_| NOW - 100_000);
    log.update_config(LogConfig {
        retention_ms: 1_000,
        ..log.config().clone()
    })
    .unwrap();
    let leo = log.log_end_offset();
    assert_eq!(leo, 24);
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 3);
    // The log always has a segment: a fresh, empty one at the log end.
    assert_eq!(bases(&log), vec![leo]);
    assert_eq!(sizes(&log), vec![0]);
    assert_eq!(log.segment_count(), 1);
    assert_eq!(log.log_start_offset(), leo);
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(segment_files(&f.dir), expected_files(&[leo]));
    assert!(log
        .read(leo, u64::MAX, None, true)
        .unwrap()
        .regions
        .is_empty());
    assert_out_of_range(log.read(leo - 1, u64::MAX, None, false), leo - 1, leo, leo);
    assert_eq!(
        log.epoch_cache().entries(),
        &[EpochEntry {
            epoch: 0,
            start_offset: leo
        }]
    );
    // The empty active segment is never deleted.
    assert_eq!(log.delete_old_segments(NOW + 10_000_000, None).unwrap(), 0);
    assert_eq!(bases(&log), vec![leo]);
    // Appends carry on from the old log end.
    let info = append(&mut log, 3);
    assert_eq!(info.first_offset, leo);
    assert_values(&read_all(&log), leo, leo + 3, |_| 'v');
}

#[test]
fn retention_by_size() {
    let f = fixture();
    let (mut log, s) = build_log(&f.dir, 4, 1, |o| TS + o);
    assert_eq!(sizes(&log), vec![3 * s, 3 * s, 3 * s, 3 * s, s]);
    // 13s in total; keep at most 7s: drop segments while the rest still holds >= 7s.
    log.update_config(LogConfig {
        retention_bytes: (7 * s) as i64,
        ..log.config().clone()
    })
    .unwrap();
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 2);
    assert_eq!(bases(&log), vec![18, 27, 36]);
    assert_eq!(log.size_in_bytes(), 7 * s);
    assert_eq!(log.log_start_offset(), 18);
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 0);
    // Kafka's rule: a segment goes only if the rest still holds retention.bytes.
    log.update_config(LogConfig {
        retention_bytes: (4 * s + 1) as i64,
        ..log.config().clone()
    })
    .unwrap();
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 0);
    log.update_config(LogConfig {
        retention_bytes: (4 * s) as i64,
        ..log.config().clone()
    })
    .unwrap();
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 1);
    assert_eq!(log.size_in_bytes(), 4 * s);
    assert_eq!(bases(&log), vec![27, 36]);
    assert_eq!(log.log_start_offset(), 27);
    assert_values(&read_all(&log), 27, 39, |_| 'v');
    // retention.bytes = 0 deletes everything, active segment included, and leaves an empty one.
    log.update_config(LogConfig {
        retention_bytes: 0,
        ..log.config().clone()
    })
    .unwrap();
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 2);
    assert_eq!(bases(&log), vec![39]);
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.size_in_bytes()
        ),
        (39, 39, 0)
    );
}

#[test]
fn retention_only_deletes_segments_below_the_high_watermark() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 4, 1, |_| NOW - 100_000);
    log.update_config(LogConfig {
        retention_ms: 1_000,
        ..log.config().clone()
    })
    .unwrap();
    // Segments [0,9) [9,18) [18,27) [27,36) [36,39): all expired.
    assert_eq!(log.delete_old_segments(NOW, Some(0)).unwrap(), 0);
    assert_eq!(log.delete_old_segments(NOW, Some(8)).unwrap(), 0);
    assert_eq!(bases(&log), vec![0, 9, 18, 27, 36]);
    assert_eq!(log.delete_old_segments(NOW, Some(9)).unwrap(), 1);
    assert_eq!(log.log_start_offset(), 9);
    assert_eq!(log.delete_old_segments(NOW, Some(26)).unwrap(), 1);
    assert_eq!(bases(&log), vec![18, 27, 36]);
    assert_eq!(log.log_start_offset(), 18);
    // The active segment is not below a high watermark inside it.
    assert_eq!(log.delete_old_segments(NOW, Some(38)).unwrap(), 2);
    assert_eq!(bases(&log), vec![36]);
    assert_eq!(log.log_start_offset(), 36);
    assert_values(&read_all(&log), 36, 39, |_| 'v');
    // A high watermark past the log end is the log end.
    assert_eq!(log.delete_old_segments(NOW, Some(1_000)).unwrap(), 1);
    assert_eq!(bases(&log), vec![39]);
    assert_eq!(log.log_start_offset(), 39);
}

#[test]
fn retention_deletes_segments_wholly_below_the_log_start_offset() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 3, 1, |o| TS + o);
    assert!(log.maybe_increment_log_start_offset(20).unwrap());
    // Nothing is deleted until retention runs.
    assert_eq!(bases(&log), vec![0, 9, 18, 27]);
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 2);
    assert_eq!(bases(&log), vec![18, 27]);
    // The log start stays where it was raised to, inside the first remaining segment.
    assert_eq!(log.log_start_offset(), 20);
    assert_out_of_range(log.read(19, u64::MAX, None, false), 19, 20, 30);
    assert_eq!(read_batches(&log, 20, u64::MAX, None, false)[0].base, 18);
    // Raised to the exact base of a segment: the one before goes.
    assert!(log.maybe_increment_log_start_offset(27).unwrap());
    assert_eq!(log.delete_old_segments(NOW, None).unwrap(), 1);
    assert_eq!(bases(&log), vec![27]);
    assert_eq!(log.log_start_offset(), 27);
}

// ---------------------------------------------------------------------------------------------
// Truncation and the log start offset
// ---------------------------------------------------------------------------------------------

#[test]
fn truncate_to_mid_log_across_segments_then_append_again() {
    let f = fixture();
    let (mut log, s) = build_log(&f.dir, 4, 2, |o| TS + o);
    assert_eq!(log.log_end_offset(), 42);
    assert!(!log.truncate_to(42, NOW).unwrap());
    assert!(!log.truncate_to(100, NOW).unwrap());
    assert!(matches!(
        log.truncate_to(-1, NOW),
        Err(Error::InvalidRequest(_))
    ));
    // 13 is inside batch [12-14] of segment [9,18): that batch and everything after goes.
    assert!(log.truncate_to(13, NOW).unwrap());
    assert_eq!(log.log_end_offset(), 12);
    assert_eq!(bases(&log), vec![0, 9]);
    assert_eq!(sizes(&log), vec![3 * s, s]);
    assert_eq!(log.active_segment_base_offset(), 9);
    assert_eq!(segment_files(&f.dir), expected_files(&[0, 9]));
    assert_eq!(file_len(&seg_path(&f.dir, 9, ".log")), s);
    assert!(log.recovery_point() <= 12);
    assert_values(&read_all(&log), 0, 12, |_| 'v');
    assert_eq!(log.fetch_offset_by_timestamp(TS + 12).unwrap(), None);
    assert_eq!(
        log.fetch_offset_by_timestamp(MAX_TIMESTAMP)
            .unwrap()
            .unwrap()
            .offset,
        11
    );

    // Append again, with new values; the segment fills up and rolls as before.
    for _ in 0..5 {
        let first = log.log_end_offset();
        log.append_as_leader(
            &batch_with(first, 3, |o| TS + o, Compression::None, 'w'),
            0,
            NOW,
            false,
        )
        .unwrap();
    }
    assert_eq!(log.log_end_offset(), 27);
    assert_eq!(bases(&log), vec![0, 9, 18]);
    let tag = |o: i64| if o < 12 { 'v' } else { 'w' };
    assert_values(&read_all(&log), 0, 27, tag);
    for o in 0..27 {
        assert_eq!(
            read_batches(&log, o, u64::MAX, None, false)[0].base,
            3 * (o / 3)
        );
    }
    let ts = log.fetch_offset_by_timestamp(TS + 13).unwrap().unwrap();
    assert_eq!((ts.offset, ts.timestamp), (13, TS + 13));

    // Truncating at a segment's base offset leaves that segment empty and active.
    assert!(log.truncate_to(18, NOW).unwrap());
    assert_eq!(bases(&log), vec![0, 9, 18]);
    assert_eq!(sizes(&log), vec![3 * s, 3 * s, 0]);
    assert_eq!(log.log_end_offset(), 18);
    append(&mut log, 3);
    assert_values(&read_all(&log), 0, 21, |o| {
        if (12..18).contains(&o) {
            'w'
        } else {
            'v'
        }
    });

    // And it all survives a clean reopen.
    log.close().unwrap();
    let cfg = log.config().clone();
    drop(log);
    let (log, _) = reopen(&f.dir, cfg, opts(true, 21, 0));
    assert_eq!(log.log_end_offset(), 21);
    assert_values(&read_all(&log), 0, 21, |o| {
        if (12..18).contains(&o) {
            'w'
        } else {
            'v'
        }
    });
}

#[test]
fn truncate_fully_and_start_at() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 2, 1, |o| TS + o);
    assert!(!log.epoch_cache().entries().is_empty());
    log.truncate_fully_and_start_at(1_000, NOW).unwrap();
    assert_eq!(bases(&log), vec![1_000]);
    assert_eq!(sizes(&log), vec![0]);
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.recovery_point()
        ),
        (1_000, 1_000, 1_000)
    );
    assert_eq!(segment_files(&f.dir), expected_files(&[1_000]));
    assert!(log.epoch_cache().entries().is_empty());
    assert_eq!(
        fs::read_to_string(f.dir.join(CHECKPOINT)).unwrap(),
        "0\n0\n"
    );
    assert_out_of_range(log.read(0, u64::MAX, None, false), 0, 1_000, 1_000);
    assert_out_of_range(log.read(999, u64::MAX, None, false), 999, 1_000, 1_000);
    assert!(log
        .read(1_000, u64::MAX, None, false)
        .unwrap()
        .regions
        .is_empty());
    assert_eq!(log.fetch_offset_by_timestamp(0).unwrap(), None);
    let first = log.log_end_offset();
    let info = log
        .append_as_leader(&batch(first, 3), 5, NOW, false)
        .unwrap();
    assert_eq!((info.first_offset, info.last_offset), (1_000, 1_002));
    assert_values(&read_all(&log), 1_000, 1_003, |_| 'v');
    assert_eq!(
        log.epoch_cache().entries(),
        &[EpochEntry {
            epoch: 5,
            start_offset: 1_000
        }]
    );
    // Restarting below the current log start is allowed too (a follower resetting).
    log.truncate_fully_and_start_at(7, NOW).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (7, 7));
    assert_eq!(segment_files(&f.dir), expected_files(&[7]));
    assert!(matches!(
        log.truncate_fully_and_start_at(-1, NOW),
        Err(Error::InvalidRequest(_))
    ));
    // Truncating below the log start restarts the log there.
    append(&mut log, 3);
    log.maybe_increment_log_start_offset(9).unwrap();
    assert!(log.truncate_to(8, NOW).unwrap());
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (8, 8));
    assert_eq!(bases(&log), vec![8]);
}

#[test]
fn maybe_increment_log_start_offset_then_read_below_is_out_of_range() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 2, 1, |o| TS + o);
    assert!(log.maybe_increment_log_start_offset(10).unwrap());
    assert_eq!(log.log_start_offset(), 10);
    assert_out_of_range(log.read(9, u64::MAX, None, false), 9, 10, 21);
    assert_out_of_range(log.read(0, u64::MAX, None, true), 0, 10, 21);
    // At the log start: the batch holding it, which may start below it.
    let got = read_batches(&log, 10, u64::MAX, None, false);
    assert_eq!(got[0].base, 9);
    // Never moves back; never past the log end.
    assert!(!log.maybe_increment_log_start_offset(5).unwrap());
    assert!(!log.maybe_increment_log_start_offset(10).unwrap());
    assert_out_of_range(log.maybe_increment_log_start_offset(22), 22, 10, 21);
    assert_eq!(log.log_start_offset(), 10);
    // Up to the log end is fine: the log is then logically empty.
    assert!(log.maybe_increment_log_start_offset(21).unwrap());
    assert!(log
        .read(21, u64::MAX, None, true)
        .unwrap()
        .regions
        .is_empty());
    assert_out_of_range(log.read(20, u64::MAX, None, true), 20, 21, 21);
    // Segments are still all there until retention runs.
    assert_eq!(bases(&log), vec![0, 9, 18]);
}

// ---------------------------------------------------------------------------------------------
// Leader epoch cache
// ---------------------------------------------------------------------------------------------

#[test]
fn leader_epoch_cache_through_the_log() {
    let f = fixture();
    let cfg = config_with(|c| c.segment_bytes = 2 * batch_size(3));
    let mut log = open_new(&f.dir, cfg.clone());
    for epoch in [1, 1, 3] {
        let first = log.log_end_offset();
        log.append_as_leader(&batch(first, 3), epoch, NOW, false)
            .unwrap();
    }
    let e = |epoch, start_offset| EpochEntry {
        epoch,
        start_offset,
    };
    assert_eq!(log.epoch_cache().entries(), &[e(1, 0), e(3, 6)]);
    assert_eq!(
        fs::read_to_string(f.dir.join(CHECKPOINT)).unwrap(),
        "0\n2\n1 0\n3 6\n"
    );
    // The epoch is stamped into every batch.
    let got = read_batches(&log, 0, u64::MAX, None, false);
    assert_eq!(
        got.iter().map(|b| b.epoch).collect::<Vec<_>>(),
        vec![1, 1, 3]
    );
    assert_eq!(
        log.epoch_cache().end_offset_for(1, log.log_end_offset()),
        (1, 6)
    );
    assert_eq!(
        log.epoch_cache().end_offset_for(3, log.log_end_offset()),
        (3, 9)
    );
    assert_eq!(log.epoch_cache().epoch_for_offset(5), Some(1));
    // An older epoch is stamped but does not enter the cache.
    let first = log.log_end_offset();
    log.append_as_leader(&batch(first, 3), 2, NOW, false)
        .unwrap();
    assert_eq!(log.epoch_cache().entries(), &[e(1, 0), e(3, 6)]);
    let first = log.log_end_offset();
    log.append_as_leader(&batch(first, 3), 4, NOW, false)
        .unwrap();
    assert_eq!(log.epoch_cache().entries(), &[e(1, 0), e(3, 6), e(4, 12)]);

    // Truncation inside epoch 3 keeps it; truncation at its start removes it.
    assert!(log.truncate_to(10, NOW).unwrap());
    assert_eq!(log.log_end_offset(), 9);
    assert_eq!(log.epoch_cache().entries(), &[e(1, 0), e(3, 6)]);
    assert!(log.truncate_to(6, NOW).unwrap());
    assert_eq!(log.epoch_cache().entries(), &[e(1, 0)]);
    assert_eq!(
        fs::read_to_string(f.dir.join(CHECKPOINT)).unwrap(),
        "0\n1\n1 0\n"
    );
    let first = log.log_end_offset();
    log.append_as_leader(&batch(first, 3), 5, NOW, false)
        .unwrap();
    assert_eq!(log.epoch_cache().entries(), &[e(1, 0), e(5, 6)]);
    assert_eq!(
        fs::read_to_string(f.dir.join(CHECKPOINT)).unwrap(),
        "0\n2\n1 0\n5 6\n"
    );

    // Reopening (clean, and unclean) keeps it.
    log.close().unwrap();
    let leo = log.log_end_offset();
    drop(log);
    let (log, _) = reopen(&f.dir, cfg.clone(), opts(true, leo, 0));
    assert_eq!(log.epoch_cache().entries(), &[e(1, 0), e(5, 6)]);
    drop(log);
    let (log, _) = reopen(&f.dir, cfg, opts(false, 0, 0));
    assert_eq!(log.epoch_cache().entries(), &[e(1, 0), e(5, 6)]);
    assert_eq!(
        fs::read_to_string(f.dir.join(CHECKPOINT)).unwrap(),
        "0\n2\n1 0\n5 6\n"
    );
}

#[test]
fn malformed_epoch_checkpoint_is_rebuilt_from_the_batches() {
    let f = fixture();
    let cfg = config_with(|c| c.segment_bytes = 2 * batch_size(3));
    let mut log = open_new(&f.dir, cfg.clone());
    for epoch in [1, 1, 3, 3, 6] {
        let first = log.log_end_offset();
        log.append_as_leader(&batch(first, 3), epoch, NOW, false)
            .unwrap();
    }
    log.close().unwrap();
    drop(log);
    fs::write(f.dir.join(CHECKPOINT), "0\n2\n3 0\n1 6\n").unwrap();
    let (log, _) = reopen(&f.dir, cfg, opts(true, 15, 0));
    let e = |epoch, start_offset| EpochEntry {
        epoch,
        start_offset,
    };
    assert_eq!(log.epoch_cache().entries(), &[e(1, 0), e(3, 6), e(6, 12)]);
    assert_eq!(
        fs::read_to_string(f.dir.join(CHECKPOINT)).unwrap(),
        "0\n3\n1 0\n3 6\n6 12\n"
    );
}

// ---------------------------------------------------------------------------------------------
// Reopening and recovery
// ---------------------------------------------------------------------------------------------

#[test]
fn clean_reopen_keeps_everything_and_recovers_nothing() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 3, 2, |o| TS + o);
    log.maybe_increment_log_start_offset(4).unwrap();
    log.close().unwrap();
    let before = snapshot(&log);
    let cfg = log.config().clone();
    let leo = log.log_end_offset();
    let mut all = Vec::new();
    for seg in log.segments() {
        all.push(fs::read(seg.log_path()).unwrap());
    }
    drop(log);

    let (mut log, info) = reopen(&f.dir, cfg, opts(true, leo, 4));
    assert_eq!(info.recovered_segments, 0);
    assert_eq!(info.truncated_bytes, 0);
    assert_eq!(info.deleted_segments, 0);
    assert_eq!(snapshot(&log), before);
    assert_eq!(log.recovery_point(), leo);
    let again: Vec<Vec<u8>> = log
        .segments()
        .map(|s| fs::read(s.log_path()).unwrap())
        .collect();
    assert_eq!(again, all);
    for o in 4..leo {
        assert_eq!(
            read_batches(&log, o, u64::MAX, None, false)[0].base,
            3 * (o / 3)
        );
    }
    assert_eq!(
        log.fetch_offset_by_timestamp(TS + 20)
            .unwrap()
            .unwrap()
            .offset,
        20
    );
    // It carries on where it stopped.
    assert_eq!(append(&mut log, 3).first_offset, leo);
    assert_values(&read_all(&log), 3, leo + 3, |_| 'v');
}

#[test]
fn clean_reopen_after_close_rebuilds_no_index() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 2, 2, |o| TS + o);
    log.close().unwrap();
    let cfg = log.config().clone();
    let leo = log.log_end_offset();
    drop(log);
    let (_log, info) = reopen(&f.dir, cfg, opts(true, leo, 0));
    assert_eq!(info, RecoveryInfo::default());
}

#[test]
fn unclean_reopen_rereads_every_segment() {
    let f = fixture();
    let (log, _s) = build_log(&f.dir, 3, 2, |o| TS + o);
    let before = snapshot(&log);
    let (cfg, leo, total, n) = (
        log.config().clone(),
        log.log_end_offset(),
        log.size_in_bytes(),
        log.segment_count(),
    );
    drop(log); // no close(): a crash

    let (mut log, info) = reopen(&f.dir, cfg.clone(), opts(false, 0, 0));
    assert_eq!(info.recovered_segments, n);
    assert_eq!(info.recovered_bytes, total);
    assert_eq!(info.truncated_bytes, 0);
    assert_eq!(info.deleted_segments, 0);
    assert_eq!(snapshot(&log), before);
    assert!(log.recovery_point() <= leo);
    for o in 0..leo {
        assert_eq!(
            read_batches(&log, o, u64::MAX, None, false)[0].base,
            3 * (o / 3)
        );
    }
    for o in 0..leo {
        assert_eq!(
            log.fetch_offset_by_timestamp(TS + o)
                .unwrap()
                .unwrap()
                .offset,
            o
        );
    }
    // Rebuilt indexes of inactive segments are trimmed and right.
    let batches = log_file_batches(&seg_path(&f.dir, 9, ".log"));
    let want: Vec<(u32, u32)> = batches[1..]
        .iter()
        .map(|(p, h)| ((h.last_offset() - 9) as u32, *p as u32))
        .collect();
    assert_eq!(offset_index_file(&seg_path(&f.dir, 9, ".index")), want);
    assert_eq!(append(&mut log, 3).first_offset, leo);
    assert!(log.recovery_point() <= leo);
    log.flush(leo + 3).unwrap();
    assert_eq!(log.recovery_point(), leo + 3);

    // With a recovery point only the segments from the one holding it are re-read.
    assert_eq!(bases(&log), vec![0, 9, 18, 27]);
    drop(log);
    let (log, info) = reopen(&f.dir, cfg, opts(false, 20, 0));
    assert_eq!(bases(&log), vec![0, 9, 18, 27]);
    assert_eq!(info.recovered_segments, 2);
    assert_eq!(info.truncated_bytes, 0);
    assert_values(&read_all(&log), 0, leo + 3, |_| 'v');
}

#[test]
fn torn_tail_is_truncated_to_the_last_whole_batch() {
    let f = fixture();
    let (log, s) = build_log(&f.dir, 2, 3, |o| TS + o);
    let cfg = log.config().clone();
    assert_eq!(log.log_end_offset(), 27);
    drop(log);
    // Cut the active segment in the middle of its last batch.
    let path = seg_path(&f.dir, 18, ".log");
    let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(3 * s - s / 2).unwrap();
    drop(file);

    let (mut log, info) = reopen(&f.dir, cfg.clone(), opts(false, 0, 0));
    assert_eq!(info.truncated_bytes, s - s / 2);
    assert_eq!(info.deleted_segments, 0);
    assert_eq!(log.log_end_offset(), 24);
    assert_eq!(file_len(&path), 2 * s);
    assert_eq!(sizes(&log), vec![3 * s, 3 * s, 2 * s]);
    assert_values(&read_all(&log), 0, 24, |_| 'v');
    let first = log.log_end_offset();
    log.append_as_leader(
        &batch_with(first, 3, |o| TS + o, Compression::None, 'w'),
        0,
        NOW,
        false,
    )
    .unwrap();
    assert_values(&read_all(&log), 0, 27, |o| if o < 24 { 'v' } else { 'w' });

    // Cut inside the header of the only batch of a segment: the segment is left empty.
    let leo = log.log_end_offset();
    log.roll(NOW).unwrap();
    append(&mut log, 3);
    drop(log);
    let path = seg_path(&f.dir, leo, ".log");
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(30)
        .unwrap();
    let (log, info) = reopen(&f.dir, cfg, opts(false, 0, 0));
    assert_eq!(info.truncated_bytes, 30);
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(bases(&log), vec![0, 9, 18, leo]);
    assert_eq!(file_len(&path), 0);
}

#[test]
fn garbage_after_the_last_batch_is_cut() {
    let f = fixture();
    let (log, s) = build_log(&f.dir, 1, 2, |o| TS + o);
    let cfg = log.config().clone();
    drop(log);
    let path = seg_path(&f.dir, 9, ".log");
    for garbage in [vec![0xABu8; 100], vec![0u8; 70], vec![0x7Fu8; 5]] {
        let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all_at(&garbage, 2 * s).unwrap();
        drop(file);
        assert_eq!(file_len(&path), 2 * s + garbage.len() as u64);
        let (log, info) = reopen(&f.dir, cfg.clone(), opts(false, 0, 0));
        assert_eq!(info.truncated_bytes, garbage.len() as u64);
        assert_eq!(log.log_end_offset(), 15);
        assert_eq!(file_len(&path), 2 * s);
        assert_values(&read_all(&log), 0, 15, |_| 'v');
    }
}

#[test]
fn flipped_byte_in_middle_batch_of_active_segment_cuts_it_and_everything_after() {
    let f = fixture();
    let (log, s) = build_log(&f.dir, 1, 3, |o| TS + o);
    let cfg = log.config().clone();
    drop(log);
    let path = seg_path(&f.dir, 9, ".log");
    let batches = log_file_batches(&path);
    assert_eq!(batches.len(), 3);
    // A byte inside the records of the middle batch (offsets 12-14).
    let at = batches[1].0 + 61 + 5;
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let mut b = [0u8; 1];
    file.read_exact_at(&mut b, at).unwrap();
    file.write_all_at(&[b[0] ^ 0x10], at).unwrap();
    drop(file);

    let (mut log, info) = reopen(&f.dir, cfg, opts(false, 0, 0));
    assert_eq!(info.truncated_bytes, 2 * s);
    assert_eq!(info.deleted_segments, 0);
    assert_eq!(log.log_end_offset(), 12);
    assert_eq!(sizes(&log), vec![3 * s, s]);
    assert_values(&read_all(&log), 0, 12, |_| 'v');
    assert_eq!(append(&mut log, 3).first_offset, 12);
    assert_values(&read_all(&log), 0, 15, |_| 'v');
}

#[test]
fn corrupt_batch_in_an_older_segment_cuts_it_and_deletes_later_segments() {
    let f = fixture();
    let cfg = config_with(|c| c.segment_bytes = 3 * batch_size(3));
    let mut log = open_new(&f.dir, cfg.clone());
    for k in 0..11 {
        let first = log.log_end_offset();
        log.append_as_leader(&batch(first, 3), k / 3, NOW, false)
            .unwrap();
    }
    assert_eq!(bases(&log), vec![0, 9, 18, 27]);
    drop(log);
    let path = seg_path(&f.dir, 9, ".log");
    let batches = log_file_batches(&path);
    let at = batches[1].0 + 70;
    let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(&[0xEE, 0xEE], at).unwrap();
    drop(file);

    let (log, info) = reopen(&f.dir, cfg, opts(false, 0, 0));
    assert_eq!(info.deleted_segments, 2);
    assert_eq!(info.recovered_segments, 2);
    assert_eq!(log.log_end_offset(), 12);
    assert_eq!(bases(&log), vec![0, 9]);
    assert_eq!(segment_files(&f.dir), expected_files(&[0, 9]));
    assert_values(&read_all(&log), 0, 12, |_| 'v');
    // Epochs of the lost batches are gone too.
    let e = |epoch, start_offset| EpochEntry {
        epoch,
        start_offset,
    };
    assert_eq!(log.epoch_cache().entries(), &[e(0, 0), e(1, 9)]);
}

/// Close a `build_log(2, 2)` log, delete the given index files, reopen it (clean when
/// `clean`, else from recovery point 0) and check that every deleted file is rebuilt exactly
/// and that reads and timestamp lookups work.
fn check_deleted_indexes_rebuilt(files: &[(i64, &str)], clean: bool) {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 2, 2, |o| TS + o);
    log.close().unwrap();
    let cfg = log.config().clone();
    let leo = log.log_end_offset();
    drop(log);
    let mut saved = Vec::new();
    for &(base, suffix) in files {
        let p = seg_path(&f.dir, base, suffix);
        let bytes = fs::read(&p).unwrap();
        fs::remove_file(&p).unwrap();
        saved.push((p, bytes));
    }

    let (log, info) = reopen(&f.dir, cfg, opts(clean, if clean { leo } else { 0 }, 0));
    if clean {
        assert!(info.rebuilt_indexes >= 1, "{info:?}");
        assert_eq!(info.recovered_segments, 0);
    }
    assert_eq!(info.truncated_bytes, 0);
    assert_eq!(info.deleted_segments, 0);
    for (p, bytes) in &saved {
        let now = fs::read(p).unwrap();
        // An active segment's index is preallocated: compare its entries only.
        assert_eq!(
            &now[..bytes.len().min(now.len())],
            &bytes[..bytes.len().min(now.len())],
            "{}",
            p.display()
        );
        if p.to_str().unwrap().contains("00000000000000000018.") {
            continue;
        }
        assert_eq!(&now, bytes, "{} was not rebuilt as it was", p.display());
    }
    assert_eq!(log.log_end_offset(), leo);
    for o in 0..leo {
        assert_eq!(
            read_batches(&log, o, u64::MAX, None, false)[0].base,
            3 * (o / 3)
        );
        assert_eq!(
            log.fetch_offset_by_timestamp(TS + o)
                .unwrap()
                .unwrap()
                .offset,
            o
        );
    }
    assert_values(&read_all(&log), 0, leo, |_| 'v');
}

#[test]
fn deleted_index_of_the_active_segment_is_rebuilt_on_clean_open() {
    check_deleted_indexes_rebuilt(&[(18, ".index")], true);
    check_deleted_indexes_rebuilt(&[(18, ".index"), (18, ".timeindex")], true);
}

#[test]
fn deleted_index_of_an_inactive_segment_is_rebuilt_on_clean_open() {
    check_deleted_indexes_rebuilt(&[(9, ".index")], true);
    check_deleted_indexes_rebuilt(&[(0, ".timeindex")], true);
}

#[test]
fn deleted_index_of_an_inactive_segment_is_rebuilt_on_unclean_open() {
    check_deleted_indexes_rebuilt(&[(9, ".index")], false);
}

#[test]
fn unclean_open_after_lowering_index_interval_bytes() {
    let f = fixture();
    let cfg = config_with(|c| {
        c.segment_bytes = 4 * batch_size(3);
        c.index_interval_bytes = 1 << 20; // no index entries at all
    });
    let mut log = open_new(&f.dir, cfg.clone());
    for _ in 0..10 {
        append(&mut log, 3);
    }
    assert_eq!(bases(&log), vec![0, 12, 24]);
    assert_eq!(file_len(&seg_path(&f.dir, 0, ".index")), 0);
    drop(log); // crash
    let cfg = LogConfig {
        index_interval_bytes: 0,
        ..cfg
    };
    let (log, info) = Log::open(&f.dir, cfg, opts(false, 0, 0))
        .expect("open after a crash with a new index interval");
    assert_eq!(info.recovered_segments, 3);
    assert_eq!(offset_index_file(&seg_path(&f.dir, 0, ".index")).len(), 3);
    assert_values(&read_all(&log), 0, 30, |_| 'v');
}

#[test]
fn garbage_filled_index_is_rebuilt_on_clean_open() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 2, 2, |o| TS + o);
    log.close().unwrap();
    let cfg = log.config().clone();
    let leo = log.log_end_offset();
    drop(log);
    let index = seg_path(&f.dir, 0, ".index");
    let timeindex = seg_path(&f.dir, 9, ".timeindex");
    let (index_bytes, timeindex_bytes) = (fs::read(&index).unwrap(), fs::read(&timeindex).unwrap());
    fs::write(&index, vec![0xFF; index_bytes.len()]).unwrap();
    fs::write(&timeindex, vec![0xFF; timeindex_bytes.len()]).unwrap();

    let (log, info) = reopen(&f.dir, cfg, opts(true, leo, 0));
    assert!(info.rebuilt_indexes >= 2, "{info:?}");
    assert_eq!(info.recovered_segments, 0);
    assert_eq!(info.truncated_bytes, 0);
    assert_eq!(fs::read(&index).unwrap(), index_bytes);
    assert_eq!(fs::read(&timeindex).unwrap(), timeindex_bytes);
    for o in 0..leo {
        assert_eq!(
            read_batches(&log, o, u64::MAX, None, false)[0].base,
            3 * (o / 3)
        );
        assert_eq!(
            log.fetch_offset_by_timestamp(TS + o)
                .unwrap()
                .unwrap()
                .offset,
            o
        );
    }
}

#[test]
fn reopen_with_a_checkpointed_log_start_offset() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 2, 1, |o| TS + o);
    log.close().unwrap();
    let cfg = log.config().clone();
    drop(log);
    let (log, _) = reopen(&f.dir, cfg.clone(), opts(true, 21, 11));
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (11, 21));
    assert_out_of_range(log.read(10, u64::MAX, None, false), 10, 11, 21);
    drop(log);
    // A log start past the log end empties the log and starts it there.
    let (log, _) = reopen(&f.dir, cfg.clone(), opts(true, 21, 50));
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (50, 50));
    assert_eq!(bases(&log), vec![50]);
    drop(log);
    // A fresh directory starts at its checkpointed log start.
    let g = fixture();
    let (mut log, _) = reopen(&g.dir, cfg, opts(true, 0, 300));
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (300, 300));
    assert_eq!(segment_files(&g.dir), expected_files(&[300]));
    assert_eq!(append(&mut log, 2).first_offset, 300);
}

// ---------------------------------------------------------------------------------------------
// Bad appends
// ---------------------------------------------------------------------------------------------

/// A log of two segments with the given config and an append that must fail and change nothing.
fn assert_rejected(data: &[u8], cfg: LogConfig, follower: bool, ok: impl Fn(&Error) -> bool) {
    let f = fixture();
    let mut log = open_new(&f.dir, cfg);
    for _ in 0..3 {
        append(&mut log, 3);
    }
    log.roll(NOW).unwrap();
    append(&mut log, 3);
    let before = snapshot(&log);
    let err = if follower {
        log.append_as_follower(data, NOW).unwrap_err()
    } else {
        log.append_as_leader(data, 0, NOW, false).unwrap_err()
    };
    assert!(ok(&err), "unexpected error {err:?}");
    assert_eq!(
        snapshot(&log),
        before,
        "a rejected append changed the log ({err})"
    );
    // The log still works.
    assert_eq!(append(&mut log, 3).first_offset, 12);
    assert_values(&read_all(&log), 0, 15, |_| 'v');
}

fn corrupt(e: &Error) -> bool {
    matches!(e, Error::CorruptRecord(_))
}

#[test]
fn bad_append_wrong_crc() {
    let mut data = batch(12, 3);
    let n = data.len();
    data[n - 3] ^= 0x01;
    assert_rejected(&data, config(), false, corrupt);
    assert_rejected(&data, config(), true, corrupt);
    // The stored CRC itself wrong.
    let mut data = batch(12, 3);
    data[17] ^= 0x80;
    assert_rejected(&data, config(), false, corrupt);
}

#[test]
fn bad_append_wrong_magic() {
    for magic in [0u8, 1, 3, 0xFF] {
        let mut data = batch(12, 3);
        data[16] = magic;
        assert_rejected(&data, config(), false, corrupt);
        assert_rejected(&data, config(), true, corrupt);
    }
}

#[test]
fn bad_append_truncated_batch() {
    let data = batch(12, 3);
    for cut in [1, 10, data.len() - 61, data.len() - 12, data.len() - 1] {
        assert_rejected(&data[..data.len() - cut], config(), false, corrupt);
    }
    assert_rejected(&data[..data.len() - 1], config(), true, corrupt);
    // Two batches, the second one cut: the first is not written either.
    let mut two = batch(12, 3);
    two.extend_from_slice(&data[..data.len() - 5]);
    assert_rejected(&two, config(), false, corrupt);
}

#[test]
fn bad_append_lying_length() {
    let data = batch(12, 3);
    let len = i32::from_be_bytes(data[8..12].try_into().unwrap());
    for lie in [len + 1, len + 1000, len - 1, 48, 0, -1, i32::MAX, i32::MIN] {
        let mut bad = data.clone();
        bad[8..12].copy_from_slice(&lie.to_be_bytes());
        assert_rejected(&bad, config(), false, corrupt);
    }
    // A good batch followed by one that lies about its length.
    let mut two = batch(12, 3);
    let mut bad = batch(15, 3);
    bad[8..12].copy_from_slice(&(len + 7).to_be_bytes());
    two.extend_from_slice(&bad);
    assert_rejected(&two, config(), false, corrupt);
    assert_rejected(&two, config(), true, corrupt);
}

#[test]
fn bad_append_second_batch_corrupt_writes_nothing() {
    let mut data = batch(12, 3);
    let mut second = batch(15, 3);
    let n = second.len();
    second[n - 1] ^= 0xFF;
    data.extend_from_slice(&second);
    assert_rejected(&data, config(), false, corrupt);
    assert_rejected(&data, config(), true, corrupt);
}

#[test]
fn bad_append_over_max_message_bytes() {
    let data = batch(12, 3);
    let max = data.len() as u64 - 1;
    let cfg = config_with(|c| c.max_message_bytes = max);
    // Build the log with a limit that fits its batches, then lower it.
    let f = fixture();
    let mut log = open_new(&f.dir, config());
    for _ in 0..4 {
        append(&mut log, 3);
    }
    log.update_config(cfg.clone()).unwrap();
    let before = snapshot(&log);
    for follower in [false, true] {
        let err = if follower {
            log.append_as_follower(&data, NOW).unwrap_err()
        } else {
            log.append_as_leader(&data, 0, NOW, false).unwrap_err()
        };
        assert_eq!(err.kafka_name(), "MESSAGE_TOO_LARGE");
        match err {
            Error::RecordTooLarge { size, max: m } => {
                assert_eq!((size, m as u64), (data.len(), max))
            }
            other => panic!("expected RecordTooLarge, got {other:?}"),
        }
        assert_eq!(snapshot(&log), before);
    }
    // Exactly max_message_bytes is fine.
    log.update_config(config_with(|c| c.max_message_bytes = data.len() as u64))
        .unwrap();
    assert_eq!(append(&mut log, 3).first_offset, 12);
}

#[test]
fn bad_append_over_segment_bytes() {
    let s = batch_size(3);
    let cfg = config_with(|c| c.segment_bytes = 4 * s);
    let data = batch(12, 60);
    assert!(data.len() as u64 > 4 * s);
    assert_rejected(&data, cfg, false, |e| {
        matches!(e, Error::RecordBatchTooLarge { .. })
    });
}

#[test]
fn bad_append_empty_input() {
    let invalid = |e: &Error| matches!(e, Error::InvalidRecord(_));
    assert_rejected(&[], config(), false, invalid);
    assert_rejected(&[], config(), true, invalid);
}

#[test]
fn bad_append_control_or_log_append_time_batch_from_a_producer() {
    let mut b = BatchBuilder::new(Compression::None);
    b.control(true);
    b.append(TS, Some(b"k"), Some(b"v"), &[]);
    let control = b.build().unwrap();
    assert_rejected(&control, config(), false, |e| {
        matches!(e, Error::InvalidRecord(_))
    });
    let mut b = BatchBuilder::new(Compression::None);
    b.timestamp_type(TimestampType::LogAppendTime);
    b.append(TS, Some(b"k"), Some(b"v"), &[]);
    let lat = b.build().unwrap();
    assert_rejected(&lat, config(), false, |e| {
        matches!(e, Error::InvalidTimestamp(_))
    });
}

#[test]
fn multi_batch_append_that_fills_the_index_leaves_a_consistent_log() {
    let f = fixture();
    // 24-byte indexes: 3 offset entries. Constant timestamps, an entry for every batch but the
    // first: two batches use one entry, an append of three more needs three.
    let mut log = open_new(&f.dir, config_with(|c| c.segment_index_bytes = 24));
    append_ts(&mut log, 2, TS);
    append_ts(&mut log, 2, TS);
    let before = snapshot(&log);
    let mut data = Vec::new();
    for k in 0..3 {
        data.extend_from_slice(&batch_with(4 + 2 * k, 2, |_| TS, Compression::None, 'v'));
    }
    match log.append_as_leader(&data, 0, NOW, false) {
        Ok(info) => {
            assert_eq!((info.first_offset, info.last_offset), (4, 9));
            assert_values(&read_all(&log), 0, 10, |_| 'v');
        }
        Err(e) => assert_eq!(
            snapshot(&log),
            before,
            "a rejected append ({e}) left the log changed"
        ),
    }
    // Either way, what follows must be consistent.
    let leo = log.log_end_offset();
    append_ts(&mut log, 2, TS);
    assert_values(&read_all(&log), 0, leo + 2, |_| 'v');
    let total: u64 = sizes(&log).iter().sum();
    assert_eq!(total, (leo as u64 + 2) / 2 * batch_size(2));
}

// ---------------------------------------------------------------------------------------------
// Followers
// ---------------------------------------------------------------------------------------------

fn leader_batch(base: i64, n: usize, epoch: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    b.base_offset(base).partition_leader_epoch(epoch);
    for o in base..base + n as i64 {
        b.append(
            TS + o,
            Some(format!("k{o:08}").as_bytes()),
            Some(format!("v{o:08}").as_bytes()),
            &[],
        );
    }
    b.build().unwrap()
}

#[test]
fn append_as_follower_keeps_offsets_and_epochs() {
    let f = fixture();
    let cfg = config_with(|c| c.segment_bytes = 3 * batch_size(3));
    let mut log = open_new(&f.dir, cfg.clone());
    let info = log.append_as_follower(&leader_batch(0, 3, 5), NOW).unwrap();
    assert_eq!(
        (info.first_offset, info.last_offset, info.record_count),
        (0, 2, 3)
    );
    let mut two = leader_batch(3, 3, 5);
    two.extend_from_slice(&leader_batch(6, 3, 7));
    let info = log.append_as_follower(&two, NOW).unwrap();
    assert_eq!(
        (
            info.first_offset,
            info.last_offset,
            info.batch_count,
            info.max_timestamp
        ),
        (3, 8, 2, TS + 8)
    );
    assert_eq!(log.log_end_offset(), 9);
    let got = read_batches(&log, 0, u64::MAX, None, false);
    assert_eq!(
        got.iter().map(|b| (b.base, b.epoch)).collect::<Vec<_>>(),
        vec![(0, 5), (3, 5), (6, 7)]
    );
    assert_values(&records(&got), 0, 9, |_| 'v');
    let e = |epoch, start_offset| EpochEntry {
        epoch,
        start_offset,
    };
    assert_eq!(log.epoch_cache().entries(), &[e(5, 0), e(7, 6)]);
    // The bytes are stored exactly as the leader sent them.
    assert_eq!(
        fs::read(seg_path(&f.dir, 0, ".log")).unwrap(),
        [leader_batch(0, 3, 5), two.clone()].concat()
    );

    // A batch starting below the log end is refused, whole appends included.
    let invalid = |r: Result<LogAppendInfo>| matches!(r, Err(Error::InvalidRecord(_)));
    let before = snapshot(&log);
    assert!(invalid(log.append_as_follower(&leader_batch(4, 3, 7), NOW)));
    assert!(invalid(log.append_as_follower(&leader_batch(8, 3, 7), NOW)));
    assert!(invalid(log.append_as_follower(&leader_batch(0, 3, 7), NOW)));
    let mut bad = leader_batch(9, 3, 7);
    bad.extend_from_slice(&leader_batch(11, 3, 7)); // overlaps the first
    assert!(invalid(log.append_as_follower(&bad, NOW)));
    assert_eq!(snapshot(&log), before);

    // A gap above the log end is accepted; offsets are kept.
    let info = log
        .append_as_follower(&leader_batch(20, 3, 8), NOW)
        .unwrap();
    assert_eq!((info.first_offset, info.last_offset), (20, 22));
    assert_eq!(log.log_end_offset(), 23);
    assert_eq!(read_batches(&log, 12, u64::MAX, None, false)[0].base, 20);
    assert_eq!(log.epoch_cache().entries(), &[e(5, 0), e(7, 6), e(8, 20)]);
    // A follower's batches survive an unclean reopen with offsets and epochs intact.
    drop(log);
    let (log, info) = reopen(&f.dir, cfg, opts(false, 0, 0));
    assert_eq!(info.truncated_bytes, 0);
    assert_eq!(log.log_end_offset(), 23);
    let got = read_batches(&log, 0, u64::MAX, None, false);
    assert_eq!(
        got.iter().map(|b| (b.base, b.epoch)).collect::<Vec<_>>(),
        vec![(0, 5), (3, 5), (6, 7), (20, 8)]
    );
}

// ---------------------------------------------------------------------------------------------
// More: multi-batch leader appends, LogAppendTime, leftovers, odd recovery cases, config
// ---------------------------------------------------------------------------------------------

#[test]
fn leader_append_of_several_batches_assigns_consecutive_offsets() {
    let f = fixture();
    let mut log = open_new(&f.dir, config());
    append(&mut log, 2);
    // The producer's base offsets are ignored: the log assigns them from its end.
    let mut data = batch_with(1_000, 3, |o| TS + o, Compression::None, 'x');
    data.extend_from_slice(&batch_with(7, 1, |o| TS + o, Compression::Zstd, 'x'));
    data.extend_from_slice(&batch_with(0, 4, |o| TS + o, Compression::Gzip, 'x'));
    let info = log.append_as_leader(&data, 9, NOW, false).unwrap();
    assert_eq!(
        (
            info.first_offset,
            info.last_offset,
            info.record_count,
            info.batch_count
        ),
        (2, 9, 8, 3)
    );
    assert_eq!(info.valid_bytes, data.len() as u64);
    assert_eq!(info.log_append_time, -1);
    let got = read_batches(&log, 2, u64::MAX, None, false);
    assert_eq!(
        got.iter()
            .map(|b| (b.base, b.last, b.epoch))
            .collect::<Vec<_>>(),
        vec![(2, 4, 9), (5, 5, 9), (6, 9, 9)]
    );
    assert_eq!(
        records(&got).iter().map(|r| r.offset).collect::<Vec<_>>(),
        (2..10).collect::<Vec<_>>()
    );
    // One epoch entry for the whole append.
    let e = |epoch, start_offset| EpochEntry {
        epoch,
        start_offset,
    };
    assert_eq!(log.epoch_cache().entries(), &[e(0, 0), e(9, 2)]);
}

#[test]
fn log_append_time_is_stamped_with_a_valid_crc() {
    let f = fixture();
    let mut log = open_new(
        &f.dir,
        config_with(|c| c.message_timestamp_type = TimestampType::LogAppendTime),
    );
    for (i, c) in [Compression::None, Compression::Zstd, Compression::Lz4]
        .into_iter()
        .enumerate()
    {
        let first = log.log_end_offset();
        let now = NOW + i as i64;
        let info = log
            .append_as_leader(&batch_with(first, 3, |o| 1_000 + o, c, 'v'), 0, now, false)
            .unwrap();
        assert_eq!((info.log_append_time, info.max_timestamp), (now, now));
    }
    // `decode` checks every CRC; every record carries its batch's append time.
    let recs = records(&read_batches(&log, 0, u64::MAX, None, false));
    assert_values(&recs, 0, 9, |_| 'v');
    assert_eq!(
        recs.iter().map(|r| r.timestamp).collect::<Vec<_>>(),
        [NOW; 3]
            .into_iter()
            .chain([NOW + 1; 3])
            .chain([NOW + 2; 3])
            .collect::<Vec<_>>()
    );
    let found = log.fetch_offset_by_timestamp(NOW + 1).unwrap().unwrap();
    assert_eq!((found.offset, found.timestamp), (3, NOW + 1));
    // The stamped batches survive recovery (their CRCs are right on disk too).
    let cfg = log.config().clone();
    drop(log);
    let (log, info) = reopen(&f.dir, cfg, opts(false, 0, 0));
    assert_eq!(info.truncated_bytes, 0);
    assert_eq!(log.log_end_offset(), 9);
}

#[test]
fn open_removes_leftover_files() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 1, 1, |o| TS + o);
    log.close().unwrap();
    let cfg = log.config().clone();
    drop(log);
    for name in [
        "00000000000000000050.index",     // no .log
        "00000000000000000050.timeindex", // no .log
        "00000000000000000000.log.deleted",
        "00000000000000000009.index.tmp",
        "leader-epoch-checkpoint.tmp",
    ] {
        fs::write(f.dir.join(name), b"junk").unwrap();
    }
    fs::write(f.dir.join("notes.txt"), b"keep me").unwrap();
    let (log, info) = reopen(&f.dir, cfg, opts(true, 12, 0));
    assert_eq!(info, RecoveryInfo::default());
    assert_eq!(bases(&log), vec![0, 9]);
    let mut names: Vec<String> = fs::read_dir(&f.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut want = expected_files(&[0, 9]);
    want.push(CHECKPOINT.to_string());
    want.push("notes.txt".to_string());
    want.sort();
    assert_eq!(names, want);
    assert_values(&read_all(&log), 0, 12, |_| 'v');
}

#[test]
fn recovery_cuts_a_batch_whose_offsets_go_backwards() {
    let f = fixture();
    let (log, s) = build_log(&f.dir, 1, 2, |o| TS + o);
    let cfg = log.config().clone();
    drop(log);
    // Copy the active segment's first batch (offsets 9-11, valid CRC) to its end.
    let path = seg_path(&f.dir, 9, ".log");
    let bytes = fs::read(&path).unwrap();
    let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(&bytes[..s as usize], 2 * s).unwrap();
    drop(file);
    let (log, info) = reopen(&f.dir, cfg, opts(false, 0, 0));
    assert_eq!(info.truncated_bytes, s);
    assert_eq!(log.log_end_offset(), 15);
    assert_values(&read_all(&log), 0, 15, |_| 'v');
}

#[test]
fn invalid_config_is_rejected() {
    let f = fixture();
    let bad = [
        config_with(|c| c.segment_bytes = 13),
        config_with(|c| c.segment_ms = 0),
        config_with(|c| c.segment_jitter_ms = -1),
        config_with(|c| c.segment_index_bytes = 11),
        config_with(|c| c.retention_ms = -2),
        config_with(|c| c.retention_bytes = -2),
    ];
    for cfg in &bad {
        assert!(matches!(
            Log::open(&f.dir, cfg.clone(), opts(true, 0, 0)),
            Err(Error::InvalidConfig(_))
        ));
    }
    let mut log = open_new(&f.dir, config());
    append(&mut log, 3);
    for cfg in bad {
        assert!(matches!(
            log.update_config(cfg),
            Err(Error::InvalidConfig(_))
        ));
    }
    assert_eq!(log.config(), &config());
}

#[test]
fn offset_for_timestamp_ignores_records_below_the_log_start() {
    let f = fixture();
    let (mut log, _s) = build_log(&f.dir, 2, 1, |o| TS + o);
    log.maybe_increment_log_start_offset(13).unwrap();
    // Segment 0 holds timestamps >= TS but all its offsets are below the log start.
    let found = log.fetch_offset_by_timestamp(TS).unwrap().unwrap();
    assert_eq!((found.offset, found.timestamp), (13, TS + 13));
    let found = log.fetch_offset_by_timestamp(TS + 12).unwrap().unwrap();
    assert_eq!(found.offset, 13);
    let found = log.fetch_offset_by_timestamp(TS + 15).unwrap().unwrap();
    assert_eq!(found.offset, 15);
}

#[test]
fn offset_for_max_timestamp_ignores_records_below_the_log_start() {
    let f = fixture();
    // The largest timestamp is in the first segment.
    let (mut log, _s) = build_log(&f.dir, 2, 1, |o| if o < 9 { TS + 1_000 } else { TS + o });
    log.maybe_increment_log_start_offset(13).unwrap();
    let found = log.fetch_offset_by_timestamp(MAX_TIMESTAMP).unwrap();
    assert_eq!(found.map(|t| (t.offset, t.timestamp)), Some((20, TS + 20)));
}

/// Appends of 256 KiB and more are validated on a second core while they are written; a
/// bad one must still leave the log exactly as it was.
fn big_config() -> LogConfig {
    config_with(|c| {
        c.segment_bytes = 64 << 20;
        c.max_message_bytes = 8 << 20;
    })
}

#[test]
fn big_append_is_validated_in_parallel_and_kept_when_good() {
    let f = fixture();
    let mut log = open_new(&f.dir, big_config());
    append(&mut log, 3);
    let data = batch(3, 20_000);
    assert!(data.len() >= 256 * 1024);
    let info = log.append_as_leader(&data, 0, NOW, false).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (3, 20_002));
    assert_values(&read_all(&log), 0, 20_003, |_| 'v');
}

#[test]
fn big_bad_append_leaves_the_log_unchanged() {
    // A flipped byte in the middle: the CRC fails.
    let mut data = batch(12, 20_000);
    let mid = data.len() / 2;
    data[mid] ^= 0x01;
    assert_rejected(&data, big_config(), false, corrupt);
    // A broken record under a correct CRC: the record check fails.
    let mut data = batch(12, 20_000);
    let last = data.len() - 1;
    data[last] = 0x7f; // the last record's header count now lies
    let crc = crc32c::crc32c(&data[21..]);
    data[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_rejected(&data, big_config(), false, corrupt);
}
