//! Fetched RecordBatch v2 bytes straight to one Arrow record batch with the schema of Spark's
//! Kafka source, for the PySpark data source: the per-record work (CRC, decompression, record
//! parsing, copying keys and values into columns) stays in Rust, and Python receives whole
//! columns.
//!
//! The schema is `KafkaRecordToRowConverter.kafkaSchema` in Spark's Kafka connector, in the
//! Arrow types PySpark's `to_arrow_schema` gives for it (every field nullable, as Spark's
//! `StructField` defaults):
//!
//! ```text
//! key            binary
//! value          binary
//! topic          utf8
//! partition      int32
//! offset         int64
//! timestamp      timestamp[us, tz=UTC]   (Kafka's milliseconds * 1000; TimestampType)
//! timestampType  int32                   (0 CreateTime, 1 LogAppendTime)
//! headers        list<element: struct<key: utf8, value: binary>>   (only when asked for;
//!                null for a record without headers, as Spark's converter gives)
//! ```
//!
//! Contract of [`decode_to_arrow`]:
//! - Returns the records with `from_offset <= offset < until_offset`; control batches are
//!   skipped; a trailing partial batch (as a size-limited fetch may return) is ignored.
//! - `next_offset` is the offset to fetch next: after the last whole batch read, and never
//!   below `from_offset` (so it may pass `until_offset` when a batch straddles it).
//! - With `verify_crc`, every whole batch's CRC is checked, also of batches outside the
//!   range; a damaged batch is CORRUPT_MESSAGE wherever it lies. Batches outside the range
//!   are not decompressed.
//! - Arrow's 32-bit offsets cap each column at 2 GiB: decoding stops before the batch that
//!   would pass that, and `next_offset` says where to go on (an error only when no record
//!   fits at all).
//! - Nothing panics on malformed input; every failure is an [`Error`].
//!
//! How: the batches are framed first (headers only); the columns are preallocated from the
//! headers' record counts and batch sizes. Then the batches go through in windows of about
//! [`WINDOW_BYTES`]: within a window they are checked, decompressed and parsed in parallel
//! (rayon), each into a scratch buffer kept from window to window (fresh buffers for every
//! batch cost more in page faults than the decompression itself), and a window's records
//! are appended to the columns, in order, while the next window is being decompressed.

use std::ops::Range;
use std::sync::Arc;

use arrow_array::{
    ArrayRef, BinaryArray, Int32Array, Int64Array, ListArray, RecordBatch, StringArray,
    StructArray, TimestampMicrosecondArray,
};
use arrow_buffer::{Buffer, NullBuffer, NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use rayon::prelude::*;

use super::batch::{parse_records, validate_batch, BatchHeader, RecordSpan};
use super::compression::Compression;
use super::{off, TimestampType, LOG_OVERHEAD, MAGIC_V2, RECORD_BATCH_OVERHEAD};
use crate::error::{Error, Result};

/// The time zone PySpark gives `TimestampType` columns in Arrow (the JVM reads only
/// zone-aware timestamps as `TimestampType`; a zone-less one is `TimestampNTZType`).
pub const SPARK_TIMESTAMP_TZ: &str = "UTC";

/// Largest byte total one Arrow `binary` / `utf8` column (or list) can index.
const MAX_COLUMN_BYTES: usize = i32::MAX as usize;

/// Batch bytes (as fetched) decoded together in one parallel step: enough to keep every
/// thread busy, small enough that the decompressed window stays near the caches.
pub const WINDOW_BYTES: usize = 4 << 20;

/// What to decode: the partition the bytes were fetched from and the offset range wanted.
#[derive(Debug, Clone, Copy)]
pub struct ArrowDecodeOptions<'a> {
    pub topic: &'a str,
    pub partition: i32,
    /// First offset wanted (inclusive).
    pub from_offset: i64,
    /// End of the range (exclusive).
    pub until_offset: i64,
    /// Add the `headers` column.
    pub include_headers: bool,
    pub verify_crc: bool,
}

/// The decoded records and where the next fetch starts.
#[derive(Debug, Clone)]
pub struct ArrowRecords {
    pub batch: RecordBatch,
    pub next_offset: i64,
}

