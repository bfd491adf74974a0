//! Parsing and validation of RecordBatch v2 bytes. Nothing here trusts its input: every
//! length, count and varint is checked before use, and malformed bytes are an error, never a
//! panic.

use std::ops::Range;

use super::compression::Compression;
use super::varint::Reader;
use super::{off, LOG_OVERHEAD, MAGIC_V2, RECORD_BATCH_OVERHEAD};
use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime = 0,
    LogAppendTime = 1,
}

impl TimestampType {
    pub fn name(self) -> &'static str {
        match self {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        }
    }
}

pub const ATTR_COMPRESSION_MASK: i16 = 0x07;
pub const ATTR_TIMESTAMP_TYPE: i16 = 0x08;
pub const ATTR_TRANSACTIONAL: i16 = 0x10;
pub const ATTR_CONTROL: i16 = 0x20;
pub const ATTR_DELETE_HORIZON: i16 = 0x40;

#[inline]
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
#[inline]
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
#[inline]
fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// The 61-byte header of one batch, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

impl BatchHeader {
    /// Parse and sanity-check the header at the start of `buf`. Does not check the CRC or
    /// that `buf` holds the whole batch; see [`validate_batch`].
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let h = Self::read(buf)?;
        h.check()?;
        Ok(h)
    }

    /// Read the header checking only its framing (length and magic), not its fields.
    fn read(buf: &[u8]) -> Result<Self> {
        if buf.len() < LOG_OVERHEAD {
            return Err(Error::corrupt(format!(
                "{} bytes are too few for a record batch header",
                buf.len()
            )));
        }
        let batch_length = be_i32(buf, off::LENGTH);
        let min_len = (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i32;
        if batch_length < min_len {
            return Err(Error::corrupt(format!(
                "record batch length {batch_length} is smaller than the minimum {min_len}"
            )));
        }
        if buf.len() <= off::MAGIC {
            return Err(Error::corrupt(
                "record batch header is truncated before magic",
            ));
        }
        let magic = buf[off::MAGIC] as i8;
        if magic != MAGIC_V2 {
            return Err(Error::corrupt(format!(
                "record batch has magic {magic}; only magic 2 (RecordBatch v2) is supported"
            )));
        }
        if buf.len() < RECORD_BATCH_OVERHEAD {
            return Err(Error::corrupt(format!(
                "{} bytes are too few for a {RECORD_BATCH_OVERHEAD}-byte record batch header",
                buf.len()
            )));
        }
        let h = BatchHeader {
            base_offset: be_i64(buf, off::BASE_OFFSET),
            batch_length,
            partition_leader_epoch: be_i32(buf, off::LEADER_EPOCH),
            magic,
            crc: be_i32(buf, off::CRC) as u32,
            attributes: be_i16(buf, off::ATTRIBUTES),
            last_offset_delta: be_i32(buf, off::LAST_OFFSET_DELTA),
            base_timestamp: be_i64(buf, off::BASE_TIMESTAMP),
            max_timestamp: be_i64(buf, off::MAX_TIMESTAMP),
            producer_id: be_i64(buf, off::PRODUCER_ID),
            producer_epoch: be_i16(buf, off::PRODUCER_EPOCH),
            base_sequence: be_i32(buf, off::BASE_SEQUENCE),
            record_count: be_i32(buf, off::RECORD_COUNT),
        };
        Ok(h)
    }

    fn check(&self) -> Result<()> {
        if self.last_offset_delta < 0 {
            return Err(Error::corrupt(format!(
                "record batch has negative lastOffsetDelta {}",
                self.last_offset_delta
            )));
        }
        if self.record_count < 0 {
            return Err(Error::corrupt(format!(
                "record batch has negative record count {}",
                self.record_count
            )));
        }
        if self.record_count as i64 > self.last_offset_delta as i64 + 1 {
            return Err(Error::corrupt(format!(
                "record batch claims {} records but lastOffsetDelta is {}",
                self.record_count, self.last_offset_delta
            )));
        }
        if self.base_offset < 0
            || self
                .base_offset
                .checked_add(self.last_offset_delta as i64)
                .is_none()
        {
            return Err(Error::corrupt(format!(
                "record batch has invalid base offset {}",
                self.base_offset
            )));
        }
        // Every record takes at least 7 bytes uncompressed; an uncompressed batch cannot
        // claim more records than its bytes could hold.
        let body = self.batch_length as i64 - (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i64;
        if self.compression_id() == 0 && self.record_count as i64 * 7 > body {
            return Err(Error::corrupt(format!(
                "record batch claims {} records in {body} bytes",
                self.record_count
            )));
        }
        Compression::from_id(self.compression_id())?;
        Ok(())
    }

    /// Bytes the whole batch occupies, header included.
    #[inline]
    pub fn size_in_bytes(&self) -> usize {
        LOG_OVERHEAD + self.batch_length as usize
    }
    #[inline]
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }
    #[inline]
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }
    #[inline]
    fn compression_id(&self) -> u8 {
        (self.attributes & ATTR_COMPRESSION_MASK) as u8
    }
    pub fn compression(&self) -> Compression {
        Compression::from_id(self.compression_id()).unwrap_or(Compression::None)
    }
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & ATTR_TIMESTAMP_TYPE != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes & ATTR_DELETE_HORIZON != 0
    }
}

