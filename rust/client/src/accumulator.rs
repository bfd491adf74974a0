//! The producer's record accumulator (Kafka's `RecordAccumulator`): records are appended to
//! per-partition batches that close when full (`batch.size`) or old (`linger.ms`), within a
//! memory budget (`buffer.memory`). Partitions are small integers the caller maps to topic
//! partitions. Time is passed in, so the accumulator is deterministic.

use std::collections::{HashMap, VecDeque};

use rillet_core::error::{Error, Result};
use rillet_core::record::builder::{BatchBuilder, HeaderRef};
use rillet_core::record::Compression;
use rillet_core::record::{NO_SEQUENCE, RECORD_BATCH_OVERHEAD};

/// Settings, Kafka's names in the comments.
#[derive(Debug, Clone, Copy)]
pub struct AccumulatorConfig {
    /// `batch.size`
    pub batch_size: usize,
    /// `linger.ms`
    pub linger_ms: i64,
    /// `buffer.memory`
    pub buffer_memory: usize,
    /// `compression.type`
    pub compression: Compression,
}

/// Where an appended record went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendResult {
    /// The batch holding the record (unique over the accumulator's life).
    pub batch_id: u64,
    /// The record's index (offset delta) in that batch.
    pub index: i32,
    /// The batch is full: the sender can take it now.
    pub batch_full: bool,
    /// A new batch was started for this record.
    pub new_batch: bool,
}

/// A closed batch ready to send.
#[derive(Debug, Clone)]
pub struct DrainedBatch {
    pub partition: u32,
    pub batch_id: u64,
    pub records: Vec<u8>,
    pub record_count: i32,
    /// Bytes this batch held of the memory budget; give them back with `release`.
    pub reserved: usize,
}

/// Who the batches are from when the producer is idempotent or transactional: its producer
/// id and epoch, stamped with a per-partition sequence number into every batch it closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdentity {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub transactional: bool,
}

/// The sequence `increment` after `sequence`, wrapping past `i32::MAX` to 0 as Kafka's
/// `DefaultRecordBatch.incrementSequence` does.
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

/// A batch taken from the accumulator and not yet closed.
#[derive(Debug)]
pub struct TakenBatch {
    pub partition: u32,
    pub batch_id: u64,
    /// The batch's first sequence number, or -1 when the producer has no identity.
    pub base_sequence: i32,
    /// `now_ms` when its first record was appended.
    pub created_ms: i64,
    /// Bytes this batch holds of the memory budget; give them back with `release`.
    pub reserved: usize,
    builder: BatchBuilder,
}

impl TakenBatch {
    pub fn record_count(&self) -> i32 {
        self.builder.record_count()
    }

    /// Close the batch: compress its records and fill in the header and CRC.
    pub fn build(mut self) -> Result<DrainedBatch> {
        let record_count = self.builder.record_count();
        Ok(DrainedBatch {
            partition: self.partition,
            batch_id: self.batch_id,
            records: self.builder.build()?,
            record_count,
            reserved: self.reserved,
        })
    }
}

#[derive(Debug)]
struct OpenBatch {
    id: u64,
    builder: BatchBuilder,
    created_ms: i64,
    reserved: usize,
}

impl OpenBatch {
    fn is_full(&self, batch_size: usize) -> bool {
        self.builder.uncompressed_size() >= batch_size
    }
}

#[derive(Debug)]
pub struct RecordAccumulator {
    config: AccumulatorConfig,
    queues: HashMap<u32, VecDeque<OpenBatch>>,
    next_id: u64,
    used_memory: usize,
    /// Where the next `take` starts among the partitions it is given.
    drain_index: usize,
    /// The idempotent producer's identity, stamped into batches as they are taken.
    producer: Option<ProducerIdentity>,
    /// Per partition, the sequence number of the next batch taken.
    next_sequence: HashMap<u32, i32>,
}

impl RecordAccumulator {
    pub fn new(config: AccumulatorConfig) -> Result<Self> {
        if config.batch_size == 0
            || config.buffer_memory < config.batch_size
            || config.linger_ms < 0
        {
            return Err(Error::InvalidConfig(format!(
                "need batch.size > 0, buffer.memory >= batch.size and linger.ms >= 0, got {config:?}"
            )));
        }
        Ok(RecordAccumulator {
            config,
            queues: HashMap::new(),
            next_id: 0,
            used_memory: 0,
            drain_index: 0,
            producer: None,
            next_sequence: HashMap::new(),
        })
    }

    /// Stamp batches taken from now on with `producer` (None: no identity), every
    /// partition's sequence starting again at 0: a new producer id or epoch starts its
    /// sequences afresh (KIP-360).
    pub fn set_producer(&mut self, producer: Option<ProducerIdentity>) {
        self.producer = producer;
        self.next_sequence.clear();
    }

