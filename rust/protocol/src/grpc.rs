//! Protobuf wire encoding of the messages that carry record batches (proto/rillet/v1), for
//! the hot paths: a message is written straight into its final buffer and read in place, so
//! record batches are copied once (into the request or response) and never out again.
//!
//! * `ProduceRequest`, written by the producer and read in place by the broker (batches
//!   located, then appended to the log from the request's own bytes; a request with
//!   structured `records`, field 3 of Partition, is left to the generated classes):
//!
//!   ```text
//!   ProduceRequest   1 acks int32, 2 timeout_ms int32, 3 transactional_id string (optional),
//!                    4 topics repeated Topic
//!   Topic            1 name string, 2 partitions repeated Partition
//!   Partition        1 partition int32, 2 record_batches bytes
//!   ```
//!
//! * `FetchResponse`, written by the broker (record batches read from the log straight into
//!   place) and read by the consumer (batches located, not copied):
//!
//!   ```text
//!   FetchResponse    1 throttle_time_ms int32, 2 error_code, 3 error_message string,
//!                    4 topics repeated Topic
//!   Topic            1 name string, 2 partitions repeated Partition
//!   Partition        1 partition int32, 2 error_code, 3 error_message string,
//!                    4 high_watermark int64, 5 last_stable_offset int64,
//!                    6 log_start_offset int64, 7 diverging_epoch EpochEndOffset,
//!                    9 aborted_transactions repeated AbortedTransaction,
//!                    10 preferred_read_replica int32, 11 record_batches bytes
//!   EpochEndOffset   1 epoch int32, 2 end_offset int64
//!   AbortedTransaction 1 producer_id int64, 2 first_offset int64
//!   ```
//!
//!   The reader skips the fields it does not list (current_leader and structured records,
//!   which a consumer that asks for batches is not sent).
//!
//! Fields are written in field-number order without proto3 defaults, as the generated
//! encoders do; the Python tests compare both directions with the generated classes.

use std::mem::MaybeUninit;
use std::ops::Range;

use rillet_core::error::{Error, Result};

const WIRE_VARINT: u32 = 0;
const WIRE_I64: u32 = 1;
const WIRE_LEN: u32 = 2;
const WIRE_I32: u32 = 5;

/// One partition's batches in a produce request: `record_batches` are written one after
/// the other into the partition's one `record_batches` field, in order.
#[derive(Debug, Clone)]
pub struct PartitionData<'a> {
    pub partition: i32,
    pub record_batches: Vec<&'a [u8]>,
}

/// One topic's partitions in a produce request.
#[derive(Debug, Clone)]
pub struct TopicData<'a> {
    pub name: &'a str,
    pub partitions: Vec<PartitionData<'a>>,
}

/// A `ProduceRequest` with batch bytes: [`ProduceRequest::encoded_len`] bytes, written by
/// [`ProduceRequest::encode_into`].
#[derive(Debug, Clone)]
pub struct ProduceRequest<'a> {
    pub acks: i32,
    pub timeout_ms: i32,
    pub transactional_id: Option<&'a str>,
    pub topics: Vec<TopicData<'a>>,
}

fn varint_len(v: u64) -> usize {
    // 7 bits a byte; 0 still takes one.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// int32 fields are sign-extended to 64 bits on the wire (a negative one takes 10 bytes).
fn int32_len(v: i32) -> usize {
    varint_len(v as i64 as u64)
}

fn key_len(field: u32) -> usize {
    varint_len((field << 3) as u64)
}

fn len_field_len(field: u32, len: usize) -> usize {
    key_len(field) + varint_len(len as u64) + len
}

fn int32_field_len(field: u32, v: i32) -> usize {
    if v == 0 {
        0
    } else {
        key_len(field) + int32_len(v)
    }
}

fn int64_field_len(field: u32, v: i64) -> usize {
    if v == 0 {
        0
    } else {
        key_len(field) + varint_len(v as u64)
    }
}

fn string_field_len(field: u32, s: &str) -> usize {
    if s.is_empty() {
        0
    } else {
        len_field_len(field, s.len())
    }
}

/// Writes into a buffer that is not initialized yet; every encoder checks that it wrote
/// every byte of it.
struct Writer<'b> {
    buf: &'b mut [MaybeUninit<u8>],
    pos: usize,
}