/// CRC-32C over attributes..end, as stored in the `crc` field.
#[inline]
pub fn compute_crc(batch: &[u8]) -> u32 {
    super::crc32c(&batch[off::ATTRIBUTES..])
}

/// Validate the one batch that starts at `buf[0]`: header sanity, that all its bytes are
/// present, and its CRC. Returns the header; `buf` may hold more bytes after the batch.
pub fn validate_batch(buf: &[u8]) -> Result<BatchHeader> {
    // The CRC is checked before the fields it covers, so a damaged byte reads as
    // CORRUPT_MESSAGE (retriable) rather than as some other, final error.
    let h = BatchHeader::read(buf)?;
    let size = h.size_in_bytes();
    if buf.len() < size {
        return Err(Error::corrupt(format!(
            "record batch at offset {} claims {size} bytes but only {} are present",
            h.base_offset,
            buf.len()
        )));
    }
    let crc = compute_crc(&buf[..size]);
    if crc != h.crc {
        return Err(Error::corrupt(format!(
            "record batch at offset {} is corrupt: stored crc {:#010x}, computed crc {crc:#010x}",
            h.base_offset, h.crc
        )));
    }
    h.check()?;
    Ok(h)
}

/// Walk a buffer of concatenated batches, validating each (header and CRC). The buffer must
/// end exactly at a batch boundary.
pub fn validate_batches(buf: &[u8]) -> Result<Vec<(usize, BatchHeader)>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let h = validate_batch(&buf[pos..]).map_err(|e| match e {
            Error::CorruptRecord(m) => Error::CorruptRecord(format!("at byte {pos}: {m}")),
            other => other,
        })?;
        out.push((pos, h));
        pos += h.size_in_bytes();
    }
    Ok(out)
}

/// Split a buffer of concatenated batches at their boundaries, checking each header but not
/// the CRCs (see [`validate_batches`]). On failure the error is the one a full validation
/// gives, so a damaged byte still reads as a CRC failure.
pub fn frame_batches(buf: &[u8]) -> Result<Vec<(usize, BatchHeader)>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        match BatchHeader::parse(&buf[pos..]) {
            Ok(h) if h.size_in_bytes() <= buf.len() - pos => {
                out.push((pos, h));
                pos += h.size_in_bytes();
            }
            _ => return validate_batches(buf),
        }
    }
    Ok(out)
}

/// Where one record's fields lie in the records buffer it was parsed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordSpan {
    pub attributes: i8,
    pub offset_delta: i32,
    pub timestamp_delta: i64,
    pub key: Option<Range<usize>>,
    pub value: Option<Range<usize>>,
    pub headers: Vec<(Range<usize>, Option<Range<usize>>)>,
}

/// One record, borrowed from its batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    pub offset: i64,
    pub timestamp: i64,
    pub attributes: i8,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: Vec<RecordHeader<'a>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordHeader<'a> {
    pub key: &'a [u8],
    pub value: Option<&'a [u8]>,
}

fn range_of(base: &[u8], part: &[u8]) -> Range<usize> {
    let start = part.as_ptr() as usize - base.as_ptr() as usize;
    start..start + part.len()
}

/// Parse every record of a batch from its (decompressed) records bytes.
///
/// With `strict`, offset deltas must be exactly 0, 1, 2, ... and the last must equal
/// `lastOffsetDelta` (what a producer sends); otherwise they need only increase within
/// `0..=lastOffsetDelta` (a compacted batch has gaps).
pub fn parse_records(h: &BatchHeader, records: &[u8], strict: bool) -> Result<Vec<RecordSpan>> {
    walk_records::<true>(h, records, strict, false)
}

