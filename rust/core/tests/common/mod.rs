//! Helpers shared by the `Log` integration tests (`tests/log_*.rs`): fixed clocks, fixtures,
//! batch builders, decoders of what a log holds and of its files on disk.

// Each test file uses a different part of these helpers.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use rillet_core::log::AppendOrigin;
use rillet_core::log::{
    EpochEntry, FetchDataInfo, Log, LogAppendInfo, LogConfig, OpenOptions, RecoveryInfo,
};
use rillet_core::record::batch::{decode_batches, BatchHeader};
use rillet_core::record::{BatchBuilder, Compression, TimestampType};
use rillet_core::{Error, Result};
use tempfile::TempDir;

/// The broker's clock in every test.
pub const NOW: i64 = 1_700_000_000_000;

/// Default record timestamps: a minute before `NOW`, plus the record's offset.
pub const TS: i64 = NOW - 60_000;

pub const CHECKPOINT: &str = "leader-epoch-checkpoint";

/// A config with small, test-friendly sizes: an index entry for every batch but a segment's
/// first, no time-based rolls and no retention unless a test asks for them.
pub fn config() -> LogConfig {
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
        ..LogConfig::default()
    }
}

pub fn config_with(f: impl FnOnce(&mut LogConfig)) -> LogConfig {
    let mut c = config();
    f(&mut c);
    c
}

pub fn opts(clean_shutdown: bool, recovery_point: i64, log_start_offset: i64) -> OpenOptions {
    OpenOptions {
        recovery_point,
        log_start_offset,
        clean_shutdown,
        now_ms: NOW,
    }
}

pub struct Fixture {
    pub _tmp: TempDir,
    pub dir: PathBuf,
}

pub fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("topic-0");
    Fixture { _tmp: tmp, dir }
}

/// Open a log in a fresh directory.
pub fn open_new(dir: &Path, config: LogConfig) -> Log {
    let (log, info) = Log::open(dir, config, opts(true, 0, 0)).unwrap();
    assert_eq!(info, RecoveryInfo::default());
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.segment_count(), 1);
    log
}

pub fn reopen(dir: &Path, config: LogConfig, o: OpenOptions) -> (Log, RecoveryInfo) {
    Log::open(dir, config, o).unwrap()
}

/// A batch of `n` records meant for offsets `first..first + n`: key `k{offset:08}`, value
/// `{tag}{offset:08}`, timestamp `ts(offset)`. Batches with the same `n` (and small timestamp
/// deltas) have the same size.
pub fn batch_with(
    first: i64,
    n: usize,
    ts: impl Fn(i64) -> i64,
    c: Compression,
    tag: char,
) -> Vec<u8> {
    let mut b = BatchBuilder::new(c);
    b.base_offset(first);
    for o in first..first + n as i64 {
        let key = format!("k{o:08}");
        let value = format!("{tag}{o:08}");
        b.append(ts(o), Some(key.as_bytes()), Some(value.as_bytes()), &[]);
    }
    b.build().unwrap()
}

pub fn batch(first: i64, n: usize) -> Vec<u8> {
    batch_with(first, n, |o| TS + o, Compression::None, 'v')
}

/// The size of one `batch(_, n)`.
pub fn batch_size(n: usize) -> u64 {
    batch(0, n).len() as u64
}

/// Append one `n`-record batch at the log end as leader in epoch 0.
pub fn append(log: &mut Log, n: usize) -> LogAppendInfo {
    let first = log.log_end_offset();
    log.append_as_leader(&batch(first, n), 0, NOW, false, AppendOrigin::Client)
        .unwrap()
}

pub fn append_ts(log: &mut Log, n: usize, ts: i64) -> LogAppendInfo {
    let first = log.log_end_offset();
    log.append_as_leader(
        &batch_with(first, n, |_| ts, Compression::None, 'v'),
        0,
        NOW,
        false,
        AppendOrigin::Client,
    )
    .unwrap()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    pub offset: i64,
    pub timestamp: i64,
    pub value: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchInfo {
    pub base: i64,
    pub last: i64,
    pub epoch: i32,
    pub size: usize,
    pub records: Vec<Rec>,
}

/// Decode whole batches (CRC-checked); a partial batch is an error.
pub fn decode(buf: &[u8]) -> Vec<BatchInfo> {
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
pub fn fetch_bytes(info: &FetchDataInfo) -> Vec<u8> {
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

pub fn read_batches(
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

pub fn records(batches: &[BatchInfo]) -> Vec<Rec> {
    batches.iter().flat_map(|b| b.records.clone()).collect()
}

/// Every record from the log start to the log end.
pub fn read_all(log: &Log) -> Vec<Rec> {
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
pub fn assert_values(recs: &[Rec], from: i64, to: i64, tag: impl Fn(i64) -> char) {
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

pub fn bases(log: &Log) -> Vec<i64> {
    log.segments().map(|s| s.base_offset()).collect()
}

pub fn sizes(log: &Log) -> Vec<u64> {
    log.segments().map(|s| s.size()).collect()
}

pub fn seg_path(dir: &Path, base: i64, suffix: &str) -> PathBuf {
    dir.join(format!("{base:020}{suffix}"))
}

/// Sorted file names of segment files in `dir`.
pub fn segment_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".log") || n.ends_with(".index") || n.ends_with(".timeindex"))
        .collect();
    v.sort();
    v
}

pub fn expected_files(bases: &[i64]) -> Vec<String> {
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
pub fn log_file_batches(path: &Path) -> Vec<(u64, BatchHeader)> {
    let buf = fs::read(path).unwrap();
    decode_batches(&buf, true, false)
        .unwrap()
        .iter()
        .map(|b| (b.position as u64, b.header))
        .collect()
}

/// (relative offset, position) entries of an `.index` file, every 8 bytes of it.
pub fn offset_index_file(path: &Path) -> Vec<(u32, u32)> {
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
pub fn time_index_file(path: &Path) -> Vec<(i64, u32)> {
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

pub fn file_len(p: &Path) -> u64 {
    fs::metadata(p).unwrap().len()
}

/// Everything observable about a log that an append must not change when it fails.
#[derive(Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub log_end_offset: i64,
    pub log_start_offset: i64,
    pub segments: Vec<(i64, u64, u64)>,
    pub epochs: Vec<EpochEntry>,
    pub files: Vec<String>,
    pub records: Vec<Rec>,
}

pub fn snapshot(log: &Log) -> Snapshot {
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

pub fn assert_out_of_range<T: std::fmt::Debug>(r: Result<T>, offset: i64, start: i64, end: i64) {
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
pub fn build_log(
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
        log.append_as_leader(&data, 0, NOW, false, AppendOrigin::Client)
            .unwrap();
    }
    let want: Vec<i64> = (0..segments as i64 + (tail_batches > 0) as i64)
        .map(|i| 9 * i)
        .collect();
    assert_eq!(bases(&log), want);
    (log, s)
}