impl Writer<'_> {
    fn put(&mut self, b: u8) {
        self.buf[self.pos].write(b);
        self.pos += 1;
    }

    fn put_slice(&mut self, data: &[u8]) {
        let dst = &mut self.buf[self.pos..self.pos + data.len()];
        // SAFETY: `dst` has exactly `data.len()` bytes (the indexing checked the bounds).
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), dst.as_mut_ptr().cast::<u8>(), data.len())
        };
        self.pos += data.len();
    }

    /// The next `n` bytes, for a caller that writes all of them.
    fn reserve(&mut self, n: usize) -> &mut [MaybeUninit<u8>] {
        let at = self.pos;
        self.pos += n;
        &mut self.buf[at..at + n]
    }

    /// Checked at the end of every encoder: the buffer is then fully initialized.
    fn finish(self) {
        assert_eq!(
            self.pos,
            self.buf.len(),
            "the encoder wrote the wrong number of bytes"
        );
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.put((v as u8) | 0x80);
            v >>= 7;
        }
        self.put(v as u8);
    }

    fn key(&mut self, field: u32, wire_type: u32) {
        self.varint(((field << 3) | wire_type) as u64);
    }

    fn int32_field(&mut self, field: u32, v: i32) {
        if v != 0 {
            self.key(field, WIRE_VARINT);
            self.varint(v as i64 as u64);
        }
    }

    fn int64_field(&mut self, field: u32, v: i64) {
        if v != 0 {
            self.key(field, WIRE_VARINT);
            self.varint(v as u64);
        }
    }

    fn string_field(&mut self, field: u32, s: &str) {
        if !s.is_empty() {
            self.bytes_field(field, s.as_bytes());
        }
    }

    fn len_prefix(&mut self, field: u32, len: usize) {
        self.key(field, WIRE_LEN);
        self.varint(len as u64);
    }

    fn bytes_field(&mut self, field: u32, data: &[u8]) {
        self.len_prefix(field, data.len());
        self.put_slice(data);
    }
}

/// `len` bytes written by `encode` into a new vector (no zero-filling first).
fn encode_to_vec<E>(
    len: usize,
    encode: impl FnOnce(&mut [MaybeUninit<u8>]) -> std::result::Result<(), E>,
) -> std::result::Result<Vec<u8>, E> {
    let mut out = Vec::with_capacity(len);
    encode(&mut out.spare_capacity_mut()[..len])?;
    // SAFETY: every encoder ends with `Writer::finish`, which checks that it wrote all `len`
    // bytes.
    unsafe { out.set_len(len) };
    Ok(out)
}

impl PartitionData<'_> {
    fn batches_len(&self) -> usize {
        self.record_batches.iter().map(|b| b.len()).sum()
    }

    fn body_len(&self) -> usize {
        let n = self.batches_len();
        let batches = if n == 0 { 0 } else { len_field_len(2, n) };
        int32_field_len(1, self.partition) + batches
    }
}

impl TopicData<'_> {
    fn body_len(&self) -> usize {
        let name = if self.name.is_empty() {
            0
        } else {
            len_field_len(1, self.name.len())
        };
        name + self
            .partitions
            .iter()
            .map(|p| len_field_len(2, p.body_len()))
            .sum::<usize>()
    }
}

impl ProduceRequest<'_> {
    /// The request's size on the wire.
    pub fn encoded_len(&self) -> usize {
        int32_field_len(1, self.acks)
            + int32_field_len(2, self.timeout_ms)
            + self
                .transactional_id
                .map_or(0, |id| len_field_len(3, id.len()))
            + self
                .topics
                .iter()
                .map(|t| len_field_len(4, t.body_len()))
                .sum::<usize>()
    }

    /// Write the request into `buf`, which must be exactly [`Self::encoded_len`] bytes (and
    /// need not be initialized: every byte is written).
    pub fn encode_into(&self, buf: &mut [MaybeUninit<u8>]) {
        assert_eq!(buf.len(), self.encoded_len(), "buffer of the wrong size");
        let mut w = Writer { buf, pos: 0 };
        w.int32_field(1, self.acks);
        w.int32_field(2, self.timeout_ms);
        if let Some(id) = self.transactional_id {
            w.bytes_field(3, id.as_bytes());
        }
        for t in &self.topics {
            w.len_prefix(4, t.body_len());
            if !t.name.is_empty() {
                w.bytes_field(1, t.name.as_bytes());
            }
            for p in &t.partitions {
                w.len_prefix(2, p.body_len());
                w.int32_field(1, p.partition);
                let n = p.batches_len();
                if n > 0 {
                    w.len_prefix(2, n);
                    for b in &p.record_batches {
                        w.put_slice(b);
                    }
                }
            }
        }
        w.finish();
    }

    pub fn encode(&self) -> Vec<u8> {
        encode_to_vec(self.encoded_len(), |buf| {
            self.encode_into(buf);
            Ok::<_, std::convert::Infallible>(())
        })
        .unwrap_or_else(|never| match never {})
    }
}

