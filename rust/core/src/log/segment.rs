//! One segment: a `.log` file of batches and its two sparse indexes.

use std::fs::{self, File, OpenOptions};
use std::io::IoSlice;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::config::LogConfig;
use super::index::{OffsetIndex, TimeIndex};
use super::scan::BatchScanner;
use super::txn_index::{TransactionIndex, TXN_INDEX_SUFFIX};
use crate::error::{Error, IoContext, Result};
use crate::io::FileRegion;
use crate::record::batch::{parse_records, records_bytes, BatchHeader};
use crate::record::NO_TIMESTAMP;

pub const LOG_SUFFIX: &str = ".log";
pub const INDEX_SUFFIX: &str = ".index";
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";

/// A timestamp lookup's answer (Kafka's `TimestampAndOffset`): the first record at or
/// after the wanted time, and the leader epoch of its batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampAndOffset {
    pub timestamp: i64,
    pub offset: i64,
    pub leader_epoch: Option<i32>,
}

/// Bytes read per `pread` when walking batch headers.
const SCAN_CHUNK: usize = 16 * 1024;
/// Bytes read per `pread` when looking up an offset: an index interval and then some, as the
/// target batch starts within about `index.interval.bytes` of the index entry.
const LOOKUP_CHUNK: usize = 4096 + 2 * crate::record::RECORD_BATCH_OVERHEAD;
/// Bytes read per `pread` when recovering (whole batches are CRC-checked).
const RECOVERY_CHUNK: usize = 8 << 20;

pub fn log_file_name(base_offset: i64) -> String {
    format!("{base_offset:020}{LOG_SUFFIX}")
}

fn file_path(dir: &Path, base_offset: i64, suffix: &str) -> PathBuf {
    dir.join(format!("{base_offset:020}{suffix}"))
}

/// What the log needs to know about each batch of an append.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchMeta {
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub size: u64,
}

/// A segment: the `.log` file of batches starting at `base_offset` plus its `.index`,
/// `.timeindex` and (once a transaction in it aborted) `.txnindex`.
///
/// Owned by one [`super::Log`] and only touched under its lock. Appends go to the end of the
/// file at `size`; a failed write is cut back so the file never keeps a partial batch that
/// the log did not acknowledge. After a crash, bytes past the last fsync may be torn; the log
/// calls [`Segment::recover`] for every segment past the recovery point.
#[derive(Debug)]
pub struct Segment {
    base_offset: i64,
    file: Arc<File>,
    log_path: PathBuf,
    size: u64,
    pub(crate) offset_index: OffsetIndex,
    pub(crate) time_index: TimeIndex,
    pub(crate) txn_index: TransactionIndex,
    index_interval_bytes: u64,
    bytes_since_last_index_entry: u64,
    max_timestamp_so_far: i64,
    offset_of_max_timestamp_so_far: i64,
    /// Max timestamp of the first batch: the start of the `segment.ms` clock.
    rolling_based_timestamp: Option<i64>,
    created_ms: i64,
}

