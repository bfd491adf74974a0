//! Per-partition producer state: Kafka's `ProducerStateManager`, `ProducerStateEntry`,
//! `BatchMetadata` and the validation half of `ProducerAppendInfo`.
//!
//! [`ProducerStateManager`] owns, for one partition, the state of every idempotent or
//! transactional producer that has written to it: the producer epoch, the metadata of the
//! last [`NUM_BATCHES_TO_RETAIN`] (128; Kafka keeps 5) data batches, the coordinator epoch of the last
//! transaction marker and the first offset of the ongoing transaction. It is a pure state
//! object: no clock (the caller passes `now_ms`), no threads, and files only in the snapshot
//! functions, which take the log dir as an argument. It is not thread safe; the partition's
//! log lock serialises it, as in Kafka.
//!
//! # Appending as leader
//!
//! One batch at a time, in log order:
//! 1. [`ProducerStateManager::validate`] (pure) says whether the batch is to be appended
//!    ([`Validation::Append`]), is a retry of one of the last five batches
//!    ([`Validation::Duplicate`], answered with the original offsets and not appended), or
//!    carries no producer id ([`Validation::NotIdempotent`], never tracked); or it fails with
//!    Kafka's error ([`ProducerStateError`]).
//! 2. The caller writes the batch to the log.
//! 3. [`ProducerStateManager::update`] records it. Updating only after the write means a
//!    failed write leaves no trace in the state.
//!
//! Followers and recovery call `update` alone: replicated batches were validated by the
//! leader (Kafka's `AppendOrigin.REPLICATION`).
//!
//! # The rules of `validate` (Kafka 4.0, `ProducerAppendInfo.checkSequence`)
//! - A batch whose epoch equals the producer's and whose sequence range equals one of the
//!   cached batches is a duplicate (`ProducerStateEntry.findDuplicateBatch`).
//! - An epoch older than the producer's: `INVALID_PRODUCER_EPOCH`.
//! - A newer epoch must start at sequence 0 (an epoch bump, KIP-360), else
//!   `OUT_OF_ORDER_SEQUENCE_NUMBER`.
//! - The same epoch: the base sequence must follow the last one, wrapping from `i32::MAX`
//!   to 0 (`DefaultRecordBatch.incrementSequence`), else `OUT_OF_ORDER_SEQUENCE_NUMBER`.
//! - A producer with no state here (never seen, expired, or its batches removed by
//!   retention or DeleteRecords) is accepted at any sequence. Kafka 4.0 brokers no longer
//!   answer `UNKNOWN_PRODUCER_ID` for this (KIP-360 moved the recovery to the producer, which
//!   bumps its epoch), so neither do we.
//! - A non-transactional batch while the producer's transaction is open: `INVALID_TXN_STATE`.
//!
//! # Transactions and the last stable offset
//! A producer's first transactional batch opens its transaction (`current_txn_first_offset`,
//! and an entry in the ordered open transactions, Kafka's `ongoingTxns`); its COMMIT or
//! ABORT marker ([`ProducerStateManager::append_end_txn_marker`]) closes it and returns a
//! [`CompletedTxn`] carrying the log's last stable offset at that point, which an aborted
//! transaction's `.txnindex` entry records. A closed transaction stays *unreplicated*
//! (Kafka's `unreplicatedTxns`) until the high watermark passes its marker
//! ([`ProducerStateManager::on_high_watermark_updated`]), so a read_committed reader never
//! gets past a transaction whose outcome a leader change could still lose. The first
//! unstable offset is the oldest first offset among open and unreplicated transactions;
//! the log's last stable offset is the smaller of it and the high watermark.
//!
//! # Recovery and truncation
//! The state is persisted only in snapshots (see `producer_snapshot`), one entry per producer
//! holding its *last* batch, so after a reload a retry of an older batch is no longer detected
//! as a duplicate; Kafka has the same limit. After a crash or a truncation the caller calls
//! [`ProducerStateManager::truncate_and_reload`] and replays the log from
//! [`ProducerStateManager::map_end_offset`] with `update`.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

use super::producer_snapshot::{
    delete_snapshot, list_snapshot_files, read_snapshot, snapshot_file, write_snapshot,
};
use super::txn_index::AbortedTxn;
use crate::error::{Error, Result};
use crate::record::{BatchHeader, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE};

