//! The partition log.

use std::collections::BTreeMap;
use std::fs;
use std::io::IoSlice;
use std::path::{Path, PathBuf};

use super::checkpoint::sync_dir;
use super::config::LogConfig;
use super::epoch_cache::LeaderEpochCache;
use super::producer_state::{AppendOrigin, ProducerStateManager};
use super::scan::BatchScanner;
use super::segment::{BatchMeta, Segment, TimestampAndOffset};
use super::txn_index::AbortedTxn;
use crate::error::{Error, IoContext, Result};
use crate::io::FileRegion;
use crate::record::batch::{
    check_records, check_records_have_keys, compute_crc, frame_batches, records_bytes,
    validate_batch, validate_batches, BatchHeader, ATTR_TIMESTAMP_TYPE,
};
use crate::record::{off, TimestampType, RECORD_BATCH_OVERHEAD};

/// Appends at least this large are validated on a second core while they are written.
const PARALLEL_VALIDATION_BYTES: usize = 256 * 1024;

/// ListOffsets' special timestamps.
pub const LATEST_TIMESTAMP: i64 = -1;
pub const EARLIEST_TIMESTAMP: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;

/// Result of an append (Kafka's `LogAppendInfo`).
///
/// `first_offset` is the base offset of the request's first batch and `last_offset` the
/// largest offset the append answers for; for a batch that was a duplicate (an idempotent
/// producer's retry, not written again) they are its original offsets. The counts
/// (`record_count`, `batch_count`, `valid_bytes`) and the timestamps describe what was
/// written: nothing when every batch was a duplicate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogAppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    /// The broker's time stamped into the batches with LogAppendTime, else -1. When every
    /// batch was a duplicate, the first one's original append time.
    pub log_append_time: i64,
    pub log_start_offset: i64,
    pub record_count: i64,
    pub batch_count: usize,
    pub valid_bytes: u64,
    /// Only when some batch was a duplicate: each request batch's base offset, in request
    /// order (a duplicate's original one), for the produce response.
    pub batch_base_offsets: Option<Vec<i64>>,
}

/// Where an offset lives (Kafka's `LogOffsetMetadata`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogOffsetMetadata {
    pub message_offset: i64,
    pub segment_base_offset: i64,
    pub relative_position: u64,
}

/// Result of a read (Kafka's `FetchDataInfo`): whole batches as file regions, and for a
/// read_committed read ([`Log::read_committed`]) the aborted transactions overlapping them.
#[derive(Debug, Clone)]
pub struct FetchDataInfo {
    pub fetch_offset_metadata: LogOffsetMetadata,
    pub regions: Vec<FileRegion>,
    /// `None` unless asked for; then the aborted transactions whose offsets overlap
    /// `[fetch offset, offset after the last returned batch)`, in marker order.
    pub aborted_transactions: Option<Vec<AbortedTxn>>,
}

impl FetchDataInfo {
    pub fn size(&self) -> u64 {
        self.regions.iter().map(|r| r.length).sum()
    }
}

/// A partition's log: an ordered map of segments in one directory.
///
/// Not thread safe by itself; the Python binding serializes calls with a lock. Offsets are
/// contiguous from `log_start_offset` to `log_end_offset` (exclusive). Appends are validated
/// whole before a byte is written, so a rejected append leaves the log unchanged. Reads return
/// [`FileRegion`]s of whole batches that stay valid even if the segment is later deleted.
///
/// Crash behaviour: bytes are written to the page cache; `flush` fsyncs and advances the
/// recovery point. On an unclean open every segment from the one holding the recovery point
/// on is re-read; the first torn or corrupt batch and everything after it is cut.
#[derive(Debug)]
pub struct Log {
    pub(super) dir: PathBuf,
    pub(super) config: LogConfig,
    pub(super) segments: BTreeMap<i64, Segment>,
    pub(super) log_start_offset: i64,
    pub(super) next_offset: i64,
    pub(super) recovery_point: i64,
    pub(super) epoch_cache: LeaderEpochCache,
    /// Bumped by every truncation: a cleaning planned before one must not swap its
    /// segments in after it (see `cleaner.rs`).
    pub(super) truncation_count: u64,
    /// A cleaning is under way (`Log::begin_cleaning` to `Log::end_cleaning`).
    pub(super) cleaning: bool,
    /// Idempotent and transactional producers' state (see `producer_log.rs`).
    pub(super) producer_state: ProducerStateManager,
}

