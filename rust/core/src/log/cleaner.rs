//! Log compaction (Kafka's `LogCleaner.Cleaner`): the per-record work of cleaning one log.
//!
//! A cleaning runs in three steps so that the log stays open for appends and reads meanwhile:
//!
//! 1. [`Log::begin_cleaning`], under the log's lock: decide the cleanable range
//!    ([`LogToClean`]) and take a [`CleanPlan`], a snapshot of the segments involved (their
//!    open files, sizes and index sizes). Only one cleaning of a log runs at a time.
//! 2. [`CleaningJob`], with no lock: build the key -> last offset map over the dirty section
//!    ([`SkimpyOffsetMap`]; when it fills, the cleaning stops at the last offset it covered),
//!    then rewrite the segments from the log's first up to that offset, in groups whose
//!    combined size fits one segment (`segment.bytes`, `segment.index.bytes`), each group into
//!    one `.cleaned` segment. A record is kept when it is past the mapped offsets, or when it
//!    is the newest record of its key and either has a value or is a tombstone whose delete
//!    horizon (KIP-534) has not passed; records without a key are dropped. Control batches are
//!    kept whole. The records of aborted transactions (from the `.txnindex` files, walked as
//!    Kafka's `CleanedTransactionMetadata` does) are neither mapped nor kept, and each new
//!    segment's `.txnindex` holds the entries of the segments it replaces (their markers
//!    all stay). Nothing at or past the last stable offset is cleaned (`cleanable.rs`). A batch left empty is dropped, except the last batch of a group (so the new
//!    segment ends at the same offset as the ones it replaces) and the last data batch of a
//!    producer the log's producer state knows when the plan was taken (Kafka's
//!    `lastRecordsOfActiveProducers`: its sequence and epoch must survive a reload of the
//!    state from the log): those stay as empty batches (a bare header, CRC recomputed).
//!    Offsets are never renumbered; the leader-epoch cache, the log start offset and the
//!    producer state do not change.
//! 3. [`Log::replace_segments`], under the lock again, per group: if the old segments are
//!    still the ones the plan saw (no truncation, no retention removed one), the `.cleaned`
//!    segment is swapped in (see `swap.rs`, which also makes a crash at any point safe);
//!    otherwise it is discarded. [`Log::end_cleaning`] ends the cleaning.
//!
//! [`Log::clean`] runs the three steps in one call for callers that own the log.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use super::cleanable::LogToClean;
use super::config::LogConfig;
use super::log::Log;
use super::offset_map::SkimpyOffsetMap;
use super::scan::BatchScanner;
use super::segment::Segment;
use super::swap::CleanedSegment;
use super::txn_index::AbortedTxn;
use crate::error::{Error, Result};
use crate::record::batch::BatchHeader;
use crate::record::control::read_end_txn_marker;
use crate::record::filter::{BatchFilter, EmptyBatch, RecordView, Written};
use crate::record::txn_filter::AbortedTxnFilter;
use crate::record::{NO_TIMESTAMP, RECORD_BATCH_OVERHEAD};

/// The broker-level settings of one cleaner thread (Kafka's `CleanerConfig`).
#[derive(Debug, Clone, PartialEq)]
pub struct CleanerConfig {
    /// Bytes of this cleaner's offset map: `log.cleaner.dedupe.buffer.size` divided by
    /// `log.cleaner.threads`.
    pub dedupe_buffer_size: usize,
    /// `log.cleaner.io.buffer.load.factor`: how full the offset map may get.
    pub dedupe_buffer_load_factor: f64,
    /// `log.cleaner.io.buffer.size`: split between the read and the write buffer.
    pub io_buffer_size: usize,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            dedupe_buffer_size: 128 << 20,
            dedupe_buffer_load_factor: 0.9,
            io_buffer_size: 512 << 10,
        }
    }
}

impl CleanerConfig {
    pub fn validate(&self) -> Result<()> {
        if self.dedupe_buffer_size < super::offset_map::SLOT_BYTES * 2 {
            return Err(Error::InvalidConfig(format!(
                "log.cleaner.dedupe.buffer.size per cleaner thread must be at least {} bytes, got {}",
                super::offset_map::SLOT_BYTES * 2,
                self.dedupe_buffer_size
            )));
        }
        if !(self.dedupe_buffer_load_factor > 0.0 && self.dedupe_buffer_load_factor <= 1.0) {
            return Err(Error::InvalidConfig(format!(
                "log.cleaner.io.buffer.load.factor must be in (0, 1], got {}",
                self.dedupe_buffer_load_factor
            )));
        }
        if self.io_buffer_size < 2 {
            return Err(Error::InvalidConfig(format!(
                "log.cleaner.io.buffer.size must be at least 2, got {}",
                self.io_buffer_size
            )));
        }
        Ok(())
    }
}