/// How many of a producer's most recent batches are kept for duplicate detection. Kafka
/// keeps 5, as many as a Kafka producer can have unacknowledged per partition (one batch per
/// partition per request, `max.in.flight.requests.per.connection` ≤ 5). Rillet's producer
/// packs several batches of a partition into one request and keeps up to this many
/// unacknowledged (`rillet.client.producer.sender`), so a retry of any of them is still
/// recognised; Kafka's clients are served as before. Snapshots keep only the last batch, as
/// Kafka's do. The cost is memory: up to 128 x 32 bytes (4 KiB) per producer per partition,
/// against Kafka's 160 bytes, for producers that keep writing (the deque grows as batches
/// come). At 32 the producer had one request per partition in flight, which held Kafka's
/// default settings (16 KiB batches) to 60% of their throughput without idempotence.
pub const NUM_BATCHES_TO_RETAIN: usize = 128;

/// `producer.id.expiration.ms`'s default: one day.
pub const DEFAULT_PRODUCER_ID_EXPIRATION_MS: i64 = 86_400_000;

/// The sequence `increment` after `sequence`, wrapping past `i32::MAX` to 0
/// (`DefaultRecordBatch.incrementSequence`).
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

/// The sequence `decrement` before `sequence`, wrapping below 0 to `i32::MAX`
/// (`DefaultRecordBatch.decrementSequence`).
pub fn decrement_sequence(sequence: i32, decrement: i32) -> i32 {
    if sequence < decrement {
        i32::MAX - (decrement - sequence) + 1
    } else {
        sequence - decrement
    }
}

/// Whether `next_seq` directly follows `last_seq` (`ProducerAppendInfo.inSequence`).
fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    i64::from(next_seq) == i64::from(last_seq) + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

/// Kafka's errors from validating a producer's batch. Each is a per-partition error code in
/// a ProduceResponse; none of them is a storage failure, so they are not [`Error`] variants.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProducerStateError {
    /// INVALID_PRODUCER_EPOCH: an epoch older than the producer's current one (a zombie).
    #[error("epoch of producer {producer_id} at offset {offset} is {epoch}, smaller than the last seen epoch {current_epoch}")]
    InvalidProducerEpoch {
        producer_id: i64,
        offset: i64,
        epoch: i16,
        current_epoch: i16,
    },

    /// OUT_OF_ORDER_SEQUENCE_NUMBER: a gap, a reordering, or a new epoch not starting at 0.
    #[error("out of order sequence number for producer {producer_id} at offset {offset}: {sequence} (incoming), {last_sequence} (current end sequence number, epoch {current_epoch})")]
    OutOfOrderSequenceNumber {
        producer_id: i64,
        offset: i64,
        sequence: i32,
        last_sequence: i32,
        current_epoch: i16,
    },

    /// INVALID_TXN_STATE: a non-transactional write while the producer's transaction is open.
    #[error("expected a transactional write from producer {producer_id} at offset {offset}: its transaction started at offset {txn_first_offset}")]
    InvalidTxnState {
        producer_id: i64,
        offset: i64,
        txn_first_offset: i64,
    },

    /// TRANSACTION_COORDINATOR_FENCED: a transaction marker from an older coordinator.
    #[error("invalid coordinator epoch for producer {producer_id} at offset {offset}: {coordinator_epoch} (zombie), {current_coordinator_epoch} (current)")]
    TransactionCoordinatorFenced {
        producer_id: i64,
        offset: i64,
        coordinator_epoch: i32,
        current_coordinator_epoch: i32,
    },
}

impl ProducerStateError {
    /// Kafka's name for this error, as used on the wire.
    pub fn kafka_name(&self) -> &'static str {
        match self {
            ProducerStateError::InvalidProducerEpoch { .. } => "INVALID_PRODUCER_EPOCH",
            ProducerStateError::OutOfOrderSequenceNumber { .. } => "OUT_OF_ORDER_SEQUENCE_NUMBER",
            ProducerStateError::InvalidTxnState { .. } => "INVALID_TXN_STATE",
            ProducerStateError::TransactionCoordinatorFenced { .. } => {
                "TRANSACTION_COORDINATOR_FENCED"
            }
        }
    }
}

