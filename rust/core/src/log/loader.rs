//! Loading a partition log from its directory (Kafka's `LogLoader`): [`Log::open`] and the
//! recovery it runs live here, apart from the log's reads and writes.
//!
//! Opening first finishes or undoes a log cleaner swap that a crash interrupted (`.cleaned`
//! files deleted, a `.log.swap` put in place of the segments it replaces; see `swap.rs`),
//! lists the segment files (deleting `.tmp` and `.deleted` leftovers and indexes without a
//! `.log`), loads the `leader-epoch-checkpoint`, and then recovers:
//!
//! - after a clean shutdown (the log directory's `.kafka_cleanshutdown`), nothing is re-read
//!   except segments whose indexes are missing or fail their sanity check, which are rebuilt;
//! - after a crash, every segment from the one holding the recovery point on is re-read, each
//!   batch's CRC checked, its indexes rebuilt; the first torn or corrupt batch is cut and
//!   every later segment deleted;
//! - a malformed epoch checkpoint is rebuilt from the batches' leader epochs.
//!
//! The recovery point is not advanced by loading (only a flush advances it), so a crash right
//! after an open recovers the same segments again. Last, the producer state is loaded from
//! its latest snapshot and the batches after it (`Log::load_producer_state` in
//! `producer_log.rs`); when segments were recovered, from a snapshot at or below the first of
//! them, so that replaying their transaction markers rebuilds their `.txnindex` files. (The cleaner's checkpoint, `cleaner-offset-checkpoint`, belongs to
//! the log directory and is kept by the broker's LogCleanerManager.)

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use super::config::LogConfig;
use super::epoch_cache::{EpochEntry, LeaderEpochCache};
use super::log::Log;
use super::producer_state::ProducerStateManager;
use super::scan::BatchScanner;
use super::segment::{Segment, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX};
use super::swap::recover_swaps;
use super::txn_index::TXN_INDEX_SUFFIX;
use crate::error::{IoContext, Result};
use crate::record::batch::BatchHeader;

/// How to open a log, from the log directory's checkpoints and clean-shutdown marker.
#[derive(Debug, Clone, Copy)]
pub struct OpenOptions {
    /// Offset below which everything is known flushed (`recovery-point-offset-checkpoint`).
    pub recovery_point: i64,
    /// `log-start-offset-checkpoint`.
    pub log_start_offset: i64,
    /// The log directory's `.kafka_cleanshutdown` marker was present.
    pub clean_shutdown: bool,
    pub now_ms: i64,
}

/// What opening the log found and repaired.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoveryInfo {
    /// Segments re-read and re-indexed.
    pub recovered_segments: usize,
    /// Bytes of them scanned.
    pub recovered_bytes: u64,
    /// Bytes cut from torn or corrupt tails.
    pub truncated_bytes: u64,
    /// Whole segments deleted because they followed corruption.
    pub deleted_segments: usize,
    /// Segments whose indexes failed their sanity check on a clean open and were rebuilt.
    pub rebuilt_indexes: usize,
}

impl Log {
    /// Open the log in `dir` (created if missing), recovering it if the shutdown was unclean:
    /// list its segments, drop leftovers, load the leader-epoch checkpoint, then recover what
    /// the shutdown left unsafe.
    pub fn open(dir: &Path, config: LogConfig, opts: OpenOptions) -> Result<(Log, RecoveryInfo)> {
        config.validate()?;
        fs::create_dir_all(dir).ctx("creating log directory", dir)?;
        let mut info = RecoveryInfo::default();
        // A cleaner's swap interrupted by a crash is finished (or undone) first.
        recover_swaps(dir)?;
        let bases = scan_dir(dir)?;
        let mut segments = BTreeMap::new();
        let mut missing_index = Vec::new();
        for (i, &base) in bases.iter().enumerate() {
            let has_indexes = [INDEX_SUFFIX, TIME_INDEX_SUFFIX]
                .iter()
                .all(|s| dir.join(format!("{base:020}{s}")).exists());
            if !has_indexes {
                missing_index.push(base);
            }
            segments.insert(
                base,
                Segment::open(dir, base, &config, i + 1 == bases.len())?,
            );
        }
        let (epoch_cache, epoch_file_ok) = match LeaderEpochCache::load(dir) {
            Ok(c) => (c, true),
            Err(_) => (LeaderEpochCache::empty(dir), false),
        };
        let mut log = Log {
            dir: dir.to_path_buf(),
            config,
            segments,
            log_start_offset: opts.log_start_offset.max(0),
            next_offset: 0,
            recovery_point: opts.recovery_point.max(0),
            epoch_cache,
            truncation_count: 0,
            cleaning: false,
            producer_state: ProducerStateManager::new(),
        };
        let mut recovered_epochs: Vec<EpochEntry> = Vec::new();
        // Segments re-read: their `.txnindex` is rebuilt while the producer state loads.
        let mut recovered: Vec<i64> = Vec::new();
        if log.segments.is_empty() {
            let base = log.log_start_offset;
            log.segments
                .insert(base, Segment::create(dir, base, &log.config, opts.now_ms)?);
        } else {
            recover_segments(
                &mut log,
                &opts,
                &missing_index,
                &mut info,
                &mut recovered_epochs,
                &mut recovered,
            )?;
        }
        let last = log
            .segments
            .values_mut()
            .next_back()
            .expect("at least one segment");
        log.next_offset = last.read_next_offset()?;
        last.load_timestamps()?;
        last.on_become_active(&log.config)?;
        let first_base = *log.segments.keys().next().expect("at least one segment");
        log.log_start_offset = log.log_start_offset.max(first_base);
        if log.log_start_offset > log.next_offset {
            let start = log.log_start_offset;
            log.truncate_fully_and_start_at(start, opts.now_ms)?;
        }
        if !epoch_file_ok {
            recovered_epochs = epochs_from_batches(&log)?;
            log.epoch_cache.replace(Vec::new())?;
        }
        for e in recovered_epochs {
            log.epoch_cache.assign_in_memory(e.epoch, e.start_offset);
        }
        log.epoch_cache.truncate_from_end(log.next_offset)?;
        log.epoch_cache.truncate_from_start(log.log_start_offset)?;
        log.epoch_cache.flush()?;
        recovered.retain(|b| log.segments.contains_key(b));
        log.load_producer_state(opts.clean_shutdown, opts.now_ms, &recovered)?;
        // As Kafka's LogLoader: only a flush advances the recovery point, so a crash right
        // after this open recovers the same segments again.
        log.recovery_point = if opts.clean_shutdown && info.recovered_segments == 0 {
            log.next_offset
        } else {
            log.recovery_point.min(log.next_offset)
        };
        Ok((log, info))
    }
}

