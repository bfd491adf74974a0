//! Building RecordBatch v2 bytes, one record at a time.
//!
//! Records are encoded straight into the output buffer behind a reserved 61-byte header;
//! [`BatchBuilder::build`] compresses the records section (if a codec is set), fills in the
//! header and the CRC, and leaves the builder ready to start a new batch.

use super::batch::{ATTR_CONTROL, ATTR_TIMESTAMP_TYPE, ATTR_TRANSACTIONAL};
use super::compression::Compression;
use super::varint::{put_varint, put_varlong, varint_size, varlong_size};
use super::{
    crc32c, off, TimestampType, MAGIC_V2, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP, RECORD_BATCH_OVERHEAD,
};
use crate::error::{Error, Result};

/// A header of one record: a key and a nullable value.
pub type HeaderRef<'a> = (&'a [u8], Option<&'a [u8]>);

#[derive(Debug, Clone)]
pub struct BatchBuilder {
    compression: Compression,
    timestamp_type: TimestampType,
    base_offset: i64,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    control: bool,
    /// 61 reserved header bytes, then the uncompressed records.
    buf: Vec<u8>,
    count: i32,
    base_timestamp: i64,
    max_timestamp: i64,
}

impl BatchBuilder {
    pub fn new(compression: Compression) -> Self {
        Self::with_capacity(compression, RECORD_BATCH_OVERHEAD + 1024)
    }

    /// A builder whose buffer holds `capacity` bytes before it grows (the producer sizes it
    /// to `batch.size`, so filling a batch never reallocates and copies it).
    pub fn with_capacity(compression: Compression, capacity: usize) -> Self {
        let mut buf = Vec::with_capacity(capacity.max(RECORD_BATCH_OVERHEAD));
        buf.resize(RECORD_BATCH_OVERHEAD, 0);
        BatchBuilder {
            compression,
            timestamp_type: TimestampType::CreateTime,
            base_offset: 0,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            transactional: false,
            control: false,
            buf,
            count: 0,
            base_timestamp: NO_TIMESTAMP,
            max_timestamp: NO_TIMESTAMP,
        }
    }

