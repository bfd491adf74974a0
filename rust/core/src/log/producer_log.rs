//! The log's side of its producer state (Kafka's `UnifiedLog.analyzeAndValidateProducerState`,
//! `updateProducers`, `rebuildProducerState` and the snapshot calls around roll, close,
//! truncation and retention). The state itself is `producer_state.rs`; this file decides
//! when it is consulted and fed.
//!
//! The invariant every path keeps: after any call on the [`Log`] returns, the state reflects
//! exactly the batches below the log end offset (`map_end_offset == log_end_offset`),
//! except for what expiry removed and what a snapshot did not keep (only each producer's
//! last batch; see the crash notes below).
//!
//! - Leader appends ([`Log::append_as_leader`]) validate every batch that carries a producer
//!   id, in order, against the state as the earlier batches of the same append leave it, all
//!   before a byte is written. A retry of one of a producer's last five batches is not
//!   written and consumes no offset; the append answers with its original offsets. Any error
//!   fails the whole append. The state is updated only once the write succeeded.
//! - Follower appends and recovery record batches without validation.
//! - Snapshots (`<offset>.snapshot`) are written at every roll (at the new segment's base),
//!   at close (at the log end), and at the end of a recovery or truncation that replayed
//!   batches. Opening loads the latest one in `[log start, log end]` and replays the
//!   batch headers after it; a log with no snapshot at all after a clean shutdown (one
//!   written before producer state existed) replays only its last two segments, as Kafka
//!   does on upgrade.
//! - Retention keeps the state (KIP-360: a live producer stays known after its batches are
//!   deleted); it deletes the snapshots below the first segment but the latest.
//!
//! Crash behaviour: a snapshot is written to a temporary file, fsynced and renamed, so it is
//! whole or absent; one that fails its CRC is deleted and an older one used. After a crash
//! the state is the latest snapshot at or below the recovered log end plus the batches
//! after it, so duplicates of batches older than the snapshot's last one per producer are
//! no longer detected (Kafka has the same limit).

use super::log::Log;
use super::producer_snapshot::{
    delete_snapshots_after, delete_snapshots_before_except_latest, latest_snapshot_offset,
    remove_stray_snapshots,
};
use super::producer_state::{AppendOrigin, ProducerBatch, ProducerStateManager, Validation};
use super::scan::BatchScanner;
use super::txn_index::AbortedTxn;
use crate::error::{Error, Result};
use crate::record::batch::{validate_batch, BatchHeader};
use crate::record::control::read_end_txn_marker;

/// Bytes per read when replaying batch headers.
const REPLAY_CHUNK: usize = 64 * 1024;

/// One change to the producer state an append makes once its bytes are in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ProducerUpdate {
    Data(ProducerBatch),
    Marker {
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        is_abort: bool,
        offset: i64,
        timestamp: i64,
    },
}

/// What [`Log::analyze_producer_state`] decided about one leader append.
#[derive(Debug, Default)]
pub(super) struct ProducerAppend {
    /// The updates to apply after the write, in log order.
    pub updates: Vec<ProducerUpdate>,
    /// Per batch of the request: the original (first, last) offsets of a duplicate. Empty
    /// when no batch is a duplicate (no allocation in the common case).
    pub duplicates: Vec<Option<(i64, i64)>>,
}

impl ProducerAppend {
    pub fn duplicate(&self, i: usize) -> Option<(i64, i64)> {
        self.duplicates.get(i).copied().flatten()
    }
}

/// Apply one update; an ABORT marker that ended a transaction gives its index entry.
fn apply(state: &mut ProducerStateManager, u: &ProducerUpdate) -> Option<AbortedTxn> {
    match *u {
        ProducerUpdate::Data(ref b) => {
            state.update(b);
            None
        }
        ProducerUpdate::Marker {
            producer_id,
            producer_epoch,
            coordinator_epoch,
            is_abort,
            offset,
            timestamp,
        } => {
            // Recorded as is: a leader validated it before the write.
            state
                .append_end_txn_marker(
                    AppendOrigin::Replication,
                    producer_id,
                    producer_epoch,
                    coordinator_epoch,
                    is_abort,
                    offset,
                    timestamp,
                )
                .ok()
                .flatten()
                .and_then(|c| c.aborted_txn())
        }
    }
}