    pub fn producer(&self) -> Option<ProducerIdentity> {
        self.producer
    }

    /// The first of `count` sequence numbers of `partition`, which are then used: for a
    /// closed batch stamped again after an epoch bump.
    pub fn reserve_sequence(&mut self, partition: u32, count: i32) -> i32 {
        let next = self.next_sequence.entry(partition).or_insert(0);
        let base = *next;
        *next = increment_sequence(base, count);
        base
    }

    pub fn used_memory(&self) -> usize {
        self.used_memory
    }

    /// Records waiting in open or full batches.
    pub fn pending_batches(&self) -> usize {
        self.queues.values().map(VecDeque::len).sum()
    }

    /// Append one record to `partition`'s newest batch, or to a new one if it does not fit.
    /// `Ok(None)` when a new batch would exceed `buffer.memory`: the caller waits for sent
    /// batches to be released and tries again.
    pub fn append(
        &mut self,
        partition: u32,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[HeaderRef],
        now_ms: i64,
    ) -> Result<Option<AppendResult>> {
        let batch_size = self.config.batch_size;
        let queue = self.queues.entry(partition).or_default();
        if let Some(b) = queue.back_mut() {
            let size = b.builder.record_size(timestamp, key, value, headers);
            if b.builder.uncompressed_size() + size <= batch_size.max(b.reserved) {
                let index = b.builder.append(timestamp, key, value, headers);
                return Ok(Some(AppendResult {
                    batch_id: b.id,
                    index,
                    batch_full: b.is_full(batch_size),
                    new_batch: false,
                }));
            }
        }
        let size = RECORD_BATCH_OVERHEAD + BatchBuilder::first_record_size(key, value, headers);
        let reserved = batch_size.max(size);
        if self.used_memory + reserved > self.config.buffer_memory {
            if reserved > self.config.buffer_memory {
                return Err(Error::RecordTooLarge {
                    size,
                    max: self.config.buffer_memory,
                });
            }
            return Ok(None);
        }
        let mut builder = BatchBuilder::with_capacity(self.config.compression, reserved);
        let index = builder.append(timestamp, key, value, headers);
        let id = self.next_id;
        self.next_id += 1;
        self.used_memory += reserved;
        let b = OpenBatch {
            id,
            builder,
            created_ms: now_ms,
            reserved,
        };
        let batch_full = b.is_full(batch_size);
        queue.push_back(b);
        Ok(Some(AppendResult {
            batch_id: id,
            index,
            batch_full,
            new_batch: true,
        }))
    }

    /// Partitions with a batch to send now (full, lingered long enough, or `flush`), and the
    /// milliseconds until the next one lingers out (`None` if nothing is waiting).
    pub fn ready(&self, now_ms: i64, flush: bool) -> (Vec<u32>, Option<i64>) {
        let mut ready = Vec::new();
        let mut next: Option<i64> = None;
        for (&p, q) in &self.queues {
            let Some(first) = q.front() else { continue };
            let waited = now_ms - first.created_ms;
            if flush
                || q.len() > 1
                || first.is_full(self.config.batch_size)
                || waited >= self.config.linger_ms
            {
                ready.push(p);
            } else {
                let wait = self.config.linger_ms - waited;
                next = Some(next.map_or(wait, |n| n.min(wait)));
            }
        }
        ready.sort_unstable();
        (ready, next)
    }

    /// Take batches of `partitions` (as `ready` named them), up to `max_bytes` in all (at
    /// least one batch), without closing them: the caller builds (and compresses) them with
    /// [`TakenBatch::build`], outside whatever lock guards the accumulator, so appends go on
    /// meanwhile.
    ///
    /// The first pass takes the oldest batch of each partition, starting one partition further
    /// along at each call so that none starves (Kafka's drain index). While room is left,
    /// further passes take each partition's next batch if appends to it are over (it is full,
    /// or a newer batch follows it): a busy partition fills a request instead of sending one
    /// batch per request. A partition's batches come out in order.
    pub fn take(&mut self, partitions: &[u32], max_bytes: usize) -> Vec<TakenBatch> {
        self.take_limited(partitions, &[], max_bytes)
    }

