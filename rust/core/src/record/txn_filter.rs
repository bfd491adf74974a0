//! Which batches of a run of batches belong to aborted transactions, read in offset order:
//! the read_committed half of Kafka's consumer `CompletedFetch` (and of the cleaner's
//! `CleanedTransactionMetadata`).
//!
//! The reader is given the aborted transactions overlapping what it reads, each as
//! (producer id, first offset): from a fetch response, or from the log's `.txnindex` files.
//! An aborted transaction becomes *open* once the batches reach its first offset; while it
//! is open, every transactional data batch of its producer is aborted; the producer's ABORT
//! marker closes it. Batches of other producers, non-transactional batches, and a producer's
//! later transactions are not aborted. Control batches are never data: the caller drops them
//! (and they still move a consumer's position).
//!
//! A filter is owned by one reader of one run (a consumer's fetched partition, a cleaning):
//! its state carries from batch to batch and must not be shared between runs.

use std::collections::HashSet;

use super::batch::BatchHeader;
use super::control::ControlRecordType;

/// The state of one read_committed reader (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AbortedTxnFilter {
    /// (first offset, producer id) of the aborted transactions not reached yet, the next one
    /// last.
    pending: Vec<(i64, i64)>,
    /// Producers inside an aborted transaction.
    open: HashSet<i64>,
}

impl AbortedTxnFilter {
    /// A filter for a read that overlaps `aborted`: (producer id, first offset) pairs in any
    /// order.
    pub fn new(aborted: impl IntoIterator<Item = (i64, i64)>) -> Self {
        let mut pending: Vec<(i64, i64)> = aborted.into_iter().map(|(p, f)| (f, p)).collect();
        pending.sort_unstable_by(|a, b| b.cmp(a));
        AbortedTxnFilter {
            pending,
            open: HashSet::new(),
        }
    }

    /// Nothing to filter: no aborted transaction is pending or open.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.open.is_empty()
    }

    /// Open the aborted transactions that start at or before `offset` (Kafka's
    /// `consumeAbortedTransactionsUpTo`).
    fn reach(&mut self, offset: i64) {
        while let Some(&(first, pid)) = self.pending.last() {
            if first > offset {
                break;
            }
            self.pending.pop();
            self.open.insert(pid);
        }
    }

    /// The next data batch: whether it belongs to an aborted transaction and must be
    /// skipped (Kafka's `isBatchAborted`).
    pub fn is_aborted(&mut self, h: &BatchHeader) -> bool {
        if h.producer_id < 0 {
            return false;
        }
        self.reach(h.last_offset());
        h.is_transactional() && self.open.contains(&h.producer_id)
    }

    /// The next control batch, of type `control_type` (its first record's; `None` for an
    /// empty or unreadable one): an ABORT marker closes its producer's aborted transaction
    /// (Kafka's `containsAbortMarker`).
    pub fn on_control_batch(&mut self, h: &BatchHeader, control_type: Option<ControlRecordType>) {
        if h.producer_id < 0 {
            return;
        }
        self.reach(h.last_offset());
        if control_type == Some(ControlRecordType::Abort) {
            self.open.remove(&h.producer_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::batch::validate_batch;
    use crate::record::{BatchBuilder, Compression};

    fn header(pid: i64, base: i64, n: i32, transactional: bool) -> BatchHeader {
        let mut b = BatchBuilder::new(Compression::None);
        b.base_offset(base)
            .producer(pid, 0, 0)
            .transactional(transactional);
        for _ in 0..n {
            b.append(1, None, Some(b"v"), &[]);
        }
        validate_batch(&b.build().unwrap()).unwrap()
    }

    #[test]
    fn kafkas_completed_fetch_rules() {
        // p1 aborts [0, 4], p2 commits [1, 5], p1 aborts again [6, 8], p3 not transactional.
        let mut f = AbortedTxnFilter::new([(1, 6), (1, 0)]);
        assert!(f.is_aborted(&header(1, 0, 1, true)));
        assert!(!f.is_aborted(&header(2, 1, 1, true)));
        assert!(!f.is_aborted(&header(3, 2, 1, false)));
        assert!(f.is_aborted(&header(1, 3, 1, true)));
        f.on_control_batch(&header(1, 4, 1, true), Some(ControlRecordType::Abort));
        f.on_control_batch(&header(2, 5, 1, true), Some(ControlRecordType::Commit));
        assert!(f.is_aborted(&header(1, 6, 2, true)));
        f.on_control_batch(&header(1, 8, 1, true), Some(ControlRecordType::Abort));
        assert!(!f.is_aborted(&header(1, 9, 1, true)));
        assert!(f.is_empty());
    }

    #[test]
    fn a_transaction_starting_inside_a_batch_opens_at_that_batch() {
        let mut f = AbortedTxnFilter::new([(7, 10)]);
        assert!(!f.is_aborted(&header(7, 5, 4, true)));
        assert!(f.is_aborted(&header(7, 9, 3, true)));
    }
}
