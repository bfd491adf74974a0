//! Kafka's RecordBatch v2 (magic 2): the bytes on the wire are the bytes on disk.
//!
//! ```text
//! offset  width  field
//!      0      8  baseOffset            int64, stamped by the log on append
//!      8      4  batchLength           int32, bytes after this field
//!     12      4  partitionLeaderEpoch  int32, stamped by the log on append
//!     16      1  magic                 int8 = 2
//!     17      4  crc                   uint32, CRC-32C of bytes 21..end
//!     21      2  attributes            int16: bits 0-2 codec, 3 timestamp type,
//!                                      4 transactional, 5 control, 6 delete horizon
//!     23      4  lastOffsetDelta       int32
//!     27      8  baseTimestamp         int64
//!     35      8  maxTimestamp          int64
//!     43      8  producerId            int64
//!     51      2  producerEpoch         int16
//!     53      4  baseSequence          int32
//!     57      4  recordCount           int32
//!     61      -  records, compressed as one block when the codec is not none
//! ```
//!
//! The CRC does not cover baseOffset or partitionLeaderEpoch, so the log stamps them
//! without recomputing it.

pub mod arrow;
pub mod batch;
pub mod builder;
pub mod compression;
pub mod control;
pub mod filter;
pub mod txn_filter;
pub mod varint;

pub use batch::{BatchHeader, Record, RecordHeader, TimestampType};
pub use builder::BatchBuilder;
pub use compression::Compression;

/// Size of the fixed batch header.
pub const RECORD_BATCH_OVERHEAD: usize = 61;
/// Bytes before `batchLength`'s coverage starts (baseOffset + batchLength).
pub const LOG_OVERHEAD: usize = 12;
pub const MAGIC_V2: i8 = 2;
pub const NO_TIMESTAMP: i64 = -1;
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const NO_SEQUENCE: i32 = -1;
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;

pub(crate) mod off {
    pub const BASE_OFFSET: usize = 0;
    pub const LENGTH: usize = 8;
    pub const LEADER_EPOCH: usize = 12;
    pub const MAGIC: usize = 16;
    pub const CRC: usize = 17;
    pub const ATTRIBUTES: usize = 21;
    pub const LAST_OFFSET_DELTA: usize = 23;
    pub const BASE_TIMESTAMP: usize = 27;
    pub const MAX_TIMESTAMP: usize = 35;
    pub const PRODUCER_ID: usize = 43;
    pub const PRODUCER_EPOCH: usize = 51;
    pub const BASE_SEQUENCE: usize = 53;
    pub const RECORD_COUNT: usize = 57;
}

/// CRC-32C (Castagnoli), hardware accelerated where the CPU has it.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}
