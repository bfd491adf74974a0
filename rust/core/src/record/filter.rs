//! Rewriting one batch without some of its records: the per-batch half of the log cleaner
//! (Kafka's `MemoryRecords.filterTo`).
//!
//! [`BatchFilter::filter`] asks a retention rule about every record of a batch and writes
//! what is kept, preserving what the rest of the system relies on:
//!
//! - the batch's base offset and `lastOffsetDelta` (so offsets are never renumbered and the
//!   producer's last sequence stays where it was, as Kafka's `overrideLastOffset` does);
//! - its leader epoch, producer id / epoch / base sequence, transactional and control flags,
//!   timestamp type and codec (the kept records are re-compressed with the batch's own codec);
//! - each kept record's bytes: records are copied as they are (their offset and timestamp
//!   deltas stay valid because base offset and base timestamp do not move), except when a
//!   delete horizon is stamped.
//!
//! Tombstones (records with a null value) follow KIP-534: the first time the cleaner keeps a
//! tombstone, its batch gets a *delete horizon* (now + `delete.retention.ms`) in the
//! `baseTimestamp` field with attributes bit 6 set; its records' timestamp deltas are
//! re-encoded against it so every timestamp reads the same as before. A later cleaning
//! after the horizon drops the tombstones.
//!
//! A batch left with no record (one an earlier cleaning emptied too) is dropped, or, when
//! the caller asks ([`EmptyBatch::RetainEmpty`]), written as a bare 61-byte header with no
//! records, the same offsets and no codec (Kafka's `writeEmptyHeader`), so the offsets it
//! spanned, and its producer's sequence, stay accounted for.

use std::ops::Range;

use super::batch::{records_bytes, BatchHeader, ATTR_COMPRESSION_MASK, ATTR_DELETE_HORIZON};
use super::varint::{put_varint, put_varlong, varint_size, varlong_size, Reader};
use super::{crc32c, off, TimestampType, LOG_OVERHEAD, NO_TIMESTAMP, RECORD_BATCH_OVERHEAD};
use crate::error::{Error, Result};

/// One record as a retention rule sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    /// False for a tombstone.
    pub has_value: bool,
}

/// What becomes of a batch none of whose records is kept (Kafka's `BatchRetention`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmptyBatch {
    /// `DELETE_EMPTY`: nothing is written.
    Delete,
    /// `RETAIN_EMPTY`: a header with no records keeps the batch's offsets.
    RetainEmpty,
}

/// How a batch was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// Every record kept and nothing to stamp: the original bytes.
    Original,
    /// Some records removed, or a delete horizon stamped: a new batch.
    Rebuilt,
    /// No record kept: a bare header ([`EmptyBatch::RetainEmpty`]).
    Empty,
    /// No record kept and nothing written ([`EmptyBatch::Delete`]).
    Deleted,
}

/// What [`BatchFilter::filter`] did to one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilteredBatch {
    pub written: Written,
    pub records_read: usize,
    pub records_retained: usize,
    /// Kept records with a null value.
    pub tombstones_retained: usize,
    /// Bytes appended to the output (0 when deleted).
    pub size: usize,
    /// The written batch's max timestamp.
    pub max_timestamp: i64,
    /// The written batch's delete horizon (KIP-534), if it has one.
    pub delete_horizon_ms: Option<i64>,
}

/// Where one record lies in its batch's records section.
#[derive(Debug, Clone)]
struct RecordPos {
    /// From its length varint to its end.
    bytes: Range<usize>,
    /// Where its key field starts (after attributes, timestamp delta and offset delta).
    key_field: usize,
    attributes: i8,
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<Range<usize>>,
    has_value: bool,
}

/// Reusable buffers for filtering batches; one per cleaner.
#[derive(Debug, Default)]
pub struct BatchFilter {
    decompressed: Vec<u8>,
    raw: Vec<u8>,
    positions: Vec<RecordPos>,
}