/// What one cleaning did (Kafka's `CleanerStats`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CleanerStats {
    /// Where the dirty section started.
    pub first_dirty_offset: i64,
    /// The new checkpoint: every offset below it is now clean. Equal to
    /// `first_dirty_offset` when the cleaning was aborted or a group had to be discarded.
    pub end_offset: i64,
    pub map_bytes_read: u64,
    pub map_messages_read: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub messages_read: u64,
    pub messages_written: u64,
    /// Records without a key, dropped (a compacted topic cannot keep them).
    pub invalid_messages: u64,
    /// Tombstones dropped because their delete horizon had passed.
    pub tombstones_removed: u64,
    /// Old segments replaced.
    pub segments_read: u64,
    /// New segments swapped in.
    pub segments_written: u64,
    /// Groups written but not swapped in because the log changed meanwhile.
    pub groups_discarded: u64,
    /// Used fraction of the offset map's slots.
    pub buffer_utilization: f64,
    /// The latest delete horizon among kept batches still holding tombstones (-1: none):
    /// after it, a cleaning can drop them.
    pub latest_delete_horizon_ms: i64,
    pub map_elapsed_secs: f64,
    pub elapsed_secs: f64,
    pub aborted: bool,
}

impl CleanerStats {
    pub fn records_removed(&self) -> u64 {
        self.messages_read.saturating_sub(self.messages_written)
    }

    /// Records read (map and cleaning passes) per second.
    pub fn messages_per_sec(&self) -> f64 {
        per_sec(
            (self.map_messages_read + self.messages_read) as f64,
            self.elapsed_secs,
        )
    }

    /// Bytes of log cleaned per second, in MB (1e6 bytes).
    pub fn mb_per_sec(&self) -> f64 {
        per_sec(self.bytes_read as f64 / 1e6, self.elapsed_secs)
    }
}

fn per_sec(n: f64, secs: f64) -> f64 {
    if secs > 0.0 {
        n / secs
    } else {
        0.0
    }
}

/// Asks a running cleaning to stop at the next batch (Kafka's `abortCleaning`): shared
/// between the caller and the job, cheap to check.
#[derive(Debug, Clone, Default)]
pub struct CleaningAbort(Arc<AtomicBool>);