impl Log {
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }
    pub fn log_end_offset(&self) -> i64 {
        self.next_offset
    }
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }
    pub fn epoch_cache(&self) -> &LeaderEpochCache {
        &self.epoch_cache
    }
    pub fn segments(&self) -> impl Iterator<Item = &Segment> {
        self.segments.values()
    }
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }
    pub fn size_in_bytes(&self) -> u64 {
        self.segments.values().map(|s| s.size()).sum()
    }
    fn active(&self) -> &Segment {
        self.segments
            .values()
            .next_back()
            .expect("a log always has a segment")
    }
    fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log always has a segment")
    }
    pub fn active_segment_base_offset(&self) -> i64 {
        self.active().base_offset()
    }

    /// The log end offset with its position (Kafka's `logEndOffsetMetadata`).
    pub fn log_end_offset_metadata(&self) -> LogOffsetMetadata {
        let a = self.active();
        LogOffsetMetadata {
            message_offset: self.next_offset,
            segment_base_offset: a.base_offset(),
            relative_position: a.size(),
        }
    }

    /// Replace the config (topic config changed). Takes effect from the next append or roll.
    pub fn update_config(&mut self, config: LogConfig) -> Result<()> {
        config.validate()?;
        self.config = config;
        Ok(())
    }

    /// Append batches from a producer: validate every batch and record, assign offsets from
    /// the log end offset, stamp `leader_epoch` (and the broker's time under LogAppendTime).
    ///
    /// Batches with a producer id are checked against the producer state first (see
    /// `producer_log.rs`): a retry of one already in the log is not written again and takes
    /// no offset (its original offsets are answered), and a sequence, epoch or transaction
    /// error fails the whole append before a byte is written. `origin` is
    /// [`AppendOrigin::Client`], or [`AppendOrigin::Coordinator`] for a coordinator of this
    /// broker (its batches carry no sequence: only their producer epoch is checked).
    pub fn append_as_leader(
        &mut self,
        data: &[u8],
        leader_epoch: i32,
        now_ms: i64,
        allow_control: bool,
        origin: AppendOrigin,
    ) -> Result<LogAppendInfo> {
        if origin == AppendOrigin::Replication {
            return Err(Error::InvalidRequest(
                "a leader append comes from a client or a coordinator; replicated batches go through append_as_follower".into(),
            ));
        }
        let batches = self.frame_append(data)?;
        for (_, h) in &batches {
            if h.record_count == 0 {
                return Err(Error::invalid(format!(
                    "a record batch from a producer must hold records (batch at offset {})",
                    h.base_offset
                )));
            }
            if h.is_control() && !allow_control {
                return Err(Error::invalid(
                    "clients are not allowed to write control records",
                ));
            }
            if h.timestamp_type() == TimestampType::LogAppendTime {
                return Err(Error::InvalidTimestamp(
                    "a producer batch must use CreateTime; the broker sets LogAppendTime".into(),
                ));
            }
            if h.producer_id >= 0
                && h.base_sequence < 0
                && !h.is_control()
                && origin == AppendOrigin::Client
            {
                // Kafka's LogValidator (for AppendOrigin.CLIENT).
                return Err(Error::invalid(format!(
                    "Invalid sequence number {} in record batch with producerId {}",
                    h.base_sequence, h.producer_id
                )));
            }
        }
        // Every batch's CRC and every record must check out: a batch whose records are
        // garbage is refused here rather than served to consumers. Compressed batches are
        // decompressed to check.
        // A compacted topic refuses records without a key (Kafka's LogValidator), with
        // Kafka's message naming the partition (the log directory's name).
        let compacted_partition = self.config.compact.then(|| {
            self.dir.file_name().map_or_else(
                || self.dir.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            )
        });
        let validate = || -> Result<()> {
            for (pos, h) in &batches {
                let batch = &data[*pos..*pos + h.size_in_bytes()];
                validate_batch(batch)?;
                let mut scratch = Vec::new();
                let records = records_bytes(h, batch, &mut scratch)?;
                if let Some(tp) = compacted_partition.as_deref().filter(|_| !h.is_control()) {
                    check_records_have_keys(h, records, true).map_err(|e| match e {
                        Error::InvalidRecord(_) => Error::invalid(format!(
                            "Compacted topic cannot accept message without key in topic partition {tp}."
                        )),
                        other => other,
                    })?;
                } else {
                    check_records(h, records, true)?;
                }
            }
            Ok(())
        };
        let log_append_time = self.config.message_timestamp_type == TimestampType::LogAppendTime;
        // The producer state's verdict, before a byte is written. A batch whose bytes are
        // damaged reads as CORRUPT_MESSAGE rather than as a sequence error: its producer
        // fields may be what is damaged.
        let producers = match self.analyze_producer_state(
            data,
            &batches,
            log_append_time.then_some(now_ms),
            origin,
        ) {
            Ok(p) => p,
            Err(e) => {
                validate()?;
                return Err(e);
            }
        };
        let mut headers: Vec<[u8; RECORD_BATCH_OVERHEAD]> = Vec::with_capacity(batches.len());
        let mut metas = Vec::with_capacity(batches.len());
        let any_duplicate = !producers.duplicates.is_empty();
        let mut base_offsets = Vec::new();
        let mut written_bytes = 0usize;
        let mut offset = self.next_offset;
        let (mut max_ts, mut offset_of_max_ts) = (-1i64, offset);
        let mut record_count = 0i64;
        let (mut answered_first, mut answered_last) = (None, -1i64);
        let mut dup_append_time = None;
        for (i, (pos, h)) in batches.iter().enumerate() {
            if let Some((first, last)) = producers.duplicate(i) {
                base_offsets.push(first); // only ever reached when there are duplicates
                answered_first.get_or_insert(first);
                answered_last = answered_last.max(last);
                if dup_append_time.is_none() && log_append_time {
                    dup_append_time = self
                        .producer_state
                        .last_entry(h.producer_id)
                        .and_then(|e| e.batch_metadata.iter().find(|m| m.last_offset == last))
                        .map(|m| m.timestamp);
                }
                continue;
            }
            let batch = &data[*pos..*pos + h.size_in_bytes()];
            let mut head = [0u8; RECORD_BATCH_OVERHEAD];
            head.copy_from_slice(&batch[..RECORD_BATCH_OVERHEAD]);
            head[off::BASE_OFFSET..off::BASE_OFFSET + 8].copy_from_slice(&offset.to_be_bytes());
            head[off::LEADER_EPOCH..off::LEADER_EPOCH + 4]
                .copy_from_slice(&leader_epoch.to_be_bytes());
            let mut batch_max_ts = h.max_timestamp;
            if log_append_time {
                batch_max_ts = now_ms;
                let attrs = h.attributes | ATTR_TIMESTAMP_TYPE;
                head[off::ATTRIBUTES..off::ATTRIBUTES + 2].copy_from_slice(&attrs.to_be_bytes());
                head[off::MAX_TIMESTAMP..off::MAX_TIMESTAMP + 8]
                    .copy_from_slice(&now_ms.to_be_bytes());
                let crc =
                    crc32c::crc32c_append(compute_crc(&head), &batch[RECORD_BATCH_OVERHEAD..]);
                head[off::CRC..off::CRC + 4].copy_from_slice(&crc.to_be_bytes());
            }
            let last = offset + h.last_offset_delta as i64;
            if batch_max_ts > max_ts {
                max_ts = batch_max_ts;
                offset_of_max_ts = last;
            }
            metas.push(BatchMeta {
                base_offset: offset,
                last_offset: last,
                max_timestamp: batch_max_ts,
                size: h.size_in_bytes() as u64,
            });
            headers.push(head);
            written_bytes += h.size_in_bytes();
            record_count += h.record_count as i64;
            if any_duplicate {
                base_offsets.push(offset);
            }
            answered_first.get_or_insert(offset);
            answered_last = answered_last.max(last);
            offset = last + 1;
        }
        let first = self.next_offset;
        let last = offset - 1;
        let info = LogAppendInfo {
            first_offset: answered_first.unwrap_or(first),
            last_offset: answered_last,
            max_timestamp: max_ts,
            offset_of_max_timestamp: offset_of_max_ts,
            log_append_time: match (log_append_time, metas.is_empty()) {
                (false, _) => -1,
                (true, false) => now_ms,
                (true, true) => dup_append_time.unwrap_or(-1),
            },
            log_start_offset: self.log_start_offset,
            record_count,
            batch_count: metas.len(),
            valid_bytes: written_bytes as u64,
            batch_base_offsets: any_duplicate.then_some(base_offsets),
        };
        if metas.is_empty() {
            // Every batch was a duplicate: nothing to write, but the request is still checked.
            validate()?;
            return Ok(info);
        }
        let mut iov = Vec::with_capacity(metas.len() * 2);
        let to_write = batches
            .iter()
            .enumerate()
            .filter(|(i, _)| producers.duplicate(*i).is_none());
        for ((_, (pos, h)), head) in to_write.zip(&headers) {
            iov.push(IoSlice::new(head));
            iov.push(IoSlice::new(
                &data[pos + RECORD_BATCH_OVERHEAD..pos + h.size_in_bytes()],
            ));
        }
        let rolls =
            self.active()
                .should_roll(&self.config, written_bytes as u64, last, max_ts, now_ms)
                || first - self.active().base_offset() > i32::MAX as i64;
        if data.len() >= PARALLEL_VALIDATION_BYTES && !rolls {
            // Large appends: validate on another core while the bytes are copied into the page
            // cache, and take the write back if validation fails. Nobody can read the bytes
            // meanwhile: the log end offset moves only after both succeed, under the log's lock.
            let active = self.active_mut();
            let start = active.size();
            // The write stays on this thread; only the check is handed to the pool, so a
            // sleeping worker's wake-up overlaps the copy instead of delaying it.
            let mut valid = Ok(());
            let mut result = Ok(());
            rayon::in_place_scope(|scope| {
                scope.spawn(|_| valid = validate());
                result = active.append(&metas, &iov);
            });
            result?;
            if let Err(e) = valid {
                active.undo_append(start, first)?;
                return Err(e);
            }
            self.next_offset = last + 1;
        } else {
            validate()?;
            self.write(&metas, &iov, max_ts, now_ms)?;
        }
        let recorded = self.apply_producer_updates(&producers.updates);
        if leader_epoch >= 0 {
            self.epoch_cache.assign(leader_epoch, first)?;
        }
        recorded?;
        Ok(info)
    }

    /// Append batches replicated from the leader, keeping their offsets and epochs. The
    /// first must start at or after the log end offset and offsets must increase.
    pub fn append_as_follower(&mut self, data: &[u8], now_ms: i64) -> Result<LogAppendInfo> {
        let batches = self.validate_append(data)?;
        let mut expect = self.next_offset;
        let mut metas = Vec::with_capacity(batches.len());
        let (mut max_ts, mut offset_of_max_ts, mut record_count) = (-1i64, expect, 0i64);
        for (_, h) in &batches {
            if h.base_offset < expect {
                return Err(Error::invalid(format!(
                    "replicated batch starts at offset {} but the log already reaches {expect}",
                    h.base_offset
                )));
            }
            if h.max_timestamp > max_ts {
                max_ts = h.max_timestamp;
                offset_of_max_ts = h.last_offset();
            }
            metas.push(BatchMeta {
                base_offset: h.base_offset,
                last_offset: h.last_offset(),
                max_timestamp: h.max_timestamp,
                size: h.size_in_bytes() as u64,
            });
            record_count += h.record_count as i64;
            expect = h.next_offset();
        }
        let first = batches[0].1.base_offset;
        let producer_updates = Self::follower_producer_updates(data, &batches)?;
        self.write(&metas, &[IoSlice::new(data)], max_ts, now_ms)?;
        let recorded = self.apply_producer_updates(&producer_updates);
        for (_, h) in &batches {
            if h.partition_leader_epoch >= 0 {
                self.epoch_cache
                    .assign(h.partition_leader_epoch, h.base_offset)?;
            }
        }
        recorded?;
        Ok(LogAppendInfo {
            first_offset: first,
            last_offset: expect - 1,
            max_timestamp: max_ts,
            offset_of_max_timestamp: offset_of_max_ts,
            log_append_time: -1,
            log_start_offset: self.log_start_offset,
            record_count,
            batch_count: batches.len(),
            valid_bytes: data.len() as u64,
            batch_base_offsets: None,
        })
    }

    /// Size limits and batch boundaries of an append, without checking CRCs.
    fn frame_append(&self, data: &[u8]) -> Result<Vec<(usize, BatchHeader)>> {
        self.check_append_size(data)?;
        let batches = frame_batches(data)?;
        self.check_batch_sizes(&batches)?;
        Ok(batches)
    }

    fn check_append_size(&self, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Err(Error::invalid(
                "an append must hold at least one record batch",
            ));
        }
        if data.len() as u64 > self.config.segment_bytes {
            return Err(Error::RecordBatchTooLarge {
                size: data.len(),
                max: self.config.segment_bytes as usize,
            });
        }
        Ok(())
    }

    fn check_batch_sizes(&self, batches: &[(usize, BatchHeader)]) -> Result<()> {
        for (_, h) in batches {
            if h.size_in_bytes() as u64 > self.config.max_message_bytes {
                return Err(Error::RecordTooLarge {
                    size: h.size_in_bytes(),
                    max: self.config.max_message_bytes as usize,
                });
            }
        }
        Ok(())
    }

    /// Size limits, batch boundaries and CRCs of an append.
    fn validate_append(&self, data: &[u8]) -> Result<Vec<(usize, BatchHeader)>> {
        self.check_append_size(data)?;
        let batches = validate_batches(data)?;
        self.check_batch_sizes(&batches)?;
        Ok(batches)
    }

    fn write(
        &mut self,
        metas: &[BatchMeta],
        iov: &[IoSlice<'_>],
        max_ts: i64,
        now_ms: i64,
    ) -> Result<()> {
        let bytes: u64 = metas.iter().map(|m| m.size).sum();
        let first = metas[0].base_offset;
        let last = metas[metas.len() - 1].last_offset;
        if self
            .active()
            .should_roll(&self.config, bytes, last, max_ts, now_ms)
            || first - self.active().base_offset() > i32::MAX as i64
        {
            self.roll_at(first, now_ms)?;
        }
        self.active_mut().append(metas, iov)?;
        self.next_offset = last + 1;
        Ok(())
    }

    /// Start a new active segment at the log end offset (no-op if the active one is empty).
    pub fn roll(&mut self, now_ms: i64) -> Result<()> {
        let at = self.next_offset;
        self.roll_at(at, now_ms)
    }

    fn roll_at(&mut self, base: i64, now_ms: i64) -> Result<()> {
        if self.active().size() == 0 && self.active().base_offset() == base {
            return Ok(());
        }
        if self.active().size() == 0 {
            // An empty active segment at a stale base (e.g. after a follower gap): replace it.
            let old = self.active().base_offset();
            self.segments.remove(&old).expect("active").delete()?;
        } else {
            self.active_mut().on_become_inactive()?;
        }
        let seg = Segment::create(&self.dir, base, &self.config, now_ms)?;
        self.segments.insert(base, seg);
        sync_dir(&self.dir)?;
        // The producer state as of the new segment's base, so that recovering this segment
        // starts from it (Kafka's roll). Nothing past the log end is in the state yet.
        self.producer_state.update_map_end_offset(base);
        self.producer_state.take_snapshot(&self.dir, base)?;
        Ok(())
    }

    /// Read whole batches from `start_offset`: at most `max_bytes` (but at least one batch when
    /// `min_one_batch`), only batches whose last offset is below `max_offset` (the high
    /// watermark, say; `None` for the log end).
    pub fn read(
        &self,
        start_offset: i64,
        max_bytes: u64,
        max_offset: Option<i64>,
        min_one_batch: bool,
    ) -> Result<FetchDataInfo> {
        self.read_with_upper_bound(start_offset, max_bytes, max_offset, min_one_batch, false)
            .map(|(info, _)| info)
    }

    /// [`Self::read`], and with `upper_bound` the offset after the last batch returned
    /// (Kafka's `fetchUpperBoundOffset`; `start_offset` when nothing is), which costs a
    /// header read when the returned bytes end inside a segment.
    pub(super) fn read_with_upper_bound(
        &self,
        start_offset: i64,
        max_bytes: u64,
        max_offset: Option<i64>,
        min_one_batch: bool,
        upper_bound: bool,
    ) -> Result<(FetchDataInfo, i64)> {
        if start_offset < self.log_start_offset || start_offset > self.next_offset {
            return Err(Error::OffsetOutOfRange {
                offset: start_offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.next_offset,
            });
        }
        let upper = max_offset.unwrap_or(self.next_offset).min(self.next_offset);
        let mut regions = Vec::new();
        let mut meta = None;
        let mut budget = max_bytes;
        let mut offset = start_offset;
        let mut next_after = start_offset;
        let (&floor, _) = self
            .segments
            .range(..=start_offset)
            .next_back()
            .unwrap_or_else(|| self.segments.iter().next().expect("a segment"));
        let segments: Vec<&Segment> = self.segments.range(floor..).map(|(_, s)| s).collect();
        for (i, seg) in segments.iter().enumerate() {
            if offset >= upper {
                break;
            }
            // Offsets in this segment are below `seg_end`.
            let seg_end = segments
                .get(i + 1)
                .map_or(self.next_offset, |s| s.base_offset());
            let Some((pos, first)) = seg.translate_offset(offset, 0)? else {
                offset = seg_end;
                continue;
            };
            meta.get_or_insert(LogOffsetMetadata {
                message_offset: start_offset,
                segment_base_offset: seg.base_offset(),
                relative_position: pos,
            });
            if first.last_offset() >= upper {
                break;
            }
            // Where the batches below `upper` end in this segment; no scan when `upper` lies
            // past it (the common case: reading up to the log end).
            let upper_pos = if upper >= seg_end {
                seg.size()
            } else {
                seg.translate_offset(upper, pos)?
                    .map_or(seg.size(), |(p, _)| p)
            };
            let first_end = pos + first.size_in_bytes() as u64;
            let limit = upper_pos.min(pos.saturating_add(budget));
            let end = if regions.is_empty() && min_one_batch && first_end > limit {
                first_end
            } else if limit >= seg.size() {
                seg.size()
            } else {
                seg.last_batch_end_before(pos, limit)?
            };
            if end <= pos {
                break;
            }
            regions.push(seg.region(pos, end - pos));
            budget = budget.saturating_sub(end - pos);
            if end < seg.size() {
                if upper_bound {
                    let mut s =
                        BatchScanner::new(seg.file(), end, seg.size(), RECORD_BATCH_OVERHEAD);
                    next_after = match s.next_header() {
                        Some(r) => r?.1.base_offset,
                        None => seg_end,
                    };
                }
                break;
            }
            next_after = seg_end;
            offset = seg_end;
        }
        let meta = meta.unwrap_or_else(|| {
            let a = self.active();
            LogOffsetMetadata {
                message_offset: start_offset,
                segment_base_offset: a.base_offset(),
                relative_position: a.size(),
            }
        });
        Ok((
            FetchDataInfo {
                fetch_offset_metadata: meta,
                regions,
                aborted_transactions: None,
            },
            next_after,
        ))
    }

    /// ListOffsets: the first record with timestamp >= `ts`, or the special
    /// `EARLIEST_TIMESTAMP`, `LATEST_TIMESTAMP`, `MAX_TIMESTAMP`.
    pub fn fetch_offset_by_timestamp(&self, ts: i64) -> Result<Option<TimestampAndOffset>> {
        let epoch_at = |o: i64| self.epoch_cache.epoch_for_offset(o);
        match ts {
            EARLIEST_TIMESTAMP => {
                let o = self.log_start_offset;
                return Ok(Some(TimestampAndOffset {
                    timestamp: -1,
                    offset: o,
                    leader_epoch: epoch_at(o),
                }));
            }
            LATEST_TIMESTAMP => {
                let o = self.next_offset;
                return Ok(Some(TimestampAndOffset {
                    timestamp: -1,
                    offset: o,
                    leader_epoch: self.epoch_cache.latest_epoch(),
                }));
            }
            MAX_TIMESTAMP => {
                // The earliest record with the largest timestamp at or after the log start
                // (KIP-734). Only the segment holding the log start needs a scan.
                let start = self.log_start_offset;
                let mut best: Option<(i64, &Segment)> = None;
                let segs: Vec<&Segment> = self.segments.values().collect();
                for (i, seg) in segs.iter().enumerate() {
                    let end = segs
                        .get(i + 1)
                        .map_or(self.next_offset, |n| n.base_offset());
                    if end <= start {
                        continue;
                    }
                    let ts = if seg.base_offset() < start {
                        seg.max_timestamp_from(start)?
                    } else {
                        seg.max_timestamp_so_far()
                    };
                    if ts >= 0 && best.is_none_or(|(b, _)| ts > b) {
                        best = Some((ts, seg));
                    }
                }
                let Some((ts, seg)) = best else {
                    return Ok(None);
                };
                return seg.find_offset_by_timestamp(ts, start);
            }
            t if t < 0 => {
                return Err(Error::InvalidRequest(format!(
                    "invalid timestamp {t} for an offset lookup"
                )))
            }
            _ => {}
        }
        for seg in self.segments.values() {
            if seg.max_timestamp_so_far() >= ts {
                if let Some(found) = seg.find_offset_by_timestamp(ts, self.log_start_offset)? {
                    return Ok(Some(found));
                }
            }
        }
        Ok(None)
    }

    /// Record that leader epoch `epoch` starts at `start_offset` before any of its batches
    /// is written (Kafka's `maybeAssignEpochStartOffset`: a new leader marks where its epoch
    /// begins, so a follower that diverged learns where to truncate). Ignored unless `epoch`
    /// is newer than the latest; returns whether the cache changed.
    pub fn assign_epoch_start_offset(&mut self, epoch: i32, start_offset: i64) -> Result<bool> {
        if start_offset > self.next_offset {
            return Err(Error::InvalidRequest(format!(
                "epoch {epoch} cannot start at {start_offset}, past the log end {}",
                self.next_offset
            )));
        }
        self.epoch_cache.assign(epoch, start_offset)
    }

    /// Remove every offset >= `offset` (a follower whose log diverged), and the epochs that
    /// start there. Returns whether any record was removed.
    pub fn truncate_to(&mut self, offset: i64, now_ms: i64) -> Result<bool> {
        if offset < 0 {
            return Err(Error::InvalidRequest(format!(
                "cannot truncate to negative offset {offset}"
            )));
        }
        if offset >= self.next_offset {
            // Nothing to cut, but an epoch this log began as leader at its end without
            // writing to it conflicts with the new leader's: it goes (Kafka's truncateTo).
            self.epoch_cache.truncate_from_end(self.next_offset)?;
            return Ok(false);
        }
        self.truncation_count += 1;
        if offset < self.log_start_offset
            || *self.segments.keys().next().expect("a segment") > offset
        {
            self.truncate_fully_and_start_at(offset, now_ms)?;
            return Ok(true);
        }
        let doomed: Vec<i64> = self.segments.range(offset + 1..).map(|(b, _)| *b).collect();
        for b in doomed {
            self.segments.remove(&b).expect("listed").delete()?;
        }
        let config = self.config.clone();
        let seg = self.active_mut();
        seg.truncate_to(offset)?;
        seg.on_become_active(&config)?;
        self.next_offset = seg.read_next_offset()?;
        // Cutting the batch that holds a mid-batch log start leaves nothing readable.
        self.log_start_offset = self.log_start_offset.min(self.next_offset);
        self.epoch_cache.truncate_from_end(self.next_offset)?;
        self.recovery_point = self.recovery_point.min(self.next_offset);
        self.reload_producer_state_after_truncation(now_ms)?;
        Ok(true)
    }

    /// Delete everything and restart empty at `offset` (a follower far behind the leader's
    /// log start).
    pub fn truncate_fully_and_start_at(&mut self, offset: i64, now_ms: i64) -> Result<()> {
        if offset < 0 {
            return Err(Error::InvalidRequest(format!(
                "cannot restart the log at negative offset {offset}"
            )));
        }
        self.truncation_count += 1;
        let all: Vec<i64> = self.segments.keys().copied().collect();
        for b in all {
            self.segments.remove(&b).expect("listed").delete()?;
        }
        self.segments.insert(
            offset,
            Segment::create(&self.dir, offset, &self.config, now_ms)?,
        );
        sync_dir(&self.dir)?;
        self.log_start_offset = offset;
        self.next_offset = offset;
        self.recovery_point = offset;
        self.producer_state
            .truncate_fully_and_start_at(&self.dir, offset)?;
        self.epoch_cache.clear()
    }

    /// Raise the log start offset (DeleteRecords, or a follower following the leader's).
    /// Segments wholly below it go at the next retention pass. Returns whether it moved.
    pub fn maybe_increment_log_start_offset(&mut self, offset: i64) -> Result<bool> {
        if offset > self.next_offset {
            return Err(Error::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.next_offset,
            });
        }
        if offset <= self.log_start_offset {
            return Ok(false);
        }
        self.log_start_offset = offset;
        self.epoch_cache.truncate_from_start(offset)?;
        // Kafka's onLogStartOffsetIncremented: nothing below the log start is replicated
        // to anyone any more.
        self.producer_state.on_high_watermark_updated(offset);
        Ok(true)
    }

    /// Retention: delete whole segments older than `retention.ms`, beyond `retention.bytes`,
    /// or wholly below the log start offset. Only segments wholly below `high_watermark`
    /// (the log end if `None`) are eligible. Returns the number deleted.
    pub fn delete_old_segments(
        &mut self,
        now_ms: i64,
        high_watermark: Option<i64>,
    ) -> Result<usize> {
        let hw = high_watermark
            .unwrap_or(self.next_offset)
            .min(self.next_offset);
        if let Some(h) = high_watermark {
            self.update_high_watermark(h);
        }
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        let mut total = self.size_in_bytes() as i64;
        let mut doomed = Vec::new();
        for (i, &base) in bases.iter().enumerate() {
            let seg = &self.segments[&base];
            let next_base = bases.get(i + 1).copied();
            let upper = next_base.unwrap_or(self.next_offset);
            // A segment is only deletable once all its offsets are below the high watermark;
            // the empty active segment never is.
            if upper > hw || (next_base.is_none() && seg.size() == 0) {
                break;
            }
            let by_time = self.config.retention_ms >= 0
                && now_ms - seg.largest_timestamp() > self.config.retention_ms;
            let by_size = self.config.retention_bytes >= 0
                && total - seg.size() as i64 >= self.config.retention_bytes;
            let by_start = next_base.is_some_and(|n| n <= self.log_start_offset);
            if !(by_time || by_size || by_start) {
                break;
            }
            total -= seg.size() as i64;
            doomed.push(base);
        }
        if doomed.len() == bases.len() {
            // Everything goes, including the active segment: keep an empty one at the end.
            self.roll(now_ms)?;
        }
        for b in &doomed {
            self.segments.remove(b).expect("listed").delete()?;
        }
        if !doomed.is_empty() {
            self.delete_producer_snapshots_below_first_segment()?;
        }
        if let Some(&first) = self.segments.keys().next() {
            if first > self.log_start_offset {
                self.log_start_offset = first;
                self.epoch_cache.truncate_from_start(first)?;
                self.producer_state.on_high_watermark_updated(first);
            }
        }
        self.recovery_point = self.recovery_point.max(self.log_start_offset);
        Ok(doomed.len())
    }

    /// fsync every segment holding offsets below `offset` and advance the recovery point.
    pub fn flush(&mut self, offset: i64) -> Result<()> {
        let offset = offset.min(self.next_offset);
        if offset <= self.recovery_point && offset != self.next_offset {
            return Ok(());
        }
        let from = self
            .segments
            .range(..=self.recovery_point)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        for (_, seg) in self.segments.range(from..offset.max(from + 1)) {
            seg.flush()?;
        }
        self.recovery_point = self.recovery_point.max(offset);
        Ok(())
    }

    /// Flush everything, snapshot the producer state at the log end and trim the active
    /// segment's indexes, ready for a clean-shutdown marker. The log must not be appended to
    /// afterwards.
    pub fn close(&mut self) -> Result<()> {
        let next = self.next_offset;
        self.flush(next)?;
        // So the next open need not replay anything (Kafka's close).
        self.take_producer_snapshot()?;
        let active = self.active_mut();
        active.on_become_inactive()?;
        active.flush()
    }

    /// Remove the log's directory and everything in it.
    pub fn delete(self) -> Result<()> {
        let dir = self.dir.clone();
        drop(self);
        fs::remove_dir_all(&dir).ctx("deleting log directory", &dir)
    }
}
