//! What of a log the cleaner may clean, and how dirty it is (Kafka's
//! `LogCleanerManager.cleanableOffsets`, `calculateCleanableBytes` and `maxCompactionDelay`,
//! and the `LogToClean` they produce).
//!
//! A compacted log is, from its start:
//!
//! ```text
//! | clean (already deduplicated) | dirty, cleanable       | uncleanable ...   active |
//! 0                first dirty offset      first uncleanable offset            log end
//! ```
//!
//! The *first dirty offset* is the cleaner's checkpoint for the log (`cleaner-offset-checkpoint`,
//! kept by the caller), or the log start offset when the checkpoint is missing or lies outside
//! the log. The *first uncleanable offset* is the smallest of the active segment's base
//! offset, the high watermark (nothing a leader change could still truncate is compacted), the
//! last stable offset (no transaction still open or not yet replicated is compacted) and
//! the base offset of the first segment holding a record younger than `min.compaction.lag.ms`,
//! rounded down to the base offset of its segment: the cleaner works in whole segments.

use super::log::Log;
use super::scan::BatchScanner;
use super::segment::Segment;
use crate::error::Result;
use crate::record::RECORD_BATCH_OVERHEAD;

/// A log's cleanable range and dirtiness (Kafka's `LogToClean`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogToClean {
    /// Where the dirty section starts.
    pub first_dirty_offset: i64,
    /// The base offset of the first segment the cleaner must not touch.
    pub first_uncleanable_offset: i64,
    /// Bytes of the segments holding offsets below the first dirty offset.
    pub clean_bytes: u64,
    /// Bytes of the segments holding offsets in `[first dirty, first uncleanable)`.
    pub cleanable_bytes: u64,
    /// How long ago the oldest dirty record should have been compacted by
    /// `max.compaction.lag.ms` (0 when none is overdue).
    pub max_compaction_delay_ms: i64,
    /// The checkpoint given was outside the log and must be rewritten.
    pub force_update_checkpoint: bool,
}

impl LogToClean {
    pub fn total_bytes(&self) -> u64 {
        self.clean_bytes + self.cleanable_bytes
    }

    /// Dirty bytes over all bytes up to the first uncleanable offset (0 for an empty log).
    pub fn cleanable_ratio(&self) -> f64 {
        match self.total_bytes() {
            0 => 0.0,
            t => self.cleanable_bytes as f64 / t as f64,
        }
    }

    /// `max.compaction.lag.ms` has passed for some dirty record.
    pub fn needs_compaction_now(&self) -> bool {
        self.max_compaction_delay_ms > 0
    }

    /// Kafka's test for a log worth cleaning now: dirtier than `min.cleanable.dirty.ratio`,
    /// or holding dirty bytes overdue by `max.compaction.lag.ms`.
    pub fn should_clean(&self, min_cleanable_ratio: f64) -> bool {
        (self.needs_compaction_now() && self.cleanable_bytes > 0)
            || self.cleanable_ratio() > min_cleanable_ratio
    }
}

/// The max timestamp of a segment's first batch (Kafka's `getFirstBatchTimestamp`), or
/// `None` for an empty segment or one whose first header cannot be read.
pub(crate) fn first_batch_timestamp(seg: &Segment) -> Option<i64> {
    let mut s = BatchScanner::new(seg.file(), 0, seg.size(), RECORD_BATCH_OVERHEAD);
    match s.next_header() {
        Some(Ok((_, h))) => Some(h.max_timestamp),
        _ => None,
    }
}

impl Log {
    /// The cleaner's view of this log (see the module docs): `last_clean_offset` is its
    /// checkpoint (None: never cleaned), `high_watermark` the partition's (None: the log end).
    pub fn cleanable_offsets(
        &self,
        last_clean_offset: Option<i64>,
        high_watermark: Option<i64>,
        now_ms: i64,
    ) -> Result<LogToClean> {
        let start = self.log_start_offset;
        let end = self.next_offset;
        let checkpoint = last_clean_offset.unwrap_or(start);
        let (first_dirty, force_update_checkpoint) = if checkpoint < start || checkpoint > end {
            (start, last_clean_offset.is_some())
        } else {
            (checkpoint, false)
        };
        let active_base = self.active_segment_base_offset();
        let mut uncleanable = active_base;
        if let Some(hw) = high_watermark {
            uncleanable = uncleanable.min(hw.max(0));
        }
        // Nothing at or past the last stable offset: a transaction there may still abort,
        // and its records must not shadow committed ones in the offset map (Kafka cleans
        // below the LSO only).
        uncleanable = uncleanable.min(self.last_stable_offset(high_watermark.unwrap_or(end)));
        let lag = self.config.min_compaction_lag_ms.max(0);
        if lag > 0 {
            let recent = self
                .non_active_segments_from(first_dirty)
                .find(|s| s.largest_timestamp() > now_ms.saturating_sub(lag));
            if let Some(s) = recent {
                uncleanable = uncleanable.min(s.base_offset());
            }
        }
        // Round down to the segment holding it: the cleaner works in whole segments.
        let first_uncleanable = self
            .non_active_segments_from(uncleanable)
            .next()
            .map_or(active_base, |s| s.base_offset());
        let overlapping = |from: i64, to: i64| -> u64 {
            self.segments_overlapping(from, to).map(|s| s.size()).sum()
        };
        let clean_bytes = overlapping(i64::MIN, first_dirty);
        let cleanable_bytes = overlapping(first_dirty, first_dirty.max(first_uncleanable));
        Ok(LogToClean {
            first_dirty_offset: first_dirty,
            first_uncleanable_offset: first_uncleanable,
            clean_bytes,
            cleanable_bytes,
            max_compaction_delay_ms: self.max_compaction_delay(first_dirty, now_ms),
            force_update_checkpoint,
        })
    }

    /// Kafka's `maxCompactionDelay`: how far past `max.compaction.lag.ms` the oldest dirty,
    /// non-active segment's first batch is (0 when none is).
    fn max_compaction_delay(&self, first_dirty: i64, now_ms: i64) -> i64 {
        let earliest = self
            .non_active_segments_from(first_dirty)
            .filter_map(first_batch_timestamp)
            .filter(|&t| t > 0)
            .min();
        let clean_until = now_ms.saturating_sub(self.config.max_compaction_lag_ms.max(0));
        match earliest {
            Some(t) if t < clean_until => clean_until - t,
            _ => 0,
        }
    }

    /// The segments from the one holding `offset` (or the first, if `offset` is below it) to
    /// the last before the active segment (Kafka's `nonActiveLogSegmentsFrom`).
    pub(crate) fn non_active_segments_from(&self, offset: i64) -> impl Iterator<Item = &Segment> {
        let from = self
            .segments
            .range(..=offset)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        let active = self.active_segment_base_offset();
        self.segments.range(from..active).map(|(_, s)| s)
    }

    /// The segments holding any offset in `[from, to)` (Kafka's `logSegments(from, to)`).
    pub(crate) fn segments_overlapping(
        &self,
        from: i64,
        to: i64,
    ) -> impl Iterator<Item = &Segment> {
        let floor = self
            .segments
            .range(..=from)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        let to = to.max(floor);
        self.segments
            .range(floor..to)
            .map(|(_, s)| s)
            .filter(move |s| from < to && s.base_offset() < to)
    }
}