/// Check every record as [`parse_records`] does, without keeping anything (no allocation).
pub fn check_records(h: &BatchHeader, records: &[u8], strict: bool) -> Result<()> {
    walk_records::<false>(h, records, strict, false).map(drop)
}

/// [`check_records`] for a compacted topic (`cleanup.policy=compact`), which also refuses a
/// record without a key, as Kafka's LogValidator does: the cleaner could never tell which
/// record such a one supersedes. The error is [`Error::InvalidRecord`] (INVALID_RECORD).
pub fn check_records_have_keys(h: &BatchHeader, records: &[u8], strict: bool) -> Result<()> {
    walk_records::<false>(h, records, strict, true).map(drop)
}

fn walk_records<const KEEP: bool>(
    h: &BatchHeader,
    records: &[u8],
    strict: bool,
    require_key: bool,
) -> Result<Vec<RecordSpan>> {
    let count = h.record_count as usize;
    // Each record takes at least 7 bytes; never preallocate on a lying count.
    let mut out = Vec::with_capacity(if KEEP {
        count.min(records.len() / 7 + 1)
    } else {
        0
    });
    let mut r = Reader::new(records);
    let mut last_delta: i64 = -1;
    for i in 0..count {
        let len = r.varint("record length")?;
        if len < 0 {
            return Err(Error::corrupt(format!(
                "record {i} has negative length {len}"
            )));
        }
        let body = r.bytes(len as usize, "record")?;
        let mut rr = Reader::new(body);
        let attributes = rr.i8("record attributes")?;
        let timestamp_delta = rr.varlong("record timestamp delta")?;
        let offset_delta = rr.varint("record offset delta")?;
        let ok = if strict {
            offset_delta as i64 == last_delta + 1
        } else {
            offset_delta as i64 > last_delta
        };
        if !ok || offset_delta > h.last_offset_delta {
            return Err(Error::corrupt(format!(
                "record {i} has offset delta {offset_delta} after {last_delta} (lastOffsetDelta {})",
                h.last_offset_delta
            )));
        }
        last_delta = offset_delta as i64;
        let key = rr
            .nullable_bytes("record key")?
            .map(|k| range_of(records, k));
        if require_key && key.is_none() {
            return Err(Error::invalid(format!(
                "record {i} (offset delta {offset_delta}) has no key"
            )));
        }
        let value = rr
            .nullable_bytes("record value")?
            .map(|v| range_of(records, v));
        let n_headers = rr.varint("header count")?;
        if n_headers < 0 || n_headers as usize > rr.remaining() {
            return Err(Error::corrupt(format!(
                "record {i} has invalid header count {n_headers}"
            )));
        }
        let mut headers = Vec::with_capacity(if KEEP { n_headers as usize } else { 0 });
        for _ in 0..n_headers {
            let hk = rr
                .nullable_bytes("header key")?
                .ok_or_else(|| Error::corrupt(format!("record {i} has a null header key")))?;
            let hv = rr.nullable_bytes("header value")?;
            if KEEP {
                headers.push((range_of(records, hk), hv.map(|v| range_of(records, v))));
            }
        }
        if rr.remaining() != 0 {
            return Err(Error::corrupt(format!(
                "record {i} has {} bytes left over after its fields",
                rr.remaining()
            )));
        }
        if KEEP {
            out.push(RecordSpan {
                attributes,
                offset_delta,
                timestamp_delta,
                key,
                value,
                headers,
            });
        }
    }
    if r.remaining() != 0 {
        return Err(Error::corrupt(format!(
            "record batch has {} bytes after its {count} records",
            r.remaining()
        )));
    }
    if strict && count > 0 && last_delta != h.last_offset_delta as i64 {
        return Err(Error::corrupt(format!(
            "record batch lastOffsetDelta is {} but its last record has delta {last_delta}",
            h.last_offset_delta
        )));
    }
    Ok(out)
}

impl RecordSpan {
    /// The record's absolute offset and timestamp, Kafka-style: with LogAppendTime every
    /// record carries the batch's max timestamp.
    pub fn resolve<'a>(&self, h: &BatchHeader, records: &'a [u8]) -> Record<'a> {
        let timestamp = match h.timestamp_type() {
            TimestampType::LogAppendTime => h.max_timestamp,
            TimestampType::CreateTime => h.base_timestamp.wrapping_add(self.timestamp_delta),
        };
        Record {
            offset: h.base_offset + self.offset_delta as i64,
            timestamp,
            attributes: self.attributes,
            key: self.key.clone().map(|r| &records[r]),
            value: self.value.clone().map(|r| &records[r]),
            headers: self
                .headers
                .iter()
                .map(|(k, v)| RecordHeader {
                    key: &records[k.clone()],
                    value: v.clone().map(|v| &records[v]),
                })
                .collect(),
        }
    }
}

