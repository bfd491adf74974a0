//! Helpers shared by the log cleaner tests (`tests/log_cleaner*.rs`): keyed batches, a
//! compacted config, reading a log back as keyed records, and the model of what a cleaning
//! keeps.

// Each test file uses a different part of these helpers.
#![allow(dead_code)]

use std::collections::HashMap;

use crate::common::{config, NOW};
use rillet_core::log::AppendOrigin;
use rillet_core::log::{CleanerConfig, FetchDataInfo, Log, LogConfig};
use rillet_core::record::batch::decode_batches;
use rillet_core::record::{BatchBuilder, Compression};

/// One record as the tests see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kv {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<String>,
    pub value: Option<String>,
}

/// The common test config with `cleanup.policy=compact`, then `f`.
pub fn compacted_config(f: impl FnOnce(&mut LogConfig)) -> LogConfig {
    let mut c = config();
    c.compact = true;
    f(&mut c);
    c
}

pub fn cleaner() -> CleanerConfig {
    CleanerConfig::default()
}

/// A batch at `first` of records `(key, value)`, all timestamped `ts`.
pub fn keyed_batch(
    first: i64,
    recs: &[(Option<&str>, Option<&str>)],
    ts: i64,
    c: Compression,
) -> Vec<u8> {
    let mut b = BatchBuilder::new(c);
    b.base_offset(first);
    for (k, v) in recs {
        b.append(ts, k.map(str::as_bytes), v.map(str::as_bytes), &[]);
    }
    b.build().unwrap()
}

/// Append one batch of `(key, value)` records as leader; returns them with their offsets.
pub fn append_keyed(
    log: &mut Log,
    recs: &[(String, Option<String>)],
    ts: i64,
    c: Compression,
) -> Vec<Kv> {
    let refs: Vec<(Option<&str>, Option<&str>)> = recs
        .iter()
        .map(|(k, v)| (Some(k.as_str()), v.as_deref()))
        .collect();
    let info = log
        .append_as_leader(
            &keyed_batch(0, &refs, ts, c),
            0,
            NOW,
            false,
            AppendOrigin::Client,
        )
        .unwrap();
    recs.iter()
        .enumerate()
        .map(|(i, (k, v))| Kv {
            offset: info.first_offset + i as i64,
            timestamp: ts,
            key: Some(k.clone()),
            value: v.clone(),
        })
        .collect()
}

fn text(b: Option<&[u8]>) -> Option<String> {
    b.map(|b| String::from_utf8(b.to_vec()).unwrap())
}

/// Every record of whole batches in `buf` (CRC-checked).
pub fn decode_kvs(buf: &[u8]) -> Vec<Kv> {
    let mut out = Vec::new();
    for b in decode_batches(buf, true, false).unwrap() {
        let recs = b.records_buf(buf);
        for s in &b.records {
            let r = s.resolve(&b.header, recs);
            out.push(Kv {
                offset: r.offset,
                timestamp: r.timestamp,
                key: text(r.key),
                value: text(r.value),
            });
        }
    }
    out
}

/// The bytes of a read (tombstones and all: `common::fetch_bytes` expects values).
pub fn fetch_bytes(info: &FetchDataInfo) -> Vec<u8> {
    let mut all = Vec::new();
    for r in &info.regions {
        r.read_into(&mut all).unwrap();
    }
    assert_eq!(all.len() as u64, info.size());
    all
}

/// The records at or after `offset`, read from there to the log end.
pub fn records_from(log: &Log, offset: i64) -> Vec<Kv> {
    let bytes = fetch_bytes(&log.read(offset, u64::MAX, None, false).unwrap());
    decode_kvs(&bytes)
        .into_iter()
        .filter(|r| r.offset >= offset)
        .collect()
}

/// Every record from the log start.
pub fn read_records(log: &Log) -> Vec<Kv> {
    records_from(log, log.log_start_offset())
}

/// `(base offset, last offset, record count)` of every batch from the log start.
pub fn batches(log: &Log) -> Vec<(i64, i64, i32)> {
    let bytes = fetch_bytes(
        &log.read(log.log_start_offset(), u64::MAX, None, false)
            .unwrap(),
    );
    decode_batches(&bytes, true, false)
        .unwrap()
        .iter()
        .map(|b| {
            (
                b.header.base_offset,
                b.header.last_offset(),
                b.header.record_count,
            )
        })
        .collect()
}

pub fn offsets(recs: &[Kv]) -> Vec<i64> {
    recs.iter().map(|r| r.offset).collect()
}

/// What one cleaning of a never-cleaned log up to `end` keeps: below `end`, the newest
/// record of each key (tombstones included: a first cleaning only stamps their horizon);
/// from `end` on, everything.
pub fn model_after_clean(written: &[Kv], end: i64) -> Vec<Kv> {
    let mut newest: HashMap<&str, i64> = HashMap::new();
    for r in written.iter().filter(|r| r.offset < end) {
        if let Some(k) = &r.key {
            newest.insert(k, r.offset);
        }
    }
    written
        .iter()
        .filter(|r| {
            r.offset >= end
                || r.key
                    .as_deref()
                    .is_some_and(|k| newest.get(k) == Some(&r.offset))
        })
        .cloned()
        .collect()
}