/// One partition of a produce request read in place.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProducePartitionView {
    pub partition: i32,
    /// The byte range of its `record_batches` in the request.
    pub record_batches: Range<usize>,
    /// It carries structured `records` (field 3), which only the generated classes decode.
    pub structured: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProduceTopicView<'a> {
    pub name: &'a str,
    pub partitions: Vec<ProducePartitionView>,
}

/// A `ProduceRequest` read in place: batches are located, not copied.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProduceRequestView<'a> {
    pub acks: i32,
    pub timeout_ms: i32,
    pub transactional_id: Option<&'a str>,
    pub topics: Vec<ProduceTopicView<'a>>,
}

impl<'a> ProduceRequestView<'a> {
    pub fn decode(buf: &'a [u8]) -> Result<ProduceRequestView<'a>> {
        let mut out = ProduceRequestView::default();
        let mut r = Reader::new(buf, 0..buf.len());
        while let Some((field, wire)) = r.key()? {
            match (field, wire) {
                (1, WIRE_VARINT) => out.acks = r.int32()?,
                (2, WIRE_VARINT) => out.timeout_ms = r.int32()?,
                (3, WIRE_LEN) => out.transactional_id = Some(r.string()?),
                (4, WIRE_LEN) => {
                    let mut t = ProduceTopicView::default();
                    let mut tr = Reader::new(buf, r.len_delimited()?);
                    while let Some((field, wire)) = tr.key()? {
                        match (field, wire) {
                            (1, WIRE_LEN) => t.name = tr.string()?,
                            (2, WIRE_LEN) => {
                                let range = tr.len_delimited()?;
                                t.partitions.push(decode_produce_partition(buf, range)?);
                            }
                            _ => tr.skip(wire)?,
                        }
                    }
                    out.topics.push(t);
                }
                _ => r.skip(wire)?,
            }
        }
        Ok(out)
    }

    /// Some partition carries structured records.
    pub fn structured(&self) -> bool {
        self.topics
            .iter()
            .any(|t| t.partitions.iter().any(|p| p.structured))
    }
}

fn decode_produce_partition(buf: &[u8], range: Range<usize>) -> Result<ProducePartitionView> {
    let mut p = ProducePartitionView {
        record_batches: range.start..range.start,
        ..ProducePartitionView::default()
    };
    let mut r = Reader::new(buf, range);
    while let Some((field, wire)) = r.key()? {
        match (field, wire) {
            (1, WIRE_VARINT) => p.partition = r.int32()?,
            (2, WIRE_LEN) => p.record_batches = r.len_delimited()?,
            (3, WIRE_LEN) => {
                r.skip(wire)?;
                p.structured = true;
            }
            _ => r.skip(wire)?,
        }
    }
    Ok(p)
}

// --------------------------------------------------------------------------- FetchResponse

/// One partition of a `FetchResponse`. When written, `record_batches` is the length of the
/// batch bytes that the writer's `fill` puts in place; when read, it is their byte range in
/// the response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchedPartition<'a> {
    pub partition: i32,
    pub error_code: i32,
    pub error_message: &'a str,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// (epoch, end offset) when the fetching follower's log diverged (KIP-320).
    pub diverging_epoch: Option<(i32, i64)>,
    /// READ_COMMITTED: (producer id, first offset) of each aborted transaction overlapping
    /// the batches.
    pub aborted_transactions: Vec<(i64, i64)>,
    pub preferred_read_replica: i32,
    pub record_batches: Range<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchedTopic<'a> {
    pub name: &'a str,
    pub partitions: Vec<FetchedPartition<'a>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FetchResponse<'a> {
    pub throttle_time_ms: i32,
    pub error_code: i32,
    pub error_message: &'a str,
    pub topics: Vec<FetchedTopic<'a>>,
}

fn epoch_body_len(epoch: (i32, i64)) -> usize {
    int32_field_len(1, epoch.0) + int64_field_len(2, epoch.1)
}

fn aborted_body_len(txn: (i64, i64)) -> usize {
    int64_field_len(1, txn.0) + int64_field_len(2, txn.1)
}

impl FetchedPartition<'_> {
    fn batches_len(&self) -> usize {
        self.record_batches.end - self.record_batches.start
    }

