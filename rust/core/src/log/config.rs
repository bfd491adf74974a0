use crate::error::{Error, Result};
use crate::record::TimestampType;

/// The topic-level settings a log obeys, Kafka's defaults. Python maps Kafka's dotted keys
/// (`segment.bytes`, `retention.ms`, ...) onto these fields and validates them first; the
/// log checks them again because its invariants depend on them.
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll when a segment would grow past this.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the newest record is this much younger than the segment's first.
    pub segment_ms: i64,
    /// `segment.jitter.ms`: subtracted from `segment_ms` to spread rolls out.
    pub segment_jitter_ms: i64,
    /// `segment.index.bytes`: size each index is preallocated to; roll when one is full.
    pub segment_index_bytes: u64,
    /// `index.interval.bytes`: bytes of batches between index entries.
    pub index_interval_bytes: u64,
    /// `max.message.bytes`: the largest batch the log accepts.
    pub max_message_bytes: u64,
    /// `retention.ms`: -1 keeps segments forever.
    pub retention_ms: i64,
    /// `retention.bytes`: -1 for no size limit.
    pub retention_bytes: i64,
    /// `message.timestamp.type`.
    pub message_timestamp_type: TimestampType,
    /// `cleanup.policy` holds `compact`: the log cleaner keeps the newest record per key, and
    /// appends of records without a key are refused (INVALID_RECORD), as Kafka does.
    pub compact: bool,
    /// `delete.retention.ms`: how long a tombstone survives after the cleaner first saw it
    /// (KIP-534's delete horizon is stamped then).
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms`: a record stays uncompacted at least this long.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a record is compacted at most this long after it was
    /// written, whatever the dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `min.cleanable.dirty.ratio`: dirty bytes / total bytes that make a log worth cleaning.
    pub min_cleanable_dirty_ratio: f64,
    /// The broker's `producer.id.expiration.ms`: a producer that wrote nothing for this long
    /// is forgotten by the producer state (unless its transaction is open).
    pub producer_id_expiration_ms: i64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            segment_jitter_ms: 0,
            segment_index_bytes: 10 << 20,
            index_interval_bytes: 4096,
            max_message_bytes: 1_048_588,
            retention_ms: 7 * 24 * 3600 * 1000,
            retention_bytes: -1,
            message_timestamp_type: TimestampType::CreateTime,
            compact: false,
            delete_retention_ms: 86_400_000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
            producer_id_expiration_ms: super::producer_state::DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        }
    }
}

impl LogConfig {
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidConfig(m));
        if self.segment_bytes < 14 || self.segment_bytes > i32::MAX as u64 {
            return bad(format!(
                "segment.bytes must be in [14, {}], got {}",
                i32::MAX,
                self.segment_bytes
            ));
        }
        if self.segment_ms < 1 {
            return bad(format!(
                "segment.ms must be at least 1, got {}",
                self.segment_ms
            ));
        }
        if self.segment_jitter_ms < 0 {
            return bad(format!(
                "segment.jitter.ms must be at least 0, got {}",
                self.segment_jitter_ms
            ));
        }
        if self.segment_index_bytes < 12 || self.segment_index_bytes > i32::MAX as u64 {
            return bad(format!(
                "segment.index.bytes must be in [12, {}], got {}",
                i32::MAX,
                self.segment_index_bytes
            ));
        }
        if self.max_message_bytes > i32::MAX as u64 {
            return bad(format!(
                "max.message.bytes must be at most {}, got {}",
                i32::MAX,
                self.max_message_bytes
            ));
        }
        if self.retention_ms < -1 {
            return bad(format!(
                "retention.ms must be -1 or at least 0, got {}",
                self.retention_ms
            ));
        }
        if self.retention_bytes < -1 {
            return bad(format!(
                "retention.bytes must be -1 or at least 0, got {}",
                self.retention_bytes
            ));
        }
        if self.delete_retention_ms < 0 {
            return bad(format!(
                "delete.retention.ms must be at least 0, got {}",
                self.delete_retention_ms
            ));
        }
        if self.min_compaction_lag_ms < 0 {
            return bad(format!(
                "min.compaction.lag.ms must be at least 0, got {}",
                self.min_compaction_lag_ms
            ));
        }
        if self.max_compaction_lag_ms < 1 {
            return bad(format!(
                "max.compaction.lag.ms must be at least 1, got {}",
                self.max_compaction_lag_ms
            ));
        }
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms {
            // Kafka's LogConfig.validateValues message.
            return bad(format!(
                "conflict topic config setting min.compaction.lag.ms ({}) > max.compaction.lag.ms ({})",
                self.min_compaction_lag_ms, self.max_compaction_lag_ms
            ));
        }
        if self.producer_id_expiration_ms < 1 {
            return bad(format!(
                "producer.id.expiration.ms must be at least 1, got {}",
                self.producer_id_expiration_ms
            ));
        }
        if !(0.0..=1.0).contains(&self.min_cleanable_dirty_ratio) {
            return bad(format!(
                "min.cleanable.dirty.ratio must be between 0 and 1, got {}",
                self.min_cleanable_dirty_ratio
            ));
        }
        Ok(())
    }
}
