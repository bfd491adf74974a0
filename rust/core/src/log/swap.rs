//! The cleaner's segment files and their crash safety, as Kafka's `LogCleaner` and
//! `LogLoader` do it.
//!
//! The cleaner writes each group of segments it rewrites as one new segment under temporary
//! names, then swaps it in:
//!
//! ```text
//! 1. write   <base>.log.cleaned  <base>.index.cleaned  <base>.timeindex.cleaned
//!            <base>.txnindex.cleaned (always, even empty), fsync all
//! 2. rename  the three indexes, then the log, to .swap; fsync the directory
//!            (<base>.log.swap existing is the commit point)
//! 3. delete  the old segments' .log, .index, .timeindex and .txnindex files
//! 4. rename  .index.swap, .timeindex.swap, .txnindex.swap, then .log.swap to their final
//!            names; fsync dir
//! ```
//!
//! Opening a log ([`recover_swaps`], before anything else) finishes or undoes whatever a crash
//! interrupted: every `.cleaned` file is deleted (the swap never began; the old segments are
//! whole), every offset or time index `.swap` is deleted (indexes are rebuilt from the log),
//! and every `<base>.log.swap` is completed: the segment files with a base offset in the
//! swap's offset range `[base, next offset)` are deleted and the swap renamed to `<base>.log`.
//! The transaction index cannot be rebuilt from the segment alone, so it is swapped too:
//! `<base>.txnindex.swap` is renamed into place, and when it is gone (step 4 had renamed it)
//! `<base>.txnindex` is the new one and is kept; a `.txnindex.swap` without its `.log.swap`
//! (step 2 interrupted) is deleted. The cleaner always keeps a group's last batch (if need be
//! as an empty batch), so a swap's next offset is exactly the end of the group it replaces:
//! no segment outside it is touched.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::checkpoint::sync_dir;
use super::config::LogConfig;
use super::index::{OffsetIndex, TimeIndex};
use super::scan::BatchScanner;
use super::segment::{Segment, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX};
use super::txn_index::{write_txn_index, AbortedTxn, TXN_INDEX_SUFFIX};
use crate::error::{Error, IoContext, Result};
use crate::record::NO_TIMESTAMP;

/// Suffix of a segment the cleaner is writing (Kafka's `CleanedFileSuffix`).
pub const CLEANED_FILE_SUFFIX: &str = ".cleaned";
/// Suffix of a cleaned segment being swapped in (Kafka's `SwapFileSuffix`).
pub const SWAP_FILE_SUFFIX: &str = ".swap";

const SEGMENT_SUFFIXES: [&str; 4] = [
    LOG_SUFFIX,
    INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
];

fn segment_file(dir: &Path, base_offset: i64, suffix: &str, extra: &str) -> PathBuf {
    dir.join(format!("{base_offset:020}{suffix}{extra}"))
}

fn remove_if_exists(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::storage(format!("deleting {}", path.display()), e)),
    }
}

fn rename(from: &Path, to: &Path) -> Result<()> {
    fs::rename(from, to).ctx(&format!("renaming to {}", to.display()), from)
}

/// One new segment the cleaner writes (`<base>.log.cleaned` and its three indexes), indexed
/// the way a [`Segment`] indexes its appends; its aborted transactions are given by the
/// cleaner ([`CleanedSegment::append_aborted_txn`]). Until [`CleanedSegment::swap_in`] succeeds,
/// dropping it deletes its `.cleaned` files.
#[derive(Debug)]
pub struct CleanedSegment {
    dir: PathBuf,
    base_offset: i64,
    log: Option<BufWriter<File>>,
    offset_index: Option<OffsetIndex>,
    time_index: Option<TimeIndex>,
    size: u64,
    index_interval_bytes: u64,
    bytes_since_last_index_entry: u64,
    max_timestamp_so_far: i64,
    offset_of_max_timestamp_so_far: i64,
    next_offset: i64,
    aborted_txns: Vec<AbortedTxn>,
    swapped: bool,
}

impl CleanedSegment {
    /// Create the `.cleaned` files for a segment based at `base_offset` (replacing leftovers
    /// of an earlier attempt). `write_buffer` bytes are buffered before each write.
    pub fn create(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        write_buffer: usize,
    ) -> Result<Self> {
        for s in SEGMENT_SUFFIXES {
            remove_if_exists(&segment_file(dir, base_offset, s, CLEANED_FILE_SUFFIX))?;
        }
        let mut seg = CleanedSegment {
            dir: dir.to_path_buf(),
            base_offset,
            log: None,
            offset_index: None,
            time_index: None,
            size: 0,
            index_interval_bytes: config.index_interval_bytes,
            bytes_since_last_index_entry: 0,
            max_timestamp_so_far: NO_TIMESTAMP,
            offset_of_max_timestamp_so_far: base_offset,
            next_offset: base_offset,
            aborted_txns: Vec::new(),
            swapped: false,
        };
        // From here on, a failure drops `seg`, which deletes whatever was created.
        let path = seg.path(LOG_SUFFIX, CLEANED_FILE_SUFFIX);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .ctx("creating cleaned segment", &path)?;
        seg.log = Some(BufWriter::with_capacity(write_buffer.max(4096), file));
        let cap = Some(config.segment_index_bytes);
        seg.offset_index = Some(OffsetIndex::open(
            &seg.path(INDEX_SUFFIX, CLEANED_FILE_SUFFIX),
            base_offset,
            cap,
        )?);
        seg.time_index = Some(TimeIndex::open(
            &seg.path(TIME_INDEX_SUFFIX, CLEANED_FILE_SUFFIX),
            base_offset,
            cap,
        )?);
        Ok(seg)
    }