/// Recover every segment that needs it: on an unclean open, each from the one holding the
/// recovery point on; on any open, one whose indexes are missing or fail their sanity check,
/// or whose offsets overlap the previous one. The first torn or corrupt batch is cut and every
/// later segment deleted. Leader epochs seen in recovered batches are collected in `epochs`,
/// the recovered segments' bases in `recovered` (their transaction indexes are left empty,
/// to be rebuilt with the producer state).
fn recover_segments(
    log: &mut Log,
    opts: &OpenOptions,
    missing_index: &[i64],
    info: &mut RecoveryInfo,
    epochs: &mut Vec<EpochEntry>,
    recovered: &mut Vec<i64>,
) -> Result<()> {
    let bases: Vec<i64> = log.segments.keys().copied().collect();
    // Unclean: everything from the segment holding the recovery point on.
    let first_unflushed = if opts.clean_shutdown {
        i64::MAX
    } else {
        log.segments
            .range(..=log.recovery_point)
            .next_back()
            .map_or(bases[0], |(b, _)| *b)
    };
    let mut prev_next = 0i64;
    let mut cut = false;
    for (i, &base) in bases.iter().enumerate() {
        if cut {
            log.segments.remove(&base).expect("listed").delete()?;
            info.deleted_segments += 1;
            continue;
        }
        let upper = bases.get(i + 1).map_or(i64::MAX, |b| b - 1);
        let seg = log.segments.get_mut(&base).expect("listed");
        let needs = base >= first_unflushed
            || missing_index.contains(&base)
            || base < prev_next
            || seg.sanity_check(upper).is_err();
        if needs {
            if base < first_unflushed {
                info.rebuilt_indexes += 1;
            } else {
                info.recovered_segments += 1;
            }
            info.recovered_bytes += seg.size();
            let truncated = seg.recover(&log.config, prev_next, &mut |h: &BatchHeader| {
                let e = h.partition_leader_epoch;
                if e >= 0 && epochs.last().is_none_or(|l| e > l.epoch) {
                    epochs.push(EpochEntry {
                        epoch: e,
                        start_offset: h.base_offset,
                    });
                }
            })?;
            info.truncated_bytes += truncated;
            cut = truncated > 0;
            recovered.push(base);
        }
        if i + 1 < bases.len() {
            seg.on_become_inactive()?;
        }
        prev_next = if seg.size() == 0 {
            prev_next.max(base)
        } else {
            seg.read_next_offset()?
        };
    }
    Ok(())
}

/// The leader epochs of every batch, for a leader-epoch checkpoint that could not be read.
fn epochs_from_batches(log: &Log) -> Result<Vec<EpochEntry>> {
    let mut out: Vec<EpochEntry> = Vec::new();
    for seg in log.segments.values() {
        let mut s = BatchScanner::new(seg.file(), 0, seg.size(), 64 * 1024);
        while let Some(r) = s.next_header() {
            let (_, h) = r?;
            let e = h.partition_leader_epoch;
            if e >= 0 && out.last().is_none_or(|l| e > l.epoch) {
                out.push(EpochEntry {
                    epoch: e,
                    start_offset: h.base_offset,
                });
            }
        }
    }
    Ok(out)
}

/// Base offsets of the segments in `dir`, ascending. Deletes leftovers: `.tmp`/`.deleted`
/// files and indexes whose `.log` is gone.
fn scan_dir(dir: &Path) -> Result<Vec<i64>> {
    let mut bases = Vec::new();
    let mut index_files = Vec::new();
    for entry in fs::read_dir(dir).ctx("listing", dir)? {
        let entry = entry.ctx("listing", dir)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(".tmp") || name.ends_with(".deleted") {
            let _ = fs::remove_file(entry.path());
            continue;
        }
        let parse = |stem: &str| {
            (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
                .then(|| stem.parse::<i64>().ok())
                .flatten()
        };
        if let Some(stem) = name.strip_suffix(LOG_SUFFIX) {
            if let Some(b) = parse(stem) {
                bases.push(b);
            }
        } else if let Some(stem) = name
            .strip_suffix(INDEX_SUFFIX)
            .or_else(|| name.strip_suffix(TIME_INDEX_SUFFIX))
            .or_else(|| name.strip_suffix(TXN_INDEX_SUFFIX))
        {
            if let Some(b) = parse(stem) {
                index_files.push((b, entry.path()));
            }
        }
    }
    bases.sort_unstable();
    for (b, p) in index_files {
        if bases.binary_search(&b).is_err() {
            let _ = fs::remove_file(p);
        }
    }
    Ok(bases)
}