    /// [`Self::take`], taking at most `limits[i]` batches of `partitions[i]` (no limit where
    /// `limits` is shorter). An idempotent producer keeps at most five batches of a partition
    /// unacknowledged: the broker remembers a producer's last five batches to spot retries.
    /// With a producer identity set, each batch gets the partition's next sequence numbers.
    pub fn take_limited(
        &mut self,
        partitions: &[u32],
        limits: &[usize],
        max_bytes: usize,
    ) -> Vec<TakenBatch> {
        let mut out = Vec::new();
        let n = partitions.len();
        if n == 0 {
            return out;
        }
        let start = self.drain_index % n;
        self.drain_index = self.drain_index.wrapping_add(1);
        let mut total = 0usize;
        for pass in 0.. {
            let mut took = false;
            for i in 0..n {
                let p = partitions[(start + i) % n];
                if limits.get((start + i) % n).is_some_and(|&l| pass >= l) {
                    continue;
                }
                let Some(q) = self.queues.get_mut(&p) else {
                    continue;
                };
                let Some(front) = q.front() else { continue };
                if pass > 0 && q.len() == 1 && !front.is_full(self.config.batch_size) {
                    continue; // still open for appends
                }
                let size = front.builder.uncompressed_size();
                if !out.is_empty() && total + size > max_bytes {
                    return out;
                }
                let mut b = q.pop_front().expect("front exists");
                total += size;
                took = true;
                if q.is_empty() {
                    self.queues.remove(&p);
                }
                let mut base_sequence = NO_SEQUENCE;
                if let Some(id) = self.producer {
                    base_sequence = self.reserve_sequence(p, b.builder.record_count());
                    b.builder
                        .producer(id.producer_id, id.producer_epoch, base_sequence)
                        .transactional(id.transactional);
                }
                out.push(TakenBatch {
                    partition: p,
                    batch_id: b.id,
                    base_sequence,
                    created_ms: b.created_ms,
                    reserved: b.reserved,
                    builder: b.builder,
                });
            }
            if !took {
                break;
            }
        }
        out
    }

    /// [`Self::take`] and build each batch.
    pub fn drain(&mut self, partitions: &[u32], max_bytes: usize) -> Result<Vec<DrainedBatch>> {
        self.take(partitions, max_bytes)
            .into_iter()
            .map(TakenBatch::build)
            .collect()
    }

    /// Drop `partition`'s newest batch (one that `append` just started, when the caller
    /// cannot track it after all); returns the bytes it reserved, to `release`.
    pub fn discard_last(&mut self, partition: u32) -> usize {
        let Some(q) = self.queues.get_mut(&partition) else {
            return 0;
        };
        let reserved = q.pop_back().map_or(0, |b| b.reserved);
        if q.is_empty() {
            self.queues.remove(&partition);
        }
        reserved
    }

    /// Give back the memory of a sent (or failed) batch.
    pub fn release(&mut self, reserved: usize) {
        self.used_memory = self.used_memory.saturating_sub(reserved);
    }