fn header_entry_fields() -> Fields {
    Fields::from(vec![
        Field::new("key", DataType::Utf8, true),
        Field::new("value", DataType::Binary, true),
    ])
}

fn header_element() -> Arc<Field> {
    Arc::new(Field::new(
        "element",
        DataType::Struct(header_entry_fields()),
        true,
    ))
}

/// Spark's Kafka source schema, in Arrow types (see the module docs).
pub fn kafka_schema(include_headers: bool) -> SchemaRef {
    let mut fields = vec![
        Field::new("key", DataType::Binary, true),
        Field::new("value", DataType::Binary, true),
        Field::new("topic", DataType::Utf8, true),
        Field::new("partition", DataType::Int32, true),
        Field::new("offset", DataType::Int64, true),
        Field::new(
            "timestamp",
            DataType::Timestamp(TimeUnit::Microsecond, Some(SPARK_TIMESTAMP_TZ.into())),
            true,
        ),
        Field::new("timestampType", DataType::Int32, true),
    ];
    if include_headers {
        fields.push(Field::new(
            "headers",
            DataType::List(header_element()),
            true,
        ));
    }
    Arc::new(Schema::new(fields))
}

fn arrow_error(e: ArrowError) -> Error {
    // Only reachable through a bug here: the columns are built to match the schema.
    Error::InvalidRequest(format!("building the Arrow record batch failed: {e}"))
}

/// Decode fetched batches into one Arrow record batch; see the module docs for the contract.
pub fn decode_to_arrow(data: &[u8], opts: &ArrowDecodeOptions<'_>) -> Result<ArrowRecords> {
    decode_with_limit(data, opts, MAX_COLUMN_BYTES)
}

/// [`decode_to_arrow`] with a smaller column cap, so tests can reach it.
fn decode_with_limit(
    data: &[u8],
    opts: &ArrowDecodeOptions<'_>,
    max_column_bytes: usize,
) -> Result<ArrowRecords> {
    let frames = frame(data, opts.verify_crc)?;
    let wanted = |h: &BatchHeader| {
        !h.is_control() && h.last_offset() >= opts.from_offset && h.base_offset < opts.until_offset
    };
    let mut windows = Vec::new();
    let mut start = 0;
    while start < frames.len() {
        let mut end = start;
        let mut bytes = 0;
        while end < frames.len() && (end == start || bytes < WINDOW_BYTES) {
            bytes += frames[end].1.size_in_bytes();
            end += 1;
        }
        windows.push(&frames[start..end]);
        start = end;
    }
    let prepare = |window: &[(usize, BatchHeader)], scratch: &mut Vec<Vec<u8>>| {
        prepare_window(data, window, scratch, &wanted, opts.verify_crc)
    };

    let mut out = Appender {
        columns: Columns::preallocated(data, &frames, &wanted, opts),
        sizes: Sizes::default(),
        next_offset: opts.from_offset,
    };
    // Two scratch pools: window k is appended from one while window k + 1 is decompressed
    // into the other, so writing the columns overlaps with decompression.
    let (mut current, mut following) = (Vec::new(), Vec::new());
    let mut prepared = windows.first().map(|w| prepare(w, &mut current));
    for (k, window) in windows.iter().enumerate() {
        let this = prepared.take().unwrap_or_default();
        let (go_on, next) = rayon::join(
            || out.append_window(data, window, this, &current, opts, max_column_bytes),
            || windows.get(k + 1).map(|w| prepare(w, &mut following)),
        );
        if !go_on? {
            break;
        }
        prepared = next;
        std::mem::swap(&mut current, &mut following);
    }
    let batch = out.columns.finish(opts)?;
    Ok(ArrowRecords {
        batch,
        next_offset: out.next_offset,
    })
}

/// Per batch of a window, in order: `None` when it holds no wanted records, else the
/// spans of its records (in its scratch buffer when compressed, else in `data`).
type PreparedWindow = Vec<Result<Option<Vec<RecordSpan>>>>;