/// Who is appending (Kafka's `AppendOrigin`): a client through the leader (every check), a
/// coordinator of this broker through the leader (the group coordinator's transactional
/// offset commits, written with sequence -1: the producer epoch and transaction state are
/// checked, sequences and duplicates are not), or replication and recovery (recorded as is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    Client,
    Coordinator,
    Replication,
}

/// What the producer state needs of one data batch, offsets already assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub last_sequence: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub is_transactional: bool,
}

impl ProducerBatch {
    /// A batch of offsets `[first_offset, last_offset]`; its last sequence follows from the
    /// base sequence and the offset delta, as in `DefaultRecordBatch.lastSequence`.
    pub fn new(
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
        first_offset: i64,
        last_offset: i64,
        max_timestamp: i64,
        is_transactional: bool,
    ) -> Self {
        let last_sequence = if base_sequence == NO_SEQUENCE {
            NO_SEQUENCE
        } else {
            increment_sequence(base_sequence, (last_offset - first_offset) as i32)
        };
        ProducerBatch {
            producer_id,
            producer_epoch,
            base_sequence,
            last_sequence,
            first_offset,
            last_offset,
            max_timestamp,
            is_transactional,
        }
    }

    /// The producer fields of a data batch's header (not a control batch: see
    /// [`ProducerStateManager::append_end_txn_marker`]).
    pub fn from_header(h: &BatchHeader) -> Self {
        ProducerBatch::new(
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            h.base_offset,
            h.last_offset(),
            h.max_timestamp,
            h.is_transactional(),
        )
    }

    fn offset_delta(&self) -> i32 {
        (self.last_offset - self.first_offset) as i32
    }
}

/// One cached batch of a producer (Kafka's `BatchMetadata`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub last_seq: i32,
    pub last_offset: i64,
    pub offset_delta: i32,
    pub timestamp: i64,
}

impl BatchMetadata {
    pub fn first_seq(&self) -> i32 {
        decrement_sequence(self.last_seq, self.offset_delta)
    }

    pub fn first_offset(&self) -> i64 {
        self.last_offset - i64::from(self.offset_delta)
    }
}

/// The state of one producer id (Kafka's `ProducerStateEntry`): the batches are ordered
/// oldest first and at most [`NUM_BATCHES_TO_RETAIN`] are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerStateEntry {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub batch_metadata: VecDeque<BatchMetadata>,
    pub coordinator_epoch: i32,
    /// The max timestamp of the last batch or marker; producer expiry counts from it.
    pub last_timestamp: i64,
    pub current_txn_first_offset: Option<i64>,
}

impl ProducerStateEntry {
    /// A producer with no state yet (`ProducerStateEntry.empty`).
    pub fn empty(producer_id: i64) -> Self {
        ProducerStateEntry {
            producer_id,
            producer_epoch: NO_PRODUCER_EPOCH,
            batch_metadata: VecDeque::new(),
            coordinator_epoch: -1,
            last_timestamp: crate::record::NO_TIMESTAMP,
            current_txn_first_offset: None,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.batch_metadata.is_empty()
    }

    /// The last sequence written, or `NO_SEQUENCE` (-1) if no batch is cached.
    pub fn last_seq(&self) -> i32 {
        self.batch_metadata
            .back()
            .map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    /// The last offset written, or -1 if no batch is cached.
    pub fn last_data_offset(&self) -> i64 {
        self.batch_metadata.back().map_or(-1, |b| b.last_offset)
    }

    /// The last batch's offset delta, or 0 if no batch is cached.
    pub fn last_offset_delta(&self) -> i32 {
        self.batch_metadata.back().map_or(0, |b| b.offset_delta)
    }

    /// The cached batch with exactly this epoch and sequence range (`findDuplicateBatch`).
    pub fn find_duplicate_batch(&self, batch: &ProducerBatch) -> Option<BatchMetadata> {
        if batch.producer_epoch != self.producer_epoch {
            return None;
        }
        self.batch_metadata
            .iter()
            .find(|m| m.first_seq() == batch.base_sequence && m.last_seq == batch.last_sequence)
            .copied()
    }

    /// A new epoch drops the cached batches: their sequences belong to the old epoch.
    fn maybe_update_producer_epoch(&mut self, producer_epoch: i16) {
        if self.producer_epoch != producer_epoch {
            self.batch_metadata.clear();
            self.producer_epoch = producer_epoch;
        }
    }

    fn add_batch(&mut self, epoch: i16, meta: BatchMetadata) {
        self.maybe_update_producer_epoch(epoch);
        if self.batch_metadata.len() == NUM_BATCHES_TO_RETAIN {
            self.batch_metadata.pop_front();
        }
        self.batch_metadata.push_back(meta);
        self.last_timestamp = meta.timestamp;
    }
}

/// The answer of [`ProducerStateManager::validate`] for a batch that may be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validation {
    /// Append the batch, then call `update`.
    Append,
    /// A retry of a batch already in the log: answer with its offsets, do not append.
    Duplicate { first_offset: i64, last_offset: i64 },
    /// No producer id (-1): nothing to check, nothing to record.
    NotIdempotent,
}

/// A transaction ended by a marker (Kafka's `CompletedTxn`), with the last stable offset
/// the log had once its marker was written (Kafka's `lastStableOffset(completedTxn)`: the
/// first offset of the oldest transaction of another producer still open, else the offset
/// after the marker), which an aborted transaction's index entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub is_aborted: bool,
    pub last_stable_offset: i64,
}