impl BatchFilter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Call `f(offset, key)` for every record of a (CRC-checked) batch that has a key: what
    /// the cleaner puts in its offset map.
    pub fn for_each_key(
        &mut self,
        batch: &[u8],
        h: &BatchHeader,
        f: &mut dyn FnMut(i64, &[u8]),
    ) -> Result<()> {
        check_length(batch, h)?;
        let BatchFilter {
            decompressed,
            positions,
            ..
        } = self;
        let records = records_bytes(h, batch, decompressed)?;
        locate_records(h, records, positions)?;
        for p in positions.iter() {
            if let Some(k) = &p.key {
                f(h.base_offset + p.offset_delta as i64, &records[k.clone()]);
            }
        }
        Ok(())
    }

    /// Filter one whole, CRC-checked batch through `retain`, appending what is kept to `out`
    /// (see the module docs). `new_delete_horizon_ms` is stamped on the batch if it keeps a
    /// tombstone and has no horizon yet.
    pub fn filter(
        &mut self,
        batch: &[u8],
        h: &BatchHeader,
        new_delete_horizon_ms: i64,
        if_empty: EmptyBatch,
        retain: &mut dyn FnMut(&RecordView<'_>) -> bool,
        out: &mut Vec<u8>,
    ) -> Result<FilteredBatch> {
        check_length(batch, h)?;
        let BatchFilter {
            decompressed,
            raw,
            positions,
        } = self;
        let records = records_bytes(h, batch, decompressed)?;
        locate_records(h, records, positions)?;
        let log_append_time = h.timestamp_type() == TimestampType::LogAppendTime;
        let timestamp_of = |p: &RecordPos| {
            if log_append_time {
                h.max_timestamp
            } else {
                h.base_timestamp.wrapping_add(p.timestamp_delta)
            }
        };
        let mut kept = 0usize;
        let mut tombstones = 0usize;
        let mut max_timestamp = NO_TIMESTAMP;
        // Positions of the records removed are overwritten by those kept, in order.
        let total = positions.len();
        for i in 0..total {
            let p = &positions[i];
            let view = RecordView {
                offset: h.base_offset + p.offset_delta as i64,
                timestamp: timestamp_of(p),
                key: p.key.clone().map(|k| &records[k]),
                has_value: p.has_value,
            };
            if retain(&view) {
                tombstones += usize::from(!p.has_value);
                max_timestamp = max_timestamp.max(view.timestamp);
                positions.swap(kept, i);
                kept += 1;
            }
        }
        let mut result = FilteredBatch {
            written: Written::Original,
            records_read: total,
            records_retained: kept,
            tombstones_retained: tombstones,
            size: 0,
            max_timestamp: h.max_timestamp,
            delete_horizon_ms: h.has_delete_horizon().then_some(h.base_timestamp),
        };
        let needs_horizon = tombstones > 0 && !h.has_delete_horizon();
        // Before the "everything kept" case: a batch already emptied by an earlier cleaning
        // keeps nothing too, and goes unless the caller asks to retain it (Kafka's filterTo).
        if kept == 0 {
            result.delete_horizon_ms = None;
            result.written = match if_empty {
                EmptyBatch::Delete => Written::Deleted,
                EmptyBatch::RetainEmpty => {
                    result.size = write_empty_header(batch, out);
                    Written::Empty
                }
            };
            return Ok(result);
        }
        if kept == total && !needs_horizon {
            out.extend_from_slice(batch);
            result.size = batch.len();
            return Ok(result);
        }
        let base_timestamp = if needs_horizon {
            new_delete_horizon_ms
        } else {
            h.base_timestamp
        };
        raw.clear();
        for p in &positions[..kept] {
            if base_timestamp == h.base_timestamp {
                raw.extend_from_slice(&records[p.bytes.clone()]);
            } else {
                // Same timestamp, measured from the delete horizon now in baseTimestamp.
                let ts_delta = h
                    .base_timestamp
                    .wrapping_add(p.timestamp_delta)
                    .wrapping_sub(base_timestamp);
                let tail = &records[p.key_field..p.bytes.end];
                let len = 1 + varlong_size(ts_delta) + varint_size(p.offset_delta) + tail.len();
                put_varint(raw, len as i32);
                raw.push(p.attributes as u8);
                put_varlong(raw, ts_delta);
                put_varint(raw, p.offset_delta);
                raw.extend_from_slice(tail);
            }
        }
        if !log_append_time {
            result.max_timestamp = max_timestamp;
        }
        let mut attributes = h.attributes;
        if needs_horizon {
            attributes |= ATTR_DELETE_HORIZON;
            result.delete_horizon_ms = Some(base_timestamp);
        }
        let start = out.len();
        out.extend_from_slice(&batch[..RECORD_BATCH_OVERHEAD]);
        h.compression().compress_into(raw, out)?;
        let size = out.len() - start;
        if size - LOG_OVERHEAD > i32::MAX as usize {
            out.truncate(start);
            return Err(Error::RecordBatchTooLarge {
                size,
                max: i32::MAX as usize,
            });
        }
        let head = &mut out[start..start + RECORD_BATCH_OVERHEAD];
        put_i32(head, off::LENGTH, (size - LOG_OVERHEAD) as i32);
        head[off::ATTRIBUTES..off::ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
        put_i64(head, off::BASE_TIMESTAMP, base_timestamp);
        put_i64(head, off::MAX_TIMESTAMP, result.max_timestamp);
        put_i32(head, off::RECORD_COUNT, kept as i32);
        let crc = crc32c(&out[start + off::ATTRIBUTES..]);
        out[start + off::CRC..start + off::CRC + 4].copy_from_slice(&crc.to_be_bytes());
        result.written = Written::Rebuilt;
        result.size = size;
        Ok(result)
    }
}

fn check_length(batch: &[u8], h: &BatchHeader) -> Result<()> {
    if batch.len() != h.size_in_bytes() {
        return Err(Error::corrupt(format!(
            "record batch at offset {} claims {} bytes but {} were given",
            h.base_offset,
            h.size_in_bytes(),
            batch.len()
        )));
    }
    Ok(())
}

fn put_i32(buf: &mut [u8], at: usize, v: i32) {
    buf[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

fn put_i64(buf: &mut [u8], at: usize, v: i64) {
    buf[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

/// Write the header of `batch` alone, as a batch with no records (Kafka's
/// `DefaultRecordBatch.writeEmptyHeader`): same offsets, epoch and producer fields, no
/// codec, no base timestamp, the same max timestamp. Returns its size.
fn write_empty_header(batch: &[u8], out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&batch[..RECORD_BATCH_OVERHEAD]);
    let head = &mut out[start..];
    put_i32(
        head,
        off::LENGTH,
        (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i32,
    );
    let attrs = i16::from_be_bytes([head[off::ATTRIBUTES], head[off::ATTRIBUTES + 1]])
        & !(ATTR_COMPRESSION_MASK | ATTR_DELETE_HORIZON);
    head[off::ATTRIBUTES..off::ATTRIBUTES + 2].copy_from_slice(&attrs.to_be_bytes());
    put_i64(head, off::BASE_TIMESTAMP, NO_TIMESTAMP);
    put_i32(head, off::RECORD_COUNT, 0);
    let crc = crc32c(&head[off::ATTRIBUTES..]);
    head[off::CRC..off::CRC + 4].copy_from_slice(&crc.to_be_bytes());
    RECORD_BATCH_OVERHEAD
}

/// Find every record of a batch in its records section, checking what the cleaner relies on:
/// lengths within bounds, offset deltas increasing within `0..=lastOffsetDelta` (a compacted
/// batch has gaps), key and value well formed, the section fully used.
fn locate_records(h: &BatchHeader, records: &[u8], out: &mut Vec<RecordPos>) -> Result<()> {
    out.clear();
    let count = h.record_count as usize;
    // Each record takes at least 7 bytes; never reserve on a lying count.
    out.reserve(count.min(records.len() / 7 + 1));
    let mut r = Reader::new(records);
    let mut last_delta: i64 = -1;
    for i in 0..count {
        let start = r.position();
        let len = r.varint("record length")?;
        if len < 0 {
            return Err(Error::corrupt(format!(
                "record {i} has negative length {len}"
            )));
        }
        let body_start = r.position();
        let body = r.bytes(len as usize, "record")?;
        let mut rr = Reader::new(body);
        let attributes = rr.i8("record attributes")?;
        let timestamp_delta = rr.varlong("record timestamp delta")?;
        let offset_delta = rr.varint("record offset delta")?;
        if offset_delta as i64 <= last_delta || offset_delta > h.last_offset_delta {
            return Err(Error::corrupt(format!(
                "record {i} has offset delta {offset_delta} after {last_delta} (lastOffsetDelta {})",
                h.last_offset_delta
            )));
        }
        last_delta = offset_delta as i64;
        let key_field = body_start + rr.position();
        let key = rr.nullable_bytes("record key")?.map(|k| {
            let s = k.as_ptr() as usize - records.as_ptr() as usize;
            s..s + k.len()
        });
        let has_value = rr.nullable_bytes("record value")?.is_some();
        out.push(RecordPos {
            bytes: start..body_start + len as usize,
            key_field,
            attributes,
            timestamp_delta,
            offset_delta,
            key,
            has_value,
        });
    }
    if r.remaining() != 0 {
        return Err(Error::corrupt(format!(
            "record batch has {} bytes after its {count} records",
            r.remaining()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::batch::{decode_batches, validate_batch};
    use crate::record::builder::BatchBuilder;
    use crate::record::Compression;

    const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// Ten records at offsets 100..110: key `k{i % 4}`, a tombstone every third, timestamps
    /// 1000 + 7i, with headers on some.
    fn sample(c: Compression) -> Vec<u8> {
        let mut b = BatchBuilder::new(c);
        b.base_offset(100)
            .partition_leader_epoch(5)
            .producer(42, 3, 17);
        for i in 0..10i64 {
            let key = format!("k{}", i % 4);
            let value = (i % 3 != 2).then(|| format!("value-{i}"));
            let headers: &[(&[u8], Option<&[u8]>)] = if i % 2 == 0 {
                &[(b"h", Some(b"x"))]
            } else {
                &[]
            };
            b.append(
                1000 + 7 * i,
                Some(key.as_bytes()),
                value.as_deref().map(str::as_bytes),
                headers,
            );
        }
        b.build().unwrap()
    }

    type Seen = (i64, i64, Option<Vec<u8>>, Option<Vec<u8>>, usize);

    /// (offset, timestamp, key, value, header count) of every record.
    fn records_of(buf: &[u8]) -> Vec<Seen> {
        let mut out = Vec::new();
        for b in decode_batches(buf, true, false).unwrap() {
            let recs = b.records_buf(buf);
            for s in &b.records {
                let r = s.resolve(&b.header, recs);
                out.push((
                    r.offset,
                    r.timestamp,
                    r.key.map(<[u8]>::to_vec),
                    r.value.map(<[u8]>::to_vec),
                    r.headers.len(),
                ));
            }
        }
        out
    }

    fn run(
        batch: &[u8],
        horizon: i64,
        if_empty: EmptyBatch,
        mut keep: impl FnMut(&RecordView<'_>) -> bool,
    ) -> (FilteredBatch, Vec<u8>) {
        let h = validate_batch(batch).unwrap();
        let mut out = Vec::new();
        let f = BatchFilter::new()
            .filter(batch, &h, horizon, if_empty, &mut keep, &mut out)
            .unwrap();
        assert_eq!(f.size, out.len());
        (f, out)
    }

    #[test]
    fn keeping_everything_without_tombstones_writes_the_original_bytes() {
        for c in CODECS {
            let mut b = BatchBuilder::new(c);
            b.base_offset(7);
            b.append(1, Some(b"a"), Some(b"1"), &[]);
            b.append(2, Some(b"b"), Some(b"2"), &[]);
            let batch = b.build().unwrap();
            let (f, out) = run(&batch, 99, EmptyBatch::Delete, |_| true);
            assert_eq!(f.written, Written::Original);
            assert_eq!(out, batch);
            assert_eq!(f.delete_horizon_ms, None);
        }
    }

    #[test]
    fn removing_records_keeps_offsets_header_fields_and_codec() {
        for c in CODECS {
            let batch = sample(c);
            let h = validate_batch(&batch).unwrap();
            let all = records_of(&batch);
            // Keep the odd offsets that have a value: no tombstone is kept.
            let (f, out) = run(&batch, 5_000, EmptyBatch::Delete, |r| {
                r.offset % 2 == 1 && r.has_value
            });
            assert_eq!(f.written, Written::Rebuilt, "{c:?}");
            let nh = validate_batch(&out).unwrap();
            assert_eq!(nh.base_offset, 100);
            assert_eq!(nh.last_offset_delta, h.last_offset_delta);
            assert_eq!(nh.partition_leader_epoch, 5);
            assert_eq!(
                (nh.producer_id, nh.producer_epoch, nh.base_sequence),
                (42, 3, 17)
            );
            assert_eq!(nh.compression(), c);
            assert_eq!(nh.base_timestamp, h.base_timestamp);
            assert!(!nh.has_delete_horizon());
            let want: Vec<Seen> = all
                .iter()
                .filter(|r| r.0 % 2 == 1 && r.3.is_some())
                .cloned()
                .collect();
            assert_eq!(nh.record_count as usize, want.len());
            assert_eq!(records_of(&out), want);
            assert_eq!(nh.max_timestamp, want.iter().map(|r| r.1).max().unwrap());
            assert_eq!(f.max_timestamp, nh.max_timestamp);
        }
    }

    #[test]
    fn a_kept_tombstone_stamps_the_delete_horizon_and_keeps_every_timestamp() {
        for c in CODECS {
            let batch = sample(c);
            let all = records_of(&batch);
            let horizon = 1_700_000_000_000;
            let (f, out) = run(&batch, horizon, EmptyBatch::Delete, |r| r.offset >= 104);
            let nh = validate_batch(&out).unwrap();
            assert!(nh.has_delete_horizon(), "{c:?}");
            assert_eq!(nh.base_timestamp, horizon);
            assert_eq!(f.delete_horizon_ms, Some(horizon));
            assert_eq!(f.tombstones_retained, 2); // offsets 105 and 108
            let want: Vec<Seen> = all.iter().filter(|r| r.0 >= 104).cloned().collect();
            assert_eq!(records_of(&out), want);

            // A second pass keeps the horizon, whatever it is offered, and copies records.
            let (f2, out2) = run(&out, horizon + 1, EmptyBatch::Delete, |r| r.offset != 104);
            let h2 = validate_batch(&out2).unwrap();
            assert_eq!(h2.base_timestamp, horizon);
            assert_eq!(f2.delete_horizon_ms, Some(horizon));
            let want2: Vec<Seen> = want.iter().filter(|r| r.0 != 104).cloned().collect();
            assert_eq!(records_of(&out2), want2);

            // Everything kept, the horizon already set: the bytes are left alone.
            let (f3, out3) = run(&out2, horizon + 2, EmptyBatch::Delete, |_| true);
            assert_eq!((f3.written, out3), (Written::Original, out2));
        }
    }

    #[test]
    fn log_append_time_batches_keep_the_append_time() {
        let mut b = BatchBuilder::new(Compression::Lz4);
        b.timestamp_type(TimestampType::LogAppendTime);
        b.append(5, Some(b"a"), None, &[]);
        b.append(9, Some(b"b"), Some(b"v"), &[]);
        let batch = b.build().unwrap();
        let h = validate_batch(&batch).unwrap();
        let (_, out) = run(&batch, 77, EmptyBatch::Delete, |r| r.offset == 0);
        let nh = validate_batch(&out).unwrap();
        assert_eq!(nh.max_timestamp, h.max_timestamp);
        assert_eq!(nh.timestamp_type(), TimestampType::LogAppendTime);
        assert!(nh.has_delete_horizon());
        assert_eq!(records_of(&out)[0].1, h.max_timestamp);
    }

    #[test]
    fn an_emptied_batch_is_dropped_or_kept_as_a_bare_header() {
        for c in CODECS {
            let batch = sample(c);
            let h = validate_batch(&batch).unwrap();
            let (f, out) = run(&batch, 0, EmptyBatch::Delete, |_| false);
            assert_eq!((f.written, f.size, out.len()), (Written::Deleted, 0, 0));
            assert_eq!(f.records_read, 10);
            let (f, out) = run(&batch, 0, EmptyBatch::RetainEmpty, |_| false);
            assert_eq!(f.written, Written::Empty);
            assert_eq!(out.len(), RECORD_BATCH_OVERHEAD);
            let nh = validate_batch(&out).unwrap();
            assert_eq!(
                (nh.base_offset, nh.last_offset(), nh.record_count),
                (100, h.last_offset(), 0)
            );
            assert_eq!(nh.compression(), Compression::None);
            assert_eq!(
                (nh.producer_id, nh.producer_epoch, nh.base_sequence),
                (42, 3, 17)
            );
            assert_eq!(nh.base_timestamp, NO_TIMESTAMP);
            assert_eq!(nh.max_timestamp, h.max_timestamp);
            assert!(records_of(&out).is_empty());
        }
    }

    #[test]
    fn a_batch_emptied_earlier_is_dropped_or_kept_again() {
        let batch = sample(Compression::Gzip);
        let (_, empty) = run(&batch, 0, EmptyBatch::RetainEmpty, |_| false);
        let (f, out) = run(&empty, 0, EmptyBatch::Delete, |_| true);
        assert_eq!((f.written, out.len()), (Written::Deleted, 0));
        let (f, out) = run(&empty, 0, EmptyBatch::RetainEmpty, |_| true);
        assert_eq!((f.written, out), (Written::Empty, empty));
    }

    #[test]
    fn keys_are_reported_with_their_offsets() {
        let batch = sample(Compression::Zstd);
        let h = validate_batch(&batch).unwrap();
        let mut seen = Vec::new();
        BatchFilter::new()
            .for_each_key(&batch, &h, &mut |o, k| seen.push((o, k.to_vec())))
            .unwrap();
        let want: Vec<(i64, Vec<u8>)> = (0..10)
            .map(|i| (100 + i, format!("k{}", i % 4).into_bytes()))
            .collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn records_with_broken_framing_are_errors_not_panics() {
        let good = sample(Compression::None);
        let h = validate_batch(&good).unwrap();
        let mut out = Vec::new();
        let mut filter = BatchFilter::new();
        // Bytes that do not match the header.
        let short = &good[..good.len() - 1];
        assert!(filter
            .filter(short, &h, 0, EmptyBatch::Delete, &mut |_| true, &mut out)
            .is_err());
        assert!(filter.for_each_key(short, &h, &mut |_, _| {}).is_err());
        // A batch cut inside its records whose length says so (its records run out), and
        // one that claims fewer records than it holds (bytes are left over).
        let mut cut = good[..good.len() - 3].to_vec();
        let len = (cut.len() - LOG_OVERHEAD) as i32;
        cut[off::LENGTH..off::LENGTH + 4].copy_from_slice(&len.to_be_bytes());
        let mut fewer = good.clone();
        fewer[off::RECORD_COUNT..off::RECORD_COUNT + 4].copy_from_slice(&9i32.to_be_bytes());
        for bad in [cut, fewer] {
            let bh = BatchHeader::parse(&bad).unwrap();
            let r = filter.filter(&bad, &bh, 0, EmptyBatch::Delete, &mut |_| true, &mut out);
            assert!(r.is_err());
            assert!(filter.for_each_key(&bad, &bh, &mut |_, _| {}).is_err());
        }
    }
}