    /// Drop every open batch (the producer is closing without flushing); returns their ids.
    pub fn abort_all(&mut self) -> Vec<u64> {
        let mut ids: Vec<u64> = self
            .queues
            .values()
            .flat_map(|q| q.iter().map(|b| b.id))
            .collect();
        ids.sort_unstable();
        self.queues.clear();
        self.used_memory = 0;
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rillet_core::record::batch::decode_batches;
    use rillet_core::record::BatchHeader;

    fn acc(batch_size: usize, linger_ms: i64, buffer_memory: usize) -> RecordAccumulator {
        RecordAccumulator::new(AccumulatorConfig {
            batch_size,
            linger_ms,
            buffer_memory,
            compression: Compression::None,
        })
        .unwrap()
    }

    #[test]
    fn batches_fill_linger_and_drain_in_order() {
        let mut a = acc(1000, 5, 1 << 20);
        let v = [7u8; 100];
        let mut ids = Vec::new();
        for i in 0..20 {
            ids.push(
                a.append(i % 2, 1000 + i as i64, None, Some(&v), &[], 0)
                    .unwrap()
                    .unwrap(),
            );
        }
        // ~110 bytes a record: each 1000-byte batch holds 8, so partition 0 has a full batch.
        assert!(ids
            .iter()
            .any(|r| r.new_batch && r.index == 0 && r.batch_id > 1));
        let (ready, _) = a.ready(1, false);
        assert_eq!(ready, vec![0, 1]);
        let (_, next) = acc(1000, 5, 1 << 20).ready(0, false);
        assert_eq!(next, None);
        let drained = a.drain(&ready, 1 << 20).unwrap();
        assert_eq!(drained.len(), 2);
        let b = &decode_batches(&drained[0].records, true, false).unwrap()[0];
        assert_eq!(b.header.record_count, drained[0].record_count);
        assert_eq!(b.header.base_timestamp, 1000);
        // Remaining tails linger until 5 ms.
        let (ready, next) = a.ready(2, false);
        assert!(ready.is_empty() && next == Some(3));
        assert_eq!(a.ready(5, false).0, vec![0, 1]);
        assert_eq!(a.ready(2, true).0, vec![0, 1]);
    }

    #[test]
    fn memory_budget_blocks_then_frees() {
        let mut a = acc(1000, 0, 2000);
        let v = [1u8; 900];
        assert!(a.append(0, 0, None, Some(&v), &[], 0).unwrap().is_some());
        assert!(a.append(1, 0, None, Some(&v), &[], 0).unwrap().is_some());
        assert_eq!(a.append(2, 0, None, Some(&v), &[], 0).unwrap(), None);
        let d = a.drain(&[0], 1 << 20).unwrap();
        a.release(d[0].reserved);
        assert!(a.append(2, 0, None, Some(&v), &[], 0).unwrap().is_some());
        // A record larger than the whole budget is an error, not a wait.
        assert!(a.append(3, 0, None, Some(&[0u8; 5000]), &[], 0).is_err());
    }

    #[test]
    fn take_fills_a_request_fairly_and_in_order() {
        let mut a = acc(1000, 1000, 1 << 20);
        // ~107 bytes a record, 8 to a batch: partition 0 gets three full batches and an open
        // one (ids 0-3), partition 1 one open batch (id 4).
        for _ in 0..31 {
            a.append(0, 0, None, Some(&[0u8; 100]), &[], 0).unwrap();
        }
        a.append(1, 0, None, Some(&[1u8; 100]), &[], 0).unwrap();
        let (ready, _) = a.ready(0, false);
        assert_eq!(ready, vec![0]); // partition 1 lingers
        let taken = a.take(&ready, 1 << 20);
        // Every closed batch of partition 0 in one go, oldest first; open ones stay.
        let ids: Vec<u64> = taken.iter().map(|t| t.batch_id).collect();
        assert_eq!(ids, vec![0, 1, 2]);
        assert_eq!(a.pending_batches(), 2);
        // max_bytes stops a pass; the first batch is always taken.
        let (ready, _) = a.ready(0, true);
        assert_eq!(a.take(&ready, 10).len(), 1);
        // Each take starts one partition further along.
        for p in 0..2 {
            a.append(p, 0, None, Some(&[0u8; 950]), &[], 0).unwrap();
        }
        let first = |a: &mut RecordAccumulator| a.take(&[0, 1], 1 << 20)[0].partition;
        let (x, y) = (first(&mut a), {
            for p in 0..2 {
                a.append(p, 0, None, Some(&[0u8; 950]), &[], 0).unwrap();
            }
            first(&mut a)
        });
        assert_ne!(x, y);
    }

    #[test]
    fn drain_respects_max_bytes_but_takes_one() {
        let mut a = acc(1000, 0, 1 << 20);
        for p in 0..3 {
            a.append(p, 0, None, Some(&[0u8; 800]), &[], 0).unwrap();
        }
        assert_eq!(a.drain(&[0, 1, 2], 10).unwrap().len(), 1);
        assert_eq!(a.drain(&[1, 2], 1 << 20).unwrap().len(), 2);
        assert_eq!(a.pending_batches(), 0);
    }

    #[test]
    fn an_identity_stamps_sequences_per_partition_and_limits_hold() {
        let mut a = acc(100, 0, 10_000);
        for i in 0..6 {
            let p = i % 2;
            for _ in 0..3 {
                a.append(p, 1, None, Some(&[0u8; 40]), &[], 0)
                    .unwrap()
                    .unwrap();
            }
        }
        a.set_producer(Some(ProducerIdentity {
            producer_id: 9,
            producer_epoch: 2,
            transactional: false,
        }));
        // At most one batch of partition 0 and two of partition 1.
        let taken = a.take_limited(&[0, 1], &[1, 2], usize::MAX);
        let seqs: Vec<(u32, i32, i32)> = taken
            .iter()
            .map(|t| (t.partition, t.base_sequence, t.record_count()))
            .collect();
        let mut firsts: HashMap<u32, Vec<i32>> = HashMap::new();
        for (p, seq, _) in &seqs {
            firsts.entry(*p).or_default().push(*seq);
        }
        assert_eq!(firsts[&0].len(), 1);
        assert_eq!(firsts[&1].len(), 2);
        assert_eq!(firsts[&0][0], 0);
        assert_eq!(firsts[&1][0], 0);
        let first_of_p1 = seqs.iter().find(|s| s.0 == 1).unwrap();
        assert_eq!(
            firsts[&1][1], first_of_p1.2,
            "the second batch follows the first"
        );
        for t in taken {
            let b = t.build().unwrap();
            let h = BatchHeader::parse(&b.records).unwrap();
            assert_eq!((h.producer_id, h.producer_epoch), (9, 2));
        }
        // A new epoch starts every partition's sequences again.
        a.set_producer(Some(ProducerIdentity {
            producer_id: 9,
            producer_epoch: 3,
            transactional: false,
        }));
        assert_eq!(a.reserve_sequence(1, 5), 0);
        assert_eq!(a.reserve_sequence(1, 1), 5);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
    }
}