impl CompletedTxn {
    /// The aborted transaction index entry of an aborted transaction.
    pub fn aborted_txn(&self) -> Option<AbortedTxn> {
        self.is_aborted.then_some(AbortedTxn {
            producer_id: self.producer_id,
            first_offset: self.first_offset,
            last_offset: self.last_offset,
            last_stable_offset: self.last_stable_offset,
        })
    }
}

/// The producer state of one partition. See the module docs for the contract.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerStateManager {
    producers: BTreeMap<i64, ProducerStateEntry>,
    /// The offset up to which (exclusive) the log has been applied to this state.
    map_end_offset: i64,
    /// Open transactions: first offset -> producer id (Kafka's `ongoingTxns`).
    ongoing_txns: BTreeMap<i64, i64>,
    /// Transactions whose marker is written but maybe not yet below the high watermark:
    /// first offset -> (producer id, marker offset) (Kafka's `unreplicatedTxns`). They hold
    /// the last stable offset back until [`Self::on_high_watermark_updated`] passes them.
    unreplicated_txns: BTreeMap<i64, (i64, i64)>,
}

impl ProducerStateManager {
    pub fn new() -> Self {
        Self::default()
    }

    /// The state as loaded from a snapshot at `offset`: the open transactions are those of
    /// the entries; none is unreplicated.
    pub fn from_entries(
        entries: impl IntoIterator<Item = ProducerStateEntry>,
        offset: i64,
    ) -> Self {
        let producers: BTreeMap<i64, ProducerStateEntry> =
            entries.into_iter().map(|e| (e.producer_id, e)).collect();
        let ongoing_txns = producers
            .values()
            .filter_map(|e| e.current_txn_first_offset.map(|f| (f, e.producer_id)))
            .collect();
        ProducerStateManager {
            producers,
            map_end_offset: offset,
            ongoing_txns,
            unreplicated_txns: BTreeMap::new(),
        }
    }