/// The records section of a batch, decompressed when needed.
pub fn records_bytes<'a>(
    h: &BatchHeader,
    batch: &'a [u8],
    scratch: &'a mut Vec<u8>,
) -> Result<&'a [u8]> {
    let body = &batch[RECORD_BATCH_OVERHEAD..h.size_in_bytes()];
    match h.compression() {
        Compression::None => Ok(body),
        codec => {
            codec.decompress_into(body, scratch)?;
            Ok(&scratch[..])
        }
    }
}

/// A fully decoded batch: its header and records, owning what it needs.
#[derive(Debug, Clone)]
pub struct DecodedBatch {
    pub header: BatchHeader,
    /// Decompressed records, or `None` when the spans index the batch itself
    /// (uncompressed: spans are relative to `batch[61..]`).
    pub decompressed: Option<Vec<u8>>,
    /// Where the batch starts in the buffer it was decoded from.
    pub position: usize,
    pub records: Vec<RecordSpan>,
}

impl DecodedBatch {
    /// The bytes the spans index, given the buffer the batch was decoded from.
    pub fn records_buf<'a>(&'a self, source: &'a [u8]) -> &'a [u8] {
        match &self.decompressed {
            Some(v) => v,
            None => {
                &source[self.position + RECORD_BATCH_OVERHEAD
                    ..self.position + self.header.size_in_bytes()]
            }
        }
    }
}

/// Decode every batch in `buf`: validate headers (and CRCs when `verify_crc`), decompress,
/// parse every record. A trailing partial batch (as a fetch may return) is ignored when
/// `allow_partial_tail`; otherwise it is an error.
pub fn decode_batches(
    buf: &[u8],
    verify_crc: bool,
    allow_partial_tail: bool,
) -> Result<Vec<DecodedBatch>> {
    decode_batches_up_to(buf, verify_crc, allow_partial_tail, usize::MAX)
}

/// [`decode_batches`], stopping after the first batch that brings the decoded record count
/// to `max_records` or more, so a consumer decompresses only what it is about to hand out
/// (a fetch of highly compressed batches can expand a thousandfold).
pub fn decode_batches_up_to(
    buf: &[u8],
    verify_crc: bool,
    allow_partial_tail: bool,
    max_records: usize,
) -> Result<Vec<DecodedBatch>> {
    let mut out = Vec::new();
    let mut pos = 0;
    let mut decoded = 0usize;
    while pos < buf.len() && decoded < max_records {
        let rest = &buf[pos..];
        let h = match BatchHeader::read(rest) {
            Ok(h) if h.size_in_bytes() <= rest.len() => h,
            Ok(_) | Err(_) if allow_partial_tail && is_partial(rest) => break,
            Ok(h) => {
                return Err(Error::corrupt(format!(
                    "record batch at byte {pos} claims {} bytes but only {} remain",
                    h.size_in_bytes(),
                    rest.len()
                )))
            }
            Err(e) => return Err(e),
        };
        let batch = &rest[..h.size_in_bytes()];
        if verify_crc {
            validate_batch(batch)?;
        } else {
            h.check()?;
        }
        let mut scratch = Vec::new();
        let spans = {
            let recs = records_bytes(&h, batch, &mut scratch)?;
            parse_records(&h, recs, false)?
        };
        let decompressed = if h.compression() == Compression::None {
            None
        } else {
            Some(scratch)
        };
        decoded += spans.len();
        out.push(DecodedBatch {
            header: h,
            decompressed,
            position: pos,
            records: spans,
        });
        pos += h.size_in_bytes();
    }
    Ok(out)
}

/// True when `rest` is a prefix of a batch that was cut short: too short for a header, or a
/// sane header whose batch extends past the end.
/// The offset after the last complete batch in `buf` (fetched batch bytes, perhaps with a
/// partial batch at the end), read from batch headers alone; `None` when `buf` holds no
/// complete batch or its framing is broken (decoding it reports why).
pub fn next_offset_after(buf: &[u8]) -> Option<i64> {
    let mut pos = 0;
    let mut next = None;
    while pos < buf.len() {
        let rest = &buf[pos..];
        let Ok(h) = BatchHeader::parse(rest) else {
            break;
        };
        if h.size_in_bytes() > rest.len() {
            break;
        }
        next = Some(h.next_offset());
        pos += h.size_in_bytes();
    }
    next
}