/// Check, decompress and parse the batches of one window, in parallel.
fn prepare_window(
    data: &[u8],
    window: &[(usize, BatchHeader)],
    scratch: &mut Vec<Vec<u8>>,
    wanted: &(impl Fn(&BatchHeader) -> bool + Sync),
    verify_crc: bool,
) -> PreparedWindow {
    if scratch.len() < window.len() {
        scratch.resize_with(window.len(), Vec::new);
    }
    let prepare = |(&(pos, h), buf): (&(usize, BatchHeader), &mut Vec<u8>)| {
        prepare_batch(data, pos, h, wanted(&h), verify_crc, buf)
    };
    let scratch = &mut scratch[..window.len()];
    if window.len() > 1 {
        window
            .par_iter()
            .zip(scratch.par_iter_mut())
            .map(prepare)
            .collect()
    } else {
        window.iter().zip(scratch.iter_mut()).map(prepare).collect()
    }
}

/// The columns being filled, the byte totals so far and the next offset to fetch.
struct Appender {
    columns: Columns,
    sizes: Sizes,
    next_offset: i64,
}

impl Appender {
    /// Append one prepared window in batch order. Returns false when a batch would pass
    /// the column cap (it and everything after it are left out); the first failure of the
    /// window, in byte order, is the error.
    fn append_window(
        &mut self,
        data: &[u8],
        window: &[(usize, BatchHeader)],
        prepared: PreparedWindow,
        scratch: &[Vec<u8>],
        opts: &ArrowDecodeOptions<'_>,
        max_column_bytes: usize,
    ) -> Result<bool> {
        for (i, spans) in prepared.into_iter().enumerate() {
            let (pos, h) = window[i];
            if let Some(spans) = spans? {
                let records = if h.compression() == Compression::None {
                    &data[pos + RECORD_BATCH_OVERHEAD..pos + h.size_in_bytes()]
                } else {
                    &scratch[i][..]
                };
                let batch = Decoded {
                    header: &h,
                    spans: in_range(&h, &spans, opts),
                    records,
                };
                let added = Sizes::of(&batch, opts.include_headers);
                let total = self.sizes.plus(&added);
                if !total.fits(opts.topic.len(), max_column_bytes) {
                    if self.sizes.records == 0 {
                        return Err(Error::InvalidRequest(format!(
                            "the records of the batch at offset {} do not fit in an Arrow \
                             record batch (2 GiB per column); fetch less at a time",
                            h.base_offset
                        )));
                    }
                    return Ok(false);
                }
                self.columns.append(&batch, &added);
                self.sizes = total;
            }
            self.next_offset = self.next_offset.max(h.next_offset());
        }
        Ok(true)
    }
}

/// Check one batch's CRC (when asked) and, when it holds wanted records, decompress it into
/// `scratch` (unless uncompressed) and parse its records.
fn prepare_batch(
    data: &[u8],
    pos: usize,
    h: BatchHeader,
    wanted: bool,
    verify_crc: bool,
    scratch: &mut Vec<u8>,
) -> Result<Option<Vec<RecordSpan>>> {
    let batch = &data[pos..pos + h.size_in_bytes()];
    let mut decode = || {
        if verify_crc {
            validate_batch(batch)?;
        }
        if !wanted {
            return Ok(None);
        }
        let body = &batch[RECORD_BATCH_OVERHEAD..];
        let records = match h.compression() {
            Compression::None => body,
            codec => {
                codec.decompress_into(body, scratch)?;
                &scratch[..]
            }
        };
        parse_records(&h, records, false).map(Some)
    };
    decode().map_err(|e| at_byte(pos, e))
}

/// A batch ready to append: its header, its records in range, and the bytes they index.
struct Decoded<'a> {
    header: &'a BatchHeader,
    spans: &'a [RecordSpan],
    records: &'a [u8],
}

/// The spans of a batch's records within `[from_offset, until_offset)` (they are in offset
/// order).
fn in_range<'s>(
    h: &BatchHeader,
    spans: &'s [RecordSpan],
    opts: &ArrowDecodeOptions<'_>,
) -> &'s [RecordSpan] {
    let offset = |s: &RecordSpan| h.base_offset + s.offset_delta as i64;
    let first = spans.partition_point(|s| offset(s) < opts.from_offset);
    let end = spans.partition_point(|s| offset(s) < opts.until_offset);
    &spans[first..end.max(first)]
}

