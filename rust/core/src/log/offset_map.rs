//! The cleaner's key -> last offset map (Kafka's `SkimpyOffsetMap`).
//!
//! A fixed-size open-addressing hash table holding, per key, a 128-bit hash of the key and the
//! offset of its newest record; the keys themselves are never stored, so the memory is
//! bounded by `log.cleaner.dedupe.buffer.size` whatever the key sizes. Each slot is 24 bytes
//! (16 of hash, 8 of offset), as in Kafka:
//!
//! ```text
//! slot   0..8   hash, low 64 bits      (0 with offset 0: the slot is empty)
//!        8..16  hash, high 64 bits
//!       16..24  offset + 1             (0 marks an empty slot)
//! ```
//!
//! Two keys with the same 128-bit hash would be taken for one key; Kafka accepts the same with
//! MD5. The hash here is XXH3-128 with a seed drawn per map, so no fixed pair of keys
//! collides in every map.
//!
//! The map is filled only up to `load_factor` of its slots ([`SkimpyOffsetMap::max_entries`]);
//! the cleaner stops mapping there and cleans only up to the offset the map covered
//! ([`SkimpyOffsetMap::latest_offset`]).

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use twox_hash::XxHash3_128;

/// Bytes of one slot: a 128-bit key hash and an 8-byte offset.
pub const SLOT_BYTES: usize = 24;

/// See the module docs. Not thread safe; one per cleaning.
#[derive(Debug)]
pub struct SkimpyOffsetMap {
    /// `[hash low, hash high, offset + 1]` per slot.
    slots: Vec<[u64; 3]>,
    entries: usize,
    max_entries: usize,
    latest_offset: i64,
    seed: u64,
    /// Probes made by `put` and `get` beyond the first slot, for the statistics.
    collisions: u64,
}

impl SkimpyOffsetMap {
    /// A map using at most `memory` bytes that takes keys until `load_factor` of its slots are
    /// used. `expected_entries` (when known, e.g. the number of offsets the dirty section
    /// spans) caps the allocation: a small log never allocates the whole dedupe buffer.
    pub fn new(memory: usize, load_factor: f64, expected_entries: Option<usize>) -> Self {
        let load_factor = if load_factor.is_finite() {
            load_factor.clamp(0.01, 1.0)
        } else {
            0.9
        };
        let mut slots = (memory / SLOT_BYTES).max(2);
        if let Some(n) = expected_entries {
            // Enough slots for every expected key at the load factor, and one spare so a
            // probe always finds an empty slot.
            let wanted = (n as f64 / load_factor).ceil() as usize + 1;
            slots = slots.min(wanted.max(16));
        }
        let max_entries = ((slots as f64 * load_factor) as usize).clamp(1, slots - 1);
        SkimpyOffsetMap {
            slots: vec![[0u64; 3]; slots],
            entries: 0,
            max_entries,
            latest_offset: -1,
            seed: RandomState::new().hash_one(0x5eed_u64),
            collisions: 0,
        }
    }