fn is_partial(rest: &[u8]) -> bool {
    if rest.len() < LOG_OVERHEAD {
        return true;
    }
    let length = be_i32(rest, off::LENGTH);
    if length < (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i32
        || rest.len() >= LOG_OVERHEAD + length as usize
    {
        return false;
    }
    rest.len() <= off::MAGIC || rest[off::MAGIC] as i8 == MAGIC_V2
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::builder::BatchBuilder;
    use proptest::prelude::*;

    fn sample(c: Compression) -> Vec<u8> {
        let mut b = BatchBuilder::new(c);
        b.producer(7, 1, 0);
        for i in 0..5i64 {
            b.append(
                1_000 + i,
                Some(format!("k{i}").as_bytes()),
                Some(b"value"),
                &[(b"h".as_slice(), Some(b"v".as_slice()))],
            );
        }
        b.append(2_000, None, None, &[]);
        b.build().unwrap()
    }

    #[test]
    fn next_offset_after_reads_headers_and_ignores_a_partial_tail() {
        let mut b = BatchBuilder::new(Compression::None);
        b.base_offset(10);
        b.append(0, None, Some(b"x"), &[]);
        b.append(0, None, Some(b"y"), &[]);
        let first = b.build().unwrap();
        let mut data = first.clone();
        data.extend_from_slice(&sample(Compression::Zstd)); // base offset 0, 6 records
        assert_eq!(next_offset_after(&first), Some(12));
        assert_eq!(next_offset_after(&data), Some(6));
        assert_eq!(next_offset_after(&data[..data.len() - 1]), Some(12));
        assert_eq!(next_offset_after(&first[..30]), None);
        assert_eq!(next_offset_after(&[]), None);
    }

    #[test]
    fn roundtrip() {
        for c in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let bytes = sample(c);
            let batches = decode_batches(&bytes, true, false).unwrap();
            assert_eq!(batches.len(), 1);
            let b = &batches[0];
            assert_eq!(b.header.record_count, 6);
            assert_eq!(b.header.producer_id, 7);
            assert_eq!(b.header.max_timestamp, 2_000);
            let recs = b.records_buf(&bytes);
            let r0 = b.records[0].resolve(&b.header, recs);
            assert_eq!(r0.key, Some(&b"k0"[..]));
            assert_eq!(r0.value, Some(&b"value"[..]));
            assert_eq!(r0.headers[0].key, b"h");
            let r5 = b.records[5].resolve(&b.header, recs);
            assert_eq!(
                (r5.offset, r5.timestamp, r5.key, r5.value),
                (5, 2_000, None, None)
            );
        }
    }

    #[test]
    fn every_flipped_byte_fails_validation() {
        for c in [Compression::None, Compression::Zstd] {
            let good = sample(c);
            for i in 0..good.len() {
                // baseOffset and partitionLeaderEpoch are outside the CRC by design.
                if (off::LEADER_EPOCH..off::MAGIC).contains(&i) || i < off::LENGTH {
                    continue;
                }
                let mut bad = good.clone();
                bad[i] ^= 0x01;
                assert!(
                    validate_batch(&bad).is_err(),
                    "flip at byte {i} was accepted ({c:?})"
                );
            }
        }
    }

    #[test]
    fn lying_lengths_are_errors() {
        let good = sample(Compression::None);
        let mut bad = good.clone();
        bad[off::LENGTH..off::LENGTH + 4].copy_from_slice(&(-5i32).to_be_bytes());
        assert!(validate_batch(&bad).is_err());
        let mut bad = good.clone();
        bad[off::LENGTH..off::LENGTH + 4].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(validate_batch(&bad).is_err());
        assert!(decode_batches(&good[..good.len() - 1], true, false).is_err());
        assert!(decode_batches(&good[..good.len() - 1], true, true)
            .unwrap()
            .is_empty());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]
        #[test]
        fn decoder_never_panics(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = decode_batches(&data, true, true);
            let _ = decode_batches(&data, false, false);
            let _ = validate_batches(&data);
        }

        #[test]
        fn decoder_never_panics_on_mutated_batches(
            c in 0u8..5, flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6)
        ) {
            let mut data = sample(Compression::from_id(c).unwrap());
            for (i, v) in flips {
                let n = data.len();
                data[i % n] = v;
            }
            // Skip the CRC so the mutations reach the record parser and the codecs.
            let _ = decode_batches(&data, false, false);
        }
    }
}