/// Byte and item totals of records, for reserving and for the 2 GiB cap.
#[derive(Debug, Default, Clone, Copy)]
struct Sizes {
    records: usize,
    key_bytes: usize,
    value_bytes: usize,
    headers: usize,
    header_key_bytes: usize,
    header_value_bytes: usize,
}

fn len(r: &Option<Range<usize>>) -> usize {
    r.as_ref().map_or(0, |r| r.len())
}

impl Sizes {
    fn of(b: &Decoded<'_>, include_headers: bool) -> Self {
        let mut s = Sizes {
            records: b.spans.len(),
            ..Sizes::default()
        };
        for span in b.spans {
            s.key_bytes += len(&span.key);
            s.value_bytes += len(&span.value);
            if include_headers {
                s.headers += span.headers.len();
                for (k, v) in &span.headers {
                    s.header_key_bytes += k.len();
                    s.header_value_bytes += len(v);
                }
            }
        }
        s
    }

    fn plus(&self, o: &Sizes) -> Sizes {
        Sizes {
            records: self.records + o.records,
            key_bytes: self.key_bytes + o.key_bytes,
            value_bytes: self.value_bytes + o.value_bytes,
            headers: self.headers + o.headers,
            header_key_bytes: self.header_key_bytes + o.header_key_bytes,
            header_value_bytes: self.header_value_bytes + o.header_value_bytes,
        }
    }

    fn fits(&self, topic_len: usize, max: usize) -> bool {
        // A header key that is not UTF-8 is stored lossily: up to 3 bytes (U+FFFD) per byte.
        self.key_bytes <= max
            && self.value_bytes <= max
            && self.records.saturating_mul(topic_len) <= max
            && self.headers <= max
            && self.header_key_bytes.saturating_mul(3) <= max
            && self.header_value_bytes <= max
    }
}

/// A `binary` (or `utf8`) column being filled: offsets, bytes and validity.
struct BytesColumn {
    offsets: Vec<i32>,
    bytes: Vec<u8>,
    nulls: NullBufferBuilder,
}

impl BytesColumn {
    fn with_capacity(items: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(items + 1);
        offsets.push(0);
        BytesColumn {
            offsets,
            bytes: Vec::with_capacity(bytes),
            nulls: NullBufferBuilder::new(items),
        }
    }

    fn reserve(&mut self, items: usize, bytes: usize) {
        self.offsets.reserve(items);
        self.bytes.reserve(bytes);
    }

    /// `Sizes::fits` keeps the byte total within i32, so the offsets cannot wrap.
    #[inline]
    fn append(&mut self, value: Option<&[u8]>) {
        match value {
            Some(v) => {
                self.bytes.extend_from_slice(v);
                self.nulls.append_non_null();
            }
            None => self.nulls.append_null(),
        }
        self.offsets.push(self.bytes.len() as i32);
    }

    fn parts(mut self) -> (OffsetBuffer<i32>, Buffer, Option<NullBuffer>) {
        let offsets = OffsetBuffer::new(ScalarBuffer::from(self.offsets));
        (offsets, Buffer::from_vec(self.bytes), self.nulls.finish())
    }

    fn finish_binary(self) -> Result<BinaryArray> {
        let (offsets, bytes, nulls) = self.parts();
        BinaryArray::try_new(offsets, bytes, nulls).map_err(arrow_error)
    }

    fn finish_utf8(self) -> Result<StringArray> {
        let (offsets, bytes, nulls) = self.parts();
        StringArray::try_new(offsets, bytes, nulls).map_err(arrow_error)
    }
}

/// The `headers` column: a list per record (null when it has none) of (key, value) structs.
struct HeadersColumn {
    offsets: Vec<i32>,
    nulls: NullBufferBuilder,
    keys: BytesColumn,
    values: BytesColumn,
    count: usize,
}