    fn path(&self, suffix: &str, extra: &str) -> PathBuf {
        segment_file(&self.dir, self.base_offset, suffix, extra)
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// Append one whole batch ending at `last_offset` with max timestamp `max_timestamp`.
    pub fn append(&mut self, batch: &[u8], last_offset: i64, max_timestamp: i64) -> Result<()> {
        if last_offset - self.base_offset > i32::MAX as i64 || last_offset < self.next_offset {
            return Err(Error::invalid(format!(
                "batch ending at {last_offset} cannot follow offset {} in a segment based at {}",
                self.next_offset, self.base_offset
            )));
        }
        let position = self.size;
        let Some(log) = self.log.as_mut() else {
            return Err(Error::InvalidRequest(
                "a finished cleaned segment cannot be appended to".into(),
            ));
        };
        if let Err(e) = log.write_all(batch) {
            let path = self.path(LOG_SUFFIX, CLEANED_FILE_SUFFIX);
            return Err(Error::storage(format!("writing {}", path.display()), e));
        }
        self.size += batch.len() as u64;
        if max_timestamp > self.max_timestamp_so_far {
            self.max_timestamp_so_far = max_timestamp;
            self.offset_of_max_timestamp_so_far = last_offset;
        }
        // The same rule as Segment::index_batch: an entry once index.interval.bytes have
        // passed; a full index stops gaining entries (lookups scan further).
        let (idx, tidx) = (
            self.offset_index.as_mut().expect("open"),
            self.time_index.as_mut().expect("open"),
        );
        if self.bytes_since_last_index_entry > self.index_interval_bytes
            && !idx.is_full()
            && !tidx.is_full()
        {
            idx.append(last_offset, position)?;
            tidx.maybe_append(
                self.max_timestamp_so_far,
                self.offset_of_max_timestamp_so_far,
                false,
            )?;
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += batch.len() as u64;
        self.next_offset = last_offset + 1;
        Ok(())
    }

    /// Record an aborted transaction whose marker this segment keeps (its `.txnindex`
    /// entry, in marker order).
    pub fn append_aborted_txn(&mut self, txn: AbortedTxn) {
        self.aborted_txns.push(txn);
    }

    /// Write the final time-index entry, trim the indexes, give the log file `modified` as
    /// its mtime (the old segments' last, as Kafka does, since time-based retention of a
    /// segment without timestamps reads it), and fsync all three files.
    pub fn finish(&mut self, modified: Option<SystemTime>) -> Result<()> {
        let log_path = self.path(LOG_SUFFIX, CLEANED_FILE_SUFFIX);
        let Some(writer) = self.log.take() else {
            return Err(Error::InvalidRequest(
                "a cleaned segment is finished only once".into(),
            ));
        };
        // The indexes are open exactly while the log is.
        let file = writer.into_inner().map_err(|e| {
            Error::storage(format!("writing {}", log_path.display()), e.into_error())
        })?;
        if let Some(t) = modified {
            file.set_modified(t).ctx("setting mtime of", &log_path)?;
        }
        file.sync_all().ctx("fsyncing", &log_path)?;
        let mut tidx = self.time_index.take().expect("open");
        if self.max_timestamp_so_far >= 0 {
            tidx.maybe_append(
                self.max_timestamp_so_far,
                self.offset_of_max_timestamp_so_far,
                true,
            )?;
        }
        let mut idx = self.offset_index.take().expect("open");
        idx.trim()?;
        tidx.trim()?;
        idx.flush()?;
        tidx.flush()?;
        let paths = [idx.path().to_path_buf(), tidx.path().to_path_buf()];
        drop((idx, tidx));
        for p in paths {
            File::open(&p)
                .and_then(|f| f.sync_all())
                .ctx("fsyncing", &p)?;
        }
        write_txn_index(
            &self.path(TXN_INDEX_SUFFIX, CLEANED_FILE_SUFFIX),
            &self.aborted_txns,
        )
    }

    /// Swap this finished segment in for `old` (steps 2-4 of the module docs) and open it.
    /// On an error the old segments' files may be partly deleted but the swap file remains,
    /// so the next open completes the swap; the caller keeps serving the old segments.
    pub fn swap_in(mut self, old: &[&Segment], config: &LogConfig) -> Result<Segment> {
        if self.log.is_some() {
            return Err(Error::InvalidRequest(
                "a cleaned segment must be finished before it is swapped in".into(),
            ));
        }
        let [log_s, idx_s, tidx_s, txn_s] = SEGMENT_SUFFIXES;
        // Indexes first, the log last: `.log.swap` existing marks the swap as committed.
        for s in [idx_s, tidx_s, txn_s, log_s] {
            rename(
                &self.path(s, CLEANED_FILE_SUFFIX),
                &self.path(s, SWAP_FILE_SUFFIX),
            )?;
        }
        self.swapped = true;
        sync_dir(&self.dir)?;
        for seg in old {
            for p in [
                seg.log_path(),
                seg.offset_index().path(),
                seg.time_index().path(),
                seg.txn_index().path(),
            ] {
                remove_if_exists(p)?;
            }
        }
        for s in [idx_s, tidx_s, txn_s, log_s] {
            rename(&self.path(s, SWAP_FILE_SUFFIX), &self.path(s, ""))?;
        }
        sync_dir(&self.dir)?;
        Segment::open(&self.dir, self.base_offset, config, false)
    }
}

impl Drop for CleanedSegment {
    fn drop(&mut self) {
        if self.swapped {
            return;
        }
        self.log = None;
        self.offset_index = None;
        self.time_index = None;
        for s in SEGMENT_SUFFIXES {
            // Best effort: a leftover is deleted by the next open anyway.
            let _ = fs::remove_file(self.path(s, CLEANED_FILE_SUFFIX));
        }
    }
}

/// Finish or undo, in `dir`, what a crash interrupted in the cleaner's swaps (see the module
/// docs). Runs before the segments are listed. Returns the number of swaps completed.
pub fn recover_swaps(dir: &Path) -> Result<usize> {
    let mut swaps = Vec::new();
    let mut txn_swaps = Vec::new();
    let mut segment_files = Vec::new();
    for entry in fs::read_dir(dir).ctx("listing", dir)? {
        let entry = entry.ctx("listing", dir)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(CLEANED_FILE_SUFFIX) {
            remove_if_exists(&entry.path())?;
        } else if let Some(stem) = name.strip_suffix(SWAP_FILE_SUFFIX) {
            match parse_segment_name(stem) {
                Some((base, LOG_SUFFIX)) => swaps.push(base),
                Some((base, TXN_INDEX_SUFFIX)) => txn_swaps.push((base, entry.path())),
                // Offset and time index swaps are rebuilt from the log rather than trusted.
                _ => remove_if_exists(&entry.path())?,
            }
        } else if let Some((base, suffix)) = parse_segment_name(name) {
            segment_files.push((base, suffix, entry.path()));
        }
    }
    // A transaction index swap whose log swap never came: the swap did not commit.
    for (base, path) in &txn_swaps {
        if !swaps.contains(base) {
            remove_if_exists(path)?;
        }
    }
    if swaps.is_empty() {
        return Ok(0);
    }
    swaps.sort_unstable();
    for &base in &swaps {
        let swap = segment_file(dir, base, LOG_SUFFIX, SWAP_FILE_SUFFIX);
        let next = next_offset_of(&swap, base)?.max(base + 1);
        let txn_swap = txn_swaps.iter().find(|(b, _)| *b == base).map(|(_, p)| p);
        for (b, suffix, p) in &segment_files {
            // Without its swap file, `<base>.txnindex` is the swap's, already in place.
            let new_txn_index = *b == base && *suffix == TXN_INDEX_SUFFIX && txn_swap.is_none();
            if (base..next).contains(b) && !new_txn_index {
                remove_if_exists(p)?;
            }
        }
        if let Some(p) = txn_swap {
            rename(p, &segment_file(dir, base, TXN_INDEX_SUFFIX, ""))?;
        }
        rename(&swap, &segment_file(dir, base, LOG_SUFFIX, ""))?;
    }
    sync_dir(dir)?;
    Ok(swaps.len())
}

/// `(base offset, suffix)` of a segment file name
/// `<20 digits><.log|.index|.timeindex|.txnindex>`.
fn parse_segment_name(name: &str) -> Option<(i64, &'static str)> {
    SEGMENT_SUFFIXES.iter().find_map(|&s| {
        let stem = name.strip_suffix(s)?;
        (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
            .then(|| stem.parse::<i64>().ok().map(|b| (b, s)))
            .flatten()
    })
}

/// The offset after the last whole batch of a segment file (`base` when it has none).
fn next_offset_of(path: &Path, base: i64) -> Result<i64> {
    let file = File::open(path).ctx("opening", path)?;
    let len = file.metadata().ctx("stat", path)?.len();
    let mut s = BatchScanner::new(&file, 0, len, 64 * 1024);
    let mut next = base;
    // A swap file was fsynced before it was renamed, so it is whole; should it not be, its
    // whole batches are what it covers.
    while let Some(Ok((_, h))) = s.next_header() {
        next = next.max(h.next_offset());
    }
    Ok(next)
}