    /// The first offset of the oldest transaction that is open, or whose marker is not
    /// known to be below the high watermark (Kafka's `firstUnstableOffset`).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        let ongoing = self.ongoing_txns.keys().next().copied();
        let unreplicated = self.unreplicated_txns.keys().next().copied();
        match (ongoing, unreplicated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The first unstable offset given the high watermark, without forgetting anything:
    /// transactions whose marker is below `high_watermark` no longer count.
    pub fn first_unstable_offset_at(&self, high_watermark: i64) -> Option<i64> {
        let ongoing = self.ongoing_txns.keys().next().copied();
        let unreplicated = self
            .unreplicated_txns
            .iter()
            .find(|(_, &(_, last))| last >= high_watermark)
            .map(|(&first, _)| first);
        match (ongoing, unreplicated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The open transactions, oldest first: (first offset, producer id).
    pub fn ongoing_txns(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.ongoing_txns.iter().map(|(&f, &p)| (f, p))
    }

    /// Forget the completed transactions whose marker is below `high_watermark` (Kafka's
    /// `onHighWatermarkUpdated`): they no longer hold the last stable offset back.
    pub fn on_high_watermark_updated(&mut self, high_watermark: i64) {
        self.unreplicated_txns
            .retain(|_, &mut (_, last)| last >= high_watermark);
    }

    pub fn producers(&self) -> &BTreeMap<i64, ProducerStateEntry> {
        &self.producers
    }

    pub fn last_entry(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.producers.get(&producer_id)
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// The next offset of the log not yet applied to this state (Kafka's `mapEndOffset`).
    pub fn map_end_offset(&self) -> i64 {
        self.map_end_offset
    }

    /// Move the applied offset past batches that carry no producer state.
    pub fn update_map_end_offset(&mut self, offset: i64) {
        self.map_end_offset = offset;
    }

    /// A copy of the state of `producer_ids` alone (with this state's `map_end_offset`):
    /// where the leader validates the batches of one append against the state as the earlier
    /// batches of that append leave it, without touching this state.
    pub fn scratch_for(&self, producer_ids: impl IntoIterator<Item = i64>) -> Self {
        let mut producers = BTreeMap::new();
        for pid in producer_ids {
            if let Some(e) = self.producers.get(&pid) {
                producers.entry(pid).or_insert_with(|| e.clone());
            }
        }
        let ongoing_txns = producers
            .values()
            .filter_map(|e| e.current_txn_first_offset.map(|f| (f, e.producer_id)))
            .collect();
        ProducerStateManager {
            producers,
            map_end_offset: self.map_end_offset,
            ongoing_txns,
            unreplicated_txns: BTreeMap::new(),
        }
    }

    /// Check a batch a client asks the leader to append. Pure: call [`Self::update`] after
    /// the batch is in the log.
    pub fn validate(&self, batch: &ProducerBatch) -> Result<Validation, ProducerStateError> {
        self.validate_from(AppendOrigin::Client, batch)
    }

    /// [`Self::validate`] for a batch from `origin`: a coordinator's batch is checked for its
    /// producer epoch and transaction state only (Kafka checks sequences and duplicates for
    /// `AppendOrigin.CLIENT` alone); replication is not checked.
    pub fn validate_from(
        &self,
        origin: AppendOrigin,
        batch: &ProducerBatch,
    ) -> Result<Validation, ProducerStateError> {
        if batch.producer_id == NO_PRODUCER_ID {
            return Ok(Validation::NotIdempotent);
        }
        if origin == AppendOrigin::Replication {
            return Ok(Validation::Append);
        }
        let Some(entry) = self.producers.get(&batch.producer_id) else {
            // Unknown producer: any sequence is accepted (see the module docs).
            return Ok(Validation::Append);
        };
        if origin == AppendOrigin::Client {
            if let Some(dup) = entry.find_duplicate_batch(batch) {
                return Ok(Validation::Duplicate {
                    first_offset: dup.first_offset(),
                    last_offset: dup.last_offset,
                });
            }
        }
        let offset = batch.first_offset;
        if batch.producer_epoch < entry.producer_epoch {
            return Err(ProducerStateError::InvalidProducerEpoch {
                producer_id: batch.producer_id,
                offset,
                epoch: batch.producer_epoch,
                current_epoch: entry.producer_epoch,
            });
        }
        let out_of_order = || ProducerStateError::OutOfOrderSequenceNumber {
            producer_id: batch.producer_id,
            offset,
            sequence: batch.base_sequence,
            last_sequence: entry.last_seq(),
            current_epoch: entry.producer_epoch,
        };
        // A coordinator writes without sequences.
        if origin == AppendOrigin::Client {
            if batch.producer_epoch != entry.producer_epoch {
                // A new epoch (KIP-360 bump, or a re-initialised producer) starts at 0, unless
                // the entry has no epoch at all (only a marker was seen).
                if batch.base_sequence != 0 && entry.producer_epoch != NO_PRODUCER_EPOCH {
                    return Err(out_of_order());
                }
            } else if entry.producer_epoch != NO_PRODUCER_EPOCH
                && !in_sequence(entry.last_seq(), batch.base_sequence)
            {
                return Err(out_of_order());
            }
        }
        if let Some(txn_first_offset) = entry.current_txn_first_offset {
            if !batch.is_transactional {
                return Err(ProducerStateError::InvalidTxnState {
                    producer_id: batch.producer_id,
                    offset,
                    txn_first_offset,
                });
            }
        }
        Ok(Validation::Append)
    }

    /// Validate and, if the batch is to be appended, record it: for callers that append
    /// in memory first or for tests. The log's leader path is `validate`, write, `update`.
    pub fn append_as_leader(
        &mut self,
        batch: &ProducerBatch,
    ) -> Result<Validation, ProducerStateError> {
        self.append_from(AppendOrigin::Client, batch)
    }

    /// [`Self::append_as_leader`] for a batch from `origin` (see [`Self::validate_from`]).
    pub fn append_from(
        &mut self,
        origin: AppendOrigin,
        batch: &ProducerBatch,
    ) -> Result<Validation, ProducerStateError> {
        let v = self.validate_from(origin, batch)?;
        if v == Validation::Append {
            self.update(batch);
        }
        Ok(v)
    }

    /// Record a batch that is in the log, without validation (the leader after `validate`,
    /// followers, recovery). Batches without a producer id only move `map_end_offset`.
    pub fn update(&mut self, batch: &ProducerBatch) {
        self.map_end_offset = self.map_end_offset.max(batch.last_offset + 1);
        if batch.producer_id == NO_PRODUCER_ID {
            return;
        }
        let entry = self
            .producers
            .entry(batch.producer_id)
            .or_insert_with(|| ProducerStateEntry::empty(batch.producer_id));
        entry.add_batch(
            batch.producer_epoch,
            BatchMetadata {
                last_seq: batch.last_sequence,
                last_offset: batch.last_offset,
                offset_delta: batch.offset_delta(),
                timestamp: batch.max_timestamp,
            },
        );
        if batch.is_transactional && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(batch.first_offset);
            self.ongoing_txns
                .insert(batch.first_offset, batch.producer_id);
        }
    }

    /// Check a COMMIT or ABORT marker a client (the coordinator's WriteTxnMarkers) asks the
    /// leader to append: its producer epoch must not be older than the producer's, nor its
    /// coordinator epoch older than the last marker's. Pure: the checks
    /// [`Self::append_end_txn_marker`] makes for [`AppendOrigin::Client`].
    pub fn validate_end_txn_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        offset: i64,
    ) -> Result<(), ProducerStateError> {
        let Some(entry) = self.producers.get(&producer_id) else {
            return Ok(());
        };
        if producer_epoch < entry.producer_epoch {
            return Err(ProducerStateError::InvalidProducerEpoch {
                producer_id,
                offset,
                epoch: producer_epoch,
                current_epoch: entry.producer_epoch,
            });
        }
        if entry.coordinator_epoch > coordinator_epoch {
            return Err(ProducerStateError::TransactionCoordinatorFenced {
                producer_id,
                offset,
                coordinator_epoch,
                current_coordinator_epoch: entry.coordinator_epoch,
            });
        }
        Ok(())
    }

    /// Apply a COMMIT or ABORT marker at `offset` (Kafka's `appendEndTxnMarker`, then
    /// `lastStableOffset(completedTxn)` and `completeTxn`). From a client or coordinator
    /// origin (the coordinator's WriteTxnMarkers) the producer and coordinator epochs are
    /// checked first ([`Self::validate_end_txn_marker`]); from replication they are recorded
    /// as they are. Returns the completed transaction if one was open: it is no longer open,
    /// and holds the last stable offset back until its marker is below the high watermark
    /// ([`Self::on_high_watermark_updated`]).
    #[allow(clippy::too_many_arguments)]
    pub fn append_end_txn_marker(
        &mut self,
        origin: AppendOrigin,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        is_abort: bool,
        offset: i64,
        timestamp: i64,
    ) -> Result<Option<CompletedTxn>, ProducerStateError> {
        if origin != AppendOrigin::Replication {
            self.validate_end_txn_marker(producer_id, producer_epoch, coordinator_epoch, offset)?;
        }
        self.map_end_offset = self.map_end_offset.max(offset + 1);
        let entry = self
            .producers
            .entry(producer_id)
            .or_insert_with(|| ProducerStateEntry::empty(producer_id));
        let first_offset = entry.current_txn_first_offset;
        entry.maybe_update_producer_epoch(producer_epoch);
        entry.coordinator_epoch = coordinator_epoch;
        entry.current_txn_first_offset = None;
        entry.last_timestamp = timestamp;
        // Only a transaction with data completes: a marker alone changes no offset's
        // stability and needs no index entry (Kafka's appendEndTxnMarker).
        let Some(first_offset) = first_offset else {
            return Ok(None);
        };
        // The oldest transaction of another producer still open (at most the second entry:
        // a producer has one open transaction).
        let last_stable_offset = self
            .ongoing_txns
            .iter()
            .find(|(_, &pid)| pid != producer_id)
            .map_or(offset + 1, |(&first, _)| first);
        self.ongoing_txns.remove(&first_offset);
        self.unreplicated_txns
            .insert(first_offset, (producer_id, offset));
        Ok(Some(CompletedTxn {
            producer_id,
            first_offset,
            last_offset: offset,
            is_aborted: is_abort,
            last_stable_offset,
        }))
    }

    /// Forget producers idle for `producer_id_expiration_ms` or longer
    /// (`producer.id.expiration.ms`), except those with an ongoing transaction
    /// (`isProducerExpired`).
    pub fn remove_expired_producers(&mut self, now_ms: i64, producer_id_expiration_ms: i64) {
        self.producers
            .retain(|_, e| !is_producer_expired(e, now_ms, producer_id_expiration_ms));
    }

    /// Write the state to `<dir>/<20-digit offset>.snapshot`. Kafka snapshots at the log end
    /// offset at segment roll and at clean shutdown.
    pub fn take_snapshot(&self, dir: &Path, offset: i64) -> Result<PathBuf> {
        let path = snapshot_file(dir, offset);
        write_snapshot(&path, self.producers.values())?;
        Ok(path)
    }

    /// The state from the latest readable snapshot in `dir`, and its offset. A corrupt
    /// snapshot is deleted and the next older one tried, as Kafka's `loadFromSnapshot` does.
    /// Producers already expired at `now_ms` are left out, unless the expiration is `None`.
    pub fn load_latest_snapshot(
        dir: &Path,
        now_ms: i64,
        producer_id_expiration_ms: Option<i64>,
    ) -> Result<Option<(i64, ProducerStateManager)>> {
        Self::load_latest_snapshot_in(dir, i64::MIN, i64::MAX, now_ms, producer_id_expiration_ms)
    }

    /// [`Self::load_latest_snapshot`] among the snapshots with offsets in `[from, to]` only
    /// (the others are left alone).
    pub fn load_latest_snapshot_in(
        dir: &Path,
        from: i64,
        to: i64,
        now_ms: i64,
        producer_id_expiration_ms: Option<i64>,
    ) -> Result<Option<(i64, ProducerStateManager)>> {
        for (offset, path) in list_snapshot_files(dir)?.into_iter().rev() {
            if offset < from || offset > to {
                continue;
            }
            match read_snapshot(&path) {
                Ok(entries) => {
                    let live = entries.into_iter().filter(|e| {
                        producer_id_expiration_ms
                            .is_none_or(|exp| !is_producer_expired(e, now_ms, exp))
                    });
                    return Ok(Some((offset, Self::from_entries(live, offset))));
                }
                Err(Error::CorruptRecord(_)) => delete_snapshot(&path)?,
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// Clear the state, delete every snapshot in `dir`, and start over at `offset`
    /// (Kafka's `truncateFullyAndStartAt`, used when a follower truncates its whole log).
    pub fn truncate_fully_and_start_at(&mut self, dir: &Path, offset: i64) -> Result<()> {
        self.producers.clear();
        self.ongoing_txns.clear();
        self.unreplicated_txns.clear();
        for (_, path) in list_snapshot_files(dir)? {
            delete_snapshot(&path)?;
        }
        self.map_end_offset = offset;
        Ok(())
    }

    /// After the log was truncated to `log_end_offset` or its start moved to
    /// `log_start_offset`: delete the snapshots outside `[log_start_offset, log_end_offset]`
    /// and, unless the state already ends exactly at `log_end_offset`, reload it from the
    /// latest remaining snapshot (or start empty at `log_start_offset`). The caller then
    /// replays the log from [`Self::map_end_offset`] (Kafka's `truncateAndReload`).
    ///
    /// Kafka also deletes a snapshot at exactly the log start offset; we keep it: it holds
    /// the producers whose batches retention removed, which stay known (KIP-360), and
    /// replaying from it covers the whole log.
    pub fn truncate_and_reload(
        &mut self,
        dir: &Path,
        log_start_offset: i64,
        log_end_offset: i64,
        now_ms: i64,
        producer_id_expiration_ms: i64,
    ) -> Result<()> {
        for (offset, path) in list_snapshot_files(dir)? {
            if offset > log_end_offset || offset < log_start_offset {
                delete_snapshot(&path)?;
            }
        }
        if log_end_offset != self.map_end_offset {
            *self = Self::load_latest_snapshot(dir, now_ms, Some(producer_id_expiration_ms))?
                .map(|(_, state)| state)
                .unwrap_or_else(|| ProducerStateManager::from_entries([], log_start_offset));
        } else if self.map_end_offset < log_start_offset {
            self.map_end_offset = log_start_offset;
        }
        Ok(())
    }
}

fn is_producer_expired(e: &ProducerStateEntry, now_ms: i64, expiration_ms: i64) -> bool {
    e.current_txn_first_offset.is_none() && now_ms - e.last_timestamp >= expiration_ms
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(pid: i64, epoch: i16, seq: i32, first: i64, count: i64) -> ProducerBatch {
        ProducerBatch::new(pid, epoch, seq, first, first + count - 1, 1_000, false)
    }

    #[test]
    fn sequences_wrap_as_kafka_does() {
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(increment_sequence(5, 3), 8);
        assert_eq!(decrement_sequence(0, 1), i32::MAX);
        assert_eq!(decrement_sequence(1, 3), i32::MAX - 1);
        assert_eq!(decrement_sequence(8, 3), 5);
        assert!(in_sequence(i32::MAX, 0));
        assert!(!in_sequence(i32::MAX, 1));
        assert!(in_sequence(-1, 0));
    }

    #[test]
    fn a_new_epoch_clears_the_cached_batches() {
        let mut s = ProducerStateManager::new();
        s.update(&batch(1, 0, 0, 0, 2));
        s.update(&batch(1, 1, 0, 2, 2));
        let e = s.last_entry(1).unwrap();
        assert_eq!(e.producer_epoch, 1);
        assert_eq!(e.batch_metadata.len(), 1);
        assert_eq!(s.map_end_offset(), 4);
    }

    #[test]
    fn a_marker_ends_the_transaction() {
        let mut s = ProducerStateManager::new();
        let mut b = batch(7, 0, 0, 10, 3);
        b.is_transactional = true;
        assert_eq!(s.append_as_leader(&b), Ok(Validation::Append));
        assert_eq!(s.last_entry(7).unwrap().current_txn_first_offset, Some(10));
        let done = s
            .append_end_txn_marker(AppendOrigin::Client, 7, 0, 3, false, 13, 2_000)
            .unwrap();
        assert_eq!(
            done,
            Some(CompletedTxn {
                producer_id: 7,
                first_offset: 10,
                last_offset: 13,
                is_aborted: false,
                last_stable_offset: 14,
            })
        );
        let err = s
            .append_end_txn_marker(AppendOrigin::Client, 7, 0, 2, true, 14, 2_000)
            .unwrap_err();
        assert_eq!(err.kafka_name(), "TRANSACTION_COORDINATOR_FENCED");
        assert_eq!(
            s.append_end_txn_marker(AppendOrigin::Replication, 7, 0, 2, true, 14, 2_000),
            Ok(None)
        );
    }

    #[test]
    fn a_plain_write_inside_a_transaction_is_invalid_txn_state() {
        let mut s = ProducerStateManager::new();
        let mut b = batch(7, 0, 0, 0, 1);
        b.is_transactional = true;
        s.update(&b);
        let err = s.validate(&batch(7, 0, 1, 1, 1)).unwrap_err();
        assert_eq!(err.kafka_name(), "INVALID_TXN_STATE");
    }
}