impl HeadersColumn {
    fn with_capacity(records: usize) -> Self {
        let mut offsets = Vec::with_capacity(records + 1);
        offsets.push(0);
        HeadersColumn {
            offsets,
            nulls: NullBufferBuilder::new(records),
            keys: BytesColumn::with_capacity(0, 0),
            values: BytesColumn::with_capacity(0, 0),
            count: 0,
        }
    }

    fn append(&mut self, records: &[u8], headers: &[(Range<usize>, Option<Range<usize>>)]) {
        if headers.is_empty() {
            self.nulls.append_null();
        } else {
            self.nulls.append_non_null();
            for (k, v) in headers {
                let key = &records[k.clone()];
                // Kafka's Java client reads header keys as UTF-8, replacing bad bytes.
                match std::str::from_utf8(key) {
                    Ok(_) => self.keys.append(Some(key)),
                    Err(_) => self
                        .keys
                        .append(Some(String::from_utf8_lossy(key).as_bytes())),
                }
                self.values.append(v.clone().map(|r| &records[r]));
            }
            self.count += headers.len();
        }
        // `Sizes::fits` keeps the header count within i32.
        self.offsets.push(self.count as i32);
    }

    fn finish(mut self) -> Result<ArrayRef> {
        let entries = StructArray::try_new(
            header_entry_fields(),
            vec![
                Arc::new(self.keys.finish_utf8()?) as ArrayRef,
                Arc::new(self.values.finish_binary()?),
            ],
            None,
        )
        .map_err(arrow_error)?;
        let list = ListArray::try_new(
            header_element(),
            OffsetBuffer::new(ScalarBuffer::from(self.offsets)),
            Arc::new(entries),
            self.nulls.finish(),
        )
        .map_err(arrow_error)?;
        Ok(Arc::new(list))
    }
}

/// Every column being filled.
struct Columns {
    keys: BytesColumn,
    values: BytesColumn,
    offsets: Vec<i64>,
    timestamps: Vec<i64>,
    timestamp_types: Vec<i32>,
    headers: Option<HeadersColumn>,
}

impl Columns {
    /// Sized from the headers of the wanted batches: their record counts (capped by what
    /// the bytes could hold, so a lying count cannot reserve gigabytes) and their sizes
    /// (exact room for an uncompressed batch's keys and values; a compressed batch's
    /// records will be bigger, and `append` reserves what its exact size needs).
    fn preallocated(
        data: &[u8],
        frames: &[(usize, BatchHeader)],
        wanted: &impl Fn(&BatchHeader) -> bool,
        opts: &ArrowDecodeOptions<'_>,
    ) -> Self {
        let (mut records, mut bytes) = (0usize, 0usize);
        for (_, h) in frames.iter().filter(|(_, h)| wanted(h)) {
            records += h.record_count as usize;
            bytes += h.size_in_bytes() - RECORD_BATCH_OVERHEAD;
        }
        // Every record takes at least 7 bytes uncompressed; compressed ones that take fewer
        // only make the columns grow once or twice.
        let records = records.min(data.len() / 7 + 1);
        Columns {
            keys: BytesColumn::with_capacity(records, 0),
            values: BytesColumn::with_capacity(records, bytes),
            offsets: Vec::with_capacity(records),
            timestamps: Vec::with_capacity(records),
            timestamp_types: Vec::with_capacity(records),
            headers: opts
                .include_headers
                .then(|| HeadersColumn::with_capacity(records)),
        }
    }