    pub fn base_offset(&mut self, base_offset: i64) -> &mut Self {
        self.base_offset = base_offset;
        self
    }
    pub fn partition_leader_epoch(&mut self, epoch: i32) -> &mut Self {
        self.partition_leader_epoch = epoch;
        self
    }
    pub fn timestamp_type(&mut self, t: TimestampType) -> &mut Self {
        self.timestamp_type = t;
        self
    }
    pub fn producer(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
    ) -> &mut Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }
    pub fn transactional(&mut self, yes: bool) -> &mut Self {
        self.transactional = yes;
        self
    }
    pub fn control(&mut self, yes: bool) -> &mut Self {
        self.control = yes;
        self
    }
    pub fn compression(&self) -> Compression {
        self.compression
    }

    pub fn record_count(&self) -> i32 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes of the batch if built uncompressed now.
    pub fn uncompressed_size(&self) -> usize {
        self.buf.len()
    }

    /// Bytes one more record would add (uncompressed).
    pub fn record_size(
        &self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[HeaderRef],
    ) -> usize {
        let ts_delta = if self.count == 0 {
            0
        } else {
            timestamp.wrapping_sub(self.base_timestamp)
        };
        let body = body_size(ts_delta, self.count, key, value, headers);
        varint_size(body as i32) + body
    }

    /// Bytes the first record of a batch would take (uncompressed).
    pub fn first_record_size(
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[HeaderRef],
    ) -> usize {
        let body = body_size(0, 0, key, value, headers);
        varint_size(body as i32) + body
    }

    /// Append one record; its offset delta is the number of records before it.
    pub fn append(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[HeaderRef],
    ) -> i32 {
        if self.count == 0 {
            self.base_timestamp = timestamp;
        }
        if timestamp > self.max_timestamp {
            self.max_timestamp = timestamp;
        }
        let ts_delta = timestamp.wrapping_sub(self.base_timestamp);
        let delta = self.count;
        let body = body_size(ts_delta, delta, key, value, headers);
        let b = &mut self.buf;
        b.reserve(body + 5);
        put_varint(b, body as i32);
        b.push(0); // record attributes: unused
        put_varlong(b, ts_delta);
        put_varint(b, delta);
        put_bytes(b, key);
        put_bytes(b, value);
        put_varint(b, headers.len() as i32);
        for (hk, hv) in headers {
            put_bytes(b, Some(hk));
            put_bytes(b, *hv);
        }
        self.count += 1;
        delta
    }

    /// Finish the batch and reset the builder for the next one.
    pub fn build(&mut self) -> Result<Vec<u8>> {
        if self.count == 0 {
            return Err(Error::InvalidRequest(
                "cannot build a record batch with no records".into(),
            ));
        }
        let mut out = match self.compression {
            Compression::None => {
                let fresh = Vec::with_capacity(self.buf.capacity());
                std::mem::replace(&mut self.buf, fresh)
            }
            codec => {
                let mut out = Vec::with_capacity(RECORD_BATCH_OVERHEAD + self.buf.len() / 2);
                out.resize(RECORD_BATCH_OVERHEAD, 0);
                codec.compress_into(&self.buf[RECORD_BATCH_OVERHEAD..], &mut out)?;
                self.buf.truncate(RECORD_BATCH_OVERHEAD);
                out
            }
        };
        if out.len() > i32::MAX as usize {
            return Err(Error::RecordBatchTooLarge {
                size: out.len(),
                max: i32::MAX as usize,
            });
        }
        let mut attributes = self.compression.id() as i16;
        if self.timestamp_type == TimestampType::LogAppendTime {
            attributes |= ATTR_TIMESTAMP_TYPE;
        }
        if self.transactional {
            attributes |= ATTR_TRANSACTIONAL;
        }
        if self.control {
            attributes |= ATTR_CONTROL;
        }
        let h = &mut out[..RECORD_BATCH_OVERHEAD];
        h[off::BASE_OFFSET..off::BASE_OFFSET + 8].copy_from_slice(&self.base_offset.to_be_bytes());
        let len = (out.len() - 12) as i32;
        let h = &mut out[..RECORD_BATCH_OVERHEAD];
        h[off::LENGTH..off::LENGTH + 4].copy_from_slice(&len.to_be_bytes());
        h[off::LEADER_EPOCH..off::LEADER_EPOCH + 4]
            .copy_from_slice(&self.partition_leader_epoch.to_be_bytes());
        h[off::MAGIC] = MAGIC_V2 as u8;
        h[off::ATTRIBUTES..off::ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
        h[off::LAST_OFFSET_DELTA..off::LAST_OFFSET_DELTA + 4]
            .copy_from_slice(&(self.count - 1).to_be_bytes());
        h[off::BASE_TIMESTAMP..off::BASE_TIMESTAMP + 8]
            .copy_from_slice(&self.base_timestamp.to_be_bytes());
        h[off::MAX_TIMESTAMP..off::MAX_TIMESTAMP + 8]
            .copy_from_slice(&self.max_timestamp.to_be_bytes());
        h[off::PRODUCER_ID..off::PRODUCER_ID + 8].copy_from_slice(&self.producer_id.to_be_bytes());
        h[off::PRODUCER_EPOCH..off::PRODUCER_EPOCH + 2]
            .copy_from_slice(&self.producer_epoch.to_be_bytes());
        h[off::BASE_SEQUENCE..off::BASE_SEQUENCE + 4]
            .copy_from_slice(&self.base_sequence.to_be_bytes());
        h[off::RECORD_COUNT..off::RECORD_COUNT + 4].copy_from_slice(&self.count.to_be_bytes());
        let crc = crc32c(&out[off::ATTRIBUTES..]);
        out[off::CRC..off::CRC + 4].copy_from_slice(&crc.to_be_bytes());
        self.buf.resize(RECORD_BATCH_OVERHEAD, 0);
        self.count = 0;
        self.base_timestamp = NO_TIMESTAMP;
        self.max_timestamp = NO_TIMESTAMP;
        Ok(out)
    }
}

#[inline]
fn body_size(
    ts_delta: i64,
    offset_delta: i32,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[HeaderRef],
) -> usize {
    let mut n = 1
        + varlong_size(ts_delta)
        + varint_size(offset_delta)
        + bytes_size(key)
        + bytes_size(value);
    n += varint_size(headers.len() as i32);
    for (hk, hv) in headers {
        n += bytes_size(Some(hk)) + bytes_size(*hv);
    }
    n
}

#[inline]
fn bytes_size(b: Option<&[u8]>) -> usize {
    match b {
        None => 1,
        Some(b) => varint_size(b.len() as i32) + b.len(),
    }
}

#[inline]
fn put_bytes(buf: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_varint(buf, -1),
        Some(b) => {
            put_varint(buf, b.len() as i32);
            buf.extend_from_slice(b);
        }
    }
}