    fn body_len(&self) -> usize {
        let batches = self.batches_len();
        int32_field_len(1, self.partition)
            + int32_field_len(2, self.error_code)
            + string_field_len(3, self.error_message)
            + int64_field_len(4, self.high_watermark)
            + int64_field_len(5, self.last_stable_offset)
            + int64_field_len(6, self.log_start_offset)
            + self
                .diverging_epoch
                .map_or(0, |e| len_field_len(7, epoch_body_len(e)))
            + self
                .aborted_transactions
                .iter()
                .map(|&t| len_field_len(9, aborted_body_len(t)))
                .sum::<usize>()
            + int32_field_len(10, self.preferred_read_replica)
            + if batches == 0 {
                0
            } else {
                len_field_len(11, batches)
            }
    }
}

impl FetchedTopic<'_> {
    fn body_len(&self) -> usize {
        string_field_len(1, self.name)
            + self
                .partitions
                .iter()
                .map(|p| len_field_len(2, p.body_len()))
                .sum::<usize>()
    }
}

impl<'a> FetchResponse<'a> {
    pub fn encoded_len(&self) -> usize {
        int32_field_len(1, self.throttle_time_ms)
            + int32_field_len(2, self.error_code)
            + string_field_len(3, self.error_message)
            + self
                .topics
                .iter()
                .map(|t| len_field_len(4, t.body_len()))
                .sum::<usize>()
    }

    /// Write the response into `buf` (exactly [`Self::encoded_len`] bytes, not necessarily
    /// initialized). For each partition with batch bytes, `fill(topic index, partition
    /// index, slice)` writes every byte of its slice.
    pub fn encode_into(
        &self,
        buf: &mut [MaybeUninit<u8>],
        mut fill: impl FnMut(usize, usize, &mut [MaybeUninit<u8>]) -> Result<()>,
    ) -> Result<()> {
        assert_eq!(buf.len(), self.encoded_len(), "buffer of the wrong size");
        let mut w = Writer { buf, pos: 0 };
        w.int32_field(1, self.throttle_time_ms);
        w.int32_field(2, self.error_code);
        w.string_field(3, self.error_message);
        for (ti, t) in self.topics.iter().enumerate() {
            w.len_prefix(4, t.body_len());
            w.string_field(1, t.name);
            for (pi, p) in t.partitions.iter().enumerate() {
                w.len_prefix(2, p.body_len());
                w.int32_field(1, p.partition);
                w.int32_field(2, p.error_code);
                w.string_field(3, p.error_message);
                w.int64_field(4, p.high_watermark);
                w.int64_field(5, p.last_stable_offset);
                w.int64_field(6, p.log_start_offset);
                if let Some(e) = p.diverging_epoch {
                    w.len_prefix(7, epoch_body_len(e));
                    w.int32_field(1, e.0);
                    w.int64_field(2, e.1);
                }
                for &t in &p.aborted_transactions {
                    w.len_prefix(9, aborted_body_len(t));
                    w.int64_field(1, t.0);
                    w.int64_field(2, t.1);
                }
                w.int32_field(10, p.preferred_read_replica);
                let n = p.batches_len();
                if n > 0 {
                    w.len_prefix(11, n);
                    fill(ti, pi, w.reserve(n))?;
                }
            }
        }
        w.finish();
        Ok(())
    }