    /// Slots in the table.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Keys in the map.
    pub fn len(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Keys the map takes before it counts as full (slots x load factor).
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// Whether `n` more keys might not fit (each could be new).
    pub fn would_overflow(&self, n: usize) -> bool {
        self.entries.saturating_add(n) > self.max_entries
    }

    /// Fraction of the usable entries in use (Kafka's `bufferUtilization`).
    pub fn utilization(&self) -> f64 {
        self.entries as f64 / self.slots.len() as f64
    }

    /// The offset up to which the map has seen every record (-1 when none).
    pub fn latest_offset(&self) -> i64 {
        self.latest_offset
    }

    /// Record that every record up to `offset` has been put.
    pub fn update_latest_offset(&mut self, offset: i64) {
        self.latest_offset = self.latest_offset.max(offset);
    }

    pub fn collisions(&self) -> u64 {
        self.collisions
    }

    fn hash(&self, key: &[u8]) -> (u64, u64) {
        let h = XxHash3_128::oneshot_with_seed(self.seed, key);
        let (lo, hi) = (h as u64, (h >> 64) as u64);
        // (0, 0) is how an empty slot's hash reads; no key may hash to it.
        if lo == 0 && hi == 0 {
            (1, 0)
        } else {
            (lo, hi)
        }
    }

    /// The slot holding `hash`, or the empty slot where it would go.
    fn find(&mut self, lo: u64, hi: u64) -> usize {
        let n = self.slots.len();
        // Lemire's multiply-shift: a uniform slot without a division.
        let mut i = ((hi as u128 * n as u128) >> 64) as usize;
        loop {
            let s = &self.slots[i];
            if s[2] == 0 || (s[0] == lo && s[1] == hi) {
                return i;
            }
            self.collisions += 1;
            i += 1;
            if i == n {
                i = 0;
            }
        }
    }

    /// Map `key` to `offset` (a later put of the same key wins). The caller keeps the map
    /// below [`max_entries`](Self::max_entries) (see [`would_overflow`](Self::would_overflow)),
    /// which always leaves an empty slot to end a probe.
    pub fn put(&mut self, key: &[u8], offset: i64) {
        let (lo, hi) = self.hash(key);
        let i = self.find(lo, hi);
        let capacity = self.slots.len() - 1;
        let s = &mut self.slots[i];
        if s[2] == 0 {
            assert!(
                self.entries < capacity,
                "SkimpyOffsetMap is full: the caller must check would_overflow"
            );
            self.entries += 1;
            s[0] = lo;
            s[1] = hi;
        }
        s[2] = (offset as u64).wrapping_add(1);
    }

    /// The newest offset put for `key`, or -1.
    pub fn get(&mut self, key: &[u8]) -> i64 {
        let (lo, hi) = self.hash(key);
        let i = self.find(lo, hi);
        (self.slots[i][2] as i64).wrapping_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn later_puts_win_and_absent_keys_read_minus_one() {
        let mut m = SkimpyOffsetMap::new(1 << 20, 0.9, None);
        m.put(b"a", 3);
        m.put(b"b", 4);
        m.put(b"a", 10);
        assert_eq!(m.get(b"a"), 10);
        assert_eq!(m.get(b"b"), 4);
        assert_eq!(m.get(b"c"), -1);
        assert_eq!(m.get(b""), -1);
        m.put(b"", 0);
        assert_eq!(m.get(b""), 0);
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn sizes_follow_memory_load_factor_and_expected_entries() {
        let m = SkimpyOffsetMap::new(24 * 1000, 0.9, None);
        assert_eq!((m.slots(), m.max_entries()), (1000, 900));
        let m = SkimpyOffsetMap::new(128 << 20, 0.9, Some(90));
        assert_eq!(m.slots(), 101);
        assert!(m.max_entries() >= 90);
        assert!(!m.would_overflow(90));
        assert!(m.would_overflow(m.max_entries() + 1));
        // Degenerate inputs still leave a usable map that never fills every slot.
        let m = SkimpyOffsetMap::new(0, f64::NAN, Some(0));
        assert!(m.max_entries() >= 1 && m.max_entries() < m.slots());
    }

    proptest! {
        /// The map agrees with a HashMap of the newest offset per key, up to its capacity.
        #[test]
        fn agrees_with_a_hash_map(ops in proptest::collection::vec((0u16..300, 0i64..1_000_000), 0..600)) {
            let mut m = SkimpyOffsetMap::new(24 * 512, 0.75, None);
            let mut model: HashMap<Vec<u8>, i64> = HashMap::new();
            for (k, o) in ops {
                let key = format!("key-{k}").into_bytes();
                if !model.contains_key(&key) && m.would_overflow(1) {
                    continue;
                }
                m.put(&key, o);
                model.insert(key, o);
            }
            prop_assert_eq!(m.len(), model.len());
            for (k, o) in &model {
                prop_assert_eq!(m.get(k), *o);
            }
            prop_assert_eq!(m.get(b"never put"), -1);
        }
    }
}