impl Segment {
    /// Create a new, empty, active segment.
    pub fn create(dir: &Path, base_offset: i64, config: &LogConfig, now_ms: i64) -> Result<Self> {
        let log_path = file_path(dir, base_offset, LOG_SUFFIX);
        if log_path.exists() && fs::metadata(&log_path).ctx("stat", &log_path)?.len() > 0 {
            return Err(Error::storage(
                "creating segment",
                std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    format!("{} exists", log_path.display()),
                ),
            ));
        }
        for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX] {
            let _ = fs::remove_file(file_path(dir, base_offset, suffix));
        }
        let mut seg = Self::open(dir, base_offset, config, true)?;
        seg.created_ms = now_ms;
        Ok(seg)
    }

    /// Open an existing segment as found on disk. `active` preallocates its indexes.
    /// Nothing is validated here: see [`Segment::sanity_check`] and [`Segment::recover`].
    pub fn open(dir: &Path, base_offset: i64, config: &LogConfig, active: bool) -> Result<Self> {
        let log_path = file_path(dir, base_offset, LOG_SUFFIX);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&log_path)
            .ctx("opening segment", &log_path)?;
        let meta = file.metadata().ctx("stat", &log_path)?;
        let cap = active.then_some(config.segment_index_bytes);
        let offset_index =
            OffsetIndex::open(&file_path(dir, base_offset, INDEX_SUFFIX), base_offset, cap)?;
        let time_index = TimeIndex::open(
            &file_path(dir, base_offset, TIME_INDEX_SUFFIX),
            base_offset,
            cap,
        )?;
        let txn_index =
            TransactionIndex::open(&file_path(dir, base_offset, TXN_INDEX_SUFFIX), base_offset)?;
        let created_ms = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64);
        let mut seg = Segment {
            base_offset,
            file: Arc::new(file),
            log_path,
            size: meta.len(),
            offset_index,
            time_index,
            txn_index,
            index_interval_bytes: config.index_interval_bytes,
            bytes_since_last_index_entry: 0,
            max_timestamp_so_far: NO_TIMESTAMP,
            offset_of_max_timestamp_so_far: base_offset,
            rolling_based_timestamp: None,
            created_ms,
        };
        if let Some(last) = seg.time_index.last_entry() {
            seg.max_timestamp_so_far = last.timestamp;
            seg.offset_of_max_timestamp_so_far = last.offset;
        }
        Ok(seg)
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub fn size(&self) -> u64 {
        self.size
    }
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }
    pub fn file(&self) -> &Arc<File> {
        &self.file
    }
    pub fn offset_index(&self) -> &OffsetIndex {
        &self.offset_index
    }
    pub fn time_index(&self) -> &TimeIndex {
        &self.time_index
    }
    pub fn txn_index(&self) -> &TransactionIndex {
        &self.txn_index
    }
    pub fn max_timestamp_so_far(&self) -> i64 {
        self.max_timestamp_so_far
    }

    /// The newest timestamp in the segment, for retention; the file's mtime if it has none.
    pub fn largest_timestamp(&self) -> i64 {
        if self.max_timestamp_so_far >= 0 {
            self.max_timestamp_so_far
        } else {
            self.created_ms
        }
    }

    fn scanner(&self, start: u64, chunk: usize) -> BatchScanner<'_> {
        BatchScanner::new(&self.file, start, self.size, chunk)
    }

    /// Check the indexes against the log without reading every batch: entries in order,
    /// within the file, and the last offset-index entry names a real batch boundary.
    pub fn sanity_check(&self, last_offset: i64) -> Result<()> {
        self.offset_index.sanity_check(self.size)?;
        self.time_index.sanity_check(last_offset)?;
        self.txn_index.sanity_check(last_offset.saturating_add(1))?;
        if let Some(e) = self.offset_index.last_entry() {
            let mut s = self.scanner(e.position, crate::record::RECORD_BATCH_OVERHEAD);
            match s.next_header() {
                Some(Ok((_, h))) if h.last_offset() == e.offset => {}
                _ => {
                    return Err(Error::corrupt(format!(
                        "index {} points at position {} which is not the batch ending at {}",
                        self.offset_index.path().display(),
                        e.position,
                        e.offset
                    )))
                }
            }
        }
        Ok(())
    }

    /// The offset after the segment's last batch (its base offset when empty).
    pub fn read_next_offset(&self) -> Result<i64> {
        let start = self.offset_index.last_entry().map_or(0, |e| e.position);
        let mut s = self.scanner(start, SCAN_CHUNK);
        let mut next = self.base_offset;
        while let Some(r) = s.next_header() {
            next = r?.1.next_offset();
        }
        Ok(next)
    }

    /// Read the first batch's timestamp (the start of the `segment.ms` clock) and scan the
    /// batches after the last time-index entry for the true max timestamp.
    pub fn load_timestamps(&mut self) -> Result<()> {
        if self.size == 0 {
            return Ok(());
        }
        if let Some(Ok((_, h))) = self
            .scanner(0, crate::record::RECORD_BATCH_OVERHEAD)
            .next_header()
        {
            self.rolling_based_timestamp = Some(h.max_timestamp);
        }
        let from = self
            .time_index
            .last_entry()
            .map_or(self.base_offset, |e| e.offset);
        let start = self.offset_index.lookup(from).position;
        let file = self.file.clone();
        let mut s = BatchScanner::new(&file, start, self.size, SCAN_CHUNK);
        while let Some(r) = s.next_header() {
            let (_, h) = r?;
            if h.max_timestamp > self.max_timestamp_so_far {
                self.max_timestamp_so_far = h.max_timestamp;
                self.offset_of_max_timestamp_so_far = h.last_offset();
            }
        }
        Ok(())
    }

    /// Re-read every batch, checking each; cut the file at the first torn, corrupt or
    /// out-of-order batch; rebuild both indexes. Batches must start at or after `min_offset`.
    /// `on_batch` sees each valid batch (the log collects leader epochs). Returns the bytes
    /// cut off.
    pub fn recover(
        &mut self,
        config: &LogConfig,
        min_offset: i64,
        on_batch: &mut dyn FnMut(&BatchHeader),
    ) -> Result<u64> {
        self.offset_index.reset();
        self.time_index.reset();
        // Rebuilt by the log once the producer state before this segment is known.
        self.txn_index.reset()?;
        // Room for the rebuilt entries; the caller trims again if the segment is not active.
        self.on_become_active(config)?;
        self.max_timestamp_so_far = NO_TIMESTAMP;
        self.offset_of_max_timestamp_so_far = self.base_offset;
        self.bytes_since_last_index_entry = 0;
        self.rolling_based_timestamp = None;
        let mut valid = 0u64;
        let mut prev_next = min_offset.max(self.base_offset);
        let file = self.file.clone();
        let mut s = BatchScanner::new(&file, 0, self.size, RECOVERY_CHUNK);
        while let Some(r) = s.next_batch() {
            let Ok((pos, h, _)) = r else { break };
            if h.base_offset < prev_next || h.last_offset() - self.base_offset > i32::MAX as i64 {
                break;
            }
            self.index_batch(
                &BatchMeta {
                    base_offset: h.base_offset,
                    last_offset: h.last_offset(),
                    max_timestamp: h.max_timestamp,
                    size: h.size_in_bytes() as u64,
                },
                pos,
            )?;
            on_batch(&h);
            prev_next = h.next_offset();
            valid = pos + h.size_in_bytes() as u64;
        }
        let truncated = self.size - valid;
        if truncated > 0 {
            self.file.set_len(valid).ctx("truncating", &self.log_path)?;
            self.size = valid;
        }
        Ok(truncated)
    }

    /// Index one batch that sits at `position` (already in the file).
    fn index_batch(&mut self, b: &BatchMeta, position: u64) -> Result<()> {
        if b.max_timestamp > self.max_timestamp_so_far {
            self.max_timestamp_so_far = b.max_timestamp;
            self.offset_of_max_timestamp_so_far = b.last_offset;
        }
        if self.rolling_based_timestamp.is_none() {
            self.rolling_based_timestamp = Some(b.max_timestamp);
        }
        // A full index (possible only when recovering under a smaller segment.index.bytes)
        // stops gaining entries: lookups then scan further, but stay correct.
        if self.bytes_since_last_index_entry > self.index_interval_bytes
            && !self.offset_index.is_full()
            && !self.time_index.is_full()
        {
            self.offset_index.append(b.last_offset, position)?;
            self.time_index.maybe_append(
                self.max_timestamp_so_far,
                self.offset_of_max_timestamp_so_far,
                false,
            )?;
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += b.size;
        Ok(())
    }

    /// Whether an append of `bytes` ending at `last_offset` with newest timestamp
    /// `max_timestamp` must go to a new segment (Kafka's `shouldRoll`).
    pub(crate) fn should_roll(
        &self,
        config: &LogConfig,
        bytes: u64,
        last_offset: i64,
        max_timestamp: i64,
        now_ms: i64,
    ) -> bool {
        if self.size == 0 {
            return false;
        }
        let waited = match self.rolling_based_timestamp {
            Some(t) if t >= 0 => max_timestamp.saturating_sub(t),
            _ => now_ms.saturating_sub(self.created_ms),
        };
        self.size + bytes > config.segment_bytes
            || waited > config.segment_ms - config.segment_jitter_ms
            || self.offset_index.is_full()
            || self.time_index.is_full()
            || last_offset - self.base_offset > i32::MAX as i64
    }

    /// Write `iov` (the batches described by `metas`) at the end of the file and index them.
    /// On a write error the file is cut back to its old size.
    pub(crate) fn append(&mut self, metas: &[BatchMeta], iov: &[IoSlice<'_>]) -> Result<()> {
        let start = self.size;
        let total: u64 = metas.iter().map(|m| m.size).sum();
        if let Err(e) = pwritev_all(&self.file, iov, start) {
            let _ = self.file.set_len(start);
            return Err(Error::storage(
                format!("appending to {}", self.log_path.display()),
                e,
            ));
        }
        self.size = start + total;
        let mut pos = start;
        for m in metas {
            if let Err(e) = self.index_batch(m, pos) {
                // Never keep bytes the log did not acknowledge: undo the whole append.
                self.undo_append(start, metas[0].base_offset)?;
                return Err(e);
            }
            pos += m.size;
        }
        Ok(())
    }

    /// Recompute the timestamps kept in memory after the segment shrank.
    fn reload_timestamps(&mut self) -> Result<()> {
        self.max_timestamp_so_far = NO_TIMESTAMP;
        self.offset_of_max_timestamp_so_far = self.base_offset;
        if let Some(last) = self.time_index.last_entry() {
            self.max_timestamp_so_far = last.timestamp;
            self.offset_of_max_timestamp_so_far = last.offset;
        }
        self.rolling_based_timestamp = None;
        self.load_timestamps()
    }

    /// Cut the segment back to `size` bytes, dropping index entries from `first_offset` on.
    pub(crate) fn undo_append(&mut self, size: u64, first_offset: i64) -> Result<()> {
        self.offset_index.truncate_to(first_offset);
        self.time_index.truncate_to(first_offset);
        self.file.set_len(size).ctx("truncating", &self.log_path)?;
        self.size = size;
        self.reload_timestamps()
    }

    /// The largest batch timestamp among batches holding offsets >= `offset`.
    pub fn max_timestamp_from(&self, offset: i64) -> Result<i64> {
        let Some((pos, first)) = self.translate_offset(offset, 0)? else {
            return Ok(NO_TIMESTAMP);
        };
        let mut s = self.scanner(pos, SCAN_CHUNK);
        let mut max = NO_TIMESTAMP;
        while let Some(r) = s.next_header() {
            let (at, h) = r?;
            max = max.max(if at == pos && first.base_offset < offset {
                // The batch straddles `offset`: only its records from `offset` on count.
                self.with_records(at, &h, |recs| {
                    recs.iter()
                        .filter(|r| r.offset >= offset)
                        .map(|r| r.timestamp)
                        .max()
                })?
                .unwrap_or(NO_TIMESTAMP)
            } else {
                h.max_timestamp
            });
        }
        Ok(max)
    }

    /// Read the batch at `position` and hand its records to `f`.
    fn with_records<T>(
        &self,
        position: u64,
        h: &BatchHeader,
        f: impl FnOnce(&[crate::record::Record<'_>]) -> T,
    ) -> Result<T> {
        let mut batch = vec![0u8; h.size_in_bytes()];
        self.region(position, batch.len() as u64)
            .read_exact_into(&mut batch)?;
        let mut scratch = Vec::new();
        let recs = records_bytes(h, &batch, &mut scratch)?;
        let spans = parse_records(h, recs, false)?;
        let records: Vec<_> = spans.iter().map(|span| span.resolve(h, recs)).collect();
        Ok(f(&records))
    }

    /// Position and header of the first batch at or after `start` whose last offset is >=
    /// `offset` (Kafka's `translateOffset`).
    pub fn translate_offset(&self, offset: i64, start: u64) -> Result<Option<(u64, BatchHeader)>> {
        let from = self.offset_index.lookup(offset).position.max(start);
        let mut s = self.scanner(from, LOOKUP_CHUNK);
        while let Some(r) = s.next_header() {
            let (pos, h) = r?;
            if h.last_offset() >= offset {
                return Ok(Some((pos, h)));
            }
        }
        Ok(None)
    }

    /// The end of the last whole batch that ends at or before `limit` (and after `start`).
    pub fn last_batch_end_before(&self, start: u64, limit: u64) -> Result<u64> {
        let limit = limit.min(self.size);
        let from = self
            .offset_index
            .lookup_by_position(limit)
            .position
            .max(start);
        let mut s = self.scanner(from, LOOKUP_CHUNK);
        let mut end = from;
        while let Some(r) = s.next_header() {
            let (pos, h) = r?;
            let batch_end = pos + h.size_in_bytes() as u64;
            if batch_end > limit {
                break;
            }
            end = batch_end;
        }
        Ok(end)
    }

    pub fn region(&self, position: u64, length: u64) -> FileRegion {
        FileRegion {
            file: self.file.clone(),
            position,
            length,
        }
    }

    /// First record with timestamp >= `ts` and offset >= `starting_offset`.
    pub fn find_offset_by_timestamp(
        &self,
        ts: i64,
        starting_offset: i64,
    ) -> Result<Option<TimestampAndOffset>> {
        let indexed = self.time_index.lookup(ts);
        let from = self
            .offset_index
            .lookup(indexed.offset.max(starting_offset))
            .position;
        let mut s = self.scanner(from, SCAN_CHUNK);
        while let Some(r) = s.next_header() {
            let (pos, h) = r?;
            if h.max_timestamp < ts || h.last_offset() < starting_offset {
                continue;
            }
            let found = self.with_records(pos, &h, |recs| {
                recs.iter()
                    .find(|r| r.timestamp >= ts && r.offset >= starting_offset)
                    .map(|r| TimestampAndOffset {
                        timestamp: r.timestamp,
                        offset: r.offset,
                        leader_epoch: (h.partition_leader_epoch >= 0)
                            .then_some(h.partition_leader_epoch),
                    })
            })?;
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// Remove every batch whose last offset is >= `offset`. Returns the bytes removed.
    pub fn truncate_to(&mut self, offset: i64) -> Result<u64> {
        let Some((pos, _)) = self.translate_offset(offset, 0)? else {
            return Ok(0);
        };
        let removed = self.size - pos;
        self.offset_index.truncate_to(offset);
        self.time_index.truncate_to(offset);
        self.txn_index.truncate_to(offset)?;
        self.file.set_len(pos).ctx("truncating", &self.log_path)?;
        self.size = pos;
        self.bytes_since_last_index_entry = 0;
        self.reload_timestamps()?;
        Ok(removed)
    }

    /// The segment stops being the active one: write its final time-index entry and trim
    /// both indexes to their entries.
    pub fn on_become_inactive(&mut self) -> Result<()> {
        if self.max_timestamp_so_far >= 0 {
            self.time_index.maybe_append(
                self.max_timestamp_so_far,
                self.offset_of_max_timestamp_so_far,
                true,
            )?;
        }
        self.offset_index.trim()?;
        self.time_index.trim()
    }

    /// The segment becomes the active one again (after reopening or truncation).
    pub fn on_become_active(&mut self, config: &LogConfig) -> Result<()> {
        self.offset_index.resize(config.segment_index_bytes)?;
        self.time_index.resize(config.segment_index_bytes)
    }

    pub fn flush(&self) -> Result<()> {
        self.file.sync_data().ctx("fsyncing", &self.log_path)?;
        self.offset_index.flush()?;
        self.time_index.flush()?;
        self.txn_index.flush()
    }

    /// Remove the segment's files. Open [`FileRegion`]s keep reading the unlinked file.
    pub fn delete(self) -> Result<()> {
        let paths = [
            self.log_path.clone(),
            self.offset_index.path().to_path_buf(),
            self.time_index.path().to_path_buf(),
            self.txn_index.path().to_path_buf(),
        ];
        drop(self);
        for p in paths {
            match fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::storage(format!("deleting {}", p.display()), e)),
            }
        }
        Ok(())
    }
}

/// `pwritev` every byte of `iov` at `offset`, looping on short writes.
fn pwritev_all(file: &File, iov: &[IoSlice<'_>], mut offset: u64) -> std::io::Result<()> {
    let mut bufs: Vec<IoSlice<'_>> = iov.iter().filter(|s| !s.is_empty()).copied().collect();
    let mut slices: &mut [IoSlice<'_>] = &mut bufs;
    while !slices.is_empty() {
        let n_iov = slices.len().min(512);
        // SAFETY: IoSlice is ABI-compatible with iovec; the slices borrow live buffers.
        let n = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                slices.as_ptr() as *const libc::iovec,
                n_iov as libc::c_int,
                offset as libc::off_t,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::WriteZero,
                "pwritev wrote nothing",
            ));
        }
        offset += n as u64;
        IoSlice::advance_slices(&mut slices, n as usize);
    }
    Ok(())
}