    /// [`Self::encode_into`] a new vector.
    pub fn encode(
        &self,
        fill: impl FnMut(usize, usize, &mut [MaybeUninit<u8>]) -> Result<()>,
    ) -> Result<Vec<u8>> {
        encode_to_vec(self.encoded_len(), |buf| self.encode_into(buf, fill))
    }

    /// Read a response in place: strings borrow from `buf`, batches are byte ranges of it.
    pub fn decode(buf: &'a [u8]) -> Result<FetchResponse<'a>> {
        let mut out = FetchResponse::default();
        let mut r = Reader::new(buf, 0..buf.len());
        while let Some((field, wire)) = r.key()? {
            match (field, wire) {
                (1, WIRE_VARINT) => out.throttle_time_ms = r.int32()?,
                (2, WIRE_VARINT) => out.error_code = r.int32()?,
                (3, WIRE_LEN) => out.error_message = r.string()?,
                (4, WIRE_LEN) => {
                    let range = r.len_delimited()?;
                    out.topics.push(decode_topic(buf, range)?);
                }
                _ => r.skip(wire)?,
            }
        }
        Ok(out)
    }
}

fn decode_topic(buf: &[u8], range: Range<usize>) -> Result<FetchedTopic<'_>> {
    let mut t = FetchedTopic::default();
    let mut r = Reader::new(buf, range);
    while let Some((field, wire)) = r.key()? {
        match (field, wire) {
            (1, WIRE_LEN) => t.name = r.string()?,
            (2, WIRE_LEN) => {
                let range = r.len_delimited()?;
                t.partitions.push(decode_partition(buf, range)?);
            }
            _ => r.skip(wire)?,
        }
    }
    Ok(t)
}

fn decode_partition(buf: &[u8], range: Range<usize>) -> Result<FetchedPartition<'_>> {
    let mut p = FetchedPartition {
        record_batches: range.start..range.start,
        ..FetchedPartition::default()
    };
    let mut r = Reader::new(buf, range);
    while let Some((field, wire)) = r.key()? {
        match (field, wire) {
            (1, WIRE_VARINT) => p.partition = r.int32()?,
            (2, WIRE_VARINT) => p.error_code = r.int32()?,
            (3, WIRE_LEN) => p.error_message = r.string()?,
            (4, WIRE_VARINT) => p.high_watermark = r.varint()? as i64,
            (5, WIRE_VARINT) => p.last_stable_offset = r.varint()? as i64,
            (6, WIRE_VARINT) => p.log_start_offset = r.varint()? as i64,
            (7, WIRE_LEN) => {
                // Fields of a repeated embedded message merge.
                let mut e = p.diverging_epoch.unwrap_or((0, 0));
                let mut er = Reader::new(buf, r.len_delimited()?);
                while let Some((f, w)) = er.key()? {
                    match (f, w) {
                        (1, WIRE_VARINT) => e.0 = er.int32()?,
                        (2, WIRE_VARINT) => e.1 = er.varint()? as i64,
                        _ => er.skip(w)?,
                    }
                }
                p.diverging_epoch = Some(e);
            }
            (9, WIRE_LEN) => {
                let mut t = (0i64, 0i64);
                let mut tr = Reader::new(buf, r.len_delimited()?);
                while let Some((f, w)) = tr.key()? {
                    match (f, w) {
                        (1, WIRE_VARINT) => t.0 = tr.varint()? as i64,
                        (2, WIRE_VARINT) => t.1 = tr.varint()? as i64,
                        _ => tr.skip(w)?,
                    }
                }
                p.aborted_transactions.push(t);
            }
            (10, WIRE_VARINT) => p.preferred_read_replica = r.int32()?,
            (11, WIRE_LEN) => p.record_batches = r.len_delimited()?,
            _ => r.skip(wire)?,
        }
    }
    Ok(p)
}

/// Bounds-checked reading of protobuf wire data in `buf[range]`.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
}