impl CleaningAbort {
    pub fn abort(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    pub fn is_aborted(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A segment as the plan saw it.
#[derive(Debug, Clone)]
struct SegmentView {
    base_offset: i64,
    size: u64,
    file: Arc<File>,
    index_bytes: u64,
    time_index_bytes: u64,
    modified: Option<SystemTime>,
    /// Its `.txnindex` entries: the cleaned segment keeps them all, as it keeps every marker.
    aborted_txns: Vec<AbortedTxn>,
}

impl SegmentView {
    fn of(s: &Segment) -> Self {
        SegmentView {
            base_offset: s.base_offset(),
            size: s.size(),
            file: s.file().clone(),
            index_bytes: (s.offset_index().entries() * 8) as u64,
            time_index_bytes: (s.time_index().entries() * 12) as u64,
            modified: s.file().metadata().and_then(|m| m.modified()).ok(),
            aborted_txns: s.txn_index().entries().to_vec(),
        }
    }
}

/// Which batches belong to aborted transactions, as the cleaner walks the log in offset
/// order (Kafka's `CleanedTransactionMetadata`, without the marker removal).
#[derive(Debug, Clone, Default)]
struct AbortedBatches(AbortedTxnFilter);

impl AbortedBatches {
    fn new(aborted: &[AbortedTxn]) -> Self {
        AbortedBatches(AbortedTxnFilter::new(
            aborted.iter().map(|t| (t.producer_id, t.first_offset)),
        ))
    }

    /// A data batch: whether it belongs to an aborted transaction.
    fn on_data_batch(&mut self, h: &BatchHeader) -> bool {
        self.0.is_aborted(h)
    }

    /// A control batch (`batch` is all of it).
    fn on_control_batch(&mut self, h: &BatchHeader, batch: &[u8]) {
        let control_type = match read_end_txn_marker(h, batch) {
            Ok(Some((m, _))) => Some(m.control_type),
            _ => None,
        };
        self.0.on_control_batch(h, control_type);
    }
}

/// What [`Log::begin_cleaning`] saw: everything a [`CleaningJob`] needs, owned, so the job
/// runs without the log.
#[derive(Debug)]
pub struct CleanPlan {
    dir: PathBuf,
    config: LogConfig,
    to_clean: LogToClean,
    now_ms: i64,
    /// Segments below the first uncleanable offset, in order.
    segments: Vec<SegmentView>,
    /// Per producer id, the last offset of its newest data batch in the log (from the
    /// log's producer state): that batch is kept even if emptied.
    producer_last_offsets: HashMap<i64, i64>,
    /// The aborted transactions overlapping the segments planned: their batches are not
    /// mapped, and their records are dropped.
    aborted_txns: Vec<AbortedTxn>,
    truncation_count: u64,
}

impl CleanPlan {
    pub fn log_to_clean(&self) -> &LogToClean {
        &self.to_clean
    }
}

/// A group's new segment, written and fsynced, waiting for [`Log::replace_segments`].
#[derive(Debug)]
pub struct CleanedGroup {
    segment: CleanedSegment,
    old: Vec<SegmentView>,
    truncation_count: u64,
}

impl CleanedGroup {
    pub fn base_offset(&self) -> i64 {
        self.segment.base_offset()
    }
}

impl Log {
    /// Step 1: plan a cleaning from the checkpoint `last_clean_offset` without cleaning past
    /// `high_watermark`. Fails if a cleaning of this log is already under way.
    pub fn begin_cleaning(
        &mut self,
        last_clean_offset: Option<i64>,
        high_watermark: Option<i64>,
        now_ms: i64,
    ) -> Result<CleanPlan> {
        if self.cleaning {
            return Err(Error::InvalidRequest(format!(
                "log {} is already being cleaned",
                self.dir.display()
            )));
        }
        let to_clean = self.cleanable_offsets(last_clean_offset, high_watermark, now_ms)?;
        let uncleanable = to_clean.first_uncleanable_offset;
        let segments: Vec<_> = self
            .segments
            .range(..uncleanable)
            .map(|(_, s)| SegmentView::of(s))
            .collect();
        let aborted_txns = match segments.first() {
            Some(first) => self.collect_aborted_transactions(first.base_offset, uncleanable),
            None => Vec::new(),
        };
        self.cleaning = true;
        Ok(CleanPlan {
            dir: self.dir.clone(),
            config: self.config.clone(),
            to_clean,
            now_ms,
            segments,
            producer_last_offsets: self.producer_last_data_offsets(),
            aborted_txns,
            truncation_count: self.truncation_count,
        })
    }

    /// Step 3: swap a cleaned group in for the segments it replaces. Returns false (and
    /// deletes the group's files) when the log changed since the plan: one of those segments
    /// was truncated, deleted or replaced.
    pub fn replace_segments(&mut self, group: CleanedGroup) -> Result<bool> {
        let active = self.active_segment_base_offset();
        let unchanged = group.truncation_count == self.truncation_count
            && group.old.iter().all(|o| {
                o.base_offset != active
                    && self
                        .segments
                        .get(&o.base_offset)
                        .is_some_and(|s| Arc::ptr_eq(s.file(), &o.file) && s.size() == o.size)
            });
        if !unchanged {
            return Ok(false);
        }
        let bases: Vec<i64> = group.old.iter().map(|o| o.base_offset).collect();
        let new_segment = {
            let old: Vec<&Segment> = bases.iter().map(|b| &self.segments[b]).collect();
            group.segment.swap_in(&old, &self.config)?
        };
        for b in &bases {
            self.segments.remove(b);
        }
        self.segments.insert(new_segment.base_offset(), new_segment);
        Ok(true)
    }

    /// Ends a cleaning begun by [`Log::begin_cleaning`] (whatever its outcome).
    pub fn end_cleaning(&mut self) {
        self.cleaning = false;
    }

    /// Clean this log in one call (steps 1 to 3): see the module docs.
    pub fn clean(
        &mut self,
        config: &CleanerConfig,
        last_clean_offset: Option<i64>,
        high_watermark: Option<i64>,
        now_ms: i64,
    ) -> Result<CleanerStats> {
        config.validate()?;
        let plan = self.begin_cleaning(last_clean_offset, high_watermark, now_ms)?;
        let result: Result<CleanerStats> = (|| {
            let mut job = CleaningJob::new(plan, config, CleaningAbort::default())?;
            while let Some(group) = job.next_group()? {
                let swapped = self.replace_segments(group)?;
                job.on_replaced(swapped);
            }
            Ok(job.finish())
        })();
        self.end_cleaning();
        result
    }
}

/// Step 2 of a cleaning (see the module docs): owns the plan, the offset map and the
/// buffers. Runs without the log; `Send`.
#[derive(Debug)]
pub struct CleaningJob {
    plan: CleanPlan,
    map: SkimpyOffsetMap,
    /// Records at or past this offset are kept untouched: the map covers up to it.
    end_offset: i64,
    groups: Vec<Range<usize>>,
    next: usize,
    /// The aborted transactions as the groups are cleaned, one after the other.
    aborted: AbortedBatches,
    filter: BatchFilter,
    out: Vec<u8>,
    read_buffer: usize,
    write_buffer: usize,
    abort: CleaningAbort,
    stats: CleanerStats,
    started: Instant,
}

impl CleaningJob {
    /// Build the offset map over the plan's dirty section and group the segments to clean.
    /// An abort during the map leaves a job with nothing to do.
    pub fn new(plan: CleanPlan, config: &CleanerConfig, abort: CleaningAbort) -> Result<Self> {
        config.validate()?;
        let started = Instant::now();
        let to_clean = plan.to_clean;
        let first_dirty = to_clean.first_dirty_offset;
        let first_uncleanable = to_clean.first_uncleanable_offset;
        // At most one key per offset of the dirty section: a small log gets a small map.
        let span = usize::try_from(first_uncleanable.saturating_sub(first_dirty)).unwrap_or(0);
        let map = SkimpyOffsetMap::new(
            config.dedupe_buffer_size,
            config.dedupe_buffer_load_factor,
            Some(span),
        );
        let mut job = CleaningJob {
            plan,
            map,
            end_offset: first_dirty,
            groups: Vec::new(),
            next: 0,
            aborted: AbortedBatches::default(),
            filter: BatchFilter::new(),
            out: Vec::new(),
            read_buffer: (config.io_buffer_size / 2).max(RECORD_BATCH_OVERHEAD),
            write_buffer: (config.io_buffer_size / 2).max(4096),
            abort,
            stats: CleanerStats {
                first_dirty_offset: first_dirty,
                end_offset: first_dirty,
                latest_delete_horizon_ms: NO_TIMESTAMP,
                ..CleanerStats::default()
            },
            started,
        };
        job.aborted = AbortedBatches::new(&job.plan.aborted_txns);
        if !job.build_offset_map()? {
            job.stats.aborted = true;
            return Ok(job);
        }
        job.end_offset = (job.map.latest_offset() + 1)
            .max(first_dirty)
            .min(first_uncleanable);
        // A checkpoint past the high watermark's segment (the high watermark went back, or
        // the checkpoint came from elsewhere) is kept: the segments below are still cleaned
        // (their expired tombstones dropped), but the checkpoint never moves back.
        job.stats.end_offset = job.end_offset.max(first_dirty);
        job.stats.buffer_utilization = job.map.utilization();
        job.stats.map_elapsed_secs = started.elapsed().as_secs_f64();
        job.groups = group_segments_by_size(
            &job.plan.segments,
            job.end_offset,
            first_uncleanable,
            &job.plan.config,
        );
        Ok(job)
    }

    /// Map every keyed record of the dirty section. Returns false when aborted.
    fn build_offset_map(&mut self) -> Result<bool> {
        let first_dirty = self.plan.to_clean.first_dirty_offset;
        let segments = std::mem::take(&mut self.plan.segments);
        let result = (|| {
            let first_dirty_segment = segments
                .iter()
                .rposition(|s| s.base_offset <= first_dirty)
                .unwrap_or(0);
            let mut aborted = AbortedBatches::new(&self.plan.aborted_txns);
            for s in segments.iter().skip(first_dirty_segment) {
                let mut scanner = BatchScanner::new(&s.file, 0, s.size, self.read_buffer);
                while let Some(r) = scanner.next_batch() {
                    let (_, h, batch) = r?;
                    if self.abort.is_aborted() {
                        return Ok(false);
                    }
                    // An aborted transaction's records must not shadow committed ones.
                    let is_aborted = if h.is_control() {
                        aborted.on_control_batch(&h, batch);
                        false
                    } else {
                        aborted.on_data_batch(&h)
                    };
                    if h.last_offset() >= first_dirty && !h.is_control() && !is_aborted {
                        if self.map.would_overflow(h.record_count as usize) {
                            if self.map.latest_offset() < first_dirty {
                                // Kafka's message, with what did not fit.
                                return Err(Error::InvalidConfig(format!(
                                    "offset map is too small to fit in even a single message, so log cleaning will never make progress. You can increase log.cleaner.dedupe.buffer.size or decrease log.cleaner.threads (the map holds {} keys; the batch at offset {} has {} records)",
                                    self.map.max_entries(),
                                    h.base_offset,
                                    h.record_count
                                )));
                            }
                            return Ok(true);
                        }
                        let map = &mut self.map;
                        self.filter.for_each_key(batch, &h, &mut |offset, key| {
                            if offset >= first_dirty {
                                map.put(key, offset);
                            }
                        })?;
                        self.stats.map_messages_read += h.record_count as u64;
                    }
                    self.stats.map_bytes_read += h.size_in_bytes() as u64;
                    if h.last_offset() >= first_dirty {
                        self.map.update_latest_offset(h.last_offset());
                    }
                }
            }
            Ok(!self.abort.is_aborted())
        })();
        self.plan.segments = segments;
        result
    }

    /// Write the next group's cleaned segment, or None when every group is done (or the
    /// cleaning was aborted).
    pub fn next_group(&mut self) -> Result<Option<CleanedGroup>> {
        if self.stats.aborted || self.next >= self.groups.len() {
            return Ok(None);
        }
        let range = self.groups[self.next].clone();
        self.next += 1;
        let group: Vec<SegmentView> = self.plan.segments[range].to_vec();
        let mut cleaned = CleanedSegment::create(
            &self.plan.dir,
            group[0].base_offset,
            &self.plan.config,
            self.write_buffer,
        )?;
        // Every marker is kept, so every aborted transaction indexed stays indexed.
        for t in group.iter().flat_map(|s| &s.aborted_txns) {
            cleaned.append_aborted_txn(*t);
        }
        // The group's last batch is kept even if emptied, so the new segment ends where the
        // old ones did.
        let last_nonempty = group.iter().rposition(|s| s.size > 0);
        for (i, s) in group.iter().enumerate() {
            let mut scanner = BatchScanner::new(&s.file, 0, s.size, self.read_buffer);
            while let Some(r) = scanner.next_batch() {
                if self.abort.is_aborted() {
                    self.stats.aborted = true;
                    return Ok(None);
                }
                let (pos, h, batch) = r?;
                let group_last = Some(i) == last_nonempty && pos + batch.len() as u64 == s.size;
                self.clean_batch(batch, &h, group_last, &mut cleaned)?;
            }
        }
        cleaned.finish(group.last().and_then(|s| s.modified))?;
        Ok(Some(CleanedGroup {
            segment: cleaned,
            old: group,
            truncation_count: self.plan.truncation_count,
        }))
    }

    /// Filter one batch into `cleaned`.
    fn clean_batch(
        &mut self,
        batch: &[u8],
        h: &BatchHeader,
        group_last: bool,
        cleaned: &mut CleanedSegment,
    ) -> Result<()> {
        let stats = &mut self.stats;
        stats.bytes_read += batch.len() as u64;
        stats.messages_read += h.record_count as u64;
        self.out.clear();
        if h.is_control() {
            // Markers are kept as they are (Kafka removes them once their delete horizon
            // has passed and their transaction's batches are gone; not done here).
            self.aborted.on_control_batch(h, batch);
            stats.messages_written += h.record_count as u64;
            stats.bytes_written += batch.len() as u64;
            return cleaned.append(batch, h.last_offset(), h.max_timestamp);
        }
        // An aborted transaction's records go (Kafka's discardBatchRecords); the batch stays,
        // empty, only where an empty batch would be kept anyway.
        let discard = self.aborted.on_data_batch(h);
        let producer_last = h.producer_id >= 0
            && self.plan.producer_last_offsets.get(&h.producer_id) == Some(&h.last_offset());
        let if_empty = if group_last || producer_last {
            EmptyBatch::RetainEmpty
        } else {
            EmptyBatch::Delete
        };
        let now = self.plan.now_ms;
        let latest = self.end_offset - 1;
        let deletes_expired = h.has_delete_horizon() && now >= h.base_timestamp;
        let new_horizon = now.saturating_add(self.plan.config.delete_retention_ms);
        let map = &mut self.map;
        let (mut invalid, mut tombstones_removed) = (0u64, 0u64);
        let mut retain = |r: &RecordView<'_>| -> bool {
            if discard {
                return false;
            }
            if r.offset > latest {
                return true;
            }
            let Some(key) = r.key else {
                invalid += 1;
                return false;
            };
            if r.offset < map.get(key) {
                return false;
            }
            if !r.has_value && deletes_expired {
                tombstones_removed += 1;
                return false;
            }
            true
        };
        let f = self
            .filter
            .filter(batch, h, new_horizon, if_empty, &mut retain, &mut self.out)?;
        let stats = &mut self.stats;
        stats.invalid_messages += invalid;
        stats.tombstones_removed += tombstones_removed;
        stats.messages_written += f.records_retained as u64;
        if f.tombstones_retained > 0 {
            if let Some(horizon) = f.delete_horizon_ms {
                stats.latest_delete_horizon_ms = stats.latest_delete_horizon_ms.max(horizon);
            }
        }
        if f.written == Written::Deleted {
            return Ok(());
        }
        stats.bytes_written += f.size as u64;
        cleaned.append(&self.out, h.last_offset(), f.max_timestamp)
    }

    /// Record the outcome of [`Log::replace_segments`] for the group last returned.
    pub fn on_replaced(&mut self, swapped: bool) {
        let group = &self.groups[self.next - 1];
        if swapped {
            self.stats.segments_read += group.len() as u64;
            self.stats.segments_written += 1;
        } else {
            // Those segments were not deduplicated: the checkpoint must not claim they were.
            self.stats.groups_discarded += 1;
        }
    }

    pub fn stats(&self) -> &CleanerStats {
        &self.stats
    }

    /// The final statistics. An aborted cleaning, or one that discarded a group, does not
    /// move the checkpoint.
    pub fn finish(mut self) -> CleanerStats {
        if self.stats.aborted || self.stats.groups_discarded > 0 {
            self.stats.end_offset = self.stats.first_dirty_offset;
        }
        self.stats.elapsed_secs = self.started.elapsed().as_secs_f64();
        self.stats
    }
}

/// Kafka's `groupSegmentsBySize`: consecutive segments holding offsets below `end_offset`,
/// grouped so each group's log and indexes fit one segment and its offsets fit 32 bits
/// relative to its base (a segment's offsets end before the next one's base, the last
/// one's before `first_uncleanable`).
fn group_segments_by_size(
    segments: &[SegmentView],
    end_offset: i64,
    first_uncleanable: i64,
    config: &LogConfig,
) -> Vec<Range<usize>> {
    let n = segments
        .iter()
        .take_while(|s| s.base_offset < end_offset)
        .count();
    // The last offset a segment may hold: up to the next one's base (or the end offset).
    let last_offset_of = |i: usize| {
        segments
            .get(i + 1)
            .map_or(first_uncleanable, |s| s.base_offset)
            .max(segments[i].base_offset + 1)
            - 1
    };
    let mut groups = Vec::new();
    let mut i = 0;
    while i < n {
        let start = i;
        let (mut log, mut idx, mut tidx) = (
            segments[i].size,
            segments[i].index_bytes,
            segments[i].time_index_bytes,
        );
        i += 1;
        while i < n {
            let s = &segments[i];
            let fits = log + s.size <= config.segment_bytes
                && idx + s.index_bytes <= config.segment_index_bytes
                && tidx + s.time_index_bytes <= config.segment_index_bytes
                && (s.size == 0
                    || last_offset_of(i) - segments[start].base_offset <= i32::MAX as i64);
            if !fits {
                break;
            }
            log += s.size;
            idx += s.index_bytes;
            tidx += s.time_index_bytes;
            i += 1;
        }
        groups.push(start..i);
    }
    groups
}