    fn append(&mut self, b: &Decoded<'_>, sizes: &Sizes) {
        let n = sizes.records;
        self.keys.reserve(n, sizes.key_bytes);
        self.values.reserve(n, sizes.value_bytes);
        self.offsets.reserve(n);
        self.timestamps.reserve(n);
        self.timestamp_types.reserve(n);
        if let Some(hc) = self.headers.as_mut() {
            hc.offsets.reserve(n);
            hc.keys.reserve(sizes.headers, sizes.header_key_bytes);
            hc.values.reserve(sizes.headers, sizes.header_value_bytes);
        }
        let h = b.header;
        let ts_type = h.timestamp_type();
        for span in b.spans {
            // As RecordSpan::resolve: with LogAppendTime every record has maxTimestamp.
            let ts_ms = match ts_type {
                TimestampType::LogAppendTime => h.max_timestamp,
                TimestampType::CreateTime => h.base_timestamp.wrapping_add(span.timestamp_delta),
            };
            self.keys.append(span.key.clone().map(|r| &b.records[r]));
            self.values
                .append(span.value.clone().map(|r| &b.records[r]));
            self.offsets.push(h.base_offset + span.offset_delta as i64);
            self.timestamps.push(ts_ms.saturating_mul(1000));
            self.timestamp_types.push(ts_type as i32);
            if let Some(hc) = self.headers.as_mut() {
                hc.append(b.records, &span.headers);
            }
        }
    }

    fn finish(self, opts: &ArrowDecodeOptions<'_>) -> Result<RecordBatch> {
        let n = self.offsets.len();
        let topic = StringArray::try_new(
            OffsetBuffer::from_repeated_length(opts.topic.len(), n),
            Buffer::from_vec(opts.topic.repeat(n).into_bytes()),
            None,
        )
        .map_err(arrow_error)?;
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(self.keys.finish_binary()?),
            Arc::new(self.values.finish_binary()?),
            Arc::new(topic),
            Arc::new(Int32Array::from(vec![opts.partition; n])),
            Arc::new(Int64Array::from(self.offsets)),
            Arc::new(
                TimestampMicrosecondArray::from(self.timestamps).with_timezone(SPARK_TIMESTAMP_TZ),
            ),
            Arc::new(Int32Array::from(self.timestamp_types)),
        ];
        if let Some(hc) = self.headers {
            columns.push(hc.finish()?);
        }
        RecordBatch::try_new(kafka_schema(opts.include_headers), columns).map_err(arrow_error)
    }
}

fn at_byte(pos: usize, e: Error) -> Error {
    match e {
        Error::CorruptRecord(m) => Error::CorruptRecord(format!("at byte {pos}: {m}")),
        other => other,
    }
}

/// The whole batches in `data` and their headers, stopping at a trailing partial batch.
/// Headers are sanity-checked; CRCs are left to the caller. A header that fails its checks
/// reports a CRC failure when the CRC is also wrong (with `verify_crc`), as
/// `decode_batches` does, so a damaged byte reads as CORRUPT_MESSAGE.
fn frame(data: &[u8], verify_crc: bool) -> Result<Vec<(usize, BatchHeader)>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let rest = &data[pos..];
        if is_partial(rest) {
            break;
        }
        let h = match BatchHeader::parse(rest) {
            Ok(h) if h.size_in_bytes() <= rest.len() => h,
            Ok(h) => {
                return Err(Error::corrupt(format!(
                    "record batch at byte {pos} claims {} bytes but only {} remain",
                    h.size_in_bytes(),
                    rest.len()
                )))
            }
            Err(e) if verify_crc => {
                return Err(at_byte(pos, validate_batch(rest).err().unwrap_or(e)))
            }
            Err(e) => return Err(at_byte(pos, e)),
        };
        out.push((pos, h));
        pos += h.size_in_bytes();
    }
    Ok(out)
}