fn malformed(what: &str) -> Error {
    Error::corrupt(format!("malformed protobuf message: {what}"))
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], range: Range<usize>) -> Self {
        Reader {
            buf,
            pos: range.start,
            end: range.end,
        }
    }

    fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            if self.pos >= self.end {
                return Err(malformed("truncated varint"));
            }
            let b = self.buf[self.pos];
            self.pos += 1;
            if shift == 63 && b > 1 {
                return Err(malformed("varint overflows 64 bits"));
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(malformed("varint longer than 10 bytes"))
    }

    fn int32(&mut self) -> Result<i32> {
        Ok(self.varint()? as i64 as i32)
    }

    /// The next field's (number, wire type), or None at the end.
    fn key(&mut self) -> Result<Option<(u32, u32)>> {
        if self.pos >= self.end {
            return Ok(None);
        }
        let k = self.varint()?;
        let field = k >> 3;
        if field == 0 || field > u32::MAX as u64 >> 3 {
            return Err(malformed("bad field number"));
        }
        Ok(Some((field as u32, (k & 7) as u32)))
    }

    fn len_delimited(&mut self) -> Result<Range<usize>> {
        let n = self.varint()?;
        let remaining = (self.end - self.pos) as u64;
        if n > remaining {
            return Err(malformed("length past the end of the message"));
        }
        let start = self.pos;
        self.pos += n as usize;
        Ok(start..self.pos)
    }

    fn string(&mut self) -> Result<&'a str> {
        let range = self.len_delimited()?;
        std::str::from_utf8(&self.buf[range]).map_err(|_| malformed("a string is not UTF-8"))
    }

    fn skip(&mut self, wire: u32) -> Result<()> {
        let n = match wire {
            WIRE_VARINT => return self.varint().map(drop),
            WIRE_I64 => 8,
            WIRE_LEN => return self.len_delimited().map(drop),
            WIRE_I32 => 4,
            _ => return Err(malformed("unsupported wire type")),
        };
        if self.end - self.pos < n {
            return Err(malformed("truncated fixed-width field"));
        }
        self.pos += n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_lengths() {
        for (v, n) in [
            (0u64, 1),
            (1, 1),
            (127, 1),
            (128, 2),
            (16_383, 2),
            (16_384, 3),
            (u64::MAX, 10),
        ] {
            assert_eq!(varint_len(v), n, "{v}");
        }
        assert_eq!(int32_len(-1), 10);
    }

    #[test]
    fn encodes_like_protobuf() {
        // Bytes worked out by hand from the protobuf encoding rules.
        let batch = [0xAAu8; 3];
        let req = ProduceRequest {
            acks: -1,
            timeout_ms: 300,
            transactional_id: None,
            topics: vec![TopicData {
                name: "t",
                partitions: vec![
                    PartitionData {
                        partition: 0,
                        record_batches: vec![&batch],
                    },
                    PartitionData {
                        partition: 2,
                        record_batches: vec![&batch[..1], &batch[1..]],
                    },
                ],
            }],
        };
        let mut want = vec![0x08];
        want.extend([0xFF; 9]);
        want.push(0x01); // acks = -1
        want.extend([0x10, 0xAC, 0x02]); // timeout_ms = 300
        want.extend([0x22, 0x13]); // topics, 19 bytes
        want.extend([0x0A, 0x01, b't']);
        want.extend([0x12, 0x05, 0x12, 0x03, 0xAA, 0xAA, 0xAA]); // partition 0 (default)
        want.extend([0x12, 0x07, 0x08, 0x02, 0x12, 0x03, 0xAA, 0xAA, 0xAA]);
        assert_eq!(req.encode(), want);
        assert_eq!(req.encoded_len(), want.len());
    }

    #[test]
    fn large_batches_get_multibyte_lengths() {
        let batch = vec![7u8; 300_000];
        let req = ProduceRequest {
            acks: 1,
            timeout_ms: 30_000,
            transactional_id: Some("tx"),
            topics: vec![TopicData {
                name: "topic",
                partitions: vec![PartitionData {
                    partition: 5,
                    record_batches: vec![&batch],
                }],
            }],
        };
        let out = req.encode();
        assert_eq!(out.len(), req.encoded_len());
        assert!(out.ends_with(&batch));
    }

    fn sample_response() -> (FetchResponse<'static>, Vec<Vec<u8>>) {
        let batches = vec![vec![1u8; 5], vec![], vec![9u8; 200]];
        let part = |partition: i32, len: usize| FetchedPartition {
            partition,
            high_watermark: 1_000_000_000_000,
            last_stable_offset: 17,
            log_start_offset: 3,
            preferred_read_replica: -1,
            record_batches: 0..len,
            ..FetchedPartition::default()
        };
        let response = FetchResponse {
            throttle_time_ms: 0,
            error_code: 0,
            error_message: "",
            topics: vec![
                FetchedTopic {
                    name: "t",
                    partitions: vec![part(0, 5), part(1, 0)],
                },
                FetchedTopic {
                    name: "other",
                    partitions: vec![
                        FetchedPartition {
                            error_code: -1,
                            error_message: "boom",
                            diverging_epoch: Some((4, 99)),
                            ..part(7, 200)
                        },
                        FetchedPartition {
                            aborted_transactions: vec![(5, 0), (1 << 40, 1 << 33)],
                            ..part(8, 0)
                        },
                    ],
                },
            ],
        };
        (response, batches)
    }

    #[test]
    fn fetch_responses_round_trip() {
        let (response, batches) = sample_response();
        let mut k = 0;
        let buf = response
            .encode(|_, _, slot| {
                while batches[k].is_empty() {
                    k += 1;
                }
                for (dst, src) in slot.iter_mut().zip(&batches[k]) {
                    dst.write(*src);
                }
                k += 1;
                Ok(())
            })
            .unwrap();
        let back = FetchResponse::decode(&buf).unwrap();
        assert_eq!(back.topics.len(), 2);
        for (t, want) in back.topics.iter().zip(&response.topics) {
            assert_eq!(t.name, want.name);
            for (p, w) in t.partitions.iter().zip(&want.partitions) {
                let got = &buf[p.record_batches.clone()];
                assert_eq!(got.len(), w.record_batches.len());
                assert_eq!(
                    (
                        p.partition,
                        p.error_code,
                        p.error_message,
                        p.diverging_epoch
                    ),
                    (
                        w.partition,
                        w.error_code,
                        w.error_message,
                        w.diverging_epoch
                    )
                );
                assert_eq!(
                    (p.high_watermark, p.last_stable_offset, p.log_start_offset),
                    (w.high_watermark, w.last_stable_offset, w.log_start_offset)
                );
                assert_eq!(p.aborted_transactions, w.aborted_transactions);
                assert_eq!(p.preferred_read_replica, -1);
            }
        }
        assert_eq!(
            &buf[back.topics[1].partitions[0].record_batches.clone()],
            &batches[2][..]
        );
    }

    #[test]
    fn fetch_decode_refuses_every_truncation_without_panicking() {
        let (response, _) = sample_response();
        let buf = response
            .encode(|_, _, slot| {
                for b in slot.iter_mut() {
                    b.write(7);
                }
                Ok(())
            })
            .unwrap();
        for cut in 0..buf.len() {
            // A cut at a field boundary of the top-level message is a valid shorter message.
            let _ = FetchResponse::decode(&buf[..cut]);
        }
        assert!(FetchResponse::decode(&[0x22, 0x05, 0x0a]).is_err());
        assert!(FetchResponse::decode(&[0xff; 11]).is_err());
        assert!(FetchResponse::decode(&[0x0b]).is_err()); // wire type 3 (groups)
    }

    #[test]
    fn produce_requests_read_back_in_place() {
        let batch = vec![5u8; 1000];
        let req = ProduceRequest {
            acks: -1,
            timeout_ms: 1500,
            transactional_id: Some("tx"),
            topics: vec![TopicData {
                name: "t",
                partitions: vec![
                    PartitionData {
                        partition: 3,
                        record_batches: vec![&batch[..10], &batch[10..]],
                    },
                    PartitionData {
                        partition: 0,
                        record_batches: vec![],
                    },
                ],
            }],
        };
        let wire = req.encode();
        let view = ProduceRequestView::decode(&wire).unwrap();
        assert_eq!(
            (view.acks, view.timeout_ms, view.transactional_id),
            (-1, 1500, Some("tx"))
        );
        let parts = &view.topics[0].partitions;
        assert_eq!(view.topics[0].name, "t");
        assert_eq!(&wire[parts[0].record_batches.clone()], &batch[..]);
        assert_eq!((parts[1].partition, parts[1].record_batches.len()), (0, 0));
        assert!(!view.structured());
        for cut in 0..wire.len() {
            let _ = ProduceRequestView::decode(&wire[..cut]);
        }
    }
}
