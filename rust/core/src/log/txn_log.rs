//! What a read_committed reader needs of the log (Kafka's `UnifiedLog.firstUnstableOffset`,
//! `lastStableOffset`, `collectAbortedTransactions` and the `TXN_COMMITTED` read):
//!
//! - the *first unstable offset*: the first offset of the oldest transaction that is open,
//!   or whose COMMIT/ABORT marker is not yet known to be below the high watermark (from the
//!   producer state, never below the log start offset);
//! - the *last stable offset* (LSO): the smaller of it and the high watermark. A
//!   read_committed fetch reads below it, and ListOffsets' latest is it;
//! - the aborted transactions overlapping a range, from the segments' `.txnindex` files
//!   (see `txn_index.rs`), which a read_committed fetch returns with its batches so the
//!   consumer can drop their records.
//!
//! The high watermark belongs to the partition (the broker), so the log is told it:
//! [`Log::update_high_watermark`] forgets the completed transactions below it, and
//! [`Log::last_stable_offset`] takes it as an argument.

use super::log::{FetchDataInfo, Log};
use super::txn_index::AbortedTxn;
use crate::error::Result;

impl Log {
    /// The first offset of the oldest transaction that is open or whose marker may not be
    /// replicated yet (Kafka's `firstUnstableOffset`); `None` when there is none. Never below
    /// the log start offset.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.producer_state
            .first_unstable_offset()
            .map(|o| o.max(self.log_start_offset))
    }

    /// The last stable offset given the partition's `high_watermark`: below it no
    /// transaction is open and every marker is replicated (Kafka's `lastStableOffset`).
    /// Pure; transactions whose marker is below `high_watermark` do not count even if
    /// [`Self::update_high_watermark`] was not called.
    pub fn last_stable_offset(&self, high_watermark: i64) -> i64 {
        let hw = high_watermark.min(self.next_offset);
        self.producer_state
            .first_unstable_offset_at(hw)
            .map_or(hw, |o| o.max(self.log_start_offset).min(hw))
    }

    /// The partition's high watermark moved to `high_watermark` (Kafka's
    /// `updateHighWatermarkMetadata` → `onHighWatermarkUpdated`): the completed transactions
    /// whose marker is below it no longer hold the last stable offset back.
    pub fn update_high_watermark(&mut self, high_watermark: i64) {
        self.producer_state
            .on_high_watermark_updated(high_watermark.min(self.next_offset));
    }

    /// The aborted transactions overlapping `[start_offset, upper_bound_offset)`: marker at or
    /// after `start_offset`, first offset before `upper_bound_offset` (Kafka's
    /// `collectAbortedTransactions`). The `.txnindex` of the segment holding `start_offset`
    /// is searched, then the next ones until an entry's last stable offset reaches
    /// `upper_bound_offset`. In marker order.
    pub fn collect_aborted_transactions(
        &self,
        start_offset: i64,
        upper_bound_offset: i64,
    ) -> Vec<AbortedTxn> {
        let floor = self
            .segments
            .range(..=start_offset)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        let mut out = Vec::new();
        for seg in self.segments.range(floor..).map(|(_, s)| s) {
            let r = seg
                .txn_index()
                .collect_aborted_txns(start_offset, upper_bound_offset);
            out.extend(r.aborted_transactions);
            if r.is_complete {
                break;
            }
        }
        out
    }

    /// A read_committed read (Kafka's `read` with `FetchIsolation.TXN_COMMITTED`):
    /// [`Self::read`] with `max_offset` (the last stable offset, which the caller computes
    /// with [`Self::last_stable_offset`]), and the aborted transactions overlapping the
    /// batches returned, from `start_offset` to the offset after the last of them.
    pub fn read_committed(
        &self,
        start_offset: i64,
        max_bytes: u64,
        max_offset: Option<i64>,
        min_one_batch: bool,
    ) -> Result<FetchDataInfo> {
        let (mut info, upper) =
            self.read_with_upper_bound(start_offset, max_bytes, max_offset, min_one_batch, true)?;
        info.aborted_transactions = Some(if info.regions.is_empty() {
            Vec::new()
        } else {
            self.collect_aborted_transactions(start_offset, upper)
        });
        Ok(info)
    }
}