/// The marker update of a control batch with a producer id at `offset`, or `None` when it
/// holds no record (the cleaner emptied it; Kafka skips those too).
fn marker_update(h: &BatchHeader, batch: &[u8], offset: i64) -> Result<Option<ProducerUpdate>> {
    Ok(
        read_end_txn_marker(h, batch)?.map(|(m, timestamp)| ProducerUpdate::Marker {
            producer_id: h.producer_id,
            producer_epoch: h.producer_epoch,
            coordinator_epoch: m.coordinator_epoch,
            is_abort: m.is_abort(),
            offset,
            timestamp,
        }),
    )
}

impl Log {
    /// The producer state (Kafka's `ProducerStateManager`) of this partition.
    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.producer_state
    }

    /// Write the producer state to `<log end offset>.snapshot` (as a clean shutdown does).
    pub fn take_producer_snapshot(&mut self) -> Result<()> {
        self.producer_state.update_map_end_offset(self.next_offset);
        self.producer_state
            .take_snapshot(&self.dir, self.next_offset)
            .map(drop)
    }

    /// Forget the producers that wrote nothing for `producer.id.expiration.ms`
    /// ([`super::LogConfig::producer_id_expiration_ms`]) and have no open transaction.
    pub fn remove_expired_producers(&mut self, now_ms: i64) {
        let expiration = self.config.producer_id_expiration_ms;
        self.producer_state
            .remove_expired_producers(now_ms, expiration);
    }

    /// Validate the producer fields of a leader append's `batches` (Kafka's
    /// `analyzeAndValidateProducerState` for `origin`, a client or a coordinator), assigning
    /// offsets from the log end as the append will: a duplicate takes none. Pure: the state
    /// is untouched. Batches without a producer id cost one comparison each.
    pub(super) fn analyze_producer_state(
        &self,
        data: &[u8],
        batches: &[(usize, BatchHeader)],
        log_append_time: Option<i64>,
        origin: AppendOrigin,
    ) -> Result<ProducerAppend> {
        let with_pid = batches.iter().filter(|(_, h)| h.producer_id >= 0).count();
        if with_pid == 0 {
            return Ok(ProducerAppend::default());
        }
        // One data batch (the common case) is checked against the state itself; more need
        // a scratch copy of their producers that earlier batches of this append update.
        let mut scratch =
            (with_pid > 1 || batches.iter().any(|(_, h)| h.is_control())).then(|| {
                self.producer_state.scratch_for(
                    batches
                        .iter()
                        .filter(|(_, h)| h.producer_id >= 0)
                        .map(|(_, h)| h.producer_id),
                )
            });
        let mut out = ProducerAppend {
            updates: Vec::with_capacity(with_pid),
            duplicates: Vec::new(),
        };
        let mut offset = self.next_offset;
        for (i, (pos, h)) in batches.iter().enumerate() {
            let next = offset + h.last_offset_delta as i64 + 1;
            if h.producer_id < 0 {
                offset = next;
                continue;
            }
            if h.is_control() {
                let batch = &data[*pos..*pos + h.size_in_bytes()];
                // The CRC first, so a damaged marker reads as CORRUPT_MESSAGE.
                validate_batch(batch)?;
                if h.record_count != 1 {
                    return Err(Error::invalid(format!(
                        "a transaction marker batch must hold exactly one record, not {} (producer {})",
                        h.record_count, h.producer_id
                    )));
                }
                let (marker, record_ts) = read_end_txn_marker(h, batch)?
                    .ok_or_else(|| Error::invalid("a transaction marker batch holds no record"))?;
                let timestamp = log_append_time.unwrap_or(record_ts);
                // The scratch state exists whenever the append holds a control batch.
                if let Some(s) = scratch.as_mut() {
                    s.append_end_txn_marker(
                        origin,
                        h.producer_id,
                        h.producer_epoch,
                        marker.coordinator_epoch,
                        marker.is_abort(),
                        offset,
                        timestamp,
                    )?;
                }
                let update = ProducerUpdate::Marker {
                    producer_id: h.producer_id,
                    producer_epoch: h.producer_epoch,
                    coordinator_epoch: marker.coordinator_epoch,
                    is_abort: marker.is_abort(),
                    offset,
                    timestamp,
                };
                out.updates.push(update);
                offset = next;
                continue;
            }
            let b = ProducerBatch::new(
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                offset,
                offset + h.last_offset_delta as i64,
                log_append_time.unwrap_or(h.max_timestamp),
                h.is_transactional(),
            );
            let v = match scratch.as_mut() {
                Some(s) => s.append_from(origin, &b)?,
                None => self.producer_state.validate_from(origin, &b)?,
            };
            match v {
                Validation::Duplicate {
                    first_offset,
                    last_offset,
                } => {
                    if out.duplicates.is_empty() {
                        out.duplicates = vec![None; batches.len()];
                    }
                    out.duplicates[i] = Some((first_offset, last_offset));
                }
                Validation::Append | Validation::NotIdempotent => {
                    out.updates.push(ProducerUpdate::Data(b));
                    offset = next;
                }
            }
        }
        Ok(out)
    }

    /// The producer updates of a follower append's (CRC-checked) `batches`, which keep their
    /// offsets. A malformed transaction marker fails the append before it is written.
    pub(super) fn follower_producer_updates(
        data: &[u8],
        batches: &[(usize, BatchHeader)],
    ) -> Result<Vec<ProducerUpdate>> {
        let mut out = Vec::new();
        for (pos, h) in batches {
            if h.producer_id < 0 {
                continue;
            }
            if h.is_control() {
                let batch = &data[*pos..*pos + h.size_in_bytes()];
                out.extend(marker_update(h, batch, h.base_offset)?);
            } else {
                out.push(ProducerUpdate::Data(ProducerBatch::from_header(h)));
            }
        }
        Ok(out)
    }

    /// Record an append's updates once its bytes are in the log, and move the state's end to
    /// the log end (batches without a producer id move nothing else). A transaction an ABORT
    /// marker ended goes into the `.txnindex` of the marker's segment (Kafka's
    /// `updateTxnIndex`); the state is updated in full even if that write fails.
    pub(super) fn apply_producer_updates(&mut self, updates: &[ProducerUpdate]) -> Result<()> {
        let mut result = Ok(());
        for u in updates {
            if let Some(aborted) = apply(&mut self.producer_state, u) {
                let appended = self.append_aborted_txn(aborted);
                if result.is_ok() {
                    result = appended;
                }
            }
        }
        self.producer_state.update_map_end_offset(self.next_offset);
        result
    }

    /// Add `aborted` to the transaction index of the segment holding its marker.
    fn append_aborted_txn(&mut self, aborted: AbortedTxn) -> Result<()> {
        match self.segments.range_mut(..=aborted.last_offset).next_back() {
            Some((_, seg)) => seg.txn_index.append(aborted),
            None => Ok(()),
        }
    }

    /// Replay the batch headers from the state's `map_end_offset` to the log end into the
    /// state (Kafka's `loadProducersFromRecords`), taking a snapshot at each segment base in
    /// `snapshot_at` the replay passes. The segments based at `rebuild_txn_index` (recovered
    /// ones, whose `.txnindex` was reset) get an entry for each transaction an ABORT marker
    /// in them ends, as Kafka's `LogSegment.recover` rebuilds it. Returns whether there was
    /// anything to replay.
    pub(super) fn replay_producer_state(
        &mut self,
        snapshot_at: &[i64],
        rebuild_txn_index: &[i64],
    ) -> Result<bool> {
        let from = self.producer_state.map_end_offset();
        let to = self.next_offset;
        if from >= to {
            self.producer_state.update_map_end_offset(to);
            return Ok(false);
        }
        let first = self
            .segments
            .range(..=from)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        let bases: Vec<i64> = self.segments.range(first..).map(|(b, _)| *b).collect();
        for base in bases {
            let state = &mut self.producer_state;
            let seg = &self.segments[&base];
            if base > from && snapshot_at.contains(&base) {
                state.update_map_end_offset(base);
                state.take_snapshot(&self.dir, base)?;
            }
            let start = if base < from {
                match seg.translate_offset(from, 0)? {
                    Some((pos, _)) => pos,
                    None => continue,
                }
            } else {
                0
            };
            let mut aborted = Vec::new();
            let mut scanner = BatchScanner::new(seg.file(), start, seg.size(), REPLAY_CHUNK);
            while let Some(r) = scanner.next_header() {
                let (at, h) = r?;
                if h.producer_id < 0 || h.last_offset() < from {
                    continue;
                }
                if h.is_control() {
                    let batch = scanner.batch_at(at, &h)?;
                    // A marker the leader wrote is trusted; an unreadable one (never written
                    // by a leader, which checks them) is skipped rather than failing the open.
                    if let Ok(Some(u)) = marker_update(&h, batch, h.base_offset) {
                        aborted.extend(apply(state, &u));
                    }
                } else {
                    state.update(&ProducerBatch::from_header(&h));
                }
            }
            if rebuild_txn_index.contains(&base) {
                let seg = self.segments.get_mut(&base).expect("listed");
                for a in aborted {
                    seg.txn_index.append(a)?;
                }
            }
        }
        self.producer_state.update_map_end_offset(to);
        Ok(true)
    }

    /// Open: load the producer state (Kafka's `LogLoader` + `rebuildProducerState`). Called
    /// once the segments are recovered and the log start and end are known. The segments
    /// based at `rebuild_txn_index` (ascending: those recovery re-read) get their `.txnindex`
    /// rebuilt, so the state is loaded from a snapshot at or below the first of them.
    pub(super) fn load_producer_state(
        &mut self,
        clean_shutdown: bool,
        now_ms: i64,
        rebuild_txn_index: &[i64],
    ) -> Result<()> {
        let (start, end) = (self.log_start_offset, self.next_offset);
        // Replay must pass every rebuilt segment from its start.
        let load_below = rebuild_txn_index
            .first()
            .map_or(end, |&b| b.clamp(start, end));
        delete_snapshots_after(&self.dir, end)?;
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        remove_stray_snapshots(&self.dir, &bases)?;
        // The snapshots worth taking while replaying: the last two segments' bases.
        let last_two: Vec<i64> = bases[bases.len().saturating_sub(2)..].to_vec();
        let no_snapshot = latest_snapshot_offset(&self.dir)?.is_none();
        let loaded = ProducerStateManager::load_latest_snapshot_in(
            &self.dir,
            start,
            load_below,
            now_ms,
            Some(self.config.producer_id_expiration_ms),
        )?;
        self.producer_state = match loaded {
            Some((_, state)) => state,
            None if clean_shutdown && no_snapshot => {
                // A log written before it kept producer state (Kafka's upgrade path): rather
                // than scan it all, start empty at the second-to-last segment, recording that
                // in an empty snapshot so a crash does not lead to a full scan either.
                let from = last_two[0].min(load_below).clamp(start, end);
                let state = ProducerStateManager::from_entries([], from);
                if from > start {
                    state.take_snapshot(&self.dir, from)?;
                }
                state
            }
            None => ProducerStateManager::from_entries([], start),
        };
        if self.replay_producer_state(&last_two, rebuild_txn_index)? {
            self.producer_state.take_snapshot(&self.dir, end)?;
        }
        Ok(())
    }

    /// After `truncate_to` cut the log: reload the state from the latest snapshot at or below
    /// the new log end and replay what follows (Kafka's `rebuildProducerState` in
    /// `truncateTo`). A state with no producer stays empty without a reload or a scan (Kafka's
    /// `isEmptyBeforeTruncation`): truncation cannot add a producer.
    pub(super) fn reload_producer_state_after_truncation(&mut self, now_ms: i64) -> Result<()> {
        let end = self.next_offset;
        if self.producer_state.is_empty() && self.producer_state.map_end_offset() >= end {
            delete_snapshots_after(&self.dir, end)?;
            self.producer_state.update_map_end_offset(end);
            return Ok(());
        }
        self.producer_state.truncate_and_reload(
            &self.dir,
            self.log_start_offset,
            end,
            now_ms,
            self.config.producer_id_expiration_ms,
        )?;
        if self.replay_producer_state(&[], &[])? {
            self.producer_state.take_snapshot(&self.dir, end)?;
        }
        Ok(())
    }

    /// After retention deleted segments: drop the snapshots below the first segment but the
    /// latest. The state in memory is kept (KIP-360).
    pub(super) fn delete_producer_snapshots_below_first_segment(&mut self) -> Result<()> {
        let first = *self
            .segments
            .keys()
            .next()
            .expect("a log always has a segment");
        delete_snapshots_before_except_latest(&self.dir, first)
    }

    /// Per producer, the last offset of its newest data batch: the batches compaction must
    /// keep (as empty batches if need be) so their sequence and epoch survive.
    pub(super) fn producer_last_data_offsets(&self) -> std::collections::HashMap<i64, i64> {
        self.producer_state
            .producers()
            .values()
            .filter(|e| e.last_data_offset() >= 0)
            .map(|e| (e.producer_id, e.last_data_offset()))
            .collect()
    }
}