/// True when `rest` is a prefix of a batch that was cut short (as `decode_batches` judges
/// it): too short for the length field, or a sane length (and magic, when present) whose
/// batch extends past the end.
fn is_partial(rest: &[u8]) -> bool {
    if rest.len() < LOG_OVERHEAD {
        return true;
    }
    let length = i32::from_be_bytes([
        rest[off::LENGTH],
        rest[off::LENGTH + 1],
        rest[off::LENGTH + 2],
        rest[off::LENGTH + 3],
    ]);
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
    use crate::record::batch::decode_batches;
    use crate::record::builder::BatchBuilder;
    use arrow_array::{Array, BinaryArray};
    use proptest::prelude::*;

    const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    fn opts(from: i64, until: i64, include_headers: bool) -> ArrowDecodeOptions<'static> {
        ArrowDecodeOptions {
            topic: "t",
            partition: 3,
            from_offset: from,
            until_offset: until,
            include_headers,
            verify_crc: true,
        }
    }

    /// `batches` batches of `per` records each, base offsets 0, per, 2 per, ...; record i has
    /// key `k{i}` (null for every third), value `v{i}` (null for every fifth), one header
    /// on odd records.
    fn sample(c: Compression, batches: i64, per: i64) -> Vec<u8> {
        let mut out = Vec::new();
        for b in 0..batches {
            let mut bb = BatchBuilder::new(c);
            bb.base_offset(b * per);
            if b % 2 == 1 {
                bb.timestamp_type(TimestampType::LogAppendTime);
            }
            for j in 0..per {
                let i = b * per + j;
                let k = format!("k{i}");
                let v = format!("v{i}");
                let hv = format!("h{i}");
                let hdrs: Vec<(&[u8], Option<&[u8]>)> = if i % 2 == 1 {
                    vec![(b"hk".as_slice(), Some(hv.as_bytes()))]
                } else {
                    vec![]
                };
                bb.append(
                    1_000 + i,
                    (i % 3 != 0).then_some(k.as_bytes()),
                    (i % 5 != 0).then_some(v.as_bytes()),
                    &hdrs,
                );
            }
            out.extend(bb.build().unwrap());
        }
        out
    }

    fn col<'a, T: 'static>(batch: &'a RecordBatch, name: &str) -> &'a T {
        batch
            .column_by_name(name)
            .unwrap()
            .as_any()
            .downcast_ref::<T>()
            .unwrap()
    }

    /// Every column against what `decode_batches` gives for the same bytes.
    fn check_against_decode_batches(data: &[u8], o: &ArrowDecodeOptions<'_>) -> ArrowRecords {
        let out = decode_to_arrow(data, o).unwrap();
        let decoded = decode_batches(data, true, true).unwrap();
        let mut want = Vec::new();
        for b in &decoded {
            if b.header.is_control() {
                continue;
            }
            let buf = b.records_buf(data);
            for s in &b.records {
                let r = s.resolve(&b.header, buf);
                if r.offset >= o.from_offset && r.offset < o.until_offset {
                    want.push((r, b.header.timestamp_type() as i32));
                }
            }
        }
        let batch = &out.batch;
        assert_eq!(batch.num_rows(), want.len());
        let keys = col::<BinaryArray>(batch, "key");
        let values = col::<BinaryArray>(batch, "value");
        let offsets = col::<Int64Array>(batch, "offset");
        let ts = col::<TimestampMicrosecondArray>(batch, "timestamp");
        let tst = col::<Int32Array>(batch, "timestampType");
        let topic = col::<StringArray>(batch, "topic");
        let partition = col::<Int32Array>(batch, "partition");
        for (i, (r, t)) in want.iter().enumerate() {
            assert_eq!(keys.is_valid(i).then(|| keys.value(i)), r.key);
            assert_eq!(values.is_valid(i).then(|| values.value(i)), r.value);
            assert_eq!(offsets.value(i), r.offset);
            assert_eq!(ts.value(i), r.timestamp * 1000);
            assert_eq!(tst.value(i), *t);
            assert_eq!(topic.value(i), o.topic);
            assert_eq!(partition.value(i), o.partition);
        }
        if o.include_headers {
            let headers = col::<ListArray>(batch, "headers");
            for (i, (r, _)) in want.iter().enumerate() {
                if r.headers.is_empty() {
                    assert!(headers.is_null(i));
                    continue;
                }
                let entries = headers.value(i);
                let entries = entries.as_any().downcast_ref::<StructArray>().unwrap();
                let hk = entries.column(0).as_any().downcast_ref::<StringArray>();
                let hv = entries.column(1).as_any().downcast_ref::<BinaryArray>();
                let (hk, hv) = (hk.unwrap(), hv.unwrap());
                assert_eq!(entries.len(), r.headers.len());
                for (j, h) in r.headers.iter().enumerate() {
                    assert_eq!(hk.value(j).as_bytes(), h.key);
                    assert_eq!(hv.is_valid(j).then(|| hv.value(j)), h.value);
                }
            }
        }
        out
    }

    #[test]
    fn every_codec_matches_decode_batches() {
        for c in CODECS {
            let data = sample(c, 4, 7);
            for headers in [false, true] {
                let out = check_against_decode_batches(&data, &opts(0, i64::MAX, headers));
                assert_eq!(out.batch.num_rows(), 28);
                assert_eq!(out.next_offset, 28);
                assert_eq!(out.batch.schema(), kafka_schema(headers));
            }
        }
    }

    #[test]
    fn range_cuts_inside_batches() {
        let data = sample(Compression::Zstd, 4, 7);
        for (from, until) in [(3, 25), (0, 1), (6, 7), (7, 14), (27, 100), (5, 5), (9, 2)] {
            let out = check_against_decode_batches(&data, &opts(from, until, true));
            assert_eq!(out.batch.num_rows() as i64, (until.min(28) - from).max(0));
            assert_eq!(out.next_offset, 28.max(from));
        }
    }

    #[test]
    fn control_batches_and_partial_tails() {
        let mut data = sample(Compression::None, 1, 3);
        let mut ctl = BatchBuilder::new(Compression::None);
        ctl.base_offset(3).control(true);
        ctl.append(5, Some(b"\0\0\0\0"), Some(b"\0\0\0\0\0\0"), &[]);
        data.extend(ctl.build().unwrap());
        let whole = data.len();
        data.extend(&sample(Compression::Lz4, 1, 3)[..20]);
        let out = check_against_decode_batches(&data, &opts(0, i64::MAX, false));
        assert_eq!(out.batch.num_rows(), 3);
        assert_eq!(out.next_offset, 4);
        for cut in 0..LOG_OVERHEAD {
            let out = decode_to_arrow(&data[..whole + cut], &opts(0, 99, false)).unwrap();
            assert_eq!((out.batch.num_rows(), out.next_offset), (3, 4));
        }
        let empty = decode_to_arrow(&[], &opts(10, 20, true)).unwrap();
        assert_eq!((empty.batch.num_rows(), empty.next_offset), (0, 10));
    }

    #[test]
    fn a_flipped_byte_is_corrupt_unless_crc_is_skipped() {
        let good = sample(Compression::None, 2, 3);
        let second = good.len() / 2;
        let mut bad = good.clone();
        // The last byte of the second batch's last value (a record body byte).
        let at = good.len() - 2;
        bad[at] ^= 0x01;
        assert!(second < at);
        let err = decode_to_arrow(&bad, &opts(0, 3, false)).unwrap_err();
        assert!(matches!(err, Error::CorruptRecord(_)), "{err}");
        let mut o = opts(0, 99, false);
        o.verify_crc = false;
        assert_eq!(decode_to_arrow(&bad, &o).unwrap().batch.num_rows(), 6);
    }

    #[test]
    fn stops_before_the_batch_that_would_overflow_a_column() {
        // Odd records carry one header keyed `hk`, budgeted at 3 bytes a byte (a lossy
        // UTF-8 key may grow so): records 3..14 hold 6 of them (36 bytes), 3..21 hold 9 (54),
        // so a 40-byte cap stops after the second batch.
        let data = sample(Compression::Gzip, 4, 7);
        let out = decode_with_limit(&data, &opts(3, 99, true), 40).unwrap();
        assert_eq!((out.batch.num_rows(), out.next_offset), (11, 14));
        let err = decode_with_limit(&data, &opts(3, 99, true), 4).unwrap_err();
        assert!(matches!(err, Error::InvalidRequest(_)), "{err}");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
        #[test]
        fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..400), crc: bool) {
            let mut o = opts(0, i64::MAX, true);
            o.verify_crc = crc;
            let _ = decode_to_arrow(&data, &o);
        }

        #[test]
        fn any_range_matches_decode_batches(
            c in 0u8..5, batches in 1i64..4, per in 1i64..6, from in -2i64..20, len in 0i64..20,
        ) {
            let data = sample(Compression::from_id(c).unwrap(), batches, per);
            check_against_decode_batches(&data, &opts(from, from + len, true));
        }
    }
}
