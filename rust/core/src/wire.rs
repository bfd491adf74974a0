//! Protobuf wire encoding of `rillet.v1.ProduceRequest` (proto/rillet/v1/produce.proto) for
//! the producer's hot path: the request is written straight into its final buffer, so each
//! record batch is copied once, instead of into a message, then into its serialization.
//!
//! Only the fields the producer sends with batch bytes are written, in field-number order and
//! without proto3 defaults, as the generated encoders do:
//!
//! ```text
//! ProduceRequest   1 acks int32, 2 timeout_ms int32, 3 transactional_id string (optional),
//!                  4 topics repeated Topic
//! Topic            1 name string, 2 partitions repeated Partition
//! Partition        1 partition int32, 2 record_batches bytes
//! ```
//!
//! The Python tests parse what this writes with the generated `ProduceRequest` class.

const WIRE_VARINT: u32 = 0;
const WIRE_LEN: u32 = 2;

/// One partition's batches in a produce request.
#[derive(Debug, Clone, Copy)]
pub struct PartitionData<'a> {
    pub partition: i32,
    pub record_batches: &'a [u8],
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

struct Writer<'b> {
    buf: &'b mut [u8],
    pos: usize,
}

impl Writer<'_> {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf[self.pos] = (v as u8) | 0x80;
            self.pos += 1;
            v >>= 7;
        }
        self.buf[self.pos] = v as u8;
        self.pos += 1;
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

    fn len_prefix(&mut self, field: u32, len: usize) {
        self.key(field, WIRE_LEN);
        self.varint(len as u64);
    }

    fn bytes_field(&mut self, field: u32, data: &[u8]) {
        self.len_prefix(field, data.len());
        self.buf[self.pos..self.pos + data.len()].copy_from_slice(data);
        self.pos += data.len();
    }
}

impl PartitionData<'_> {
    fn body_len(&self) -> usize {
        let batches = if self.record_batches.is_empty() {
            0
        } else {
            len_field_len(2, self.record_batches.len())
        };
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

    /// Write the request into `buf`, which must be exactly [`Self::encoded_len`] bytes.
    pub fn encode_into(&self, buf: &mut [u8]) {
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
                if !p.record_batches.is_empty() {
                    w.bytes_field(2, p.record_batches);
                }
            }
        }
        debug_assert_eq!(w.pos, w.buf.len());
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.encoded_len()];
        self.encode_into(&mut out);
        out
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
                        record_batches: &batch,
                    },
                    PartitionData {
                        partition: 2,
                        record_batches: &batch,
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
                    record_batches: &batch,
                }],
            }],
        };
        let out = req.encode();
        assert_eq!(out.len(), req.encoded_len());
        assert!(out.ends_with(&batch));
    }
}
